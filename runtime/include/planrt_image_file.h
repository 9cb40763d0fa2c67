/* planc's image files (planrt.h, "Image data"): the 32-byte little-endian header, read in
 * one place by the runtime's reader (lib/images.cpp) and by planc, which takes a plan's
 * image size from it at build time. */
#ifndef PLANRT_IMAGE_FILE_H
#define PLANRT_IMAGE_FILE_H

#include <stdint.h>
#include <string.h>

#define PLANRT_IMAGE_MAGIC "PLANCIMG" /* 8 bytes, no NUL in the file */
#define PLANRT_IMAGE_VERSION 1u
#define PLANRT_IMAGE_HEADER_BYTES 32u

typedef struct {
  uint32_t version, channels, height, width;
  uint64_t count;
} planrt_image_header;

/* The header in the first PLANRT_IMAGE_HEADER_BYTES bytes of b; 0 when they do not start
 * with the magic (then h is untouched), 1 otherwise (the fields still to be checked). */
static inline int planrt_image_header_read(const unsigned char *b, planrt_image_header *h) {
  if (memcmp(b, PLANRT_IMAGE_MAGIC, 8) != 0)
    return 0;
  memcpy(&h->version, b + 8, 4);
  memcpy(&h->channels, b + 12, 4);
  memcpy(&h->height, b + 16, 4);
  memcpy(&h->width, b + 20, 4);
  memcpy(&h->count, b + 24, 8);
  return 1;
}

#endif /* PLANRT_IMAGE_FILE_H */

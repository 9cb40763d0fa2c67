// Image data: CIFAR-10 binary batches and planc's headered image files, memory-mapped,
// validated at open, sampled deterministically from (seed, global sample index).
#include "files.h"
#include "planrt_image_file.h"
#include "random.h"
#include "status.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <glob.h>
#include <memory>
#include <string>
#include <sys/mman.h>
#include <vector>

using planrt::fail;
using planrt::below;
using planrt::mix;

namespace {

constexpr uint64_t kHeaderBytes = PLANRT_IMAGE_HEADER_BYTES;
constexpr uint64_t kCifarSide = 32, kCifarChannels = 3;
constexpr uint64_t kCifarRecord = 1 + kCifarChannels * kCifarSide * kCifarSide; // 3073

struct ImageFile {
  std::string path;
  void *map = nullptr;
  size_t mapSize = 0;
  uint64_t count = 0;
  uint32_t channels = 0, height = 0, width = 0;
  const unsigned char *pixels = nullptr; ///< image 0's first pixel
  uint64_t stride = 0;                   ///< bytes from one image's pixels to the next's
  const unsigned char *labels = nullptr; ///< image 0's label
  uint64_t labelStride = 0;              ///< bytes from one label to the next
  bool wideLabels = false;               ///< uint16 labels (planc), else one byte (CIFAR-10)

  uint32_t label(uint64_t i) const {
    const unsigned char *p = labels + i * labelStride;
    if (!wideLabels)
      return *p;
    uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  const unsigned char *image(uint64_t i) const { return pixels + i * stride; }
};

} // namespace

struct planrt_images {
  std::vector<ImageFile> files;
  planrt_images_format format = PLANRT_IMAGES_PLANC;
  int64_t classes = 0;
  uint64_t total = 0;

  ~planrt_images() {
    for (ImageFile &f : files)
      if (f.map)
        munmap(f.map, f.mapSize);
  }

  uint64_t pixelsPerImage() const {
    const ImageFile &f = files.front();
    return uint64_t(f.channels) * f.height * f.width;
  }

  /// Maps `path`, checks its layout and labels; keeps it only if it is valid.
  planrt_status openFile(const std::string &path) {
    void *map = nullptr;
    size_t size = 0;
    if (planrt_status s = planrt::mapFile(path, "image", map, size))
      return s;
    ImageFile f;
    f.path = path;
    f.map = map;
    f.mapSize = size;
    // From here on `f` owns the mapping until it joins `files`.
    auto drop = [&](planrt_status s) {
      munmap(map, size);
      return s;
    };
    const auto *bytes = static_cast<const unsigned char *>(map);
    if (format == PLANRT_IMAGES_CIFAR10) {
      if (size % kCifarRecord != 0)
        return drop(fail(PLANRT_ERR_FORMAT,
                         "%s: %zu bytes is not a whole number of CIFAR-10 records of %llu bytes (1 label + 3072 "
                         "pixels): truncated, or not a CIFAR-10 binary batch",
                         path.c_str(), size, (unsigned long long)kCifarRecord));
      f.count = size / kCifarRecord;
      f.channels = kCifarChannels;
      f.height = f.width = kCifarSide;
      f.labels = bytes;
      f.labelStride = kCifarRecord;
      f.pixels = bytes + 1;
      f.stride = kCifarRecord;
    } else {
      if (size < kHeaderBytes)
        return drop(fail(PLANRT_ERR_FORMAT, "%s: truncated planc image header (%zu bytes of %llu)", path.c_str(),
                         size, (unsigned long long)kHeaderBytes));
      planrt_image_header h;
      if (!planrt_image_header_read(bytes, &h))
        return drop(fail(PLANRT_ERR_FORMAT, "%s: not a planc image file (the magic is not \"PLANCIMG\")",
                         path.c_str()));
      if (h.version != PLANRT_IMAGE_VERSION)
        return drop(fail(PLANRT_ERR_FORMAT, "%s: planc image file version %u; planc reads version %u", path.c_str(),
                         h.version, PLANRT_IMAGE_VERSION));
      f.channels = h.channels, f.height = h.height, f.width = h.width, f.count = h.count;
      if (f.channels == 0 || f.height == 0 || f.width == 0 || f.count == 0)
        return drop(fail(PLANRT_ERR_FORMAT,
                         "%s: the header gives %llu images of %u x %u x %u (channels x height x width); each must be "
                         "at least 1",
                         path.c_str(), (unsigned long long)f.count, f.channels, f.height, f.width));
      unsigned __int128 perImage = (unsigned __int128)f.channels * f.height * f.width;
      unsigned __int128 expect = kHeaderBytes + (unsigned __int128)f.count * (perImage + 2);
      if (expect != size) {
        const char *what = expect > size ? "truncated" : "over-long";
        if (expect > ~uint64_t(0))
          return drop(fail(PLANRT_ERR_FORMAT,
                           "%s: %s: the header promises %llu images of %u x %u x %u, more than any file holds, but "
                           "the file has %zu bytes",
                           path.c_str(), what, (unsigned long long)f.count, f.channels, f.height, f.width, size));
        return drop(fail(PLANRT_ERR_FORMAT,
                         "%s: %s: the header promises %llu images of %u x %u x %u (%llu bytes) but the file has %zu "
                         "bytes",
                         path.c_str(), what, (unsigned long long)f.count, f.channels, f.height, f.width,
                         (unsigned long long)expect, size));
      }
      f.pixels = bytes + kHeaderBytes;
      f.stride = uint64_t(perImage);
      f.labels = bytes + kHeaderBytes + f.count * f.stride;
      f.labelStride = 2;
      f.wideLabels = true;
    }
    if (!files.empty()) {
      const ImageFile &g = files.front();
      if (g.channels != f.channels || g.height != f.height || g.width != f.width)
        return drop(fail(PLANRT_ERR_MISMATCH, "%s: images of %u x %u x %u, but %s has images of %u x %u x %u",
                         path.c_str(), f.channels, f.height, f.width, g.path.c_str(), g.channels, g.height, g.width));
    }
    for (uint64_t i = 0; classes > 0 && i < f.count; ++i) {
      uint32_t l = f.label(i);
      if (l >= uint64_t(classes))
        return drop(fail(PLANRT_ERR_FORMAT, "%s: image %llu has label %u, outside the %lld classes", path.c_str(),
                         (unsigned long long)i, l, (long long)classes));
    }
    total += f.count;
    files.push_back(f);
    return PLANRT_OK;
  }

  /// The file holding global image i, and i's index within it.
  const ImageFile &locate(uint64_t &i) const {
    for (const ImageFile &f : files) {
      if (i < f.count)
        return f;
      i -= f.count;
    }
    return files.back(); // unreachable: callers check i < total
  }

  /// Checks t against the images' shape.
  planrt_status check(const planrt_image_transform *t, const char *caller) const {
    if (!t)
      return PLANRT_OK;
    if (t->crop_pad < 0)
      return fail(PLANRT_ERR_ARG, "%s: negative crop padding %d", caller, t->crop_pad);
    if (t->normalize) {
      uint32_t c = files.front().channels;
      if (c > 4)
        return fail(PLANRT_ERR_ARG, "%s: normalize takes at most 4 channels, but %s has %u", caller,
                    files.front().path.c_str(), c);
      for (uint32_t k = 0; k < c; ++k)
        if (!(t->std[k] != 0.0f))
          return fail(PLANRT_ERR_ARG, "%s: normalize's std for channel %u is %g", caller, k, double(t->std[k]));
    }
    return PLANRT_OK;
  }

  /// Writes image `i` of file f into out (CHW floats): cropped at (dy, dx) of the image
  /// padded by `pad` zero bytes, flipped if asked, then scaled.
  void render(const ImageFile &f, uint64_t i, const planrt_image_transform *t, int64_t pad, int64_t dy, int64_t dx,
              bool flip, float *out, int32_t *label) const {
    const unsigned char *src = f.image(i);
    const int64_t C = f.channels, H = f.height, W = f.width;
    for (int64_t c = 0; c < C; ++c) {
      const bool norm = t && t->normalize;
      const float mean = norm ? t->mean[c] : 0.0f, sd = norm ? t->std[c] : 1.0f;
      for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x) {
          int64_t sx = flip ? W - 1 - x : x;
          int64_t py = y + dy - pad, px = sx + dx - pad;
          unsigned byte = (py >= 0 && py < H && px >= 0 && px < W) ? src[(c * H + py) * W + px] : 0;
          float v = float(byte) / 255.0f;
          if (norm)
            v = (v - mean) / sd;
          out[(c * H + y) * W + x] = v;
        }
    }
    if (label)
      *label = int32_t(f.label(i));
  }
};

extern "C" {

planrt_status planrt_images_open(const char *const *patterns, size_t count, planrt_images_format format,
                                 int64_t classes, planrt_images **out) {
  if (!out || (count && !patterns))
    return fail(PLANRT_ERR_ARG, "planrt_images_open: null argument");
  if (format != PLANRT_IMAGES_PLANC && format != PLANRT_IMAGES_CIFAR10)
    return fail(PLANRT_ERR_ARG, "planrt_images_open: unknown format %d", int(format));
  auto images = std::make_unique<planrt_images>();
  images->format = format;
  images->classes = classes;
  for (size_t i = 0; i < count; ++i) {
    if (!patterns[i])
      return fail(PLANRT_ERR_ARG, "planrt_images_open: null pattern");
    std::vector<std::string> paths;
    if (planrt_status s = planrt::expandPattern(patterns[i], "image", paths))
      return s;
    for (const std::string &p : paths)
      if (planrt_status s = images->openFile(p))
        return s;
  }
  if (images->files.empty())
    return fail(PLANRT_ERR_ARG, "planrt_images_open: no image files given");
  *out = images.release();
  return PLANRT_OK;
}

void planrt_images_shape(const planrt_images *images, int64_t *channels, int64_t *height, int64_t *width) {
  const ImageFile *f = images && !images->files.empty() ? &images->files.front() : nullptr;
  if (channels)
    *channels = f ? f->channels : 0;
  if (height)
    *height = f ? f->height : 0;
  if (width)
    *width = f ? f->width : 0;
}

uint64_t planrt_images_count(const planrt_images *images) { return images ? images->total : 0; }

planrt_status planrt_images_sample(const planrt_images *images, uint64_t seed, uint64_t index,
                                   const planrt_image_transform *t, float *out, int32_t *label) {
  if (!images || !out || images->files.empty())
    return fail(PLANRT_ERR_ARG, "planrt_images_sample: bad argument");
  if (planrt_status s = images->check(t, "planrt_images_sample"))
    return s;
  // Counter k of (seed, index): k = 0 picks the image, 1 and 2 the crop's row and
  // column offsets, 3 the flip; each a function of (seed, index) alone.
  uint64_t base = mix(seed ^ mix(index));
  auto draw = [&](uint64_t k) { return k == 0 ? base : mix(base + k); };
  uint64_t i = below(draw(0), images->total);
  int64_t pad = t ? t->crop_pad : 0;
  int64_t dy = pad, dx = pad; // no shift without a crop
  if (pad > 0) {
    dy = int64_t(below(draw(1), uint64_t(2 * pad + 1)));
    dx = int64_t(below(draw(2), uint64_t(2 * pad + 1)));
  }
  bool flip = t && t->flip && (draw(3) >> 63) != 0;
  const ImageFile &f = images->locate(i);
  images->render(f, i, t, pad, dy, dx, flip, out, label);
  return PLANRT_OK;
}

planrt_status planrt_images_get(const planrt_images *images, uint64_t i, const planrt_image_transform *t, float *out,
                                int32_t *label) {
  if (!images || !out || images->files.empty())
    return fail(PLANRT_ERR_ARG, "planrt_images_get: bad argument");
  if (i >= images->total)
    return fail(PLANRT_ERR_ARG, "image %llu is past the end of the data (%llu images)", (unsigned long long)i,
                (unsigned long long)images->total);
  if (t && t->normalize)
    if (planrt_status s = images->check(t, "planrt_images_get"))
      return s;
  const ImageFile &f = images->locate(i);
  images->render(f, i, t, 0, 0, 0, false, out, label);
  return PLANRT_OK;
}

void planrt_images_close(planrt_images *images) { delete images; }

} // extern "C"

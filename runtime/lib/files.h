// Internal: the data readers' file access (token files, image files): glob patterns
// expanded in sorted order, and whole files mapped read-only, each failure recorded
// with the file's name.
#ifndef PLANRT_LIB_FILES_H
#define PLANRT_LIB_FILES_H

#include "planrt.h"

#include <cstddef>
#include <string>
#include <vector>

namespace planrt {
/// Appends the files `pattern` matches, sorted; none is an error: "PATTERN: no such
/// WHAT file".
planrt_status expandPattern(const char *pattern, const char *what, std::vector<std::string> &paths);
/// Maps the regular, non-empty file `path` read-only (munmap(map, size) releases it).
planrt_status mapFile(const std::string &path, const char *what, void *&map, size_t &size);
} // namespace planrt

#endif // PLANRT_LIB_FILES_H

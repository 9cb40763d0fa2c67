// The data readers' file access (files.h).
#include "files.h"
#include "status.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <glob.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace planrt {

planrt_status expandPattern(const char *pattern, const char *what, std::vector<std::string> &paths) {
  glob_t g;
  int rc = glob(pattern, GLOB_ERR, nullptr, &g);
  if (rc == GLOB_NOMATCH) {
    globfree(&g);
    return fail(PLANRT_ERR_IO, "%s: no such %s file", pattern, what);
  }
  if (rc != 0) {
    globfree(&g);
    return fail(PLANRT_ERR_IO, "%s: cannot expand: %s", pattern, std::strerror(errno));
  }
  std::vector<std::string> found(g.gl_pathv, g.gl_pathv + g.gl_pathc);
  globfree(&g);
  std::sort(found.begin(), found.end());
  paths.insert(paths.end(), found.begin(), found.end());
  return PLANRT_OK;
}

planrt_status mapFile(const std::string &path, const char *what, void *&map, size_t &size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return fail(PLANRT_ERR_IO, "%s: cannot open: %s", path.c_str(), std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return fail(PLANRT_ERR_IO, "%s: not a regular file", path.c_str());
  }
  size = size_t(st.st_size);
  if (size == 0) {
    ::close(fd);
    return fail(PLANRT_ERR_FORMAT, "%s: empty %s file", path.c_str(), what);
  }
  map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED)
    return fail(PLANRT_ERR_IO, "%s: cannot map: %s", path.c_str(), std::strerror(errno));
  return PLANRT_OK;
}

} // namespace planrt

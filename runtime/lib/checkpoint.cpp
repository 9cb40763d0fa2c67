// Checkpoint directories: one safetensors file per step (one process) or one
// sharded directory per step (many ranks, sharded.cpp), written atomically, the
// newest `keep` kept; one listing of both.
#include "sharded.h"
#include "status.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <string>
#include <sys/stat.h>
#include <tuple>
#include <vector>

using planrt::fail;

namespace planrt {

std::vector<std::tuple<uint64_t, std::string, bool>> listCheckpoints(const std::string &dir) {
  std::vector<std::tuple<uint64_t, std::string, bool>> out;
  DIR *d = opendir(dir.c_str());
  if (!d)
    return out;
  while (struct dirent *e = readdir(d)) {
    unsigned long long step;
    char tail[32] = "";
    int n = std::sscanf(e->d_name, "step-%llu%31s", &step, tail);
    std::string path = dir + "/" + e->d_name;
    if (n == 2 && std::strcmp(tail, ".safetensors") == 0) {
      out.push_back({step, path, false});
    } else if (n == 1) {
      struct stat st;
      if (::stat((path + "/index.json").c_str(), &st) == 0)
        out.push_back({step, path, true});
    }
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace planrt

namespace {

/// The single-file checkpoints in dir, by ascending step.
std::vector<std::pair<uint64_t, std::string>> checkpoints(const char *dir) {
  std::vector<std::pair<uint64_t, std::string>> out;
  for (auto &[step, path, sharded] : planrt::listCheckpoints(dir))
    if (!sharded)
      out.push_back({step, path});
  return out;
}

std::string pathOf(const char *dir, uint64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "step-%08llu.safetensors", (unsigned long long)step);
  return std::string(dir) + "/" + name;
}

} // namespace

extern "C" {

planrt_status planrt_ckpt_save(const char *dir, uint64_t step, int keep, const planrt_tensor *tensors, size_t count,
                               const char *const *metadata, size_t metadataPairs) {
  if (!dir || keep < 0)
    return fail(PLANRT_ERR_ARG, "planrt_ckpt_save: bad argument");
  // Create the directory and its parents.
  std::string path(dir);
  for (size_t i = 1; i <= path.size(); ++i)
    if (i == path.size() || path[i] == '/') {
      std::string prefix = path.substr(0, i);
      if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
        return fail(PLANRT_ERR_IO, "%s: cannot create the checkpoint directory: %s", prefix.c_str(),
                    std::strerror(errno));
    }
  std::string written = pathOf(dir, step);
  if (planrt_status s = planrt_st_save(written.c_str(), tensors, count, metadata, metadataPairs))
    return s;
  // Only after the new checkpoint is durable are older ones removed; the one just
  // written always stays (even if a restarted run left newer steps behind).
  if (keep > 0) {
    std::vector<std::pair<uint64_t, std::string>> others;
    for (auto &c : checkpoints(dir))
      if (c.second != written)
        others.push_back(c);
    while (others.size() + 1 > size_t(keep)) {
      std::remove(others.front().second.c_str());
      others.erase(others.begin());
    }
  }
  return PLANRT_OK;
}

planrt_status planrt_ckpt_latest(const char *dir, char *buf, size_t size, uint64_t *step) {
  if (!dir || !buf || !size)
    return fail(PLANRT_ERR_ARG, "planrt_ckpt_latest: bad argument");
  std::vector<std::pair<uint64_t, std::string>> all = checkpoints(dir);
  if (all.empty())
    return fail(PLANRT_ERR_IO, "%s: no checkpoint to resume from", dir);
  const std::string &p = all.back().second;
  if (p.size() + 1 > size)
    return fail(PLANRT_ERR_ARG, "planrt_ckpt_latest: buffer too small");
  std::memcpy(buf, p.c_str(), p.size() + 1);
  if (step)
    *step = all.back().first;
  return PLANRT_OK;
}

} // extern "C"

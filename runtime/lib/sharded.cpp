// Sharded checkpoints: see sharded.h.
#include "sharded.h"

#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <memory>
#include <sys/stat.h>
#include <unistd.h>

using json = nlohmann::json;

namespace planrt {

namespace {

const char *kGroups[2] = {"0", "1"};
const char *kKinds[3] = {"params", "exp_avg", "exp_avg_sq"};

std::string stepName(uint64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08llu", (unsigned long long)step);
  return name;
}

std::string rankFile(int64_t rank) {
  char name[48];
  std::snprintf(name, sizeof name, "rank-%05lld.safetensors", (long long)rank);
  return name;
}

void removeTree(const std::string &path) {
  if (DIR *d = opendir(path.c_str())) {
    while (struct dirent *e = readdir(d))
      if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, ".."))
        std::remove((path + "/" + e->d_name).c_str());
    closedir(d);
  }
  ::rmdir(path.c_str());
  std::remove(path.c_str());
}

planrt_status fsyncPath(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return fail(PLANRT_ERR_IO, "%s: cannot open to sync: %s", path.c_str(), std::strerror(errno));
  ::fsync(fd);
  ::close(fd);
  return PLANRT_OK;
}

} // namespace

namespace {
/// The digest of `ctx` as 64 hex digits.
std::string finalHex(EVP_MD_CTX *ctx) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_DigestFinal_ex(ctx, md, &len);
  static const char digits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned i = 0; i < len; ++i) {
    hex.push_back(digits[md[i] >> 4]);
    hex.push_back(digits[md[i] & 15]);
  }
  return hex;
}
} // namespace

std::string sha256Text(const std::string &text) {
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX *)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  EVP_DigestUpdate(ctx.get(), text.data(), text.size());
  return finalHex(ctx.get());
}

planrt_status sha256File(const std::string &path, std::string &hex) {
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return fail(PLANRT_ERR_IO, "%s: cannot open: %s", path.c_str(), std::strerror(errno));
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX *)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  std::vector<unsigned char> buf(1 << 20);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0)
    EVP_DigestUpdate(ctx.get(), buf.data(), n);
  bool bad = std::ferror(f);
  std::fclose(f);
  if (bad)
    return fail(PLANRT_ERR_IO, "%s: read error", path.c_str());
  hex = finalHex(ctx.get());
  return PLANRT_OK;
}

planrt_status shardedSave(planrt_mesh *mesh, const std::string &dir, uint64_t step, int keep, const MeshPlace &place,
                          const StatePiece &piece, const std::vector<FlatParam> &layout,
                          const std::vector<std::string> &metadata, const std::vector<ModelBuffer> &buffers) {
  std::string final = dir + "/" + stepName(step), partial = final + ".partial";
  int rank = planrt_mesh_rank(mesh);
  planrt_status status = PLANRT_OK;
  if (rank == 0) {
    removeTree(partial);
    if (::mkdir(partial.c_str(), 0755) != 0)
      status = fail(PLANRT_ERR_IO, "%s: cannot create: %s", partial.c_str(), std::strerror(errno));
  }
  // Every rank learns whether the directory exists (and whether any rank failed) at
  // each barrier: a failure anywhere stops every rank.
  auto agree = [&](planrt_status mine) -> planrt_status {
    float bad = mine ? 1.0f : 0.0f;
    planrt_status s = planrt_mesh_agree(mesh, &bad);
    if (s)
      return s;
    if (bad > 0 && !mine)
      return fail(PLANRT_ERR_IO, "another rank failed to write checkpoint %s", final.c_str());
    return mine;
  };
  if ((status = agree(status)))
    return status;

  json table = json::array();
  for (const FlatParam &p : layout) {
    json extra = json::object();
    if (p.splitDim >= 0) // this rank's piece of a tensor-parallel parameter
      extra = {{"shape", p.shape}, {"dim", p.splitDim}, {"parts", p.parts}, {"blocks", p.blocks}};
    if (p.replica) // another pipeline stage owns it
      extra["replica"] = true;
    if (extra.empty())
      table.push_back({p.name, p.offset, p.count});
    else
      table.push_back({p.name, p.offset, p.count, extra});
  }
  std::vector<std::string> meta = metadata;
  meta.insert(meta.end(), {"layout", table.dump(), "data_rank", std::to_string(place.dataRank), "data_parallel",
                           std::to_string(place.dataSize), "tensor_rank", std::to_string(place.tensorRank),
                           "tensor_parallel", std::to_string(place.tensorSize), "pipeline_rank",
                           std::to_string(place.stage), "pipeline_parallel", std::to_string(place.stages)});
  for (int g = 0; g < 2; ++g)
    meta.insert(meta.end(), {std::string("begin.") + kGroups[g], std::to_string(piece.begin[g]),
                             std::string("count.") + kGroups[g], std::to_string(piece.count[g])});
  std::vector<std::string> names;
  for (const char *k : kKinds)
    for (const char *g : kGroups)
      names.push_back(std::string(k) + "." + g);
  std::vector<planrt_tensor> tensors;
  int64_t shapes[2] = {piece.count[0], piece.count[1]};
  const float *const *bufs[3] = {piece.params, piece.expAvg, piece.expAvgSq};
  for (int k = 0; k < 3; ++k)
    for (int g = 0; g < 2; ++g)
      tensors.push_back({names[size_t(2 * k + g)].c_str(), PLANRT_F32, 1, &shapes[g], bufs[k][g]});
  for (const ModelBuffer &b : buffers)
    tensors.push_back(b.tensor());
  std::vector<const char *> mp;
  for (const std::string &s : meta)
    mp.push_back(s.c_str());
  status = planrt_st_save((partial + "/" + rankFile(place.file())).c_str(), tensors.data(), tensors.size(), mp.data(),
                          mp.size() / 2);
  if ((status = agree(status)))
    return status;

  if (rank == 0) {
    json index = {{"format", "planc-sharded-1"},       {"step", step},
                  {"data_parallel", place.dataSize},   {"tensor_parallel", place.tensorSize},
                  {"pipeline_parallel", place.stages}, {"files", json::object()}};
    for (int64_t r = 0; r < place.files() && !status; ++r) {
      std::string hex;
      status = sha256File(partial + "/" + rankFile(r), hex);
      index["files"][rankFile(r)] = hex;
    }
    if (!status) {
      std::string tmp = partial + "/index.json.tmp", path = partial + "/index.json";
      std::ofstream out(tmp);
      out << index.dump(1) << "\n";
      out.close();
      if (!out || (status = fsyncPath(tmp)) || std::rename(tmp.c_str(), path.c_str()) != 0)
        status = status ? status : fail(PLANRT_ERR_IO, "%s: cannot write: %s", path.c_str(), std::strerror(errno));
    }
    if (!status) {
      // A stale directory of the same step from an earlier run: renamed aside first, so
      // that a crash while deleting it never leaves a "complete" checkpoint missing files.
      std::string stale = final + ".stale";
      removeTree(stale);
      if (std::rename(final.c_str(), stale.c_str()) == 0)
        removeTree(stale);
      if (std::rename(partial.c_str(), final.c_str()) != 0)
        status = fail(PLANRT_ERR_IO, "%s: cannot commit: %s", final.c_str(), std::strerror(errno));
      else
        status = fsyncPath(dir);
    }
    if (!status && keep > 0) {
      auto all = listCheckpoints(dir);
      std::vector<std::string> older;
      for (auto &[s, p, sharded] : all)
        if (p != final)
          older.push_back(p);
      while (older.size() + 1 > size_t(keep)) {
        removeTree(older.front());
        older.erase(older.begin());
      }
    }
    // Leftovers of checkpoints a crash interrupted (never complete, never resumed from).
    if (!status)
      if (DIR *d = opendir(dir.c_str())) {
        std::vector<std::string> partial;
        while (struct dirent *e = readdir(d)) {
          std::string name = e->d_name;
          if (name.rfind("step-", 0) == 0 && name + "" != stepName(step) + ".partial" &&
              (name.size() > 8 && (name.compare(name.size() - 8, 8, ".partial") == 0 ||
                                   (name.size() > 6 && name.compare(name.size() - 6, 6, ".stale") == 0))))
            partial.push_back(dir + "/" + name);
        }
        closedir(d);
        for (const std::string &p : partial)
          removeTree(p);
      }
  }
  return agree(status);
}

planrt_status latestCheckpoint(const std::string &dir, std::string &path, uint64_t &step, bool &sharded) {
  auto all = listCheckpoints(dir);
  if (all.empty())
    return fail(PLANRT_ERR_IO, "%s: no checkpoint to resume from", dir.c_str());
  std::tie(step, path, sharded) = all.back();
  return PLANRT_OK;
}

planrt_status shardedLoad(const std::string &path, const std::vector<FlatParam> &layout, float *P, float *M, float *V,
                          std::map<std::string, std::string> &metadata, const std::vector<std::string> &elsewhere,
                          const std::vector<ModelBuffer> &buffers) {
  json index;
  try {
    std::ifstream in(path + "/index.json");
    if (!in)
      return fail(PLANRT_ERR_IO, "%s/index.json: cannot open: %s", path.c_str(), std::strerror(errno));
    index = json::parse(in);
    if (index.value("format", "") != "planc-sharded-1" || !index["files"].is_object())
      return fail(PLANRT_ERR_FORMAT, "%s/index.json: not a planc-sharded-1 index", path.c_str());
  } catch (const std::exception &e) {
    return fail(PLANRT_ERR_FORMAT, "%s/index.json: %s", path.c_str(), e.what());
  }
  std::map<std::string, const FlatParam *> byName;
  for (const FlatParam &p : layout)
    byName[p.name] = &p;
  std::map<std::string, int64_t> covered;
  float *dst[3] = {P, M, V};
  bool first = true;
  for (auto &[file, hash] : index["files"].items()) {
    std::string full = path + "/" + file, hex;
    if (planrt_status s = sha256File(full, hex))
      return s;
    if (!hash.is_string() || hex != hash.get<std::string>())
      return fail(PLANRT_ERR_FORMAT, "%s: sha256 %s differs from the index's %s: the checkpoint is corrupt",
                  full.c_str(), hex.c_str(), hash.is_string() ? hash.get<std::string>().c_str() : "?");
    planrt_st *st = nullptr;
    if (planrt_status s = planrt_st_open(full.c_str(), &st))
      return s;
    std::unique_ptr<planrt_st, void (*)(planrt_st *)> guard(st, planrt_st_close);
    json table;
    try {
      const char *text = planrt_st_metadata(st, "layout");
      table = json::parse(text ? text : "");
    } catch (const std::exception &) {
      return fail(PLANRT_ERR_FORMAT, "%s: no parameter layout in its metadata", full.c_str());
    }
    if (first) {
      for (const char *key :
           {"step", "plan", "model", "seed", "loss_scale", "loss_scale_good_steps", "optimizer_steps", "format"})
        if (const char *v = planrt_st_metadata(st, key))
          metadata[key] = v;
      for (const ModelBuffer &b : buffers)
        if (planrt_status s = b.readFrom(st))
          return s;
      first = false;
    }
    const char *tensorText = planrt_st_metadata(st, "tensor_rank");
    int64_t tensorRank = tensorText ? std::strtoll(tensorText, nullptr, 10) : 0;
    for (int g = 0; g < 2; ++g) {
      const char *beginText = planrt_st_metadata(st, (std::string("begin.") + kGroups[g]).c_str());
      const char *countText = planrt_st_metadata(st, (std::string("count.") + kGroups[g]).c_str());
      if (!beginText || !countText)
        return fail(PLANRT_ERR_FORMAT, "%s: no begin.%s / count.%s metadata", full.c_str(), kGroups[g], kGroups[g]);
      int64_t begin = std::strtoll(beginText, nullptr, 10), count = std::strtoll(countText, nullptr, 10);
      if (begin < 0 || count < 0 || count > (int64_t(1) << 40))
        return fail(PLANRT_ERR_FORMAT, "%s: bad piece range begin.%s %s count %s", full.c_str(), kGroups[g], beginText,
                    countText);
      std::vector<float> piece(static_cast<size_t>(count));
      for (int k = 0; k < 3; ++k) {
        std::string name = std::string(kKinds[k]) + "." + kGroups[g];
        if (planrt_status s = planrt_st_read(st, name.c_str(), PLANRT_F32, 1, &count, piece.data()))
          return s;
        // Each source parameter overlapping [begin, begin + count) goes to its offset here.
        for (const json &e : table) {
          if (!e.is_array() || (e.size() != 3 && e.size() != 4))
            return fail(PLANRT_ERR_FORMAT, "%s: malformed layout metadata", full.c_str());
          FlatParam src;
          src.name = e[0].get<std::string>();
          src.offset = e[1].get<int64_t>();
          src.count = e[2].get<int64_t>();
          if (e.size() == 4 && e[3].is_object() && e[3].value("replica", false))
            continue;          // a pipeline stage's copy of a parameter another stage owns
          if (e.size() == 4) { // a tensor-parallel piece
            try {
              src.shape = e[3].at("shape").get<std::vector<int64_t>>();
              src.splitDim = e[3].at("dim").get<int64_t>();
              src.parts = e[3].at("parts").get<int64_t>();
              src.blocks = e[3].at("blocks").get<std::vector<int64_t>>();
            } catch (const std::exception &) {
              return fail(PLANRT_ERR_FORMAT, "%s: malformed tensor split of '%s'", full.c_str(), src.name.c_str());
            }
            if (src.splitDim < 0 || size_t(src.splitDim) >= src.shape.size() || src.parts < 1)
              return fail(PLANRT_ERR_FORMAT, "%s: malformed tensor split of '%s'", full.c_str(), src.name.c_str());
          }
          if (src.splitDim < 0 && tensorRank > 0)
            continue; // a whole parameter: every tensor rank holds a replica; read the first's
          const std::string &pname = src.name;
          int64_t off = src.offset, cnt = src.count;
          int64_t lo = std::max(off, begin), hi = std::min(off + cnt, begin + count);
          if (lo >= hi)
            continue;
          auto it = byName.find(pname);
          if (it == byName.end() && std::find(elsewhere.begin(), elsewhere.end(), pname) != elsewhere.end())
            continue; // another pipeline stage's parameter
          if (it == byName.end())
            return fail(PLANRT_ERR_MISMATCH, "%s: holds parameter '%s', which this model lacks", full.c_str(),
                        pname.c_str());
          if (it->second->count != cnt * src.parts)
            return fail(PLANRT_ERR_MISMATCH, "%s: parameter '%s' has %lld elements there and %lld here", full.c_str(),
                        pname.c_str(), (long long)(cnt * src.parts), (long long)it->second->count);
          // Each run of the piece that lies in [lo, hi) goes to its place in the whole tensor.
          forEachRun(src, tensorRank, [&](int64_t l, int64_t w, int64_t n) {
            int64_t a = std::max(lo - off, l), z = std::min(hi - off, l + n);
            if (a < z)
              std::memcpy(dst[k] + it->second->offset + w + (a - l), piece.data() + (off + a - begin),
                          size_t(z - a) * sizeof(float));
          });
          if (k == 0)
            covered[pname] += hi - lo;
        }
      }
    }
  }
  for (const FlatParam &p : layout)
    if (covered[p.name] != p.count)
      return fail(PLANRT_ERR_MISMATCH, "%s: parameter '%s' is missing or incomplete (%lld of %lld elements)",
                  path.c_str(), p.name.c_str(), (long long)covered[p.name], (long long)p.count);
  return PLANRT_OK;
}

} // namespace planrt

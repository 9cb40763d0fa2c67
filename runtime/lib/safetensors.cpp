// safetensors: an 8-byte little-endian header length, a JSON header naming each
// tensor's dtype, shape and [begin, end) byte offsets, then the data. Writes are
// atomic; reads validate everything before a byte of data is trusted.
#include "status.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <libgen.h>
#include <map>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using planrt::fail;

namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

struct DTypeInfo {
  planrt_dtype dtype;
  const char *name;
  size_t bytes;
};
const DTypeInfo kDTypes[] = {{PLANRT_F32, "F32", 4}, {PLANRT_F16, "F16", 2}, {PLANRT_BF16, "BF16", 2},
                             {PLANRT_I32, "I32", 4}, {PLANRT_I64, "I64", 8}, {PLANRT_U16, "U16", 2}};

const DTypeInfo *info(planrt_dtype d) {
  for (const DTypeInfo &i : kDTypes)
    if (i.dtype == d)
      return &i;
  return nullptr;
}
const DTypeInfo *info(const std::string &name) {
  for (const DTypeInfo &i : kDTypes)
    if (name == i.name)
      return &i;
  return nullptr;
}

std::string shapeString(int rank, const int64_t *shape) {
  std::string s = "[";
  for (int i = 0; i < rank; ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// Writes all of buf to fd.
bool writeAll(int fd, const void *buf, size_t n) {
  const char *p = static_cast<const char *>(buf);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    p += w;
    n -= size_t(w);
  }
  return true;
}

} // namespace

struct planrt_st {
  std::string path;
  std::vector<char> bytes; ///< the whole file
  uint64_t dataStart = 0;
  struct Entry {
    std::string name;
    const DTypeInfo *dtype;
    std::vector<int64_t> shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;

  const Entry *find(const std::string &name) const {
    for (const Entry &e : entries)
      if (e.name == name)
        return &e;
    return nullptr;
  }
};

extern "C" {

planrt_status planrt_st_save(const char *path, const planrt_tensor *tensors, size_t count, const char *const *metadata,
                             size_t metadataPairs) {
  if (!path || (count && !tensors) || (metadataPairs && !metadata))
    return fail(PLANRT_ERR_ARG, "planrt_st_save: null argument");
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (metadataPairs) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (size_t i = 0; i < metadataPairs; ++i)
      meta[metadata[2 * i]] = metadata[2 * i + 1];
    header["__metadata__"] = meta;
  }
  uint64_t offset = 0;
  std::vector<uint64_t> sizes(count);
  for (size_t i = 0; i < count; ++i) {
    const planrt_tensor &t = tensors[i];
    const DTypeInfo *d = info(t.dtype);
    if (!d || !t.name || t.rank < 0 || (t.rank && !t.shape))
      return fail(PLANRT_ERR_ARG, "%s: tensor %zu is malformed", path, i);
    if (header.contains(t.name) || std::string(t.name) == "__metadata__")
      return fail(PLANRT_ERR_ARG, "%s: tensor name '%s' is used twice or reserved", path, t.name);
    uint64_t n = d->bytes;
    for (int k = 0; k < t.rank; ++k) {
      if (t.shape[k] < 0 || __builtin_mul_overflow(n, uint64_t(t.shape[k]), &n))
        return fail(PLANRT_ERR_ARG, "%s: tensor '%s' has a negative or too large shape", path, t.name);
    }
    sizes[i] = n;
    header[t.name] = {{"dtype", d->name},
                      {"shape", std::vector<int64_t>(t.shape, t.shape + t.rank)},
                      {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  // Names and metadata must be UTF-8; no exception may leave this C function.
  std::string text;
  try {
    text = header.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::strict);
  } catch (const std::exception &e) {
    return fail(PLANRT_ERR_ARG, "%s: a tensor name or metadata value is not valid UTF-8", path);
  }
  text.append((8 - text.size() % 8) % 8, ' '); // align the data to 8 bytes
  uint64_t headerLen = text.size();

  // Atomic: write a sibling temporary, make it durable, then rename over the target.
  std::string tmp = std::string(path) + ".tmp." + std::to_string(getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return fail(PLANRT_ERR_IO, "%s: cannot write: %s", path, std::strerror(errno));
  unsigned char len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = (unsigned char)(headerLen >> (8 * i));
  bool ok = writeAll(fd, len, 8) && writeAll(fd, text.data(), text.size());
  for (size_t i = 0; ok && i < count; ++i)
    ok = sizes[i] == 0 || writeAll(fd, tensors[i].data, sizes[i]);
  ok = ok && ::fsync(fd) == 0;
  int err = ok ? 0 : errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && ::rename(tmp.c_str(), path) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    return fail(PLANRT_ERR_IO, "%s: cannot write: %s", path, std::strerror(err));
  }
  // The rename itself must reach the disk: fsync the directory.
  std::string dirBuf(path);
  const char *dir = dirname(dirBuf.data());
  int dfd = ::open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return PLANRT_OK;
}

planrt_status planrt_st_open(const char *path, planrt_st **out) {
  if (!path || !out)
    return fail(PLANRT_ERR_ARG, "planrt_st_open: null argument");
  auto st = std::make_unique<planrt_st>();
  st->path = path;
  FILE *f = std::fopen(path, "rb");
  if (!f)
    return fail(PLANRT_ERR_IO, "%s: cannot open: %s", path, std::strerror(errno));
  std::fseek(f, 0, SEEK_END);
  long size = std::ftell(f);
  std::fseek(f, 0, SEEK_SET);
  if (size < 0) {
    std::fclose(f);
    return fail(PLANRT_ERR_IO, "%s: cannot read", path);
  }
  st->bytes.resize(size_t(size));
  size_t got = size ? std::fread(st->bytes.data(), 1, size_t(size), f) : 0;
  std::fclose(f);
  if (got != size_t(size))
    return fail(PLANRT_ERR_IO, "%s: cannot read", path);
  if (size < 8)
    return fail(PLANRT_ERR_FORMAT, "%s: %ld bytes: too short for a safetensors file", path, size);
  uint64_t headerLen = 0;
  for (int i = 0; i < 8; ++i)
    headerLen |= uint64_t((unsigned char)st->bytes[i]) << (8 * i);
  if (headerLen > kMaxHeaderBytes || headerLen > uint64_t(size) - 8)
    return fail(PLANRT_ERR_FORMAT,
                "%s: header length %llu does not fit in a %ld-byte file: truncated or not safetensors", path,
                (unsigned long long)headerLen, size);
  st->dataStart = 8 + headerLen;
  uint64_t dataSize = uint64_t(size) - st->dataStart;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(st->bytes.begin() + 8, st->bytes.begin() + 8 + long(headerLen));
  } catch (const std::exception &e) {
    return fail(PLANRT_ERR_FORMAT, "%s: the header is not valid JSON: %s", path, e.what());
  }
  if (!header.is_object())
    return fail(PLANRT_ERR_FORMAT, "%s: the header is not a JSON object", path);
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string &name = it.key();
    const nlohmann::json &v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object())
        return fail(PLANRT_ERR_FORMAT, "%s: __metadata__ is not an object", path);
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          return fail(PLANRT_ERR_FORMAT, "%s: metadata '%s' is not a string", path, m.key().c_str());
        st->metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    planrt_st::Entry e;
    e.name = name;
    if (!v.is_object() || !v.contains("dtype") || !v["dtype"].is_string() || !v.contains("shape") ||
        !v["shape"].is_array() || !v.contains("data_offsets") || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2)
      return fail(PLANRT_ERR_FORMAT, "%s: tensor '%s' lacks dtype, shape or data_offsets", path, name.c_str());
    e.dtype = info(v["dtype"].get<std::string>());
    if (!e.dtype)
      return fail(PLANRT_ERR_FORMAT, "%s: tensor '%s' has unsupported dtype %s", path, name.c_str(),
                  v["dtype"].get<std::string>().c_str());
    uint64_t n = e.dtype->bytes;
    for (const auto &d : v["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t(1) << 48))
        return fail(PLANRT_ERR_FORMAT, "%s: tensor '%s' has a bad shape", path, name.c_str());
      e.shape.push_back(int64_t(d.get<uint64_t>()));
      if (__builtin_mul_overflow(n, d.get<uint64_t>(), &n))
        return fail(PLANRT_ERR_FORMAT, "%s: tensor '%s' is too large", path, name.c_str());
    }
    const auto &off = v["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      return fail(PLANRT_ERR_FORMAT, "%s: tensor '%s' has bad data_offsets", path, name.c_str());
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    if (e.begin > e.end || e.end > dataSize || e.end - e.begin != n)
      return fail(PLANRT_ERR_FORMAT,
                  "%s: tensor '%s' spans bytes [%llu, %llu) of %llu, but its dtype and shape need %llu bytes: "
                  "truncated or corrupt",
                  path, name.c_str(), (unsigned long long)e.begin, (unsigned long long)e.end,
                  (unsigned long long)dataSize, (unsigned long long)n);
    st->entries.push_back(std::move(e));
  }
  // The tensors must tile the data region: no gaps, no overlaps.
  std::vector<const planrt_st::Entry *> order;
  for (const auto &e : st->entries)
    order.push_back(&e);
  // An empty tensor (a ZeRO piece of an empty optimizer group) shares its offset with the
  // next one: it comes first.
  std::sort(order.begin(), order.end(),
            [](auto *a, auto *b) { return a->begin != b->begin ? a->begin < b->begin : a->end < b->end; });
  uint64_t at = 0;
  for (const auto *e : order) {
    if (e->begin != at)
      return fail(PLANRT_ERR_FORMAT, "%s: tensor '%s' starts at byte %llu, expected %llu: the data is corrupt", path,
                  e->name.c_str(), (unsigned long long)e->begin, (unsigned long long)at);
    at = e->end;
  }
  if (at != dataSize)
    return fail(PLANRT_ERR_FORMAT, "%s: %llu bytes of data but the tensors cover %llu", path,
                (unsigned long long)dataSize, (unsigned long long)at);
  *out = st.release();
  return PLANRT_OK;
}

size_t planrt_st_count(const planrt_st *st) { return st ? st->entries.size() : 0; }

const char *planrt_st_name(const planrt_st *st, size_t i) {
  return st && i < st->entries.size() ? st->entries[i].name.c_str() : nullptr;
}

const char *planrt_st_metadata(const planrt_st *st, const char *key) {
  if (!st || !key)
    return nullptr;
  auto it = st->metadata.find(key);
  return it == st->metadata.end() ? nullptr : it->second.c_str();
}

planrt_status planrt_st_find(const planrt_st *st, const char *name, planrt_tensor *out) {
  if (!st || !name || !out)
    return fail(PLANRT_ERR_ARG, "planrt_st_find: bad argument");
  const planrt_st::Entry *e = st->find(name);
  if (!e)
    return fail(PLANRT_ERR_MISMATCH, "%s: no tensor '%s' in the checkpoint", st->path.c_str(), name);
  out->name = e->name.c_str();
  out->dtype = e->dtype->dtype;
  out->rank = int(e->shape.size());
  out->shape = e->shape.data();
  out->data = st->bytes.data() + st->dataStart + e->begin;
  return PLANRT_OK;
}

planrt_status planrt_st_read(const planrt_st *st, const char *name, planrt_dtype dtype, int rank, const int64_t *shape,
                             void *dst) {
  if (!st || !name || rank < 0 || (rank && !shape))
    return fail(PLANRT_ERR_ARG, "planrt_st_read: bad argument");
  const planrt_st::Entry *e = st->find(name);
  if (!e)
    return fail(PLANRT_ERR_MISMATCH, "%s: the model's tensor '%s' is not in the checkpoint", st->path.c_str(), name);
  const DTypeInfo *want = info(dtype);
  std::string expected = shapeString(rank, shape);
  std::string found = shapeString(int(e->shape.size()), e->shape.data());
  if (!want || want != e->dtype || expected != found)
    return fail(PLANRT_ERR_MISMATCH, "%s: tensor '%s' is %s %s in the checkpoint but the model expects %s %s",
                st->path.c_str(), name, e->dtype->name, found.c_str(), want ? want->name : "?", expected.c_str());
  if (e->end == e->begin) // an empty tensor: nothing to copy, and dst may be null
    return PLANRT_OK;
  if (!dst)
    return fail(PLANRT_ERR_ARG, "planrt_st_read: null destination for tensor '%s'", name);
  std::memcpy(dst, st->bytes.data() + st->dataStart + e->begin, e->end - e->begin);
  return PLANRT_OK;
}

void planrt_st_close(planrt_st *st) { delete st; }

} // extern "C"

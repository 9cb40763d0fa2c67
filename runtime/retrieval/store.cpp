// The store: one directory holding the chunks (with provenance), their vectors, a
// FAISS index, a Xapian database and a checksummed manifest; built in a sibling
// temporary directory and swapped in atomically; verified before anything in it
// is parsed (FAISS index files are untrusted input).
#include "store.h"
#include "status.h"

#include <faiss/IVFlib.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIVF.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/io.h>
#include <faiss/index_factory.h>
#include <faiss/index_io.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

using json = nlohmann::json;

namespace planrt::rag {
namespace {

constexpr const char *kFormat = "planrt-retrieval-store-1";
constexpr const char *kManifest = "MANIFEST.json";
constexpr const char *kChunks = "chunks.jsonl";
constexpr const char *kSources = "sources.jsonl";
constexpr const char *kVectors = "vectors.f32";
constexpr const char *kIndex = "index.faiss";
constexpr const char *kXapian = "xapian";
constexpr uint64_t kMaxManifestBytes = 64u << 20;

const char *chunkName(planrt_chunk_kind k) {
  return k == PLANRT_CHUNK_SENTENCES    ? "sentences"
         : k == PLANRT_CHUNK_PARAGRAPHS ? "paragraphs"
         : k == PLANRT_CHUNK_SEMANTIC   ? "semantic"
                                        : "tokens";
}

// "docs.plan:12: retrieval docs: " for errors in the declaration itself.
std::string where(const planrt_retrieval_config &cfg) {
  std::string w;
  if (cfg.plan_file && *cfg.plan_file)
    w = std::string(cfg.plan_file) + ":" + std::to_string(cfg.plan_line) + ": ";
  return w + "retrieval " + (cfg.graph ? cfg.graph : "?") + ": ";
}

// FAISS's what() is "Error in <signature> at <file>:<line>: <message>": keep the message.
std::string faissMessage(const std::exception &e) {
  std::string w = e.what();
  size_t at = w.find(".cpp:");
  if (at != std::string::npos && (at = w.find(": ", at)) != std::string::npos)
    return w.substr(at + 2);
  return w;
}

faiss::MetricType faissMetric(planrt_metric m) {
  return m == PLANRT_METRIC_L2 ? faiss::METRIC_L2 : faiss::METRIC_INNER_PRODUCT;
}

planrt_status makeIndex(const planrt_retrieval_config &cfg, std::unique_ptr<faiss::Index> &out) {
  try {
    out.reset(faiss::index_factory(int(cfg.embed_dim), cfg.index_factory, faissMetric(cfg.metric)));
    return PLANRT_OK;
  } catch (const std::exception &e) {
    return fail(PLANRT_ERR_ARG, "%sfaiss(\"%s\"): not a valid index for dim %lld: %s", where(cfg).c_str(),
                cfg.index_factory, (long long)cfg.embed_dim, faissMessage(e).c_str());
  }
}

// Every regular file under dir, as paths relative to it, sorted.
void listFiles(const std::string &dir, const std::string &rel, std::vector<std::string> &out) {
  DIR *d = ::opendir((rel.empty() ? dir : dir + "/" + rel).c_str());
  if (!d)
    return;
  std::vector<std::string> names;
  while (dirent *e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..")
      names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto &n : names) {
    std::string r = rel.empty() ? n : rel + "/" + n;
    struct stat st;
    if (::lstat((dir + "/" + r).c_str(), &st) != 0)
      continue;
    if (S_ISDIR(st.st_mode))
      listFiles(dir, r, out);
    else
      out.push_back(r); // links and devices too: verification refuses them
  }
}

bool isFile(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string manifestChecksum(json m) {
  m.erase("checksum");
  return sha256Hex(m.dump());
}

// The manifest, checked: readable, JSON, our format, its own checksum, our graph
// and fingerprint. Nothing else in the store has been read yet.
planrt_status readStoreManifest(const planrt_retrieval_config &cfg, const std::string &dir, json &m,
                                const std::string *fingerprint) {
  std::string path = dir + "/" + kManifest, text;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return fail(PLANRT_ERR_IO, "%s: no retrieval store here (%s is missing): run ingest first", dir.c_str(), kManifest);
  if (uint64_t(st.st_size) > kMaxManifestBytes)
    return fail(PLANRT_ERR_FORMAT, "%s: %lld bytes, too large for a store manifest", path.c_str(),
                (long long)st.st_size);
  if (planrt_status s = readFile(path, text))
    return s;
  m = json::parse(text, nullptr, false);
  if (m.is_discarded() || !m.is_object())
    return fail(PLANRT_ERR_FORMAT,
                "%s: the store manifest is not valid JSON: the store is corrupt (remove it and run ingest)",
                path.c_str());
  if (!m.contains("format") || m["format"] != kFormat)
    return fail(PLANRT_ERR_FORMAT, "%s: not a %s manifest", path.c_str(), kFormat);
  if (!m.contains("checksum") || !m["checksum"].is_string() || m["checksum"] != manifestChecksum(m))
    return fail(
        PLANRT_ERR_FORMAT,
        "%s: the manifest's checksum does not match its contents: the store is corrupt (remove it and run ingest)",
        path.c_str());
  if (!m.contains("graph") || !m["graph"].is_string() || !m.contains("files") || !m["files"].is_object() ||
      !m.contains("config") || !m["config"].is_string() || !m.contains("dim") || !m["dim"].is_number_integer() ||
      !m.contains("chunks") || !m["chunks"].is_number_integer())
    return fail(PLANRT_ERR_FORMAT, "%s: the store manifest lacks graph, config, dim, chunks or files", path.c_str());
  std::string graph = m["graph"];
  if (graph != cfg.graph)
    return fail(PLANRT_ERR_MISMATCH, "%s: the store belongs to retrieval graph '%s', not '%s'", dir.c_str(),
                graph.c_str(), cfg.graph);
  if (fingerprint && m["config"] != *fingerprint)
    return fail(PLANRT_ERR_MISMATCH,
                "%s: the store was built with another configuration (%s; the plan has %s): run ingest to rebuild it",
                dir.c_str(), m["config"].get<std::string>().c_str(), fingerprint->c_str());
  return PLANRT_OK;
}

// The verified bytes of the store's own files (not Xapian's), parsed from memory
// so that what is parsed is what was hashed.
using Verified = std::map<std::string, std::string>;

// Every file in the store is listed in the manifest with its sha256, and nothing
// else is there. The contents of chunks, sources, vectors and index are kept, and
// those of `model` (a store-trained embedder's file) when it is not null.
planrt_status checkStoreFiles(const std::string &dir, const json &m, Verified &keep, const char *model = nullptr) {
  std::vector<std::string> present;
  listFiles(dir, "", present);
  std::set<std::string> listed;
  for (const auto &[name, hash] : m["files"].items()) {
    listed.insert(name);
    std::string path = dir + "/" + name, data;
    if (name.find("..") != std::string::npos || !hash.is_string())
      return fail(PLANRT_ERR_FORMAT, "%s/%s: a malformed entry in the store manifest", dir.c_str(), name.c_str());
    if (!isFile(path))
      return fail(PLANRT_ERR_FORMAT, "%s: missing from the store: the store is corrupt; run ingest", path.c_str());
    if (planrt_status s = readFile(path, data))
      return s;
    if (sha256Hex(data) != hash.get<std::string>())
      return fail(PLANRT_ERR_FORMAT,
                  "%s: sha256 differs from the store manifest: the store is corrupt or was modified; "
                  "refusing to load it (run ingest to rebuild)",
                  path.c_str());
    if (name == kChunks || name == kSources || name == kVectors || name == kIndex || (model && name == model))
      keep[name] = std::move(data);
  }
  for (const char *name : {kChunks, kSources, kVectors, kIndex})
    if (!keep.count(name))
      return fail(PLANRT_ERR_FORMAT, "%s/%s: missing from the store manifest", dir.c_str(), name);
  for (const auto &name : present)
    if (name != kManifest && !listed.count(name))
      return fail(PLANRT_ERR_FORMAT, "%s/%s: a file the store manifest does not list: the store was modified",
                  dir.c_str(), name.c_str());
  return PLANRT_OK;
}

// Calls f(record, line number) for each JSON line of `text`; a line that is not
// JSON is passed as a discarded value.
template <typename F> planrt_status forEachJsonLine(const std::string &text, F f) {
  size_t i = 0, line = 0;
  while (i < text.size()) {
    size_t j = text.find('\n', i);
    if (j == std::string::npos)
      j = text.size();
    if (planrt_status s = f(json::parse(text.substr(i, j - i), nullptr, false), ++line))
      return s;
    i = j + 1;
  }
  return PLANRT_OK;
}

planrt_status parseChunks(const std::string &dir, const std::string &text, std::vector<Chunk> &chunks) {
  std::string path = dir + "/" + kChunks;
  chunks.clear();
  return forEachJsonLine(text, [&](const json &c, size_t line) {
    Chunk ch;
    try {
      if (c.is_discarded() || c.at("id").get<uint64_t>() != chunks.size())
        throw std::runtime_error("");
      ch.file = c.at("file");
      ch.begin = c.at("begin");
      ch.end = c.at("end");
      ch.sha256 = c.at("sha256");
      ch.text = c.at("text");
    } catch (const std::exception &) {
      return fail(PLANRT_ERR_FORMAT, "%s:%zu: not a chunk record", path.c_str(), line);
    }
    if (ch.end < ch.begin || ch.end - ch.begin != ch.text.size() || sha256Hex(ch.text) != ch.sha256)
      return fail(PLANRT_ERR_FORMAT, "%s:%zu: the chunk's text does not match its range or sha256", path.c_str(), line);
    chunks.push_back(std::move(ch));
    return PLANRT_OK;
  });
}

planrt_status parseVectors(const std::string &dir, const std::string &data, size_t n, int64_t dim,
                           std::vector<float> &vecs) {
  if (data.size() != n * size_t(dim) * sizeof(float))
    return fail(PLANRT_ERR_FORMAT, "%s/%s: %zu bytes, expected %zu chunks × %lld floats", dir.c_str(), kVectors,
                data.size(), n, (long long)dim);
  vecs.resize(n * size_t(dim));
  std::memcpy(vecs.data(), data.data(), data.size());
  return PLANRT_OK;
}

// ---- Building.

struct Built {
  std::vector<Chunk> chunks;
  std::vector<float> vectors;
  json sources = json::array();
};

planrt_status writeIndex(const planrt_retrieval_config &cfg, const Built &b, const std::string &path) {
  std::unique_ptr<faiss::Index> index;
  if (planrt_status s = makeIndex(cfg, index))
    return s;
  faiss::Index::idx_t n = faiss::Index::idx_t(b.chunks.size());
  try {
    if (auto *hnsw = dynamic_cast<faiss::IndexHNSW *>(index.get()); hnsw && cfg.ef_construction > 0)
      hnsw->hnsw.efConstruction = int(cfg.ef_construction);
    if (!index->is_trained) {
      if (const faiss::IndexIVF *ivf = faiss::ivflib::try_extract_index_ivf(index.get()); ivf && size_t(n) < ivf->nlist)
        return fail(PLANRT_ERR_ARG,
                    "%sfaiss(\"%s\"): training needs at least %zu vectors (one per inverted list; FAISS "
                    "recommends 39 per list), but the corpus has %lld chunks: use fewer lists or \"Flat\"",
                    where(cfg).c_str(), cfg.index_factory, ivf->nlist, (long long)n);
      index->train(n, b.vectors.data());
    }
    index->add(n, b.vectors.data());
    faiss::write_index(index.get(), path.c_str());
  } catch (const std::exception &e) {
    return fail(PLANRT_ERR_ARG, "%sfaiss(\"%s\"): building the index from %lld vectors failed: %s", where(cfg).c_str(),
                cfg.index_factory, (long long)n, faissMessage(e).c_str());
  }
  return PLANRT_OK;
}

planrt_status writeKeyword(const Built &b, const std::string &path) {
  try {
    Xapian::WritableDatabase db(path, Xapian::DB_CREATE_OR_OVERWRITE);
    Xapian::TermGenerator gen;
    gen.set_stemmer(Xapian::Stem(kStemmer));
    gen.set_stemming_strategy(Xapian::TermGenerator::STEM_SOME);
    db.begin_transaction(false);
    for (size_t i = 0; i < b.chunks.size(); ++i) {
      Xapian::Document doc;
      gen.set_document(doc);
      gen.index_text_without_positions(b.chunks[i].text); // no phrase queries: no positions
      doc.set_data(std::to_string(i));                    // the chunk id
      db.replace_document(Xapian::docid(i + 1), doc);
    }
    db.commit_transaction();
    db.close();
  } catch (const Xapian::Error &e) {
    return fail(PLANRT_ERR_IO, "%s: building the Xapian database failed: %s", path.c_str(),
                e.get_description().c_str());
  }
  return PLANRT_OK;
}

// Writes every part into `tmp`, then the manifest over them.
planrt_status writeStore(const planrt_retrieval_config &cfg, const std::string &fingerprint, const Built &b,
                         const Embedder &embedder, const std::string &tmp) {
  if (planrt_status s = makeDirs(tmp))
    return s;
  std::string chunks, sources;
  for (size_t i = 0; i < b.chunks.size(); ++i) {
    const Chunk &c = b.chunks[i];
    chunks +=
        json{{"id", i}, {"file", c.file}, {"begin", c.begin}, {"end", c.end}, {"sha256", c.sha256}, {"text", c.text}}
            .dump() +
        "\n";
  }
  for (const auto &s : b.sources)
    sources += s.dump() + "\n";
  std::string_view vecs(reinterpret_cast<const char *>(b.vectors.data()), b.vectors.size() * sizeof(float));
  if (planrt_status s = writeFileDurable(tmp + "/" + kChunks, chunks))
    return s;
  if (planrt_status s = writeFileDurable(tmp + "/" + kSources, sources))
    return s;
  if (planrt_status s = writeFileDurable(tmp + "/" + kVectors, vecs))
    return s;
  if (planrt_status s = writeIndex(cfg, b, tmp + "/" + kIndex))
    return s;
  if (planrt_status s = writeKeyword(b, tmp + "/" + kXapian))
    return s;
  if (const char *model = embedder.modelFile())
    if (planrt_status s = embedder.save(tmp + "/" + model))
      return s;
  std::vector<std::string> files;
  listFiles(tmp, "", files);
  json m = {{"format", kFormat},    {"graph", cfg.graph},        {"config", fingerprint},
            {"dim", cfg.embed_dim}, {"chunks", b.chunks.size()}, {"files", json::object()}};
  for (const auto &f : files) {
    std::string data;
    if (planrt_status s = readFile(tmp + "/" + f, data))
      return s;
    m["files"][f] = sha256Hex(data);
  }
  m["checksum"] = manifestChecksum(m);
  if (planrt_status s = writeFileDurable(tmp + "/" + kManifest, m.dump(1) + "\n"))
    return s;
  {
    // Xapian writes without our fsync; make its files and both directories durable.
    std::vector<std::string> xap;
    listFiles(tmp + "/" + kXapian, "", xap);
    for (const auto &f : xap) {
      int fd = ::open((tmp + "/" + kXapian + "/" + f).c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0)
        ::fsync(fd), ::close(fd);
    }
  }
  syncDir(tmp + "/" + kXapian);
  syncDir(tmp);
  return PLANRT_OK;
}

// Puts `tmp` in the place of `dir` atomically: renameat2(RENAME_EXCHANGE) swaps
// the two directories in one step where the file system can (then the old one is
// removed); elsewhere the old store is renamed aside first.
planrt_status swapIn(const std::string &tmp, const std::string &dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    if (::rename(tmp.c_str(), dir.c_str()) != 0)
      return fail(PLANRT_ERR_IO, "%s: cannot rename the new store into place: %s", dir.c_str(), std::strerror(errno));
  } else if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) == 0) {
    removeTree(tmp); // now the old store
  } else {
    std::string old = dir + ".old-" + std::to_string(::getpid());
    if (::rename(dir.c_str(), old.c_str()) != 0 || ::rename(tmp.c_str(), dir.c_str()) != 0)
      return fail(PLANRT_ERR_IO, "%s: cannot replace the store: %s", dir.c_str(), std::strerror(errno));
    removeTree(old);
  }
  syncDir(dirName(dir));
  return PLANRT_OK;
}

// What a previous store of this graph offers for reuse: file name → (sha256, its
// chunks, their vectors). Empty when there is no store or its configuration differs.
struct Previous {
  std::map<std::string, std::pair<std::string, std::vector<size_t>>> files;
  std::vector<Chunk> chunks;
  std::vector<float> vectors;
};

planrt_status readPrevious(const planrt_retrieval_config &cfg, const std::string &fingerprint, const std::string &dir,
                           Previous &prev) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0)
    return PLANRT_OK;
  if (!S_ISDIR(st.st_mode))
    return fail(PLANRT_ERR_IO, "%s: exists and is not a directory", dir.c_str());
  std::vector<std::string> present;
  listFiles(dir, "", present);
  if (present.empty())
    return PLANRT_OK;
  if (!isFile(dir + "/" + kManifest))
    return fail(PLANRT_ERR_IO, "%s: exists and is not a retrieval store; refusing to replace it", dir.c_str());
  json m;
  if (planrt_status s = readStoreManifest(cfg, dir, m, nullptr))
    return s;
  Verified bytes;
  if (checkStoreFiles(dir, m, bytes) != PLANRT_OK) {
    // Our graph's store, damaged: nothing in it is trusted or reused; it is rebuilt.
    std::fprintf(stderr, "planrt: warning: %s; rebuilding the store from scratch\n", planrt_last_error());
    return PLANRT_OK;
  }
  if (m["config"] != fingerprint)
    return PLANRT_OK; // rebuilt from scratch
  if (planrt_status s = parseChunks(dir, bytes[kChunks], prev.chunks))
    return s;
  if (planrt_status s = parseVectors(dir, bytes[kVectors], prev.chunks.size(), cfg.embed_dim, prev.vectors))
    return s;
  return forEachJsonLine(bytes[kSources], [&](const json &s, size_t line) {
    try {
      auto &entry = prev.files[s.at("file").get<std::string>()];
      entry.first = s.at("sha256");
      for (uint64_t c = s.at("first"), e = c + s.at("count").get<uint64_t>(); c < e; ++c) {
        if (c >= prev.chunks.size())
          throw std::out_of_range("chunk");
        entry.second.push_back(size_t(c));
      }
    } catch (const std::exception &) {
      return fail(PLANRT_ERR_FORMAT, "%s/%s:%zu: not a source record", dir.c_str(), kSources, line);
    }
    return PLANRT_OK;
  });
}

// Removes what a killed ingest left beside the store: <store>.tmp-PID and
// <store>.old-PID directories whose process is gone.
void removeStale(const std::string &dir) {
  std::string parent = dirName(dir), base = dir.substr(dir.rfind('/') + 1);
  DIR *d = ::opendir(parent.c_str());
  if (!d)
    return;
  std::vector<std::string> stale;
  while (dirent *e = ::readdir(d)) {
    std::string name = e->d_name;
    for (const char *tag : {".tmp-", ".old-"}) {
      std::string prefix = base + tag;
      if (name.compare(0, prefix.size(), prefix) != 0)
        continue;
      char *end = nullptr;
      long pid = std::strtol(name.c_str() + prefix.size(), &end, 10);
      if (*end == '\0' && pid > 0 && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH)
        stale.push_back(name);
    }
  }
  ::closedir(d);
  for (const auto &name : stale)
    removeTree(parent + "/" + name);
}

// Whether the corpus differs from the previous store's (or there is none).
bool corpusChanged(const Previous &prev, const std::vector<SourceFile> &files) {
  if (prev.files.size() != files.size())
    return true;
  for (const SourceFile &f : files) {
    auto it = prev.files.find(f.name);
    if (it == prev.files.end() || it->second.first != f.sha256)
      return true;
  }
  return false;
}

void drawProgress(size_t done, size_t total) {
  int width = 30, filled = total ? int(width * done / total) : width;
  std::fprintf(stderr, "\r[%.*s%*s] %zu/%zu files", filled, "==============================", width - filled, "", done,
               total);
  if (done == total)
    std::fprintf(stderr, "\r\033[K");
}

} // namespace

std::string configText(const planrt_retrieval_config &cfg, const Embedder &embedder) {
  char buf[1024];
  std::snprintf(buf, sizeof buf, "chunk=%s(%lld,overlap:%lld) embed=%s index=faiss(\"%s\",%s) keyword=bm25(stem:%s)",
                chunkName(cfg.chunk), (long long)cfg.chunk_size, (long long)cfg.chunk_overlap,
                embedder.describe().c_str(), cfg.index_factory ? cfg.index_factory : "",
                cfg.metric == PLANRT_METRIC_L2 ? "l2" : "ip", kStemmer);
  std::string text = buf;
  if (cfg.ef_construction > 0) // only then, so that stores built before the key stay valid
    text += " ef_construction=" + std::to_string(cfg.ef_construction);
  if (cfg.chunk == PLANRT_CHUNK_SEMANTIC) {
    std::snprintf(buf, sizeof buf, " threshold=%.17g", cfg.chunk_threshold);
    text += buf;
  }
  return text;
}

std::string storePath(const planrt_retrieval_config &cfg) {
  return resolvePath(cfg.base_dir ? cfg.base_dir : "", cfg.store ? cfg.store : "");
}

planrt_status checkConfig(const planrt_retrieval_config &cfg) {
  if (!cfg.graph || !*cfg.graph)
    return fail(PLANRT_ERR_ARG, "a retrieval configuration without a graph name");
  std::string w = where(cfg);
  if (!cfg.store || !*cfg.store)
    return fail(PLANRT_ERR_ARG, "%sno store directory", w.c_str());
  if (cfg.corpus_count == 0 || !cfg.corpus)
    return fail(PLANRT_ERR_ARG, "%sthe corpus names no files", w.c_str());
  if (cfg.chunk_size <= 0 || cfg.chunk_overlap < 0 || cfg.chunk_overlap >= cfg.chunk_size)
    return fail(PLANRT_ERR_ARG,
                "%schunk = %s(%lld, overlap: %lld): the size must be positive and the overlap in [0, size)", w.c_str(),
                chunkName(cfg.chunk), (long long)cfg.chunk_size, (long long)cfg.chunk_overlap);
  if (cfg.embed == PLANRT_EMBED_MODEL &&
      (!cfg.embed_model || !*cfg.embed_model || !cfg.embed_checkpoint || !*cfg.embed_checkpoint))
    return fail(PLANRT_ERR_ARG, "%sembed = model(...) without a model name and checkpoint", w.c_str());
  if (cfg.embed_pool && *cfg.embed_pool && std::strcmp(cfg.embed_pool, "mean") != 0 &&
      std::strcmp(cfg.embed_pool, "last") != 0)
    return fail(PLANRT_ERR_ARG, "%sembed pool '%s': mean or last", w.c_str(), cfg.embed_pool);
  const char *embedName = cfg.embed == PLANRT_EMBED_MODEL      ? "model"
                          : cfg.embed == PLANRT_EMBED_FASTTEXT ? "fasttext"
                                                               : "hashing";
  if (cfg.embed_dim < 1 || cfg.embed_dim > 65536)
    return fail(PLANRT_ERR_ARG, "%s%s(dim: %lld): the dimension must be in [1, 65536]", w.c_str(), embedName,
                (long long)cfg.embed_dim);
  if (cfg.embed == PLANRT_EMBED_FASTTEXT) {
    const char *model = cfg.fasttext_model ? cfg.fasttext_model : "skipgram";
    if ((std::strcmp(model, "skipgram") != 0 && std::strcmp(model, "cbow") != 0) || cfg.fasttext_epoch < 1 ||
        cfg.fasttext_min_count < 1 || cfg.fasttext_minn < 0 || cfg.fasttext_maxn < cfg.fasttext_minn ||
        (cfg.fasttext_maxn > 0 && cfg.fasttext_bucket < 1) || cfg.fasttext_bucket < 0 || cfg.fasttext_threads < 1 ||
        cfg.embed_dim > 4096 || cfg.fasttext_maxn > 64 ||
        std::max({cfg.fasttext_epoch, cfg.fasttext_min_count, cfg.fasttext_bucket, cfg.fasttext_threads}) > INT32_MAX)
      return fail(PLANRT_ERR_ARG,
                  "%sfasttext(dim: %lld, model: %s, epoch: %lld, min_count: %lld, minn: %lld, maxn: %lld, bucket: %lld, "
                  "threads: %lld): needs skipgram or cbow, dim ≤ 4096, epoch, min_count and threads in [1, 2^31), "
                  "0 ≤ minn ≤ maxn ≤ 64, and bucket in [1, 2^31) with subwords",
                  w.c_str(), (long long)cfg.embed_dim, model, (long long)cfg.fasttext_epoch,
                  (long long)cfg.fasttext_min_count, (long long)cfg.fasttext_minn, (long long)cfg.fasttext_maxn,
                  (long long)cfg.fasttext_bucket, (long long)cfg.fasttext_threads);
  }
  if (!cfg.index_factory || !*cfg.index_factory)
    return fail(PLANRT_ERR_ARG, "%sno FAISS index factory string", w.c_str());
  if (cfg.top < 1)
    return fail(PLANRT_ERR_ARG, "%ssearch top = %lld: must be at least 1", w.c_str(), (long long)cfg.top);
  if (!(cfg.vector_weight >= 0) || !(cfg.keyword_weight >= 0) || !std::isfinite(cfg.vector_weight) ||
      !std::isfinite(cfg.keyword_weight) || cfg.vector_weight + cfg.keyword_weight <= 0)
    return fail(PLANRT_ERR_ARG, "%shybrid(vector: %g, keyword: %g): weights must be finite, ≥ 0, not both 0", w.c_str(),
                cfg.vector_weight, cfg.keyword_weight);
  if (cfg.rrf_k < 0)
    return fail(PLANRT_ERR_ARG, "%shybrid(k: %lld): must be ≥ 1", w.c_str(), (long long)cfg.rrf_k);
  if (cfg.chunk == PLANRT_CHUNK_SEMANTIC &&
      (cfg.chunk_overlap != 0 || !(cfg.chunk_threshold >= 0 && cfg.chunk_threshold <= 1)))
    return fail(PLANRT_ERR_ARG, "%schunk = semantic(%lld, threshold: %g): the threshold must lie in [0, 1], and "
                "semantic chunks do not overlap", w.c_str(), (long long)cfg.chunk_size, cfg.chunk_threshold);
  if (cfg.ef_search < 0 || cfg.ef_construction < 0)
    return fail(PLANRT_ERR_ARG, "%sef_search and ef_construction must be ≥ 0", w.c_str());
  if (cfg.nprobe < 0)
    return fail(PLANRT_ERR_ARG, "%snprobe = %lld: must be ≥ 0", w.c_str(), (long long)cfg.nprobe);
  if (cfg.rerank == PLANRT_RERANK_MODEL && (!cfg.rerank_model || !*cfg.rerank_model || !cfg.rerank_checkpoint ||
                                            !*cfg.rerank_checkpoint || cfg.rerank_top < 1))
    return fail(PLANRT_ERR_ARG, "%srerank = model(...) needs a model name, a checkpoint and top ≥ 1", w.c_str());
  return PLANRT_OK;
}

planrt_status openStore(const planrt_retrieval_config &cfg, Store *store) {
  if (planrt_status s = checkConfig(cfg))
    return s;
  std::unique_ptr<Embedder> embedder;
  if (planrt_status s = openEmbedder(cfg, embedder))
    return s;
  std::string dir = storePath(cfg), fingerprint = configText(cfg, *embedder);
  json m;
  if (planrt_status s = readStoreManifest(cfg, dir, m, &fingerprint))
    return s;
  Verified bytes;
  if (planrt_status s = checkStoreFiles(dir, m, bytes, embedder->modelFile()))
    return s;
  if (!store)
    return PLANRT_OK;
  // Verified: from here on the bytes are the ones ingest wrote, parsed from the
  // memory they were hashed in (Xapian alone reopens its files).
  store->dir = dir;
  store->dim = m["dim"];
  if (const char *model = embedder->modelFile()) {
    auto it = bytes.find(model);
    if (it == bytes.end())
      return fail(PLANRT_ERR_FORMAT, "%s: the store has no %s, the model of embed = %s", dir.c_str(), model,
                  embedder->describe().c_str());
    if (planrt_status s = embedder->load(it->second, dir + "/" + model))
      return s;
    bytes.erase(it);
  }
  store->embedder = std::move(embedder);
  if (planrt_status s = parseChunks(dir, bytes[kChunks], store->chunks))
    return s;
  if (store->chunks.size() != m["chunks"].get<size_t>() || store->dim != cfg.embed_dim)
    return fail(PLANRT_ERR_FORMAT, "%s: the manifest's chunk count or dimension disagrees with the store", dir.c_str());
  try {
    faiss::VectorIOReader reader;
    reader.data.assign(bytes[kIndex].begin(), bytes[kIndex].end());
    bytes.erase(kIndex);
    store->index.reset(faiss::read_index(&reader));
  } catch (const std::exception &e) {
    return fail(PLANRT_ERR_FORMAT, "%s/%s: FAISS cannot read it: %s", dir.c_str(), kIndex, faissMessage(e).c_str());
  }
  try {
    store->keyword = Xapian::Database(dir + "/" + kXapian);
  } catch (const Xapian::Error &e) {
    return fail(PLANRT_ERR_FORMAT, "%s/%s: Xapian cannot open it: %s", dir.c_str(), kXapian,
                e.get_description().c_str());
  }
  size_t n = store->chunks.size();
  if (size_t(store->index->ntotal) != n || store->index->d != store->dim || store->keyword.get_doccount() != n)
    return fail(PLANRT_ERR_FORMAT, "%s: FAISS holds %lld vectors of dim %d and Xapian %u documents for %zu chunks",
                dir.c_str(), (long long)store->index->ntotal, int(store->index->d), store->keyword.get_doccount(), n);
  if (cfg.nprobe > 0)
    if (faiss::IndexIVF *ivf = faiss::ivflib::try_extract_index_ivf(store->index.get()))
      ivf->nprobe = size_t(cfg.nprobe);
  if (auto *hnsw = dynamic_cast<faiss::IndexHNSW *>(store->index.get()); hnsw && cfg.ef_search > 0)
    hnsw->hnsw.efSearch = int(cfg.ef_search);
  return PLANRT_OK;
}

Xapian::Database openKeyword(const Store &store) { return Xapian::Database(store.dir + "/" + kXapian); }

} // namespace planrt::rag

using namespace planrt::rag;

planrt_status planrt_retrieval_ingest(const planrt_retrieval_config *cfgp, int progress, planrt_ingest_report *report) {
  if (!cfgp)
    return planrt::fail(PLANRT_ERR_ARG, "planrt_retrieval_ingest: no configuration");
  const planrt_retrieval_config &cfg = *cfgp;
  planrt_ingest_report rep{};
  try {
    if (planrt_status s = checkConfig(cfg))
      return s;
    { // An invalid factory string is reported before any file is read.
      std::unique_ptr<faiss::Index> probe;
      if (planrt_status s = makeIndex(cfg, probe))
        return s;
    }
    std::unique_ptr<Embedder> embedder;
    if (planrt_status s = openEmbedder(cfg, embedder))
      return s;
    std::string dir = storePath(cfg), fingerprint = configText(cfg, *embedder);
    Previous prev;
    if (planrt_status s = readPrevious(cfg, fingerprint, dir, prev))
      return s;
    std::vector<SourceFile> files;
    if (planrt_status s = loadCorpus(cfg, files, progress))
      return s;

    // A store-trained embedder learns from the whole corpus: when the corpus changed it
    // is trained anew and every chunk embedded again (the same corpus gives the same store).
    // The store is built in <store>.tmp-PID, which no way out of this function leaves
    // behind (once swapped in it is gone already).
    std::string tmp = dir + ".tmp-" + std::to_string(::getpid());
    struct Removed {
      const std::string &path;
      ~Removed() { removeTree(path); }
    } removed{tmp};
    removeStale(dir);
    removeTree(tmp);
    bool trained = embedder->modelFile() && corpusChanged(prev, files);
    if (trained) {
      if (planrt_status s = makeDirs(tmp))
        return s;
      if (planrt_status s = embedder->train(files, tmp))
        return s;
    }

    Built b;
    size_t dim = size_t(cfg.embed_dim);
    std::set<std::string> seen;
    for (size_t fi = 0; fi < files.size(); ++fi) {
      const SourceFile &f = files[fi];
      seen.insert(f.name);
      size_t first = b.chunks.size();
      auto it = prev.files.find(f.name);
      bool same = it != prev.files.end() && it->second.first == f.sha256;
      if (same)
        ++rep.files_unchanged;
      else
        ++(it == prev.files.end() ? rep.files_added : rep.files_changed);
      if (same && !trained) {
        for (size_t c : it->second.second) {
          b.chunks.push_back(prev.chunks[c]);
          b.vectors.insert(b.vectors.end(), prev.vectors.begin() + c * dim, prev.vectors.begin() + (c + 1) * dim);
          ++rep.chunks_reused;
        }
      } else {
        rep.bytes_read += f.text.size();
        std::vector<Span> spans = cfg.chunk == PLANRT_CHUNK_SEMANTIC
                                      ? chunkSemantic(f.text, cfg.chunk_size, cfg.chunk_threshold, *embedder)
                                      : chunkText(cfg.chunk, f.text, cfg.chunk_size, cfg.chunk_overlap);
        for (const Span &sp : spans) {
          Chunk c;
          c.file = f.name;
          c.begin = sp.begin;
          c.end = sp.end;
          c.text = f.text.substr(sp.begin, sp.end - sp.begin);
          c.sha256 = sha256Hex(c.text);
          b.vectors.resize(b.vectors.size() + dim);
          float *v = b.vectors.data() + b.vectors.size() - dim;
          if (!embedder->embed(c.text, v))
            std::fill(v, v + dim, 0.0f);
          b.chunks.push_back(std::move(c));
          ++rep.chunks_embedded;
        }
      }
      b.sources.push_back({{"file", f.name},
                           {"sha256", f.sha256},
                           {"size", f.text.size()},
                           {"first", first},
                           {"count", b.chunks.size() - first}});
      if (progress)
        drawProgress(fi + 1, files.size());
    }
    for (const auto &[name, entry] : prev.files)
      rep.files_removed += !seen.count(name);
    rep.files = files.size();
    rep.chunks = b.chunks.size();
    if (b.chunks.empty())
      return planrt::fail(PLANRT_ERR_ARG, "empty corpus: the %zu matching files hold no text", files.size());
    if (!prev.files.empty() && rep.files_added + rep.files_changed + rep.files_removed == 0) {
      if (report)
        *report = rep; // the store already holds exactly this corpus: left as it is
      return PLANRT_OK;
    }

    if (planrt_status s = makeDirs(dirName(dir)))
      return s;
    planrt_status s = writeStore(cfg, fingerprint, b, *embedder, tmp);
    if (s == PLANRT_OK)
      s = swapIn(tmp, dir);
    if (s == PLANRT_OK && report)
      *report = rep;
    return s;
  } catch (const std::exception &e) {
    return planrt::fail(PLANRT_ERR_IO, "ingest failed: %s", e.what());
  }
}

planrt_status planrt_retrieval_verify(const planrt_retrieval_config *cfg) {
  if (!cfg)
    return planrt::fail(PLANRT_ERR_ARG, "planrt_retrieval_verify: no configuration");
  try {
    Store store;
    return openStore(*cfg, &store);
  } catch (const std::exception &e) {
    return planrt::fail(PLANRT_ERR_FORMAT, "verify failed: %s", e.what());
  }
}

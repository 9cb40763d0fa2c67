// Internal: the store directory, verified and loaded.
#ifndef PLANRT_RETRIEVAL_STORE_H
#define PLANRT_RETRIEVAL_STORE_H

#include "retrieval.h"

#include <faiss/Index.h>
#include <xapian.h>

#include <memory>

namespace planrt::rag {

struct Chunk {
  std::string file, sha256, text;
  uint64_t begin = 0, end = 0;
};

struct Store {
  std::string dir;
  int64_t dim = 0;
  std::vector<Chunk> chunks;
  std::unique_ptr<faiss::Index> index;
  Xapian::Database keyword;
  std::unique_ptr<Embedder> embedder; ///< the configuration's, for queries
};

/// Verifies the store (manifest checksum, graph, fingerprint, every file's sha256,
/// no file missing or added) before any of it is parsed; then, if `store` is not
/// null, loads it and checks that chunks, vectors, FAISS and Xapian agree.
planrt_status openStore(const planrt_retrieval_config &cfg, Store *store);

/// The Xapian stemmer both sides use (part of the configuration fingerprint).
constexpr const char *kStemmer = "english";

} // namespace planrt::rag

#endif // PLANRT_RETRIEVAL_STORE_H

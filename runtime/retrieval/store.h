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

/// A new handle on the store's Xapian database: a Xapian::Database is not to be
/// shared between threads, so each of serve's searchers opens its own.
Xapian::Database openKeyword(const Store &store);

/// A query's hits and their guard flags (each hit's `flags` points into `flags`).
struct Answer {
  std::vector<planrt_hit> hits;
  std::vector<std::vector<planrt_guard_flag>> flags;
};

/// Runs a query against a loaded store (planrt_retriever_query's behaviour). The
/// store is only read; `keyword`, `embedder` and `reranker` are the caller's, so
/// that threads with their own share one store (`serve`).
planrt_status search(const planrt_retrieval_config &cfg, const Store &store, Xapian::Database &keyword,
                     Embedder &embedder, Reranker *reranker, const char *text, int64_t k, planrt_search_kind mode,
                     planrt_fusion fusion, Answer &out);

/// The Xapian stemmer both sides use (part of the configuration fingerprint).
constexpr const char *kStemmer = "english";

} // namespace planrt::rag

#endif // PLANRT_RETRIEVAL_STORE_H

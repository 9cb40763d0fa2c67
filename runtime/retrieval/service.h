// Internal: a retrieval graph's store as `serve` holds it (serve.cpp): loaded once,
// shared read-only by every worker, each request leasing a searcher of its own (a
// Xapian handle, the embedder, the re-ranker), and swapped for a re-ingested store
// without failing a request. Used by a retrieval executable's server and by a
// grounded generate executable's (serve_generate.cpp).
#ifndef PLANRT_RETRIEVAL_SERVICE_H
#define PLANRT_RETRIEVAL_SERVICE_H

#include "http.h"
#include "retrieval.h"

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace planrt::rag {

/// Objects that one request at a time uses (a searcher, a decoder): a request
/// leases one and gives it back; with as many as the server has threads, a lease
/// never waits.
template <class T> class Pool {
public:
  void add(std::unique_ptr<T> t) {
    std::lock_guard<std::mutex> lock(m);
    idle.push_back(std::move(t));
  }
  class Lease {
  public:
    explicit Lease(Pool &p) : pool(p) {
      std::unique_lock<std::mutex> lock(p.m);
      p.freed.wait(lock, [&] { return !p.idle.empty(); });
      item = std::move(p.idle.back());
      p.idle.pop_back();
    }
    ~Lease() {
      std::lock_guard<std::mutex> lock(pool.m);
      pool.idle.push_back(std::move(item));
      pool.freed.notify_one();
    }
    Lease(const Lease &) = delete;
    Lease &operator=(const Lease &) = delete;
    T &operator*() { return *item; }
    T *operator->() { return item.get(); }

  private:
    Pool &pool;
    std::unique_ptr<T> item;
  };

private:
  std::mutex m;
  std::condition_variable freed;
  std::vector<std::unique_ptr<T>> idle;
};

struct Snapshot;

class Service {
public:
  /// `searchers`: how many requests may search at once (serve's --engines).
  Service(const planrt_retrieval_config &cfg, int searchers) : cfg(cfg), searchers(searchers) {}
  ~Service() { unwatch(); }

  /// Opens the store (verified) with its searchers and makes it the current one.
  planrt_status open();
  size_t chunks();
  uint64_t generation();

  /// POST /query: the JSON of `query --json`.
  serve::json query(const serve::Request &req);
  /// POST /reload: re-ingest (unless {"ingest": false}) and swap.
  serve::json reload(const serve::Request &req);
  /// The store's part of GET /health and GET /metrics.
  serve::json health();
  std::string metrics();
  /// A grounded prompt from the current store (planrt_retrieval_ground's, without
  /// opening the store per call).
  planrt_status ground(const std::string &question, const std::string &instructions, int64_t k,
                       std::string &prompt, std::string &report);

  /// Swaps in a store that `ingest` replaced on disk, checking twice a second.
  void watch();
  void unwatch();

private:
  std::shared_ptr<Snapshot> now();
  std::string seenIdentity();
  [[noreturn]] void failedReload(const std::string &why);

  planrt_retrieval_config cfg;
  int searchers;
  std::mutex swap, reloading, stopping;
  std::shared_ptr<Snapshot> current;
  std::string seen;
  uint64_t generations = 0;
  std::atomic<uint64_t> reloadsOk{0}, reloadsFailed{0};
  std::condition_variable stopped;
  bool stop = false;
  std::thread watcher;
};

} // namespace planrt::rag

#endif // PLANRT_RETRIEVAL_SERVICE_H

// `EXE serve`: a retrieval graph over HTTP (docs/SERVING.md). One loaded store is
// shared read-only by every worker (its chunks and FAISS index); each worker leases
// a searcher of its own (a Xapian handle, the embedder, the re-ranker). A reload,
// asked for (POST /reload) or seen on disk (a store that `ingest` replaced), opens
// the new store beside the old one and swaps it in: requests in flight finish on
// the old one, which is freed with its last lease.
#include "answer.h"
#include "http.h"
#include "retrieval.h"
#include "service.h"
#include "status.h"
#include "store.h"

#include <omp.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <sys/stat.h>
#include <thread>

namespace planrt::rag {

using serve::HttpError;
using serve::json;

/// What one worker needs of its own to search a shared store.
struct Searcher {
  Xapian::Database keyword;
  std::unique_ptr<Embedder> embedder;
  std::unique_ptr<Reranker> reranker;
  Answer answer;
};

/// A loaded store and its searchers.
struct Snapshot {
  Store store;
  uint64_t generation = 0;
  Pool<Searcher> searchers;
};

namespace {

using Lease = Pool<Searcher>::Lease;

/// The store's identity on disk: its manifest's inode and modification time.
std::string storeIdentity(const std::string &dir) {
  struct stat st{};
  if (::stat((dir + "/MANIFEST.json").c_str(), &st) != 0)
    return "";
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_mtim.tv_sec) +
         "." + std::to_string(st.st_mtim.tv_nsec);
}

planrt_search_kind parseMode(const std::string &m, planrt_search_kind fallback) {
  if (!m.empty() && !searchKind(m, fallback))
    throw HttpError(400, "\"mode\" takes vector, keyword or hybrid");
  return fallback;
}

planrt_fusion parseFusion(const std::string &f, planrt_fusion fallback) {
  if (!f.empty() && !fusionKind(f, fallback))
    throw HttpError(400, "\"fusion\" takes weighted or rrf");
  return fallback;
}

/// FAISS runs single-threaded in a worker: the pool is the parallelism.
void oneFaissThread() {
  static thread_local bool set = (omp_set_num_threads(1), true);
  (void)set;
}

} // namespace

planrt_status Service::open() {
  auto snap = std::make_shared<Snapshot>();
  std::string before = storeIdentity(storePath(cfg));
  if (planrt_status s = openStore(cfg, &snap->store))
    return s;
  // Every Xapian handle first, right after the store was verified, each checked to be
  // the verified database (an ingest may replace the directory at any time); then the
  // models, which may take long.
  std::vector<std::unique_ptr<Searcher>> made;
  try {
    const Xapian::Database &verified = snap->store.keyword;
    for (int i = 0; i < searchers; ++i) {
      auto s = std::make_unique<Searcher>();
      s->keyword = openKeyword(snap->store);
      if (s->keyword.get_uuid() != verified.get_uuid() || s->keyword.get_revision() != verified.get_revision() ||
          s->keyword.get_doccount() != verified.get_doccount())
        return planrt::fail(PLANRT_ERR_IO, "%s: the store changed while it was being opened; try again",
                            snap->store.dir.c_str());
      made.push_back(std::move(s));
    }
  } catch (const Xapian::Error &e) {
    return planrt::fail(PLANRT_ERR_FORMAT, "%s: Xapian cannot open it: %s", snap->store.dir.c_str(),
                        e.get_description().c_str());
  }
  for (std::unique_ptr<Searcher> &s : made) {
    // The store's embedder shared where it can be (a fastText store's model is the
    // store's own), else one of the searcher's own.
    s->embedder = snap->store.embedder->share();
    if (!s->embedder)
      if (planrt_status st = openEmbedder(cfg, s->embedder))
        return st;
    if (planrt_status st = openReranker(cfg, s->reranker))
      return st;
    snap->searchers.add(std::move(s));
  }
  std::lock_guard<std::mutex> lock(swap);
  snap->generation = ++generations;
  seen = before;
  current = snap;
  return PLANRT_OK;
}

std::shared_ptr<Snapshot> Service::now() {
  std::lock_guard<std::mutex> lock(swap);
  return current;
}

size_t Service::chunks() { return now()->store.chunks.size(); }
uint64_t Service::generation() { return now()->generation; }

json Service::query(const serve::Request &req) {
  const json &b = req.body;
  serve::onlyFields(b, {"text", "k", "mode", "fusion", "rerank"});
  std::string text = serve::textField(b, "text", true, size_t(1) << 20);
  if (text.empty())
    throw HttpError(400, "\"text\" is empty");
  int64_t k = serve::intField(b, "k", 0, 1, 10000);
  planrt_search_kind mode = parseMode(serve::textField(b, "mode", false, 16), cfg.search);
  planrt_fusion fusion = parseFusion(serve::textField(b, "fusion", false, 16), cfg.fusion);
  const json &rerank = serve::field(b, "rerank");
  if (!rerank.is_null() && !rerank.is_boolean())
    throw HttpError(400, "\"rerank\" must be true or false");
  oneFaissThread();
  std::shared_ptr<Snapshot> snap = now();
  Lease lease(snap->searchers);
  Searcher &s = *lease;
  Reranker *reranker = rerank.is_boolean() && !rerank.get<bool>() ? nullptr : s.reranker.get();
  if (search(cfg, snap->store, s.keyword, *s.embedder, reranker, text.c_str(), k, mode, fusion, s.answer))
    throw HttpError(500, planrt_last_error());
  if (serve::Clock::now() > req.deadline)
    throw HttpError(503, "the query took longer than the server's --timeout");
  return answerJson(cfg, text, mode, fusion, s.answer.hits.data(), s.answer.hits.size());
}

planrt_status Service::ground(const std::string &question, const std::string &instructions, int64_t k,
                              std::string &prompt, std::string &report) {
  oneFaissThread();
  std::shared_ptr<Snapshot> snap = now();
  Lease lease(snap->searchers);
  Searcher &s = *lease;
  if (planrt_status st = search(cfg, snap->store, s.keyword, *s.embedder, s.reranker.get(), question.c_str(), k,
                                cfg.search, cfg.fusion, s.answer))
    return st;
  return groundPrompt(cfg, s.answer.hits.data(), s.answer.hits.size(), question.c_str(), instructions.c_str(),
                      prompt, report);
}

json Service::reload(const serve::Request &req) {
  serve::onlyFields(req.body, {"ingest"});
  const json &ingest = serve::field(req.body, "ingest");
  if (!ingest.is_null() && !ingest.is_boolean())
    throw HttpError(400, "\"ingest\" must be true or false");
  bool reingest = ingest.is_null() || ingest.get<bool>();
  std::lock_guard<std::mutex> lock(reloading);
  auto t0 = serve::Clock::now();
  json out = json::object();
  planrt_ingest_report r{};
  if (reingest) {
    omp_set_num_threads(omp_get_num_procs()); // this worker's FAISS runs single-threaded otherwise
    planrt_status st = planrt_retrieval_ingest(&cfg, 0, &r);
    omp_set_num_threads(1);
    if (st != PLANRT_OK)
      failedReload(std::string("ingest failed: ") + planrt_last_error());
  }
  if (open() != PLANRT_OK)
    failedReload(planrt_last_error());
  ++reloadsOk;
  std::shared_ptr<Snapshot> snap = now();
  out["generation"] = snap->generation;
  out["chunks"] = snap->store.chunks.size();
  out["store"] = snap->store.dir;
  if (reingest)
    out["ingest"] = {{"files", r.files},         {"added", r.files_added},       {"changed", r.files_changed},
                     {"unchanged", r.files_unchanged}, {"removed", r.files_removed}, {"chunks", r.chunks},
                     {"embedded", r.chunks_embedded}, {"reused", r.chunks_reused}};
  else
    out["ingest"] = nullptr;
  out["seconds"] = std::chrono::duration<double>(serve::Clock::now() - t0).count();
  std::fprintf(stderr, "serve: store generation %llu: %zu chunks\n", (unsigned long long)snap->generation,
               snap->store.chunks.size());
  return out;
}

void Service::failedReload(const std::string &why) {
  ++reloadsFailed;
  throw HttpError(500, "reload failed (still serving generation " + std::to_string(now()->generation) + "): " + why);
}

json Service::health() {
  std::shared_ptr<Snapshot> snap = now();
  return {{"status", "ok"},
          {"graph", cfg.graph},
          {"store", snap->store.dir},
          {"chunks", snap->store.chunks.size()},
          {"generation", snap->generation}};
}

std::string Service::metrics() {
  std::shared_ptr<Snapshot> snap = now();
  return "# HELP planc_store_chunks Chunks in the store being served.\n# TYPE planc_store_chunks gauge\n"
         "planc_store_chunks " +
         std::to_string(snap->store.chunks.size()) +
         "\n# HELP planc_store_generation Stores opened since the start (1: the first).\n"
         "# TYPE planc_store_generation gauge\nplanc_store_generation " +
         std::to_string(snap->generation) +
         "\n# HELP planc_reloads_total Store reloads, by result.\n# TYPE planc_reloads_total counter\n"
         "planc_reloads_total{result=\"ok\"} " +
         std::to_string(reloadsOk.load()) + "\nplanc_reloads_total{result=\"failed\"} " +
         std::to_string(reloadsFailed.load()) + "\n";
}

std::string Service::seenIdentity() {
  std::lock_guard<std::mutex> lock(swap);
  return seen;
}

void Service::watch() {
  watcher = std::thread([this] {
    std::unique_lock<std::mutex> lock(stopping);
    while (!stopped.wait_for(lock, std::chrono::milliseconds(500), [&] { return stop; })) {
      // The identity is read under the reload lock: read before it, it may be the store
      // that a POST /reload replaced meanwhile, and reopen the new one for nothing.
      std::lock_guard<std::mutex> r(reloading);
      std::string id = storeIdentity(storePath(cfg));
      if (id.empty() || id == seenIdentity())
        continue;
      planrt_status st;
      try {
        st = open();
      } catch (const std::exception &e) { // a failed reload, never the server's end
        st = planrt::fail(PLANRT_ERR_FORMAT, "%s: %s", storePath(cfg).c_str(), e.what());
      }
      if (st == PLANRT_OK) {
        ++reloadsOk;
        std::fprintf(stderr, "serve: the store changed on disk: generation %llu, %zu chunks\n",
                     (unsigned long long)generation(), chunks());
      } else {
        ++reloadsFailed;
        std::lock_guard<std::mutex> l(swap);
        seen = id; // not again until it changes again
        std::fprintf(stderr,
                     "serve: the store changed on disk but cannot be opened (still serving the last one): %s\n",
                     planrt_last_error());
      }
    }
  });
}

void Service::unwatch() {
  {
    std::lock_guard<std::mutex> lock(stopping);
    stop = true;
  }
  stopped.notify_all();
  if (watcher.joinable())
    watcher.join();
}

int serveRetrieval(const planrt_retrieval_config &cfg, int argc, char **argv, int first) {
  serve::Options o;
  std::string error;
  if (!serve::parseOptions(argc, argv, first, o, error)) {
    std::fprintf(stderr, "planrt: error: %s (see --help)\n", error.c_str());
    return 2;
  }
  if (!(error = serve::prepare(o)).empty()) { // before the store is loaded
    std::fprintf(stderr, "planrt: error: serve: %s\n", error.c_str());
    return 1;
  }
  int threads = serve::workerThreads(o), engines = serve::engineCount(o);
  Service service(cfg, engines);
  if (service.open() != PLANRT_OK) {
    std::fprintf(stderr, "planrt: error: %s\n", planrt_last_error());
    return 1;
  }
  std::string what = std::string("retrieval graph '") + cfg.graph + "', " + std::to_string(service.chunks()) +
                     " chunks, " + std::to_string(threads) + " threads, " + std::to_string(engines) +
                     " searchers";
  std::vector<serve::Route> routes = {
      {"POST", "/query", [&](const serve::Request &r) { return service.query(r); }},
      {"POST", "/reload", [&](const serve::Request &r) { return service.reload(r); }},
      {"GET", "/health", [&](const serve::Request &) { return service.health(); }},
      {"POST", "/generate",
       [&](const serve::Request &) -> json {
         throw HttpError(404, std::string("retrieval graph '") + cfg.graph +
                                  "' does not generate: POST /generate is served by a generate executable");
       }},
  };
  service.watch();
  int rc = serve::run(o, what, routes, [&] { return service.metrics(); }, [&] { service.unwatch(); });
  service.unwatch(); // also when run refused to start
  return rc;
}

} // namespace planrt::rag

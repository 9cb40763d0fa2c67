// planrt_retrieval_main: the command line of every retrieval executable.
#include "answer.h"
#include "http.h"
#include "retrieval.h"
#include "status.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>

using json = nlohmann::ordered_json;
using namespace planrt::rag;

namespace {

void usage(FILE *to, const char *argv0, const planrt_retrieval_config &cfg) {
  const char *slash = std::strrchr(argv0, '/');
  const char *exe = slash ? slash + 1 : argv0;
  std::fprintf(to,
               "usage: %s ingest [--quiet]\n"
               "       %s query TEXT [--k N] [--json] [--mode vector|keyword|hybrid] [--fusion weighted|rrf]\n"
               "                [--no-rerank]\n"
               "       %s verify\n"
               "       %s serve [--listen HOST:PORT] [--token-file FILE] [--threads N] [options]\n"
               "Retrieval graph '%s', store %s (docs/RETRIEVAL.md).\n"
               "  ingest   read, verify against the manifest, chunk and embed the corpus; rebuild the store\n"
               "           atomically, re-embedding only files that changed\n"
               "  query    search the store; retrieved text is quoted data with provenance, and\n"
               "           instruction-like spans are flagged (guard = quarantine); --no-rerank skips a\n"
               "           model re-ranker\n"
               "  verify   check every file of the store against its checksummed manifest\n"
               "  serve    answer POST /query (the JSON of query --json), POST /reload, GET /health and\n"
               "           GET /metrics over HTTP until SIGTERM (docs/SERVING.md):\n%s",
               exe, exe, exe, exe, planrt::serve::kOptionsUsage, cfg.graph ? cfg.graph : "?", cfg.store ? cfg.store : "?");
}

int bad(const std::string &message) {
  std::fprintf(stderr, "planrt: error: %s (see --help)\n", message.c_str());
  return 2;
}

int failed() {
  std::fprintf(stderr, "planrt: error: %s\n", planrt_last_error());
  return 1;
}

int ingest(const planrt_retrieval_config &cfg, bool quiet) {
  auto t0 = std::chrono::steady_clock::now();
  planrt_ingest_report r{};
  if (planrt_retrieval_ingest(&cfg, !quiet && ::isatty(2), &r) != PLANRT_OK)
    return failed();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("ingested %llu files (%llu added, %llu changed, %llu unchanged, %llu removed): %llu chunks "
              "(%llu embedded, %llu reused), %.2f MB read in %.2f s; store %s\n",
              (unsigned long long)r.files, (unsigned long long)r.files_added, (unsigned long long)r.files_changed,
              (unsigned long long)r.files_unchanged, (unsigned long long)r.files_removed, (unsigned long long)r.chunks,
              (unsigned long long)r.chunks_embedded, (unsigned long long)r.chunks_reused, r.bytes_read / 1e6, s,
              storePath(cfg).c_str());
  return 0;
}

int query(const planrt_retrieval_config &cfg, const std::string &text, int64_t k, bool asJson, planrt_search_kind mode,
          planrt_fusion fusion) {
  planrt_retriever *r = nullptr;
  if (planrt_retriever_open(&cfg, &r) != PLANRT_OK)
    return failed();
  const planrt_hit *hits;
  size_t count;
  planrt_status s = planrt_retriever_query(r, text.c_str(), k, mode, fusion, &hits, &count);
  if (s != PLANRT_OK) {
    planrt_retriever_close(r);
    return failed();
  }
  bool guarded = cfg.guard == PLANRT_GUARD_QUARANTINE;
  if (asJson) {
    json out = answerJson(cfg, text, mode, fusion, hits, count);
    std::printf("%s\n", out.dump(1, ' ', false, json::error_handler_t::replace).c_str());
  } else {
    for (size_t i = 0; i < count; ++i) {
      const planrt_hit &h = hits[i];
      std::printf("[%zu] %s bytes %llu-%llu sha256 %.16s score %.4f (vector %s, keyword %s", i + 1, h.file,
                  (unsigned long long)h.begin, (unsigned long long)h.end, h.sha256, h.score,
                  h.vector_rank ? ("#" + std::to_string(h.vector_rank)).c_str() : "-",
                  h.keyword_rank ? ("#" + std::to_string(h.keyword_rank)).c_str() : "-");
      if (h.fused_rank)
        std::printf(", re-ranked from #%d, log-likelihood %.4f", h.fused_rank, h.rerank_score);
      std::printf(")\n");
      if (guarded) {
        std::vector<Flag> flags = hitFlags(h);
        for (const Flag &f : flags)
          std::printf("    flagged %s (score %.2f) at bytes %u-%u of the chunk\n", f.kind, f.score, f.begin, f.end);
        std::printf("%s\n", guardQuote(std::string_view(h.text, h.text_len), flags).c_str());
      } else {
        std::printf("%.*s\n", int(h.text_len), h.text);
      }
    }
    if (count == 0)
      std::printf("no results\n");
  }
  planrt_retriever_close(r);
  return 0;
}

} // namespace

int planrt_retrieval_main(int argc, char **argv, const planrt_retrieval_config *cfgp) {
  if (!cfgp) {
    std::fprintf(stderr, "planrt: error: the executable has no retrieval configuration\n");
    return 1;
  }
  const planrt_retrieval_config &cfg = *cfgp;
  if (argc < 2) {
    usage(stderr, argc > 0 ? argv[0] : "retrieval", cfg);
    return 2;
  }
  std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    usage(stdout, argv[0], cfg);
    return 0;
  }
  try {
    if (cmd == "ingest") {
      bool quiet = false;
      for (int i = 2; i < argc; ++i) {
        if (std::strcmp(argv[i], "--quiet") == 0)
          quiet = true;
        else
          return bad(std::string("ingest: unknown argument '") + argv[i] + "'");
      }
      return ingest(cfg, quiet);
    }
    if (cmd == "serve")
      return serveRetrieval(cfg, argc, argv, 2);
    if (cmd == "verify") {
      if (argc > 2)
        return bad(std::string("verify: unknown argument '") + argv[2] + "'");
      if (planrt_retrieval_verify(&cfg) != PLANRT_OK)
        return failed();
      std::printf("store %s: ok (graph %s)\n", storePath(cfg).c_str(), cfg.graph);
      return 0;
    }
    if (cmd == "query") {
      std::string text;
      bool haveText = false, asJson = false;
      int64_t k = 0;
      planrt_search_kind mode = cfg.search;
      planrt_retrieval_config run = cfg;
      planrt_fusion fusion = cfg.fusion;
      for (int i = 2; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&](const char *flag) -> const char * { return i + 1 < argc ? argv[++i] : nullptr; };
        if (a == "--json") {
          asJson = true;
        } else if (a == "--k") {
          const char *v = value("--k");
          char *end = nullptr;
          long long n = v ? std::strtoll(v, &end, 10) : 0;
          if (!v || *end || n < 1 || n > 100000)
            return bad("--k needs a count in [1, 100000]");
          k = n;
        } else if (a == "--mode") {
          const char *v = value("--mode");
          if (!searchKind(v ? v : "", mode))
            return bad("--mode takes vector, keyword or hybrid");
        } else if (a == "--fusion") {
          const char *v = value("--fusion");
          if (!fusionKind(v ? v : "", fusion))
            return bad("--fusion takes weighted or rrf");
        } else if (a == "--no-rerank") {
          run.rerank = PLANRT_RERANK_NONE;
        } else if (!a.empty() && a[0] == '-' && a != "-") {
          return bad("query: unknown option '" + a + "'");
        } else if (!haveText) {
          text = a;
          haveText = true;
        } else {
          return bad("query takes one TEXT (quote it)");
        }
      }
      if (!haveText)
        return bad("query needs a TEXT");
      return query(run, text, k, asJson, mode, fusion);
    }
  } catch (const std::exception &e) {
    planrt::fail(PLANRT_ERR_ARG, "internal error: %s", e.what());
    return failed();
  }
  return bad("unknown command '" + cmd + "'");
}

// rag_manpages: retrieval quality and speed of planrt_retrieval on rendered man
// pages (test/bench/rag_manpages_prepare.sh), keyword (Xapian BM25 alone), vector
// (FAISS alone) and hybrid fusions side by side, in one run. Each query is a page's
// NAME description; the relevant document is that page. Queries alternate between
// a dev half (where fusion weights are chosen) and a test half (reported).
//
//   rag_manpages WORKDIR [--factory F] [--nprobe N] [--ef-search N] [--ef-construction N] [--dim D]
//                [--chunk N] [--overlap N] [--semantic THRESHOLD] [--ingest-only 1]
//                [--fasttext skipgram|cbow] [--epoch N] [--min-count N] [--bucket N] [--threads N]
// --fasttext embeds with fasttext(dim: D, model: …) trained on the corpus (D defaults to 100 then).
// --dump FILE writes each query's 50 best chunks by each side alone (chunk, file, score) as
// JSON lines, for studying fusions offline, instead of measuring the settings (on the store
// as a previous run left it: ingested again only if the corpus changed).
#include "planrt_retrieval.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Query {
  std::string file, text;
};

struct Setting {
  std::string name;
  planrt_search_kind mode;
  planrt_fusion fusion;
  double wv, wk;
};

struct Result {
  double recall[2] = {0, 0}, mrr[2] = {0, 0}; // [dev, test]
  double p50 = 0, p99 = 0;                    // ms, k = 10 with the guard on
};

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

void die(const char *what) {
  std::fprintf(stderr, "rag_manpages: %s: %s\n", what, planrt_last_error());
  std::exit(1);
}

/// The command line (defaults: hashing(dim: 384); fasttext(…)'s as the language's).
struct Options {
  std::string work, factory = "Flat";
  long nprobe = 8, dim = 0, chunk = 256, overlap = 32, efSearch = 0, efConstruction = 0;
  std::string fasttext; // --fasttext MODEL: fasttext(…) instead of hashing(…)
  long epoch = 10, minCount = 2, bucket = 100000, threads = 1; // the language's defaults
  double semantic = -1; // --semantic THRESHOLD: chunk = semantic(chunk, threshold)
  bool ingestOnly = false;
  std::string dump;

  void parse(int argc, char **argv) {
    work = argv[1];
    for (int i = 2; i + 1 < argc; i += 2) {
      std::string a = argv[i];
      const char *v = argv[i + 1];
      if (a == "--factory")
        factory = v;
      else if (a == "--fasttext")
        fasttext = v;
      else if (a == "--dump")
        dump = v;
      else if (a == "--semantic")
        semantic = std::atof(v);
      else if (a == "--ingest-only")
        ingestOnly = std::atoi(v) != 0;
      else
        for (auto [name, out] : {std::pair<const char *, long *>{"--nprobe", &nprobe}, {"--dim", &dim},
                                 {"--chunk", &chunk}, {"--overlap", &overlap}, {"--ef-search", &efSearch},
                                 {"--ef-construction", &efConstruction}, {"--epoch", &epoch},
                                 {"--min-count", &minCount}, {"--bucket", &bucket}, {"--threads", &threads}})
          if (a == name)
            *out = std::atol(v);
    }
    if (dim == 0)
      dim = fasttext.empty() ? 384 : 100;
  }

  /// The store's directory name, one per configuration.
  std::string storeName() const {
    std::string store = "store-" + (fasttext.empty() ? "" : fasttext + "-" + std::to_string(epoch) + "-") +
                        std::to_string(dim) + "-" + std::to_string(chunk) +
                        (semantic >= 0 ? "-semantic" + std::to_string(int(semantic * 100)) : "");
    for (char c : factory)
      store += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    return store;
  }

  std::string embedText() const {
    return fasttext.empty() ? "hashing(dim: " + std::to_string(dim) + ")"
                            : "fasttext(dim: " + std::to_string(dim) + ", model: " + fasttext + ", epoch: " +
                                  std::to_string(epoch) + ", min_count: " + std::to_string(minCount) +
                                  ", bucket: " + std::to_string(bucket) + ", threads: " + std::to_string(threads) +
                                  ")";
  }
};

/// The graph over WORKDIR/corpus (strings point into `o` and `store`).
planrt_retrieval_config configure(const Options &o, const std::string &store) {
  static const char *corpus[] = {"corpus/*.txt"};
  planrt_retrieval_config cfg{};
  cfg.graph = "manpages";
  cfg.base_dir = o.work.c_str();
  cfg.corpus = corpus;
  cfg.corpus_count = 1;
  cfg.manifest = "MANIFEST.sha256";
  cfg.max_file_bytes = 64u << 20;
  cfg.chunk = o.semantic >= 0 ? PLANRT_CHUNK_SEMANTIC : PLANRT_CHUNK_TOKENS;
  cfg.chunk_size = o.chunk;
  cfg.chunk_overlap = o.semantic >= 0 ? 0 : o.overlap;
  cfg.chunk_threshold = o.semantic >= 0 ? o.semantic : 0;
  cfg.embed = o.fasttext.empty() ? PLANRT_EMBED_HASHING : PLANRT_EMBED_FASTTEXT;
  cfg.embed_dim = o.dim;
  cfg.fasttext_model = o.fasttext.c_str();
  cfg.fasttext_epoch = o.epoch;
  cfg.fasttext_min_count = o.minCount;
  cfg.fasttext_minn = 3;
  cfg.fasttext_maxn = 6;
  cfg.fasttext_bucket = o.bucket;
  cfg.fasttext_threads = o.threads;
  cfg.index_factory = o.factory.c_str();
  cfg.metric = PLANRT_METRIC_IP;
  cfg.nprobe = o.nprobe;
  cfg.ef_search = o.efSearch;
  cfg.ef_construction = o.efConstruction;
  cfg.search = PLANRT_SEARCH_HYBRID;
  cfg.top = 50;
  cfg.vector_weight = 0.5;
  cfg.keyword_weight = 0.5;
  cfg.guard = PLANRT_GUARD_OFF;
  cfg.store = store.c_str();
  return cfg;
}

std::vector<Query> readQueries(const std::string &work) {
  std::vector<Query> queries;
  std::ifstream in(work + "/queries.tsv");
  std::string line;
  while (std::getline(in, line)) {
    size_t tab = line.find('\t');
    if (tab != std::string::npos)
      queries.push_back({line.substr(0, tab), line.substr(tab + 1)});
  }
  return queries;
}

/// Ingests (timed), prints what was ingested, then ingests again with nothing changed.
void ingest(const Options &o, const planrt_retrieval_config &cfg, size_t queries) {
  planrt_ingest_report rep{};
  auto t0 = Clock::now();
  if (planrt_retrieval_ingest(&cfg, 0, &rep) != PLANRT_OK)
    die("ingest");
  double ingestS = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("# rag_manpages: %llu pages, %.1f MB, %llu chunks (%s(%ld, overlap: %ld)), %s, "
              "faiss(\"%s\", ip, nprobe: %ld, ef_search: %ld, ef_construction: %ld), %zu queries (%zu dev / %zu test)\n",
              (unsigned long long)rep.files, rep.bytes_read / 1e6, (unsigned long long)rep.chunks,
              o.semantic >= 0 ? "semantic" : "tokens", o.chunk, long(cfg.chunk_overlap), o.embedText().c_str(),
              o.factory.c_str(), o.nprobe, o.efSearch, o.efConstruction, queries, (queries + 1) / 2, queries / 2);
  std::printf("ingest: %.2f s, %.2f MB/s, %.0f chunks/s\n\n", ingestS, rep.bytes_read / 1e6 / ingestS,
              rep.chunks / ingestS);
  // Again with nothing changed: every chunk and vector is reused; the indexes are rebuilt.
  planrt_ingest_report again{};
  t0 = Clock::now();
  if (planrt_retrieval_ingest(&cfg, 0, &again) != PLANRT_OK)
    die("re-ingest");
  std::printf("re-ingest, nothing changed: %.2f s (%llu chunks reused, %llu embedded)\n",
              std::chrono::duration<double>(Clock::now() - t0).count(), (unsigned long long)again.chunks_reused,
              (unsigned long long)again.chunks_embedded);
}

/// --dump: each query's 50 best chunks by each side alone, as JSON lines.
void dumpSides(const planrt_retrieval_config &cfg, const std::vector<Query> &queries, const std::string &path) {
  planrt_retriever *r;
  if (planrt_retriever_open(&cfg, &r) != PLANRT_OK)
    die("open");
  std::ofstream out(path);
  for (const Query &q : queries) {
    out << "{\"file\": \"" << q.file << "\"";
    for (auto [mode, name] : {std::pair{PLANRT_SEARCH_VECTOR, "vector"}, std::pair{PLANRT_SEARCH_KEYWORD, "keyword"}}) {
      const planrt_hit *hits;
      size_t count;
      if (planrt_retriever_query(r, q.text.c_str(), 50, mode, PLANRT_FUSION_WEIGHTED, &hits, &count) != PLANRT_OK)
        die("query");
      out << ", \"" << name << "\": [";
      for (size_t h = 0; h < count; ++h)
        out << (h ? ", " : "") << "[" << hits[h].chunk << ", \"" << hits[h].file << "\", "
            << (mode == PLANRT_SEARCH_VECTOR ? hits[h].vector_score : hits[h].keyword_score) << "]";
      out << "]";
    }
    out << "}\n";
  }
  planrt_retriever_close(r);
}

/// One setting's quality on both halves (k = 50, guard off) and latency (k = 10, guard on).
Result measure(planrt_retrieval_config c, const Setting &s, const std::vector<Query> &queries) {
  c.vector_weight = s.wv;
  c.keyword_weight = s.wk;
  planrt_retriever *r;
  if (planrt_retriever_open(&c, &r) != PLANRT_OK)
    die("open");
  Result res;
  size_t n[2] = {0, 0};
  for (size_t qi = 0; qi < queries.size(); ++qi) {
    const planrt_hit *hits;
    size_t count;
    if (planrt_retriever_query(r, queries[qi].text.c_str(), 50, s.mode, s.fusion, &hits, &count) != PLANRT_OK)
      die("query");
    // Documents in the order of their best chunk; the first 10 count.
    std::vector<std::string> docs;
    std::set<std::string> seen;
    for (size_t h = 0; h < count && docs.size() < 10; ++h)
      if (seen.insert(hits[h].file).second)
        docs.push_back(hits[h].file);
    int half = int(qi % 2);
    ++n[half];
    for (size_t d = 0; d < docs.size(); ++d)
      if (docs[d] == queries[qi].file) {
        res.recall[half] += 1;
        res.mrr[half] += 1.0 / double(d + 1);
        break;
      }
  }
  for (int h = 0; h < 2; ++h)
    res.recall[h] /= double(n[h]), res.mrr[h] /= double(n[h]);
  planrt_retriever_close(r);
  // Latency as a user sees it: k = 10, guard on.
  c.guard = PLANRT_GUARD_QUARANTINE;
  if (planrt_retriever_open(&c, &r) != PLANRT_OK)
    die("open");
  std::vector<double> ms;
  for (const Query &q : queries) {
    const planrt_hit *hits;
    size_t count;
    auto a = Clock::now();
    if (planrt_retriever_query(r, q.text.c_str(), 10, s.mode, s.fusion, &hits, &count) != PLANRT_OK)
      die("query");
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - a).count());
  }
  res.p50 = percentile(ms, 0.5);
  res.p99 = percentile(ms, 0.99);
  planrt_retriever_close(r);
  return res;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: rag_manpages WORKDIR [--factory F] [--nprobe N] [--ef-search N] [--ef-construction N] [--dim D]\n"
                 "                    [--chunk N] [--overlap N] [--semantic THRESHOLD] [--fasttext skipgram|cbow]\n"
                 "                    [--epoch N] [--min-count N] [--bucket N] [--threads N]\n");
    return 2;
  }
  Options o;
  o.parse(argc, argv);
  std::string store = o.storeName();
  planrt_retrieval_config cfg = configure(o, store);

  // Ingest from scratch (the store is removed first), timed.
  std::string rm = "rm -rf '" + o.work + "/" + store + "'";
  if (o.dump.empty() && std::system(rm.c_str()) != 0) // --dump uses the store as it is
    return 1;
  std::vector<Query> queries = readQueries(o.work);
  ingest(o, cfg, queries.size());
  if (o.ingestOnly)
    return 0;
  if (!o.dump.empty()) {
    dumpSides(cfg, queries, o.dump);
    return 0;
  }

  std::vector<Setting> settings = {{"keyword (Xapian BM25 alone)", PLANRT_SEARCH_KEYWORD, PLANRT_FUSION_WEIGHTED, 0, 1},
                                   {"vector (FAISS alone)", PLANRT_SEARCH_VECTOR, PLANRT_FUSION_WEIGHTED, 1, 0},
                                   {"hybrid rrf (k = 60)", PLANRT_SEARCH_HYBRID, PLANRT_FUSION_RRF, 1, 1}};
  for (double wv : {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}) {
    char name[64];
    std::snprintf(name, sizeof name, "hybrid weighted %.1f / %.1f", wv, 1 - wv);
    settings.push_back({name, PLANRT_SEARCH_HYBRID, PLANRT_FUSION_WEIGHTED, wv, 1 - wv});
  }
  std::vector<Result> results;
  for (const Setting &s : settings)
    results.push_back(measure(cfg, s, queries));
  // The weighted fusion picked on the dev half.
  size_t best = 3;
  for (size_t i = 3; i < settings.size(); ++i)
    if (results[i].mrr[0] > results[best].mrr[0])
      best = i;
  std::printf("| search | dev recall@10 | dev MRR@10 | test recall@10 | test MRR@10 | p50 ms | p99 ms |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < settings.size(); ++i)
    std::printf("| %s%s | %.3f | %.3f | %.3f | %.3f | %.2f | %.2f |\n", settings[i].name.c_str(),
                i == best ? " (chosen on dev)" : "", results[i].recall[0], results[i].mrr[0], results[i].recall[1],
                results[i].mrr[1], results[i].p50, results[i].p99);
  return 0;
}

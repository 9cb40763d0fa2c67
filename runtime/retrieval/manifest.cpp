// planrt_retrieval_main_manifest: the entry of a planc-built retrieval executable.
// The graph's parameters come as the JSON manifest that `plan-retrieval-abi` writes
// (docs/RETRIEVAL.md, "The executable"); this reads it into a planrt_retrieval_config.
#include "manifest_json.h"
#include "retrieval.h"
#include "planrt_manifest.h"
#include "planrt_retrieval.h"
#include "status.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

using namespace planrt::manifest;

namespace {

const std::string kTop = "the manifest";
std::string str(const json &o, const char *key) { return text(o, key, kTop); }
int64_t num(const json &o, const char *key) { return integer(o, key, kTop, INT64_MIN, INT64_MAX); }
double real(const json &o, const char *key) { return planrt::manifest::real(o, key, kTop, -1e300, 1e300); }
/// The index of `value` in `names`, the enum's order in planrt_retrieval.h.
int choice(const json &o, const char *key, std::initializer_list<const char *> names) {
  std::string v = str(o, key);
  int i = 0;
  for (const char *n : names) {
    if (v == n)
      return i;
    ++i;
  }
  throw Malformed{std::string("'") + key + "' is '" + v + "'"};
}

} // namespace

namespace planrt::rag {

bool parseConfig(const char *manifest, const planrt_retrieval_models *models, Config &config) {
  planrt_retrieval_config &cfg = config.cfg;
  std::deque<std::string> &strings = config.strings;
  std::vector<const char *> &corpus = config.corpus;
  try {
    json m = json::parse(manifest ? manifest : "");
    if (str(m, "format") != planrt::manifest::format::kRetrieval)
      throw Malformed{std::string("format is not ") + planrt::manifest::format::kRetrieval};
    auto keep = [&](const std::string &s) -> const char * {
      strings.push_back(s);
      return strings.back().c_str();
    };
    cfg.graph = keep(str(m, "graph"));
    cfg.plan_file = keep(str(m, "plan_file"));
    cfg.plan_line = int(num(m, "plan_line"));
    cfg.base_dir = keep(str(m, "base_dir"));
    const json &c = field(m, "corpus", kTop);
    if (!c.is_array() || c.empty())
      throw Malformed{"'corpus' is not a non-empty array"};
    std::vector<std::string> patterns;
    for (const json &p : c) {
      if (!p.is_string())
        throw Malformed{"'corpus' holds a non-string"};
      patterns.push_back(p.get<std::string>());
    }
    for (const std::string &p : patterns)
      corpus.push_back(keep(p));
    cfg.corpus = corpus.data();
    cfg.corpus_count = corpus.size();
    std::string manifestPath = str(m, "manifest");
    cfg.manifest = manifestPath.empty() ? nullptr : keep(manifestPath);
    cfg.chunk = planrt_chunk_kind(choice(m, "chunk", {"tokens", "sentences", "paragraphs", "semantic"}));
    cfg.chunk_threshold = m.contains("chunk_threshold") ? real(m, "chunk_threshold") : 0;
    cfg.chunk_size = num(m, "chunk_size");
    cfg.chunk_overlap = num(m, "chunk_overlap");
    cfg.embed = planrt_embed_kind(choice(m, "embed", {"hashing", "model", "fasttext"}));
    cfg.embed_dim = num(m, "embed_dim");
    if (cfg.embed == PLANRT_EMBED_FASTTEXT) {
      const json &ft = field(m, "fasttext", kTop);
      const std::string at = "fasttext"; // errors name fasttext.epoch, …
      auto count = [&](const char *key) { return integer(ft, key, at, INT64_MIN, INT64_MAX); };
      cfg.fasttext_model = keep(text(ft, "model", at));
      cfg.fasttext_epoch = count("epoch");
      cfg.fasttext_min_count = count("min_count");
      cfg.fasttext_minn = count("minn");
      cfg.fasttext_maxn = count("maxn");
      cfg.fasttext_bucket = count("bucket");
      cfg.fasttext_threads = count("threads");
    }
    cfg.embed_model = keep(str(m, "embed_model"));
    cfg.embed_checkpoint = keep(str(m, "embed_checkpoint"));
    cfg.embed_pool = keep(str(m, "embed_pool"));
    cfg.index_factory = keep(str(m, "index"));
    cfg.metric = planrt_metric(choice(m, "metric", {"ip", "l2"}));
    cfg.nprobe = num(m, "nprobe");
    // Executables built before the HNSW keys existed run on: FAISS's defaults.
    cfg.ef_search = m.contains("ef_search") ? num(m, "ef_search") : 0;
    cfg.ef_construction = m.contains("ef_construction") ? num(m, "ef_construction") : 0;
    cfg.search = planrt_search_kind(choice(m, "search", {"vector", "keyword", "hybrid"}));
    cfg.vector_weight = real(m, "vector_weight");
    cfg.keyword_weight = real(m, "keyword_weight");
    cfg.top = num(m, "top");
    cfg.fusion = planrt_fusion(choice(m, "fusion", {"weighted", "rrf"}));
    cfg.rrf_k = num(m, "rrf_k");
    cfg.rerank = planrt_rerank_kind(choice(m, "rerank", {"none", "model"}));
    cfg.rerank_model = keep(str(m, "rerank_model"));
    cfg.rerank_checkpoint = keep(str(m, "rerank_checkpoint"));
    cfg.rerank_top = num(m, "rerank_top");
    cfg.models = models;
    cfg.guard = planrt_guard_kind(choice(m, "guard", {"quarantine", "off"}));
    cfg.store = keep(str(m, "store"));
  } catch (const Malformed &e) {
    planrt::fail(PLANRT_ERR_FORMAT, "the retrieval manifest is malformed: %s", e.what.c_str());
    return false;
  } catch (const std::exception &e) {
    planrt::fail(PLANRT_ERR_FORMAT, "the retrieval manifest is malformed: %s", e.what());
    return false;
  }
  return true;
}

planrt_status groundPrompt(const planrt_retrieval_config &cfg, const planrt_hit *hits, size_t count,
                           const char *question, const char *instructions, std::string &prompt, std::string &report) {
  bool quarantine = cfg.guard == PLANRT_GUARD_QUARANTINE;
  json docs = json::array();
  for (size_t i = 0; i < count; ++i) {
    json flags = json::array();
    for (size_t f = 0; f < hits[i].flag_count; ++f)
      flags.push_back({{"begin", hits[i].flags[f].begin},
                       {"end", hits[i].flags[f].end},
                       {"kind", hits[i].flags[f].kind},
                       {"score", hits[i].flags[f].score}});
    docs.push_back({{"file", hits[i].file},
                    {"begin", hits[i].begin},
                    {"end", hits[i].end},
                    {"sha256", hits[i].sha256},
                    {"score", hits[i].score},
                    {"flags", flags}});
    if (hits[i].fused_rank)
      docs.back()["rerank"] = {{"fused_rank", hits[i].fused_rank}, {"score", hits[i].rerank_score}};
  }
  prompt.clear();
  if (quarantine) {
    char *p = planrt_guard_prompt(instructions, question, hits, count);
    if (!p)
      return PLANRT_ERR_ARG;
    prompt = p;
    std::free(p);
  } else { // guard = off: the documents, then the question, as plain text
    for (size_t i = 0; i < count; ++i)
      prompt += std::string(hits[i].text, hits[i].text_len) + "\n\n";
    prompt += std::string(instructions) + "\n" + question + "\n";
  }
  json rep{{"graph", cfg.graph}, {"guard", quarantine ? "quarantine" : "off"}, {"documents", docs}};
  report = rep.dump(-1, ' ', false, json::error_handler_t::replace);
  return PLANRT_OK;
}

} // namespace planrt::rag

using planrt::rag::Config;
using planrt::rag::parseConfig;

extern "C" int planrt_retrieval_main_manifest(int argc, char **argv, const char *manifest,
                                              const planrt_retrieval_models *models) {
  static Config config; // borrowed for the whole run
  if (!parseConfig(manifest, models, config)) {
    std::fprintf(stderr, "planrt: error: %s\n", planrt_last_error());
    return 1;
  }
  return planrt_retrieval_main(argc, argv, &config.cfg);
}

extern "C" int planrt_retrieval_ground(const char *manifest, const planrt_retrieval_models *models,
                                       const char *question, const char *instructions, int64_t k, char **prompt,
                                       char **report) {
  Config config;
  if (!prompt || !report || !question || !instructions)
    return planrt::fail(PLANRT_ERR_ARG, "planrt_retrieval_ground: null argument");
  *prompt = *report = nullptr;
  if (!parseConfig(manifest, models, config))
    return PLANRT_ERR_FORMAT;
  planrt_retriever *r = nullptr;
  if (planrt_status s = planrt_retriever_open(&config.cfg, &r))
    return s;
  std::unique_ptr<planrt_retriever, void (*)(planrt_retriever *)> guard(r, planrt_retriever_close);
  const planrt_hit *hits = nullptr;
  size_t count = 0;
  if (planrt_status s = planrt_retriever_query(r, question, k, config.cfg.search, config.cfg.fusion, &hits, &count))
    return s;
  std::string text, repText;
  if (planrt_status s = planrt::rag::groundPrompt(config.cfg, hits, count, question, instructions, text, repText))
    return s;
  *prompt = strdup(text.c_str());
  *report = strdup(repText.c_str());
  if (!*prompt || !*report)
    return planrt::fail(PLANRT_ERR_ARG, "planrt_retrieval_ground: out of memory");
  return PLANRT_OK;
}

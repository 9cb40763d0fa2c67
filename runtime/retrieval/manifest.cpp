// planrt_retrieval_main_manifest: the entry of a planc-built retrieval executable.
// The graph's parameters come as the JSON manifest that `plan-retrieval-abi` writes
// (docs/RETRIEVAL.md, "The executable"); this reads it into a planrt_retrieval_config.
#include "planrt_retrieval.h"
#include "status.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <deque>
#include <string>
#include <vector>

using json = nlohmann::json;

namespace {

struct Malformed {
  std::string what;
};

const json &at(const json &o, const char *key) {
  if (!o.is_object() || !o.contains(key))
    throw Malformed{std::string("lacks '") + key + "'"};
  return o[key];
}
std::string str(const json &o, const char *key) {
  const json &v = at(o, key);
  if (!v.is_string())
    throw Malformed{std::string("'") + key + "' is not a string"};
  return v.get<std::string>();
}
int64_t num(const json &o, const char *key) {
  const json &v = at(o, key);
  if (!v.is_number_integer())
    throw Malformed{std::string("'") + key + "' is not an integer"};
  return v.get<int64_t>();
}
double real(const json &o, const char *key) {
  const json &v = at(o, key);
  if (!v.is_number())
    throw Malformed{std::string("'") + key + "' is not a number"};
  return v.get<double>();
}
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

extern "C" int planrt_retrieval_main_manifest(int argc, char **argv, const char *manifest) {
  // Strings the config borrows: kept for the whole run.
  static std::deque<std::string> strings;  // push_back keeps earlier elements in place
  static std::vector<const char *> corpus;
  planrt_retrieval_config cfg{};
  try {
    json m = json::parse(manifest ? manifest : "");
    if (str(m, "format") != "planc-retrieval-1")
      throw Malformed{"format is not planc-retrieval-1"};
    auto keep = [&](const std::string &s) -> const char * {
      strings.push_back(s);
      return strings.back().c_str();
    };
    cfg.graph = keep(str(m, "graph"));
    cfg.plan_file = keep(str(m, "plan_file"));
    cfg.plan_line = int(num(m, "plan_line"));
    cfg.base_dir = keep(str(m, "base_dir"));
    const json &c = at(m, "corpus");
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
    cfg.chunk = planrt_chunk_kind(choice(m, "chunk", {"tokens", "sentences", "paragraphs"}));
    cfg.chunk_size = num(m, "chunk_size");
    cfg.chunk_overlap = num(m, "chunk_overlap");
    cfg.embed = planrt_embed_kind(choice(m, "embed", {"hashing", "model"}));
    cfg.embed_dim = num(m, "embed_dim");
    cfg.embed_model = keep(str(m, "embed_model"));
    cfg.embed_checkpoint = keep(str(m, "embed_checkpoint"));
    cfg.index_factory = keep(str(m, "index"));
    cfg.metric = planrt_metric(choice(m, "metric", {"ip", "l2"}));
    cfg.nprobe = num(m, "nprobe");
    cfg.search = planrt_search_kind(choice(m, "search", {"vector", "keyword", "hybrid"}));
    cfg.vector_weight = real(m, "vector_weight");
    cfg.keyword_weight = real(m, "keyword_weight");
    cfg.top = num(m, "top");
    cfg.fusion = planrt_fusion(choice(m, "fusion", {"weighted", "rrf"}));
    cfg.rrf_k = num(m, "rrf_k");
    cfg.rerank = planrt_rerank_kind(choice(m, "rerank", {"none", "model"}));
    cfg.guard = planrt_guard_kind(choice(m, "guard", {"quarantine", "off"}));
    cfg.store = keep(str(m, "store"));
  } catch (const Malformed &e) {
    std::fprintf(stderr, "planrt: error: the retrieval manifest is malformed: %s\n", e.what.c_str());
    return 1;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "planrt: error: the retrieval manifest is malformed: %s\n", e.what());
    return 1;
  }
  return planrt_retrieval_main(argc, argv, &cfg);
}

// A query's answer as JSON (answer.h).
#include "answer.h"

namespace planrt::rag {

using json = nlohmann::ordered_json;

const char *searchName(planrt_search_kind m) {
  return m == PLANRT_SEARCH_VECTOR ? "vector" : m == PLANRT_SEARCH_KEYWORD ? "keyword" : "hybrid";
}

const char *fusionName(planrt_fusion f) { return f == PLANRT_FUSION_RRF ? "rrf" : "weighted"; }

bool searchKind(const std::string &name, planrt_search_kind &out) {
  for (planrt_search_kind k : {PLANRT_SEARCH_VECTOR, PLANRT_SEARCH_KEYWORD, PLANRT_SEARCH_HYBRID})
    if (name == searchName(k)) {
      out = k;
      return true;
    }
  return false;
}

bool fusionKind(const std::string &name, planrt_fusion &out) {
  for (planrt_fusion f : {PLANRT_FUSION_WEIGHTED, PLANRT_FUSION_RRF})
    if (name == fusionName(f)) {
      out = f;
      return true;
    }
  return false;
}

json answerJson(const planrt_retrieval_config &cfg, const std::string &text, planrt_search_kind mode,
                planrt_fusion fusion, const planrt_hit *hits, size_t count) {
  bool guarded = cfg.guard == PLANRT_GUARD_QUARANTINE;
  json out = {{"graph", cfg.graph},
              {"query", text},
              {"mode", searchName(mode)},
              {"fusion", fusionName(fusion)},
              {"guard", guarded ? "quarantine" : "off"},
              {"results", json::array()}};
  for (size_t i = 0; i < count; ++i) {
    const planrt_hit &h = hits[i];
    auto side = [](int rank, double score) { return rank ? json{{"rank", rank}, {"score", score}} : json(nullptr); };
    json flags = json::array();
    for (size_t f = 0; f < h.flag_count; ++f)
      flags.push_back({{"kind", h.flags[f].kind},
                       {"begin", h.flags[f].begin},
                       {"end", h.flags[f].end},
                       {"score", h.flags[f].score},
                       {"text", std::string(h.text + h.flags[f].begin, h.flags[f].end - h.flags[f].begin)}});
    json res = {{"rank", i + 1},
                {"chunk", h.chunk},
                {"score", h.score},
                {"vector", side(h.vector_rank, h.vector_score)},
                {"keyword", side(h.keyword_rank, h.keyword_score)},
                {"file", h.file},
                {"begin", h.begin},
                {"end", h.end},
                {"sha256", h.sha256},
                {"text", std::string(h.text, h.text_len)}};
    if (h.fused_rank)
      res["rerank"] = {{"fused_rank", h.fused_rank}, {"score", h.rerank_score}};
    if (guarded)
      res["flags"] = flags;
    out["results"].push_back(res);
  }
  return out;
}

} // namespace planrt::rag

// Queries: the vector side (FAISS), the keyword side (Xapian BM25), and their fusion.
#include "status.h"
#include "store.h"

#include <algorithm>
#include <unordered_map>

namespace planrt::rag {

std::vector<Fused> fuse(const std::vector<Scored> &vec, const std::vector<Scored> &kw, planrt_fusion fusion, double wv,
                        double wk, double rrfK) {
  std::unordered_map<int64_t, Fused> byId;
  auto side = [&](const std::vector<Scored> &list, double w, bool isVector) {
    double lo = 0, hi = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      lo = i ? std::min(lo, list[i].score) : list[i].score;
      hi = i ? std::max(hi, list[i].score) : list[i].score;
    }
    for (size_t i = 0; i < list.size(); ++i) {
      Fused &f = byId.try_emplace(list[i].id, Fused{list[i].id, 0.0}).first->second;
      int rank = int(i + 1);
      (isVector ? f.vectorRank : f.keywordRank) = rank;
      (isVector ? f.vectorScore : f.keywordScore) = list[i].score;
      if (fusion == PLANRT_FUSION_RRF)
        f.score += 1.0 / (rrfK + rank);
      else
        f.score += w * (hi > lo ? (list[i].score - lo) / (hi - lo) : 1.0);
    }
  };
  side(vec, wv, true);
  side(kw, wk, false);
  std::vector<Fused> out;
  out.reserve(byId.size());
  for (auto &[id, f] : byId)
    out.push_back(f);
  std::sort(out.begin(), out.end(),
            [](const Fused &a, const Fused &b) { return a.score != b.score ? a.score > b.score : a.id < b.id; });
  return out;
}

} // namespace planrt::rag

using namespace planrt::rag;

namespace planrt::rag {

planrt_status search(const planrt_retrieval_config &cfg, const Store &st, Xapian::Database &keyword, Embedder &embedder,
                     Reranker *reranker, const char *text, int64_t k, planrt_search_kind mode, planrt_fusion fusion,
                     Answer &out) {
  if (k < 0)
    return planrt::fail(PLANRT_ERR_ARG, "--k %lld: must be positive", (long long)k);
  out.hits.clear();
  out.flags.clear();
  if (k == 0)
    k = reranker ? cfg.rerank_top : cfg.top;
  // Each side contributes its best max(top, k) candidates.
  int64_t depth = std::min<int64_t>(std::max<int64_t>(cfg.top, k), int64_t(st.chunks.size()));
  std::vector<Scored> vec, kw;
  try {
    // A query with nothing to embed (no word for hashing) would be equally near
    // everything: no vector side.
    std::vector<float> q(size_t(st.dim));
    if (mode != PLANRT_SEARCH_KEYWORD && depth > 0 && embedder.embed(text, q.data())) {
      size_t d = size_t(depth);
      std::vector<float> dist(d);
      std::vector<faiss::Index::idx_t> ids(d);
      st.index->search(1, q.data(), depth, dist.data(), ids.data());
      bool l2 = cfg.metric == PLANRT_METRIC_L2;
      for (int64_t i = 0; i < depth; ++i)
        if (ids[size_t(i)] >= 0 && size_t(ids[size_t(i)]) < st.chunks.size())
          vec.push_back({ids[size_t(i)], l2 ? -double(dist[size_t(i)]) : double(dist[size_t(i)])});
    }
    if (mode != PLANRT_SEARCH_VECTOR && depth > 0) {
      Xapian::QueryParser qp;
      qp.set_stemmer(Xapian::Stem(kStemmer));
      qp.set_stemming_strategy(Xapian::QueryParser::STEM_SOME);
      qp.set_default_op(Xapian::Query::OP_OR);
      qp.set_database(keyword);
      Xapian::Enquire enquire(keyword);
      enquire.set_weighting_scheme(Xapian::BM25Weight());
      // Flags 0: the query is plain text, never Boolean syntax.
      enquire.set_query(qp.parse_query(text, 0));
      Xapian::MSet mset = enquire.get_mset(0, Xapian::doccount(depth));
      for (auto it = mset.begin(); it != mset.end(); ++it) {
        int64_t id = std::stoll(it.get_document().get_data());
        if (id >= 0 && size_t(id) < st.chunks.size())
          kw.push_back({id, it.get_weight()});
      }
    }
  } catch (const Xapian::Error &e) {
    return planrt::fail(PLANRT_ERR_FORMAT, "%s: keyword search failed: %s", st.dir.c_str(),
                        e.get_description().c_str());
  } catch (const std::exception &e) {
    return planrt::fail(PLANRT_ERR_FORMAT, "%s: search failed: %s", st.dir.c_str(), e.what());
  }
  std::vector<Fused> fused =
      fuse(vec, kw, fusion, cfg.vector_weight, cfg.keyword_weight, cfg.rrf_k > 0 ? double(cfg.rrf_k) : kRrfK);
  // A model re-ranker orders the first max(top, k) fused candidates by its score
  // (ties: the fused order).
  std::vector<std::pair<int, double>> reranked(fused.size()); // fused rank, re-ranker's score
  if (reranker) {
    if (fused.size() > size_t(depth))
      fused.resize(size_t(depth));
    std::vector<size_t> order(fused.size());
    for (size_t i = 0; i < fused.size(); ++i) {
      order[i] = i;
      const Chunk &c = st.chunks[size_t(fused[i].id)];
      reranked[i] = {int(i + 1), reranker->score(c.text, text)};
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return reranked[a].second > reranked[b].second; });
    std::vector<Fused> f2;
    std::vector<std::pair<int, double>> r2;
    for (size_t i : order) {
      f2.push_back(fused[i]);
      r2.push_back(reranked[i]);
    }
    fused.swap(f2);
    reranked.swap(r2);
  }
  if (fused.size() > size_t(k))
    fused.resize(size_t(k));
  out.flags.resize(fused.size());
  for (size_t i = 0; i < fused.size(); ++i) {
    const Fused &f = fused[i];
    const Chunk &c = st.chunks[size_t(f.id)];
    if (cfg.guard == PLANRT_GUARD_QUARANTINE)
      for (const Flag &fl : guardScan(c.text))
        out.flags[i].push_back({fl.begin, fl.end, fl.kind, fl.score});
    planrt_hit h{};
    h.chunk = f.id;
    // One side alone reports its own score, not a normalised one.
    h.score = mode == PLANRT_SEARCH_VECTOR ? f.vectorScore : mode == PLANRT_SEARCH_KEYWORD ? f.keywordScore : f.score;
    h.vector_rank = f.vectorRank;
    h.keyword_rank = f.keywordRank;
    h.vector_score = f.vectorScore;
    h.keyword_score = f.keywordScore;
    h.file = c.file.c_str();
    h.begin = c.begin;
    h.end = c.end;
    h.sha256 = c.sha256.c_str();
    h.text = c.text.c_str();
    h.text_len = c.text.size();
    h.flags = out.flags[i].data();
    h.flag_count = out.flags[i].size();
    h.fused_rank = reranked[i].first;
    h.rerank_score = reranked[i].second;
    out.hits.push_back(h);
  }
  return PLANRT_OK;
}

} // namespace planrt::rag

struct planrt_retriever {
  planrt_retrieval_config cfg;
  Store store;
  std::unique_ptr<Reranker> reranker; ///< null for rerank = none
  Answer answer;
};

planrt_status planrt_retriever_open(const planrt_retrieval_config *cfg, planrt_retriever **out) {
  if (!cfg || !out)
    return planrt::fail(PLANRT_ERR_ARG, "planrt_retriever_open: null argument");
  *out = nullptr;
  try {
    auto r = std::make_unique<planrt_retriever>();
    r->cfg = *cfg;
    if (planrt_status s = openStore(*cfg, &r->store))
      return s;
    if (planrt_status s = openReranker(*cfg, r->reranker))
      return s;
    *out = r.release();
    return PLANRT_OK;
  } catch (const std::exception &e) {
    return planrt::fail(PLANRT_ERR_FORMAT, "%s: cannot open the store: %s", storePath(*cfg).c_str(), e.what());
  }
}

void planrt_retriever_close(planrt_retriever *r) { delete r; }

planrt_status planrt_retriever_query(planrt_retriever *r, const char *text, int64_t k, planrt_search_kind mode,
                                     planrt_fusion fusion, const planrt_hit **hits, size_t *count) {
  if (!r || !text || !hits || !count)
    return planrt::fail(PLANRT_ERR_ARG, "planrt_retriever_query: null argument");
  *hits = nullptr;
  *count = 0;
  Store &st = r->store;
  if (planrt_status s = search(r->cfg, st, st.keyword, *st.embedder, r->reranker.get(), text, k, mode, fusion,
                               r->answer))
    return s;
  *hits = r->answer.hits.data();
  *count = r->answer.hits.size();
  return PLANRT_OK;
}

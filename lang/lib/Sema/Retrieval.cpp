// Checks of retrieval declarations: the corpus, chunking, embedding, index, search,
// reranking, guard and store of a retrieval graph, each a call checked against
// its signature.
#include "SemaInternal.h"

#include <limits>

using namespace plan;
using namespace plan::lang;
using ast::Expr;

namespace {

/// One retrieval declaration, checked key by key in the order of the graph.
class RetrievalCheck {
public:
  RetrievalCheck(Sema &sema, const ast::Decl &decl)
      : sema(sema), diags(sema.diags), decl(decl), what("retrieval '" + decl.name + "'"),
        sec(sema, decl.entries, what, {"corpus", "chunk", "embed", "index", "search", "rerank", "guard", "store"}) {
    r.name = decl.name;
    r.loc = decl.nameLoc;
    r.baseDir = sema.baseDir(decl.loc);
  }

  /// Adds the graph to the program when no error was reported.
  void run() {
    checkCorpus();
    checkChunk();
    checkEmbed();
    checkIndex();
    checkSearch();
    checkRerank();
    checkGuard();
    checkStore();
    if (ok && diags.errorCount() == 0)
      sema.program.retrievals.push_back(std::move(r));
  }

private:
  /// The value of `key`, one of `kinds` called with arguments (a bare name is a
  /// call without them); std::nullopt when absent or wrong (then reported).
  std::optional<Value> call(const char *key, const std::vector<std::string> &kinds, bool required, const char *example);
  void modelArg(Value &v, int &out);
  void posInt(std::map<std::string, Value> &a, const char *key, int64_t &out);
  void checkCorpus();
  void checkChunk();
  void checkEmbed();
  void checkFastText(const Value &v);
  void checkIndex();
  void checkSearch();
  void checkRerank();
  void checkGuard();
  void checkStore();

  Sema &sema;
  Diags &diags;
  const ast::Decl &decl;
  std::string what;
  Section sec;
  sema::Retrieval r;
  bool ok = true;
};

} // namespace

std::optional<Value> RetrievalCheck::call(const char *key, const std::vector<std::string> &kinds, bool required,
                                          const char *example) {
  const Expr *e = sec.value(key);
  if (!e) {
    if (required && !sec.get(key)) {
      diags.error(decl.nameLoc, what + " needs '" + key + "', as in '" + key + " = " + example + "'");
      ok = false;
    }
    return std::nullopt;
  }
  Value v = sema.eval(*e, nullptr);
  if (v.isError()) {
    ok = false;
    return std::nullopt;
  }
  // Bare names (`rerank = none`, `chunk = paragraphs`) are calls without arguments.
  if (v.kind == Value::Kind::None)
    v.s = "none";
  if (v.kind == Value::Kind::Name || v.kind == Value::Kind::None)
    v.kind = Value::Kind::Call;
  if (v.kind != Value::Kind::Call) {
    sema.typeError(v, std::string("'") + key + "' of " + what, std::string("a call, as in ") + example);
    ok = false;
    return std::nullopt;
  }
  Value name = v;
  name.kind = Value::Kind::Name;
  if (!sema.toChoice(name, std::string(key) + " kind", kinds)) {
    ok = false;
    return std::nullopt;
  }
  return v;
}

void RetrievalCheck::modelArg(Value &v, int &out) {
  if (v.kind != Value::Kind::Name) {
    sema.typeError(v, "the model", "a model name");
    ok = false;
    return;
  }
  if (auto idx = sema.modelIndex(v.s, v.loc))
    out = *idx;
  else
    ok = false;
}

void RetrievalCheck::posInt(std::map<std::string, Value> &a, const char *key, int64_t &out) {
  if (!a.count(key))
    return;
  if (auto i = sema.toPositiveInt(a[key], std::string("'") + key + "'"))
    out = *i;
  else
    ok = false;
}

void RetrievalCheck::checkCorpus() {
  if (auto v = call("corpus", {"files"}, true, "files(\"docs/**/*.md\", manifest: \"docs/MANIFEST.sha256\")")) {
    if (auto a = bindArgs(sema, {"files", {{"glob", true}, {"manifest", true}}}, *v)) {
      if (auto g = sema.toString((*a)["glob"], "the corpus glob"))
        r.corpus.push_back(*g);
      else
        ok = false;
      Value &m = (*a)["manifest"];
      if (m.kind == Value::Kind::None)
        r.manifest = "";
      else if (auto s = sema.toString(m, "the manifest"))
        r.manifest = *s;
      else
        ok = false;
    } else {
      ok = false;
    }
  }
}

void RetrievalCheck::checkChunk() {
  if (auto v = call("chunk", {"tokens", "sentences", "paragraphs", "semantic"}, false, "tokens(256, overlap: 32)")) {
    r.chunk.kind = v->s == "tokens"       ? sema::ChunkKind::Tokens
                   : v->s == "sentences"  ? sema::ChunkKind::Sentences
                   : v->s == "paragraphs" ? sema::ChunkKind::Paragraphs
                                          : sema::ChunkKind::Semantic;
    // semantic(size: tokens at most, threshold): whole sentences, never overlapping.
    Signature sig{v->s, {{"size", v->s == "tokens"}, {"overlap", false}}};
    if (v->s == "semantic")
      sig.params = {{"size", false}, {"threshold", false}};
    if (auto a = bindArgs(sema, sig, *v)) {
      posInt(*a, "size", r.chunk.size);
      if (a->count("threshold")) {
        auto t = sema.toFloat((*a)["threshold"], "the threshold");
        if (t && *t >= 0 && *t <= 1)
          r.chunk.threshold = *t;
        else {
          if (t)
            diags.error((*a)["threshold"].loc, "the threshold is a cosine similarity: it must lie in [0, 1]");
          ok = false;
        }
      }
      if (a->count("overlap")) {
        auto o = sema.toInt((*a)["overlap"], "'overlap'");
        if (o && *o >= 0 && *o < r.chunk.size)
          r.chunk.overlap = *o;
        else {
          if (o)
            diags.error((*a)["overlap"].loc, "the overlap must be at least 0 and smaller than the chunk size " +
                                                 std::to_string(r.chunk.size));
          ok = false;
        }
      }
    } else {
      ok = false;
    }
  }
}

void RetrievalCheck::checkEmbed() {
  if (auto v = call("embed", {"hashing", "model", "fasttext"}, false, "hashing(dim: 384)")) {
    if (v->s == "fasttext") {
      checkFastText(*v);
    } else if (v->s == "hashing") {
      r.embed.kind = sema::EmbedKind::Hashing;
      if (auto a = bindArgs(sema, {"hashing", {{"dim", true}}}, *v))
        posInt(*a, "dim", r.embed.dim);
      else
        ok = false;
    } else {
      r.embed.kind = sema::EmbedKind::Model;
      if (auto a = bindArgs(sema, {"model", {{"model", true}, {"checkpoint", true}, {"pool", false}}}, *v)) {
        modelArg((*a)["model"], r.embed.model);
        if (auto s = sema.toString((*a)["checkpoint"], "'checkpoint'"))
          r.embed.checkpoint = *s;
        else
          ok = false;
        if (a->count("pool")) {
          if (auto p = sema.toChoice((*a)["pool"], "pooling", {"mean", "last"}))
            r.embed.pool = *p;
          else
            ok = false;
        }
      } else {
        ok = false;
      }
    }
  }
}

void RetrievalCheck::checkFastText(const Value &v) {
  r.embed.kind = sema::EmbedKind::FastText;
  r.embed.dim = 100;
  auto &ft = r.embed.fasttext;
  auto a = bindArgs(sema,
                    {"fasttext",
                     {{"dim", false},
                      {"model", false},
                      {"epoch", false},
                      {"min_count", false},
                      {"minn", false},
                      {"maxn", false},
                      {"bucket", false},
                      {"threads", false}}},
                    v);
  if (!a) {
    ok = false;
    return;
  }
  posInt(*a, "dim", r.embed.dim);
  posInt(*a, "epoch", ft.epoch);
  posInt(*a, "min_count", ft.minCount);
  posInt(*a, "bucket", ft.bucket);
  posInt(*a, "threads", ft.threads);
  for (auto [key, value] : {std::pair<const char *, int64_t>{"epoch", ft.epoch},
                            {"min_count", ft.minCount},
                            {"bucket", ft.bucket},
                            {"threads", ft.threads}})
    if (a->count(key) && value > std::numeric_limits<int32_t>::max()) {
      diags.error((*a)[key].loc, std::string("'") + key + "' is more than fastText's limit of 2147483647");
      ok = false;
    }
  if (a->count("dim") && r.embed.dim > 4096) {
    diags.error((*a)["dim"].loc, "fasttext(dim: " + std::to_string(r.embed.dim) + ") is more than 4096");
    ok = false;
  }
  if (a->count("model")) {
    if (auto m = sema.toChoice((*a)["model"], "fastText model", {"skipgram", "cbow"}))
      ft.model = *m;
    else
      ok = false;
  }
  for (auto [key, out] : {std::pair<const char *, int64_t *>{"minn", &ft.minn}, {"maxn", &ft.maxn}}) {
    if (!a->count(key))
      continue;
    auto n = sema.toInt((*a)[key], std::string("'") + key + "'");
    if (n && *n >= 0 && *n <= 64)
      *out = *n;
    else {
      if (n)
        diags.error((*a)[key].loc, std::string("'") + key + "' is a subword length: it must lie in [0, 64]");
      ok = false;
    }
  }
  if (ft.maxn == 0)
    ft.minn = 0; // no subwords
  else if (ft.minn > ft.maxn) {
    diags.error(a->count("maxn") ? (*a)["maxn"].loc : (*a)["minn"].loc,
                "subwords of " + std::to_string(ft.minn) + " to " + std::to_string(ft.maxn) +
                    " characters: 'minn' must not exceed 'maxn'")
        .note("maxn: 0 turns subwords off; fastText's defaults are minn: 3, maxn: 6");
    ok = false;
  }
}

void RetrievalCheck::checkIndex() {
  if (auto v = call("index", {"faiss"}, false, "faiss(\"IVF64,Flat\", metric: ip, nprobe: 8)")) {
    if (auto a = bindArgs(sema,
                          {"faiss",
                           {{"factory", true},
                            {"metric", false},
                            {"nprobe", false},
                            {"ef_search", false},
                            {"ef_construction", false}}},
                          *v)) {
      if (auto s = sema.toString((*a)["factory"], "the FAISS factory string")) {
        if (s->empty()) {
          diags.error((*a)["factory"].loc, "the FAISS factory string is empty");
          ok = false;
        }
        r.index.factory = *s;
      } else {
        ok = false;
      }
      if (a->count("metric")) {
        if (auto m = sema.toChoice((*a)["metric"], "metric", {"ip", "l2"}))
          r.index.metric = *m == "ip" ? sema::Metric::InnerProduct : sema::Metric::L2;
        else
          ok = false;
      }
      posInt(*a, "nprobe", r.index.nprobe);
      for (const char *key : {"ef_search", "ef_construction"}) {
        if (!a->count(key))
          continue;
        posInt(*a, key, std::string(key) == "ef_search" ? r.index.efSearch : r.index.efConstruction);
        if (r.index.factory.find("HNSW") == std::string::npos) {
          diags.error((*a)[key].loc, std::string(key) + " applies to HNSW indexes, but faiss(\"" +
                                         r.index.factory + "\") is not one")
              .note(std::string("an HNSW index: faiss(\"HNSW32\", metric: ip, ") + key + ": 64)");
          ok = false;
        }
      }
    } else {
      ok = false;
    }
  }
}

void RetrievalCheck::checkSearch() {
  // Default weights that suit the embedder: hashed words add little to BM25's own
  // evidence, so BM25 leads (docs/BENCHMARKS.md, "Retrieval": with these weights hybrid
  // is within 1% of BM25 alone on both corpora, with 0.5 / 0.5 it falls 5–15% under);
  // fastText's vectors, trained on the corpus, are better than hashed words but still
  // well under BM25 there, and their best weight on the dev halves is the same.
  if (r.embed.kind != sema::EmbedKind::Model) {
    r.search.vectorWeight = sema::Retrieval::kWordVectorWeight;
    r.search.keywordWeight = 1 - sema::Retrieval::kWordVectorWeight;
  }
  if (auto v = call("search", {"hybrid", "vector", "keyword"}, false, "hybrid(vector: 0.7, keyword: 0.3, top: 20)")) {
    r.search.kind = v->s == "hybrid"   ? sema::SearchKind::Hybrid
                    : v->s == "vector" ? sema::SearchKind::Vector
                                       : sema::SearchKind::Keyword;
    Signature sig{v->s, {{"top", false}}};
    if (v->s == "hybrid")
      sig.params = {{"vector", false}, {"keyword", false}, {"top", false}, {"fusion", false}, {"k", false}};
    if (auto a = bindArgs(sema, sig, *v)) {
      posInt(*a, "top", r.search.top);
      for (auto [key, out] : {std::pair<const char *, double *>{"vector", &r.search.vectorWeight},
                              {"keyword", &r.search.keywordWeight}}) {
        if (!a->count(key))
          continue;
        auto f = sema.toFloat((*a)[key], std::string("the ") + key + " weight");
        if (f && *f >= 0)
          *out = *f;
        else {
          if (f)
            diags.error((*a)[key].loc, "weights must not be negative");
          ok = false;
        }
      }
      if (v->s == "hybrid" && !(r.search.vectorWeight + r.search.keywordWeight > 0)) {
        diags.error(v->loc, "the hybrid weights add up to zero");
        ok = false;
      }
      if (a->count("fusion")) {
        if (auto f = sema.toChoice((*a)["fusion"], "fusion", {"weighted", "rrf"}))
          r.search.fusion = *f == "rrf" ? sema::Fusion::RRF : sema::Fusion::Weighted;
        else
          ok = false;
      }
      posInt(*a, "k", r.search.rrfK);
    } else {
      ok = false;
    }
  }
}

void RetrievalCheck::checkRerank() {
  if (auto v = call("rerank", {"none", "model"}, false, "model(tiny, checkpoint: \"ckpt/tiny\", top: 5)")) {
    if (v->s == "model") {
      r.rerank.enabled = true;
      if (auto a = bindArgs(sema, {"model", {{"model", true}, {"checkpoint", true}, {"top", false}}}, *v)) {
        modelArg((*a)["model"], r.rerank.model);
        if (auto s = sema.toString((*a)["checkpoint"], "'checkpoint'"))
          r.rerank.checkpoint = *s;
        else
          ok = false;
        posInt(*a, "top", r.rerank.top);
        if (r.rerank.top > r.search.top) {
          diags.error(v->loc, "rerank keeps " + std::to_string(r.rerank.top) + " results but search finds only " +
                                  std::to_string(r.search.top));
          ok = false;
        }
      } else {
        ok = false;
      }
    }
  }
}

void RetrievalCheck::checkGuard() {
  if (const Expr *e = sec.value("guard")) {
    if (auto g = sema.toChoice(sema.eval(*e, nullptr), "guard", {"quarantine", "off"}))
      r.quarantine = *g == "quarantine";
    else
      ok = false;
  }
}

void RetrievalCheck::checkStore() {
  if (const Expr *e = sec.value("store")) {
    if (auto s = sema.toString(sema.eval(*e, nullptr), "'store'")) {
      if (s->empty()) {
        diags.error(e->loc, "'store' of " + what + " is empty");
        ok = false;
      }
      r.store = *s;
    } else {
      ok = false;
    }
  } else if (!sec.get("store")) {
    diags.error(decl.nameLoc, what + " needs 'store', as in 'store = \"index/" + decl.name + "\"'");
    ok = false;
  }
}

void Sema::checkRetrieval(const ast::Decl &decl) { RetrievalCheck(*this, decl).run(); }

// `plan-retrieval-abi`: a retrieval declaration becomes an executable: its graph
// (corpus, manifest, chunker, embedder, FAISS factory, search and fusion, guard,
// store) as the manifest constant `planc_retrieval_manifest`, and for model
// embedders and re-rankers their decoding entries and manifests. `plan-emit-main`
// adds the `main` that hands them to the runtime (planrt_retrieval_main_manifest,
// docs/RETRIEVAL.md).
#include "plan/Compiler/PlanGen.h"
#include "plan/Dialect/Plan/IR/Plan.h"
#include "plan/Generate/Decode.h"
#include "plan/Retrieval/Passes.h"
#include "plan/Retrieval/Retrieval.h"
#include "plan/Training/Manifest.h"
#include "planrt_manifest.h"

#include "mlir/IR/Builders.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

namespace plan {
#define GEN_PASS_DEF_PLANRETRIEVALABI
#include "plan/Retrieval/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

FailureOr<retrieval::Models> retrieval::emitModels(ModuleOp module, pl::RetrievalOp r) {
  Models out;
  auto one = [&](FlatSymbolRefAttr ref, StringRef role, StringRef entry, decode::Output output) -> LogicalResult {
    std::string what = (role + " = model(" + ref.getValue() + ")").str();
    auto model = module.lookupSymbol<func::FuncOp>(ref);
    if (!model || !model->hasAttr("nn.model"))
      return r.emitOpError() << "needs model '" << ref.getValue() << "' expanded to nn first (convert-plan-to-nn)";
    auto vocab = model->getAttrOfType<IntegerAttr>("nn.vocab");
    auto maxSeq = model->getAttrOfType<IntegerAttr>("nn.max_seq");
    if (!vocab || vocab.getInt() != 256) {
      InFlightDiagnostic d = r.emitError()
                             << what << ": retrieval feeds a model text as bytes, and model '" << ref.getValue()
                             << "' has a vocabulary of " << (vocab ? vocab.getInt() : 0) << " tokens, not 256";
      d.attachNote(model.getLoc()) << "model '" << ref.getValue() << "' is declared here";
      return failure();
    }
    if (!maxSeq || maxSeq.getInt() <= 0) {
      InFlightDiagnostic d = r.emitError()
                             << what << ": not implemented in this version for a model without a positional table "
                             << "(rotary positions): the window its texts are cut into is the table's length";
      d.attachNote(model.getLoc()) << "model '" << ref.getValue() << "' is declared here";
      return failure();
    }
    int64_t window = maxSeq.getInt(), chunk = std::min(window, decode::kPrefillChunk);
    decode::Params params = decode::paramsOf(model);
    FailureOr<decode::Entry> e = decode::emitEntry(module, r, what, model, params, entry, chunk, window, output);
    if (failed(e))
      return failure();
    if (output == decode::Output::Hidden)
      out.embedDim = e->width;
    llvm::json::Object m{{"format", planrt::manifest::format::kModel}, {"role", role}};
    for (auto &kv : decode::layoutJson(model, params, vocab.getInt(), window, chunk, *e))
      m.try_emplace(kv.first, std::move(kv.second));
    std::string text;
    llvm::raw_string_ostream os(text);
    os << llvm::json::Value(std::move(m));
    OpBuilder b(module.getContext());
    b.setInsertionPointToEnd(module.getBody());
    emitStringGlobal(b, r.getLoc(), (entry + "_manifest").str(), text);
    return success();
  };
  if (r.getEmbed() == pl::EmbedKind::model) {
    out.embed = true;
    if (failed(one(r.getEmbedModelAttr(), "embed", "planc_embed", decode::Output::Hidden)))
      return failure();
  }
  if (auto ref = r.getRerankModelAttr()) {
    out.rerank = true;
    if (failed(one(ref, "rerank", "planc_rerank", decode::Output::Logits)))
      return failure();
  }
  return out;
}

std::string retrieval::manifest(pl::RetrievalOp r, const Models &models) {
  StringRef base = r.getBaseDir();
  llvm::json::Array corpus;
  for (Attribute a : r.getCorpus())
    corpus.push_back(resolvePlanPath(base, cast<StringAttr>(a).getValue()));
  std::string file;
  int64_t line = 0;
  if (auto loc = dyn_cast<FileLineColLoc>(r.getLoc())) {
    file = loc.getFilename().str();
    line = loc.getLine();
  }
  llvm::json::Object o{
      {"format", planrt::manifest::format::kRetrieval},
      {"graph", r.getSymName()},
      {"plan_file", file},
      {"plan_line", line},
      {"base_dir", base},
      {"corpus", std::move(corpus)},
      {"manifest", resolvePlanPath(base, r.getManifest())},
      {"chunk", pl::stringifyChunkKind(r.getChunk())},
      {"chunk_size", int64_t(r.getChunkSizeAttr().getInt())},
      {"chunk_overlap", int64_t(r.getChunkOverlapAttr().getInt())},
      {"embed", pl::stringifyEmbedKind(r.getEmbed())},
      {"embed_dim", models.embed ? models.embedDim : int64_t(r.getEmbedDimAttr().getInt())},
      {"embed_model", r.getEmbedModel() ? r.getEmbedModel()->str() : std::string()},
      {"embed_checkpoint", models.embed ? resolvePlanPath(base, r.getEmbedCheckpoint()) : std::string()},
      {"embed_pool", r.getPool()},
      {"index", r.getIndex()},
      {"metric", pl::stringifyMetric(r.getMetric())},
      {"nprobe", int64_t(r.getNprobeAttr().getInt())},
      {"chunk_threshold", r.getChunkThresholdAttr().getValueAsDouble()},
      {"ef_search", r.getEfSearchAttr().getInt()},
      {"ef_construction", r.getEfConstructionAttr().getInt()},
      {"search", pl::stringifySearchKind(r.getSearch())},
      {"vector_weight", r.getVectorWeight().convertToDouble()},
      {"keyword_weight", r.getKeywordWeight().convertToDouble()},
      {"top", int64_t(r.getTopAttr().getInt())},
      {"fusion", pl::stringifyFusion(r.getFusion())},
      {"rrf_k", int64_t(r.getRrfKAttr().getInt())},
      {"rerank", r.getRerankModel() ? "model" : "none"},
      {"rerank_model", r.getRerankModel() ? r.getRerankModel()->str() : std::string()},
      {"rerank_checkpoint", models.rerank ? resolvePlanPath(base, r.getRerankCheckpoint()) : std::string()},
      {"rerank_top", int64_t(r.getRerankTopAttr().getInt())},
      {"guard", pl::stringifyGuard(r.getGuard())},
      {"store", resolvePlanPath(base, r.getStore())}};
  if (DictionaryAttr ft = r.getFasttextAttr()) {
    llvm::json::Object opts;
    for (NamedAttribute a : ft) {
      if (auto s = dyn_cast<StringAttr>(a.getValue()))
        opts[a.getName().getValue()] = s.getValue();
      else
        opts[a.getName().getValue()] = cast<IntegerAttr>(a.getValue()).getInt();
    }
    o["fasttext"] = std::move(opts);
  }
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::json::Value(std::move(o));
  return out;
}

namespace {
struct PlanRetrievalABI : plan::impl::PlanRetrievalABIBase<PlanRetrievalABI> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto graphs = llvm::to_vector(module.getOps<pl::RetrievalOp>());
    if (graphs.empty() || !module.getOps<pl::TrainOp>().empty() || !module.getOps<pl::GenerateOp>().empty())
      return; // a training or generation executable, or nothing to build here
    if (graphs.size() != 1) {
      module.emitError() << "an executable runs one retrieval graph; this module has " << graphs.size()
                         << " (select one with --entry)";
      return signalPassFailure();
    }
    pl::RetrievalOp r = graphs.front();
    FailureOr<retrieval::Models> models = retrieval::emitModels(module, r);
    if (failed(models))
      return signalPassFailure();
    OpBuilder b(&getContext());
    b.setInsertionPointToEnd(module.getBody());
    emitStringGlobal(b, r.getLoc(), "planc_retrieval_manifest", retrieval::manifest(r, *models));
    // The plan is consumed.
    for (Operation &op : llvm::make_early_inc_range(module.getBody()->getOperations()))
      if (isa<pl::PlanDialect>(op.getDialect()) ||
          (isa<func::FuncOp>(op) && !cast<func::FuncOp>(op).getName().starts_with("planc_")))
        op.erase();
  }
};

} // namespace

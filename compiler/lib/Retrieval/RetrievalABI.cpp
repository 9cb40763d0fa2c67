// `plan-retrieval-abi`: a retrieval declaration becomes an executable: its graph
// (corpus, manifest, chunker, embedder, FAISS factory, search and fusion, guard,
// store) as the manifest constant `planc_retrieval_manifest`, and a `main` that
// hands it to the runtime (planrt_retrieval_main_manifest, docs/RETRIEVAL.md).
#include "plan/Compiler/PlanGen.h"
#include "plan/Conversion/Passes.h"
#include "plan/Dialect/Plan/IR/Plan.h"
#include "plan/Retrieval/Retrieval.h"

#include "mlir/IR/Builders.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

namespace plan {
#define GEN_PASS_DEF_PLANRETRIEVALABI
#include "plan/Conversion/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

LogicalResult retrieval::checkSupported(pl::RetrievalOp r) {
  if (r.getEmbed() == pl::EmbedKind::model)
    return r.emitError() << "embed = model(...) is not implemented by the retrieval runtime in this version of "
                            "planc; use hashing(dim: N)";
  if (r.getRerankModel())
    return r.emitError() << "rerank = model(...) is not implemented by the retrieval runtime in this version of "
                            "planc; use rerank = none";
  return success();
}

std::string retrieval::manifest(pl::RetrievalOp r) {
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
      {"format", "planc-retrieval-1"},
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
      {"embed_dim", int64_t(r.getEmbedDimAttr().getInt())},
      {"embed_model", r.getEmbedModel() ? r.getEmbedModel()->str() : std::string()},
      {"embed_checkpoint", resolvePlanPath(base, r.getEmbedCheckpoint())},
      {"index", r.getIndex()},
      {"metric", pl::stringifyMetric(r.getMetric())},
      {"nprobe", int64_t(r.getNprobeAttr().getInt())},
      {"search", pl::stringifySearchKind(r.getSearch())},
      {"vector_weight", r.getVectorWeight().convertToDouble()},
      {"keyword_weight", r.getKeywordWeight().convertToDouble()},
      {"top", int64_t(r.getTopAttr().getInt())},
      {"fusion", pl::stringifyFusion(r.getFusion())},
      {"rrf_k", int64_t(r.getRrfKAttr().getInt())},
      {"rerank", r.getRerankModel() ? "model" : "none"},
      {"guard", pl::stringifyGuard(r.getGuard())},
      {"store", resolvePlanPath(base, r.getStore())}};
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::json::Value(std::move(o));
  return out;
}

void retrieval::emitStringGlobal(OpBuilder &b, Location loc, StringRef name, std::string text) {
  text.push_back('\0');
  auto i8 = IntegerType::get(b.getContext(), 8);
  LLVM::GlobalOp::create(b, loc, LLVM::LLVMArrayType::get(i8, text.size()), /*isConstant=*/true,
                         LLVM::Linkage::Internal, name, b.getStringAttr(text));
}

namespace {
struct PlanRetrievalABI : plan::impl::PlanRetrievalABIBase<PlanRetrievalABI> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto graphs = llvm::to_vector(module.getOps<pl::RetrievalOp>());
    if (graphs.empty() || !module.getOps<pl::TrainOp>().empty() || !module.getOps<pl::GenerateOp>().empty())
      return;  // a training or generation executable, or nothing to build here
    if (graphs.size() != 1) {
      module.emitError() << "an executable runs one retrieval graph; this module has " << graphs.size()
                         << " (select one with --entry)";
      return signalPassFailure();
    }
    pl::RetrievalOp r = graphs.front();
    if (failed(retrieval::checkSupported(r)))
      return signalPassFailure();
    OpBuilder b(&getContext());
    b.setInsertionPointToEnd(module.getBody());
    Location loc = r.getLoc();
    retrieval::emitStringGlobal(b, loc, "planc_retrieval_manifest", retrieval::manifest(r));
    auto i32 = b.getI32Type();
    auto ptr = LLVM::LLVMPointerType::get(&getContext());
    LLVM::LLVMFuncOp::create(b, loc, "planrt_retrieval_main_manifest",
                             LLVM::LLVMFunctionType::get(i32, {i32, ptr, ptr}));
    auto main = LLVM::LLVMFuncOp::create(b, loc, "main", LLVM::LLVMFunctionType::get(i32, {i32, ptr}));
    Block *e = main.addEntryBlock(b);
    b.setInsertionPointToStart(e);
    Value m = LLVM::AddressOfOp::create(b, loc, ptr, "planc_retrieval_manifest");
    auto call = LLVM::CallOp::create(b, loc, TypeRange{i32}, "planrt_retrieval_main_manifest",
                                     ValueRange{e->getArgument(0), e->getArgument(1), m});
    LLVM::ReturnOp::create(b, loc, call.getResult());
    // The plan is consumed.
    for (Operation &op : llvm::make_early_inc_range(module.getBody()->getOperations()))
      if (isa<pl::PlanDialect>(op.getDialect()) || isa<func::FuncOp>(op))
        op.erase();
  }
};

} // namespace

// `plan-generate-abi`: a generate declaration becomes the entry points of a
// decoding executable. The model's forward function is specialised twice — a
// prefill chunk of positions and a single position — into functions that take
// the positions' offset and one key/value cache per attention layer
// (nn.sdpa_cached, nn.positions from the offset) and return the logits instead
// of the loss. Their entries work on flat buffers (parameters as in a
// checkpoint's table, every layer's cache in one array); the manifest the
// runtime reads (docs/GENERATE.md) and, for grounding, the retrieval graph's
// manifest become constants. `plan-emit-main` adds the `main`.
#include "plan/Compiler/PlanGen.h"
#include "plan/Dialect/Plan/IR/Plan.h"
#include "plan/Generate/Decode.h"
#include "plan/Generate/Passes.h"
#include "plan/Retrieval/Retrieval.h"
#include "plan/Training/Manifest.h"
#include "planrt_manifest.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/Support/JSON.h"

namespace plan {
#define GEN_PASS_DEF_PLANGENERATEABI
#include "plan/Generate/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

struct PlanGenerateABI : plan::impl::PlanGenerateABIBase<PlanGenerateABI> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto gens = llvm::to_vector(module.getOps<pl::GenerateOp>());
    if (gens.empty())
      return;
    if (gens.size() != 1 || !module.getOps<pl::TrainOp>().empty()) {
      module.emitError() << "an executable runs one generate declaration and nothing else; this module has "
                         << gens.size() << " generate and " << llvm::range_size(module.getOps<pl::TrainOp>())
                         << " train declarations (select one with --entry)";
      return signalPassFailure();
    }
    pl::GenerateOp gen = gens.front();
    auto model = module.lookupSymbol<func::FuncOp>(gen.getModel());
    if (!model || !model->hasAttr("nn.model")) {
      gen.emitOpError() << "needs its model expanded to nn first (convert-plan-to-nn)";
      return signalPassFailure();
    }
    int64_t window = int64_t(gen.getWindowAttr().getInt());
    auto maxSeq = model->getAttrOfType<IntegerAttr>("nn.max_seq");
    if (maxSeq && maxSeq.getInt() > 0 && window > maxSeq.getInt()) {
      gen.emitError() << "window " << window << " exceeds model '" << model.getName() << "''s context of "
                      << maxSeq.getInt() << " positions";
      return signalPassFailure();
    }
    auto vocab = model->getAttrOfType<IntegerAttr>("nn.vocab");
    if (!vocab) {
      gen.emitOpError() << "needs its model's nn.vocab attribute (set by convert-plan-to-nn)";
      return signalPassFailure();
    }
    pl::RetrievalOp context;
    if (auto ref = gen.getContextAttr()) {
      context = module.lookupSymbol<pl::RetrievalOp>(ref);
      if (!context) {
        gen.emitOpError() << "context " << ref << " is not in the module";
        return signalPassFailure();
      }
    }

    decode::Params params = decode::paramsOf(model);
    int64_t chunk = std::min(window, decode::kPrefillChunk);
    // planc_prefill / planc_step(P, tokens [1, n], offset, cache, logits [1, n, vocab]):
    // the logits of positions offset … offset + n - 1, their keys and values stored.
    FailureOr<decode::Entry> prefill = decode::emitEntry(module, gen, "generate", model, params, "planc_prefill", chunk,
                                                         window, decode::Output::Logits);
    if (failed(prefill))
      return signalPassFailure();
    if (failed(
            decode::emitEntry(module, gen, "generate", model, params, "planc_step", 1, window, decode::Output::Logits)))
      return signalPassFailure();
    FailureOr<retrieval::Models> models;
    if (context && failed(models = retrieval::emitModels(module, context)))
      return signalPassFailure();

    // The manifest.
    OpBuilder b(&getContext());
    Location loc = gen.getLoc();
    b.setInsertionPointToEnd(module.getBody());
    llvm::json::Object root{
        {"format", planrt::manifest::format::kGenerate},
        {"generate", gen.getSymName()},
        {"checkpoint", resolvePlanPath(gen.getBaseDir(), gen.getCheckpoint())},
        {"max_tokens", int64_t(gen.getMaxTokensAttr().getInt())},
        {"temperature", gen.getTemperature().convertToDouble()},
        {"top_k", int64_t(gen.getTopKAttr().getInt())},
        {"seed", int64_t(gen.getSeedAttr().getInt())},
        {"context", context ? llvm::json::Value(context.getSymName()) : llvm::json::Value(nullptr)}};
    if (std::optional<StringRef> tokenizer = gen.getTokenizer()) {
      FailureOr<std::string> path = checkTokenizer(gen, gen.getBaseDir(), *tokenizer, vocab.getInt(), gen.getModel());
      if (failed(path))
        return signalPassFailure();
      root["tokenizer"] = *path;
    }
    for (auto &kv : decode::layoutJson(model, params, vocab.getInt(), window, chunk, *prefill))
      root.try_emplace(kv.first, std::move(kv.second));
    std::string text;
    llvm::raw_string_ostream os(text);
    os << llvm::json::Value(std::move(root));
    emitStringGlobal(b, loc, "planc_generate_manifest", text);
    if (context)
      emitStringGlobal(b, loc, "planc_retrieval_manifest", retrieval::manifest(context, *models));

    // What is left of the plan has been consumed.
    for (Operation &op : llvm::make_early_inc_range(module.getBody()->getOperations()))
      if (isa<pl::PlanDialect>(op.getDialect()) ||
          (isa<func::FuncOp>(op) && !cast<func::FuncOp>(op).getName().starts_with("planc_")))
        op.erase();
  }
};

} // namespace

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
#include "plan/Conversion/Passes.h"
#include "plan/Dialect/NN/IR/NN.h"
#include "plan/Dialect/Plan/IR/Plan.h"
#include "plan/Retrieval/Retrieval.h"
#include "plan/Training/Flat.h"
#include "plan/Training/Training.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/Support/JSON.h"

namespace plan {
#define GEN_PASS_DEF_PLANGENERATEABI
#include "plan/Conversion/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;
using training::Flat;
using training::FlatTensor;

namespace {

/// Positions per prefill call: a prompt is processed in chunks of this many
/// (fewer when the window is smaller).
constexpr int64_t kPrefillChunk = 64;

/// A decoding function and the caches it takes, in argument order.
struct Decode {
  func::FuncOp fn;
  SmallVector<RankedTensorType> caches;
};

/// `name(tokens [1, n], params…, offset: i64, caches…) -> (logits [1, n, vocab],
/// caches…)` from the model's forward function: every nn.sdpa becomes an
/// nn.sdpa_cached over its own cache of `window` positions, nn.positions counts
/// from the offset, dropout is the identity (inference), and the logits the loss
/// was computed from are returned.
FailureOr<Decode> buildDecode(pl::GenerateOp gen, func::FuncOp model, StringRef name, int64_t n, int64_t window) {
  func::FuncOp f = training::specialize(model, name, 1, n);
  f->removeAttr("nn.model");
  f.setPrivate();
  auto fail = [&]() -> FailureOr<Decode> {
    f.erase();
    return failure();
  };
  Block &body = f.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  auto loss = ret.getNumOperands() == 1 ? ret.getOperand(0).getDefiningOp<nn::CrossEntropyOp>() : nn::CrossEntropyOp();
  if (!loss) {
    InFlightDiagnostic d = gen.emitError() << "generate decodes a model that returns cross_entropy(logits, "
                                              "targets); model '"
                                           << model.getName() << "' returns something else";
    d.attachNote(model.getLoc()) << "model '" << model.getName() << "' is declared here";
    return fail();
  }
  OpBuilder b(f.getContext());
  Location loc = gen.getLoc();
  unsigned offsetArg = f.getNumArguments();
  if (failed(f.insertArgument(offsetArg, b.getI64Type(), b.getDictionaryAttr({b.getNamedAttr("nn.offset", b.getUnitAttr())}), loc)))
    return fail();
  Value offset = f.getArgument(offsetArg);
  Decode out;
  SmallVector<Operation *> ops;
  f.walk([&](Operation *op) {
    if (isa<nn::SDPAOp, nn::PositionsOp, nn::DropoutOp>(op))
      ops.push_back(op);
  });
  SmallVector<Value> newCaches;
  for (Operation *op : ops) {
    b.setInsertionPoint(op);
    if (auto s = dyn_cast<nn::SDPAOp>(op)) {
      if (!s.getCausal()) {
        InFlightDiagnostic d = gen.emitError() << "generate decodes causal models; model '" << model.getName()
                                               << "' has attention that sees later positions";
        d.attachNote(s.getLoc()) << "this attention is not causal";
        return fail();
      }
      int64_t heads = int64_t(s.getHeadsAttr().getInt()), kv = int64_t(s.getKvHeadsAttr().getInt());
      int64_t hd = cast<RankedTensorType>(s.getType()).getDimSize(2) / heads;
      auto ct = RankedTensorType::get({1, window, 2 * kv * hd}, b.getF32Type());
      unsigned idx = f.getNumArguments();
      if (failed(f.insertArgument(idx, ct, b.getDictionaryAttr({b.getNamedAttr("nn.kv_cache", b.getUnitAttr())}),
                                  s.getLoc())))
        return fail();
      auto c = nn::SDPACachedOp::create(b, s.getLoc(), s.getType(), ct, s.getQkv(), f.getArgument(idx), offset,
                                        s.getHeadsAttr(), s.getKvHeadsAttr(), s.getRopeAttr(), s.getRopeThetaAttr());
      s.replaceAllUsesWith(c.getResult());
      s.erase();
      out.caches.push_back(ct);
      newCaches.push_back(c.getNewCache());
    } else if (auto p = dyn_cast<nn::PositionsOp>(op)) {
      p.replaceAllUsesWith(nn::PositionsOp::create(b, p.getLoc(), p.getType(), p.getTokens(), offset).getResult());
      p.erase();
    } else {
      auto d = cast<nn::DropoutOp>(op);
      d.replaceAllUsesWith(d.getX());
      d.erase();
    }
  }
  if (out.caches.empty()) {
    gen.emitError() << "generate decodes a model with attention; model '" << model.getName() << "' has none";
    return fail();
  }
  // Return the logits and the caches instead of the loss; the targets go.
  b.setInsertionPoint(ret);
  SmallVector<Value> results{loss.getLogits()};
  results.append(newCaches);
  func::ReturnOp::create(b, ret.getLoc(), results);
  ret.erase();
  loss.erase();
  if (!f.getArgument(1).use_empty() || failed(f.eraseArgument(1))) {
    gen.emitError() << "model '" << model.getName() << "' uses its targets other than in the loss";
    return fail();
  }
  SmallVector<Type> resultTypes;
  for (Value v : results)
    resultTypes.push_back(v.getType());
  f.setFunctionType(b.getFunctionType(f.getArgumentTypes(), resultTypes));
  out.fn = f;
  return out;
}

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
      if (failed(retrieval::checkSupported(context)))
        return signalPassFailure();
    }

    // The parameters, in the model's order, at their offsets in one flat array.
    SmallVector<FlatTensor> params;
    SmallVector<RankedTensorType> types;
    for (unsigned i = 0; i < model.getNumArguments(); ++i)
      if (auto name = model.getArgAttrOfType<StringAttr>(i, "nn.param")) {
        auto t = cast<RankedTensorType>(model.getArgument(i).getType());
        params.push_back({name.str(), t, 0, t.getNumElements(), i});
        types.push_back(t);
      }
    training::BufferLayout layout = training::layoutOf(types);
    for (auto [p, off] : llvm::zip(params, layout.offset))
      p.offset = off;

    int64_t chunk = std::min(window, kPrefillChunk);
    std::string base = gen.getSymName().str();
    FailureOr<Decode> prefill = buildDecode(gen, model, base + "_prefill", chunk, window);
    if (failed(prefill))
      return signalPassFailure();
    FailureOr<Decode> step = buildDecode(gen, model, base + "_step", 1, window);
    if (failed(step))
      return signalPassFailure();
    int64_t cacheFloats = 0;
    SmallVector<FlatTensor> caches;
    for (RankedTensorType t : prefill->caches) {
      caches.push_back({"", t, cacheFloats, t.getNumElements()});
      cacheFloats += t.getNumElements();
    }

    OpBuilder b(&getContext());
    Location loc = gen.getLoc();
    b.setInsertionPointToEnd(module.getBody());
    auto flatTy = MemRefType::get({layout.total}, b.getF32Type());
    auto cacheTy = MemRefType::get({cacheFloats}, b.getF32Type());
    // planc_prefill / planc_step(P, tokens [1, n], offset, cache, logits [1, n, vocab]):
    // the logits of positions offset … offset + n - 1, their keys and values stored.
    auto entry = [&](StringRef name, const Decode &d, int64_t n) {
      OpBuilder::InsertionGuard g(b);
      auto tokTy = MemRefType::get({1, n}, b.getI32Type());
      auto logitsTy = MemRefType::get({1, n, vocab.getInt()}, b.getF32Type());
      auto f = func::FuncOp::create(b, loc, name,
                                    b.getFunctionType({flatTy, tokTy, b.getI64Type(), cacheTy, logitsTy}, {}));
      Block *e = f.addEntryBlock();
      b.setInsertionPointToStart(e);
      Flat P(b, loc, e->getArgument(0)), C(b, loc, e->getArgument(3));
      SmallVector<Value> args{bufferization::ToTensorOp::create(b, loc, RankedTensorType::get({1, n}, b.getI32Type()),
                                                                e->getArgument(1), /*restrict=*/true,
                                                                /*writable=*/false)};
      for (const FlatTensor &p : params)
        args.push_back(P.read(p));
      args.push_back(e->getArgument(2));
      for (const FlatTensor &c : caches)
        args.push_back(C.read(c, /*writable=*/true));
      SmallVector<Value> outs = training::inlineBody(b, d.fn, args);
      auto m = bufferization::MaterializeInDestinationOp::create(b, loc, outs[0], e->getArgument(4));
      m.setRestrict(true);
      m.setWritable(true);
      for (auto [c, v] : llvm::zip(caches, ArrayRef<Value>(outs).drop_front()))
        C.write(v, c);
      func::ReturnOp::create(b, loc);
    };
    entry("planc_prefill", *prefill, chunk);
    entry("planc_step", *step, 1);

    // The manifest.
    llvm::json::Array ps;
    for (const FlatTensor &p : params) {
      llvm::json::Array shape;
      for (int64_t d : p.type.getShape())
        shape.push_back(d);
      ps.push_back(llvm::json::Object{{"name", p.name}, {"shape", std::move(shape)}, {"offset", p.offset},
                                      {"count", p.count}});
    }
    StringRef dir = gen.getBaseDir();
    llvm::json::Object root{{"format", "planc-generate-1"},
                            {"generate", gen.getSymName()},
                            {"model", gen.getModel()},
                            {"checkpoint", resolvePlanPath(dir, gen.getCheckpoint())},
                            {"num_floats", layout.total},
                            {"params", std::move(ps)},
                            {"vocab", vocab.getInt()},
                            {"window", window},
                            {"chunk", chunk},
                            {"layers", int64_t(caches.size())},
                            {"cache_floats", cacheFloats},
                            {"max_tokens", int64_t(gen.getMaxTokensAttr().getInt())},
                            {"temperature", gen.getTemperature().convertToDouble()},
                            {"top_k", int64_t(gen.getTopKAttr().getInt())},
                            {"seed", int64_t(gen.getSeedAttr().getInt())},
                            {"context", context ? llvm::json::Value(context.getSymName()) : llvm::json::Value(nullptr)}};
    std::string text;
    llvm::raw_string_ostream os(text);
    os << llvm::json::Value(std::move(root));
    retrieval::emitStringGlobal(b, loc, "planc_generate_manifest", text);
    if (context)
      retrieval::emitStringGlobal(b, loc, "planc_retrieval_manifest", retrieval::manifest(context));

    // What is left of the plan has been consumed.
    for (Operation &op : llvm::make_early_inc_range(module.getBody()->getOperations()))
      if (isa<pl::PlanDialect>(op.getDialect()) ||
          (isa<func::FuncOp>(op) && !cast<func::FuncOp>(op).getName().starts_with("planc_")))
        op.erase();
  }
};

} // namespace

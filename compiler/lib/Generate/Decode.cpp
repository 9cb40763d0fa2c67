// Decoding entries (plan/Generate/Decode.h): the model's forward function
// specialised to n positions over a key/value cache, inlined into an entry point
// on flat buffers.
#include "plan/Generate/Decode.h"

#include "plan/Dialect/NN/IR/NN.h"
#include "plan/Training/Training.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"

using namespace mlir;
using namespace plan;
using training::Flat;
using training::FlatTensor;

namespace {

/// The specialised function and the caches it takes, in argument order.
struct Decode {
  func::FuncOp fn;
  SmallVector<RankedTensorType> caches;
};

/// `name(tokens [1, n], params…, offset: i64, caches…) -> (out [1, n, width],
/// caches…)` from the model's forward function.
FailureOr<Decode> buildDecode(Operation *user, StringRef role, func::FuncOp model, StringRef name, int64_t n,
                              int64_t window, decode::Output output) {
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
    InFlightDiagnostic d = user->emitError() << role
                                             << " needs a model that returns cross_entropy(logits, "
                                                "targets); model '"
                                             << model.getName() << "' returns something else";
    d.attachNote(model.getLoc()) << "model '" << model.getName() << "' is declared here";
    return fail();
  }
  // The hidden states: what the logits project (the output head's input).
  Value result = loss.getLogits();
  Operation *head = nullptr;
  if (output == decode::Output::Hidden) {
    auto mm = result.getDefiningOp<nn::MatmulOp>();
    auto ht = mm ? dyn_cast<RankedTensorType>(mm.getX().getType()) : RankedTensorType();
    if (!ht || ht.getRank() != 3) {
      InFlightDiagnostic d = user->emitError() << role << " pools hidden states; the logits of model '"
                                               << model.getName() << "' are not a projection of them";
      d.attachNote(model.getLoc()) << "model '" << model.getName() << "' is declared here";
      return fail();
    }
    head = mm;
    result = mm.getX();
  }
  OpBuilder b(f.getContext());
  Location loc = user->getLoc();
  unsigned offsetArg = f.getNumArguments();
  if (failed(f.insertArgument(offsetArg, b.getI64Type(),
                              b.getDictionaryAttr({b.getNamedAttr("nn.offset", b.getUnitAttr())}), loc)))
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
        InFlightDiagnostic d = user->emitError() << role << " needs causal attention; model '" << model.getName()
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
    user->emitError() << role << " needs a model with attention; model '" << model.getName() << "' has none";
    return fail();
  }
  // Return the output and the caches instead of the loss; the targets go.
  b.setInsertionPoint(ret);
  SmallVector<Value> results{result};
  results.append(newCaches);
  func::ReturnOp::create(b, ret.getLoc(), results);
  ret.erase();
  loss.erase();
  if (head && head->use_empty())
    head->erase();
  if (!f.getArgument(1).use_empty() || failed(f.eraseArgument(1))) {
    user->emitError() << role << ": model '" << model.getName() << "' uses its targets other than in the loss";
    return fail();
  }
  SmallVector<Type> resultTypes;
  for (Value v : results)
    resultTypes.push_back(v.getType());
  f.setFunctionType(b.getFunctionType(f.getArgumentTypes(), resultTypes));
  out.fn = f;
  return out;
}

} // namespace

decode::Params decode::paramsOf(func::FuncOp model) {
  Params out;
  SmallVector<RankedTensorType> types;
  for (unsigned i = 0; i < model.getNumArguments(); ++i)
    if (auto name = model.getArgAttrOfType<StringAttr>(i, "nn.param")) {
      auto t = cast<RankedTensorType>(model.getArgument(i).getType());
      out.tensors.push_back({name.str(), t, 0, t.getNumElements(), i});
      types.push_back(t);
    }
  training::BufferLayout layout = training::layoutOf(types);
  for (auto [p, off] : llvm::zip(out.tensors, layout.offset))
    p.offset = off;
  out.total = layout.total;
  return out;
}

FailureOr<decode::Entry> decode::emitEntry(ModuleOp module, Operation *user, StringRef role, func::FuncOp model,
                                           const Params &params, StringRef name, int64_t n, int64_t window,
                                           Output output) {
  FailureOr<Decode> d = buildDecode(user, role, model, (name + "_body").str(), n, window, output);
  if (failed(d))
    return failure();
  Entry entry;
  SmallVector<FlatTensor> caches;
  for (RankedTensorType t : d->caches) {
    caches.push_back({"", t, entry.cacheFloats, t.getNumElements()});
    entry.cacheFloats += t.getNumElements();
  }
  entry.layers = int64_t(caches.size());
  auto outTy = cast<RankedTensorType>(d->fn.getResultTypes().front());
  entry.width = outTy.getDimSize(2);

  OpBuilder b(module.getContext());
  Location loc = user->getLoc();
  b.setInsertionPointToEnd(module.getBody());
  auto flatTy = MemRefType::get({params.total}, b.getF32Type());
  auto cacheTy = MemRefType::get({entry.cacheFloats}, b.getF32Type());
  auto tokTy = MemRefType::get({1, n}, b.getI32Type());
  auto resTy = MemRefType::get(outTy.getShape(), b.getF32Type());
  auto f = func::FuncOp::create(b, loc, name, b.getFunctionType({flatTy, tokTy, b.getI64Type(), cacheTy, resTy}, {}));
  Block *e = f.addEntryBlock();
  b.setInsertionPointToStart(e);
  Flat P(b, loc, e->getArgument(0)), C(b, loc, e->getArgument(3));
  SmallVector<Value> args{bufferization::ToTensorOp::create(b, loc, RankedTensorType::get({1, n}, b.getI32Type()),
                                                            e->getArgument(1), /*restrict=*/true,
                                                            /*writable=*/false)};
  for (const FlatTensor &p : params.tensors)
    args.push_back(P.read(p));
  args.push_back(e->getArgument(2));
  for (const FlatTensor &c : caches)
    args.push_back(C.read(c, /*writable=*/true));
  SmallVector<Value> outs = training::inlineBody(b, d->fn, args);
  auto m = bufferization::MaterializeInDestinationOp::create(b, loc, outs[0], e->getArgument(4));
  m.setRestrict(true);
  m.setWritable(true);
  for (auto [c, v] : llvm::zip(caches, ArrayRef<Value>(outs).drop_front()))
    C.write(v, c);
  func::ReturnOp::create(b, loc);
  d->fn.erase();
  return entry;
}

llvm::json::Object decode::layoutJson(func::FuncOp model, const Params &params, int64_t vocab, int64_t window,
                                      int64_t chunk, const Entry &entry) {
  llvm::json::Array ps;
  for (const FlatTensor &p : params.tensors) {
    llvm::json::Array shape;
    for (int64_t d : p.type.getShape())
      shape.push_back(d);
    ps.push_back(
        llvm::json::Object{{"name", p.name}, {"shape", std::move(shape)}, {"offset", p.offset}, {"count", p.count}});
  }
  return llvm::json::Object{{"model", model.getName()}, {"num_floats", params.total},
                            {"params", std::move(ps)},  {"vocab", vocab},
                            {"window", window},         {"chunk", chunk},
                            {"layers", entry.layers},   {"cache_floats", entry.cacheFloats},
                            {"width", entry.width}};
}

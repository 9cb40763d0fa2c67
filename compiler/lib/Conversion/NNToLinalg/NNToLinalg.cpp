// `convert-nn-to-linalg`: the elementwise and reduction ops of nn become
// linalg.generic ops on tensors (fused afterwards by linalg's elementwise
// fusion and compiled to loops); the ops with a library implementation
// (GEMMs through BLAS, attention, normalisations, embedding, cross-entropy)
// stay and are bufferized into calls (LibraryCalls.cpp).
#include "plan/Conversion/Passes.h"
#include "plan/Dialect/NN/IR/NN.h"
#include "plan/Target/RuntimeABI.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

namespace plan {
#define GEN_PASS_DEF_CONVERTNNTOLINALG
#include "plan/Conversion/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

using BodyFn = function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange)>;

/// A linalg.generic over the iteration space of `iterShape`.
SmallVector<Value> generic(OpBuilder &b, Location loc, ValueRange ins, ArrayRef<AffineMap> inMaps,
                           ArrayRef<RankedTensorType> outTypes, ArrayRef<AffineMap> outMaps,
                           ArrayRef<utils::IteratorType> iters, ArrayRef<Value> inits, BodyFn body) {
  SmallVector<Value> outs;
  for (auto [i, t] : llvm::enumerate(outTypes))
    outs.push_back(i < inits.size() && inits[i]
                       ? inits[i]
                       : Value(tensor::EmptyOp::create(b, loc, t.getShape(), t.getElementType())));
  SmallVector<AffineMap> maps(inMaps);
  maps.append(outMaps.begin(), outMaps.end());
  SmallVector<Type> types(outTypes.begin(), outTypes.end());
  auto op = linalg::GenericOp::create(
      b, loc, types, ins, outs, maps, iters,
      [&](OpBuilder &nb, Location nl, ValueRange args) { linalg::YieldOp::create(nb, nl, body(nb, nl, args)); });
  return SmallVector<Value>(op->getResults());
}

/// Elementwise over tensors of one shape.
Value elementwise(OpBuilder &b, Location loc, RankedTensorType type, ValueRange ins, BodyFn body) {
  AffineMap id = b.getMultiDimIdentityMap(type.getRank());
  SmallVector<AffineMap> inMaps(ins.size(), id);
  SmallVector<utils::IteratorType> iters(type.getRank(), utils::IteratorType::parallel);
  return generic(b, loc, ins, inMaps, {type}, {id}, iters, {}, body)[0];
}

Value cst(OpBuilder &b, Location loc, Type t, double v) {
  return arith::ConstantOp::create(b, loc, b.getFloatAttr(t, v));
}

/// A zero-filled tensor.
Value zeroFilled(OpBuilder &b, Location loc, RankedTensorType t) {
  Value empty = tensor::EmptyOp::create(b, loc, t.getShape(), t.getElementType());
  return linalg::FillOp::create(b, loc, ValueRange{cst(b, loc, t.getElementType(), 0.0)}, ValueRange{empty})
      .getResult(0);
}

/// tanh(√(2/π)·(x + 0.044715·x³)), the inner part of GPT-2's GELU.
Value geluTanh(OpBuilder &b, Location loc, Value x) {
  Type t = x.getType();
  Value x3 = arith::MulFOp::create(b, loc, x, arith::MulFOp::create(b, loc, x, x));
  Value inner = arith::AddFOp::create(b, loc, x, arith::MulFOp::create(b, loc, cst(b, loc, t, 0.044715), x3));
  return math::TanhOp::create(b, loc, arith::MulFOp::create(b, loc, cst(b, loc, t, std::sqrt(2.0 / M_PI)), inner));
}

Value sigmoid(OpBuilder &b, Location loc, Value x) {
  Type t = x.getType();
  Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
  return arith::DivFOp::create(b, loc, cst(b, loc, t, 1.0), arith::AddFOp::create(b, loc, cst(b, loc, t, 1.0), e));
}

/// The optimizers' updates (nn.adamw, nn.sgd) as one elementwise generic each.
SmallVector<Value> lowerOptimizer(OpBuilder &b, Operation *op) {
  Location loc = op->getLoc();
  auto type = [&](Value v) { return cast<RankedTensorType>(v.getType()); };
  using V = SmallVector<Value>;
  return llvm::TypeSwitch<Operation *, V>(op)
      .Case([&](nn::AdamWOp o) {
        // Scalars in f64 as PyTorch computes them on the host, applied in f32.
        Type f32 = b.getF32Type();
        auto narrow = [&](Value v) { return arith::TruncFOp::create(b, loc, f32, v); };
        auto c64 = [&](double v) { return cst(b, loc, b.getF64Type(), v); };
        double wd = o.getWeightDecay().convertToDouble(), b1 = o.getBeta1().convertToDouble(),
               b2 = o.getBeta2().convertToDouble(), eps = o.getEps().convertToDouble();
        Value decay =
            narrow(arith::SubFOp::create(b, loc, c64(1.0), arith::MulFOp::create(b, loc, o.getLr(), c64(wd))));
        Value stepSize = narrow(arith::DivFOp::create(b, loc, o.getLr(), o.getBc1()));
        Value bc2Sqrt = narrow(math::SqrtOp::create(b, loc, o.getBc2()));
        Value scale = o.getGradScale();
        RankedTensorType t = type(o.getParam());
        AffineMap id = b.getMultiDimIdentityMap(t.getRank());
        SmallVector<utils::IteratorType> iters(t.getRank(), utils::IteratorType::parallel);
        return generic(
            b, loc, {o.getParam(), o.getGrad(), o.getM(), o.getV()}, {id, id, id, id}, {t, t, t}, {id, id, id}, iters,
            {}, [&](OpBuilder &b, Location l, ValueRange a) {
              auto c = [&](double v) { return cst(b, l, f32, v); };
              Value g = arith::MulFOp::create(b, l, a[1], scale);
              Value p = arith::MulFOp::create(b, l, a[0], decay);
              Value m = arith::AddFOp::create(b, l, arith::MulFOp::create(b, l, a[2], c(b1)),
                                              arith::MulFOp::create(b, l, g, c(1 - b1)));
              Value v =
                  arith::AddFOp::create(b, l, arith::MulFOp::create(b, l, a[3], c(b2)),
                                        arith::MulFOp::create(b, l, arith::MulFOp::create(b, l, g, g), c(1 - b2)));
              Value denom = arith::AddFOp::create(
                  b, l, arith::DivFOp::create(b, l, math::SqrtOp::create(b, l, v), bc2Sqrt), c(eps));
              Value upd = arith::MulFOp::create(b, l, stepSize, arith::DivFOp::create(b, l, m, denom));
              Value np = arith::SubFOp::create(b, l, p, upd);
              if (Value apply = o.getApply())
                return V{arith::SelectOp::create(b, l, apply, np, a[0]), arith::SelectOp::create(b, l, apply, m, a[2]),
                         arith::SelectOp::create(b, l, apply, v, a[3])};
              return V{np, m, v};
            });
      })
      .Case([&](nn::SGDOp o) {
        Type f32 = b.getF32Type();
        double mu = o.getMomentum().convertToDouble(), wd = o.getWeightDecay().convertToDouble();
        // lr applied in f32, as torch's add_(d_p, alpha=-lr).
        Value lr = arith::TruncFOp::create(b, loc, f32, o.getLr());
        Value scale = o.getGradScale();
        RankedTensorType t = type(o.getParam());
        AffineMap id = b.getMultiDimIdentityMap(t.getRank());
        SmallVector<utils::IteratorType> iters(t.getRank(), utils::IteratorType::parallel);
        return generic(b, loc, {o.getParam(), o.getGrad(), o.getBuf()}, {id, id, id}, {t, t}, {id, id}, iters, {},
                       [&](OpBuilder &b, Location l, ValueRange a) {
                         auto c = [&](double v) { return cst(b, l, f32, v); };
                         Value g = arith::MulFOp::create(b, l, a[1], scale);
                         if (wd != 0)
                           g = arith::AddFOp::create(b, l, g, arith::MulFOp::create(b, l, a[0], c(wd)));
                         Value buf = a[2];
                         if (mu != 0)
                           g = buf = arith::AddFOp::create(b, l, arith::MulFOp::create(b, l, a[2], c(mu)), g);
                         Value np = arith::SubFOp::create(b, l, a[0], arith::MulFOp::create(b, l, lr, g));
                         if (Value apply = o.getApply())
                           return V{arith::SelectOp::create(b, l, apply, np, a[0]),
                                    arith::SelectOp::create(b, l, apply, buf, a[2])};
                         return V{np, buf};
                       });
      })
      .Default([](Operation *) { return V{}; });
}

/// The linalg form of one nn op, or null if it stays (a library call).
SmallVector<Value> lower(OpBuilder &b, Operation *op) {
  if (isa<nn::AdamWOp, nn::SGDOp>(op))
    return lowerOptimizer(b, op);
  Location loc = op->getLoc();
  auto type = [&](Value v) { return cast<RankedTensorType>(v.getType()); };
  using V = SmallVector<Value>;
  return llvm::TypeSwitch<Operation *, V>(op)
      // The forward side of Megatron's `f` is the identity (its VJP made the all-reduce).
      .Case([&](nn::AllReduceBackwardOp o) { return V{o.getX()}; })
      .Case([&](nn::AxisIndexOp o) {
        ModuleOp module = o->getParentOfType<ModuleOp>();
        Value axis = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(int32_t(o.getAxis())));
        return V{rt::callFunc(b, loc, module, rt::Fn::planrt_k_axis_coord, ValueRange{axis}).getResult(0)};
      })
      .Case([&](nn::AddOp o) {
        return V{elementwise(
            b, loc, type(o.getResult()), {o.getLhs(), o.getRhs()},
            [](OpBuilder &b, Location l, ValueRange a) { return V{arith::AddFOp::create(b, l, a[0], a[1])}; })};
      })
      .Case([&](nn::SubOp o) {
        return V{elementwise(
            b, loc, type(o.getResult()), {o.getLhs(), o.getRhs()},
            [](OpBuilder &b, Location l, ValueRange a) { return V{arith::SubFOp::create(b, l, a[0], a[1])}; })};
      })
      .Case([&](nn::MulOp o) {
        return V{elementwise(
            b, loc, type(o.getResult()), {o.getLhs(), o.getRhs()},
            [](OpBuilder &b, Location l, ValueRange a) { return V{arith::MulFOp::create(b, l, a[0], a[1])}; })};
      })
      .Case([&](nn::ScaleOp o) {
        double f = o.getFactor().convertToDouble();
        return V{elementwise(b, loc, type(o.getResult()), {o.getX()}, [&](OpBuilder &b, Location l, ValueRange a) {
          return V{arith::MulFOp::create(b, l, a[0], cst(b, l, a[0].getType(), f))};
        })};
      })
      .Case([&](nn::RoundOp o) {
        Type to = o.getTo();
        return V{elementwise(b, loc, type(o.getResult()), {o.getX()}, [&](OpBuilder &b, Location l, ValueRange a) {
          Value narrow = arith::TruncFOp::create(b, l, to, a[0]); // to nearest even
          return V{arith::ExtFOp::create(b, l, a[0].getType(), narrow)};
        })};
      })
      .Case([&](nn::DropoutOp o) -> V {
        if (o.getP().convertToDouble() != 0.0)
          return {};
        return V{o.getX()};
      })
      .Case([&](nn::GeluOp o) {
        return V{elementwise(b, loc, type(o.getResult()), {o.getX()}, [](OpBuilder &b, Location l, ValueRange a) {
          Type t = a[0].getType();
          Value th = geluTanh(b, l, a[0]);
          Value half = arith::MulFOp::create(b, l, cst(b, l, t, 0.5), a[0]);
          return V{arith::MulFOp::create(b, l, half, arith::AddFOp::create(b, l, cst(b, l, t, 1.0), th))};
        })};
      })
      .Case([&](nn::GeluGradOp o) {
        return V{
            elementwise(b, loc, type(o.getResult()), {o.getDy(), o.getX()}, [](OpBuilder &b, Location l, ValueRange a) {
              // d/dx 0.5·x·(1 + t) = 0.5·(1 + t) + 0.5·x·(1 − t²)·√(2/π)·(1 + 3·0.044715·x²)
              Type t = a[1].getType();
              Value x = a[1], th = geluTanh(b, l, x);
              Value one = cst(b, l, t, 1.0), half = cst(b, l, t, 0.5);
              Value sech2 = arith::SubFOp::create(b, l, one, arith::MulFOp::create(b, l, th, th));
              Value dinner = arith::MulFOp::create(
                  b, l, cst(b, l, t, std::sqrt(2.0 / M_PI)),
                  arith::AddFOp::create(
                      b, l, one,
                      arith::MulFOp::create(b, l, cst(b, l, t, 3 * 0.044715), arith::MulFOp::create(b, l, x, x))));
              Value d =
                  arith::AddFOp::create(b, l, arith::MulFOp::create(b, l, half, arith::AddFOp::create(b, l, one, th)),
                                        arith::MulFOp::create(b, l, arith::MulFOp::create(b, l, half, x),
                                                              arith::MulFOp::create(b, l, sech2, dinner)));
              return V{arith::MulFOp::create(b, l, a[0], d)};
            })};
      })
      .Case([&](nn::SiluOp o) {
        return V{elementwise(b, loc, type(o.getResult()), {o.getX()}, [](OpBuilder &b, Location l, ValueRange a) {
          return V{arith::MulFOp::create(b, l, a[0], sigmoid(b, l, a[0]))};
        })};
      })
      .Case([&](nn::SiluGradOp o) {
        return V{
            elementwise(b, loc, type(o.getResult()), {o.getDy(), o.getX()}, [](OpBuilder &b, Location l, ValueRange a) {
              // σ(x)·(1 + x·(1 − σ(x)))
              Type t = a[1].getType();
              Value s = sigmoid(b, l, a[1]), one = cst(b, l, t, 1.0);
              Value d = arith::MulFOp::create(
                  b, l, s,
                  arith::AddFOp::create(b, l, one,
                                        arith::MulFOp::create(b, l, a[1], arith::SubFOp::create(b, l, one, s))));
              return V{arith::MulFOp::create(b, l, a[0], d)};
            })};
      })
      .Case([&](nn::ReluOp o) {
        return V{elementwise(b, loc, type(o.getResult()), {o.getX()}, [](OpBuilder &b, Location l, ValueRange a) {
          return V{arith::MaximumFOp::create(b, l, a[0], cst(b, l, a[0].getType(), 0.0))};
        })};
      })
      .Case([&](nn::ReluGradOp o) {
        return V{
            elementwise(b, loc, type(o.getResult()), {o.getDy(), o.getX()}, [](OpBuilder &b, Location l, ValueRange a) {
              Value zero = cst(b, l, a[1].getType(), 0.0);
              Value pos = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OGT, a[1], zero);
              return V{arith::SelectOp::create(b, l, pos, a[0], zero)};
            })};
      })
      .Case([&](nn::BiasAddOp o) {
        RankedTensorType t = type(o.getResult());
        AffineMap id = b.getMultiDimIdentityMap(3);
        AffineMap last = AffineMap::get(3, 0, {b.getAffineDimExpr(2)}, b.getContext());
        SmallVector<utils::IteratorType> iters(3, utils::IteratorType::parallel);
        return generic(
            b, loc, {o.getX(), o.getBias()}, {id, last}, {t}, {id}, iters, {},
            [](OpBuilder &b, Location l, ValueRange a) { return V{arith::AddFOp::create(b, l, a[0], a[1])}; });
      })
      .Case([&](nn::SumRowsOp o) {
        AffineMap id = b.getMultiDimIdentityMap(3);
        AffineMap last = AffineMap::get(3, 0, {b.getAffineDimExpr(2)}, b.getContext());
        using I = utils::IteratorType;
        return generic(
            b, loc, {o.getX()}, {id}, {type(o.getResult())}, {last}, {I::reduction, I::reduction, I::parallel},
            {zeroFilled(b, loc, type(o.getResult()))},
            [](OpBuilder &b, Location l, ValueRange a) { return V{arith::AddFOp::create(b, l, a[1], a[0])}; });
      })
      .Case([&](nn::SumSquaresOp o) {
        // Accumulated in f64: an f32 running sum over millions of squares stops
        // growing (a 124M-parameter gradient norm would come out percents low).
        // Reassociation is allowed, so the reduction still vectorises.
        int64_t r = type(o.getX()).getRank();
        AffineMap id = b.getMultiDimIdentityMap(r);
        AffineMap none = AffineMap::get(r, 0, {}, b.getContext());
        SmallVector<utils::IteratorType> iters(r, utils::IteratorType::reduction);
        auto wide = RankedTensorType::get({}, b.getF64Type());
        auto fm = arith::FastMathFlagsAttr::get(b.getContext(), arith::FastMathFlags::reassoc);
        Value sum = generic(b, loc, {o.getX()}, {id}, {wide}, {none}, iters, {zeroFilled(b, loc, wide)},
                            [&](OpBuilder &b, Location l, ValueRange a) {
                              Value x = arith::ExtFOp::create(b, l, b.getF64Type(), a[0]);
                              Value sq = arith::MulFOp::create(b, l, x, x);
                              return V{arith::AddFOp::create(b, l, a[1], sq, fm)};
                            })[0];
        Value narrow =
            arith::TruncFOp::create(b, loc, b.getF32Type(), tensor::ExtractOp::create(b, loc, sum, ValueRange{}));
        return V{tensor::FromElementsOp::create(b, loc, type(o.getResult()), ValueRange{narrow})};
      })
      // Views: images [N, C, H, W] and features [N, 1, C·H·W] hold the same floats.
      .Case([&](nn::FlattenOp o) {
        Value rows = tensor::CollapseShapeOp::create(b, loc, o.getX(), ArrayRef<ReassociationIndices>{{0}, {1, 2, 3}});
        return V{tensor::ExpandShapeOp::create(b, loc, type(o.getResult()), rows,
                                               ArrayRef<ReassociationIndices>{{0}, {1, 2}})};
      })
      .Case([&](nn::UnflattenOp o) {
        Value rows = tensor::CollapseShapeOp::create(b, loc, o.getX(), ArrayRef<ReassociationIndices>{{0}, {1, 2}});
        return V{tensor::ExpandShapeOp::create(b, loc, type(o.getResult()), rows,
                                               ArrayRef<ReassociationIndices>{{0}, {1, 2, 3}})};
      })
      .Case([&](nn::PositionsOp o) {
        RankedTensorType t = type(o.getResult());
        SmallVector<utils::IteratorType> iters(2, utils::IteratorType::parallel);
        Value offset = o.getOffset();
        return generic(b, loc, {}, {}, {t}, {b.getMultiDimIdentityMap(2)}, iters, {},
                       [&](OpBuilder &b, Location l, ValueRange) {
                         Value s = arith::IndexCastOp::create(b, l, b.getI64Type(), linalg::IndexOp::create(b, l, 1));
                         if (offset)
                           s = arith::AddIOp::create(b, l, s, offset);
                         return V{arith::TruncIOp::create(b, l, b.getI32Type(), s)};
                       });
      })
      .Default([](Operation *) { return V{}; });
}

struct ConvertNNToLinalg : plan::impl::ConvertNNToLinalgBase<ConvertNNToLinalg> {
  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation()->walk([&](Operation *op) {
      if (isa<nn::NNDialect>(op->getDialect()))
        ops.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (Operation *op : ops) {
      rewriter.setInsertionPoint(op);
      Operation *before = op->getPrevNode();
      SmallVector<Value> repl = lower(rewriter, op);
      // A recomputed op (nn.recomputed, training::differentiate) stays distinct from
      // the original it repeats: its lowering carries the mark, which CSE compares.
      if (Attribute mark = op->getDiscardableAttr("nn.recomputed"))
        for (Operation *o = before ? before->getNextNode() : &op->getBlock()->front(); o && o != op;
             o = o->getNextNode())
          o->setDiscardableAttr("nn.recomputed", mark);
      if (auto d = dyn_cast<nn::DropoutOp>(op); d && repl.empty()) {
        d.emitOpError() << "with p > 0 is not implemented by the CPU code generator in this version";
        return signalPassFailure();
      }
      if (!repl.empty())
        rewriter.replaceOp(op, repl);
    }
  }
};

} // namespace

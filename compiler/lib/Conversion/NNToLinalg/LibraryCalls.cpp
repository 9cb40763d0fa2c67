// Bufferization of the nn ops that have a library implementation: each result
// gets a fresh 64-byte-aligned buffer and the op becomes one call — GEMMs to
// BLAS (cblas_sgemm), the rest to the runtime's kernels (planrt_kernels.h).
// Operands are passed as raw pointers to their first element; buffers that
// are not contiguous are copied first.
#include "plan/Conversion/LibraryCalls.h"
#include "plan/Dialect/NN/IR/NN.h"
#include "plan/Target/RuntimeABI.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::bufferization;
using namespace plan;

namespace {

/// Builds the call arguments of one library op.
class Call {
public:
  Call(RewriterBase &b, Operation *op) : b(b), loc(op->getLoc()), module(op->getParentOfType<ModuleOp>()) {}

  /// A pointer to the first element of a buffer (copied if not contiguous).
  Call &ptr(Value buffer) {
    auto mt = cast<MemRefType>(buffer.getType());
    if (!memref::isStaticShapeAndContiguousRowMajor(mt)) {
      Value copy =
          memref::AllocOp::create(b, loc, MemRefType::get(mt.getShape(), mt.getElementType()), b.getI64IntegerAttr(64));
      memref::CopyOp::create(b, loc, buffer, copy);
      buffer = copy;
    }
    args.push_back(firstElementPointer(b, loc, buffer));
    return *this;
  }
  /// A null pointer (an absent optional operand).
  Call &null() {
    args.push_back(LLVM::ZeroOp::create(b, loc, LLVM::LLVMPointerType::get(b.getContext())));
    return *this;
  }
  /// A value already of the callee's parameter type.
  Call &value(Value v) {
    args.push_back(v);
    return *this;
  }
  Call &i64(int64_t v) {
    args.push_back(arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v)));
    return *this;
  }
  Call &i32(int64_t v) {
    args.push_back(arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(int32_t(v))));
    return *this;
  }
  Call &f32(double v) {
    args.push_back(arith::ConstantOp::create(b, loc, b.getF32FloatAttr(float(v))));
    return *this;
  }
  /// Emits the runtime kernel `fn(args)` (planrt_abi.def), declaring it on first use.
  func::CallOp emit(rt::Fn fn) { return rt::callFunc(b, loc, module, fn, args); }
  /// Emits `callee(args)` of a library outside the runtime (BLAS), declaring it in the
  /// module on first use with the arguments' types.
  func::CallOp emit(StringRef callee) {
    SmallVector<Type> types;
    for (Value a : args)
      types.push_back(a.getType());
    auto fnType = b.getFunctionType(types, {});
    if (!module.lookupSymbol<func::FuncOp>(callee)) {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(module.getBody());
      func::FuncOp::create(b, loc, callee, fnType).setPrivate();
    }
    return func::CallOp::create(b, loc, callee, TypeRange{}, args);
  }

private:
  RewriterBase &b;
  Location loc;
  ModuleOp module;
  SmallVector<Value> args;
};

// CBLAS constants (cblas.h).
enum { kRowMajor = 101, kNoTrans = 111, kTrans = 112 };

/// The op's GEMM precision (kGemmPrecisionAttr), if any, on the call that replaces it,
/// for the targets that read it.
void keepPrecision(Operation *op, func::CallOp call) {
  if (Attribute precision = op->getAttr(kGemmPrecisionAttr))
    call->setAttr(kGemmPrecisionAttr, precision);
}

/// C[m, n] = op(A) · op(B), row-major, through BLAS; the call keeps the op's GEMM
/// precision.
void gemm(RewriterBase &b, Operation *op, bool transA, bool transB, int64_t m, int64_t n, int64_t k, Value a,
          int64_t lda, Value bm, int64_t ldb, Value c, int64_t ldc) {
  func::CallOp call = Call(b, op)
                          .i32(kRowMajor)
                          .i32(transA ? kTrans : kNoTrans)
                          .i32(transB ? kTrans : kNoTrans)
                          .i32(m)
                          .i32(n)
                          .i32(k)
                          .f32(1.0)
                          .ptr(a)
                          .i32(lda)
                          .ptr(bm)
                          .i32(ldb)
                          .f32(0.0)
                          .ptr(c)
                          .i32(ldc)
                          .emit("cblas_sgemm");
  keepPrecision(op, call);
}

int64_t dim(Value v, unsigned i) { return cast<ShapedType>(v.getType()).getDimSize(i); }

/// A fresh f32 buffer a call writes and a later one reads (plan-free-buffers frees it).
Value scratch(RewriterBase &b, Operation *op, ArrayRef<int64_t> shape) {
  return memref::AllocOp::create(b, op->getLoc(), MemRefType::get(shape, b.getF32Type()), b.getI64IntegerAttr(64));
}
int64_t rows(Value v) { return dim(v, 0) * dim(v, 1); }

/// Emits the call of a vision op (convolutions, pooling, batch normalisation) given its
/// operand and result buffers; images are [N, C, H, W].
LogicalResult emitVisionCall(RewriterBase &b, Operation *op, ArrayRef<Value> in, ArrayRef<Value> out) {
  // N, C, H, W of an image operand, then a window's k, stride, pad.
  auto image = [](Call &c, Value v) -> Call & { return c.i64(dim(v, 0)).i64(dim(v, 1)).i64(dim(v, 2)).i64(dim(v, 3)); };
  auto window = [](Call &c, int64_t k, int64_t stride, int64_t pad) -> Call & { return c.i64(k).i64(stride).i64(pad); };
  // N, C, H·W of an image; the elements per channel its statistics cover.
  auto channels = [](Call &c, Value v) -> Call & { return c.i64(dim(v, 0)).i64(dim(v, 1)).i64(dim(v, 2) * dim(v, 3)); };
  auto count = [](Value v) { return dim(v, 0) * dim(v, 2) * dim(v, 3); };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](nn::Conv2dOp o) {
        Call c(b, op);
        c.ptr(in[0]).ptr(in[1]);
        o.getBias() ? c.ptr(in[2]) : c.null();
        c.ptr(out[0]);
        window(image(c, o.getX()).i64(dim(o.getW(), 0)), dim(o.getW(), 2), o.getStride(), o.getPad())
            .emit(rt::Fn::planrt_k_conv2d);
        return success();
      })
      .Case([&](nn::Conv2dGradDataOp o) {
        Call c(b, op);
        c.ptr(in[0]).ptr(in[1]).ptr(out[0]);
        window(image(c, o.getDx()).i64(dim(o.getW(), 0)), dim(o.getW(), 2), o.getStride(), o.getPad())
            .emit(rt::Fn::planrt_k_conv2d_bwd_data);
        return success();
      })
      .Case([&](nn::Conv2dGradFilterOp o) {
        Call c(b, op);
        c.ptr(in[0]).ptr(in[1]).ptr(out[0]).ptr(out[1]);
        window(image(c, o.getX()).i64(dim(o.getDw(), 0)), dim(o.getDw(), 2), o.getStride(), o.getPad())
            .emit(rt::Fn::planrt_k_conv2d_bwd_filter);
        return success();
      })
      .Case([&](nn::MaxPool2dOp o) {
        Call c(b, op);
        c.ptr(in[0]).ptr(out[0]);
        window(image(c, o.getX()), o.getKernel(), o.getStride(), o.getPad()).emit(rt::Fn::planrt_k_maxpool2d);
        return success();
      })
      .Case([&](nn::MaxPool2dGradOp o) {
        Call c(b, op);
        c.ptr(in[0]).ptr(in[1]).ptr(out[0]);
        window(image(c, o.getX()), o.getKernel(), o.getStride(), o.getPad()).emit(rt::Fn::planrt_k_maxpool2d_bwd);
        return success();
      })
      .Case([&](nn::AvgPoolOp o) {
        Call c(b, op);
        channels(c.ptr(in[0]).ptr(out[0]), o.getX()).emit(rt::Fn::planrt_k_avgpool);
        return success();
      })
      .Case([&](nn::AvgPoolGradOp o) {
        Call c(b, op);
        channels(c.ptr(in[0]).ptr(out[0]), o.getDx()).emit(rt::Fn::planrt_k_avgpool_bwd);
        return success();
      })
      .Case([&](nn::BatchNormOp o) {
        if (o.getInference()) { // evaluation: the layer's running statistics, into stats too
          Call c(b, op);
          c.ptr(in[0]).ptr(in[1]).ptr(in[2]).ptr(out[0]).ptr(out[1]).i64(*o.getRunning());
          channels(c, o.getX()).f32(o.getEps().convertToDouble()).emit(rt::Fn::planrt_k_batchnorm_infer);
          return success();
        }
        // SyncBatchNorm: this rank's statistics, all-gathered over the group ([ranks, 2, C])
        // and combined into the group's.
        Value stats = out[1], local = o.getRanks() ? scratch(b, op, {2, dim(o.getX(), 1)}) : stats;
        channels(Call(b, op).ptr(in[0]).ptr(local), o.getX()).emit(rt::Fn::planrt_k_batchnorm_stats);
        if (int64_t ranks = o.getRanks().value_or(1); ranks > 1) {
          Value gathered = scratch(b, op, {ranks * 2, dim(o.getX(), 1)});
          Call(b, op).ptr(local).ptr(gathered).i64(1).i64(2).i64(dim(o.getX(), 1)).i32(*o.getAxis())
              .emit(rt::Fn::planrt_k_all_gather_seq);
          Call(b, op).ptr(gathered).ptr(stats).i64(ranks).i64(dim(o.getX(), 1)).emit(rt::Fn::planrt_k_batchnorm_combine);
        }
        Call c(b, op);
        c.ptr(in[0]).ptr(stats).ptr(in[1]).ptr(in[2]).ptr(out[0]);
        channels(c, o.getX()).f32(o.getEps().convertToDouble()).emit(rt::Fn::planrt_k_batchnorm_fwd);
        // The running statistics follow each batch once: not again in a recomputation.
        if (o.getRunning() && !op->hasAttr("nn.recomputed"))
          Call(b, op)
              .ptr(stats)
              .i64(*o.getRunning())
              .i64(dim(o.getX(), 1))
              .i64(count(o.getX()) * o.getRanks().value_or(1))
              .f32(o.getMomentum()->convertToDouble())
              .emit(rt::Fn::planrt_k_batchnorm_observe);
        return success();
      })
      .Case([&](nn::BatchNormGradOp o) {
        // dstats is this rank's (dbias, dweight); under SyncBatchNorm the input gradient
        // reads their sum over the group, over the group's count.
        float eps = float(o.getEps().convertToDouble());
        int64_t C = dim(o.getX(), 1), ranks = o.getRanks().value_or(1);
        Value dstats = scratch(b, op, {2, C}), summed = dstats;
        Call s(b, op);
        s.ptr(in[0]).ptr(in[1]).ptr(in[2]).ptr(dstats);
        channels(s, o.getX()).f32(eps).emit(rt::Fn::planrt_k_batchnorm_bwd_stats);
        if (ranks > 1) {
          summed = scratch(b, op, {2, C});
          Call(b, op).ptr(dstats).ptr(summed).i64(2 * C).i32(*o.getAxis()).i32(0).emit(rt::Fn::planrt_k_all_reduce);
        }
        Call c(b, op);
        c.ptr(in[0]).ptr(in[1]).ptr(in[2]).ptr(in[3]).ptr(summed).ptr(out[0]);
        channels(c, o.getX()).i64(count(o.getX()) * ranks).f32(eps).emit(rt::Fn::planrt_k_batchnorm_bwd_data);
        auto row = [&](int64_t r, Value to) {
          auto view = memref::SubViewOp::create(b, op->getLoc(), dstats, ArrayRef<OpFoldResult>{b.getIndexAttr(r), b.getIndexAttr(0)},
                                                ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(C)},
                                                ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1)});
          Value flat = memref::CollapseShapeOp::create(b, op->getLoc(), view, ArrayRef<ReassociationIndices>{{0, 1}});
          memref::CopyOp::create(b, op->getLoc(), flat, to);
        };
        row(0, out[2]);
        row(1, out[1]);
        return success(); // plan-free-buffers frees the scratch buffers after their last use
      })
      .Default([](Operation *op) { return op->emitOpError() << "has no library implementation"; });
}

/// Emits the call of a tensor-parallel op (its collectives, sequence slices and the
/// vocabulary-parallel loss) given its operand and result buffers; the vision ops in
/// emitVisionCall.
LogicalResult emitTensorParallelCall(RewriterBase &b, Operation *op, ArrayRef<Value> in, ArrayRef<Value> out) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](nn::AllReduceOp o) {
        Call(b, op)
            .ptr(in[0])
            .ptr(out[0])
            .i64(cast<ShapedType>(o.getX().getType()).getNumElements())
            .i32(o.getAxis())
            .i32(o.getReduce() == "max")
            .emit(rt::Fn::planrt_k_all_reduce);
        return success();
      })
      .Case([&](nn::AllGatherOp o) {
        Call(b, op)
            .ptr(in[0])
            .ptr(out[0])
            .i64(dim(o.getX(), 0))
            .i64(dim(o.getX(), 1))
            .i64(dim(o.getX(), 2))
            .i32(o.getAxis())
            .emit(rt::Fn::planrt_k_all_gather_seq);
        return success();
      })
      .Case([&](nn::ReduceScatterOp o) {
        Call(b, op)
            .ptr(in[0])
            .ptr(out[0])
            .i64(dim(o.getResult(), 0))
            .i64(dim(o.getResult(), 1))
            .i64(dim(o.getResult(), 2))
            .i32(o.getAxis())
            .emit(rt::Fn::planrt_k_reduce_scatter_seq);
        return success();
      })
      .Case([&](nn::SequenceSliceOp o) {
        Call(b, op)
            .ptr(in[0])
            .ptr(out[0])
            .i64(dim(o.getX(), 0))
            .i64(dim(o.getX(), 1))
            .i64(dim(o.getX(), 2))
            .value(in[1])
            .i64(dim(o.getResult(), 1))
            .emit(rt::Fn::planrt_k_sequence_slice);
        return success();
      })
      .Case([&](nn::SequenceUnsliceOp o) {
        Call(b, op)
            .ptr(in[0])
            .ptr(out[0])
            .i64(dim(o.getResult(), 0))
            .i64(dim(o.getResult(), 1))
            .i64(dim(o.getResult(), 2))
            .value(in[1])
            .i64(dim(o.getX(), 1))
            .emit(rt::Fn::planrt_k_sequence_unslice);
        return success();
      })
      .Case([&](nn::VocabParallelCrossEntropyOp o) {
        Call(b, op)
            .ptr(in[0])
            .ptr(in[1])
            .ptr(out[0])
            .ptr(out[1])
            .i64(rows(o.getLogits()))
            .i64(dim(o.getLogits(), 2))
            .value(in[2])
            .i32(o.getAxis())
            .emit(rt::Fn::planrt_k_cross_entropy_vp);
        return success();
      })
      .Case([&](nn::VocabParallelCrossEntropyGradOp o) {
        Call(b, op)
            .ptr(in[0])
            .ptr(in[1])
            .ptr(in[2])
            .ptr(in[3])
            .ptr(out[0])
            .i64(rows(o.getLogits()))
            .i64(dim(o.getLogits(), 2))
            .value(in[4])
            .emit(rt::Fn::planrt_k_cross_entropy_vp_bwd);
        return success();
      })
      .Default([&](Operation *op) { return emitVisionCall(b, op, in, out); });
}

/// Emits the call of one op given its operand and result buffers: GEMMs, embeddings,
/// normalisations, attention and the loss here, the others in emitTensorParallelCall.
LogicalResult emitCall(RewriterBase &b, Operation *op, ArrayRef<Value> in, ArrayRef<Value> out) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](nn::MatmulOp o) {
        int64_t m = rows(o.getX()), k = dim(o.getX(), 2), n = dim(o.getResult(), 2);
        gemm(b, op, false, o.getTransposeW(), m, n, k, in[0], k, in[1], o.getTransposeW() ? k : n, out[0], n);
        return success();
      })
      .Case([&](nn::MatmulWGradOp o) {
        int64_t m = rows(o.getX()), k = dim(o.getX(), 2), n = dim(o.getDy(), 2);
        if (o.getTransposeW()) // dw[n, k] = dyᵀ · x
          gemm(b, op, true, false, n, k, m, in[1], n, in[0], k, out[0], k);
        else // dw[k, n] = xᵀ · dy
          gemm(b, op, true, false, k, n, m, in[0], k, in[1], n, out[0], n);
        return success();
      })
      .Case([&](nn::EmbeddingOp o) {
        Call c(b, op);
        c.ptr(in[0]).ptr(in[1]).ptr(out[0]).i64(rows(o.getIds())).i64(dim(o.getTable(), 1)).i64(dim(o.getTable(), 0));
        if (o.getOffset())
          c.value(in[2]).emit(rt::Fn::planrt_k_embedding_slice);
        else
          c.emit(rt::Fn::planrt_k_embedding);
        return success();
      })
      .Case([&](nn::EmbeddingGradOp o) {
        Call c(b, op);
        c.ptr(in[0]).ptr(in[1]).ptr(out[0]).i64(rows(o.getIds())).i64(dim(o.getResult(), 1)).i64(dim(o.getResult(), 0));
        if (o.getOffset())
          c.value(in[2]).emit(rt::Fn::planrt_k_embedding_slice_bwd);
        else
          c.emit(rt::Fn::planrt_k_embedding_bwd);
        return success();
      })
      .Case([&](nn::DequantizeNF4Op o) {
        Call(b, op)
            .ptr(in[0])
            .ptr(out[0])
            .i64(o.getResult().getType().getNumElements())
            .i64(o.getBlock())
            .i32(o.getDoubleQuant())
            .emit(rt::Fn::planrt_k_dequant_nf4);
        return success();
      })
      .Case([&](nn::LayerNormOp o) {
        Call c(b, op);
        c.ptr(in[0]).ptr(in[1]);
        if (o.getBias())
          c.ptr(in[2]);
        else
          c.null();
        c.ptr(out[0])
            .i64(rows(o.getX()))
            .i64(dim(o.getX(), 2))
            .f32(o.getEps().convertToDouble())
            .emit(rt::Fn::planrt_k_layernorm);
        return success();
      })
      .Case([&](nn::LayerNormGradOp o) {
        Call(b, op)
            .ptr(in[0])
            .ptr(in[1])
            .ptr(in[2])
            .ptr(out[0])
            .ptr(out[1])
            .ptr(out[2])
            .i64(rows(o.getX()))
            .i64(dim(o.getX(), 2))
            .f32(o.getEps().convertToDouble())
            .emit(rt::Fn::planrt_k_layernorm_bwd);
        return success();
      })
      .Case([&](nn::RMSNormOp o) {
        Call(b, op)
            .ptr(in[0])
            .ptr(in[1])
            .ptr(out[0])
            .i64(rows(o.getX()))
            .i64(dim(o.getX(), 2))
            .f32(o.getEps().convertToDouble())
            .emit(rt::Fn::planrt_k_rmsnorm);
        return success();
      })
      .Case([&](nn::RMSNormGradOp o) {
        Call(b, op)
            .ptr(in[0])
            .ptr(in[1])
            .ptr(in[2])
            .ptr(out[0])
            .ptr(out[1])
            .i64(rows(o.getX()))
            .i64(dim(o.getX(), 2))
            .f32(o.getEps().convertToDouble())
            .emit(rt::Fn::planrt_k_rmsnorm_bwd);
        return success();
      })
      .Case([&](nn::SDPAOp o) {
        int64_t h = int64_t(o.getHeadsAttr().getInt()), kv = int64_t(o.getKvHeadsAttr().getInt());
        func::CallOp call = Call(b, op)
            .ptr(in[0])
            .ptr(out[0])
            .i64(dim(o.getQkv(), 0))
            .i64(dim(o.getQkv(), 1))
            .i64(h)
            .i64(kv)
            .i64(dim(o.getResult(), 2) / h)
            .i32(o.getCausal())
            .i32(o.getRope())
            .f32(o.getRopeTheta().convertToDouble())
            .emit(rt::Fn::planrt_k_sdpa);
        keepPrecision(op, call);
        return success();
      })
      .Case([&](nn::SDPAGradOp o) {
        int64_t h = int64_t(o.getHeadsAttr().getInt()), kv = int64_t(o.getKvHeadsAttr().getInt());
        func::CallOp call = Call(b, op)
            .ptr(in[0])
            .ptr(in[1])
            .ptr(out[0])
            .i64(dim(o.getQkv(), 0))
            .i64(dim(o.getQkv(), 1))
            .i64(h)
            .i64(kv)
            .i64(dim(o.getDy(), 2) / h)
            .i32(o.getCausal())
            .i32(o.getRope())
            .f32(o.getRopeTheta().convertToDouble())
            .emit(rt::Fn::planrt_k_sdpa_bwd);
        keepPrecision(op, call);
        return success();
      })
      .Case([&](nn::CrossEntropyOp o) {
        Call(b, op)
            .ptr(in[0])
            .ptr(in[1])
            .ptr(out[0])
            .i64(rows(o.getLogits()))
            .i64(dim(o.getLogits(), 2))
            .i32(0) // float32 logits: plan-cuda-half-storage may make them 16-bit
            .emit(rt::Fn::planrt_k_cross_entropy);
        return success();
      })
      .Case([&](nn::CrossEntropyGradOp o) {
        Call(b, op)
            .ptr(in[0])
            .ptr(in[1])
            .ptr(in[2])
            .ptr(out[0])
            .i64(rows(o.getLogits()))
            .i64(dim(o.getLogits(), 2))
            .i32(0) // not rounded: plan-cuda-round-results may ask for it
            .i32(0) // float32: plan-cuda-half-storage may make them 16-bit
            .emit(rt::Fn::planrt_k_cross_entropy_bwd);
        return success();
      })
      .Default([&](Operation *op) { return emitTensorParallelCall(b, op, in, out); });
}

/// Reads every operand, writes only fresh result buffers.
template <typename OpTy>
struct LibraryCallModel : public BufferizableOpInterface::ExternalModel<LibraryCallModel<OpTy>, OpTy> {
  bool bufferizesToMemoryRead(Operation *, OpOperand &, const AnalysisState &) const { return true; }
  bool bufferizesToMemoryWrite(Operation *, OpOperand &, const AnalysisState &) const { return false; }
  AliasingValueList getAliasingValues(Operation *, OpOperand &, const AnalysisState &) const { return {}; }
  bool bufferizesToAllocation(Operation *, Value) const { return true; }

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter, const BufferizationOptions &options,
                          BufferizationState &state) const {
    SmallVector<Value> in, out;
    for (Type t : llvm::concat<const Type>(op->getOperandTypes(), op->getResultTypes()))
      if (isa<RankedTensorType>(t) && !cast<RankedTensorType>(t).hasStaticShape())
        return op->emitOpError() << "needs static shapes to become a library call (run plan-train-step, "
                                    "which fixes batch and sequence), not "
                                 << t;
    for (Value v : op->getOperands()) {
      if (!isa<TensorType>(v.getType())) { // a scalar (an offset) is passed as it is
        in.push_back(v);
        continue;
      }
      FailureOr<Value> buffer = getBuffer(rewriter, v, options, state);
      if (failed(buffer))
        return failure();
      in.push_back(*buffer);
    }
    for (Value r : op->getResults()) {
      auto t = cast<RankedTensorType>(r.getType());
      out.push_back(memref::AllocOp::create(rewriter, op->getLoc(), MemRefType::get(t.getShape(), t.getElementType()),
                                            rewriter.getI64IntegerAttr(64)));
    }
    if (failed(emitCall(rewriter, op, in, out)))
      return failure();
    replaceOpWithBufferizedValues(rewriter, op, out);
    return success();
  }
};

/// nn.sdpa_cached: reads the chunk, writes the cache in place (its result is the
/// cache's buffer) and a fresh buffer for the attention.
struct SDPACachedModel : public BufferizableOpInterface::ExternalModel<SDPACachedModel, nn::SDPACachedOp> {
  bool bufferizesToMemoryRead(Operation *, OpOperand &, const AnalysisState &) const { return true; }
  bool bufferizesToMemoryWrite(Operation *op, OpOperand &operand, const AnalysisState &) const {
    return operand.get() == cast<nn::SDPACachedOp>(op).getCache();
  }
  AliasingValueList getAliasingValues(Operation *op, OpOperand &operand, const AnalysisState &) const {
    auto o = cast<nn::SDPACachedOp>(op);
    if (operand.get() != o.getCache())
      return {};
    return {{o.getNewCache(), BufferRelation::Equivalent}};
  }
  bool bufferizesToAllocation(Operation *op, Value v) const { return v == cast<nn::SDPACachedOp>(op).getResult(); }

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter, const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto o = cast<nn::SDPACachedOp>(op);
    for (Type t : {o.getQkv().getType(), o.getCache().getType(), o.getResult().getType()})
      if (!cast<RankedTensorType>(t).hasStaticShape())
        return op->emitOpError() << "needs static shapes to become a library call (plan-generate-abi fixes "
                                    "the chunk and the window), not "
                                 << t;
    FailureOr<Value> qkv = getBuffer(rewriter, o.getQkv(), options, state);
    FailureOr<Value> cache = getBuffer(rewriter, o.getCache(), options, state);
    if (failed(qkv) || failed(cache))
      return failure();
    auto t = cast<RankedTensorType>(o.getResult().getType());
    Value out = memref::AllocOp::create(rewriter, op->getLoc(), MemRefType::get(t.getShape(), t.getElementType()),
                                        rewriter.getI64IntegerAttr(64));
    // The cache must be the caller's contiguous buffer: a copy would lose the writes.
    if (!memref::isStaticShapeAndContiguousRowMajor(cast<MemRefType>(cache->getType())))
      return op->emitOpError() << "needs its cache in a contiguous row-major buffer";
    int64_t h = int64_t(o.getHeadsAttr().getInt()), kv = int64_t(o.getKvHeadsAttr().getInt());
    Call(rewriter, op)
        .ptr(*qkv)
        .ptr(*cache)
        .ptr(out)
        .i64(dim(o.getQkv(), 0))
        .i64(dim(o.getQkv(), 1))
        .i64(dim(o.getCache(), 1))
        .value(o.getOffset())
        .i64(h)
        .i64(kv)
        .i64(t.getDimSize(2) / h)
        .i32(o.getRope())
        .f32(o.getRopeTheta().convertToDouble())
        .emit(rt::Fn::planrt_k_sdpa_cached);
    replaceOpWithBufferizedValues(rewriter, op, {out, *cache});
    return success();
  }
};

template <typename... Ops> void attach(MLIRContext *ctx) {
  (Ops::template attachInterface<LibraryCallModel<Ops>>(*ctx), ...);
}

} // namespace

/// The ops lowered to calls (one list for registerLibraryCallModels and isLibraryCall).
#define PLAN_LIBRARY_CALL_OPS                                                                                          \
  nn::MatmulOp, nn::MatmulWGradOp, nn::EmbeddingOp, nn::EmbeddingGradOp, nn::LayerNormOp, nn::LayerNormGradOp,         \
      nn::RMSNormOp, nn::RMSNormGradOp, nn::SDPAOp, nn::SDPAGradOp, nn::CrossEntropyOp, nn::CrossEntropyGradOp,        \
      nn::AllReduceOp, nn::AllGatherOp, nn::ReduceScatterOp, nn::SequenceSliceOp, nn::SequenceUnsliceOp,               \
      nn::VocabParallelCrossEntropyOp, nn::VocabParallelCrossEntropyGradOp, nn::DequantizeNF4Op, nn::Conv2dOp,            \
      nn::Conv2dGradDataOp, nn::Conv2dGradFilterOp, nn::MaxPool2dOp, nn::MaxPool2dGradOp, nn::AvgPoolOp,                 \
      nn::AvgPoolGradOp, nn::BatchNormOp, nn::BatchNormGradOp

void plan::registerLibraryCallModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, nn::NNDialect *) {
    attach<PLAN_LIBRARY_CALL_OPS>(ctx);
    nn::SDPACachedOp::attachInterface<SDPACachedModel>(*ctx);
  });
}

bool plan::isLibraryCall(Operation *op) { return isa<PLAN_LIBRARY_CALL_OPS, nn::SDPACachedOp>(op); }

Value plan::firstElementPointer(OpBuilder &b, Location loc, Value buffer) {
  auto mt = cast<MemRefType>(buffer.getType());
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
  auto meta = memref::ExtractStridedMetadataOp::create(b, loc, buffer);
  int64_t bytes = mt.getElementTypeBitWidth() / 8;
  Value offset = arith::MulIOp::create(b, loc, meta.getOffset(), arith::ConstantIndexOp::create(b, loc, bytes));
  Value addr = arith::IndexCastOp::create(b, loc, b.getI64Type(), arith::AddIOp::create(b, loc, base, offset));
  return LLVM::IntToPtrOp::create(b, loc, LLVM::LLVMPointerType::get(b.getContext()), addr);
}

Value plan::bufferOfPointer(Value ptr, SmallVectorImpl<Operation *> *chain) {
  Value v = ptr;
  while (Operation *def = v.getDefiningOp()) {
    if (chain)
      chain->push_back(def);
    if (auto extract = dyn_cast<memref::ExtractAlignedPointerAsIndexOp>(def))
      return extract.getSource();
    if (isa<LLVM::IntToPtrOp, arith::IndexCastOp>(def))
      v = def->getOperand(0);
    else if (auto add = dyn_cast<arith::AddIOp>(def))
      v = add.getLhs();
    else
      return {};
  }
  return {};
}

Value plan::rootBuffer(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

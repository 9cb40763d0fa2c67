// `plan-cuda-library-calls`: BLAS and CPU kernel calls replaced by libplanrt_cuda's.
#include "plan/Target/CUDA/Passes.h"
#include "plan/Target/CUDA/DeviceCalls.h"
#include "plan/Target/CUDA/PrecisionCalls.h"

#include "plan/Conversion/LibraryCalls.h"
#include "plan/Target/RuntimeABI.h"
#include "planrt_cuda.h"
#include "planrt_kernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"


#include <array>

namespace plan {
#define GEN_PASS_DEF_PLANCUDALIBRARYCALLS
#include "plan/Target/CUDA/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

/// The runtime kernels libplanrt_cuda implements on the device: each CPU kernel
/// (planrt_kernels.h) and its device version (planrt_cuda.h), which takes the same
/// arguments. cblas_sgemm becomes planrt_cuda_gemm (cuBLASLt), and the attention kernels
/// their device versions, with one more argument: the precision the call carries
/// (kGemmPrecisionAttr) as planrt_gemm_compute (withPrecisionCalls).
constexpr std::pair<rt::Fn, rt::Fn> kDeviceKernels[] = {
    {rt::Fn::planrt_k_layernorm, rt::Fn::planrt_cuda_layernorm},
    {rt::Fn::planrt_k_layernorm_bwd, rt::Fn::planrt_cuda_layernorm_bwd},
    {rt::Fn::planrt_k_rmsnorm, rt::Fn::planrt_cuda_rmsnorm},
    {rt::Fn::planrt_k_rmsnorm_bwd, rt::Fn::planrt_cuda_rmsnorm_bwd},
    {rt::Fn::planrt_k_embedding, rt::Fn::planrt_cuda_embedding},
    {rt::Fn::planrt_k_embedding_bwd, rt::Fn::planrt_cuda_embedding_bwd},
    {rt::Fn::planrt_k_cross_entropy, rt::Fn::planrt_cuda_cross_entropy},
    {rt::Fn::planrt_k_cross_entropy_bwd, rt::Fn::planrt_cuda_cross_entropy_bwd},
    {rt::Fn::planrt_k_dequant_nf4, rt::Fn::planrt_cuda_dequant_nf4}};
// The renaming is sound only while each pair's C prototypes are the same.
static_assert(std::is_same_v<decltype(planrt_k_layernorm), decltype(planrt_cuda_layernorm)>);
static_assert(std::is_same_v<decltype(planrt_k_layernorm_bwd), decltype(planrt_cuda_layernorm_bwd)>);
static_assert(std::is_same_v<decltype(planrt_k_rmsnorm), decltype(planrt_cuda_rmsnorm)>);
static_assert(std::is_same_v<decltype(planrt_k_rmsnorm_bwd), decltype(planrt_cuda_rmsnorm_bwd)>);
static_assert(std::is_same_v<decltype(planrt_k_embedding), decltype(planrt_cuda_embedding)>);
static_assert(std::is_same_v<decltype(planrt_k_embedding_bwd), decltype(planrt_cuda_embedding_bwd)>);
static_assert(std::is_same_v<decltype(planrt_k_cross_entropy), decltype(planrt_cuda_cross_entropy)>);
static_assert(std::is_same_v<decltype(planrt_k_cross_entropy_bwd), decltype(planrt_cuda_cross_entropy_bwd)>);
static_assert(std::is_same_v<decltype(planrt_k_dequant_nf4), decltype(planrt_cuda_dequant_nf4)>);

/// The CPU kernels with no device version yet: a plan that needs one is refused.
constexpr rt::Fn kHostOnlyKernels[] = {
    rt::Fn::planrt_k_conv2d,          rt::Fn::planrt_k_conv2d_bwd_data,  rt::Fn::planrt_k_conv2d_bwd_filter,
    rt::Fn::planrt_k_maxpool2d,       rt::Fn::planrt_k_maxpool2d_bwd,    rt::Fn::planrt_k_avgpool,
    rt::Fn::planrt_k_avgpool_bwd,     rt::Fn::planrt_k_batchnorm_stats,  rt::Fn::planrt_k_batchnorm_fwd,
    rt::Fn::planrt_k_batchnorm_bwd_stats, rt::Fn::planrt_k_batchnorm_bwd_data, rt::Fn::planrt_k_batchnorm_eval,
    rt::Fn::planrt_k_batchnorm_running,       rt::Fn::planrt_k_batchnorm_combine,  rt::Fn::planrt_k_batchnorm_observe,
    rt::Fn::planrt_k_batchnorm_infer};

/// The calls that become a device call with one more argument, their precision.
struct WithPrecision {
  StringRef from;
  rt::Fn to;
};
std::array<WithPrecision, 3> withPrecisionCalls() {
  return {{{"cblas_sgemm", rt::Fn::planrt_cuda_gemm},
           {rt::name(rt::Fn::planrt_k_sdpa), rt::Fn::planrt_cuda_sdpa},
           {rt::name(rt::Fn::planrt_k_sdpa_bwd), rt::Fn::planrt_cuda_sdpa_bwd}}};
}

/// Whether `callee` is one of libplanrt_cuda's device kernels.
bool isDeviceKernel(StringRef callee) {
  return llvm::any_of(kDeviceKernels, [&](auto pair) { return callee == rt::name(pair.second); }) ||
         llvm::any_of(withPrecisionCalls(), [&](const WithPrecision &w) {
           return w.to != rt::Fn::planrt_cuda_gemm && callee == rt::name(w.to);
         });
}

struct PlanCudaLibraryCalls : plan::impl::PlanCudaLibraryCallsBase<PlanCudaLibraryCalls> {
  /// The device version of the CPU kernel `callee`, or "".
  static StringRef deviceName(StringRef callee) {
    for (auto [cpu, device] : kDeviceKernels)
      if (callee == rt::name(cpu))
        return rt::name(device);
    return "";
  }
  void runOnOperation() override {
    ModuleOp m = getOperation();
    SymbolTable symbols(m);
    for (const WithPrecision &w : withPrecisionCalls())
      if (failed(rewriteWithPrecision(m, symbols, w.from, w.to, PrecisionCalls::All)))
        return signalPassFailure();
    for (func::FuncOp f : llvm::make_early_inc_range(m.getOps<func::FuncOp>())) {
      if (!f.isDeclaration())
        continue;
      if (llvm::any_of(kHostOnlyKernels, [&](rt::Fn fn) { return f.getSymName() == rt::name(fn); })) {
        f.emitOpError() << "is a vision kernel, which the CUDA target does not implement in this version: "
                           "convolutions, pooling and batch normalisation train on the CPU target";
        return signalPassFailure();
      }
      StringRef to = deviceName(f.getSymName());
      if (to.empty())
        continue;
      if (symbols.lookup(to)) {
        f.emitOpError() << "'" << to << "' is already declared";
        return signalPassFailure();
      }
      if (failed(symbols.replaceAllSymbolUses(f.getSymNameAttr(), StringAttr::get(&getContext(), to), m)))
        return signalPassFailure();
      symbols.setSymbolName(f, to);
    }
    // A device kernel's operand must be device-visible memory; a constant global of the
    // executable is not (the cross-entropy backward's seed is read by the host).
    WalkResult r = m.walk([&](func::CallOp call) {
      if (!isDeviceKernel(call.getCallee()))
        return WalkResult::advance();
      for (auto [i, arg] : llvm::enumerate(call.getOperands())) {
        if (call.getCallee() == rt::name(rt::Fn::planrt_cuda_cross_entropy_bwd) && i == 0)
          continue;
        if (memref::GetGlobalOp g = globalBehind(arg)) {
          call.emitOpError() << "operand " << i << " of '" << call.getCallee() << "' is the constant global @"
                             << g.getName() << ", which a GPU kernel cannot read: not implemented by the CUDA target";
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    });
    if (r.wasInterrupted())
      signalPassFailure();
  }

  /// The memref.get_global whose buffer a library call's pointer operand points into
  /// (through the address arithmetic of LibraryCalls.cpp and views), or null.
  static memref::GetGlobalOp globalBehind(Value v) {
    while (Operation *def = v.getDefiningOp()) {
      if (auto g = dyn_cast<memref::GetGlobalOp>(def))
        return g;
      if (isa<LLVM::IntToPtrOp, arith::IndexCastOp, memref::ExtractAlignedPointerAsIndexOp>(def))
        v = def->getOperand(0);
      else if (auto add = dyn_cast<arith::AddIOp>(def))
        v = add.getLhs();
      else if (auto view = dyn_cast<ViewLikeOpInterface>(def))
        v = view.getViewSource();
      else
        return nullptr;
    }
    return nullptr;
  }
};

} // namespace

bool plan::cuda::becomesDeviceCall(StringRef callee) {
  return !PlanCudaLibraryCalls::deviceName(callee).empty() ||
         llvm::any_of(withPrecisionCalls(), [&](const WithPrecision &w) { return w.from == callee; });
}

// The CUDA target: its lowering pipeline (loops to GPU kernels, library calls to the
// CUDA runtime, kernels through NVVM to cubins), PTX printing and linking. Its own
// passes are one a file beside this one (Passes.td in include/plan/Target/CUDA).
//
// The step functions run on the host and launch one kernel per loop nest that
// convert-linalg-to-parallel-loops leaves (every element of the loop's parallel
// dimensions a thread, its reduction dimensions a loop in that thread), so every
// linalg op the CPU target generates runs on the device; GEMMs, attention, the
// normalisations, embeddings and the loss are calls of libplanrt_cuda. Buffers are
// CUDA managed memory (libplanrt_cuda's allocator), so the host code that remains —
// scalar loads of a loss, the runtime's collectives, the tensor-parallel kernels that
// have no device version yet — reads the same pointers; every launch and call is
// synchronous, so the host never reads a buffer a kernel is writing. The one exception
// is DDP's gradient buckets: their NCCL all-reduces run on a communication stream while
// the backward pass goes on, on ranges nothing touches until sched.wait (and only on a
// device with concurrent managed access; MPI does them elsewhere).
#include "plan/Target/CUDA.h"

#include "plan/Target/CPU.h"
#include "plan/Target/CUDA/Passes.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/GPUCommon/GPUToLLVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVM.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"

using namespace mlir;

namespace plan::cuda {

bool available() {
#ifdef PLANC_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

static void registerPipelinePasses() {
  static bool done = [] {
    registerGPUPasses();
    registerPlanCUDAPasses();
    return true;
  }();
  (void)done;
}

std::string toolkitDir() {
#ifdef PLANC_CUDA_TOOLKIT
  return PLANC_CUDA_TOOLKIT;
#else
  return "/usr/local/cuda";
#endif
}

void buildLoweringPipeline(OpPassManager &pm, const TargetOptions &options) {
  registerPipelinePasses();
  // One target per architecture; several architectures' cubins become one fat binary.
  SmallVector<StringRef> chips;
  StringRef(options.chip).split(chips, ',');
  std::string attach;
  for (StringRef chip : chips)
    attach += ("nvvm-attach-target{chip=" + chip + " features=+ptx80 O=3},").str();
  bool fat = chips.size() > 1 && options.format == "fatbin";
  std::string binary = "format=" + (fat ? std::string("bin") : options.format) +
                       (options.format == "isa" ? "" : " toolkit=" + toolkitDir());
  std::string pipeline =
      "plan-cuda-check-buckets,plan-gemm-precision,convert-sched-to-runtime,convert-nn-to-linalg,linalg-fuse-elementwise-ops,"
      "eliminate-empty-tensors,canonicalize,cse,one-shot-bufferize,cse,canonicalize,func.func(plan-free-buffers),"
      "plan-cuda-round-results,plan-cuda-half-storage,plan-cuda-library-calls,"
      "func.func(convert-linalg-to-parallel-loops),canonicalize,plan-gpu-map-loops,plan-gpu-host-scalars,plan-memory-plan,canonicalize,cse,gpu-launch-sink-index-computations,"
      "gpu-kernel-outlining,plan-cuda-host-sync," +
      attach +
      "gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=1},canonicalize,cse,reconcile-unrealized-casts),"
      "gpu-module-to-binary{" +
      binary + "}," + (fat ? "plan-cuda-fatbin," : "") +
      "arith-expand{include-bf16=true},convert-math-to-llvm,convert-math-to-libm,expand-strided-metadata,lower-affine,"
      "convert-scf-to-cf,convert-cf-to-llvm,convert-arith-to-llvm,convert-index-to-llvm,"
      "finalize-memref-to-llvm{use-generic-functions=1},convert-func-to-llvm{use-bare-ptr-memref-call-conv=1},"
      "gpu-to-llvm{use-bare-pointers-for-host=1 use-bare-pointers-for-kernels=1},reconcile-unrealized-casts,plan-emit-manifest,plan-emit-main{backend="
      "cuda}";
  if (failed(parsePassPipeline(pipeline, pm, llvm::errs())))
    llvm::report_fatal_error("planc: the CUDA lowering pipeline does not parse");
}

void buildHostEmulationPipeline(OpPassManager &pm, const std::string &order) {
  registerPipelinePasses();
  // shuffle:SEED is order=shuffle with that seed.
  StringRef name = order, seed = "1";
  if (name.starts_with("shuffle:"))
    std::tie(name, seed) = name.split(':');
  // The CUDA target's precisions, audited: a call it would run on bf16 (fp16) tensor
  // cores checks that its operands are bf16 (fp16) values.
  if (failed(parsePassPipeline("plan-gemm-precision", pm, llvm::errs())))
    llvm::report_fatal_error("planc: the host emulation pipeline does not parse");
  // The device work bracketed and waited for as on the CUDA target, for the emulated
  // device's host-touch and synchronisation audits (planrt_emu_start in main).
  cpu::buildLoweringPipeline(pm,
                             "func.func(plan-free-buffers),plan-cuda-round-results,plan-cuda-half-storage,"
                             "func.func(convert-linalg-to-parallel-loops),"
                             "canonicalize,plan-gpu-map-loops,plan-gpu-host-scalars,plan-memory-plan,plan-cuda-host-sync{emulated=1},"
                             "plan-emulated-device,plan-gpu-launch-to-loops{order=" +
                                 name.str() + " seed=" + seed.str() + "},plan-precision-audit",
                             "cuda-host");
}

LogicalResult printPTX(ModuleOp module, llvm::raw_ostream &os, std::string &error) {
  int64_t found = 0;
  for (auto bin : module.getOps<gpu::BinaryOp>())
    for (Attribute a : bin.getObjects()) {
      auto object = dyn_cast<gpu::ObjectAttr>(a);
      if (!object || object.getFormat() != gpu::CompilationTarget::Assembly)
        continue;
      os << "// gpu.binary @" << bin.getSymName() << " for " << object.getTarget() << "\n"
         << object.getObject().getValue() << "\n";
      ++found;
    }
  if (found == 0) {
    error = "the module has no PTX (no gpu.binary lowered to assembly)";
    return failure();
  }
  return success();
}

LogicalResult link(const std::string &object, const std::string &exe, const std::string &plancPath,
                   std::string &error) {
  if (!available()) {
    error = "this planc was built without the CUDA toolkit, so it has no libplanrt_cuda to link; rebuild it "
            "where /usr/local/cuda exists (or set CUDAToolkit_ROOT), or build with --target cpu";
    return failure();
  }
  return cpu::link(object, exe, plancPath, error, /*retrieval=*/false, /*extraLibraries=*/{"planrt_cuda"});
}

void registerTarget(DialectRegistry &registry) {
  registry.insert<gpu::GPUDialect, NVVM::NVVMDialect, index::IndexDialect>();
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  gpu::registerConvertGpuToLLVMInterface(registry);
  NVVM::registerConvertGpuToNVVMInterface(registry);
  registerConvertNVVMToLLVMInterface(registry);
  registerConvertFuncToLLVMInterface(registry);
  arith::registerConvertArithToLLVMInterface(registry);
  cf::registerConvertControlFlowToLLVMInterface(registry);
  registerConvertMemRefToLLVMInterface(registry);
  index::registerConvertIndexToLLVMInterface(registry);
  registerConvertMathToLLVMInterface(registry);
  ub::registerConvertUBToLLVMInterface(registry);
  registerGPUDialectTranslation(registry);
  gpu::registerOffloadingLLVMTranslationInterfaceExternalModels(registry);
  registerNVVMDialectTranslation(registry);
  registerPipelinePasses();
}

} // namespace plan::cuda

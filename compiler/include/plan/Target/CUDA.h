// The CUDA target: the train step's loops as GPU kernels (gpu → NVVM → PTX →
// cubin), GEMMs and the fused nn kernels as calls of libplanrt_cuda (cuBLASLt and
// runtime/cuda), host code as on the CPU target, linked with libplanrt_cuda.
#ifndef PLAN_TARGET_CUDA_H
#define PLAN_TARGET_CUDA_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <string>

namespace plan::cuda {

/// Whether this planc was built with the CUDA toolkit (libplanrt_cuda exists to link).
bool available();

/// The CUDA toolkit planc was built with (its ptxas and fatbinary), else /usr/local/cuda.
std::string toolkitDir();

struct TargetOptions {
  /// The GPU architecture the cubin is for, or several separated by commas
  /// ("sm_80,sm_90": a cubin each, combined into one fat binary by plan-cuda-fatbin).
  std::string chip = "sm_90";
  /// "fatbin" (cubin + PTX, through ptxas and fatbinary: executables) or "isa"
  /// (PTX text only, which needs no toolkit: `planc emit --stage ptx`).
  std::string format = "fatbin";
};

/// sched stage → LLVM dialect: nn → linalg, bufferization with library calls (the
/// CUDA runtime's), loops → GPU kernels, kernels → NVVM → a gpu.binary, host code →
/// LLVM, and the `main` that starts the device then the runtime.
void buildLoweringPipeline(mlir::OpPassManager &pm, const TargetOptions &options = {});

/// The CUDA target's program run by the host (`--target cuda-host`): the CPU
/// pipeline with its loops replaced by the CUDA target's kernels (plan-gpu-map-loops),
/// each launch then executed as host loops over its blocks and threads
/// (plan-gpu-launch-to-loops), with the CPU's library kernels. It checks the kernel
/// mapping against the CPU target where no GPU is.
/// `order` is plan-gpu-launch-to-loops': "forward", "reverse" (every launch's blocks
/// and threads last first), "shuffle" or "shuffle:SEED" (in an order drawn from the seed):
/// the audits for races between threads.
void buildHostEmulationPipeline(mlir::OpPassManager &pm, const std::string &order = "forward");

/// The PTX of every gpu.binary of a module lowered with format "isa", each preceded by
/// a comment naming the binary; an error if there is none.
mlir::LogicalResult printPTX(mlir::ModuleOp module, llvm::raw_ostream &os, std::string &error);

/// Links a host object with libplanrt_cuda and libplanrt into an executable.
mlir::LogicalResult link(const std::string &object, const std::string &exe, const std::string &plancPath,
                         std::string &error);

/// Registers the dialects, interfaces, translations and passes the target needs.
void registerTarget(mlir::DialectRegistry &registry);

} // namespace plan::cuda

#endif // PLAN_TARGET_CUDA_H

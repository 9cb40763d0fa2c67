// Which calls of the CPU target's program the CUDA target runs on the GPU.
#ifndef PLAN_TARGET_CUDA_DEVICECALLS_H
#define PLAN_TARGET_CUDA_DEVICECALLS_H

#include "llvm/ADT/StringRef.h"

namespace plan::cuda {

/// Whether a call of `callee` (cblas_sgemm, a planrt_k_* kernel) is one that
/// plan-cuda-library-calls turns into a libplanrt_cuda device call: device work on the
/// CUDA target, and therefore on cuda-host's emulated device (plan-emulated-device,
/// plan-cuda-host-sync{emulated}). The other calls stay host code on both.
bool becomesDeviceCall(llvm::StringRef callee);

} // namespace plan::cuda

#endif // PLAN_TARGET_CUDA_DEVICECALLS_H

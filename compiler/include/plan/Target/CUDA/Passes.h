// The CUDA target's own passes: GEMM precision, library calls, kernels, the memory plan, fat binaries, host emulation.
#ifndef PLAN_TARGET_CUDA_PASSES_H
#define PLAN_TARGET_CUDA_PASSES_H

#include "plan/Dialect/Sched/IR/Sched.h"
#include "plan/Target/CUDA.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace plan {

#define GEN_PASS_DECL
#include "plan/Target/CUDA/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "plan/Target/CUDA/Passes.h.inc"

} // namespace plan

#endif // PLAN_TARGET_CUDA_PASSES_H

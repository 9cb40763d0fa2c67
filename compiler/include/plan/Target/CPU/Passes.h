// The CPU target's own passes: buffer lifetimes, tanh, the executable's main.
#ifndef PLAN_TARGET_CPU_PASSES_H
#define PLAN_TARGET_CPU_PASSES_H

#include "plan/Dialect/Sched/IR/Sched.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace plan {

#define GEN_PASS_DECL
#include "plan/Target/CPU/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "plan/Target/CPU/Passes.h.inc"

} // namespace plan

#endif // PLAN_TARGET_CPU_PASSES_H

// The step program in the sched dialect: plan-schedule builds it, sched-check-deadlock proves it.
#ifndef PLAN_SCHEDULE_PASSES_H
#define PLAN_SCHEDULE_PASSES_H

#include "plan/Dialect/Sched/IR/Sched.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace plan {

#define GEN_PASS_DECL
#include "plan/Schedule/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "plan/Schedule/Passes.h.inc"

} // namespace plan

#endif // PLAN_SCHEDULE_PASSES_H

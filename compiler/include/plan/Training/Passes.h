// The training passes: autodiff, the train step, the tensor, pipeline and shard layouts, the entry points.
#ifndef PLAN_TRAINING_PASSES_H
#define PLAN_TRAINING_PASSES_H

#include "plan/Dialect/NN/IR/NN.h"
#include "plan/Dialect/Sched/IR/Sched.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace plan {

#define GEN_PASS_DECL
#include "plan/Training/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "plan/Training/Passes.h.inc"

} // namespace plan

#endif // PLAN_TRAINING_PASSES_H

// Conversions between planc's dialects and to upstream ones (convert-x-to-y).
#ifndef PLAN_CONVERSION_PASSES_H
#define PLAN_CONVERSION_PASSES_H

#include "plan/Dialect/NN/IR/NN.h"
#include "plan/Dialect/Sched/IR/Sched.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace plan {

#define GEN_PASS_DECL
#include "plan/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "plan/Conversion/Passes.h.inc"

} // namespace plan

#endif // PLAN_CONVERSION_PASSES_H

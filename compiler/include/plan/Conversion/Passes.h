// Conversions between planc's dialects.
#ifndef PLAN_CONVERSION_PASSES_H
#define PLAN_CONVERSION_PASSES_H

#include "plan/Dialect/NN/IR/NN.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace plan {

#define GEN_PASS_DECL
#include "plan/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "plan/Conversion/Passes.h.inc"

} // namespace plan

#endif // PLAN_CONVERSION_PASSES_H

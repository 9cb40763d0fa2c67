// Passes over the `plan` dialect.
#ifndef PLAN_DIALECT_PLAN_TRANSFORMS_PASSES_H
#define PLAN_DIALECT_PLAN_TRANSFORMS_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace plan::pl {

#define GEN_PASS_DECL
#include "plan/Dialect/Plan/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "plan/Dialect/Plan/Transforms/Passes.h.inc"

} // namespace plan::pl

#endif // PLAN_DIALECT_PLAN_TRANSFORMS_PASSES_H

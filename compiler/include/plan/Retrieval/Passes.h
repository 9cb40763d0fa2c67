// The retrieval executable's pass: its manifest and main (plan-retrieval-abi).
#ifndef PLAN_RETRIEVAL_PASSES_H
#define PLAN_RETRIEVAL_PASSES_H

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace plan {

#define GEN_PASS_DECL
#include "plan/Retrieval/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "plan/Retrieval/Passes.h.inc"

} // namespace plan

#endif // PLAN_RETRIEVAL_PASSES_H

// The decoding executable's pass: its entry points and manifest (plan-generate-abi).
#ifndef PLAN_GENERATE_PASSES_H
#define PLAN_GENERATE_PASSES_H

#include "plan/Dialect/NN/IR/NN.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace plan {

#define GEN_PASS_DECL
#include "plan/Generate/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "plan/Generate/Passes.h.inc"

} // namespace plan

#endif // PLAN_GENERATE_PASSES_H

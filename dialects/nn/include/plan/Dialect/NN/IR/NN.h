// The `nn` dialect: ops of a model's forward graph.
#ifndef PLAN_DIALECT_NN_IR_NN_H
#define PLAN_DIALECT_NN_IR_NN_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "plan/Dialect/NN/IR/NNDialect.h.inc"
#include "plan/Dialect/NN/IR/NNInterfaces.h.inc"

#define GET_OP_CLASSES
#include "plan/Dialect/NN/IR/NNOps.h.inc"

#endif // PLAN_DIALECT_NN_IR_NN_H

// The `plan` dialect: dialect, enums, attributes and ops.
#ifndef PLAN_DIALECT_PLAN_IR_PLAN_H
#define PLAN_DIALECT_PLAN_IR_PLAN_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "plan/Dialect/Plan/IR/PlanDialect.h.inc"
#include "plan/Dialect/Plan/IR/PlanEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "plan/Dialect/Plan/IR/PlanAttrs.h.inc"

#define GET_OP_CLASSES
#include "plan/Dialect/Plan/IR/PlanOps.h.inc"

#endif // PLAN_DIALECT_PLAN_IR_PLAN_H

// The `sched` dialect: the per-rank program of a training step.
#ifndef PLAN_DIALECT_SCHED_IR_SCHED_H
#define PLAN_DIALECT_SCHED_IR_SCHED_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "plan/Dialect/Sched/IR/SchedDialect.h.inc"

#define GET_TYPEDEF_CLASSES
#include "plan/Dialect/Sched/IR/SchedTypes.h.inc"

#define GET_OP_CLASSES
#include "plan/Dialect/Sched/IR/SchedOps.h.inc"

namespace plan::sched {
/// The module's sched.mesh (there is one per program), or null.
MeshOp getMesh(mlir::Operation *from);
} // namespace plan::sched

#endif // PLAN_DIALECT_SCHED_IR_SCHED_H

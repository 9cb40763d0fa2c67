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

namespace plan::nn {
/// The output extent of a window of `k` sliding by `stride` over `n` padded by `pad` on
/// both sides, rounded down as PyTorch's Conv2d and MaxPool2d (nn.conv2d, nn.maxpool2d);
/// dynamic in, dynamic out; 0 or less when the window does not fit.
inline int64_t windowedExtent(int64_t n, int64_t k, int64_t stride, int64_t pad) {
  return mlir::ShapedType::isDynamic(n) ? mlir::ShapedType::kDynamic : (n + 2 * pad - k) / stride + 1;
}
} // namespace plan::nn

#endif // PLAN_DIALECT_NN_IR_NN_H

// Entry points on flat buffers: a function's tensors read from and written to
// ranges of one f32 array (an argument of the entry), and a function body
// inlined into an entry. Shared by the training and generation ABIs.
#ifndef PLAN_TRAINING_FLAT_H
#define PLAN_TRAINING_FLAT_H

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

#include <string>

namespace plan::training {

/// A tensor stored in a flat buffer: its name, type, and float range.
struct FlatTensor {
  std::string name;
  mlir::RankedTensorType type;
  int64_t offset = 0, count = 0;
  unsigned arg = 0; ///< its argument in the function the entry inlines
};

/// Inlines the single block of `callee` at the builder's point, arguments
/// replaced by `args`; returns the values it returns.
llvm::SmallVector<mlir::Value> inlineBody(mlir::OpBuilder &b, mlir::func::FuncOp callee, mlir::ValueRange args);

/// A flat f32 buffer (a function argument) holding tensors at their offsets. A
/// tensor is read as a tensor view of its subview and written by materializing a
/// tensor into that subview; empty-tensor elimination then lets the op that
/// computes the new value write straight into the buffer. Each tensor is its own
/// subset, which keeps bufferization's analysis local.
struct Flat {
  mlir::OpBuilder &b;
  mlir::Location loc;
  mlir::Value buffer;

  Flat(mlir::OpBuilder &b, mlir::Location loc, mlir::Value buffer) : b(b), loc(loc), buffer(buffer) {}

  mlir::Value subview(const FlatTensor &p);
  /// The range of `p` as a 1-D tensor; `writable` when an op updates it in place.
  mlir::Value readFlat(const FlatTensor &p, bool writable = false);
  /// The range of `p` in its shape.
  mlir::Value read(const FlatTensor &p, bool writable = false);
  /// Writes a 1-D tensor of p.count elements into the range of `p`.
  void writeFlat(mlir::Value value, const FlatTensor &p);
  /// Writes a tensor of p's shape into the range of `p`.
  void write(mlir::Value value, const FlatTensor &p);
  /// The range of `p` += scale × `delta` (1-D, p.count elements), in place: one elementwise
  /// linalg.generic whose init is the range itself, so bufferization adds into the buffer
  /// rather than into a new one that is copied back.
  void addInPlace(mlir::Value delta, const FlatTensor &p, double scale = 1.0);
  mlir::Value flatten(mlir::Value v, const FlatTensor &p);
  static llvm::SmallVector<mlir::ReassociationIndices> reassociation(const FlatTensor &p);
};

} // namespace plan::training

#endif // PLAN_TRAINING_FLAT_H

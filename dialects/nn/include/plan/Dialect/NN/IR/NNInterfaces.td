// Interfaces of the `nn` dialect.
#ifndef PLAN_DIALECT_NN_IR_NNINTERFACES_TD
#define PLAN_DIALECT_NN_IR_NNINTERFACES_TD

include "mlir/IR/OpBase.td"

def NN_VJPOpInterface : OpInterface<"VJPOpInterface"> {
  let description = [{
    An op that knows its vector-Jacobian product: given the gradients of its
    results, it builds the gradients of its operands. `nn-autodiff` composes
    these in reverse over a forward function.
  }];
  let cppNamespace = "::plan::nn";
  let methods = [
    InterfaceMethod<[{
        Builds the gradients of the operands at the builder's insertion point.
        `resultGrads` has one entry per result (never null: the caller
        materialises zeros). `operandGrads` receives one entry per operand,
        null where the operand is not differentiable (integer ids). Fails with
        an error on the op when the VJP is not implemented for its attributes.
      }], "::llvm::LogicalResult", "buildVJP",
      (ins "::mlir::OpBuilder &":$b, "::mlir::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

#endif // PLAN_DIALECT_NN_IR_NNINTERFACES_TD

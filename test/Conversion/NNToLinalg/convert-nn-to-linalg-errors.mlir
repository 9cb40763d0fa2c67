// convert-nn-to-linalg has no random mask: a dropout with p > 0 is an error at the op.
// RUN: planc-opt %s -convert-nn-to-linalg -verify-diagnostics

func.func @f(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'nn.dropout' op with p > 0 is not implemented by the CPU code generator in this version}}
  %y = nn.dropout %x {p = 0.25 : f64} : tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// The verifiers of the vision ops.
// RUN: planc-opt %s -split-input-file -verify-diagnostics

func.func @f(%x: tensor<?x3x32x32xf32>, %w: tensor<16x4x3x3xf32>) {
  // expected-error @+1 {{convolves 3 channels with a filter of 4 input channels}}
  %c = nn.conv2d %x, %w {stride = 1 : i64, pad = 1 : i64} : (tensor<?x3x32x32xf32>, tensor<16x4x3x3xf32>) -> tensor<?x16x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<?x3x32x32xf32>, %w: tensor<16x3x3x2xf32>) {
  // expected-error @+1 {{needs a static square filter [out, in, k, k], not 'tensor<16x3x3x2xf32>'}}
  %c = nn.conv2d %x, %w {stride = 1 : i64, pad = 1 : i64} : (tensor<?x3x32x32xf32>, tensor<16x3x3x2xf32>) -> tensor<?x16x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<?x3x32x32xf32>, %w: tensor<16x3x3x3xf32>) {
  // expected-error @+1 {{of 'tensor<?x3x32x32xf32>' gives [?, 16, 16, 16], not 'tensor<?x16x32x32xf32>'}}
  %c = nn.conv2d %x, %w {stride = 2 : i64, pad = 1 : i64} : (tensor<?x3x32x32xf32>, tensor<16x3x3x3xf32>) -> tensor<?x16x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<?x3x32x32xf32>, %w: tensor<16x3x3x3xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{needs a bias of 16 channels, not 'tensor<8xf32>'}}
  %c = nn.conv2d %x, %w, %b {stride = 1 : i64, pad = 1 : i64} : (tensor<?x3x32x32xf32>, tensor<16x3x3x3xf32>, tensor<8xf32>) -> tensor<?x16x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<?x3x32x32xf32>) {
  // expected-error @+1 {{pads by 2, more than half its window of 3}}
  %m = nn.maxpool2d %x {kernel = 3 : i64, stride = 2 : i64, pad = 2 : i64} : tensor<?x3x32x32xf32> -> tensor<?x3x17x17xf32>
  return
}

// -----

func.func @f(%x: tensor<?x3x32x32xf32>) {
  // expected-error @+1 {{needs a window of at least 1, a stride of at least 1 and padding of at least 0, not 3, 0 and 0}}
  %m = nn.maxpool2d %x {kernel = 3 : i64, stride = 0 : i64, pad = 0 : i64} : tensor<?x3x32x32xf32> -> tensor<?x3x17x17xf32>
  return
}

// -----

func.func @f(%x: tensor<?x3x2x2xf32>) {
  // expected-error @+1 {{has a window of 3 larger than its padded input 'tensor<?x3x2x2xf32>'}}
  %m = nn.maxpool2d %x {kernel = 3 : i64, stride = 1 : i64, pad = 0 : i64} : tensor<?x3x2x2xf32> -> tensor<?x3x1x1xf32>
  return
}

// -----

func.func @f(%x: tensor<?x3x8x8xf32>) {
  // expected-error @+1 {{of 'tensor<?x3x8x8xf32>' gives [N, C, 1, 1], not 'tensor<?x3x2x2xf32>'}}
  %m = nn.avgpool %x : tensor<?x3x8x8xf32> -> tensor<?x3x2x2xf32>
  return
}

// -----

func.func @f(%x: tensor<?x3x8x8xf32>) {
  // expected-error @+1 {{of 'tensor<?x3x8x8xf32>' gives [N, 1, C·H·W], not 'tensor<?x1x64xf32>'}}
  %m = nn.flatten %x : tensor<?x3x8x8xf32> -> tensor<?x1x64xf32>
  return
}

// -----

func.func @f(%x: tensor<?x3x8x8xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{normalises 3 channels with a weight 'tensor<4xf32>' and a bias 'tensor<4xf32>'}}
  %y, %s = nn.batchnorm %x, %w, %w {eps = 1.0e-05 : f64} : tensor<?x3x8x8xf32>, tensor<4xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @f(%x: tensor<?x4x8x8xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{keeps running statistics at a layer index >= 0 with a momentum in [0, 1]}}
  %y, %s = nn.batchnorm %x, %w, %w {eps = 1.0e-05 : f64, running = 0 : i64} : tensor<?x4x8x8xf32>, tensor<4xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @f(%x: tensor<?x4x8x8xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{keeps running statistics at a layer index >= 0 with a momentum in [0, 1]}}
  %y, %s = nn.batchnorm %x, %w, %w {eps = 1.0e-05 : f64, momentum = 1.5 : f64, running = 0 : i64} : tensor<?x4x8x8xf32>, tensor<4xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @f(%x: tensor<?x4x8x8xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{in inference normalises by running statistics, which it has none of ('running')}}
  %y, %s = nn.batchnorm %x, %w, %w {eps = 1.0e-05 : f64, inference} : tensor<?x4x8x8xf32>, tensor<4xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @f(%x: tensor<1x4x1x1xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{normalises a batch of one value per channel ('tensor<1x4x1x1xf32>'): batch statistics need at least 2 (a larger micro-batch, or image)}}
  %y, %s = nn.batchnorm %x, %w, %w {eps = 1.0e-05 : f64} : tensor<1x4x1x1xf32>, tensor<4xf32> -> tensor<2x4xf32>
  return
}

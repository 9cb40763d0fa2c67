// plan-cuda-library-calls: the vision kernels have no device version yet, so a plan that
// needs one is refused at its declaration, naming what trains instead.
// RUN: planc-opt %s -split-input-file -plan-cuda-library-calls -verify-diagnostics

// expected-error @+1 {{'func.func' op is a vision kernel, which the CUDA target does not implement in this version: convolutions, pooling and batch normalisation train on the CPU target}}
func.func private @planrt_k_conv2d(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i64, i64, i64)

// -----

// expected-error @+1 {{is a vision kernel}}
func.func private @planrt_k_batchnorm_bwd_data(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, f32)

// plan-memory-plan refuses a training executable's manifest it cannot plan, located: no
// step program's buffers (plan-schedule has not run), a buffer without its size, or
// buffers of a pipeline stage after a stage that has none.
// RUN: planc-opt %s -split-input-file -plan-memory-plan -verify-diagnostics

// expected-error @+1 {{'llvm.mlir.global' op plan-memory-plan needs the step program's buffers (schedule.buffers, written by plan-schedule)}}
llvm.mlir.global internal constant @planc_manifest("{\22train\22:{}}\00") {addr_space = 0 : i32}

// -----

// expected-error @+1 {{'llvm.mlir.global' op plan-memory-plan: a schedule buffer without its floats}}
llvm.mlir.global internal constant @planc_manifest("{\22schedule\22:{\22buffers\22:[{\22name\22:\22state\22}]}}\00") {addr_space = 0 : i32}

// -----

// expected-error @+1 {{'llvm.mlir.global' op plan-memory-plan: schedule buffers of stage 1 but none of stage 0}}
llvm.mlir.global internal constant @planc_manifest("{\22schedule\22:{\22buffers\22:[{\22name\22:\22p_s1\22,\22floats\22:4,\22stage\22:1}]}}\00") {addr_space = 0 : i32}

// -----

// expected-error @+1 {{'llvm.mlir.global' op planc_manifest is not JSON: }}
llvm.mlir.global internal constant @planc_manifest("{\22schedule\22: \00") {addr_space = 0 : i32}

// The CPU target's own passes: buffer lifetimes, tanh, the executable's main.
#ifndef PLAN_TARGET_CPU_PASSES_TD
#define PLAN_TARGET_CPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def PlanFreeBuffers : Pass<"plan-free-buffers", "mlir::func::FuncOp"> {
  let summary = "Free each top-level buffer of a straight-line function after its last use";
  let description = [{
    Every buffer allocated at the top level of a straight-line function (the
    bufferized step functions) is freed right after its last use: the top-level
    op that uses it or any view of it, regions and library calls that take its
    address included. A step then holds at once only the buffers still to be
    read (the forward activations the backward pass needs), not every temporary.
    Buffers the function returns, directly or through a view, are the caller's.

    ```mlir
    %a = memref.alloc() : memref<4xf32>
    linalg.fill ins(%c : f32) outs(%a : memref<4xf32>)
    %s = memref.load %a[%i] : memref<4xf32>
    memref.dealloc %a : memref<4xf32>   // added after the last use
    ```
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
}

def PlanApproximateTanh : Pass<"plan-approximate-tanh", "mlir::ModuleOp"> {
  let summary = "Rewrite math.tanh into a polynomial approximation";
  let description = [{
    tanh (GELU and its gradient) becomes MLIR's polynomial approximation: plain
    arithmetic that LLVM vectorises, rather than one libm call per element.
    Scalars and vectors only; a tanh on a tensor (before bufferization) is
    refused.

    ```mlir
    %t = math.tanh %x : f32     // becomes arith.mulf/addf/divf/select on %x
    ```
  }];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::math::MathDialect", "mlir::vector::VectorDialect"];
}

def PlanEmitManifest : Pass<"plan-emit-manifest", "mlir::ModuleOp"> {
  let summary = "Write each sched.manifest as the JSON string constant the runtime reads";
  let description = [{
    The last step of the training manifest's way through the passes: each
    `sched.manifest` becomes a NUL-terminated string constant of the same name
    and location holding its dictionary as JSON (keys sorted), which the
    runtime's driver reads. A value that is not a JSON value is an error.

    ```mlir
    sched.manifest @planc_manifest {format = "planc-train-1", num_floats = 16}
    // becomes
    llvm.mlir.global internal constant @planc_manifest("{\22format\22:\22planc-train-1\22,\22num_floats\22:16}\00")
    ```
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

def PlanEmitMain : Pass<"plan-emit-main", "mlir::ModuleOp"> {
  let summary = "Add the executable's main, which starts the runtime";
  let description = [{
    Adds `main(argc, argv)`, which hands the generated entry points to the
    runtime's driver of the module's kind: `planrt_train_main(argc, argv,
    manifest, grad, sumsq, update, eval, step, gather, release)` for a training
    executable, `planrt_retrieval_main_manifest` for a retrieval graph,
    `planrt_generate_main` for decoding. Entry points the module lacks are
    passed as null. With `backend=cuda` main first starts the device
    (`planrt_cuda_start`) and returns its status if that fails.

    ```mlir
    llvm.func @main(%argc: i32, %argv: !llvm.ptr) -> i32 {
      %m = llvm.mlir.addressof @planc_manifest : !llvm.ptr
      ...
      %rc = llvm.call @planrt_train_main(%argc, %argv, %m, ...) : (...) -> i32
      llvm.return %rc : i32
    }
    ```
  }];
  let options = [
    Option<"backend", "backend", "std::string", /*default=*/"\"cpu\"",
           "cpu; cuda: main first starts the device (planrt_cuda_start) and returns its status if that fails; "
           "cuda-host: likewise the emulated device (planrt_emu_start)">
  ];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

#endif // PLAN_TARGET_CPU_PASSES_TD

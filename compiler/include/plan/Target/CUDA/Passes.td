// The CUDA target's own passes: GEMM precision, library calls, kernels, the memory plan, fat binaries, host emulation.
#ifndef PLAN_TARGET_CUDA_PASSES_TD
#define PLAN_TARGET_CUDA_PASSES_TD

include "mlir/Pass/PassBase.td"

def PlanCudaCheckBuckets : Pass<"plan-cuda-check-buckets", "mlir::ModuleOp"> {
  let summary = "Refuse non-blocking (bucketed) collectives beside tensor parallelism on the CUDA target";
  let description = [{
    On the CUDA target a bucket's collective (`sched.all_reduce_start`,
    `sched.all_gather_start`, `sched.reduce_scatter_start`) runs on NCCL on a
    communication stream while the step's kernels, tensor-parallel collectives
    included, run on the compute stream: two NCCL communicators at once, which
    NCCL does not promise to complete. A program with both (the manifest's
    `tensor_parallel` above 1) is an error at the first such collective, whatever
    the mesh's device kind; the CPU target runs the same program on MPI.
  }];
}

def PlanGemmPrecision : Pass<"plan-gemm-precision", "mlir::ModuleOp"> {
  let summary = "Mark each GEMM with the precision its operands are exact in (bf16, fp16), or TF32 under mixed precision";
  let description = [{
    Marks each GEMM (`nn.matmul`, `nn.matmul_wgrad`) with the precision its
    cuBLASLt call may compute in (`plan.gemm_precision`). A mixed-precision
    program rounds every activation, parameter and gradient with `nn.round` (the
    CPU's emulation of bf16 and fp16), so a GEMM whose two operands are both
    results of `nn.round` to bf16 (fp16) computes on tensor cores with nothing
    lost converting them; the program's other GEMMs (an operand that a
    collective, a pipeline receive or a sum produced) get TF32. A program
    without `nn.round` (fp32) is left as it is.

    ```mlir
    %a = nn.round %x to bf16 : tensor<2x4x8xf32>
    %w = nn.round %p to bf16 : tensor<8x16xf32>
    %y = nn.matmul %a, %w {plan.gemm_precision = "bf16"} : ...
    ```
  }];
}

def PlanCudaLibraryCalls : Pass<"plan-cuda-library-calls", "mlir::ModuleOp"> {
  let summary = "Call the CUDA runtime's GEMM (cuBLASLt) and fused kernels instead of BLAS and the CPU kernels";
  let description = [{
    Library calls become calls of the CUDA runtime's versions: `cblas_sgemm`
    becomes `planrt_cuda_gemm` (cuBLASLt) with the same arguments and the
    precision its call carries (`plan.gemm_precision`) as a
    `planrt_gemm_compute`, and the attention kernels `planrt_cuda_sdpa(_bwd)`
    likewise (bf16 tensor cores where it says bf16); the normalisation,
    embedding and cross-entropy kernels `planrt_k_<name>` become
    `planrt_cuda_<name>`. The tensor-parallel kernels (collectives, sequence and
    vocabulary slices) stay the host's: they act on managed memory, after the
    host waits for the device (`plan-cuda-host-sync`).

    ```mlir
    func.call @planrt_k_layernorm(%x, %w, %b, %y, %rows, %c, %eps) : (...) -> ()
    // becomes
    func.call @planrt_cuda_layernorm(%x, %w, %b, %y, %rows, %c, %eps) : (...) -> ()
    ```
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def PlanCudaRoundResults : Pass<"plan-cuda-round-results", "mlir::ModuleOp"> {
  let summary = "Let a bf16 (fp16) GEMM round its own result instead of a separate rounding pass";
  let description = [{
    A mixed-precision step rounds most GEMM results to bf16 (fp16) right after
    the GEMM (`nn.round`): a pass over the whole result that reads and writes
    float32. Where a `cblas_sgemm` marked bf16 or f16 (`plan.gemm_precision`)
    with beta 0 writes a fresh buffer that nothing but a later op of its block
    reads, and that op is such a rounding into another buffer (neither
    operand's, and there before the GEMM, or allocated between the two: then
    its allocation moves before the GEMM), and no op between the two touches
    that buffer (only library kernels, element-wise ops, copies, fills, new
    buffers and releases may lie between: the weight gradient's GEMM between an
    input gradient's GEMM and its rounding, say), the GEMM writes that buffer instead, marked
    `plan.round_result`; the rounding and the result buffer go. The call then
    passes `PLANRT_GEMM_ROUND_RESULT` with its precision: cuBLASLt writes the
    result in 16 bits and one pass widens it (the CUDA target), or the audited
    GEMM rounds it (cuda-host), with the bits the rounding made.

    ```mlir
    func.call @cblas_sgemm(..., %c_ptr, ...) {plan.gemm_precision = "bf16"}
    linalg.generic ins(%c) outs(%y) { truncf to bf16, extf }
    // becomes
    func.call @cblas_sgemm(..., %y_ptr, ...) {plan.gemm_precision = "bf16", plan.round_result}
    ```
  }];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::LLVM::LLVMDialect", "mlir::memref::MemRefDialect"];
}

def PlanCudaHalfStorage : Pass<"plan-cuda-half-storage", "mlir::ModuleOp"> {
  let summary = "Store in bf16 (fp16) the buffers that only ever hold bf16 (fp16) values";
  let description = [{
    A mixed-precision step's activations are float32 buffers of bf16 (fp16)
    values. A buffer allocated in the function (static, row-major float32) whose
    every use, through subviews, reshapes and casts, is one of
    - an element-wise op (`linalg.generic`) that reads it,
    - an element-wise op that writes it with a rounding to that type (yields
      `arith.extf(arith.truncf(x))`, to nearest even) and does not read it,
    - a GEMM marked that precision (`plan.gemm_precision`) that reads it as
      its A or B operand, or writes it as its rounded result
      (`plan.round_result`),
    - the cross-entropy or its backward reading it as the logits, or the
      backward writing its gradient there rounded to that type (`round_to`),
    - its release, or the offset and strides read from it,
    with one writer at least, becomes a buffer of that type: its writers yield
    the truncated value, its readers widen each element they load
    (`arith.extf`), each GEMM gets `plan.half_storage`, the
    `PLANRT_GEMM_HALF_A` / `_B` / `_C` bits of the operands that are 16-bit,
    which its call passes with its precision, and the cross-entropy its
    `storage` operand: cuBLASLt and the device kernels read and write them as
    they are (the CUDA target), the audited GEMM and the CPU kernels widen and
    narrow them (cuda-host). Every value is the same; half the bytes move. A
    buffer with any other use (another library kernel, a copy, a collective, a
    host load) stays float32.

    ```mlir
    %h = memref.alloc() : memref<8x16xf32>
    linalg.generic ins(%x) outs(%h) { ... %t = arith.truncf %v : f32 to bf16
                                      %e = arith.extf %t : bf16 to f32  linalg.yield %e }
    func.call @cblas_sgemm(..., %h_ptr, ...) {plan.gemm_precision = "bf16"}
    // becomes
    %h = memref.alloc() : memref<8x16xbf16>
    linalg.generic ins(%x) outs(%h) { ... %t = arith.truncf %v : f32 to bf16  linalg.yield %t }
    func.call @cblas_sgemm(..., %h_ptr, ...) {plan.gemm_precision = "bf16", plan.half_storage = 32 : i32}
    ```
  }];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::LLVM::LLVMDialect", "mlir::memref::MemRefDialect"];
}

def PlanCudaHostSync : Pass<"plan-cuda-host-sync", "mlir::ModuleOp"> {
  let summary = "Make the host wait for the device only where host code runs next";
  let description = [{
    Kernel launches (`gpu.launch_func`) and libplanrt_cuda's device calls
    (`planrt_cuda_*`: GEMMs, fused kernels) are queued on the runtime's one
    stream and return at once. The host must wait for them before any host code
    reads or writes memory they may use: before a call of a host function (the
    runtime's `planrt_sched_*`, the tensor-parallel `planrt_k_*` kernels, MPI)
    and before a host function that did device work returns to its (host)
    caller, this pass inserts `planrt_cuda_sync()`, unless no device work can
    have been queued since the last one in the same block. A function's entry
    is no exception: its caller may have queued work too (the runtime's
    gradient fills and token copies are queued, not waited for).
    `planrt_step_arena` touches no memory and needs none.

    ```mlir
    gpu.launch_func @k::@f ...
    func.call @planrt_cuda_gemm(...) : (...) -> ()
    func.call @planrt_k_all_reduce(...) : (...) -> ()
    return
    // becomes
    gpu.launch_func @k::@f ...
    func.call @planrt_cuda_gemm(...) : (...) -> ()
    func.call @planrt_cuda_sync() : () -> ()
    func.call @planrt_k_all_reduce(...) : (...) -> ()
    return
    ```
    (the return needs none: the host call ran after the device was idle).

    With `emulated` (the `cuda-host` target, before `plan-gpu-launch-to-loops`),
    the device work is each `gpu.launch` and each call the CUDA target makes a
    device call (`cblas_sgemm`, the `planrt_k_*` kernels libplanrt_cuda has),
    and the wait is the emulated device's `planrt_emu_sync`: the same places,
    audited by the runtime (`plan-emulated-device`).
  }];
  let options = [
    Option<"emulated", "emulated", "bool", /*default=*/"false",
           "cuda-host: gpu.launch and the CPU calls the CUDA target runs on the device are device work; "
           "the wait is planrt_emu_sync">
  ];
}

def PlanGpuHostScalars : Pass<"plan-gpu-host-scalars", "mlir::ModuleOp"> {
  let summary = "Run the host functions' scalar loads and stores of device memory as one-thread kernels";
  let description = [{
    After `plan-gpu-map-loops` a function that launches kernels may still read
    or write single elements of device memory on the host: the loss added into
    its accumulator, a sum of squares' initial zero and result, the optimizer's
    clipping factor and learning rate. On a GPU each such access is a host
    synchronisation and a managed page moved to the host and back. This pass
    moves them to the device, in their places in the stream:

    - a host `memref.load` becomes a one-thread kernel that copies the element
      into a one-element device buffer (allocated on entry, freed before the
      return), at the load's place;
    - a kernel, or a moved store, that uses the loaded value — or a pure scalar
      op computed from it — reads that buffer and computes the op itself;
    - a host `memref.store` becomes a one-thread kernel at its place.

    A load whose value the host itself needs (a host call, a return, a loop
    bound) stays, and so does a store of that very value: the host waits there
    (`plan-cuda-host-sync`); a kernel or moved store computing from it takes it
    as an argument. Functions without kernels, and functions of several blocks,
    are left alone.

    ```mlir
    %l = memref.load %mean[] : memref<f32>
    %a = memref.load %acc[%c0] : memref<1xf32>
    %s = arith.addf %a, %l : f32
    memref.store %s, %acc[%c0] : memref<1xf32>
    // becomes (the buffers allocated on entry)
    gpu.launch ... { %0 = memref.load %mean[] ; memref.store %0, %b0[] ; gpu.terminator }
    gpu.launch ... { %0 = memref.load %acc[%c0] ; memref.store %0, %b1[] ; gpu.terminator }
    gpu.launch ... { %0 = memref.load %b1[] ; %1 = memref.load %b0[] ; %2 = arith.addf %0, %1 : f32
                     memref.store %2, %acc[%c0] ; gpu.terminator }
    ```
  }];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::arith::ArithDialect", "mlir::memref::MemRefDialect"];
}

def PlanEmulatedDevice : Pass<"plan-emulated-device", "mlir::ModuleOp"> {
  let summary = "On cuda-host, bracket the device work so the runtime can audit the host's accesses";
  let description = [{
    On the `cuda-host` target the CUDA target's program runs on the host, so
    nothing stops host code from touching device memory or reading it before
    the device is done. This pass brackets every piece of device work of a host
    function — each `gpu.launch` (before `plan-gpu-launch-to-loops` inlines it)
    and each call the CUDA target makes a device call (`cblas_sgemm`, the
    `planrt_k_*` kernels libplanrt_cuda has) — with `planrt_emu_begin(what)`
    and `planrt_emu_end()`, `what` naming it ("generated kernel 3 at
    file:line", "cblas_sgemm at file:line"). The runtime's emulated device keeps
    its memory inaccessible to the host in a step outside those brackets, so a
    host access is caught and named (docs/CUDA.md, "The host-touch and
    synchronisation audits").

    ```mlir
    func.call @cblas_sgemm(...) : (...) -> ()
    // becomes
    %w = llvm.mlir.addressof @planrt_emu_what_0 : !llvm.ptr
    func.call @planrt_emu_begin(%w) : (!llvm.ptr) -> ()
    func.call @cblas_sgemm(...) : (...) -> ()
    func.call @planrt_emu_end() : () -> ()
    ```
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect", "mlir::func::FuncDialect"];
}

def PlanPrecisionAudit : Pass<"plan-precision-audit", "mlir::ModuleOp"> {
  let summary = "On cuda-host, check that the operands of bf16 (fp16) GEMMs and attention are bf16 (fp16) values";
  let description = [{
    The CUDA target runs a GEMM or an attention that `plan-gemm-precision`
    marked bf16 (f16) on tensor cores, converting its float32 operands to that
    type: sound only if each already is a bf16 (fp16) value, as the marking
    claims. On the `cuda-host` target each such call of `cblas_sgemm`,
    `planrt_k_sdpa` or `planrt_k_sdpa_bwd` becomes the runtime's
    `planrt_audit_gemm` / `planrt_audit_sdpa` / `planrt_audit_sdpa_bwd` with
    the precision as one more argument: it checks every element of the operands
    the claim is about (a GEMM's two inputs; the attention's q, k, v, and the
    output's gradient), stops with an error naming the first that is not, and
    computes as the CPU target does. Unmarked and TF32 calls are left alone.

    ```mlir
    func.call @cblas_sgemm(...) {plan.gemm_precision = "bf16"} : (...) -> ()
    // becomes
    %c1 = arith.constant 1 : i32
    func.call @planrt_audit_gemm(..., %c1) : (...) -> ()
    ```
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def PlanGpuMapLoops : Pass<"plan-gpu-map-loops", "mlir::ModuleOp"> {
  let summary = "Launch every outermost parallel loop, memref copy and serial loop nest of the host functions as a GPU kernel";
  let description = [{
    Every outermost `scf.parallel` (one thread per iteration), `memref.copy`
    (one thread per element) and serial loop nest (one thread) of a host
    function becomes a `gpu.launch` of 256-thread blocks. Serial loops around
    an owning parallel loop become one launch; a sum into one element with a
    reassociable addition becomes strided partial sums then one thread adding
    them. Constant globals a kernel reads are fetched inside it.

    With `chunk-sums` (the default), serial loops around a parallel loop whose
    every iteration adds into its own element (a bias gradient: for each row,
    for all columns, `acc[c] = acc[c] + x[r, c]`) become two launches: one
    thread per (column, chunk of 64 serial iterations) summing its chunk from
    zero, then one thread per column adding the chunks, in order, to the
    element. The sums are reassociated: the CUDA target adds in another order
    than the CPU target (as cuBLAS does in its GEMMs), the same order on every
    run. `chunk-sums=false` keeps one thread per column over every iteration.

    With `elements-per-thread=N` (default 4), a parallel loop whose body is
    straight-line code (no loops or branches) and whose constant trip counts
    make a multiple of N iterations gives each thread N of them, a launch's
    width apart (thread t runs iterations t, t + T, …: each copy's accesses
    stay a warp's consecutive elements): first every load of the N (and what
    they compute, up to the body's first write), then their writes. The
    iterations of an scf.parallel touch no element another writes, so the
    order is free; N loads in flight a thread is what an element-wise kernel
    needs to near the memory's bandwidth (one per thread leaves an H100 at
    about 60 % of it). The same arithmetic on the same elements: the results
    are the same bits.

    ```mlir
    scf.parallel (%i) = (%c0) to (%n) step (%c1) { ... }
    // becomes
    gpu.launch blocks(%bx, ...) in (%gx = %blocks, ...) threads(%tx, ...) in (%sx = %c256, ...) {
      // %i = %bx * 256 + %tx, guarded by %i < %n
    }
    ```
  }];
  let options = [
    Option<"chunkSums", "chunk-sums", "bool", /*default=*/"true",
           "Sum the serial iterations around an owning parallel accumulation in chunks, then the chunks">,
    Option<"elementsPerThread", "elements-per-thread", "int64_t", /*default=*/"4",
           "Iterations of a straight-line parallel loop each thread runs, a launch's width apart, their loads first">,
  ];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::scf::SCFDialect", "mlir::arith::ArithDialect",
                           "mlir::memref::MemRefDialect"];
}

def PlanMemoryPlan : Pass<"plan-memory-plan", "mlir::ModuleOp"> {
  let summary = "Place the executable's buffers in one arena at offsets computed at compile time";
  let description = [{
    The buffers a straight-line function allocates and frees itself
    (`plan-free-buffers`' allocations and deallocations in its entry block) are
    placed in one arena at offsets fixed at compile time: two buffers share
    bytes only when one is freed before the other is allocated. Each
    allocation becomes a `memref.view` of the arena; the arena's size is the
    function's `plan.arena_bytes` attribute. Buffers that outlive the function
    or are allocated inside loops stay as they are.

    In a training executable (a module with `planc_manifest`) the whole
    executable's memory is one arena: the step program's buffers (parameters,
    gradients, shards, optimizer state, pipeline buffers) at fixed offsets in
    its state part, each pipeline stage's from the same base (its ranks reserve
    only what their stage needs: the manifest's `stage_state_bytes` and
    `stage_step_bytes`), and after them one step region that every step
    function's arena is (`planrt_step_arena`: the runtime calls one step
    function at a time). The manifest gets each buffer's `offset` and a
    `memory` object with the sizes; the runtime reserves the arena once, before
    the first step. Elsewhere each function allocates its arena on entry and
    frees it before it returns.

    ```mlir
    %a = memref.alloc() : memref<64xf32>
    // becomes
    %arena = memref.alloc() {alignment = 256} : memref<256xi8>
    %a = memref.view %arena[%c0][] : memref<256xi8> to memref<64xf32>
    ```
  }];
  let dependentDialects = ["mlir::func::FuncDialect", "mlir::memref::MemRefDialect", "mlir::arith::ArithDialect",
                           "plan::sched::SchedDialect"];
}

def PlanGpuLaunchToLoops : Pass<"plan-gpu-launch-to-loops", "mlir::ModuleOp"> {
  let summary = "Run each gpu.launch as host loops over its blocks and threads";
  let description = [{
    Each `gpu.launch` (not outlined) becomes `scf.for` loops over its blocks
    and threads on the host, the body inlined with the block and thread ids
    bound to the loop variables (y and z to 0): the launch's semantics for a
    kernel without barriers or shared memory, which `plan-gpu-map-loops`'
    kernels are (`--target cuda-host`). A barrier is refused. With `order=reverse`
    (`planc build --target cuda-host --cuda-host-order reverse`) the blocks and the
    threads run last first: the audit for races between threads, since a GPU promises
    no order. With `order=shuffle` they run in a seeded order
    (`--cuda-host-order shuffle:SEED`): iteration i runs (a i + seed) mod n, a a prime
    (chosen by the seed) larger than any grid, so every block and thread runs once,
    in an order unlike either of the others.

    ```mlir
    gpu.launch blocks(%bx, ...) in (%gx = %nb, ...) threads(%tx, ...) in (%sx = %nt, ...) { ... }
    // becomes
    scf.for %bx = %c0 to %nb step %c1 { scf.for %tx = %c0 to %nt step %c1 { ... } }
    ```
  }];
  let options = [
    Option<"order", "order", "std::string", /*default=*/"\"forward\"",
           "forward; reverse: the blocks and the threads of every launch run last first, so "
           "a kernel whose result depends on the order of its threads (a race) gives another result; "
           "shuffle: in a seeded order">,
    Option<"seed", "seed", "int64_t", /*default=*/"1", "The shuffle's seed (order=shuffle)">
  ];
  let dependentDialects = ["mlir::scf::SCFDialect", "mlir::arith::ArithDialect"];
}

def PlanCudaFatbin : Pass<"plan-cuda-fatbin", "mlir::ModuleOp"> {
  let summary = "Combine a gpu.binary's cubins, one per architecture, into one fat binary";
  let description = [{
    A `gpu.binary` holding one cubin per architecture (`--cuda-arch
    sm_80,sm_90`: `gpu-module-to-binary` with `format=bin` and one target each)
    becomes one holding a single fat binary of them all, made by the toolkit's
    `fatbinary`, which the runtime loads as it loads a one-architecture binary;
    the driver picks the cubin of the device it runs on.

    ```mlir
    gpu.binary @planc_kernels [#gpu.object<#nvvm.target<chip = "sm_80">, bin = "...">,
                               #gpu.object<#nvvm.target<chip = "sm_90">, bin = "...">]
    // becomes
    gpu.binary @planc_kernels [#gpu.object<#nvvm.target<chip = "sm_80">, fatbin = "...">]
    ```
  }];
  let options = [
    Option<"toolkit", "toolkit", "std::string", /*default=*/"::plan::cuda::toolkitDir()",
           "the CUDA toolkit whose bin/fatbinary runs">
  ];
}

#endif // PLAN_TARGET_CUDA_PASSES_TD

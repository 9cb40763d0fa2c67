// The `sched` dialect: a training step as each rank runs it.
#ifndef PLAN_DIALECT_SCHED_IR_SCHEDOPS_TD
#define PLAN_DIALECT_SCHED_IR_SCHEDOPS_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Sched_Dialect : Dialect {
  let name = "sched";
  let summary = "The per-rank program of a training step: buffers, micro-batches, collectives";
  let description = [{
    What a training executable does in one optimizer step, with nothing left to
    the runtime's discretion: which flat buffers exist and how long they live,
    the micro-batch loop, where the gradient function runs, every collective
    (on which mesh axes, over which buffer range, and why), and the optimizer
    update with the buffer pieces it reads. The same program runs on every rank
    (SPMD); `sched.on` restricts a region to the ranks at one coordinate of an
    axis. `sched-check-deadlock` proves that every rank issues the same
    collectives in the same order on each communicator, and
    `convert-sched-to-runtime` turns each op into a call into libplanrt.

    ```mlir
    sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 4>}
    sched.buffer @grads {floats = 10240 : i64, lifetime = "step"}
    func.func @planc_step(%ctx: !llvm.ptr, %step: i64) {
      sched.micro_loop 2 {
      ^bb0(%i: i64):
        sched.grad %step, %i
      }
      sched.all_reduce @grads[0, 10240] over ["dp"] {purpose = "gradients", reduce = "sum"}
      return
    }
    ```
  }];
  let cppNamespace = "::plan::sched";
  let useDefaultTypePrinterParser = 1;
}

def Sched_EventType : TypeDef<Sched_Dialect, "Event"> {
  let mnemonic = "event";
  let summary = "The completion of work a step started asynchronously";
  let description = [{
    A point the step can wait for: a bucket of gradients that the backward pass
    has finished (a result of `sched.grad`), or a collective that has completed
    (`sched.all_reduce_start`, `sched.reduce_scatter_start`,
    `sched.all_gather_start`). On the CUDA target an event is a CUDA event on
    the stream that did the work; on the CPU target an MPI request.
  }];
}

class Sched_Op<string mnemonic, list<Trait> traits = []> : Op<Sched_Dialect, mnemonic, traits>;

def Sched_MeshOp : Sched_Op<"mesh", [Symbol]> {
  let summary = "The device mesh the program runs on";
  let description = [{
    Axis names and sizes, row-major (the last axis varies fastest): rank r has
    the coordinates of r in that order. Collectives name the axes they span.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$axes, DenseI64ArrayAttr:$sizes);
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The bit mask of the named axes, or failure naming the unknown one.
    ::mlir::FailureOr<unsigned> maskOf(::mlir::ArrayAttr names, ::mlir::Operation *user);
    int64_t numRanks();
    /// The position of the named axis, or -1.
    int axisIndex(::llvm::StringRef name);
  }];
}

def Sched_ManifestOp : Sched_Op<"manifest", [Symbol]> {
  let summary = "A training executable's manifest, as IR until it is written as JSON";
  let description = [{
    What the runtime needs to know about the executable, as a dictionary that
    the passes read and extend without parsing text: the flat parameter layout,
    the mesh and the training settings (`plan-train-abi`), the step program's
    buffer table (`plan-schedule`) and the memory plan (`plan-memory-plan`).
    `plan-emit-manifest` writes it once, as the JSON string constant of the same
    name that the runtime reads (docs/EXECUTABLES.md). Its values are JSON's:
    dictionaries, arrays, strings, i64 integers, f64 numbers, booleans, and the
    unit attribute for null.

    ```mlir
    sched.manifest @planc_manifest {format = "planc-train-1", groups = [[0, 16], [16, 24]],
                                    num_floats = 24, ...}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, DictionaryAttr:$value);
  let assemblyFormat = "$sym_name $value attr-dict";
}

def Sched_BufferOp : Sched_Op<"buffer", [Symbol]> {
  let summary = "A flat f32 buffer of every rank";
  let description = [{
    `lifetime` is "persistent" (lives across steps: parameters, optimizer
    state), "step" (zeroed and used within a step) or "transient" (exists only
    between a `sched.alloc` and a `sched.free`). The runtime allocates buffers in
    declaration order; their index is their id in the runtime calls. Under
    pipeline parallelism a buffer with a `stage` belongs to the ranks of that
    coordinate of the pipeline axis only (under the interleaved schedule, which
    holds several stages a rank, the rank of the stage it serves): only they
    allocate it, and only ops inside a `sched.on` region of that coordinate use it.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, I64Attr:$floats, StrAttr:$lifetime,
                       OptionalAttr<I64Attr>:$stage);
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
}

class Sched_BufferUser<string mnemonic, list<Trait> traits = []>
    : Sched_Op<mnemonic, !listconcat(traits, [DeclareOpInterfaceMethods<SymbolUserOpInterface>])>;

def Sched_MicroLoopOp : Sched_Op<"micro_loop", [SingleBlock, NoTerminator]> {
  let summary = "The micro-batch loop of a step";
  let description = [{
    Runs its region `count` times; the block argument is the micro-batch index
    (i64, from 0).
  }];
  let arguments = (ins I64Attr:$count);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$count $body attr-dict";
  let hasVerifier = 1;
}

def Sched_OnOp : Sched_Op<"on", [SingleBlock, NoTerminator]> {
  let summary = "A region only the ranks at one coordinate of an axis run";
  let arguments = (ins StrAttr:$axis, I64Attr:$coord);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$axis `=` $coord $body attr-dict";
  let hasVerifier = 1;
}

def Sched_FillOp : Sched_BufferUser<"fill"> {
  let summary = "Sets a range of a buffer to a constant";
  let arguments = (ins FlatSymbolRefAttr:$buffer, I64Attr:$offset, I64Attr:$count, F32Attr:$value);
  let assemblyFormat = "$buffer `[` $offset `,` $count `]` `=` $value attr-dict";
}

def Sched_AllocOp : Sched_BufferUser<"alloc"> {
  let summary = "Allocates a transient buffer";
  let description = [{
    Zeroed. With `parts` (with buckets: ZeRO-3's gathered parameters, ZeRO-2 and
    3's gradient), the buffer's floats are held only by bucket: parameters from
    their gather until the entry point releases them (`planrt_params_release`),
    gradients from when the backward pass writes them until their reduce-scatter
    is done. On the CPU target, address space reserved up front whose pages are
    returned to the system on release; on a device backend without such memory,
    the whole buffer.
  }];
  let arguments = (ins FlatSymbolRefAttr:$buffer, UnitAttr:$parts);
  let assemblyFormat = "$buffer (`parts` $parts^)? attr-dict";
}

def Sched_FreeOp : Sched_BufferUser<"free"> {
  let summary = "Frees a transient buffer";
  let arguments = (ins FlatSymbolRefAttr:$buffer);
  let assemblyFormat = "$buffer attr-dict";
}

def Sched_GradOp : Sched_BufferUser<"grad"> {
  let summary = "Forward and backward of one micro-batch";
  let description = [{
    Reads this rank's micro-batch `micro` of step `step` from the training data
    (global sample step × batch + micro × micro_size × data ranks + data rank ×
    micro_size + i), then calls the gradient entry point: `grads += ∇loss`
    (pre-divided by accumulation × data ranks) with the parameters in `params`,
    and adds the micro-batch's loss / accumulation to `state[7]`. Under tensor
    parallelism the entry point itself communicates: `collectives` lists, in the
    order every rank of the tensor group issues them, each collective inside it
    (`{collective, axis, purpose, floats}`, floats of the whole buffer), so that
    this IR shows everything the step sends.

    `gathered` (ZeRO-3 with buckets) are the `sched.all_gather_start`s of the
    parameters, handed to it: it starts the first bucket's, and the entry point
    each next one as it waits for bucket k right before the first op that reads
    a parameter of it (`planrt_params_ready(k)`), so that the next bucket
    arrives while the pass runs; all of them are done when it returns. Its
    results (gradient buckets) fire as the backward pass finishes each bucket
    of gradients.
  }];
  let arguments = (ins I64:$step, I64:$micro, Variadic<Sched_EventType>:$gathered, FlatSymbolRefAttr:$params,
                       FlatSymbolRefAttr:$grads, FlatSymbolRefAttr:$state, OptionalAttr<ArrayAttr>:$collectives);
  let results = (outs Variadic<Sched_EventType>:$buckets);
  let assemblyFormat = [{
    $step `,` $micro `params` $params `grads` $grads `state` $state (`gathered` $gathered^)? attr-dict
    (`->` type($buckets)^)?
  }];
  let hasVerifier = 1;
}

def Sched_ForwardOp : Sched_BufferUser<"forward"> {
  let summary = "A pipeline stage's forward pass of one micro-batch";
  let description = [{
    Reads micro-batch `micro` of step `step` (as `sched.grad`) and calls stage
    `stage`'s forward entry point with the parameters in `params` and, on every
    stage but the first, the activation the previous stage sent (`in`); writes
    the activation it hands on to `out`. Without `saved` the stage's backward
    pass (`sched.backward`) computes the forward again from the same input, so a
    stage keeps one activation per micro-batch in flight (GPipe's
    re-materialisation); with `saved` (`keep: activations`) the forward pass
    writes what its backward pass reads there, the micro-batch's slot.
    `collectives` lists those the entry point issues itself (tensor
    parallelism), as on `sched.grad`.
  }];
  let arguments = (ins I64:$step, I64:$micro, I64Attr:$stage, FlatSymbolRefAttr:$params,
                       OptionalAttr<FlatSymbolRefAttr>:$input, OptionalAttr<I64Attr>:$input_offset,
                       FlatSymbolRefAttr:$output, I64Attr:$output_offset,
                       OptionalAttr<FlatSymbolRefAttr>:$saved, OptionalAttr<I64Attr>:$saved_offset,
                       OptionalAttr<ArrayAttr>:$collectives);
  let assemblyFormat = [{
    $step `,` $micro `stage` $stage `params` $params (`in` $input^ `[` $input_offset `]`)?
    `out` $output `[` $output_offset `]` (`saved` $saved^ `[` $saved_offset `]`)? attr-dict
  }];
  let hasVerifier = 1;
}

def Sched_BackwardOp : Sched_BufferUser<"backward"> {
  let summary = "A pipeline stage's backward pass of one micro-batch";
  let description = [{
    Calls stage `stage`'s backward entry point on micro-batch `micro` of step
    `step`: the stage's forward again from its input (`in`, or the tokens on the
    first stage), then the vector-Jacobian product with the gradient of its
    output (`cotangent`, from the next stage; the last stage starts from its
    loss, which it adds / accumulation to `state[7]`). `grads += ∇` as
    `sched.grad`; on every stage but the first the gradient of the input goes to
    `dinput`, for the previous stage. With `saved` it starts from what the
    micro-batch's `sched.forward` kept there instead of its forward pass. With
    `wsaved` (the zero-bubble schedule) it is the input pass only: it leaves the
    gradients that only parameters need to the micro-batch's `sched.wgrad`, and
    writes what that reads to `wsaved`.
  }];
  let arguments = (ins I64:$step, I64:$micro, I64Attr:$stage, FlatSymbolRefAttr:$params,
                       FlatSymbolRefAttr:$grads, FlatSymbolRefAttr:$state,
                       OptionalAttr<FlatSymbolRefAttr>:$input, OptionalAttr<I64Attr>:$input_offset,
                       OptionalAttr<FlatSymbolRefAttr>:$cotangent, OptionalAttr<I64Attr>:$cotangent_offset,
                       OptionalAttr<FlatSymbolRefAttr>:$dinput, OptionalAttr<I64Attr>:$dinput_offset,
                       OptionalAttr<FlatSymbolRefAttr>:$saved, OptionalAttr<I64Attr>:$saved_offset,
                       OptionalAttr<FlatSymbolRefAttr>:$wsaved, OptionalAttr<I64Attr>:$wsaved_offset,
                       OptionalAttr<ArrayAttr>:$collectives);
  let assemblyFormat = [{
    $step `,` $micro `stage` $stage `params` $params `grads` $grads `state` $state
    (`in` $input^ `[` $input_offset `]`)? (`cotangent` $cotangent^ `[` $cotangent_offset `]`)?
    (`dinput` $dinput^ `[` $dinput_offset `]`)? (`saved` $saved^ `[` $saved_offset `]`)?
    (`wsaved` $wsaved^ `[` $wsaved_offset `]`)? attr-dict
  }];
  let hasVerifier = 1;
}

def Sched_WGradOp : Sched_BufferUser<"wgrad"> {
  let summary = "A pipeline stage's weight pass of one micro-batch (zero-bubble schedule)";
  let description = [{
    The zero-bubble schedule (ZB-H1, Qi et al. 2023) splits a stage's backward
    pass: `sched.backward … wsaved` makes the input's gradient, which the
    previous stage waits for, and this op, later, the gradients that only the
    stage's parameters need (a linear layer's weight-gradient GEMM), `grads +=`
    them, from what the input pass kept in the micro-batch's slot of `wsaved`.
    It reads micro-batch `micro` of step `step` again (as `sched.grad`) and
    communicates nothing but what `collectives` lists.
  }];
  let arguments = (ins I64:$step, I64:$micro, I64Attr:$stage, FlatSymbolRefAttr:$params,
                       FlatSymbolRefAttr:$grads, FlatSymbolRefAttr:$state,
                       FlatSymbolRefAttr:$wsaved, I64Attr:$wsaved_offset,
                       OptionalAttr<ArrayAttr>:$collectives);
  let assemblyFormat = [{
    $step `,` $micro `stage` $stage `params` $params `grads` $grads `state` $state
    `wsaved` $wsaved `[` $wsaved_offset `]` attr-dict
  }];
  let hasVerifier = 1;
}

def Sched_SumSquaresOp : Sched_BufferUser<"sumsq"> {
  let summary = "The sum of squared gradients of this rank's pieces, into state[6]";
  let arguments = (ins SymbolRefArrayAttr:$buffers, DenseI64ArrayAttr:$offsets, FlatSymbolRefAttr:$state);
  let assemblyFormat = "$buffers $offsets `state` $state attr-dict";
  let hasVerifier = 1;
}

def Sched_UpdateOp : Sched_BufferUser<"update"> {
  let summary = "Clipping, learning-rate schedule and AdamW on this rank's pieces";
  let description = [{
    Calls the update entry point on eight buffer pieces — parameters,
    gradients, first and second moments, each for optimizer group 0 (decayed)
    and 1 — in that order, with `state[6]` the global sum of squared gradients.
  }];
  let arguments = (ins I64:$step, SymbolRefArrayAttr:$buffers, DenseI64ArrayAttr:$offsets,
                       FlatSymbolRefAttr:$state);
  let assemblyFormat = "$step $buffers $offsets `state` $state attr-dict";
  let hasVerifier = 1;
}

// Collectives carry the mesh axes they span and a purpose for logs and errors.
def Sched_AllReduceOp : Sched_BufferUser<"all_reduce"> {
  let summary = "In-place all-reduce of a buffer range";
  let description = [{
    `reduce` is "sum", "mean" or "max" of floats, or "sum_u64": the range holds
    count / 2 unsigned 64-bit integers, summed modulo 2^64 (a federated round's
    fixed-point updates).
  }];
  let arguments = (ins FlatSymbolRefAttr:$buffer, I64Attr:$offset, I64Attr:$count, StrArrayAttr:$axes,
                       StrAttr:$reduce, StrAttr:$purpose);
  let assemblyFormat = "$buffer `[` $offset `,` $count `]` `over` $axes attr-dict";
  let hasVerifier = 1;
}

def Sched_AllReduceStartOp : Sched_BufferUser<"all_reduce_start"> {
  let summary = "An all-reduce of a buffer range that starts when an event fires";
  let description = [{
    `sched.all_reduce` in place, started asynchronously as soon as `after`
    fires (a bucket of gradients `sched.grad` finished) on the communication
    stream (CUDA target: a NCCL call on a stream of its own that waits for a
    CUDA event of the compute stream; CPU target: `MPI_Iallreduce`). Its
    result fires when the all-reduce is done: a `sched.wait` must wait for it
    before anything else touches the range. Every rank starts the collectives
    in the order of their events, which is this IR's order.

    ```mlir
    %b:2 = sched.grad %step, %m params @params grads @grads state @state -> !sched.event, !sched.event
    %r0 = sched.all_reduce_start @grads[6144, 4096] over ["dp"] after %b#0 {purpose = "gradients", reduce = "sum"}
    %r1 = sched.all_reduce_start @grads[0, 6144] over ["dp"] after %b#1 {purpose = "gradients", reduce = "sum"}
    sched.wait %r0, %r1
    ```
  }];
  let arguments = (ins Sched_EventType:$after, FlatSymbolRefAttr:$buffer, I64Attr:$offset, I64Attr:$count,
                       StrArrayAttr:$axes, StrAttr:$reduce, StrAttr:$purpose);
  let results = (outs Sched_EventType:$done);
  let assemblyFormat = "$buffer `[` $offset `,` $count `]` `over` $axes `after` $after attr-dict";
  let hasVerifier = 1;
}

def Sched_WaitOp : Sched_Op<"wait"> {
  let summary = "Waits until the events have fired";
  let description = [{
    After it, the step may read and write what the events' work wrote (the
    compute stream waits for the communication stream's events on the CUDA
    target; `MPI_Wait` on the CPU target).
  }];
  let arguments = (ins Variadic<Sched_EventType>:$events);
  let assemblyFormat = "$events attr-dict";
}

def Sched_AllGatherOp : Sched_BufferUser<"all_gather"> {
  let summary = "Every rank's `count` floats, concatenated in coordinate order";
  let arguments = (ins FlatSymbolRefAttr:$source, I64Attr:$source_offset, I64Attr:$count,
                       FlatSymbolRefAttr:$dest, I64Attr:$dest_offset, StrArrayAttr:$axes, StrAttr:$purpose);
  let assemblyFormat = "$source `[` $source_offset `,` $count `]` `->` $dest `[` $dest_offset `]` `over` $axes attr-dict";
}

def Sched_AllGatherStartOp : Sched_BufferUser<"all_gather_start"> {
  let summary = "A slice of an all-gather, handed to a sched.grad that starts and waits for it";
  let description = [{
    The floats `[begin, begin + size)` of the destination that
    `sched.all_gather` with the same source, count, destination and axes would
    write (each rank sends the part of its `count` floats that falls in the
    slice), asynchronously: ZeRO-3's parameters gathered bucket by bucket, one
    bucket ahead of the pass that reads them (a prefetch). The `sched.grad` its
    result feeds starts it, in this IR's order on every rank, and waits for it
    before the first read of a parameter of bucket `bucket`. CUDA target: one
    NCCL broadcast per rank with a part in the slice, grouped, on the
    communication stream; CPU target: `MPI_Iallgatherv`.

    ```mlir
    %p0 = sched.all_gather_start @param_shard[0, 32] -> @params[0] over ["dp"] slice [64, 64] for bucket 0
    %p1 = sched.all_gather_start @param_shard[0, 32] -> @params[0] over ["dp"] slice [0, 64] for bucket 1
    sched.grad %step, %m params @params grads @grads state @state gathered %p0, %p1
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$source, I64Attr:$source_offset, I64Attr:$count,
                       FlatSymbolRefAttr:$dest, I64Attr:$dest_offset, StrArrayAttr:$axes, I64Attr:$begin,
                       I64Attr:$size, I64Attr:$bucket, StrAttr:$purpose);
  let results = (outs Sched_EventType:$done);
  let assemblyFormat = [{
    $source `[` $source_offset `,` $count `]` `->` $dest `[` $dest_offset `]` `over` $axes
    `slice` ` ` `[` $begin `,` $size `]` `for` `bucket` $bucket attr-dict
  }];
  let hasVerifier = 1;
}

def Sched_ReduceScatterOp : Sched_BufferUser<"reduce_scatter"> {
  let summary = "Rank k receives the sum of every rank's block k of `count` floats";
  let description = [{
    The source range holds n × count floats (n = the ranks over `axes`); with
    `accumulate` the sum is added to the destination instead of replacing it.
  }];
  let arguments = (ins FlatSymbolRefAttr:$source, I64Attr:$source_offset, I64Attr:$count,
                       FlatSymbolRefAttr:$dest, I64Attr:$dest_offset, StrArrayAttr:$axes, StrAttr:$purpose,
                       UnitAttr:$accumulate);
  let assemblyFormat = "$source `[` $source_offset `,` $count `]` `->` $dest `[` $dest_offset `]` `over` $axes attr-dict";
}

def Sched_ReduceScatterStartOp : Sched_BufferUser<"reduce_scatter_start"> {
  let summary = "A slice of a reduce-scatter that starts when an event fires";
  let description = [{
    The part `[begin, begin + size)` of `sched.reduce_scatter`'s source range
    (n × count floats from `source_offset`), reduce-scattered: each rank
    receives the sum of the part of its block k that falls in the slice, at
    its place in `dest` (ZeRO-1's gradient buckets, started as the backward
    pass finishes them, like `sched.all_reduce_start`); with `accumulate`
    (ZeRO-2 and 3, every micro-batch) it is added to what `dest` holds. CUDA target: one NCCL
    reduce per rank whose block has a part in the slice, grouped, on the
    communication stream; CPU target: `MPI_Ireduce_scatter`. Its result fires
    when it is done: a `sched.wait` in the same block waits for it.

    ```mlir
    %b:2 = sched.grad %step, %m params @params grads @grads state @state -> !sched.event, !sched.event
    %r0 = sched.reduce_scatter_start @grads[0, 32] -> @grad_shard[0] over ["dp"] slice [48, 80] after %b#0 {purpose = "gradients"}
    %r1 = sched.reduce_scatter_start @grads[0, 32] -> @grad_shard[0] over ["dp"] slice [0, 48] after %b#1 {purpose = "gradients"}
    sched.wait %r0, %r1
    ```
  }];
  let arguments = (ins Sched_EventType:$after, FlatSymbolRefAttr:$source, I64Attr:$source_offset, I64Attr:$count,
                       FlatSymbolRefAttr:$dest, I64Attr:$dest_offset, StrArrayAttr:$axes, I64Attr:$begin,
                       I64Attr:$size, StrAttr:$purpose, UnitAttr:$accumulate);
  let results = (outs Sched_EventType:$done);
  let assemblyFormat = [{
    $source `[` $source_offset `,` $count `]` `->` $dest `[` $dest_offset `]` `over` $axes
    `slice` ` ` `[` $begin `,` $size `]` `after` $after attr-dict
  }];
  let hasVerifier = 1;
}

def Sched_SendOp : Sched_BufferUser<"send"> {
  let summary = "Sends a buffer range to the rank at coordinate `peer` on `axis`";
  let arguments = (ins FlatSymbolRefAttr:$buffer, I64Attr:$offset, I64Attr:$count, StrAttr:$axis, I64Attr:$peer,
                       StrAttr:$purpose);
  let assemblyFormat = "$buffer `[` $offset `,` $count `]` `to` $peer `along` $axis attr-dict";
}

def Sched_RecvOp : Sched_BufferUser<"recv"> {
  let summary = "Receives a buffer range from the rank at coordinate `peer` on `axis`";
  let arguments = (ins FlatSymbolRefAttr:$buffer, I64Attr:$offset, I64Attr:$count, StrAttr:$axis, I64Attr:$peer,
                       StrAttr:$purpose);
  let assemblyFormat = "$buffer `[` $offset `,` $count `]` `from` $peer `along` $axis attr-dict";
}

def Sched_SendRecvOp : Sched_BufferUser<"send_recv"> {
  let summary = "A send and a receive along one axis that complete together";
  let description = [{
    Sends `count` floats of the first range to the rank at coordinate `to` on
    `axis` while receiving `recv_count` floats into the second range from the
    rank at `from` (MPI_Sendrecv): the two halves match the peers' sends and
    receives independently, so two neighbours that exchange at once do not
    wait for each other (Megatron's send-forward-receive-backward in 1F1B).
  }];
  let arguments = (ins FlatSymbolRefAttr:$buffer, I64Attr:$offset, I64Attr:$count, I64Attr:$to,
                       FlatSymbolRefAttr:$recv_buffer, I64Attr:$recv_offset, I64Attr:$recv_count, I64Attr:$from,
                       StrAttr:$axis, StrAttr:$purpose);
  let assemblyFormat = [{
    $buffer `[` $offset `,` $count `]` `to` $to `,` $recv_buffer `[` $recv_offset `,` $recv_count `]` `from` $from
    `along` $axis attr-dict
  }];
}

//===----------------------------------------------------------------------===//
// Federated rounds (EXTENSIONS.md §3): @planc_round, as every client runs it.
//===----------------------------------------------------------------------===//

def Sched_FedBeginOp : Sched_BufferUser<"fed_begin"> {
  let summary = "Starts a federated round: samples its clients and resets them";
  let description = [{
    Every rank draws the same `sampled` coordinates of the client axis `axis`
    from the plan's seed and `round` (a seeded partial Fisher–Yates shuffle,
    docs/FEDERATED.md). A sampled client starts from the global model (`global`
    copied into `params`) with its optimizer afresh (`moments` zeroed); the
    others take no part in the round but its aggregation, where they add zero.
  }];
  let arguments = (ins I64:$round, StrAttr:$axis, I64Attr:$sampled, FlatSymbolRefAttr:$global,
                       FlatSymbolRefAttr:$params, SymbolRefArrayAttr:$moments);
  let assemblyFormat = [{
    $round `sample` $sampled `of` $axis `global` $global `params` $params `moments` $moments attr-dict
  }];
}

def Sched_FedLocalOp : Sched_Op<"fed_local", [SingleBlock, NoTerminator]> {
  let summary = "The local steps of the round's sampled clients";
  let description = [{
    On a client the round sampled, runs its region `count` times, the block
    argument being the local step (i64, from 0): the client's own optimizer
    steps on its own data. Clients not sampled skip it, so the region holds no
    collective (sched-check-deadlock refuses one).
  }];
  let arguments = (ins I64Attr:$count);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$count $body attr-dict";
  let hasVerifier = 1;
}

def Sched_FedLossOp : Sched_BufferUser<"fed_loss"> {
  let summary = "Adds a local step's loss (state[7]) to the client's round loss";
  let arguments = (ins FlatSymbolRefAttr:$state);
  let assemblyFormat = "`state` $state attr-dict";
}

def Sched_FedProxOp : Sched_BufferUser<"fed_prox"> {
  let summary = "FedProx's proximal gradient: grads += mu · (params − global)";
  let description = [{
    The gradient of μ/2·‖w − w_global‖² (Li et al. 2020) added to the local
    step's gradient over the first `count` floats, before clipping and the
    update.
  }];
  let arguments = (ins FlatSymbolRefAttr:$grads, I64Attr:$count, F64Attr:$mu, FlatSymbolRefAttr:$params,
                       FlatSymbolRefAttr:$global);
  let assemblyFormat = "$grads `[` $count `]` `mu` $mu `params` $params `global` $global attr-dict";
}

def Sched_FedEncodeOp : Sched_BufferUser<"fed_encode"> {
  let summary = "A client's update in fixed point, weighted for the mean";
  let description = [{
    `update` holds count + 1 unsigned 64-bit integers (2 · (count + 1) floats):
    element i is round(a · (params − global)[i] · 2^fraction_bits) in two's
    complement, with a the client's share of the mean (`weighting` "tokens":
    its data's tokens over the sampled clients'; "uniform": 1 / sampled), the
    update first scaled to norm at most `clip` when clip > 0 (DP-FedAvg); the
    last is the client's mean local loss / sampled. A client not sampled writes
    zeros. Integers make the aggregate exact and independent of the order of
    the sum, so that secure aggregation's masks cancel bitwise.
  }];
  let arguments = (ins FlatSymbolRefAttr:$update, FlatSymbolRefAttr:$params, FlatSymbolRefAttr:$global,
                       I64Attr:$count, StrAttr:$weighting, F64Attr:$clip, I64Attr:$fraction_bits);
  let assemblyFormat = "$update `=` `delta` `(` $params `,` $global `)` `[` $count `]` attr-dict";
  let hasVerifier = 1;
}

def Sched_FedMaskOp : Sched_BufferUser<"fed_mask"> {
  let summary = "Secure aggregation's pairwise masks, added modulo 2^64";
  let description = [{
    For every other sampled client j of the round, client i adds (i < j) or
    subtracts (i > j) a mask drawn from the pair's key and `round` to each of
    the `count` floats' 64-bit integers of `update` (Bonawitz et al. 2017,
    without dropouts): each buffer a client sends is uniformly random on its
    own, and the masks cancel exactly in the sum over the sampled clients.
  }];
  let arguments = (ins I64:$round, FlatSymbolRefAttr:$update, I64Attr:$count, StrAttr:$axis);
  let assemblyFormat = "$round $update `[` $count `]` `over` $axis attr-dict";
}

def Sched_FedServerOp : Sched_BufferUser<"fed_server"> {
  let summary = "The server step: the mean update decoded, noised, applied to the global model";
  let description = [{
    Decodes the sum of the clients' `update`s (the weighted mean update Δ̄ and
    the round loss, written to state[7]), adds Gaussian noise of standard
    deviation `noise` per element when noise > 0 (DP-FedAvg; drawn from the
    seed and `round`, alike on every rank), and applies `optimizer` to
    `global` with the pseudo-gradient −Δ̄: "sgd" global += lr · Δ̄; "adam"
    Adam with bias correction on `moments` (FedAdam, Reddi et al. 2021). The
    new global model is copied into `params`.
  }];
  let arguments = (ins I64:$round, FlatSymbolRefAttr:$global, FlatSymbolRefAttr:$update, FlatSymbolRefAttr:$params,
                       OptionalAttr<SymbolRefArrayAttr>:$moments, StrAttr:$optimizer, F64Attr:$lr, F64Attr:$beta1,
                       F64Attr:$beta2, F64Attr:$eps, F64Attr:$noise, I64Attr:$fraction_bits,
                       FlatSymbolRefAttr:$state);
  let assemblyFormat = [{
    $round `global` $global `update` $update `params` $params (`moments` $moments^)? `state` $state attr-dict
  }];
  let hasVerifier = 1;
}

#endif // PLAN_DIALECT_SCHED_IR_SCHEDOPS_TD

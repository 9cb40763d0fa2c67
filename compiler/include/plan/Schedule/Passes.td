// The step program in the sched dialect: its construction and its deadlock check.
#ifndef PLAN_SCHEDULE_PASSES_TD
#define PLAN_SCHEDULE_PASSES_TD

include "mlir/Pass/PassBase.td"

def PlanSchedule : Pass<"plan-schedule", "mlir::ModuleOp"> {
  let summary = "The per-rank step program of a training executable, in the sched dialect";
  let description = [{
    From the manifest of `plan-train-abi`: the mesh (`sched.mesh`), the flat
    buffers and their lifetimes (`sched.buffer`), and `planc_step(ctx, step)`,
    one optimizer step as every rank runs it: the micro-batch loop around
    `sched.grad`, the data-parallel collectives of the plan's ZeRO stage (DDP:
    all-reduce the gradients; ZeRO-1/2: reduce-scatter them, once or after every
    micro-step, and all-gather the updated parameters; ZeRO-3: gather the
    parameters before each micro-step, free them after, reduce-scatter the
    gradients), the loss and gradient-norm reductions, and `sched.update` on this
    rank's pieces. `planc_gather(ctx)` / `planc_release(ctx)` make the full
    parameters available outside a step (evaluation) when ZeRO-3 shards them.
    Under a pipeline each stage's ranks run their part in a `sched.on` region on
    the stage's own buffers: `sched.forward` / `sched.backward` per micro-batch in
    GPipe's or 1F1B's order with the sends, receives and `sched.send_recv`
    exchanges between neighbours, then the shared (tied) parameters' gradients,
    the loss and the norm summed over the stages. The manifest gains the buffer
    table the runtime allocates.
  }];
  let dependentDialects = ["plan::sched::SchedDialect", "mlir::func::FuncDialect", "mlir::LLVM::LLVMDialect",
                           "mlir::arith::ArithDialect"];
}

def SchedCheckDeadlock : Pass<"sched-check-deadlock", "mlir::ModuleOp"> {
  let summary = "Prove that every rank's collectives and sends match";
  let description = [{
    Simulates `planc_step` on every rank of the `sched.mesh` (micro-batch loops
    unrolled, `sched.on` regions taken where the rank's coordinate matches):
    a collective completes when every rank of its communicator has reached one
    with the same kind and size, a send when its peer has reached the matching
    receive. A program in which some rank waits forever, or in which ranks of
    one communicator disagree about a collective, is rejected with the two
    operations located.
  }];
}

#endif // PLAN_SCHEDULE_PASSES_TD

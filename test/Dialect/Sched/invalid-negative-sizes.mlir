// XFAIL record of a known bug: the sched verifiers' sign checks never fire. `floats`,
// `count`, `offset` and `peer` are I64Attr, whose ODS accessors return uint64_t, so
// BufferOp::verify's `getFloats() < 0` is always false and MicroLoopOp::verify's
// `getCount() < 1` misses every negative count (-1 reads as 2^64 - 1). Both ops below verify
// today; sched-check-deadlock then unrolls the -1 loop for ever (it compares an int64_t index
// with the uint64_t count), and convert-sched-to-runtime makes it an scf.for to -1 that never
// runs. Fix: compare the attribute's signed value (getFloatsAttr().getInt(), or cast to
// int64_t), then drop the XFAIL.

// RUN: planc-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{'sched.buffer' op has a negative size}}
sched.buffer @b {floats = -1 : i64, lifetime = "step"}

// -----

func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.micro_loop' op runs at least once}}
  sched.micro_loop -1 {
  ^bb0(%i: i64):
  }
  return
}

// XFAIL record of a known crash: plan-schedule's readManifest (PlanSchedule.cpp) checks that
// the manifest has "mesh", "train", two "groups" and "num_floats", then dereferences what it
// finds inside without checking: a mesh object without "axes", "sizes" or "data" arrays
// (getArray returns null), a size that is not an integer or an axis that is not a string
// (getAsInteger / getAsString on an empty optional or null: today a garbage mesh size,
// sched.mesh sizes = array<i64: 3345727521938830690>), or a group that is not a
// [begin, end] pair of integers segfaults planc-opt or reads garbage instead of a located
// error at the manifest. (plan-train-abi always writes them; a hand-written or stale
// manifest does not.) TESTING.md: no input may crash the compiler. Fix: check each, with the
// "lacks ..." error; then drop the XFAIL.

// RUN: not planc-opt %s -split-input-file -plan-schedule 2>&1 | FileCheck %s

// CHECK: error: 'sched.manifest' op planc_manifest
// CHECK-NOT: Stack dump
sched.manifest @planc_manifest {mesh = {}, train = {}, groups = [[0, 16], [16, 16]], num_floats = 16}

// -----

// CHECK: error: 'sched.manifest' op planc_manifest
// CHECK-NOT: Stack dump
sched.manifest @planc_manifest {mesh = {axes = ["dp"], sizes = ["two"], data = ["dp"]}, train = {}, groups = [[0, 16], [16, 16]], num_floats = 16}

// -----

// CHECK: error: 'sched.manifest' op planc_manifest
// CHECK-NOT: Stack dump
sched.manifest @planc_manifest {mesh = {axes = ["dp"], sizes = [1], data = ["dp"]}, train = {}, groups = [0, 16], num_floats = 16}

// plan-memory-plan refuses a training executable's manifest it cannot plan, located: no
// step program's buffers (plan-schedule has not run), a buffer without its size, or
// buffers of a pipeline stage after a stage that has none.
// RUN: planc-opt %s -split-input-file -plan-memory-plan -verify-diagnostics

// expected-error @+1 {{'sched.manifest' op plan-memory-plan needs the step program's buffers (schedule.buffers, written by plan-schedule)}}
sched.manifest @planc_manifest {train = {}}

// -----

// expected-error @+1 {{'sched.manifest' op plan-memory-plan: a schedule buffer without its floats}}
sched.manifest @planc_manifest {schedule = {buffers = [{name = "state"}]}}

// -----

// expected-error @+1 {{'sched.manifest' op plan-memory-plan: schedule buffers of stage 1 but none of stage 0}}
sched.manifest @planc_manifest {schedule = {buffers = [{name = "p_s1", floats = 4, stage = 1}]}}

// -----

// expected-error @+1 {{'sched.manifest' op planc_manifest holds an attribute that is not a JSON value}}
sched.manifest @planc_manifest {schedule = {buffers = [{name = "state", floats = 8.0 : f32}]}}

// plan-select-entry keeps one entry and, transitively, what it references.
// RUN: planc-opt %s -split-input-file -plan-select-entry=entry=answer | FileCheck %s
// RUN: planc-opt %s -split-input-file -plan-select-entry=entry=t -verify-diagnostics | FileCheck %s --check-prefix=TRAIN

// CHECK-LABEL: module
// CHECK-NOT: plan.mesh
// CHECK: plan.model @m
// CHECK-NOT: plan.model @unused
// CHECK: plan.retrieval @docs
// CHECK: plan.generate @answer
// CHECK-NOT: plan.train

// TRAIN-LABEL: module
// TRAIN: plan.mesh @mesh
// TRAIN: plan.model @m
// TRAIN-NOT: plan.model @unused
// TRAIN-NOT: plan.retrieval
// TRAIN: plan.train @t
// TRAIN-NOT: plan.generate

plan.mesh @mesh {axes = [#plan.axis<"dp", 2>], devices_per_node = 2 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
plan.model @m attributes {layers = 0 : i64, max_seq = 0 : i64, num_params = 32 : i64, vocab = 4 : i64} {
^bb0(%tokens: tensor<?x?xi32>, %targets: tensor<?x?xi32>):
  plan.param @wte.weight : tensor<4x8xf32> dims ["vocab", "embed"] init normal std 2.0e-02
  %0 = plan.apply embedding [@wte.weight](%tokens) : (tensor<?x?xi32>) -> tensor<?x?x8xf32>
  %1 = plan.apply attend [@wte.weight](%0) : (tensor<?x?x8xf32>) -> tensor<?x?x4xf32>
  %2 = plan.apply cross_entropy [](%1, %targets) : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> tensor<f32>
  plan.return %2 : tensor<f32>
}
plan.model @unused attributes {layers = 0 : i64, max_seq = 0 : i64, num_params = 32 : i64, vocab = 4 : i64} {
^bb0(%tokens: tensor<?x?xi32>, %targets: tensor<?x?xi32>):
  plan.param @wte.weight : tensor<4x8xf32> dims ["vocab", "embed"] init normal std 2.0e-02
  %0 = plan.apply embedding [@wte.weight](%tokens) : (tensor<?x?xi32>) -> tensor<?x?x8xf32>
  %1 = plan.apply attend [@wte.weight](%0) : (tensor<?x?x8xf32>) -> tensor<?x?x4xf32>
  %2 = plan.apply cross_entropy [](%1, %targets) : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> tensor<f32>
  plan.return %2 : tensor<f32>
}
plan.retrieval @docs {base_dir = ".", chunk = #plan<chunk tokens>, chunk_overlap = 0 : i64, chunk_size = 256 : i64, corpus = ["*.md"], embed = #plan<embed model>, embed_checkpoint = "ckpt", embed_dim = 8 : i64, embed_model = @m, fusion = #plan<fusion weighted>, guard = #plan<guard quarantine>, index = "Flat", keyword_weight = 3.0e-01 : f64, manifest = "", metric = #plan<metric ip>, nprobe = 1 : i64, pool = "mean", rerank_checkpoint = "", rerank_top = 5 : i64, rrf_k = 60 : i64, search = #plan<search hybrid>, store = "s", top = 20 : i64, vector_weight = 7.0e-01 : f64}
plan.train @t {accumulation = 1 : i64, base_dir = ".", batch = 8 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @mesh, micro = 4 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 8 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}
plan.generate @answer {base_dir = ".", checkpoint = "ckpt", context = @docs, max_tokens = 1 : i64, model = @m, seed = 0 : i64, temperature = 1.0 : f64, top_k = 0 : i64, window = 16 : i64}

// Round trip of every plan op: print, parse, print again.
// RUN: planc-opt %s | planc-opt | FileCheck %s

// CHECK-LABEL: plan.mesh @cpu4
// CHECK-SAME: axes = [#plan.axis<"dp", 2>, #plan.axis<"tp", 2>]
// CHECK-SAME: kind = #plan<device_kind cpu>
plan.mesh @cpu4 {axes = [#plan.axis<"dp", 2>, #plan.axis<"tp", 2>], devices_per_node = 4 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}

// CHECK-LABEL: plan.mesh @dgx2
// CHECK-SAME: links = {network = 5.000000e+10 : f64, node = 4.500000e+11 : f64}
// CHECK-SAME: memory = 85899345920 : i64
plan.mesh @dgx2 {axes = [#plan.axis<"dp", 4>, #plan.axis<"tp", 4>], devices_per_node = 8 : i64, kind = #plan<device_kind cuda>, nodes = 2 : i64, memory = 85899345920 : i64, peak = 9.89e14 : f64, hbm = 3.35e12 : f64, links = {node = 4.5e11 : f64, network = 5.0e10 : f64}}

// CHECK-LABEL: plan.model @m
// CHECK: ^bb0(%tokens: tensor<?x?xi32>, %targets: tensor<?x?xi32>):
// CHECK: plan.param @wte.weight : tensor<16x8xf32> dims ["vocab", "embed"] init normal std 2.000000e-02
// CHECK: plan.param @proj.weight : tensor<8x8xf32> dims ["embed", "mlp"] init normal std 1.000000e-02 residual
// CHECK: plan.param @ln.weight : tensor<8xf32> dims ["embed"] init ones std 0.000000e+00
// CHECK: %wte = plan.apply embedding [@wte.weight](%tokens) {layer = "wte"} : (tensor<?x?xi32>) -> tensor<?x?x8xf32>
// CHECK: %ln = plan.apply rmsnorm [@ln.weight](%wte)
// CHECK: %proj = plan.apply linear [@proj.weight](%ln)
// CHECK: %[[SUM:.*]] = plan.apply add [](%wte, %proj)
// CHECK: %[[LOGITS:.*]] = plan.apply attend [@wte.weight](%[[SUM]])
// CHECK: %[[LOSS:.*]] = plan.apply cross_entropy [](%[[LOGITS]], %targets)
// CHECK: plan.return %[[LOSS]] : tensor<f32>
plan.model @m attributes {layers = 0 : i64, max_seq = 0 : i64, num_params = 200 : i64, vocab = 16 : i64} {
^bb0(%tokens: tensor<?x?xi32>, %targets: tensor<?x?xi32>):
  plan.param @wte.weight : tensor<16x8xf32> dims ["vocab", "embed"] init normal std 2.0e-02
  plan.param @proj.weight : tensor<8x8xf32> dims ["embed", "mlp"] init normal std 1.0e-02 residual
  plan.param @ln.weight : tensor<8xf32> dims ["embed"] init ones std 0.0
  %0 = plan.apply embedding [@wte.weight](%tokens) {layer = "wte"} : (tensor<?x?xi32>) -> tensor<?x?x8xf32>
  %1 = plan.apply rmsnorm [@ln.weight](%0) {eps = 1.0e-06 : f64, layer = "ln"} : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %2 = plan.apply linear [@proj.weight](%1) {layer = "proj"} : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %3 = plan.apply add [](%0, %2) : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %4 = plan.apply attend [@wte.weight](%3) {layer = "wte"} : (tensor<?x?x8xf32>) -> tensor<?x?x16xf32>
  %5 = plan.apply cross_entropy [](%4, %targets) : (tensor<?x?x16xf32>, tensor<?x?xi32>) -> tensor<f32>
  plan.return %5 : tensor<f32>
}

// CHECK-LABEL: plan.train @t
// CHECK-SAME: parallel = #plan.parallel<data = ["dp"], zero = 1, tensor = "tp", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>
plan.train @t {accumulation = 4 : i64, base_dir = ".", batch = 32 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 1.0 : f64, data = ["train.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule cosine>, mesh = @cpu4, micro = 4 : i64, min_lr = 1.0e-04 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 1, tensor = "tp", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision bf16>, recompute = #plan<recompute none>, seed = 1337 : i64, seq = 8 : i64, shard = {vocab = "tp"}, steps = 10 : i64, val = [], warmup = 1 : i64, weight_decay = 1.0e-01 : f64}

// CHECK-LABEL: plan.retrieval @docs
// CHECK-SAME: guard = #plan<guard quarantine>
plan.retrieval @docs {base_dir = ".", chunk = #plan<chunk tokens>, chunk_overlap = 32 : i64, chunk_size = 256 : i64, corpus = ["docs/**/*.md"], embed = #plan<embed hashing>, embed_checkpoint = "", embed_dim = 384 : i64, fusion = #plan<fusion weighted>, guard = #plan<guard quarantine>, index = "IVF64,Flat", keyword_weight = 3.0e-01 : f64, manifest = "docs/MANIFEST.sha256", metric = #plan<metric ip>, nprobe = 8 : i64, pool = "mean", rerank_checkpoint = "", rerank_top = 5 : i64, rrf_k = 60 : i64, search = #plan<search hybrid>, store = "index/docs", top = 20 : i64, vector_weight = 7.0e-01 : f64}

// CHECK-LABEL: plan.generate @answer
// CHECK-SAME: context = @docs
plan.generate @answer {base_dir = ".", checkpoint = "ckpt/m", context = @docs, max_tokens = 200 : i64, model = @m, seed = 7 : i64, temperature = 8.0e-01 : f64, top_k = 0 : i64, window = 16 : i64}

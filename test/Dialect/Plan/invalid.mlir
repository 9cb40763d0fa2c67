// Every verifier of the plan dialect rejects what it should, with its message.
// RUN: planc-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect

// expected-error @+1 {{axes multiply to 6 but the mesh has 4 devices}}
plan.mesh @m {axes = [#plan.axis<"dp", 2>, #plan.axis<"tp", 3>], devices_per_node = 4 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}

// -----

// expected-error @+1 {{has two axes named 'dp'}}
plan.mesh @m {axes = [#plan.axis<"dp", 2>, #plan.axis<"dp", 2>], devices_per_node = 4 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}

// -----

// expected-error @+1 {{mesh axis 'dp' has size 0; sizes are at least 1}}
plan.mesh @m {axes = [#plan.axis<"dp", 0>], devices_per_node = 1 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}

// -----

// expected-error @+1 {{needs at least one axis}}
plan.mesh @m {axes = [], devices_per_node = 1 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}

// -----

// expected-error @+1 {{num_params is 5 but its parameters hold 4 elements}}
plan.model @m attributes {layers = 0 : i64, max_seq = 0 : i64, num_params = 5 : i64, vocab = 0 : i64} {
^bb0(%tokens: tensor<?x?xi32>, %targets: tensor<?x?xi32>):
  plan.param @w : tensor<1x4xf32> dims ["vocab", "embed"] init ones std 0.0
  %0 = plan.apply embedding [@w](%tokens) : (tensor<?x?xi32>) -> tensor<?x?x4xf32>
  %1 = plan.apply cross_entropy [](%0, %targets) : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> tensor<f32>
  plan.return %1 : tensor<f32>
}

// -----

// expected-error @+1 {{takes two arguments, tokens and targets}}
plan.model @m attributes {layers = 0 : i64, max_seq = 0 : i64, num_params = 0 : i64, vocab = 0 : i64} {
^bb0(%tokens: tensor<?x?xi32>):
  %0 = "test.loss"() : () -> tensor<f32>
  plan.return %0 : tensor<f32>
}

// -----

plan.model @m attributes {layers = 0 : i64, max_seq = 0 : i64, num_params = 12 : i64, vocab = 0 : i64} {
^bb0(%tokens: tensor<?x?xi32>, %targets: tensor<?x?xi32>):
  // expected-error @+1 {{names 1 logical dims for a rank-2 tensor}}
  plan.param @w : tensor<3x4xf32> dims ["embed"] init normal std 0.02
  %0 = "test.loss"() : () -> tensor<f32>
  plan.return %0 : tensor<f32>
}

// -----

plan.model @m attributes {layers = 0 : i64, max_seq = 0 : i64, num_params = 12 : i64, vocab = 0 : i64} {
^bb0(%tokens: tensor<?x?xi32>, %targets: tensor<?x?xi32>):
  plan.param @w : tensor<3x4xf32> dims ["embed", "mlp"] init normal std 0.02
  %x = "test.x"() : () -> tensor<?x?x5xf32>
  // expected-error @+1 {{linear weight 'tensor<3x4xf32>' does not map 'tensor<?x?x5xf32>' to 'tensor<?x?x4xf32>'}}
  %0 = plan.apply linear [@w](%x) : (tensor<?x?x5xf32>) -> tensor<?x?x4xf32>
  %1 = "test.loss"() : () -> tensor<f32>
  plan.return %1 : tensor<f32>
}

// -----

plan.model @m attributes {layers = 0 : i64, max_seq = 0 : i64, num_params = 0 : i64, vocab = 0 : i64} {
^bb0(%tokens: tensor<?x?xi32>, %targets: tensor<?x?xi32>):
  %x = "test.x"() : () -> tensor<?x?x4xf32>
  // expected-error @+1 {{reads @missing, which is not a plan.param of this model}}
  %0 = plan.apply layernorm [@missing](%x) : (tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  %1 = "test.loss"() : () -> tensor<f32>
  plan.return %1 : tensor<f32>
}

// -----

plan.model @m attributes {layers = 0 : i64, max_seq = 0 : i64, num_params = 0 : i64, vocab = 0 : i64} {
^bb0(%tokens: tensor<?x?xi32>, %targets: tensor<?x?xi32>):
  %x = "test.x"() : () -> tensor<?x?x4xf32>
  // expected-error @+1 {{'add' takes 2 input(s), not 1}}
  %0 = plan.apply add [](%x) : (tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  %1 = "test.loss"() : () -> tensor<f32>
  plan.return %1 : tensor<f32>
}

// -----

plan.model @m attributes {layers = 0 : i64, max_seq = 0 : i64, num_params = 0 : i64, vocab = 0 : i64} {
^bb0(%tokens: tensor<?x?xi32>, %targets: tensor<?x?xi32>):
  %x = "test.x"() : () -> tensor<?x?x4xf32>
  // expected-error @+1 {{unknown layer kind 'conv'}}
  %0 = plan.apply conv [](%x) : (tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
}

// -----

// expected-error @+1 {{ZeRO stage must be 0, 1, 2 or 3, not 4}}
plan.train @t {parallel = #plan.parallel<data = ["dp"], zero = 4, tensor = "", pipeline = "", stages = 1, schedule = gpipe, sequence = false, replicate = []>}

// -----

// expected-error @+1 {{sequence parallel needs a tensor axis}}
plan.train @t {parallel = #plan.parallel<data = [], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = gpipe, sequence = true, replicate = []>}

// -----

// expected-error @+1 {{buckets (bucket = 1024) need a data axis and one pipeline stage}}
plan.train @t {parallel = #plan.parallel<data = [], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = gpipe, sequence = false, replicate = [], bucket = 1024>}

// -----

// expected-error @+1 {{ZeRO-2 buckets (bucket = 1024) need no sequence parallelism}}
plan.train @t {parallel = #plan.parallel<data = ["dp"], zero = 2, tensor = "tp", pipeline = "", stages = 1, schedule = gpipe, sequence = true, replicate = [], bucket = 1024>}

// -----

plan.mesh @mesh {axes = [#plan.axis<"dp", 2>], devices_per_node = 2 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
plan.model @m attributes {layers = 0 : i64, max_seq = 0 : i64, num_params = 0 : i64, vocab = 0 : i64} {
^bb0(%tokens: tensor<?x?xi32>, %targets: tensor<?x?xi32>):
  %0 = "test.loss"() : () -> tensor<f32>
  plan.return %0 : tensor<f32>
}
// expected-error @+1 {{batch 30 != micro 4 × data-parallel size 2 × accumulation 4}}
plan.train @t {accumulation = 4 : i64, base_dir = ".", batch = 30 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @mesh, micro = 4 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 8 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}

// -----

plan.mesh @mesh {axes = [#plan.axis<"dp", 2>], devices_per_node = 2 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
// expected-error @+1 {{model @mesh is not a plan.model}}
plan.train @t {accumulation = 1 : i64, base_dir = ".", batch = 8 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @mesh, micro = 4 : i64, min_lr = 0.0 : f64, model = @mesh, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 8 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}

// -----

plan.mesh @mesh {axes = [#plan.axis<"dp", 2>], devices_per_node = 2 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
plan.model @m attributes {layers = 0 : i64, max_seq = 0 : i64, num_params = 0 : i64, vocab = 0 : i64} {
^bb0(%tokens: tensor<?x?xi32>, %targets: tensor<?x?xi32>):
  %0 = "test.loss"() : () -> tensor<f32>
  plan.return %0 : tensor<f32>
}
// expected-error @+1 {{tensor axis 'tp' is not an axis of @mesh}}
plan.train @t {accumulation = 1 : i64, base_dir = ".", batch = 8 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @mesh, micro = 4 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "tp", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 8 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}

// -----

// expected-error @+1 {{chunk overlap must lie in [0, chunk_size)}}
plan.retrieval @docs {base_dir = ".", chunk = #plan<chunk tokens>, chunk_overlap = 300 : i64, chunk_size = 256 : i64, corpus = ["*.md"], embed = #plan<embed hashing>, embed_checkpoint = "", embed_dim = 384 : i64, fusion = #plan<fusion weighted>, guard = #plan<guard quarantine>, index = "Flat", keyword_weight = 3.0e-01 : f64, manifest = "", metric = #plan<metric ip>, nprobe = 1 : i64, pool = "mean", rerank_checkpoint = "", rerank_top = 5 : i64, rrf_k = 60 : i64, search = #plan<search hybrid>, store = "s", top = 20 : i64, vector_weight = 7.0e-01 : f64}

// -----

// expected-error @+1 {{ef_search and ef_construction must not be negative}}
plan.retrieval @docs {base_dir = ".", chunk = #plan<chunk tokens>, chunk_overlap = 32 : i64, chunk_size = 256 : i64, corpus = ["*.md"], embed = #plan<embed hashing>, embed_checkpoint = "", ef_search = -1 : i64, embed_dim = 384 : i64, fusion = #plan<fusion weighted>, guard = #plan<guard quarantine>, index = "HNSW32", keyword_weight = 3.0e-01 : f64, manifest = "", metric = #plan<metric ip>, nprobe = 1 : i64, pool = "mean", rerank_checkpoint = "", rerank_top = 5 : i64, rrf_k = 60 : i64, search = #plan<search hybrid>, store = "s", top = 20 : i64, vector_weight = 7.0e-01 : f64}

// -----

// expected-error @+1 {{embed = fasttext needs the fasttext options, and only it}}
plan.retrieval @docs {base_dir = ".", chunk = #plan<chunk tokens>, chunk_overlap = 32 : i64, chunk_size = 256 : i64, corpus = ["*.md"], embed = #plan<embed fasttext>, embed_checkpoint = "", embed_dim = 100 : i64, fusion = #plan<fusion weighted>, guard = #plan<guard quarantine>, index = "Flat", keyword_weight = 3.0e-01 : f64, manifest = "", metric = #plan<metric ip>, nprobe = 1 : i64, pool = "mean", rerank_checkpoint = "", rerank_top = 5 : i64, rrf_k = 60 : i64, search = #plan<search hybrid>, store = "s", top = 20 : i64, vector_weight = 7.0e-01 : f64}

// -----

// expected-error @+1 {{embed = fasttext needs the fasttext options, and only it}}
plan.retrieval @docs {base_dir = ".", chunk = #plan<chunk tokens>, chunk_overlap = 32 : i64, chunk_size = 256 : i64, corpus = ["*.md"], embed = #plan<embed hashing>, embed_checkpoint = "", embed_dim = 100 : i64, fasttext = {bucket = 100 : i64, epoch = 5 : i64, maxn = 6 : i64, min_count = 2 : i64, minn = 3 : i64, model = "skipgram", threads = 1 : i64}, fusion = #plan<fusion weighted>, guard = #plan<guard quarantine>, index = "Flat", keyword_weight = 3.0e-01 : f64, manifest = "", metric = #plan<metric ip>, nprobe = 1 : i64, pool = "mean", rerank_checkpoint = "", rerank_top = 5 : i64, rrf_k = 60 : i64, search = #plan<search hybrid>, store = "s", top = 20 : i64, vector_weight = 7.0e-01 : f64}

// -----

// expected-error @+1 {{fasttext model must be skipgram or cbow}}
plan.retrieval @docs {base_dir = ".", chunk = #plan<chunk tokens>, chunk_overlap = 32 : i64, chunk_size = 256 : i64, corpus = ["*.md"], embed = #plan<embed fasttext>, embed_checkpoint = "", embed_dim = 100 : i64, fasttext = {bucket = 100 : i64, epoch = 5 : i64, maxn = 6 : i64, min_count = 2 : i64, minn = 3 : i64, model = "glove", threads = 1 : i64}, fusion = #plan<fusion weighted>, guard = #plan<guard quarantine>, index = "Flat", keyword_weight = 3.0e-01 : f64, manifest = "", metric = #plan<metric ip>, nprobe = 1 : i64, pool = "mean", rerank_checkpoint = "", rerank_top = 5 : i64, rrf_k = 60 : i64, search = #plan<search hybrid>, store = "s", top = 20 : i64, vector_weight = 7.0e-01 : f64}

// -----

// expected-error @+1 {{fasttext option 'epoch' must be an integer of at least 1}}
plan.retrieval @docs {base_dir = ".", chunk = #plan<chunk tokens>, chunk_overlap = 32 : i64, chunk_size = 256 : i64, corpus = ["*.md"], embed = #plan<embed fasttext>, embed_checkpoint = "", embed_dim = 100 : i64, fasttext = {bucket = 100 : i64, epoch = 0 : i64, maxn = 6 : i64, min_count = 2 : i64, minn = 3 : i64, model = "skipgram", threads = 1 : i64}, fusion = #plan<fusion weighted>, guard = #plan<guard quarantine>, index = "Flat", keyword_weight = 3.0e-01 : f64, manifest = "", metric = #plan<metric ip>, nprobe = 1 : i64, pool = "mean", rerank_checkpoint = "", rerank_top = 5 : i64, rrf_k = 60 : i64, search = #plan<search hybrid>, store = "s", top = 20 : i64, vector_weight = 7.0e-01 : f64}

// -----

// expected-error @+1 {{fasttext minn must not exceed maxn}}
plan.retrieval @docs {base_dir = ".", chunk = #plan<chunk tokens>, chunk_overlap = 32 : i64, chunk_size = 256 : i64, corpus = ["*.md"], embed = #plan<embed fasttext>, embed_checkpoint = "", embed_dim = 100 : i64, fasttext = {bucket = 100 : i64, epoch = 5 : i64, maxn = 6 : i64, min_count = 2 : i64, minn = 7 : i64, model = "skipgram", threads = 1 : i64}, fusion = #plan<fusion weighted>, guard = #plan<guard quarantine>, index = "Flat", keyword_weight = 3.0e-01 : f64, manifest = "", metric = #plan<metric ip>, nprobe = 1 : i64, pool = "mean", rerank_checkpoint = "", rerank_top = 5 : i64, rrf_k = 60 : i64, search = #plan<search hybrid>, store = "s", top = 20 : i64, vector_weight = 7.0e-01 : f64}

// -----

// expected-error @+1 {{model @nothing is not a plan.model}}
plan.generate @g {base_dir = ".", checkpoint = "c", max_tokens = 1 : i64, model = @nothing, seed = 0 : i64, temperature = 1.0 : f64, top_k = 0 : i64, window = 16 : i64}

// plan-select-entry fails, naming the entries, when the entry is missing or not an entry.
// RUN: not planc-opt %s -plan-select-entry=entry=nope 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not planc-opt %s -plan-select-entry=entry=mesh 2>&1 | FileCheck %s --check-prefix=KIND

// MISSING: error: no declaration named 'nope'; the entries are: g
// KIND: error: 'mesh' is a mesh; the entry is a train, retrieval or generate declaration; the entries are: g

plan.mesh @mesh {axes = [#plan.axis<"dp", 2>], devices_per_node = 2 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
plan.model @m attributes {layers = 0 : i64, max_seq = 0 : i64, num_params = 32 : i64, vocab = 4 : i64} {
^bb0(%tokens: tensor<?x?xi32>, %targets: tensor<?x?xi32>):
  plan.param @wte.weight : tensor<4x8xf32> dims ["vocab", "embed"] init normal std 2.0e-02
  %0 = plan.apply embedding [@wte.weight](%tokens) : (tensor<?x?xi32>) -> tensor<?x?x8xf32>
  %1 = plan.apply attend [@wte.weight](%0) : (tensor<?x?x8xf32>) -> tensor<?x?x4xf32>
  %2 = plan.apply cross_entropy [](%1, %targets) : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> tensor<f32>
  plan.return %2 : tensor<f32>
}
plan.generate @g {base_dir = ".", checkpoint = "c", max_tokens = 1 : i64, model = @m, seed = 0 : i64, temperature = 1.0 : f64, top_k = 0 : i64, window = 16 : i64}

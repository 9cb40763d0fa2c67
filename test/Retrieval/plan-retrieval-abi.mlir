// plan-retrieval-abi: a retrieval declaration becomes the manifest constant
// planc_retrieval_manifest (every parameter of the graph, paths resolved against the plan's
// directory, enums by their language names); plan-emit-main adds the main. A model
// embedder and re-ranker become decoding entries with their manifests. Nothing of the
// plan is left.
// RUN: planc emit %examples/rag.plan --entry docs --stage sched | FileCheck %s
// RUN: planc emit %S/Inputs/small.plan --stage sched 2>&1 | FileCheck %s --check-prefix=SMALL
// RUN: planc emit %S/Inputs/models.plan --stage sched 2>&1 | FileCheck %s --check-prefix=MODELS
// RUN: planc emit %S/Inputs/hnsw.plan --stage sched 2>&1 | FileCheck %s --check-prefix=HNSW
// RUN: planc emit %S/Inputs/semantic.plan --stage sched 2>&1 | FileCheck %s --check-prefix=SEMANTIC
// RUN: planc emit %S/Inputs/fasttext.plan --stage sched 2>&1 | FileCheck %s --check-prefix=FASTTEXT

// CHECK-NOT: plan.
// CHECK: llvm.mlir.global internal constant @planc_retrieval_manifest("{
// CHECK-SAME: \22chunk\22:\22tokens\22,\22chunk_overlap\22:32,\22chunk_size\22:256,
// CHECK-SAME: \22corpus\22:[\22{{.*}}/examples/docs/**/*.md\22]
// CHECK-SAME: \22embed\22:\22hashing\22
// CHECK-SAME: \22embed_checkpoint\22:\22\22,\22embed_dim\22:384,\22embed_model\22:\22\22,\22embed_pool\22:\22mean\22
// CHECK-SAME: \22format\22:\22planc-retrieval-1\22,\22fusion\22:\22weighted\22,\22graph\22:\22docs\22,\22guard\22:\22quarantine\22,\22index\22:\22IVF64,Flat\22,\22keyword_weight\22:0.29999999999999999,
// CHECK-SAME: \22manifest\22:\22{{.*}}/examples/docs/MANIFEST.sha256\22,\22metric\22:\22ip\22,\22nprobe\22:8,
// CHECK-SAME: \22rerank\22:\22none\22,\22rerank_checkpoint\22:\22\22,\22rerank_model\22:\22\22,\22rerank_top\22:5,
// CHECK-SAME: \22search\22:\22hybrid\22,\22store\22:\22{{.*}}/examples/index/docs\22,\22top\22:20,\22vector_weight\22:0.69999999999999996}\00")
// CHECK-NOT: func.func
// CHECK-NOT: llvm.func @main

// An HNSW index with its build and search options (0 elsewhere: FAISS's defaults), and no
// `search`: hybrid with the hashing embedder's default weights, BM25 leading.
// HNSW: \22ef_construction\22:80,\22ef_search\22:64,
// HNSW-SAME: \22index\22:\22HNSW32\22
// HNSW-SAME: \22keyword_weight\22:0.90000000000000002,
// HNSW-SAME: \22search\22:\22hybrid\22,
// HNSW-SAME: \22vector_weight\22:0.10000000000000001}

// Semantic chunks: whole sentences of at most 128 tokens, cut under a similarity of 0.3.
// SEMANTIC: \22chunk\22:\22semantic\22,\22chunk_overlap\22:0,\22chunk_size\22:128,\22chunk_threshold\22:0.29999999999999999,

// fastText vectors trained on the corpus: the options written, and planc's defaults for the
// others (fastText's, but 10 epochs, min_count 2, bucket 100000 and one thread); without
// `search`, hybrid with the word vectors' default weights (hashing's), BM25 leading.
// FASTTEXT: \22embed\22:\22fasttext\22,\22embed_checkpoint\22:\22\22,\22embed_dim\22:64,
// FASTTEXT-SAME: \22fasttext\22:{\22bucket\22:100000,\22epoch\22:10,\22maxn\22:5,\22min_count\22:2,\22minn\22:3,\22model\22:\22cbow\22,\22threads\22:1}
// FASTTEXT-SAME: \22keyword_weight\22:0.90000000000000002,
// FASTTEXT-SAME: \22vector_weight\22:0.10000000000000001}

// A graph with reciprocal-rank fusion (k 30), sentences, L2 and the guard off.
// SMALL: \22chunk\22:\22sentences\22
// SMALL-SAME: \22fusion\22:\22rrf\22
// SMALL-SAME: \22guard\22:\22off\22
// SMALL-SAME: \22manifest\22:\22{{.*}}notes/SHA256SUMS\22
// SMALL-SAME: \22metric\22:\22l2\22
// SMALL-SAME: \22rrf_k\22:30,\22search\22:\22hybrid\22

// Model embedding (last-token pooling) and re-ranking with tiny: hidden states [1, 64, 64]
// and logits [1, 64, 256] for a chunk of 64 positions over one cache of both layers
// (2 × 64 positions × 128 floats); the hidden size becomes the graph's dimension.
// MODELS-LABEL: func.func @planc_embed(
// MODELS-SAME: memref<120576xf32>, %{{.*}}: memref<1x64xi32>, %{{.*}}: i64, %{{.*}}: memref<16384xf32>, %{{.*}}: memref<1x64x64xf32>)
// MODELS-COUNT-2: nn.sdpa_cached
// MODELS-NOT: nn.cross_entropy
// MODELS: return
// MODELS: llvm.mlir.global internal constant @planc_embed_manifest("{\22cache_floats\22:16384,\22chunk\22:64,\22format\22:\22planc-model-1\22,\22layers\22:2,\22model\22:\22tiny\22,\22num_floats\22:120576,\22params\22:[{\22count\22:16384,\22name\22:\22wte.weight\22,\22offset\22:0,\22shape\22:[256,64]},
// MODELS-SAME: \22role\22:\22embed\22,\22vocab\22:256,\22width\22:64,\22window\22:64}
// MODELS-LABEL: func.func @planc_rerank(
// MODELS-SAME: memref<1x64x256xf32>)
// MODELS: llvm.mlir.global internal constant @planc_rerank_manifest(
// MODELS-SAME: \22role\22:\22rerank\22,\22vocab\22:256,\22width\22:256,\22window\22:64}
// MODELS: @planc_retrieval_manifest(
// MODELS-SAME: \22embed\22:\22model\22,\22embed_checkpoint\22:\22{{.*}}/Inputs/ckpt/tiny\22,\22embed_dim\22:64,\22embed_model\22:\22tiny\22,\22embed_pool\22:\22last\22
// MODELS-SAME: \22rerank\22:\22model\22,\22rerank_checkpoint\22:\22{{.*}}/Inputs/ckpt/tiny2\22,\22rerank_model\22:\22tiny\22,\22rerank_top\22:3
// MODELS-NOT: func.func @tiny

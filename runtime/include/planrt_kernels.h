/* planrt kernels: the CPU implementations of the nn ops that planc's lowering
 * calls rather than generates (see docs/LOWERING.md). Matmuls are not here:
 * generated code calls cblas_sgemm directly.
 *
 * Conventions: float32, row-major, contiguous, no aliasing between inputs and
 * outputs. Every `rows` is the number of (batch, sequence) positions. Backward
 * kernels OVERWRITE their outputs (they never accumulate into them) and keep
 * nothing from the forward: what they need (mean/rstd, attention probabilities)
 * is recomputed from the forward's inputs. The normalisation and cross-entropy
 * reductions are accumulated in double; attention does its products with
 * cblas_sgemm and its softmax in float.
 * An index out of range (embedding id, cross-entropy target) is fatal: the
 * kernel prints "planrt: error: ..." to stderr and exits with status 1. */
#ifndef PLANRT_KERNELS_H
#define PLANRT_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Normalisation over the last dim C. */

/* LayerNorm: y[rows, C] = (x - mean) / sqrt(var + eps) * w + b, with the biased
 * variance (as PyTorch). b may be NULL (no bias). */
void planrt_k_layernorm(const float *x, const float *w, const float *b, float *y, int64_t rows,
                        int64_t C, float eps);
/* LayerNorm's backward from dy [rows, C]: dx [rows, C], dw [C] and db [C] (db
 * may be NULL). Recomputes mean and rstd from x. */
void planrt_k_layernorm_bwd(const float *dy, const float *x, const float *w, float *dx, float *dw,
                            float *db, int64_t rows, int64_t C, float eps);

/* RMSNorm: y[rows, C] = x / sqrt(mean(x^2) + eps) * w. */
void planrt_k_rmsnorm(const float *x, const float *w, float *y, int64_t rows, int64_t C, float eps);
/* RMSNorm's backward from dy [rows, C]: dx [rows, C] and dw [C]. */
void planrt_k_rmsnorm_bwd(const float *dy, const float *x, const float *w, float *dx, float *dw,
                          int64_t rows, int64_t C, float eps);

/* ---- Attention. */

/* Scaled dot-product attention, scale 1/sqrt(D). qkv is [B, S, (H + 2*KVH)*D]:
 * along the last dim H query heads, then KVH key heads, then KVH value heads,
 * each D wide; query head h reads key/value head h / (H / KVH) (grouped-query;
 * H must be a multiple of KVH). If rope != 0, the rotary embedding with base
 * rope_theta is applied to q and k first (Hugging Face "rotate_half"; D even):
 * for position s and i in [0, D/2), angle = s * rope_theta^(-2i/D) and
 * (x[i], x[i + D/2]) = (a, b) -> (a*cos - b*sin, b*cos + a*sin). causal != 0
 * masks the keys after the query's position. out is [B, S, H*D] (the heads
 * concatenated). */
void planrt_k_sdpa(const float *qkv, float *out, int64_t B, int64_t S, int64_t H, int64_t KVH,
                   int64_t D, int32_t causal, int32_t rope, float rope_theta);
/* SDPA's backward: dqkv (qkv's shape) from dout [B, S, H*D]. Recomputes the
 * attention probabilities (flash-attention style); the gradients of q and k go
 * back through the rope rotation. */
void planrt_k_sdpa_bwd(const float *dout, const float *qkv, float *dqkv, int64_t B, int64_t S,
                       int64_t H, int64_t KVH, int64_t D, int32_t causal, int32_t rope,
                       float rope_theta);

/* Causal SDPA of n new positions pos .. pos+n-1 over a key/value cache (decoding).
 * qkv is [B, n, (H + 2*KVH)*D] as above; cache is [B, T, 2*KVH*D]: at each of its
 * T rows the keys of the KVH heads (rope applied at the row's position) then
 * their values. The new keys and values are stored at rows pos .. pos+n-1, then
 * query i attends over rows 0 .. pos+i. out is [B, n, H*D]. The same numbers as
 * planrt_k_sdpa over the whole sequence (up to the summation order). pos < 0 or
 * pos + n > T is fatal. */
void planrt_k_sdpa_cached(const float *qkv, float *cache, float *out, int64_t B, int64_t n, int64_t T,
                          int64_t pos, int64_t H, int64_t KVH, int64_t D, int32_t rope, float rope_theta);

/* ---- Embedding. */

/* out[r, :] = table[ids[r], :], table [V, C]. An id outside [0, V) is fatal:
 * "planrt: error: embedding id X is outside [0, V)". */
void planrt_k_embedding(const float *table, const int32_t *ids, float *out, int64_t rows,
                        int64_t C, int64_t V);
/* dtable [V, C] = sum over r of onehot(ids[r]) (x) dout[r, :]: zeroed, then
 * scatter-added. Ids are checked as in the forward. */
void planrt_k_embedding_bwd(const float *dout, const int32_t *ids, float *dtable, int64_t rows,
                            int64_t C, int64_t V);

/* ---- Loss. */

/* *loss = mean over r of logsumexp(logits[r, :]) - logits[r, targets[r]], with
 * logits [rows, V]; 0 when rows == 0. A target outside [0, V) is fatal:
 * "planrt: error: cross-entropy target X is outside [0, V)". */
void planrt_k_cross_entropy(const float *logits, const int32_t *targets, float *loss, int64_t rows,
                            int64_t V);
/* dlogits[r, :] = (*dloss / rows) * (softmax(logits[r, :]) - onehot(targets[r])). */
void planrt_k_cross_entropy_bwd(const float *dloss, const float *logits, const int32_t *targets,
                                float *dlogits, int64_t rows, int64_t V);

/* ---- Tensor parallelism (nn-tensor-parallel): the kernels of the ops that a
 * rank of a tensor-parallel group runs; collectives act on the mesh of the running
 * training step (a single process: its group is itself). Bytes are counted in the
 * step's comm_bytes as every collective's. A failing collective is fatal, naming
 * the rank. */

/* This process's coordinate on mesh axis `axis` (0 without a mesh). */
int64_t planrt_k_axis_coord(int32_t axis);
/* out = the sum (reduce 0) or maximum (reduce 1) over the group along mesh axis
 * `axis` of every rank's x [count]. */
void planrt_k_all_reduce(const float *x, float *out, int64_t count, int32_t axis, int32_t reduce);
/* Sequence parallelism: x [B, n, C] is this rank's positions c*n .. c*n + n - 1 of
 * the sequence; out [B, n * group, C] the whole sequence gathered over the group along
 * mesh axis `axis`. */
void planrt_k_all_gather_seq(const float *x, float *out, int64_t B, int64_t n, int64_t C, int32_t axis);
/* out [B, n, C] = positions offset .. offset + n - 1 of x [B, T, C]; and the gradient:
 * dx [B, T, C] zero but for those positions, dy [B, n, C]. Out-of-range is fatal. */
void planrt_k_sequence_slice(const float *x, float *out, int64_t B, int64_t T, int64_t C, int64_t offset, int64_t n);
void planrt_k_sequence_unslice(const float *dy, float *dx, int64_t B, int64_t T, int64_t C, int64_t offset, int64_t n);
/* x [B, n * group, C]; out [B, n, C] = positions c*n .. c*n + n - 1 of the sum of every
 * rank's x over the group. */
void planrt_k_reduce_scatter_seq(const float *x, float *out, int64_t B, int64_t n, int64_t C, int32_t axis);
/* As planrt_k_embedding for a table that holds rows offset .. offset + V - 1 of a
 * larger one: ids outside give zero rows. An id below 0 is fatal. */
void planrt_k_embedding_slice(const float *table, const int32_t *ids, float *out, int64_t rows, int64_t C,
                              int64_t V, int64_t offset);
void planrt_k_embedding_slice_bwd(const float *dout, const int32_t *ids, float *dtable, int64_t rows, int64_t C,
                                  int64_t V, int64_t offset);
/* Vocab-parallel cross-entropy: logits [rows, V] are columns offset .. offset + V - 1
 * of the full vocabulary, split over the group along mesh axis `axis`. Three
 * all-reduces of `rows` floats (row maxima, sums of exponentials, target logits)
 * give *loss, as planrt_k_cross_entropy of the full logits, and lse[rows], each
 * row's log-sum-exp. A target outside [0, V x group size) is fatal. */
void planrt_k_cross_entropy_vp(const float *logits, const int32_t *targets, float *loss, float *lse, int64_t rows,
                               int64_t V, int64_t offset, int32_t axis);
/* dlogits = (*dloss / rows) * (exp(logits - lse) - onehot(targets - offset)). */
void planrt_k_cross_entropy_vp_bwd(const float *dloss, const float *logits, const int32_t *targets,
                                   const float *lse, float *dlogits, int64_t rows, int64_t V, int64_t offset);

#ifdef __cplusplus
}
#endif

#endif /* PLANRT_KERNELS_H */

/* planrt: the runtime ABI that planc's executables call. A C interface with
 * opaque handles and a status on every call; the message of the last failure
 * (naming the rank, the file and the cause) is planrt_last_error(). */
#ifndef PLANRT_H
#define PLANRT_H

#include <stddef.h>
#include <stdint.h>

/* C linkage for each group of declarations below (one extern "C" block per group). */
#ifdef __cplusplus
#define PLANRT_C_BEGIN extern "C" {
#define PLANRT_C_END }
#else
#define PLANRT_C_BEGIN
#define PLANRT_C_END
#endif

PLANRT_C_BEGIN

typedef enum {
  PLANRT_OK = 0,
  PLANRT_ERR_IO,       /* a file could not be opened, read or written */
  PLANRT_ERR_FORMAT,   /* a file is truncated, corrupt or of the wrong format */
  PLANRT_ERR_MISMATCH, /* names, dtypes or shapes differ from what the model expects */
  PLANRT_ERR_ARG,      /* a caller error: bad argument, out-of-range value */
} planrt_status;

/* The message of the last failed call on this thread ("" if none). */
const char *planrt_last_error(void);
/* This process's rank, for messages; 0 by default. */
void planrt_set_rank(int rank);

/* ---- Token data: nanoGPT raw uint16 files, or llm.c files (256 int32 header,
 * magic 20240520, version 1, then uint16 tokens). Globs allowed. */
typedef struct planrt_data planrt_data;

/* Opens and validates every file the patterns match (format, size, header). Token
 * ids are checked against vocab (if > 0) as windows are read. */
planrt_status planrt_data_open(const char *const *patterns, size_t count, uint64_t seed, int64_t vocab,
                               planrt_data **out);
/* The same over text files, each tokenized when opened with the Hugging Face byte-level
 * BPE `tokenizer` (a tokenizer.json path; NULL: token files); a tokenizer with more ids
 * than `vocab` is an error. */
planrt_status planrt_data_open_text(const char *const *patterns, size_t count, const char *tokenizer, uint64_t seed,
                                    int64_t vocab, planrt_data **out);
/* Total tokens over all files. */
uint64_t planrt_data_tokens(const planrt_data *data);
/* Global sample `index` (step × batch + position in the global batch): a window of
 * seq + 1 tokens at an offset drawn from (seed, index) alone, so every layout and a
 * resumed run see the same sequences. tokens[i] = window[i], targets[i] = window[i+1]. */
planrt_status planrt_data_sample(const planrt_data *data, uint64_t index, int64_t seq, int32_t *tokens,
                                 int32_t *targets);
/* `count` consecutive samples from `first`, row-major [count, seq]. */
planrt_status planrt_data_batch(const planrt_data *data, uint64_t first, int64_t count, int64_t seq, int32_t *tokens,
                                int32_t *targets);
/* Evaluation: the window-th non-overlapping window of seq + 1 tokens, in file order. */
planrt_status planrt_data_window(const planrt_data *data, uint64_t window, int64_t seq, int32_t *tokens,
                                 int32_t *targets);
void planrt_data_close(planrt_data *data);

/* ---- Image data: CIFAR-10's binary batches, or planc's own image files. Globs
 * allowed; the files (in sorted glob order) are concatenated and must all have the
 * same channels, height and width.
 *
 * planc's format (PLANRT_IMAGES_PLANC), little-endian, a 32-byte header (read by
 * planrt_image_file.h's planrt_image_header_read):
 *   offset  0  char   magic[8]   "PLANCIMG" (no terminating NUL)
 *   offset  8  uint32 version    1
 *   offset 12  uint32 channels   C >= 1
 *   offset 16  uint32 height     H >= 1
 *   offset 20  uint32 width      W >= 1
 *   offset 24  uint64 count      N >= 1 images
 * then N x C x H x W uint8 pixels (NCHW, row-major), then N uint16 labels: the file
 * is exactly 32 + N*C*H*W + 2*N bytes.
 * CIFAR-10 (PLANRT_IMAGES_CIFAR10): records of 1 label byte + 3072 pixel bytes (the
 * R, G and B planes of 32 x 32, row-major), C = 3, H = W = 32. */
typedef struct planrt_images planrt_images;
typedef enum { PLANRT_IMAGES_PLANC = 0, PLANRT_IMAGES_CIFAR10 = 1 } planrt_images_format;
/* What a sample does to the image's bytes: pad with zero bytes and crop, flip, then
 * scale (crop padding is byte 0 before normalisation, as torchvision's RandomCrop). */
typedef struct {
  int32_t normalize;     /* 0: byte / 255; 1: (byte / 255 - mean[c]) / std[c] */
  float mean[4], std[4]; /* per channel (channels <= 4 when normalize) */
  int32_t crop_pad;      /* random crop: pad by this many zero pixels, crop back to H x W at a random offset; 0: none */
  int32_t flip;          /* random horizontal flip with probability 1/2 */
} planrt_image_transform;

/* Opens and validates every file the patterns match, all at open: magic, version,
 * non-zero sizes, the exact file size (a truncated or over-long file names the bytes
 * expected and found), equal shapes across files, and every label < classes (if
 * classes > 0; the error names the file, the image index and the label). */
planrt_status planrt_images_open(const char *const *patterns, size_t count, planrt_images_format format,
                                 int64_t classes, planrt_images **out);
/* The shape every image has (C, H, W). */
void planrt_images_shape(const planrt_images *images, int64_t *channels, int64_t *height, int64_t *width);
/* Total images over all files. */
uint64_t planrt_images_count(const planrt_images *images);
/* Training sample `index` (step x global batch + position): the image drawn from
 * (seed, index) alone (uniform over all images, with replacement), cropped and flipped
 * by (seed, index) as t asks, into out [C*H*W] floats (CHW), and its label; every
 * layout and a resumed run see the same samples. t NULL: byte / 255, no crop, no flip. */
planrt_status planrt_images_sample(const planrt_images *images, uint64_t seed, uint64_t index,
                                   const planrt_image_transform *t, float *out, int32_t *label);
/* Evaluation: image i in file order (files in sorted glob order), normalised only (no
 * crop, no flip; t's crop_pad and flip are ignored; t NULL: byte / 255). */
planrt_status planrt_images_get(const planrt_images *images, uint64_t i, const planrt_image_transform *t, float *out,
                                int32_t *label);
void planrt_images_close(planrt_images *images);

/* ---- safetensors files (Hugging Face's format). */
typedef enum { PLANRT_F32 = 0, PLANRT_F16, PLANRT_BF16, PLANRT_I32, PLANRT_I64, PLANRT_U16 } planrt_dtype;

typedef struct {
  const char *name;
  planrt_dtype dtype;
  int rank;
  const int64_t *shape;
  const void *data;
} planrt_tensor;

/* Writes atomically: a temporary file in the same directory, fsync, rename, fsync
 * of the directory. A crash leaves the previous file intact. */
planrt_status planrt_st_save(const char *path, const planrt_tensor *tensors, size_t count, const char *const *metadata,
                             size_t metadata_pairs);

typedef struct planrt_st planrt_st;
/* Opens and validates a file: header bounds, JSON, dtypes, shapes, and that the
 * tensors tile the data region exactly. */
planrt_status planrt_st_open(const char *path, planrt_st **out);
size_t planrt_st_count(const planrt_st *st);
const char *planrt_st_name(const planrt_st *st, size_t i);
/* A metadata value, or NULL. */
const char *planrt_st_metadata(const planrt_st *st, const char *key);
/* Copies tensor `name` into dst after checking its dtype and shape; a missing
 * tensor or a different dtype or shape is PLANRT_ERR_MISMATCH naming both. */
planrt_status planrt_st_read(const planrt_st *st, const char *name, planrt_dtype dtype, int rank, const int64_t *shape,
                             void *dst);
/* Tensor `name` as it is in the file (its dtype, shape and bytes, valid until
 * planrt_st_close); PLANRT_ERR_MISMATCH naming it when the file lacks it. */
planrt_status planrt_st_find(const planrt_st *st, const char *name, planrt_tensor *out);
void planrt_st_close(planrt_st *st);

/* ---- Parameter initialisation. Element j of parameter `param` is a function of
 * (seed, param, j) alone, so a shard that starts at element `offset` of the flat
 * tensor gets exactly the values of that slice of the whole tensor, whatever the
 * layout. Normal values come from Box-Muller over a counter-based generator. */
planrt_status planrt_init_normal(float *dst, int64_t count, int64_t offset, double mean, double std, uint64_t seed,
                                 uint64_t param);
/* Uniform in (−bound, bound), element j from (seed, param, j) as planrt_init_normal. */
planrt_status planrt_init_uniform(float *dst, int64_t count, int64_t offset, double bound, uint64_t seed,
                                  uint64_t param);
planrt_status planrt_init_fill(float *dst, int64_t count, float value);

PLANRT_C_END

PLANRT_C_BEGIN
/* ---- The device mesh over MPI: one process per device, rank → coordinates
 * row-major (the last axis varies fastest), one communicator per axis group. The
 * collectives count the bytes this rank sends under the ring model (all-reduce
 * 2(n−1)/n·S, all-gather and reduce-scatter (n−1)/n·S, send S), the volumes
 * `planc explain` predicts. */
typedef struct planrt_mesh planrt_mesh;
typedef enum { PLANRT_ALL_REDUCE = 0, PLANRT_ALL_GATHER, PLANRT_REDUCE_SCATTER, PLANRT_SEND } planrt_collective;
/* PLANRT_SUM_U64: the buffer holds count / 2 unsigned 64-bit integers, summed modulo 2^64
 * (a federated round's fixed-point updates; MPI only). */
typedef enum { PLANRT_SUM = 0, PLANRT_MAX, PLANRT_SUM_U64 } planrt_reduce_op;

/* Initialises MPI if needed; the world size must equal the product of the sizes. */
planrt_status planrt_mesh_init(int *argc, char ***argv, const int64_t *sizes, int axes, planrt_mesh **out);
int planrt_mesh_rank(const planrt_mesh *mesh);
int64_t planrt_mesh_coord(const planrt_mesh *mesh, int axis);
/* Collectives over the ranks that differ only along the axes in `mask` (bit i = axis i). */
planrt_status planrt_all_reduce(planrt_mesh *mesh, unsigned mask, float *buf, int64_t count, planrt_reduce_op op);
/* recv holds n × count: rank k's count elements at k × count, in coordinate order. */
planrt_status planrt_all_gather(planrt_mesh *mesh, unsigned mask, const float *send, int64_t count, float *recv);
/* send holds n × count; rank k receives the sum of every rank's block k. */
planrt_status planrt_reduce_scatter(planrt_mesh *mesh, unsigned mask, const float *send, int64_t count, float *recv);
/* A non-blocking all-reduce in place (DDP gradient buckets): started here, done once
 * planrt_wait returns, which frees the request; planrt_test drives it forward (MPI
 * progresses a non-blocking collective only inside MPI calls) and says whether it is
 * done. Until then nothing may touch buf. Bytes are counted at the start. */
typedef struct planrt_request planrt_request;
planrt_status planrt_all_reduce_start(planrt_mesh *mesh, unsigned mask, float *buf, int64_t count, planrt_reduce_op op,
                                      planrt_request **out);
/* A slice of a non-blocking all-gather (ZeRO-3's parameter buckets): the floats
 * [begin, begin + size) of what planrt_all_gather(mesh, mask, send, count, recv) writes
 * to recv; each rank sends the part of its block in the slice (send must not lie in
 * recv, except as this rank's block, recv + (its rank in the group) × count: then in place, the block's part
 * of the slice already there, as the offloaded parameters fetch it). Bytes counted: the whole all-gather's count up to the slice's end minus that up
 * to its start, so that slices covering it count exactly what it does. */
planrt_status planrt_all_gather_start(planrt_mesh *mesh, unsigned mask, const float *send, int64_t count, float *recv,
                                      int64_t begin, int64_t size, planrt_request **out);
/* A slice of a non-blocking reduce-scatter (ZeRO-1's gradient buckets): of the n × count
 * floats of send that planrt_reduce_scatter(mesh, mask, send, count, recv) reduces, the
 * part [begin, begin + size); this rank receives the sum of the part of its block in the
 * slice at that part's place in recv (recv[i] for send's block floats i). Bytes counted as
 * planrt_all_gather_start's. */
planrt_status planrt_reduce_scatter_start(planrt_mesh *mesh, unsigned mask, const float *send, int64_t count,
                                          float *recv, int64_t begin, int64_t size, planrt_request **out);
int planrt_test(planrt_request *request);
planrt_status planrt_wait(planrt_request *request);
/* Point to point along one axis, to or from the rank at coordinate `peer` on it. */
planrt_status planrt_send(planrt_mesh *mesh, int axis, int64_t peer, const float *buf, int64_t count);
planrt_status planrt_recv(planrt_mesh *mesh, int axis, int64_t peer, float *buf, int64_t count);
/* planrt_send started (MPI_Isend): done once planrt_wait returns, before which buf must not
 * be written; on a device backend the send is made at once and the request is done. */
planrt_status planrt_send_start(planrt_mesh *mesh, int axis, int64_t peer, const float *buf, int64_t count,
                                planrt_request **out);
/* Sends `count` floats to coordinate `to` on `axis` while receiving `recv_count` into
 * recv from coordinate `from` (MPI_Sendrecv): neighbours exchanging at once do not wait
 * for each other. Counts as a send of count floats. */
planrt_status planrt_sendrecv(planrt_mesh *mesh, int axis, int64_t to, const float *send, int64_t count, int64_t from,
                              float *recv, int64_t recv_count);
/* This rank's index among the ranks that differ only along the axes in `mask`. */
int64_t planrt_mesh_group_rank(const planrt_mesh *mesh, unsigned mask);
int64_t planrt_mesh_group_size(const planrt_mesh *mesh, unsigned mask);
/* A barrier that also agrees on a flag: *flag becomes the maximum over all ranks.
 * Control traffic, not counted in planrt_comm_bytes. A null mesh is one rank. */
planrt_status planrt_mesh_agree(planrt_mesh *mesh, float *flag);
/* "rank 0 = pid P on HOST, rank 1 = …": which process is which rank, for the
 * launcher's messages (which name a dead process by its pid). */
void planrt_mesh_describe(const planrt_mesh *mesh, char *buf, size_t size);
/* The host rank `rank` runs on: its index among the mesh's hosts, in the order of their
 * first ranks (a host: one host name, boot and pid namespace), and its name in `name`;
 * -1 without a mesh. */
int planrt_mesh_host(const planrt_mesh *mesh, int rank, char *name, size_t size);
/* The ranks on hosts other than this rank's, by host ("plh2: rank 2, 3"), into buf;
 * returns how many other hosts there are. */
int planrt_mesh_remote_peers(const planrt_mesh *mesh, char *buf, size_t size);
/* The first peer rank on this host whose process is gone (described into buf), or -1.
 * Peers on other hosts are not checked: a collective's timeout catches them. */
int planrt_mesh_dead_peer(const planrt_mesh *mesh, char *buf, size_t size);
/* The first peer rank on this host whose process is stopped (SIGSTOP, a debugger), or -1. */
int planrt_mesh_stopped_peer(const planrt_mesh *mesh, char *buf, size_t size);
/* What a collective that failed or stalled most likely waits for, into buf: a stopped or
 * dead peer on this host, else the ranks of the other hosts ("no peer on this host died;
 * a host of the job died or lost its link, or a rank there hung (plh2: rank 2, 3)");
 * returns 0 when there is nothing to name (one host, every peer alive). */
int planrt_mesh_lost_peer(const planrt_mesh *mesh, char *buf, size_t size);
/* Aborts every rank of the job (after a failure on this one that its peers cannot see). */
void planrt_mesh_abort(planrt_mesh *mesh, int code);
/* Bytes this rank has sent with `kind` over the group `mask`, under the ring model. */
uint64_t planrt_comm_bytes(const planrt_mesh *mesh, planrt_collective kind, unsigned mask);
/* Bytes this rank has sent with `kind` over every group. */
uint64_t planrt_comm_bytes_total(const planrt_mesh *mesh, planrt_collective kind);
/* Finalises MPI if planrt_mesh_init initialised it. */
void planrt_mesh_finalize(planrt_mesh *mesh);

/* Collectives on device memory: libplanrt_cuda installs NCCL here. Each member gets the
 * group's MPI communicator (an MPI_Comm, by address; the rank and peer numbers are its)
 * and returns 0 when it did the transfer, 1 when it declines (host memory, ranks that
 * share a GPU): MPI does it then, as without a table. A member that fails exits the
 * process after naming the rank and the cause. Bytes are counted as for MPI. */
typedef struct {
  const char *name;
  int (*all_reduce)(const void *comm, float *buf, int64_t count, int max);
  int (*all_gather)(const void *comm, const float *send, int64_t count, float *recv);
  int (*reduce_scatter)(const void *comm, const float *send, int64_t count, float *recv);
  int (*send)(const void *comm, int64_t peer, const float *buf, int64_t count);
  int (*recv)(const void *comm, int64_t peer, float *buf, int64_t count);
  int (*sendrecv)(const void *comm, int64_t to, const float *send, int64_t count, int64_t from, float *recv,
                  int64_t recv_count);
  /* Non-blocking all-reduce (planrt_all_reduce_start): queued behind the work the device
   * has been given so far, on a stream of its own; *handle is what wait completes (the
   * device's later work then sees the result). Declining (1) leaves it to MPI. */
  int (*all_reduce_start)(const void *comm, float *buf, int64_t count, int max, void **handle);
  void (*wait)(void *handle);
  int (*test)(void *handle); /* 1 when done; null: never known before wait */
  /* Non-blocking slice of an all-gather (planrt_all_gather_start), as all_reduce_start. */
  int (*all_gather_start)(const void *comm, const float *send, int64_t count, float *recv, int64_t begin, int64_t size,
                          void **handle);
  /* Non-blocking slice of a reduce-scatter (planrt_reduce_scatter_start), likewise. */
  int (*reduce_scatter_start)(const void *comm, const float *send, int64_t count, float *recv, int64_t begin,
                              int64_t size, void **handle);
} planrt_collectives;
void planrt_set_collectives(const planrt_collectives *collectives);

PLANRT_C_END

PLANRT_C_BEGIN
/* ---- Training log: one JSON object per line (step, loss, lr, grad_norm,
 * tokens_per_s, comm_bytes by collective, mem_peak_bytes: the most bytes the
 * generated code held during the step, planrt_mem_peak, and mem_device_peak_bytes:
 * the most bytes the process held on its device so far, planrt_mem_total_peak),
 * appended and flushed every step. */
typedef struct planrt_log planrt_log;
planrt_status planrt_log_open(const char *path, planrt_log **out);
planrt_status planrt_log_step(planrt_log *log, uint64_t step, double loss, double lr, double grad_norm,
                              double tokens_per_s, const uint64_t comm_bytes[4], uint64_t mem_peak_bytes,
                              uint64_t mem_device_peak_bytes);
/* fp16 loss scaling: {"step": s, "loss_scale": x, "skipped": true|false}. */
planrt_status planrt_log_loss_scale(planrt_log *log, uint64_t step, double scale, int skipped);
void planrt_log_close(planrt_log *log);

/* NaN or Inf in `values` is PLANRT_ERR_ARG with a message naming the step, the
 * tensor and the first bad index, so training stops before a checkpoint is written. */
planrt_status planrt_check_finite(const float *values, int64_t count, uint64_t step, const char *what);

/* ---- Checkpoint directories: DIR/step-NNNNNNNN.safetensors, written atomically;
 * only the newest `keep` are kept (0 keeps all). */
planrt_status planrt_ckpt_save(const char *dir, uint64_t step, int keep, const planrt_tensor *tensors, size_t count,
                               const char *const *metadata, size_t metadata_pairs);
/* The newest checkpoint's path into buf (and its step), or PLANRT_ERR_IO if none. */
planrt_status planrt_ckpt_latest(const char *dir, char *buf, size_t size, uint64_t *step);

/* ---- Training executables. planc emits, for a `train` plan, entry points on
 * flat f32 buffers (bare pointers, static shapes: tokens and targets are [micro,
 * seq] int32; parameters, gradients and Adam moments lie in the order and at the
 * offsets of the manifest's parameter table), the step program `planc_step` (the
 * `sched` dialect lowered to calls of the planrt_sched_* functions below), the
 * manifest (JSON, see docs/EXECUTABLES.md) and a `main` that calls
 * planrt_train_main. */
/* The step state, 8 floats (the sched buffer "state", kept in checkpoints):
 * [0] gradient norm before clipping, [1] learning rate (written by update), [2] the
 * fp16 loss scale and [3] the steps since it last changed (read by grad and update,
 * updated by update), [4] 1 when update skipped the step (fp16 overflow), else 0,
 * [5] the updates applied so far with fp16 (Adam's step count, which skipped steps do
 * not advance), [6] the global sum of squared gradients (read by update), [7] the
 * step's loss (grad adds each micro-batch's loss / accumulation). */
/* G += dloss/dP / (accumulation × data-parallel ranks) (times state[2] with fp16
 * loss scaling); *loss += loss / accumulation. */
typedef void (*planrt_grad_fn)(float *params, float *grads, const int32_t *tokens, const int32_t *targets, float *loss,
                               const float *state);
/* state[6] = the sum of squares of this rank's gradient pieces g0 (group 0, the
 * decayed matrices) and g1 (group 1). */
typedef void (*planrt_sumsq_fn)(float *g0, float *g1, float *state);
/* The optimizer step `step` (0-based) on this rank's pieces of each optimizer group,
 * in place: clipping by the global norm sqrt(state[6]), the schedule, AdamW. */
typedef void (*planrt_update_fn)(float *p0, float *p1, float *g0, float *g1, float *m0, float *m1, float *v0, float *v1,
                                 int64_t step, float *state);
/* An offloaded optimizer's update of one chunk of one optimizer group (the plan's
 * `offload { optimizer = nvme(…) }`): AdamW in place on `p`, `m`, `v` (the chunk's
 * float count is the plan's buffer / 4; the runtime zero-pads the last chunk's
 * gradient). It reads `state` as planrt_update_fn does and writes what that would write
 * there to `next` instead, so every chunk of a step sees the same loss scale. */
typedef void (*planrt_update_chunk_fn)(float *p, float *g, float *m, float *v, int64_t step, const float *state,
                                       float *next);
/* A pipeline stage's entry points (pipeline parallelism): its forward pass, from the
 * tokens (first stage) or the previous stage's activation `in`, writing the activation it
 * hands on (or, on the last stage, the loss) to `out`; and its backward pass, the forward
 * again from `in` then G += dloss/dP / (accumulation × data-parallel ranks) from the
 * gradient of its output `cotangent` (the last stage: from its loss, scaled by state[2]
 * with fp16, adding loss / accumulation to *loss), with dinput = the gradient of `in`.
 * Under `keep: activations` the forward pass also writes what the backward pass needs to
 * `saved` (the manifest's `saved` floats), and the backward pass starts from it instead
 * of computing the forward again. Pointers a stage does not use may be anything. */
typedef void (*planrt_stage_fwd_fn)(float *params, const int32_t *tokens, const int32_t *targets, const float *in,
                                    float *out, float *saved);
typedef void (*planrt_stage_bwd_fn)(float *params, float *grads, const int32_t *tokens, const int32_t *targets,
                                    const float *in, const float *cotangent, float *dinput, float *loss,
                                    const float *state, const float *saved, float *wsaved);
/* The zero-bubble schedule (`schedule: zb`) splits a stage's backward pass in two: the
 * backward entry point makes the input's gradient (and the loss, and the parameters'
 * gradients made beside them) and writes what the rest needs to `wsaved` (the manifest's
 * `wsaved` floats); this weight pass adds the remaining gradients to G from it, later. */
typedef void (*planrt_stage_wgrad_fn)(float *params, float *grads, const int32_t *tokens, const int32_t *targets,
                                      const float *state, const float *wsaved);
/* Entry points per stage in a pipeline executable's table: forward, backward, update,
 * an offloaded optimizer's chunk updates of groups 0 and 1, and the zero-bubble weight
 * pass (the last three NULL where the plan has none). The update and the chunk updates
 * are a pipeline rank's, under its first stage's entries: under the interleaved schedule
 * (rank r holds stages r, r + p, …) NULL for every stage from p on. */
#define PLANRT_STAGE_ENTRIES 6
/* Forward only: *loss = mean cross-entropy of one micro-batch. */
typedef void (*planrt_eval_fn)(float *params, const int32_t *tokens, const int32_t *targets, float *loss);

PLANRT_C_END

PLANRT_C_BEGIN
/* ---- The generated code's buffers. planc lowers memref.alloc and memref.dealloc to
 * MLIR's generic allocation functions, defined by the runtime (runtime/lib/memory.cpp)
 * on malloc; it counts the bytes live and their peak: a step's activations and
 * temporaries. Buffers the runtime holds itself (parameters, gradients, optimizer
 * state, the step's flat buffers) are not counted. */
void *_mlir_memref_to_llvm_alloc(size_t size);
void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t size);
void _mlir_memref_to_llvm_free(void *ptr);

/* Where buffers live: every buffer the generated code reads or writes — its own
 * (above), and the ones the runtime hands it (parameters, gradients, optimizer
 * state, the step's buffers, tokens, the loss) — comes from the backend's alloc.
 * The CPU backend (the default) is the C heap; libplanrt_cuda installs CUDA
 * managed memory (planrt_cuda_start), which the host reads and writes through the
 * same pointers. alloc returns `bytes` uninitialised bytes at a 256-byte boundary,
 * or NULL; free takes NULL. */
typedef struct {
  const char *name;
  void *(*alloc)(size_t bytes);
  void (*free)(void *ptr);
  /* The bytes alloc can still hand out (a GPU's free memory), or 0 when unknown;
   * NULL for a backend that cannot say. */
  size_t (*available)(void);
  /* Sets `count` floats at ptr (memory from alloc) to value where the memory is
   * (a kernel on the device), returning when done; NULL: the host writes them. */
  void (*fill)(void *ptr, float value, size_t count);
  /* Host synchronisations with the device and kernel launches (library calls counted
   * once) since the start, which the training log reports per step; NULL for a backend
   * with neither. */
  void (*counters)(uint64_t *host_syncs, uint64_t *launches);
  /* to[i] += from[i] for i < count, where the memory is (both from alloc), returning when
   * done; NULL: the host adds (and the runtime keeps its temporaries on the host). */
  void (*add)(float *to, const float *from, size_t count);
  /* The step program starts (1), has ended (0), or has failed (-1: what it left is not
   * checked, so that its own error is the one reported); NULL for a backend that does not
   * care. cuda-host's emulated device (planrt_emu_start) audits the host's accesses to
   * its memory in between. */
  void (*step)(int phase);
  /* Host accesses to device memory during the step programs since the start (each
   * stretch of host code that touched it, counted once); NULL for a backend that cannot
   * see them (CUDA's managed memory). */
  uint64_t (*host_touches)(void);
  /* As fill, and as a host-to-device copy of `bytes` from host memory `src` to `dst`
   * (memory from alloc), queued behind the device's work without waiting: the host
   * must wait for the device (a step program's planrt_cuda_sync) before it touches
   * them; src may be reused at once, unless it is host_alloc's memory (a copy the
   * device makes as it runs): the host leaves that alone until its next wait (a
   * copy_out). NULL: fill, and memcpy on the host. */
  void (*fill_async)(void *ptr, float value, size_t count);
  void (*copy_in)(void *dst, const void *src, size_t bytes);
  /* p[i] = p[i] / divisor for i < count (memory from alloc), where the memory is,
   * returning when done (the runtime's host code may read it next); NULL: the host
   * divides. */
  void (*divide)(float *p, float divisor, size_t count);
  /* *out = (float) the sum, in double, of x*x over the `n` ranges of floats at
   * starts[i] (counts[i] of them; memory from alloc; the two arrays on the host), in
   * range order, returning when done; NULL: the host sums. */
  void (*sumsq)(const float *const *starts, const int64_t *counts, int64_t n, float *out);
  /* `bytes` of the backend's memory at src to host memory at dst, after the device's
   * work queued before it, returning when done (a wait). A backend with copy_out is a
   * device whose memory the host's file I/O does not reach: the runtime moves what it
   * reads and writes in files through host memory (host_alloc's) and copy_in/copy_out.
   * NULL: the host's memory, memcpy. */
  void (*copy_out)(void *dst, const void *src, size_t bytes);
  /* Host memory that the device copies to and from at full speed (CUDA's page-locked
   * memory): `bytes` at a 4096-byte boundary, or NULL; and its release (NULL taken).
   * NULL: the C heap. Not counted by planrt_mem_*: it is not the device's. */
  void *(*host_alloc)(size_t bytes);
  void (*host_free)(void *ptr);
  /* Waits for the device's queued work (a step program's planrt_cuda_sync); NULL: there
   * is none to wait for. */
  void (*sync)(void);
} planrt_backend;
void planrt_set_backend(const planrt_backend *backend);
const planrt_backend *planrt_get_backend(void);
uint64_t planrt_mem_live(void);
uint64_t planrt_mem_peak(void);
/* Starts a new peak from the bytes live now. */
void planrt_mem_reset_peak(void);
/* The buffers the runtime holds for the generated code (parameters, gradients,
 * optimizer state, the step's buffers, tokens): `bytes` on the backend at a 256-byte
 * boundary (NULL if they cannot be had), counted; planrt_mem_free takes NULL. */
void *planrt_mem_alloc(size_t bytes);
/* `count` floats at ptr (the backend's memory) set to value by the backend's fill. */
void planrt_mem_fill(void *ptr, float value, size_t count);
/* planrt_mem_fill queued without waiting (the backend's fill_async), for the step
 * program: its own waits (planrt_cuda_sync), and the emulated device's audit, cover
 * what the host reads next. */
void planrt_mem_fill_async(void *ptr, float value, size_t count);
/* `bytes` of host memory at src to the backend's memory at dst, by the backend's
 * copy_in (queued; src reusable at once). */
void planrt_mem_copy_in(void *dst, const void *src, size_t bytes);
/* `bytes` of the backend's memory at src to host memory at dst by the backend's copy_out
 * (after the device's queued work); whether the backend has one (its memory is a
 * device's, apart from the host's: planrt_backend.copy_out). */
void planrt_mem_copy_out(void *dst, const void *src, size_t bytes);
int planrt_mem_is_device(void);
/* The backend's host_alloc: host memory for its copies, given back with the same
 * backend's host_free (std::free where it has none). */
void *planrt_host_alloc(size_t bytes);
/* The backend's sync: returns once the device's queued work is done. */
void planrt_mem_sync(void);
/* p[i] = p[i] / divisor for i < count (the backend's memory) by the backend's divide. */
void planrt_mem_divide(float *p, float divisor, size_t count);
/* *out = the sum of squares over the ranges (the backend's memory) by the backend's sumsq. */
void planrt_mem_sumsq(const float *const *starts, const int64_t *counts, int64_t n, float *out);
/* to[i] += from[i] for i < count (the backend's memory) by the backend's add. */
void planrt_mem_add(float *to, const float *from, size_t count);
void planrt_mem_free(void *ptr);
uint64_t planrt_mem_held(void);
/* Memory held by parts (ZeRO-3's gathered parameters): `bytes` of address space on the
 * host backend, zeroed, its pages taken only as they are written and not counted;
 * NULL on any other backend (the caller then holds the whole with planrt_mem_alloc).
 * planrt_mem_commit counts `bytes` at `ptr` as held when something is about to write
 * them, and maps their pages at once (in one call, rather than a fault per page as they
 * are written); planrt_mem_decommit counts them free again and gives their pages back
 * (those wholly inside, which read as zero after); planrt_mem_unreserve unmaps it all. */
void *planrt_mem_reserve(size_t bytes);
void planrt_mem_commit(void *ptr, size_t bytes);
void planrt_mem_decommit(void *ptr, size_t bytes);
void planrt_mem_unreserve(void *ptr, size_t bytes);
/* The most bytes held at once since the process started, the runtime's and the
 * generated code's together: the memory the executable used on its device, which
 * `planc explain`'s per-device total predicts. */
uint64_t planrt_mem_total_peak(void);

/* The executable's arena (planc's plan-memory-plan, on the cuda targets): the step
 * program's buffers at the offsets of the manifest's schedule.buffers in its first
 * `state_bytes`, then a step region of `step_bytes` that every step function's own
 * buffers are views of, reserved at once (the state part zeroed; counted as held) before the first
 * step. Returns its base, or NULL with planrt_last_error set: more bytes than the
 * backend has available (both named), or none to be had. One arena per process;
 * planrt_arena_release frees it. */
void *planrt_arena_reserve(uint64_t state_bytes, uint64_t step_bytes);
void planrt_arena_release(void);
PLANRT_C_END

PLANRT_C_BEGIN
/* ---- Generation executables. planc emits, for a `generate` declaration, two
 * decoding entry points on flat buffers (docs/GENERATE.md): the logits [n, vocab]
 * of n positions offset … offset + n - 1 of `tokens` (n = the manifest's chunk for
 * planc_prefill, 1 for planc_step), their keys and values stored in the cache (all
 * layers, cache_floats floats) in place; parameters at the manifest's offsets.
 * The entries of a retrieval graph's model(...) embedder and re-ranker have the
 * same signature; the embedder's writes hidden states [n, width] instead. */
typedef void (*planrt_decode_fn)(float *params, const int32_t *tokens, int64_t offset, float *cache, float *logits);
/* The compiled models a retrieval graph uses: for `embed = model(...)` and
 * `rerank = model(...)`, a manifest (format planc-model-1, docs/GENERATE.md) and
 * an entry each; NULL where the graph uses none. */
typedef struct {
  const char *embed_manifest;
  planrt_decode_fn embed;
  const char *rerank_manifest;
  planrt_decode_fn rerank;
} planrt_retrieval_models;
/* Retrieval for a grounded prompt (planrt_retrieval_ground in libplanrt_retrieval):
 * 0 on success with *prompt and *report_json malloc'd; else non-zero and
 * planrt_last_error() set. */
typedef int (*planrt_ground_fn)(const char *retrieval_manifest, const planrt_retrieval_models *models,
                                const char *question, const char *instructions, int64_t k, char **prompt,
                                char **report_json);
/* The step context that planc_step's calls act on (buffers, mesh, data). A call
 * after a failed one does nothing; the driver reports the first failure. */
typedef struct planrt_step_ctx planrt_step_ctx;
typedef void (*planrt_step_fn)(planrt_step_ctx *ctx, int64_t step);
typedef void (*planrt_program_fn)(planrt_step_ctx *ctx);
/* An evaluation line of the training log, {"step": step, "val_loss": x} (null if
 * not finite), with "val_accuracy": a (top-1, in [0, 1]) unless val_accuracy is NaN,
 * flushed; `step` is the 0-based step after which it was measured. */
planrt_status planrt_log_eval(planrt_log *log, uint64_t step, double val_loss, double val_accuracy);
/* One line of JSON written as given (an object the caller formatted), flushed. */
planrt_status planrt_log_json(planrt_log *log, const char *line);
/* A federated round's line, {"round": r, "loss": x, "val_loss": y (only if given: not
 * NaN), "clients": [the sampled client indices], "comm_bytes": {…}}, flushed. */
planrt_status planrt_log_round(planrt_log *log, uint64_t round, double loss, double val_loss, const int64_t *clients,
                               size_t nclients, const uint64_t comm[4]);
/* The entry points generated code calls (the step program's sched ops, the bucket
 * hooks, the step arena, the drivers main calls), each with its contract:
 * planrt_abi.def (PLANRT_ABI_STEP). */
#define PLANRT_ABI_STEP(ret, name, params) ret name params;
#include "planrt_abi.def"

PLANRT_C_END

#endif /* PLANRT_H */

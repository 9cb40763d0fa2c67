/* The manifests' schema: what planc writes into an executable and the runtime reads
 * back (docs/EXECUTABLES.md). One header for both sides: planc's passes write these
 * keys (plan-train-abi, plan-schedule, plan-memory-plan) and the runtime's training
 * driver reads them (runtime/lib/train_manifest.cpp), so a renamed key or a new format
 * version changes both or fails to compile. C++ only: the manifest is no part of the
 * C ABI. */
#ifndef PLANRT_MANIFEST_H
#define PLANRT_MANIFEST_H

#ifdef __cplusplus

#include <cstdint>

namespace planrt::manifest {

/* An offloaded optimizer's chunk (the plan's `nvme(DIR, buffer: B)`, the manifest's
 * offload.optimizer.buffer): B bytes of each moment per record, a multiple of kAlign
 * (direct I/O's alignment of buffers, offsets and lengths) up to kMaxBuffer (a record,
 * both moments' chunks, is one read or write, which Linux caps below 2 GiB). */
namespace offload {
inline constexpr int64_t kAlign = 4096;
inline constexpr int64_t kDefaultBuffer = int64_t(4) << 20;
inline constexpr int64_t kMaxBuffer = int64_t(256) << 20;
} // namespace offload

/* Whether mesh axis i (of `axes`, sizes row-major, the last fastest) keeps each group of
 * ranks that differ only in its coordinate inside one node, ranks placed node-major,
 * `perNode` consecutive ranks a node (the manifest's mesh.per_node): its size is 1, or
 * its span (its size times the sizes after it) divides perNode. planc explain's links
 * and the executable's host map both follow it. */
inline bool axisWithinNode(int64_t perNode, const int64_t *sizes, size_t axes, size_t i) {
  int64_t span = 1;
  for (size_t a = i; a < axes; ++a)
    span *= sizes[a];
  return sizes[i] == 1 || (perNode > 0 && span <= perNode && perNode % span == 0);
}

/* Each executable kind's manifest format: its "format" field. A runtime reads its own
 * version only. */
namespace format {
inline constexpr char kTrain[] = "planc-train-1";
inline constexpr char kGenerate[] = "planc-generate-1";
inline constexpr char kRetrieval[] = "planc-retrieval-1";
inline constexpr char kModel[] = "planc-model-1";
} // namespace format

/* The training manifest's keys, at every level (top, mesh, train, checkpoint,
 * loss_scale, pipeline, stages, params and their split, schedule and its buffers,
 * memory, offload). */
namespace key {
inline constexpr char accumulation[] = "accumulation";
inline constexpr char activation[] = "activation";
inline constexpr char adapt[] = "adapt";
inline constexpr char adapts[] = "adapts";
inline constexpr char alignment[] = "alignment";
inline constexpr char alpha[] = "alpha";
inline constexpr char arenas[] = "arenas";
inline constexpr char axes[] = "axes";
inline constexpr char axis[] = "axis";
inline constexpr char base[] = "base";
inline constexpr char base_sha256[] = "base_sha256";
inline constexpr char batch[] = "batch";
inline constexpr char batchnorm[] = "batchnorm";
inline constexpr char beta1[] = "beta1";
inline constexpr char beta2[] = "beta2";
inline constexpr char block[] = "block";
inline constexpr char blocks[] = "blocks";
inline constexpr char buffer[] = "buffer";
inline constexpr char buffers[] = "buffers";
inline constexpr char channels[] = "channels";
inline constexpr char checkpoint[] = "checkpoint";
inline constexpr char chunks[] = "chunks";
inline constexpr char classes[] = "classes";
inline constexpr char clients[] = "clients";
inline constexpr char clip[] = "clip";
inline constexpr char count[] = "count";
inline constexpr char crop[] = "crop";
inline constexpr char data[] = "data";
inline constexpr char data_parallel[] = "data_parallel";
inline constexpr char data_text[] = "data_text";
inline constexpr char dim[] = "dim";
inline constexpr char dir[] = "dir";
inline constexpr char double_quant[] = "double_quant";
inline constexpr char dp_clip[] = "dp_clip";
inline constexpr char dp_noise[] = "dp_noise";
inline constexpr char eps[] = "eps";
inline constexpr char eval_batches[] = "eval_batches";
inline constexpr char eval_every[] = "eval_every";
inline constexpr char every[] = "every";
inline constexpr char federated[] = "federated";
inline constexpr char flip[] = "flip";
inline constexpr char floats[] = "floats";
inline constexpr char format[] = "format";
inline constexpr char fraction[] = "fraction";
inline constexpr char frozen[] = "frozen";
inline constexpr char frozen_floats[] = "frozen_floats";
inline constexpr char grad_grads[] = "grad_grads";
inline constexpr char grad_params[] = "grad_params";
inline constexpr char groups[] = "groups";
inline constexpr char height[] = "height";
inline constexpr char images[] = "images";
inline constexpr char index[] = "index";
inline constexpr char init[] = "init";
inline constexpr char keep[] = "keep";
inline constexpr char kind[] = "kind";
inline constexpr char lifetime[] = "lifetime";
inline constexpr char local_steps[] = "local_steps";
inline constexpr char loss_scale[] = "loss_scale";
inline constexpr char lr[] = "lr";
inline constexpr char master[] = "master";
inline constexpr char mean[] = "mean";
inline constexpr char memory[] = "memory";
inline constexpr char mesh[] = "mesh";
inline constexpr char micro[] = "micro";
inline constexpr char min_lr[] = "min_lr";
inline constexpr char model[] = "model";
inline constexpr char momentum[] = "momentum";
inline constexpr char name[] = "name";
inline constexpr char nf4[] = "nf4";
inline constexpr char num_floats[] = "num_floats";
inline constexpr char offload[] = "offload";
inline constexpr char offset[] = "offset";
inline constexpr char optimizer[] = "optimizer";
inline constexpr char params[] = "params";
inline constexpr char per_node[] = "per_node";
inline constexpr char parts[] = "parts";
inline constexpr char path[] = "path";
inline constexpr char per_client[] = "per_client";
inline constexpr char pipeline[] = "pipeline";
inline constexpr char plan[] = "plan";
inline constexpr char precision[] = "precision";
inline constexpr char prox[] = "prox";
inline constexpr char qkv[] = "qkv";
inline constexpr char rank[] = "rank";
inline constexpr char replica[] = "replica";
inline constexpr char rounds[] = "rounds";
inline constexpr char running[] = "running";
inline constexpr char sampled[] = "sampled";
inline constexpr char saved[] = "saved";
inline constexpr char schedule[] = "schedule";
inline constexpr char secure[] = "secure";
inline constexpr char seed[] = "seed";
inline constexpr char seq[] = "seq";
inline constexpr char sequence_parallel[] = "sequence_parallel";
inline constexpr char server[] = "server";
inline constexpr char shape[] = "shape";
inline constexpr char sharded[] = "sharded";
inline constexpr char size[] = "size";
inline constexpr char sizes[] = "sizes";
inline constexpr char split[] = "split";
inline constexpr char stage[] = "stage";
inline constexpr char stage_state_bytes[] = "stage_state_bytes";
inline constexpr char stage_step_bytes[] = "stage_step_bytes";
inline constexpr char stages[] = "stages";
inline constexpr char state_bytes[] = "state_bytes";
inline constexpr char std[] = "std";
inline constexpr char step_bytes[] = "step_bytes";
inline constexpr char steps[] = "steps";
inline constexpr char target[] = "target";
inline constexpr char targets[] = "targets";
inline constexpr char tensor[] = "tensor";
inline constexpr char tensor_parallel[] = "tensor_parallel";
inline constexpr char tokenizer[] = "tokenizer";
inline constexpr char train[] = "train";
inline constexpr char val[] = "val";
inline constexpr char val_format[] = "val_format";
inline constexpr char val_text[] = "val_text";
inline constexpr char vocab[] = "vocab";
inline constexpr char warmup[] = "warmup";
inline constexpr char weight_decay[] = "weight_decay";
inline constexpr char weighting[] = "weighting";
inline constexpr char width[] = "width";
inline constexpr char wsaved[] = "wsaved";
inline constexpr char zero[] = "zero";
} // namespace key

} // namespace planrt::manifest

#endif /* __cplusplus */

#endif /* PLANRT_MANIFEST_H */

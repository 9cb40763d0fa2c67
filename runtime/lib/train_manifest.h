// Internal: the manifest of a training executable (planc-train-1) as the training
// driver reads it: the parameters' flat layout, the mesh, the step program's buffers,
// the run's settings and the arena, all checked before anything runs.
#ifndef PLANRT_LIB_TRAIN_MANIFEST_H
#define PLANRT_LIB_TRAIN_MANIFEST_H

#include "status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace planrt::train {

/// Bounds that keep s × batch, offsets and counts far from overflow.
constexpr int64_t kMaxSteps = int64_t(1) << 40;
constexpr int64_t kMaxFloats = int64_t(1) << 40;
constexpr int64_t kMaxDim = int64_t(1) << 31;

struct Param {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0, count = 0;
  std::string init; ///< "normal", "zeros" or "ones"
  double std = 0;
  /// Tensor parallelism: dim `splitDim` of the full tensor is cut into `parts`, block
  /// by block (`blocks`: full extents, q/k/v of a packed projection), and this rank
  /// holds piece c of each block; -1 when the parameter is whole on every rank.
  int64_t splitDim = -1, parts = 1;
  std::vector<int64_t> blocks;
  /// The whole tensor: its shape, and where it lies in a buffer of whole parameters
  /// (checkpoints, --init, --export are whole). Without tensor parallelism, the same as
  /// shape and offset.
  std::vector<int64_t> fullShape;
  int64_t fullOffset = 0, fullCount = 0;
  /// Pipeline parallelism: the parameter's position in the whole model (its random
  /// stream), and whether it is a copy of one an earlier stage owns (a tied embedding).
  int64_t index = -1;
  bool replica = false;
  /// A LoRA adapter: the path of the weight it adapts (`h.0.attn.c_attn.weight`); for the b
  /// of a fused q, k, v projection, the widths of q, k and v in its columns.
  std::string adapts;
  std::vector<int64_t> qkv;
  /// A QLoRA base matrix (frozen): stored as NF4 in `floats` floats at `offset`
  /// (planrt_nf4.h), in blocks of `block`, double-quantized if `dbl`; block 0: as floats.
  struct {
    int64_t block = 0;
    bool dbl = false;
    int64_t floats = 0;
  } nf4;
  /// The floats it takes in the params buffer.
  int64_t stored() const { return nf4.block ? nf4.floats : count; }
};

/// A buffer of the step program's table.
struct BufferSpec {
  std::string name, lifetime;
  int64_t floats = 0;
  int64_t stage = -1;  ///< pipeline parallelism: the stage whose ranks hold it, or -1 (all)
  int64_t offset = -1; ///< its bytes' offset in the executable's arena, or -1 without one
};

struct Manifest {
  std::string plan, model;
  int64_t numFloats = 0;
  std::vector<Param> params;
  /// A fine-tuning plan's frozen base (`adapt`): in the params buffer after numFloats
  /// (offsets from 0 of that buffer), never written by the step; whole, one after
  /// another in frozenFullFloats. Empty without adapters.
  std::vector<Param> frozen;
  int64_t frozenFloats = 0, frozenFullFloats = 0;
  /// `adapt = lora(…)`: rank 0 without.
  struct {
    int64_t rank = 0;
    double alpha = 0;
    std::vector<std::string> targets;
  } adapt;
  int64_t groupBegin[2] = {0, 0}, groupEnd[2] = {0, 0};
  std::vector<std::string> axes;
  std::vector<int64_t> sizes;
  int64_t perNode = 0; ///< mesh.per_node: the devices a node of the mesh holds (0: not given)
  unsigned dataMask = 0;
  int64_t zero = 0;
  std::vector<BufferSpec> buffers;
  std::string master;   ///< the buffer holding the f32 parameters the update writes
  bool sharded = false; ///< master and moments hold this rank's pieces only
  int64_t batch = 0, micro = 0, seq = 0, accumulation = 0, dataParallel = 0, steps = 0, vocab = 0;
  int64_t tensorParallel = 1;
  int tensorAxis = -1;    ///< the mesh axis of tensor parallelism, or -1
  int64_t fullFloats = 0; ///< floats of the whole parameters (Param::fullOffset)
  /// Pipeline parallelism: the ranks on the pipeline axis (1 without), the axis, this
  /// rank's coordinate on it (`stage`: its parameters, of the stages it holds, are what
  /// `params` lists), and every rank's parameter table.
  int64_t pipeline = 1, stage = 0;
  int pipelineAxis = -1;
  std::vector<std::vector<Param>> stageParams;
  std::vector<int64_t> stageFullFloats;        ///< each rank's floats of whole parameters
  /// A fine-tuning plan under a pipeline: every rank's frozen base, and its floats whole.
  std::vector<std::vector<Param>> stageFrozen;
  std::vector<int64_t> stageFrozenFullFloats;
  /// The pipeline stages in all: `pipeline` × the stages a rank holds (several under the
  /// interleaved schedule: rank r of p holds stages r, r + p, …).
  int64_t stages = 1;
  /// A pipeline stage this rank holds: its index among all stages, the floats it
  /// receives from the previous stage and hands on to the next, and what its passes keep
  /// (`keep: activations`: its forward pass for its backward pass per micro-batch; the
  /// zero-bubble schedule: its input pass for its weight pass).
  struct Chunk {
    int64_t stage = 0, activationIn = 0, activationOut = 0, savedFloats = 0, wsavedFloats = 0;
  };
  std::vector<Chunk> chunks; ///< in stage order; empty without a pipeline
  /// A buffer of the step program by its name in the schedule: under a pipeline, the
  /// one of this rank (of `stage`: of that pipeline stage's passes).
  std::string bufferName(const std::string &name, int64_t stage = -1) const {
    return pipeline > 1 ? name + "_s" + std::to_string(stage < 0 ? this->stage : stage) : name;
  }
  /// Whether buffer `name` (of pipeline stage `stage`, -1: this rank's) is Adam's moments
  /// offloaded to files (offloadDir): not held through the run, nor in the arena.
  bool offloadedMoment(const std::string &name, int64_t stage = -1) const {
    return !offloadDir.empty() && (name == bufferName("exp_avg", stage) || name == bufferName("exp_avg_sq", stage));
  }
  uint64_t seed = 0;
  std::vector<std::string> data, val;
  /// train.images: a model over images reads `data` as image files of this shape (the
  /// targets are class labels below `classes`, the manifest's vocab) and transform.
  struct {
    std::string format; ///< "planc" or "cifar10"; empty: token data
    int64_t channels = 0, height = 0, width = 0, classes = 0;
    planrt_image_transform transform{};
    std::string valFormat;    ///< the validation files' format
    bool batchnormSync = true; ///< batchnorm = sync (else local: each rank's statistics)
    /// The batchnorm layers whose running statistics the run keeps, by index.
    struct Running {
      std::string name;
      int64_t channels = 0;
    };
    std::vector<Running> running;
    bool any() const { return !format.empty(); }
    int64_t floats() const { return channels * height * width; }
  } images;
  /// data = text(…) / val = text(…): text files tokenized with `tokenizer` at open.
  bool dataText = false, valText = false;
  std::string tokenizer;
  int64_t evalEvery = 0, evalBatches = 0;
  std::string checkpointDir;
  /// `init = checkpoint(…)`: the base parameters' path and format (planc or hf); empty:
  /// none.
  std::string initPath, initFormat;
  /// The plan's precision (fp32, bf16 or fp16): a fine-tuning plan's frozen base is
  /// rounded to it once, as it is placed (the steps read it as they would every value).
  std::string precision = "fp32";
  int64_t checkpointEvery = 0, checkpointKeep = 0;
  std::string lossScaleKind = "none"; ///< "none", "dynamic" or "static" (fp16)
  double lossScaleInit = 1;
  /// `offload { optimizer = nvme(DIR) }`: the directory the Adam moments live in, and
  /// the floats of one moment's chunk the update streams; empty: the moments are buffers.
  std::string offloadDir;
  int64_t offloadChunk = 0;
  /// `offload { params = nvme(DIR) }` (ZeRO-3): the directory the parameter shard lives
  /// in, streamed with the moments (same chunk); empty: the shard is a buffer.
  std::string paramsOffloadDir;
  /// The executable's arena (the cuda targets' memory plan): the step program's buffers
  /// at their offsets in its first stateBytes, then stepBytes of step region.
  bool arena = false;
  int64_t stateBytes = 0, stepBytes = 0;
  /// A federated plan's round (`federated`, docs/FEDERATED.md): clients 1 without.
  struct {
    std::string axisName;
    int axis = -1; ///< the mesh axis whose coordinates are the clients
    int64_t clients = 1, rounds = 0, localSteps = 0, sampled = 0;
    bool perClient = false; ///< data holds patterns whose sorted matches are the clients' files
    bool any() const { return axis >= 0; }
  } fed;
  int64_t rankStateBytes = 0, rankStepBytes = 0; ///< what this rank's pipeline stage needs of them
};

/// Parses and checks the manifest, as pipeline stage `stage` reads it;
/// PLANRT_ERR_FORMAT naming the field if malformed.
planrt_status parseManifest(const char *source, Manifest &m, int64_t stage = 0);

} // namespace planrt::train

#endif // PLANRT_LIB_TRAIN_MANIFEST_H

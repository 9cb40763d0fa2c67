// A parallel layout of a model over a mesh, and the static rules it must obey.
// One source for these rules: sema turns violations into located diagnostics, the
// cost model's layout search uses them to discard candidates.
#ifndef PLAN_LANG_LAYOUT_H
#define PLAN_LANG_LAYOUT_H

#include "plan/Lang/Program.h"

#include <set>
#include <string>
#include <vector>

namespace plan::sema {

/// The logical dims a tensor axis splits unless `shard` says otherwise (Megatron-LM:
/// column/row-parallel attention and MLP, vocab-parallel embedding).
inline const std::set<std::string> &defaultTensorDims() {
  static const std::set<std::string> dims = {"vocab", "qkv", "heads", "mlp"};
  return dims;
}

struct Layout {
  int64_t data = 1;     ///< data-parallel size (product of the data axes)
  int64_t tensor = 1;   ///< tensor-parallel size
  int64_t pipeline = 1; ///< pipeline ranks
  int64_t stages = 1;   ///< pipeline stages (pipeline × virtual stages per rank)
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  bool keepActivations = false; ///< `keep: activations` (Parallel::keepActivations)
  bool sequence = false; ///< sequence parallel over the tensor axis
  int zero = 0;
  int64_t bucketBytes = 0; ///< DDP gradient buckets (Parallel::bucketBytes); 0: one all-reduce
  /// Where the optimizer state and (ZeRO-3) the parameter shards live (Parallel's offload).
  Offload optimizerOffload, paramsOffload;
  /// The plan writes checkpoints (an offloaded optimizer's moments come back for each).
  bool checkpoints = false;
  Recompute recompute = Recompute::None;
  Precision precision = Precision::FP32;
  int64_t batch = 1, micro = 1, seq = 1;
  /// Logical dims split over the tensor axis (vocab, qkv, heads, mlp by default).
  std::set<std::string> tensorDims;
  /// Fine-tuning (`adapt`, `quantize`): LoRA adapters of `rank` on the weights in
  /// `matrices`, every parameter of the model frozen; the weights in `quantized` stored
  /// as NF4 in blocks of `nf4Block` (0: none), double-quantized if `nf4Double`. rank 0:
  /// every parameter trains.
  struct {
    int64_t rank = 0;
    std::set<std::string> matrices, quantized;
    int64_t nf4Block = 0;
    bool nf4Double = true;
  } adapt;

  /// A model over images: the images' channels, height and width (0: a model over
  /// tokens), and whether its batchnorms synchronise over the data axis (`batchnorm = sync`).
  struct {
    int64_t channels = 0, height = 0, width = 0;
    bool batchnormSync = true;
  } images;

  int64_t devices() const { return data * tensor * pipeline; }
  /// Micro-batches per optimizer step per pipeline: batch / (micro × data).
  int64_t microBatches() const { return batch / (micro * data); }
  int64_t virtualStages() const { return stages / pipeline; }
  bool splits(const std::string &dim) const { return tensor > 1 && tensorDims.count(dim); }
};

/// The layout a checked train plan asks for.
Layout layoutOf(const Train &train);

/// One broken rule, with the values involved (for messages) and, where there is
/// one, the graph op or parameter that breaks it.
struct Violation {
  enum class Kind {
    Heads,                   ///< attention heads % tensor
    KvHeads,                 ///< attention kv_heads % tensor
    Dim,                     ///< a tensor-split parameter dim % tensor
    Sequence,                ///< seq % tensor under sequence parallelism
    StagesUneven,            ///< stages % pipeline
    StagesNeedInterleaved,   ///< stages != pipeline without an interleaved schedule
    InterleavedTooFewStages, ///< interleaved with fewer than 2 stages per rank
    LayersFewerThanStages,
    MicroBatchesFewerThanStages,
    InterleavedMicroBatches, ///< interleaved needs micro-batches % pipeline == 0
    BatchNotDivisible,       ///< batch % (micro × data) or batch < micro × data
    DoubleSplit,             ///< a parameter would be split on two dims over the tensor axis
  };
  Kind kind;
  const GraphOp *op = nullptr;
  const Parameter *param = nullptr;
  size_t dimIndex = 0;
  int64_t value = 0;   ///< the count that does not divide (heads, dim size, layers, …)
  int64_t divisor = 0; ///< what it should divide by / exceed
};

/// Every rule of `layout` that `model` breaks (without a model, only the rules
/// about the batch). Tensor-split dims are checked once per declaring binding (a
/// block repeated twelve times breaks a rule once).
std::vector<Violation> checkLayout(const Model *model, const Layout &layout);

} // namespace plan::sema

#endif // PLAN_LANG_LAYOUT_H

// The checked program: what sema proves about a set of .plan files. This is the
// single source of truth later stages read: each model's concrete parameter list
// (path, shape, dtype, logical dims, init) and forward graph, each mesh, and each
// train / retrieval / generate plan with its derived quantities.
#ifndef PLAN_LANG_PROGRAM_H
#define PLAN_LANG_PROGRAM_H

#include "plan/Lang/AST.h"
#include "planrt_manifest.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace plan::sema {

enum class DType { F32, BF16, F16, I32 };
const char *dtypeName(DType t);

enum class Init { Normal, Zeros, Ones };
const char *initName(Init i);

/// One trainable tensor of a model.
struct Parameter {
  std::string path; ///< `h.3.attn.c_attn.weight`; the checkpoint name
  std::vector<int64_t> shape;
  DType dtype = DType::F32;
  std::vector<std::string> dims; ///< logical dim per axis: vocab, embed, qkv, heads, mlp…
  Init init = Init::Normal;
  double initStd = 0.02;           ///< for Init::Normal
  bool residualProjection = false; ///< output projection feeding a residual add
  ast::Loc loc;                    ///< the binding that created it
  int64_t numElements() const;
};

/// The forward graph's primitive operations (one `nn` op each, later).
enum class OpKind {
  Embedding,
  Attend,
  Linear,
  LayerNorm,
  RMSNorm,
  Attention,
  Gelu,
  Silu,
  Relu,
  Dropout,
  CrossEntropy,
  Positions,
  Add,
  Sub,
  Mul,
  // Vision: on images [batch, channels, height, width].
  Conv2d,
  BatchNorm,
  MaxPool,
  AvgPool,
  Flatten,
};
const char *opKindName(OpKind k);

/// The type of a value in the forward graph. Batch and sequence are symbolic, and so are
/// an image's height and width (the train plan's data gives them).
struct ValueType {
  enum class Kind { Tokens, Positions, Hidden, Scalar, Images, Labels };
  Kind kind = Kind::Hidden;
  /// Hidden: the last dimension (0: not known before the image size is, after a
  /// flatten); Images: the channels (0: the model's input, whatever its channels).
  int64_t features = 0;
  bool pooled = false; ///< Images: globally pooled, 1 × 1
  bool operator==(const ValueType &o) const {
    return kind == o.kind && features == o.features && pooled == o.pooled;
  }
  std::string str() const;
};

/// Value ids: 0 = tokens, 1 = targets, op i produces value i + 2.
constexpr int kTokensValue = 0;
constexpr int kTargetsValue = 1;
constexpr int kFirstOpValue = 2;

struct GraphOp {
  OpKind kind;
  std::string layer;         ///< the layer's path (`h.0.attn`); empty for free ops
  std::vector<int> operands; ///< value ids
  std::vector<int> params;   ///< indices into Model::params
  ValueType result;
  // Attributes, by kind.
  int64_t heads = 0, kvHeads = 0; ///< attention
  bool causal = false, rope = false;
  double ropeTheta = 10000.0;
  double eps = 0;                          ///< norms
  double momentum = 0;                     ///< batchnorm's running statistics
  int64_t kernel = 0, stride = 1, pad = 0; ///< conv2d, maxpool: the window
  double p = 0;                            ///< dropout
  int64_t inFeatures = 0, outFeatures = 0; ///< linear, embedding (rows, cols)
  int layerIndex = -1;                     ///< index within the model's repeated trunk, or -1
  ast::Loc loc;                            ///< the expression that applied it
  ast::Loc bindingLoc;                     ///< the binding that declared the layer
};

struct Model {
  std::string name;
  ast::Loc loc;
  std::vector<Parameter> params;
  std::vector<GraphOp> ops;
  int result = -1;    ///< value id of the loss
  int64_t vocab = 0;  ///< rows of the embedding applied to the tokens
  int64_t maxSeq = 0; ///< rows of the positional table (0: no limit)
  int64_t layers = 0; ///< repeated units in the trunk (pipeline stages split these)
  bool images = false; ///< a model over (images, labels), not (tokens, targets)
  int64_t classes = 0; ///< the logits' width of a model over images
  int64_t numParameters() const;
  /// Attention layers with their head counts, for divisibility checks.
  std::vector<const GraphOp *> attentions() const;
};

/// images("PATH", …) of a train plan: CIFAR-10's binary batches or planc's image files
/// (runtime/include/planrt.h, "Image data"), with the transform each sample gets.
struct ImageData {
  enum class Format { Planc, Cifar10 } format = Format::Planc;
  std::vector<std::string> files;                ///< paths or globs
  int64_t channels = 0, height = 0, width = 0;   ///< `shape:`, CIFAR-10's, or the first file's header
  std::vector<double> mean, std;                 ///< `normalize:` per channel; empty: byte / 255
  int64_t cropPad = 0;                           ///< `crop:` random crop after zero padding by this
  bool flip = false;                             ///< `flip:` random horizontal flip
  bool any() const { return !files.empty(); }
};

enum class DeviceKind { CPU, CUDA };
const char *deviceKindName(DeviceKind k);

struct MeshAxis {
  std::string name;
  int64_t size = 1;
  ast::Loc loc;
};

struct Mesh {
  std::string name;
  ast::Loc loc;
  DeviceKind kind = DeviceKind::CPU;
  int64_t perNode = 1;
  int64_t nodes = 1;
  std::vector<MeshAxis> axes;
  std::optional<int64_t> memoryBytes;      ///< per device
  std::optional<double> peakFlops;         ///< FLOP/s, per device
  std::optional<double> hbmBytesPerSecond; ///< per device
  std::map<std::string, double> links;     ///< link name → bytes/s per device
  std::optional<double> pcieBytesPerSecond; ///< host ↔ device, per device
  std::optional<int64_t> hostMemoryBytes;   ///< per node
  std::optional<double> nvmeBytesPerSecond; ///< per node, read or write
  int64_t devices() const { return perNode * nodes; }
  const MeshAxis *axis(const std::string &name) const;
  /// Whether axis i's groups (the ranks that differ in its coordinate only) each lie
  /// inside one node, ranks placed node-major (planrt::manifest::axisWithinNode).
  bool axisWithinNode(size_t i) const;
};

/// ZeroBubble: ZB-H1 (Qi et al. 2023), each backward pass split into its input-gradient
/// and weight-gradient passes, the latter filling the bubble.
enum class PipelineSchedule { GPipe, OneFOneB, Interleaved, ZeroBubble };
const char *scheduleName(PipelineSchedule s);
enum class Precision { FP32, BF16, FP16 };
const char *precisionName(Precision p);
enum class Recompute { None, Full, Selective };
const char *recomputeName(Recompute r);
enum class LossScale { None, Dynamic, Static };
enum class LRSchedule { Constant, Linear, Cosine };
enum class OptimizerKind { AdamW, SGD };
const char *lrScheduleName(LRSchedule s);

/// Where a piece of the training state lives (`offload`): on the device (None), in host
/// memory (CPU) or in files under `dir` (NVMe), streamed through `bufferBytes` chunks.
enum class OffloadTarget { None, CPU, NVMe };
const char *offloadTargetName(OffloadTarget t);
struct Offload {
  OffloadTarget target = OffloadTarget::None;
  std::string dir;          ///< NVMe: the directory, as written (relative: to the plan's)
  int64_t bufferBytes = 0;  ///< NVMe: bytes of one moment's chunk in the staging buffer
  ast::Loc loc;
  bool any() const { return target != OffloadTarget::None; }
};
/// The staging chunk of `nvme(DIR)` without `buffer:`, and the largest: the runtime's
/// (planrt_manifest.h; DeepSpeed's aio block is 1 MiB, planc streams 4 MiB of each moment
/// at a time).
constexpr int64_t kDefaultOffloadBufferBytes = planrt::manifest::offload::kDefaultBuffer;
constexpr int64_t kMaxOffloadBufferBytes = planrt::manifest::offload::kMaxBuffer;

struct Parallel {
  std::vector<std::string> dataAxes;
  int zero = 0;
  std::string tensorAxis;   ///< empty: none
  std::string pipelineAxis; ///< empty: none
  int64_t stages = 1;       ///< pipeline stages (axis size × virtual stages)
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  /// `keep: activations`: a pipeline stage keeps what its backward pass needs from its
  /// forward pass, per micro-batch in flight; `keep: inputs` (false, the default) keeps its
  /// input and computes the forward again in the backward pass.
  bool keepActivations = false;
  bool sequence = false; ///< sequence parallel over the tensor axis
  std::vector<std::string> replicate;
  /// DDP gradient buckets: at most this many bytes of gradients per all-reduce, each
  /// started as the last micro-batch's backward pass finishes its gradients; 0 = one
  /// all-reduce of the whole gradient after the backward pass. ZeRO-1: the same buckets
  /// reduce-scattered. ZeRO-3: the parameters'
  /// all-gathers in buckets of this size, all started before the forward pass, which
  /// waits for each before its first read (a prefetch). Resolved by sema:
  /// `bucket = N MiB`, `none`, or the mesh's default (defaultBucketBytes).
  int64_t bucketBytes = 0;
  /// `offload { optimizer = …  params = … }`: where the Adam moments (`optimizer`) and,
  /// under ZeRO-3, the parameter shards (`params`) live between their uses
  /// (ZeRO-Offload, ZeRO-Infinity).
  Offload optimizerOffload, paramsOffload;
  /// `batchnorm = sync` (the default, SyncBatchNorm): a model over images normalises each
  /// micro-batch by its statistics over the data axis, so every layout gives the
  /// one-process result; `local`: by each rank's own (DDP without SyncBatchNorm).
  bool batchnormSync = true;
  ast::Loc batchnormLoc;
};

/// The gradient bucket of a plan that does not set one: PyTorch DDP's 25 MiB
/// (`bucket_cap_mb`) for DDP, ZeRO-1 and ZeRO-3 (`data` ranks > 1, ZeRO 0, 1 or 3, no
/// tensor or pipeline split) on a cuda mesh; none otherwise (a cpu mesh's collectives run on the cores the backward
/// pass uses; under tensor parallelism NCCL would run two communicators at once).
int64_t defaultBucketBytes(DeviceKind kind, int64_t dataRanks, int zero, int64_t tensorRanks, int64_t pipelineRanks);

/// `federated = fedavg(…)` over `parallel { federated = AXIS }` (EXTENSIONS.md §3): each
/// coordinate of the axis is a client with its own data; a round samples clients, each
/// takes `localSteps` optimizer steps from the global model, and the server applies
/// `server` to the weighted mean of their updates.
enum class FedWeighting { Tokens, Uniform };
enum class ServerOptimizer { SGD, Adam };
struct Federated {
  std::string axis; ///< empty: not a federated plan
  ast::Loc loc;     ///< the fedavg(…) call
  int64_t clients = 0;
  int64_t rounds = 0, localSteps = 0;
  double fraction = 1.0;
  FedWeighting weighting = FedWeighting::Tokens;
  double prox = 0;     ///< FedProx's μ; 0: FedAvg
  bool secure = false; ///< pairwise masks over fixed point (Bonawitz et al. 2017)
  double dpClip = 0, dpNoise = 0; ///< dp: gaussian(clip: C, noise: σ); clip 0: no DP
  struct {
    ServerOptimizer kind = ServerOptimizer::SGD;
    double lr = 1.0, beta1 = 0.9, beta2 = 0.99, eps = 1e-3;
  } server;
  bool any() const { return !axis.empty(); }
  /// ⌈fraction × clients⌉, the clients each round samples.
  int64_t sampled() const;
};

struct Train {
  std::string name;
  ast::Loc loc;
  int model = -1;                     ///< index into Program::models
  int mesh = -1;                      ///< index into Program::meshes
  std::vector<std::string> data, val; ///< token file paths or globs
  /// A model over images: `data = images(…)` and `val = images(…)` (EXTENSIONS.md §4).
  ImageData images, valImages;
  /// data = text(…) / val = text(…): text files, tokenized at load with `tokenizer` (a
  /// Hugging Face tokenizer.json, `tokenizer = bpe(…)` or text's `tokenizer:`).
  bool dataText = false, valText = false;
  std::string tokenizer;
  int64_t batch = 0;                  ///< global sequences per optimizer step
  int64_t micro = 0;                  ///< sequences per data-parallel rank per micro-step
  int64_t seq = 0;
  int64_t dataParallel = 1; ///< product of the data axes
  int64_t tensorParallel = 1;
  int64_t pipelineParallel = 1;
  int64_t accumulation = 1; ///< batch / (micro × dataParallel)
  Parallel parallel;
  /// logical dim → mesh axis ("" = replicated), after defaults and overrides.
  std::map<std::string, std::string> shard;
  Precision precision = Precision::FP32;
  LossScale lossScale = LossScale::None;
  double staticLossScale = 0;
  Recompute recompute = Recompute::None;
  /// adamw(lr, betas, eps, weight_decay), or sgd(lr, momentum, weight_decay) (its
  /// weight decay L2 on the gradient, as torch.optim.SGD's; both on matrices only).
  struct {
    OptimizerKind kind = OptimizerKind::AdamW;
    double lr = 3e-4, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weightDecay = 0.0;
    double momentum = 0.0; ///< sgd
  } optimizer;
  struct {
    LRSchedule kind = LRSchedule::Constant;
    int64_t warmup = 0;
    double minLr = 0;
  } schedule;
  double clip = 0; ///< global gradient-norm clip; 0 = off
  int64_t steps = 0;
  int64_t seed = 1337;
  int64_t evalEvery = 0, evalBatches = 0; ///< 0 = no eval
  int64_t checkpointEvery = 0, checkpointKeep = 0;
  std::string checkpointDir;
  /// `init = checkpoint(PATH, format: …)`: the parameters loaded before step 0 (a
  /// safetensors file, a checkpoint directory's latest step, a Hugging Face model
  /// directory or its sharded index); empty path: none.
  struct {
    std::string path, format = "planc";
  } init;
  /// `adapt = lora(rank: R, alpha: A, targets: […])`: low-rank adapters on the weight
  /// matrices whose paths end with a target (`matrices`, in the model's order); every
  /// other parameter is frozen. rank 0: no adapters.
  struct {
    int64_t rank = 0;
    double alpha = 0;
    std::vector<std::string> targets, matrices;
    /// `quantize = nf4(block: B, double: D)` (QLoRA): every linear and attention
    /// weight of the base (`matrices`, in the model's order) stored as NF4 in blocks of
    /// B, its block scales quantized again if D. block 0: not quantized.
    struct {
      int64_t block = 0;
      bool dbl = true;
      std::vector<std::string> matrices;
    } quantize;
  } adapt;
  /// `data = per_client("clients/*/train.bin")`: the sorted matches, one per client.
  bool dataPerClient = false;
  Federated federated;
  /// The plan file's directory, against which relative paths resolve at run time.
  std::string baseDir;
};

enum class ChunkKind { Tokens, Sentences, Paragraphs, Semantic };
enum class EmbedKind { Hashing, Model, FastText };
enum class SearchKind { Hybrid, Vector, Keyword };
enum class Fusion { Weighted, RRF };
enum class Metric { InnerProduct, L2 };

struct Retrieval {
  std::string name;
  ast::Loc loc;
  std::vector<std::string> corpus; ///< globs
  std::string manifest;            ///< empty when `manifest: none` was written
  struct {
    ChunkKind kind = ChunkKind::Tokens;
    int64_t size = 256, overlap = 0;
    double threshold = 0.25; ///< semantic(…): the similarity under which sentences part
  } chunk;
  struct {
    EmbedKind kind = EmbedKind::Hashing;
    int64_t dim = 384; ///< fasttext(…)'s default is 100
    int model = -1;
    std::string checkpoint, pool = "mean";
    /// fasttext(…): trained on the corpus at ingest (fastText's own defaults but for
    /// epoch, min_count, bucket and threads: a store's corpus is small, so more passes
    /// over it and a smaller subword table; one thread trains deterministically).
    struct {
      std::string model = "skipgram";
      int64_t epoch = 10, minCount = 2, minn = 3, maxn = 6, bucket = 100000, threads = 1;
    } fasttext;
  } embed;
  struct {
    std::string factory = "Flat";
    Metric metric = Metric::InnerProduct;
    int64_t nprobe = 1;
    int64_t efSearch = 0, efConstruction = 0; ///< HNSW's; 0: FAISS's defaults (16, 40)
  } index;
  /// The default vector weight of hybrid search over word-level vectors, hashing(…) and
  /// fasttext(…) (keyword: the rest).
  static constexpr double kWordVectorWeight = 0.1;
  struct {
    SearchKind kind = SearchKind::Hybrid;
    /// 0.5 / 0.5 for a model embedder; hashing's and fasttext's are kWordVectorWeight.
    double vectorWeight = 0.5, keywordWeight = 0.5;
    int64_t top = 10;
    Fusion fusion = Fusion::Weighted;
    int64_t rrfK = 60;
  } search;
  struct {
    bool enabled = false;
    int model = -1;
    std::string checkpoint;
    int64_t top = 5;
  } rerank;
  bool quarantine = true;
  std::string store;
  std::string baseDir;
};

struct Generate {
  std::string name;
  ast::Loc loc;
  int model = -1;
  std::string checkpoint;
  int context = -1; ///< index into Program::retrievals, or -1
  int64_t maxTokens = 128;
  double temperature = 1.0;
  int64_t topK = 0; ///< 0 = off
  int64_t seed = 1337;
  int64_t window = 0; ///< positions the key/value cache holds: the model's context unless set
  std::string tokenizer; ///< a Hugging Face tokenizer.json: text prompts and output; empty: bytes
  std::string baseDir;
};

/// Everything sema accepted, across the main file and its imports.
struct Program {
  std::vector<ast::File> files; ///< parsed files, main file first
  std::vector<Model> models;    ///< every concrete model (no free parameters)
  std::vector<Mesh> meshes;
  std::vector<Train> trains;
  std::vector<Retrieval> retrievals;
  std::vector<Generate> generates;
  const Model *findModel(const std::string &name) const;
  const Mesh *findMesh(const std::string &name) const;
};

} // namespace plan::sema

#endif // PLAN_LANG_PROGRAM_H

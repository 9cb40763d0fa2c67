// Internal: one training run, the Trainer that planrt_train_main drives. Its members are
// defined by concern: train_main.cpp (setup, the step loop, evaluation), train_state.cpp
// (this rank's pieces of the parameters and optimizer state, and whole tensors from them),
// train_checkpoint.cpp (the files a run writes and reads: checkpoints, resume, --init,
// --save-init, --save-grads, --export).
#ifndef PLANRT_LIB_TRAINER_H
#define PLANRT_LIB_TRAINER_H

#include "offload.h"
#include "sharded.h"
#include "step_context.h"
#include "train_manifest.h"
#include "train_options.h"
#include "train_progress.h"

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace planrt::train {

/// Pointers per pipeline stage in planrt_train_main's `stages` (planrt.h).
constexpr int64_t kStageEntries = PLANRT_STAGE_ENTRIES;

/// The seconds a checkpoint (its writes and the barriers between them) may take before the
/// watchdog stops every rank, when more than --comm-timeout.
constexpr double kCheckpointWait = 1800;

/// The entry points planc generated.
struct Entries {
  planrt_grad_fn grad;
  planrt_sumsq_fn sumsq;
  planrt_update_fn update;
  planrt_eval_fn eval;
  planrt_step_fn step;
  planrt_program_fn gather, release;
  planrt_update_chunk_fn chunk0, chunk1; ///< an offloaded optimizer's chunk updates (null without)
  void *const *stages; ///< pipeline: kStageEntries per stage (forward, backward, update, two chunk updates, wgrad)
  int64_t nstages;
  planrt_step_fn round; ///< a federated plan's round program (null otherwise)
};

class Trainer {
public:
  Trainer(const Manifest &m, const Options &o, const Entries &e, planrt_mesh *mesh);
  ~Trainer();

  /// The whole run; returns the exit status, having reported any error.
  int run();

private:
  // ---- The run (train_main.cpp).

  int error(planrt_status);

  /// The launch's hosts and which mesh axes cross them: on stderr and as the log's
  /// {"hosts": […], "axes": {axis: "node" | "network"}} line (rank 0), with a warning for
  /// an axis that crosses hosts where the mesh's node keeps it inside one.
  planrt_status reportTopology(int ranks);

  int finish();

  int64_t tokensPerStep() const { return m.batch * m.seq; }

  bool checkpointing() const { return !checkpointDir.empty() && checkpointEvery > 0; }

  bool evaluating() const {
    return (val || valImages) && (e.eval || m.pipeline > 1) && m.evalEvery > 0 && m.evalBatches > 0;
  }

  bool scaling() const { return m.lossScaleKind != "none"; }

  /// Everything that can fail before compute: data, files, directories, buffers,
  /// the initial parameters.
  planrt_status prepare();
  /// The step context: this rank's place in the mesh, the entry points, the shapes.
  void bindStep();
  /// Opens and validates every data file, and draws the first sample.
  // ---- A model over images (train_images.cpp).

  /// Opens its image files (the plan's, or --data's) and validation files (the plan's, or
  /// --val's, if it evaluates), checks them against the compiled shape, sizes the step's
  /// input buffers and sets up the batchnorm layers' running statistics.
  planrt_status openImages(const std::vector<std::string> &files, const std::vector<std::string> &valFiles);
  /// Evaluation of a model over images: the mean loss and the top-1 accuracy over the
  /// first eval_batches × micro × data-parallel validation images in file order, with the
  /// running statistics (collective over the data axes).
  planrt_status imageValidation(double &mean, double &accuracy);
  /// batchnorm = local: every data-parallel rank takes data rank 0's running statistics,
  /// as DDP's broadcast_buffers does (collective); nothing otherwise.
  planrt_status shareRunning();
  /// The model's buffers besides its parameters (batchnorm's running_mean, running_var
  /// and num_batches_tracked, PyTorch's names), pointing into the step context.
  std::vector<planrt::ModelBuffer> modelBuffers();
  planrt_status openData();
  /// The step program's buffers, all but the transient ones now; each at its place in
  /// the executable's arena if the compiler planned one.
  planrt_status allocateBuffers();
  /// The parameters and moments before step `start`: resumed, loaded (--init) or drawn
  /// as the manifest says; then --save-init.
  planrt_status initialState();

  /// The mean loss over eval_batches × micro × data-parallel windows, the same windows
  /// whatever the layout: each data-parallel rank takes every d-th block of micro windows,
  /// and the sums are reduced over the data axes.
  planrt_status evaluate(int64_t s);
  /// The mean validation loss evaluate logs (collective over the data and pipeline axes).
  planrt_status validationLoss(double &mean);

  /// One evaluation micro-batch through the pipeline: each stage this rank holds, in
  /// order, runs its forward pass on the previous stage's activation and hands its own on
  /// to the next stage's rank; the last stage's loss in `loss` (0 on every other rank).
  planrt_status stageEval(const int32_t *tokens, const int32_t *targets, float &loss);

  static const char *nonFinite(double v) { return std::isnan(v) ? "NaN" : "infinite"; }

  /// Bytes this rank has sent so far, by collective (planrt_collective order).
  void commTotals(uint64_t out[4]) const;

  planrt_status step(int64_t s);
  /// The step (or round) program for step `s`, audited as one by a device backend that
  /// wants it (planrt_backend.step: cuda-host's emulated device).
  void runProgram(planrt_step_fn program, int64_t s);

  // ---- A federated plan's rounds (train_federated.cpp).

  /// The rounds in place of the steps: planc_round each, its log line and progress,
  /// then --export of the global model.
  int runFederated();
  /// per_client(…): the sorted matches of the patterns, one per client; `files` becomes
  /// this client's. Every client's tokens go to ctx.fed.tokens once the data is open.
  planrt_status clientFiles(std::vector<std::string> &files);
  /// Every client's token count (collective over the client axis), for `weighting: tokens`.
  planrt_status clientTokens();
  /// The checkpoint after `done` rounds: the global model (and FedAdam's moments) that
  /// every rank holds alike, written by rank 0 as DIR/step-<done>.safetensors.
  planrt_status saveRound(int64_t done);
  /// --resume: the newest round checkpoint into the global model (and FedAdam's moments);
  /// `first` the round to run next. The rounds that follow are those of an uninterrupted
  /// run: each draws its clients and samples from the seed and its index alone.
  planrt_status resumeRound(int64_t &first);
  /// FedAdam's moment buffers (-1 each under sgd).
  int serverMoment(int k) const { return bufferId(k ? "server_exp_avg_sq" : "server_exp_avg"); }

  // ---- Buffers and this rank's pieces (train_state.cpp).

  int bufferId(const std::string &name) const {
    for (size_t i = 0; i < m.buffers.size(); ++i)
      if (m.buffers[i].name == name)
        return int(i);
    return -1;
  }
  float *data(int id) { return ctx.buffers[size_t(id)].data; }
  int64_t pieceFloats(int g) const { return (m.groupEnd[g] - m.groupBegin[g]) / m.dataParallel; }
  /// Where this rank's piece of group g starts in the flat layout.
  int64_t pieceBegin(int g) const { return m.groupBegin[g] + ctx.dataRank * pieceFloats(g); }
  /// This rank's piece of group g in a state buffer (master, exp_avg, exp_avg_sq):
  /// the buffer holds only the pieces when sharded, else everything.
  float *piece(int id, int g) { return data(id) + (m.sharded ? (g == 0 ? 0 : pieceFloats(0)) : pieceBegin(g)); }

  /// What this rank's update writes of group g in a state buffer: its piece when
  /// sharded, else the whole group.
  float *span(int id, int g) { return m.sharded ? piece(id, g) : data(id) + m.groupBegin[g]; }
  int64_t spanFloats(int g) const { return m.sharded ? pieceFloats(g) : m.groupEnd[g] - m.groupBegin[g]; }

  // ---- The offloaded optimizer state (train_state.cpp): the moments (and with
  // `params = nvme(…)` the ZeRO-3 parameter shard) live in files and are buffers only
  // while a checkpoint, an export or the initial state needs them.

  bool offloaded() const { return !m.offloadDir.empty(); }
  bool paramsOffloaded() const { return !m.paramsOffloadDir.empty(); }
  /// Whether buffer `name` lives in the offloaded files between those uses.
  bool offloadedBuffer(const std::string &name) const;
  /// Opens the files (the plan's directories, or --offload-dir for all).
  planrt_status openOffload();
  /// The offloaded buffers allocated (zeroed; with `moments` false the parameter shard
  /// alone), and read from the files if `read`.
  planrt_status momentsIn(bool read, bool moments = true);
  /// The offloaded buffers written to the files as the current state if `write` (the
  /// moments as zeros where they are not allocated), then freed.
  planrt_status momentsOut(bool write);
  /// Waits for an overlapped update still streaming (under ZeRO-3 the update of step s
  /// runs on while step s + 1 starts): before what reads the whole state.
  planrt_status settleOffload();

  // ---- Tensor parallelism: this rank's pieces of whole parameters (train_state.cpp).

  bool tensorParallel() const { return m.tensorParallel > 1; }
  int64_t tensorCoord() const { return m.tensorAxis >= 0 && ctx.mesh ? planrt_mesh_coord(ctx.mesh, m.tensorAxis) : 0; }

  /// f(local, whole, n) for each run of n contiguous elements that tensor rank c holds
  /// of parameter p (planrt::forEachRun).
  template <typename F> static void runs(const Param &p, int64_t c, F f) { planrt::forEachRun(pieceOf(p), c, f); }
  /// This rank's piece of p, as the checkpoint layout describes it.
  static planrt::FlatParam pieceOf(const Param &p) {
    planrt::FlatParam out{p.name, p.offset, p.count};
    out.replica = p.replica;
    out.shape = p.shape;
    out.blocks = p.blocks;
    out.splitDim = p.splitDim;
    out.parts = p.parts;
    return out;
  }

  /// This rank's flat buffer (numFloats) from a buffer of whole parameters (fullFloats).
  std::vector<float> toLocal(const float *whole) const;

  /// Whole parameters from every tensor rank's flat buffer: collective over the tensor axis.
  planrt_status toWhole(const std::vector<float> &local, std::vector<float> &whole);

  /// As distribute, from buffers of whole parameters.
  void distributeWhole(const float *P, const float *M, const float *V);

  /// The whole parameters and moments (collective): every rank's pieces gathered.
  planrt_status gatherWhole(std::vector<float> &P, std::vector<float> &M, std::vector<float> &V);

  /// Copies full flat buffers (any of them may be null) into this rank's state.
  void distribute(const float *P, const float *M, const float *V);

  /// The full flat parameter and moment buffers, gathered from every rank's pieces.
  planrt_status gatherFull(std::vector<float> &P, std::vector<float> &M, std::vector<float> &V);

  // ---- Files: checkpoints, resume, --init, --save-init, --export (train_checkpoint.cpp).

  /// Output files and directories, before any compute: the checkpoint directory
  /// (created, writable, shared by the ranks), the directories of --save-init,
  /// --save-grads and --export, and the log.
  planrt_status prepareOutputs();

  /// A whole tensor of the model and where its values lie (parameters, first and
  /// second moments).
  struct WholeTensor {
    const Param *p;
    const float *data[3];
  };

  /// Rank 0 writes the checkpoints' index after reading every rank's file: on many ranks
  /// the checkpoint directory must be one directory that all of them see (a shared file
  /// system), which is proven before step 0.
  planrt_status probeShared(const std::string &dir);

  /// Reads `name` (f32, the whole parameter's shape) from st into dst.
  static planrt_status read(planrt_st *st, const std::string &name, const Param &p, float *dst);

  /// Every parameter of this pipeline rank's stages, whole, from a file or directory
  /// (Pretrained: `planc` or `hf` names).
  planrt_status loadParams(const std::string &path, const std::string &format, float *P);

  /// This rank's flat layout (shardedSave), or that of whole parameters (shardedLoad).
  std::vector<planrt::FlatParam> flatLayout(bool whole = false) const;

  /// Resumes from the newest checkpoint in --resume: a single file or a sharded
  /// directory, written under this layout or any other data-parallel one.
  planrt_status resume();

  /// The metadata every file the driver writes carries.
  std::vector<std::string> metadata(const char *format, int64_t step) const;

  static std::vector<const char *> pointers(const std::vector<std::string> &v);

  /// The whole model's tensors from buffers of this rank's whole parameters (any of M and
  /// V may be null). Under a pipeline each stage holds part of the model: every stage's
  /// buffers are gathered over the pipeline axis into `store` (collective), and a tied
  /// parameter comes from the stage that owns it.
  planrt_status wholeModel(const float *P, const float *M, const float *V, std::vector<float> store[3],
                           std::vector<WholeTensor> &out);

  /// Writes one buffer of whole parameters (or gradients) under the parameter names:
  /// rank 0 writes, after gathering the other pipeline stages' (collective).
  planrt_status saveParams(const std::string &file, const char *format, const float *buf, int64_t step,
                           std::vector<std::string> extra, bool withBase = false);

  /// The tensors of a consolidated checkpoint (Hugging Face names, optimizer state, then
  /// the model's buffers), from buffers of whole parameters.
  std::vector<planrt_tensor> consolidated(const std::vector<WholeTensor> &whole, std::vector<std::string> &keep,
                                          const std::vector<planrt::ModelBuffer> &buffers = {}) const;

  planrt_status checkFinite(int64_t s);

  /// The checkpoint after step s (offloaded moments read back for it).
  planrt_status checkpoint(int64_t s);
  planrt_status saveCheckpoint(int64_t s);

  /// --export: one checkpoint file in the single-device format, whatever the layout
  /// (with --merge under adapters: the merged model); --export-adapters.
  planrt_status exportConsolidated(const std::string &file);

  // ---- A fine-tuning plan's frozen base (train_frozen.cpp).

  /// Draws or loads the frozen base (--init, the plan's init checkpoint, or the seed)
  /// into frozenWhole and this rank's pieces into params. On resume, `resumed` holds
  /// the checkpoint's metadata, whose base must be this run's.
  planrt_status initFrozen(const std::map<std::string, std::string> *resumed = nullptr);
  /// The whole frozen base as tensors (for --save-init).
  /// A frozen tensor whole, and where its values are.
  struct FrozenTensor {
    const Param *p;
    float *data;
  };
  /// The whole frozen base from each rank's `mine` (laid out as frozenWhole): this stage's
  /// without a pipeline; under one, every stage's gathered over the pipeline axis into
  /// `store`, each tensor once (not a tied copy). Every rank calls it.
  planrt_status wholeFrozen(std::vector<float> &mine, std::vector<float> &store, std::vector<FrozenTensor> &out);
  /// base, base_sha256, lora_rank and lora_alpha metadata, when there are adapters.
  std::vector<std::string> baseMetadata() const;
  /// The whole frozen base as the params buffers hold it now (collective under tensor
  /// parallelism): what the steps read, which nothing may have written.
  planrt_status frozenFromBuffer(std::vector<float> &whole);
  /// This rank's frozen region as the steps read it (params after the trained layout):
  /// under ZeRO-3 gathered from the data-parallel ranks' frozen_shard pieces into `store`.
  planrt_status frozenRegion(std::vector<float> &store, const float *&region);
  /// --export FILE --merge: `base` (whole) with W + (alpha / rank)·a·b for each adapted W.
  planrt_status exportMerged(const std::string &file, const std::vector<WholeTensor> &adapters,
                             const std::vector<FrozenTensor> &base);
  /// A Hugging Face module an adapter's b ([R, out]) stands for, and its columns of b.
  struct PeftModule {
    std::string name;
    int64_t first, count;
  };
  /// GPT-2's module under `transformer.`, or LlamaForCausalLM's (a fused c_attn's three,
  /// split by the qkv widths plan-lora records); empty when it has none.
  std::vector<PeftModule> peftModules(const Param &b) const;
  /// Whether every adapter has a PEFT module name.
  planrt_status checkPeftNames() const;
  /// --export-adapters FILE: PEFT's safetensors and adapter_config.json.
  planrt_status exportAdapters(const std::string &file, const std::vector<WholeTensor> &adapters);

  std::vector<float> frozenWhole;
  std::string baseFile, baseSha256;

  // ---- The run's state.

  bool arenaReserved = false;
  const Manifest &m;
  const Options &o;
  Entries e;
  int64_t start = 0, end, lastStep = 0;
  Progress progress;
  bool rank0 = true;
  bool agreed = false; ///< the failure being reported happens on every rank alike
  planrt_step_ctx ctx;
  std::unique_ptr<planrt::Watchdog> watchdog;
  planrt_data *train = nullptr, *val = nullptr;
  planrt_images *images = nullptr;    ///< a model over images: its training images
  planrt_images *valImages = nullptr; ///< and its validation images, if it evaluates
  planrt_log *log = nullptr;
  std::string checkpointDir, lastCheckpoint;
  int64_t checkpointEvery = 0;
  int params = -1, grads = -1, master = -1, expAvg = -1, expAvgSq = -1, stateId = -1;
  int frozenShard = -1; ///< ZeRO-3 with adapters: this rank's piece of the frozen base
  float *state = nullptr;         ///< the step state of planrt.h (the "state" buffer)
  std::unique_ptr<OffloadedOptimizer> offload;
  std::vector<std::string> names; ///< exp_avg and exp_avg_sq names, two per parameter
  double stepSeconds = 0, stepComm = 0, lastLoss = 0;
  uint64_t maxMemPeak = 0; ///< the most bytes the generated code held in a step
};

} // namespace planrt::train

#endif // PLANRT_LIB_TRAINER_H

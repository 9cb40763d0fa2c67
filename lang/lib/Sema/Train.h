// The check of one train declaration, cut along the sections of sema::Train; its
// functions live in Train.cpp (order, model, mesh), TrainData.cpp,
// TrainParallel.cpp, TrainLayout.cpp, TrainPrecision.cpp, TrainOptimizer.cpp,
// TrainEval.cpp and TrainFineTune.cpp.
#ifndef PLAN_LANG_LIB_SEMA_TRAIN_H
#define PLAN_LANG_LIB_SEMA_TRAIN_H

#include "SemaInternal.h"

namespace plan::lang {

/// One use of a mesh axis by a role, for the "exactly one role" rule.
struct AxisUse {
  std::string axis, role;
  ast::Loc loc;
};

/// Checks a train declaration section by section and, when no error was
/// reported, adds the plan to the program. The sections share what earlier ones
/// found (the model, the mesh, where the parallel section set each thing).
class TrainCheck {
public:
  TrainCheck(Sema &sema, const ast::Decl &decl);
  void run();

private:
  // Train.cpp
  /// The value of a required key; reports it missing unless misspelt.
  const ast::Expr *need(const char *key, const char *example);
  std::optional<std::string> symbol(const ast::Expr *e, const char *key);
  void checkModelAndMesh();

  // TrainData.cpp
  /// The value of `key`, evaluated; false when absent or in error (then ok is false).
  bool keyValue(const char *key, Value &v);
  /// tokens("…", …) or text("…", …, tokenizer: bpe("…")) of `key`; `text` says which.
  void tokenFiles(const char *key, std::vector<std::string> &out, bool &text);
  /// A bpe("tokenizer.json") value: its path, checked to exist; sets t.tokenizer, which
  /// one plan has one of.
  bool tokenizerOf(const Value &v);
  /// data, val and tokenizer.
  void checkData();
  /// An integer key of at least `minimum`; whether it was set and valid.
  bool intKey(const char *key, int64_t &out, bool required, int64_t minimum);
  /// batch, micro, seq, steps and seed.
  void checkSizes();
  /// Accumulation: batch = micro × data-parallel size × accumulation.
  void checkAccumulation();
  /// seq against the model's positional table.
  void checkSeq();

  // TrainImages.cpp
  /// images("…", format:, shape:, normalize:, crop:, flip:) of `key` into `out`.
  void imageFiles(const char *key, sema::ImageData &out);
  /// [channels, height, width] of `out` when `shape:` did not give them: CIFAR-10's, or
  /// the header of the first file the first pattern matches.
  bool imageShape(const Value &call, sema::ImageData &out);
  /// What a model over images needs of the plan, and what this version does not do.
  void checkImages();

  // TrainParallel.cpp
  void checkParallel();
  void checkPipeline(const Section &par);
  /// pp(stages:, schedule:, keep:): their values into t.parallel.
  void checkPipelineArgs(std::map<std::string, Value> &args);
  /// `offload { optimizer = …  params = … }`.
  void checkOffload(const Section &par);
  /// Offload against the mesh and ZeRO.
  void checkOffloadRules();
  /// Every use names a mesh axis, each axis has one role, every axis > 1 has a role.
  void checkAxisRoles();
  /// Buckets, ZeRO and sequence parallelism against the roles.
  void checkParallelRules();

  // TrainLayout.cpp
  /// Logical dims → mesh axes: Megatron defaults for the tensor axis, then overrides.
  void checkShard();
  /// The layout rules (sema::checkLayout), each reported where the plan sets it.
  void checkLayoutRules();

  // TrainPrecision.cpp
  /// Precision, loss scaling and recomputation.
  void checkPrecision();

  // TrainOptimizer.cpp
  /// The arguments of an optimizer call `v`, in this order: `lr` (required), `more` (those
  /// with a name), then with `adam` `betas` and `eps`; nothing, with ok cleared, on an error.
  std::optional<std::map<std::string, Value>> optimizerArgs(const Value &v, bool adam,
                                                            std::vector<Signature::Param> more);
  /// Argument `key` of a call, if given: a number for which `valid` holds, into `out`;
  /// else the error `must`.
  void numberArg(std::map<std::string, Value> &a, const char *key, double &out, bool (*valid)(double),
                 const char *must);
  /// `betas: [b1, b2]`, each in [0, 1), into beta1 and beta2 (AdamW's and FedAdam's).
  void betas(const Value &b, double &beta1, double &beta2);
  void checkOptimizer();
  /// The learning-rate schedule.
  void checkSchedule();
  void checkClip();

  // TrainEval.cpp
  void checkEval();
  void checkCheckpoint();

  // TrainFineTune.cpp
  /// The arguments of `key = sig.name(…)`, matched to `sig`; nothing when the key is
  /// absent or in error (reported: a value that is not that call, saying `expected`).
  std::optional<std::map<std::string, Value>> callKey(const char *key, const Signature &sig, const char *expected);
  /// `init = checkpoint(PATH, format: planc | hf)`.
  void checkInit();
  /// `adapt = lora(rank, alpha, targets, dropout)`: the matrices it adapts.
  void checkAdapt();
  /// `quantize = nf4(…)`: needs adapt.
  void checkQuantize();

  // TrainFederated.cpp
  /// `federated = fedavg(…)`, `server = sgd(…) | adam(…)`, the federated axis and
  /// per_client data, and what this version does not combine with them.
  void checkFederated();
  /// fedavg(…)'s arguments into t.federated.
  void checkFedAvgArgs(std::map<std::string, Value> &args);
  /// `server = sgd(lr) | adam(lr, betas, eps)`.
  void checkServer();
  /// The keys and layouts a federated plan refuses in this version.
  void checkFederatedRules();

  Sema &sema;
  Diags &diags;
  const ast::Decl &decl;
  std::string what;
  Section sec;
  sema::Train t;
  bool ok = true;

  const sema::Model *model = nullptr;
  const sema::Mesh *mesh = nullptr;
  bool haveBatch = false, haveMicro = false, haveSeq = false;

  // Where the parallel section set each thing, for the rules checked later.
  const ast::Entry *parallelEntry = nullptr;
  std::vector<AxisUse> uses;
  ast::Loc tensorLoc, pipelineLoc, sequenceLoc, zeroLoc, bucketLoc, federatedLoc;
  ast::Loc perClientLoc; ///< data = per_client(…)
  bool bucketSet = false;
  std::vector<ast::Loc> dataLocs;
};

} // namespace plan::lang

#endif // PLAN_LANG_LIB_SEMA_TRAIN_H

// Internal: generation as a library, for the command line (planrt_generate_main)
// and for `serve` (runtime/retrieval/serve_generate.cpp): a generate declaration's
// manifest, tokenizer and parameters loaded once; a request's prompt checked and
// built (grounded on a retrieval graph when the plan names one); decoding into the
// JSON that `--json` prints. docs/GENERATE.md is the specification.
#ifndef PLANRT_LIB_GENERATE_H
#define PLANRT_LIB_GENERATE_H

#include "decoder.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace planrt::gen {

/// A request: the command line's options, or a POST /generate body's fields.
struct Options {
  std::string prompt, promptFile, tokens, checkpoint, instructions;
  bool havePrompt = false, json = false, noContext = false;
  std::optional<int64_t> maxTokens, topK, seed, k;
  std::optional<double> temperature;
};

/// Why a request does not run: `exit` 2 for its options (HTTP 400), 1 for the run
/// (a prompt file, the retrieval; HTTP 500). `usage`: print the usage after it.
struct Refusal {
  int exit;
  std::string message;
  bool usage = true;
};

/// Retrieves the context of a grounded prompt: the prompt with its DATA section, and
/// the retrieval's JSON report; a status and planrt_last_error() on failure.
using GroundFn = std::function<planrt_status(const std::string &question, const std::string &instructions,
                                             int64_t k, std::string &prompt, std::string &report)>;

/// A prompt ready to decode.
struct Prompt {
  std::vector<int32_t> tokens;
  std::string text;   ///< what the tokens spell (text models)
  std::string report; ///< the retrieval's JSON report (grounded prompts)
};

class Generator {
public:
  /// Parses the manifest and loads the tokenizer it names; null with `error`. A
  /// null `ground` means the executable cannot ground (linked without retrieval).
  static std::unique_ptr<Generator> open(const char *manifest, planrt_decode_fn prefill, planrt_decode_fn step,
                                         GroundFn ground, std::string &error);
  /// Loads the parameters from `checkpoint` (empty: the plan's) into the primary
  /// decoder (nothing of the model is allocated before).
  planrt_status load(const std::string &checkpoint);
  /// The decoder load() filled, for one thread (the command line).
  Decoder &primary() { return *base; }
  /// Another decoder over the loaded parameters, with a cache of its own (`serve`'s
  /// workers, side by side).
  std::unique_ptr<Decoder> decoder() const { return base->sibling(); }

  const std::string &name() const;
  const std::string &context() const; ///< the retrieval graph, or ""
  const std::string &checkpoint() const { return base->checkpoint(); }

  /// Checks the options against the plan and builds the prompt.
  std::variant<Prompt, Refusal> prepare(Options &o) const;
  /// Decodes `p` with the plan's sampling unless `o` overrides it: the JSON that
  /// `--json` prints. `stop`, asked before each token, ends the run early
  /// ("stopped": "timeout" instead of "max_tokens").
  manifest::json decode(const Options &o, const Prompt &p, Decoder &dec,
                        const std::function<bool()> &stop = {}) const;

  ~Generator();

private:
  Generator();
  struct Impl;
  std::unique_ptr<Impl> impl;
  std::unique_ptr<Decoder> base;
};

/// The entries of a generate executable, as its main hands them over.
struct Entries {
  const char *manifest;
  planrt_decode_fn prefill, step;
  const char *retrievalManifest;
  const planrt_retrieval_models *models;
  planrt_ground_fn ground;
};

} // namespace planrt::gen

/// `EXE serve …` of a generate executable (runtime/retrieval/serve_generate.cpp, in
/// libplanrt_retrieval, which planc links into generate executables). generate.cpp
/// refers to it weakly, so that libplanrt alone links; planrt_generate_main says so
/// when it is missing.
extern "C" int planrt_serve_generate(int argc, char **argv, int first, const planrt::gen::Entries *entries);

#endif // PLANRT_LIB_GENERATE_H

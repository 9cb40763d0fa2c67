// The decoding driver behind every generation executable: planrt_generate_main
// reads the command line and the manifest, loads the parameters from a training
// checkpoint by name, builds the prompt (grounded on a retrieval graph when the
// plan names one), fills the key/value cache in chunks and samples one token at a
// time. docs/GENERATE.md is its specification.
#include "generate.h"
#include "bpe.h"
#include "decoder.h"
#include "planrt_manifest.h"
#include "random.h"
#include "status.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <variant>
#include <string>
#include <unistd.h>
#include <vector>

#pragma weak planrt_serve_generate // in libplanrt_retrieval, which libplanrt does not need

using planrt::fail;
using namespace planrt::manifest;

namespace {

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

struct GenManifest {
  std::string generate, checkpoint, context;
  std::string tokenizer; ///< a tokenizer.json: text prompts and output; empty: bytes (vocab 256)
  std::unique_ptr<planrt::tokenizer::Bpe> bpe;
  /// Whether prompts and output are text: through the tokenizer, or bytes.
  bool text() const { return bpe || model.vocab == 256; }
  planrt::ModelLayout model;
  int64_t maxTokens = 0, topK = 0;
  double temperature = 0;
  uint64_t seed = 0;
};

planrt_status parseManifest(const char *source, GenManifest &m) {
  if (!source)
    return fail(PLANRT_ERR_FORMAT, "the executable has no manifest");
  return planrt::manifest::parse([&] {
    json j = json::parse(source);
    const std::string top = "the manifest";
    if (text(j, "format", top) != planrt::manifest::format::kGenerate)
      throw Malformed{std::string("format is not ") + planrt::manifest::format::kGenerate};
    m.generate = text(j, "generate", top);
    m.checkpoint = text(j, "checkpoint", top);
    const json &ctx = field(j, "context", top);
    m.context = ctx.is_string() ? ctx.get<std::string>() : "";
    planrt::readModelLayout(j, top, m.model);
    if (m.model.width != m.model.vocab)
      throw Malformed{"width is not the vocabulary: the entries return logits"};
    m.maxTokens = integer(j, "max_tokens", top, 1, int64_t(1) << 40);
    m.topK = integer(j, "top_k", top, 0, int64_t(1) << 31);
    m.temperature = real(j, "temperature", top, 0, 1e30);
    m.seed = uint64_t(integer(j, "seed", top, 0, INT64_MAX));
    if (j.contains("tokenizer"))
      m.tokenizer = text(j, "tokenizer", top);
  });
}

using planrt::gen::Options;
using planrt::gen::Prompt;
using planrt::gen::Refusal;

const char *kUsage =
    "usage: %s [PROMPT] [options]\n"
    "       %s serve [--listen HOST:PORT] [--token-file FILE] [--threads N] …  (docs/SERVING.md)\n"
    "  PROMPT                 the text to continue (through the plan's tokenizer, or bytes for a\n"
    "                         model over 256 byte tokens)\n"
    "  --prompt-file FILE     read the prompt from FILE\n"
    "  --tokens \"ID ID ...\"   the prompt as token ids (any vocabulary)\n"
    "  --max-tokens N         tokens to generate (the plan's max_tokens)\n"
    "  --temperature T        0 = greedy (the plan's temperature)\n"
    "  --top-k K              sample among the K likeliest tokens; 0 = all (the plan's top_k)\n"
    "  --seed S               the sampling seed (the plan's seed)\n"
    "  --checkpoint PATH      a checkpoint directory (its newest checkpoint) or a .safetensors file\n"
    "                         (the plan's checkpoint)\n"
    "  --k N                  retrieved documents placed in the prompt (grounded plans; the graph's top)\n"
    "  --instructions TEXT    the instruction section of a grounded prompt\n"
    "  --no-context           do not retrieve, even if the plan names a retrieval graph\n"
    "  --json                 one JSON object: prompt, tokens, text, log-probabilities, timings\n";

int usageError(const char *argv0, const std::string &msg) {
  std::fprintf(stderr, "%s: error: %s\n", argv0, msg.c_str());
  std::fprintf(stderr, kUsage, argv0, argv0);
  return kExitUsage;
}

std::optional<int64_t> toInt(const std::string &s, int64_t min) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end || errno || v < min)
    return std::nullopt;
  return int64_t(v);
}

/// Chooses the next token from one position's logits: the argmax at temperature
/// 0 (the lowest id on ties), else a draw from softmax(logits / T) restricted to
/// the top_k likeliest (0: all), with the uniform of draw `i` of `seed` from
/// splitmix64. Returns the id and its log-probability under the distribution
/// sampled from (for greedy decoding, under softmax(logits)).
std::pair<int32_t, double> sample(const float *logits, int64_t V, double temperature, int64_t topK, uint64_t seed,
                                  uint64_t i) {
  int64_t best = 0;
  for (int64_t v = 1; v < V; ++v)
    if (logits[v] > logits[best])
      best = v;
  double t = temperature > 0 ? temperature : 1.0;
  std::vector<double> z(static_cast<size_t>(V));
  for (int64_t v = 0; v < V; ++v)
    z[size_t(v)] = double(logits[v]) / t;
  if (temperature > 0 && topK > 0 && topK < V) {
    std::vector<double> sorted(z);
    std::nth_element(sorted.begin(), sorted.begin() + (topK - 1), sorted.end(), std::greater<double>());
    double kth = sorted[size_t(topK - 1)];
    for (double &x : z)
      if (x < kth)
        x = -INFINITY;
  }
  double mx = *std::max_element(z.begin(), z.end()), sum = 0;
  for (double x : z)
    sum += std::exp(x - mx);
  double logSum = mx + std::log(sum);
  if (temperature <= 0)
    return {int32_t(best), z[size_t(best)] - logSum};
  double u = double(planrt::mix(seed * 0x9e3779b97f4a7c15ull + i) >> 11) * 0x1.0p-53 * sum, acc = 0;
  int64_t pick = -1;
  for (int64_t v = 0; v < V; ++v) {
    if (z[size_t(v)] == -INFINITY)
      continue;
    pick = v;
    acc += std::exp(z[size_t(v)] - mx);
    if (u < acc)
      break;
  }
  return {int32_t(pick), z[size_t(pick)] - logSum};
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Reads the command line into `o`; returns the exit status if the executable stops
/// here (--help, or a bad command line after printing the error).
std::optional<int> parseOptions(int argc, char **argv, const char *argv0, Options &o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= argc)
        return std::nullopt;
      return std::string(argv[++i]);
    };
    auto needInt = [&](std::optional<int64_t> &dst, int64_t min) -> bool {
      auto v = value();
      return v && (dst = toInt(*v, min)).has_value();
    };
    if (a == "--help" || a == "-h") {
      std::printf(kUsage, argv0, argv0);
      return 0;
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--no-context") {
      o.noContext = true;
    } else if (a == "--max-tokens") {
      if (!needInt(o.maxTokens, 1))
        return usageError(argv0, "--max-tokens needs a positive integer");
    } else if (a == "--top-k") {
      if (!needInt(o.topK, 0))
        return usageError(argv0, "--top-k needs an integer ≥ 0");
    } else if (a == "--seed") {
      if (!needInt(o.seed, 0))
        return usageError(argv0, "--seed needs an integer ≥ 0");
    } else if (a == "--k") {
      if (!needInt(o.k, 1))
        return usageError(argv0, "--k needs a positive integer");
    } else if (a == "--temperature") {
      auto v = value();
      char *end = nullptr;
      double t = v ? std::strtod(v->c_str(), &end) : -1;
      if (!v || v->empty() || *end || !(t >= 0) || !std::isfinite(t))
        return usageError(argv0, "--temperature needs a number ≥ 0");
      o.temperature = t;
    } else if (a == "--prompt-file" || a == "--tokens" || a == "--checkpoint" || a == "--instructions") {
      auto v = value();
      if (!v)
        return usageError(argv0, a + " needs a value");
      (a == "--prompt-file"  ? o.promptFile
       : a == "--tokens"     ? o.tokens
       : a == "--checkpoint" ? o.checkpoint
                             : o.instructions) = *v;
    } else if (a.size() > 1 && a[0] == '-') {
      return usageError(argv0, "unknown option '" + a + "'");
    } else if (o.havePrompt) {
      return usageError(argv0, "one prompt only (quote it)");
    } else {
      o.prompt = a;
      o.havePrompt = true;
    }
  }
  return std::nullopt;
}

/// The prompt, from where the options give it, and the options that need a
/// grounded plan checked against it.
std::optional<Refusal> checkPrompt(const GenManifest &m, Options &o, bool grounded, bool canGround) {
  int sources = int(o.havePrompt) + int(!o.promptFile.empty()) + int(!o.tokens.empty());
  if (sources > 1)
    return Refusal{kExitUsage, "give the prompt one way: PROMPT, --prompt-file or --tokens"};
  if (!o.promptFile.empty()) {
    FILE *f = std::fopen(o.promptFile.c_str(), "rb");
    if (!f)
      return Refusal{kExitError, o.promptFile + ": " + std::strerror(errno), false};
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
      o.prompt.append(buf, n);
    std::fclose(f);
  }
  if (grounded && !canGround)
    return Refusal{kExitError,
                   "generate '" + m.generate + "' names the retrieval graph '" + m.context +
                       "', but this executable was linked without it",
                   false};
  if (!o.instructions.empty() && !grounded)
    return Refusal{kExitUsage, "--instructions shapes a grounded prompt; generate '" + m.generate +
                                   "' retrieves nothing" + (o.noContext ? " with --no-context" : "")};
  if (o.k && !grounded)
    return Refusal{kExitUsage, "--k sets the retrieved documents; generate '" + m.generate + "' retrieves nothing"};
  return std::nullopt;
}

/// The prompt's tokens: bytes for a byte-level model, else ids given explicitly. A
/// grounded prompt is rebuilt around the retrieved documents, and `p.report` holds
/// the retrieval's JSON report.
std::optional<Refusal> buildPrompt(const GenManifest &m, const Options &o, bool grounded,
                                   const planrt::gen::GroundFn &ground, Prompt &p) {
  p.text = o.prompt;
  if (!o.tokens.empty()) {
    if (grounded)
      return Refusal{kExitUsage, "a grounded prompt is text (the question); --tokens is for plain continuation "
                                 "(or pass --no-context)"};
    const char *c = o.tokens.c_str();
    while (*c) {
      while (*c == ' ' || *c == ',' || *c == '\t' || *c == '\n')
        ++c;
      if (!*c)
        break;
      char *end = nullptr;
      errno = 0;
      long long id = std::strtoll(c, &end, 10);
      if (end == c || errno || id < 0 || id >= m.model.vocab)
        return Refusal{kExitUsage, "--tokens holds '" + std::string(c, strcspn(c, " ,\t\n")) +
                                       "', not a token id in [0, " + std::to_string(m.model.vocab) + ")"};
      p.tokens.push_back(int32_t(id));
      c = end;
    }
  } else {
    if (!m.text())
      return Refusal{kExitUsage,
                     "model '" + m.model.model + "' has a vocabulary of " + std::to_string(m.model.vocab) +
                         " tokens and this executable has no tokenizer for it; pass the prompt as token ids with "
                         "--tokens",
                     false};
    if (grounded) {
      std::string instructions =
          o.instructions.empty() ? "Answer the question from the documents in the DATA section." : o.instructions;
      std::string prompt;
      if (ground(p.text, instructions, o.k.value_or(0), prompt, p.report) != PLANRT_OK)
        return Refusal{kExitError,
                       "retrieving the context of generate '" + m.generate + "' from '" + m.context +
                           "': " + planrt_last_error(),
                       false};
      p.text = prompt;
    }
    if (m.bpe)
      p.tokens = m.bpe->encode(p.text);
    else
      for (unsigned char c : p.text)
        p.tokens.push_back(int32_t(c));
  }
  if (p.tokens.empty())
    return Refusal{kExitUsage, "the prompt is empty: there is nothing to continue"};
  return std::nullopt;
}

/// The sampling settings of a run: the plan's, unless the options override them.
struct Sampling {
  double temperature;
  int64_t topK, maxTokens;
  uint64_t seed;
};

/// What one generation produced, and how long it took.
struct Generated {
  std::vector<int32_t> out;
  std::vector<double> logprobs;
  int64_t shifts = 0;
  double prefillS = 0, decodeS = 0;
  bool stopped = false; ///< ended early by the caller's stop()
};

/// Fills the cache with the prompt, then samples up to maxTokens tokens one at a
/// time, asking `stop` before each.
Generated decodeTokens(planrt::Decoder &dec, planrt_decode_fn step, const GenManifest &m, const Sampling &s,
                       const std::vector<int32_t> &tokens, const std::function<bool()> &stop) {
  const int64_t W = m.model.window, V = m.model.vocab;
  std::vector<float> stepLogits(static_cast<size_t>(V));
  Generated g;

  // The context keeps at most W positions: when it is full, it restarts from its
  // newest W/2 tokens (the cache is refilled from them).
  std::vector<int32_t> ctx = tokens;
  auto fill = [&](int64_t from, int64_t to) { return dec.run(ctx.data(), from, to); };
  auto restart = [&]() {
    int64_t keep = std::max<int64_t>(1, W / 2);
    ctx.erase(ctx.begin(), ctx.end() - keep);
    ++g.shifts;
    return fill(0, int64_t(ctx.size()));
  };
  auto t0 = std::chrono::steady_clock::now();
  const float *next = int64_t(ctx.size()) > W ? restart() : fill(0, int64_t(ctx.size()));
  g.prefillS = since(t0);
  auto t1 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < s.maxTokens; ++i) {
    if (stop && stop()) {
      g.stopped = true;
      break;
    }
    auto [id, lp] = sample(next, V, s.temperature, s.topK, s.seed, uint64_t(i));
    g.out.push_back(id);
    g.logprobs.push_back(lp);
    if (i + 1 == s.maxTokens)
      break;
    ctx.push_back(id);
    if (int64_t(ctx.size()) > W) {
      next = restart();
      continue;
    }
    int64_t pos = int64_t(ctx.size()) - 1;
    step(dec.params(), &ctx[size_t(pos)], pos, dec.cache(), stepLogits.data());
    next = stepLogits.data();
  }
  g.decodeS = since(t1);
  return g;
}

/// The JSON of a run (--json, and POST /generate's reply).
json resultJson(const GenManifest &m, const Sampling &s, const planrt::Decoder &dec, const Generated &g,
                const Prompt &p) {
  const int64_t W = m.model.window, V = m.model.vocab;
  json j{{"generate", m.generate},
         {"model", m.model.model},
         {"checkpoint", dec.checkpoint()},
         {"prompt_tokens", p.tokens.size()},
         {"tokens", g.out},
         {"logprobs", g.logprobs},
         {"temperature", s.temperature},
         {"top_k", s.topK},
         {"seed", s.seed},
         {"window", W},
         {"context_restarts", g.shifts},
         {"stopped", g.stopped ? "timeout" : "max_tokens"},
         {"prefill_s", g.prefillS},
         {"decode_s", g.decodeS},
         {"tokens_per_s", g.decodeS > 0 ? double(g.out.size()) / g.decodeS : 0.0}};
  if (m.text()) {
    std::string text;
    if (m.bpe)
      text = m.bpe->decode(g.out);
    else if (V == 256)
      for (int32_t id : g.out)
        text.push_back(char(id));
    j["text"] = text;
    j["prompt"] = p.text;
  }
  if (!p.report.empty())
    j["context"] = json::parse(p.report, nullptr, false);
  return j;
}

/// The result on stdout: one JSON object (--json), the text (a text model) or the
/// token ids; the timings on a terminal's stderr.
void printResult(const Options &o, const json &j) {
  if (o.json) {
    std::printf("%s\n", j.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
  } else if (j.contains("text")) {
    const std::string &text = j["text"].get_ref<const std::string &>();
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
  } else {
    const json &out = j["tokens"];
    for (size_t i = 0; i < out.size(); ++i)
      std::printf("%s%d", i ? " " : "", out[i].get<int>());
    std::printf("\n");
  }
  std::fflush(stdout);
  if (isatty(2))
    std::fprintf(stderr, "planrt: %zu prompt tokens in %.3f s, %zu tokens in %.3f s (%.1f tokens/s)\n",
                 j["prompt_tokens"].get<size_t>(), j["prefill_s"].get<double>(), j["tokens"].size(),
                 j["decode_s"].get<double>(), j["tokens_per_s"].get<double>());
}

} // namespace

namespace planrt::gen {

struct Generator::Impl {
  GenManifest m;
  planrt_decode_fn prefill = nullptr, step = nullptr;
  GroundFn ground;
};

Generator::Generator() : impl(std::make_unique<Impl>()) {}
Generator::~Generator() = default;

std::unique_ptr<Generator> Generator::open(const char *manifest, planrt_decode_fn prefill, planrt_decode_fn step,
                                           GroundFn ground, std::string &error) {
  std::unique_ptr<Generator> g(new Generator());
  GenManifest &m = g->impl->m;
  if (parseManifest(manifest, m) != PLANRT_OK) {
    error = planrt_last_error();
    return nullptr;
  }
  if (!m.tokenizer.empty() && !(m.bpe = planrt::tokenizer::Bpe::load(m.tokenizer, error))) {
    error = "generate '" + m.generate + "': " + error;
    return nullptr;
  }
  g->impl->prefill = prefill;
  g->impl->step = step;
  g->impl->ground = std::move(ground);
  return g;
}

planrt_status Generator::load(const std::string &checkpoint) {
  const GenManifest &m = impl->m;
  base = std::make_unique<Decoder>(m.model, impl->prefill);
  return base->load(checkpoint.empty() ? m.checkpoint : checkpoint, "generate '" + m.generate + "'");
}

const std::string &Generator::name() const { return impl->m.generate; }
const std::string &Generator::context() const { return impl->m.context; }

std::variant<Prompt, Refusal> Generator::prepare(Options &o) const {
  const GenManifest &m = impl->m;
  bool grounded = !m.context.empty() && !o.noContext;
  if (std::optional<Refusal> r = checkPrompt(m, o, grounded, bool(impl->ground)))
    return *r;
  Prompt p;
  if (std::optional<Refusal> r = buildPrompt(m, o, grounded, impl->ground, p))
    return *r;
  return p;
}

json Generator::decode(const Options &o, const Prompt &p, Decoder &dec, const std::function<bool()> &stop) const {
  const GenManifest &m = impl->m;
  Sampling s{o.temperature.value_or(m.temperature), o.topK.value_or(m.topK), o.maxTokens.value_or(m.maxTokens),
             o.seed ? uint64_t(*o.seed) : m.seed};
  Generated g = decodeTokens(dec, impl->step, m, s, p.tokens, stop);
  return resultJson(m, s, dec, g, p);
}

} // namespace planrt::gen

extern "C" int planrt_generate_main(int argc, char **argv, const char *manifestText, planrt_decode_fn prefill,
                                    planrt_decode_fn step, const char *retrievalManifest,
                                    const planrt_retrieval_models *models, planrt_ground_fn ground) {
  const char *argv0 = argc > 0 ? argv[0] : "generate";
  if (argc > 1 && std::strcmp(argv[1], "serve") == 0) {
    if (!planrt_serve_generate) {
      std::fprintf(stderr, "planrt: error: serve: this executable was linked without the serving runtime "
                           "(libplanrt_retrieval); build it again with planc build\n");
      return kExitError;
    }
    planrt::gen::Entries entries{manifestText, prefill, step, retrievalManifest, models, ground};
    return planrt_serve_generate(argc, argv, 2, &entries);
  }
  planrt::gen::GroundFn groundFn;
  if (ground && retrievalManifest)
    groundFn = [=](const std::string &question, const std::string &instructions, int64_t k, std::string &prompt,
                   std::string &report) {
      char *p = nullptr, *j = nullptr;
      if (int rc = ground(retrievalManifest, models, question.c_str(), instructions.c_str(), k, &p, &j))
        return planrt_status(rc);
      prompt = p;
      report = j ? j : "";
      std::free(p);
      std::free(j);
      return PLANRT_OK;
    };
  std::string error;
  std::unique_ptr<planrt::gen::Generator> gen =
      planrt::gen::Generator::open(manifestText, prefill, step, groundFn, error);
  if (!gen) {
    std::fprintf(stderr, "planrt: error: %s\n", error.c_str());
    return kExitError;
  }
  Options o;
  if (std::optional<int> rc = parseOptions(argc, argv, argv0, o))
    return *rc;
  std::variant<Prompt, Refusal> prepared = gen->prepare(o);
  if (const Refusal *r = std::get_if<Refusal>(&prepared)) {
    if (r->usage)
      return usageError(argv0, r->message);
    std::fprintf(stderr, "planrt: error: %s\n", r->message.c_str());
    return r->exit;
  }
  if (gen->load(o.checkpoint)) {
    std::fprintf(stderr, "planrt: error: %s\n", planrt_last_error());
    return kExitError;
  }
  printResult(o, gen->decode(o, std::get<Prompt>(prepared), gen->primary()));
  return 0;
}

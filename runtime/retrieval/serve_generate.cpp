// `EXE serve` of a generate executable (docs/SERVING.md): POST /generate decodes
// with the parameters loaded once and shared by every worker, each request leasing
// a decoder (its own key/value cache). A grounded plan's retrieval graph is served
// beside it (POST /query, and the context of every grounded prompt) from one loaded
// store. POST /reload reads the newest checkpoint (and re-ingests the store) and
// swaps both in without failing a request.
#include "generate.h"
#include "http.h"
#include "retrieval.h"
#include "service.h"
#include "status.h"

#include <cmath>
#include <cstdio>

namespace planrt::rag {
namespace {

using serve::HttpError;
using serve::json;

/// Loaded parameters and their decoders.
struct Model {
  std::unique_ptr<gen::Generator> gen;
  uint64_t generation = 0;
  Pool<Decoder> decoders;
};

/// A POST /generate body as the command line's options.
gen::Options requestOptions(const json &b) {
  serve::onlyFields(b, {"prompt", "tokens", "max_tokens", "temperature", "top_k", "seed", "k", "instructions",
                        "context"});
  gen::Options o;
  const json &prompt = serve::field(b, "prompt"), &tokens = serve::field(b, "tokens");
  if (!prompt.is_null()) {
    o.prompt = serve::textField(b, "prompt", true, size_t(1) << 20);
    o.havePrompt = true;
  }
  if (!tokens.is_null()) {
    if (!tokens.is_array() || tokens.empty())
      throw HttpError(400, "\"tokens\" must be a non-empty array of token ids");
    for (const json &t : tokens) {
      if (!t.is_number_integer())
        throw HttpError(400, "\"tokens\" must hold integers (token ids)");
      o.tokens += (o.tokens.empty() ? "" : " ") + std::to_string(t.get<int64_t>());
    }
  }
  if (prompt.is_null() && tokens.is_null())
    throw HttpError(400, "\"prompt\" (text) or \"tokens\" (ids) is required");
  if (!serve::field(b, "max_tokens").is_null())
    o.maxTokens = serve::intField(b, "max_tokens", 0, 1, int64_t(1) << 20);
  if (!serve::field(b, "top_k").is_null())
    o.topK = serve::intField(b, "top_k", 0, 0, int64_t(1) << 31);
  if (!serve::field(b, "seed").is_null())
    o.seed = serve::intField(b, "seed", 0, 0, INT64_MAX);
  if (!serve::field(b, "k").is_null())
    o.k = serve::intField(b, "k", 0, 1, 10000);
  const json &t = serve::field(b, "temperature");
  if (!t.is_null()) {
    if (!t.is_number() || !(t.get<double>() >= 0) || !std::isfinite(t.get<double>()))
      throw HttpError(400, "\"temperature\" must be a number ≥ 0");
    o.temperature = t.get<double>();
  }
  o.instructions = serve::textField(b, "instructions", false, size_t(1) << 16);
  const json &context = serve::field(b, "context");
  if (!context.is_null() && !context.is_boolean())
    throw HttpError(400, "\"context\" must be true or false");
  o.noContext = context.is_boolean() && !context.get<bool>();
  return o;
}

class Generation {
public:
  Generation(const gen::Entries &e, int workers, Service *context) : e(e), workers(workers), context(context) {}

  /// Loads the newest checkpoint and makes it the current model.
  planrt_status open() {
    std::shared_ptr<Model> model;
    if (planrt_status s = load(model))
      return s;
    install(model);
    return PLANRT_OK;
  }

  /// Loads the newest checkpoint into a new model (not yet served).
  planrt_status load(std::shared_ptr<Model> &out) {
    gen::GroundFn ground;
    if (context)
      ground = [svc = context](const std::string &q, const std::string &i, int64_t k, std::string &p,
                               std::string &r) { return svc->ground(q, i, k, p, r); };
    std::string error;
    auto model = std::make_shared<Model>();
    model->gen = gen::Generator::open(e.manifest, e.prefill, e.step, ground, error);
    if (!model->gen)
      return planrt::fail(PLANRT_ERR_FORMAT, "%s", error.c_str());
    if (planrt_status s = model->gen->load(""))
      return s;
    for (int i = 0; i < workers; ++i)
      model->decoders.add(model->gen->decoder());
    out = model;
    return PLANRT_OK;
  }

  void install(const std::shared_ptr<Model> &model) {
    std::lock_guard<std::mutex> lock(swap);
    model->generation = ++generations;
    current = model;
  }

  std::shared_ptr<Model> now() {
    std::lock_guard<std::mutex> lock(swap);
    return current;
  }

  json generate(const serve::Request &req) {
    gen::Options o = requestOptions(req.body);
    std::shared_ptr<Model> model = now();
    std::variant<gen::Prompt, gen::Refusal> prepared = model->gen->prepare(o);
    if (const gen::Refusal *r = std::get_if<gen::Refusal>(&prepared))
      throw HttpError(r->exit == 2 ? 400 : 500, r->message);
    Pool<Decoder>::Lease dec(model->decoders);
    json out = model->gen->decode(o, std::get<gen::Prompt>(prepared), *dec,
                                  [&] { return serve::Clock::now() > req.deadline; });
    tokens += out["tokens"].size();
    return out;
  }

  json reload(const serve::Request &req) {
    serve::onlyFields(req.body, {"ingest"});
    if (!context && !serve::field(req.body, "ingest").is_null())
      throw HttpError(400, "\"ingest\": generate '" + now()->gen->name() + "' retrieves nothing");
    std::lock_guard<std::mutex> lock(reloading);
    // The checkpoint first: if it fails, nothing has changed; then the store, whose
    // failure also leaves both as they were (the new model is not installed).
    std::shared_ptr<Model> model;
    if (load(model) != PLANRT_OK)
      throw HttpError(500, "reload failed (still serving checkpoint generation " +
                               std::to_string(now()->generation) + "): " + planrt_last_error());
    json out = json::object();
    out["context"] = context ? context->reload(req) : json(nullptr);
    install(model);
    out["generation"] = model->generation;
    out["checkpoint"] = model->gen->checkpoint();
    std::fprintf(stderr, "serve: checkpoint generation %llu: %s\n", (unsigned long long)model->generation,
                 model->gen->checkpoint().c_str());
    return out;
  }

  json health() {
    std::shared_ptr<Model> model = now();
    return {{"status", "ok"},
            {"generate", model->gen->name()},
            {"checkpoint", model->gen->checkpoint()},
            {"generation", model->generation},
            {"context", context ? context->health() : json(nullptr)}};
  }

  std::string metrics() {
    return "# HELP planc_generated_tokens_total Tokens generated.\n# TYPE planc_generated_tokens_total counter\n"
           "planc_generated_tokens_total " +
           std::to_string(tokens.load()) +
           "\n# HELP planc_checkpoint_generation Checkpoints loaded since the start (1: the first).\n"
           "# TYPE planc_checkpoint_generation gauge\nplanc_checkpoint_generation " +
           std::to_string(now()->generation) + "\n" + (context ? context->metrics() : std::string());
  }

private:
  gen::Entries e;
  int workers;
  Service *context;
  std::mutex swap, reloading;
  std::shared_ptr<Model> current;
  uint64_t generations = 0;
  std::atomic<uint64_t> tokens{0};
};

} // namespace
} // namespace planrt::rag

using namespace planrt::rag;

extern "C" int planrt_serve_generate(int argc, char **argv, int first, const planrt::gen::Entries *e) {
  planrt::serve::Options o;
  std::string error;
  if (!planrt::serve::parseOptions(argc, argv, first, o, error)) {
    std::fprintf(stderr, "planrt: error: %s (see --help)\n", error.c_str());
    return 2;
  }
  if (!(error = planrt::serve::prepare(o)).empty()) { // before the model is loaded
    std::fprintf(stderr, "planrt: error: serve: %s\n", error.c_str());
    return 1;
  }
  int threads = planrt::serve::workerThreads(o), engines = planrt::serve::engineCount(o);
  // A grounded plan's retrieval graph, served from one loaded store.
  Config config;
  std::unique_ptr<Service> context;
  if (e->retrievalManifest) {
    if (!parseConfig(e->retrievalManifest, e->models, config)) {
      std::fprintf(stderr, "planrt: error: %s\n", planrt_last_error());
      return 1;
    }
    context = std::make_unique<Service>(config.cfg, engines);
    if (context->open() != PLANRT_OK) {
      std::fprintf(stderr, "planrt: error: %s\n", planrt_last_error());
      return 1;
    }
  }
  Generation generation(*e, engines, context.get());
  if (generation.open() != PLANRT_OK) {
    std::fprintf(stderr, "planrt: error: %s\n", planrt_last_error());
    return 1;
  }
  std::shared_ptr<Model> model = generation.now();
  std::string what = "generate '" + model->gen->name() + "', checkpoint " + model->gen->checkpoint() +
                     (context ? ", grounded on '" + std::string(config.cfg.graph) + "' (" +
                                    std::to_string(context->chunks()) + " chunks)"
                              : std::string()) +
                     ", " + std::to_string(threads) + " threads, " + std::to_string(engines) + " decoders";
  std::string name = model->gen->name();
  model.reset();
  std::vector<planrt::serve::Route> routes = {
      {"POST", "/generate", [&](const planrt::serve::Request &r) { return generation.generate(r); }},
      {"POST", "/reload", [&](const planrt::serve::Request &r) { return generation.reload(r); }},
      {"GET", "/health", [&](const planrt::serve::Request &) { return generation.health(); }},
      {"POST", "/query",
       [&](const planrt::serve::Request &r) -> json {
         if (!context)
           throw HttpError(404, "generate '" + name +
                                    "' retrieves nothing: POST /query is served by a retrieval executable or a "
                                    "grounded generate executable");
         return context->query(r);
       }},
  };
  if (context)
    context->watch();
  int rc = planrt::serve::run(o, what, routes, [&] { return generation.metrics(); }, [&] {
    if (context)
      context->unwatch();
  });
  return rc;
}

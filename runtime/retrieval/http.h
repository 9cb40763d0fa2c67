// Internal: the HTTP side of `serve` (docs/SERVING.md), on cpp-httplib: the
// command-line options, the bearer token, bounded requests, JSON errors, the
// Prometheus metrics, the JSON-lines access log and the graceful stop on SIGTERM.
// What is served (the routes) is the caller's.
#ifndef PLANRT_RETRIEVAL_HTTP_H
#define PLANRT_RETRIEVAL_HTTP_H

#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace planrt::serve {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string host = "127.0.0.1";
  int port = 8080;        ///< 0: any free port (the ready line names it)
  std::string tokenFile;  ///< --token-file: the bearer token every request needs
  std::string token;      ///< read from tokenFile by prepare()
  int threads = 0;        ///< connections served at once; 0: max(16, 4 × hardware threads)
  int engines = 0;        ///< searches or generations at once; 0: min(threads, 2 × hardware threads)
  size_t maxBody = 1 << 20;
  double timeout = 30;    ///< seconds: reading a request, writing a reply, and a handler's budget
  std::string accessLog = "-"; ///< "-": stdout; "off": none; else a file (appended)
};

/// Reads the token file and checks that the address may be served: an error, or "".
/// Call it before loading anything, and before `run`.
std::string prepare(Options &o);

/// Parses serve's options from argv[first..]. On a bad one, false with `error` set.
bool parseOptions(int argc, char **argv, int first, Options &o, std::string &error);
/// The worker threads `run` starts, one per connection being served: --threads, else
/// max(16, 4 × hardware threads). A kept-alive connection holds one while it lasts, so
/// there are more than the cores: idle connections must not keep others waiting.
int workerThreads(const Options &o);
/// How many requests search or generate at once (searchers, decoders): --engines, else
/// min(threads, 2 × hardware threads); a request waits for one, as the work is CPU-bound.
int engineCount(const Options &o);
/// Usage lines of the options, for --help.
extern const char *kOptionsUsage;

/// A reply with a 4xx or 5xx status and {"error": message}.
struct HttpError : std::runtime_error {
  int status;
  HttpError(int status, const std::string &message) : std::runtime_error(message), status(status) {}
};

struct Request {
  const json &body;        ///< a JSON object (an empty one for a GET or an empty POST)
  Clock::time_point deadline;
};

struct Route {
  std::string method, path; ///< "GET" or "POST"
  /// Returns the reply's JSON body (status 200), or throws HttpError.
  std::function<json(const Request &)> handle;
};

/// Lines appended to GET /metrics (Prometheus text format, each ending in '\n').
using MetricsFn = std::function<std::string()>;

/// With options that passed prepare(): binds, prints the ready line on stderr
/// (`serve: listening on http://HOST:PORT …`, with `what`), serves until SIGTERM or
/// SIGINT, then drains in-flight requests and returns 0; 1 when the access log cannot
/// be opened or the port cannot be bound (the cause on stderr). `onStop` runs after
/// the last request.
int run(const Options &o, const std::string &what, std::vector<Route> routes, MetricsFn metrics,
        const std::function<void()> &onStop);

/// A JSON body's field checks, for handlers: 400 naming the field.
const json &field(const json &body, const char *name);
std::string textField(const json &body, const char *name, bool required, size_t maxBytes);
int64_t intField(const json &body, const char *name, int64_t fallback, int64_t min, int64_t max);
/// 400 naming the first field of `body` not in `known`.
void onlyFields(const json &body, std::initializer_list<const char *> known);

} // namespace planrt::serve

#endif // PLANRT_RETRIEVAL_HTTP_H

// The HTTP side of `serve` (http.h) on cpp-httplib.
#include "http.h"

#include <httplib.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>
#include <sstream>
#include <sys/stat.h>
#include <thread>

namespace planrt::serve {

const char *kOptionsUsage =
    "  --listen HOST:PORT     address to listen on (default 127.0.0.1:8080; port 0 picks a free one)\n"
    "  --token-file FILE      every request needs 'Authorization: Bearer <the file's token>'; required\n"
    "                         to listen beyond loopback\n"
    "  --threads N            connections served at once (default max(16, 4 x hardware threads))\n"
    "  --engines N            searches or generations at once (default min(threads, 2 x hardware threads))\n"
    "  --max-body BYTES       larger request bodies get 413 (default 1048576)\n"
    "  --timeout SECONDS      bound on reading a request, writing a reply and a request's work (default 30)\n"
    "  --access-log FILE|-|off  JSON lines, one per request (default -: stdout)\n";

namespace {

bool toNumber(const char *s, double min, double max, double &out) {
  if (!s || !*s)
    return false;
  char *end = nullptr;
  errno = 0;
  double v = std::strtod(s, &end);
  if (*end || errno || !(v >= min && v <= max))
    return false;
  out = v;
  return true;
}

bool parseListen(const std::string &a, Options &o) {
  size_t colon = a.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return false;
  std::string host = a.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  double port;
  if (!toNumber(a.c_str() + colon + 1, 0, 65535, port) || port != double(int(port)))
    return false;
  o.host = host;
  o.port = int(port);
  return true;
}

/// An address that only this machine reaches: "localhost", ::1, or an IPv4 literal in
/// 127.0.0.0/8 (not a host name that merely starts with "127.").
bool isLoopback(const std::string &host) {
  in_addr v4{};
  return host == "localhost" || host == "::1" ||
         (::inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127);
}

std::string trim(const std::string &s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

} // namespace

std::string prepare(Options &o) {
  if (!o.tokenFile.empty()) {
    std::ifstream in(o.tokenFile, std::ios::binary);
    if (!in)
      return o.tokenFile + ": cannot read the token file: " + std::strerror(errno);
    std::stringstream ss;
    ss << in.rdbuf();
    o.token = trim(ss.str());
    if (o.token.size() < 16 || o.token.find_first_of(" \t\r\n") != std::string::npos)
      return o.tokenFile + ": the token must be one word of at least 16 characters";
    struct stat st{};
    if (::stat(o.tokenFile.c_str(), &st) == 0 && (st.st_mode & 077))
      std::fprintf(stderr, "serve: warning: %s is readable by other users (chmod 600 it)\n", o.tokenFile.c_str());
  }
  if (!isLoopback(o.host) && o.token.empty())
    return "--listen " + o.host + ": listening beyond loopback needs --token-file (every request then needs the "
                                  "bearer token)";
  return "";
}

namespace {

/// Constant-time comparison of a request's Authorization header with the token.
bool authorized(const httplib::Request &req, const std::string &token) {
  std::string want = "Bearer " + token, got = req.get_header_value("Authorization");
  unsigned char diff = got.size() != want.size();
  for (size_t i = 0; i < want.size(); ++i)
    diff |= (unsigned char)(want[i] ^ (i < got.size() ? got[i] : 0));
  return diff == 0;
}

std::string errorBody(const std::string &message) {
  return json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

/// Counters and latency histograms per route and status.
class Metrics {
public:
  static constexpr std::array<double, 14> kBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                     0.1,    0.25,  0.5,    1,     2.5,   5,     10};
  void record(const std::string &route, int status, double seconds) {
    std::lock_guard<std::mutex> lock(m);
    ++requests[{route, status}];
    Histogram &h = latency[route];
    for (size_t i = 0; i < kBounds.size(); ++i)
      h.buckets[i] += seconds <= kBounds[i];
    h.count += 1;
    h.sum += seconds;
  }
  std::string text() {
    std::lock_guard<std::mutex> lock(m);
    std::string out = "# HELP planc_requests_total HTTP requests answered, by route and status.\n"
                      "# TYPE planc_requests_total counter\n";
    char line[256];
    for (auto &[key, n] : requests) {
      std::snprintf(line, sizeof line, "planc_requests_total{route=\"%s\",code=\"%d\"} %llu\n", key.first.c_str(),
                    key.second, (unsigned long long)n);
      out += line;
    }
    out += "# HELP planc_request_errors_total HTTP requests answered with a 4xx or 5xx status.\n"
           "# TYPE planc_request_errors_total counter\n";
    uint64_t errors = 0;
    for (auto &[key, n] : requests)
      errors += key.second >= 400 ? n : 0;
    out += "planc_request_errors_total " + std::to_string(errors) + "\n";
    out += "# HELP planc_request_duration_seconds Time from a request's headers to its reply, by route.\n"
           "# TYPE planc_request_duration_seconds histogram\n";
    for (auto &[route, h] : latency) {
      for (size_t i = 0; i < kBounds.size(); ++i) {
        std::snprintf(line, sizeof line, "planc_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n",
                      route.c_str(), kBounds[i], (unsigned long long)h.buckets[i]);
        out += line;
      }
      std::snprintf(line, sizeof line,
                    "planc_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n"
                    "planc_request_duration_seconds_sum{route=\"%s\"} %.9g\n"
                    "planc_request_duration_seconds_count{route=\"%s\"} %llu\n",
                    route.c_str(), (unsigned long long)h.count, route.c_str(), h.sum, route.c_str(),
                    (unsigned long long)h.count);
      out += line;
    }
    return out;
  }

private:
  struct Histogram {
    std::array<uint64_t, kBounds.size()> buckets{};
    uint64_t count = 0;
    double sum = 0;
  };
  std::mutex m;
  std::map<std::pair<std::string, int>, uint64_t> requests;
  std::map<std::string, Histogram> latency;
};

/// The JSON-lines access log.
class AccessLog {
public:
  bool open(const std::string &where, std::string &error) {
    if (where == "off")
      return true;
    if (where == "-") {
      out = stdout;
      return true;
    }
    out = std::fopen(where.c_str(), "a");
    owned = out != nullptr;
    if (!out)
      error = where + ": cannot open the access log: " + std::strerror(errno);
    return out != nullptr;
  }
  ~AccessLog() {
    if (owned)
      std::fclose(out);
  }
  void write(const httplib::Request &req, const httplib::Response &res, double seconds) {
    if (!out)
      return;
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    std::tm tm{};
    ::gmtime_r(&now.tv_sec, &tm);
    char stamp[40];
    size_t n = std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    std::snprintf(stamp + n, sizeof stamp - n, ".%03ldZ", now.tv_nsec / 1000000);
    json line = {{"time", stamp},         {"remote", req.remote_addr}, {"method", req.method},
                 {"path", req.path},      {"status", res.status},      {"bytes", res.body.size()},
                 {"ms", seconds * 1e3}};
    std::string text = line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    std::lock_guard<std::mutex> lock(m);
    std::fwrite(text.data(), 1, text.size(), out);
    std::fflush(out);
  }

private:
  std::mutex m;
  FILE *out = nullptr;
  bool owned = false;
};

thread_local Clock::time_point requestStart;

/// The write end of StopOnSignal's pipe: a signal handler may only write(2).
std::atomic<int> stopPipeWrite{-1};
static_assert(std::atomic<int>::is_always_lock_free, "read in a signal handler");

void onStopSignal(int sig) {
  int saved = errno;
  unsigned char b = (unsigned char)sig;
  int fd = stopPipeWrite.load();
  if (fd >= 0)
    (void)!::write(fd, &b, 1);
  errno = saved;
}

/// Stops the server on SIGTERM or SIGINT: the handler (in whichever thread, the
/// libraries' own among them) writes the signal to a pipe, and a waiter thread
/// reads it and stops the server, which then drains the requests in flight.
class StopOnSignal {
public:
  explicit StopOnSignal(httplib::Server &svr) {
    if (::pipe2(fds, O_CLOEXEC) != 0)
      fds[0] = fds[1] = -1;
    stopPipeWrite = fds[1];
    struct sigaction sa{};
    sa.sa_handler = onStopSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, &oldTerm);
    sigaction(SIGINT, &sa, &oldInt);
    waiter = std::thread([this, &svr] {
      bool stopping = false;
      for (;;) {
        unsigned char sig = 0;
        ssize_t n = ::read(fds[0], &sig, 1);
        if (n < 0 && errno == EINTR)
          continue;
        if (n <= 0 || sig == 0)
          return; // the server has stopped
        if (stopping) {
          std::fprintf(stderr, "serve: %s again: exiting now, without the requests in flight\n",
                       sig == SIGTERM ? "SIGTERM" : "SIGINT");
          std::_Exit(1);
        }
        stopping = true;
        std::fprintf(stderr, "serve: %s: finishing the requests in flight, then stopping\n",
                     sig == SIGTERM ? "SIGTERM" : "SIGINT");
        // A signal that comes before listening has begun would find nothing to stop.
        while (!svr.is_running() && !leaving.load())
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        svr.stop();
      }
    });
  }
  ~StopOnSignal() {
    leaving = true;
    sigaction(SIGTERM, &oldTerm, nullptr);
    sigaction(SIGINT, &oldInt, nullptr);
    stopPipeWrite = -1;
    unsigned char zero = 0;
    (void)!::write(fds[1], &zero, 1);
    waiter.join();
    ::close(fds[0]);
    ::close(fds[1]);
  }

private:
  int fds[2] = {-1, -1};
  std::atomic<bool> leaving{false};
  struct sigaction oldTerm{}, oldInt{};
  std::thread waiter;
};

} // namespace

bool parseOptions(int argc, char **argv, int first, Options &o, std::string &error) {
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
    double n = 0;
    if (a == "--listen" && v && parseListen(v, o)) {
    } else if (a == "--listen") {
      error = "--listen takes HOST:PORT (port 0 to 65535)";
      return false;
    } else if (a == "--token-file" && v) {
      o.tokenFile = v;
    } else if (a == "--threads" && toNumber(v, 1, 1024, n) && n == double(int(n))) {
      o.threads = int(n);
    } else if (a == "--engines" && toNumber(v, 1, 1024, n) && n == double(int(n))) {
      o.engines = int(n);
    } else if (a == "--max-body" && toNumber(v, 64, 1ull << 32, n)) {
      o.maxBody = size_t(n);
    } else if (a == "--timeout" && toNumber(v, 0.001, 86400, n)) {
      o.timeout = n;
    } else if (a == "--access-log" && v) {
      o.accessLog = v;
    } else {
      bool known = a == "--token-file" || a == "--threads" || a == "--engines" || a == "--max-body" ||
                   a == "--timeout" || a == "--access-log";
      error = known ? a + ": " + (v ? "bad value '" + std::string(v) + "'" : std::string("needs a value"))
                    : "serve: unknown option '" + a + "'";
      return false;
    }
    ++i;
  }
  return true;
}

int workerThreads(const Options &o) {
  return o.threads > 0 ? o.threads : int(std::max(16u, 4 * std::thread::hardware_concurrency()));
}

int engineCount(const Options &o) {
  int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  // Twice the cores: a request holds its engine while its reply is built too.
  return o.engines > 0 ? std::min(o.engines, workerThreads(o)) : std::min(workerThreads(o), 2 * cores);
}

const json &field(const json &body, const char *name) {
  static const json null;
  auto it = body.find(name);
  return it == body.end() ? null : *it;
}

std::string textField(const json &body, const char *name, bool required, size_t maxBytes) {
  const json &v = field(body, name);
  if (v.is_null()) {
    if (required)
      throw HttpError(400, std::string("\"") + name + "\" is required (a string)");
    return "";
  }
  if (!v.is_string())
    throw HttpError(400, std::string("\"") + name + "\" must be a string");
  const std::string &s = v.get_ref<const std::string &>();
  if (s.size() > maxBytes)
    throw HttpError(413, std::string("\"") + name + "\" is longer than " + std::to_string(maxBytes) + " bytes");
  return s;
}

int64_t intField(const json &body, const char *name, int64_t fallback, int64_t min, int64_t max) {
  const json &v = field(body, name);
  if (v.is_null())
    return fallback;
  if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > max)
    throw HttpError(400, std::string("\"") + name + "\" must be an integer in [" + std::to_string(min) + ", " +
                             std::to_string(max) + "]");
  return v.get<int64_t>();
}

void onlyFields(const json &body, std::initializer_list<const char *> known) {
  for (auto it = body.begin(); it != body.end(); ++it)
    if (std::none_of(known.begin(), known.end(), [&](const char *k) { return it.key() == k; }))
      throw HttpError(400, "unknown field \"" + it.key() + "\"");
}

namespace {

using Handler = httplib::Server::Handler;

/// A request's start (set when its headers are read) and whether it got that far.
thread_local bool requestStarted = false;

/// 401 unless the request carries the token (none needed without one). Checked after
/// the body is read, so that a refused request leaves the connection in step.
bool authorize(const httplib::Request &req, httplib::Response &res, const std::string &token) {
  if (token.empty() || authorized(req, token))
    return true;
  res.status = 401;
  res.set_header("WWW-Authenticate", "Bearer");
  res.set_content(errorBody("missing or wrong bearer token (Authorization: Bearer <token>)"), "application/json");
  return false;
}

/// Wraps a handler with the token check.
Handler guarded(const std::string &token, Handler h) {
  return [token, h](const httplib::Request &req, httplib::Response &res) {
    if (authorize(req, res, token))
      h(req, res);
  };
}

/// The handler of one route: the body parsed and checked, the reply as JSON.
Handler handlerOf(const Route &route, double timeout) {
  return [route, timeout](const httplib::Request &req, httplib::Response &res) {
    try {
      json body = json::object();
      if (!req.body.empty()) {
        try {
          body = json::parse(req.body);
        } catch (const json::exception &e) {
          throw HttpError(400, std::string("the body is not JSON: ") + e.what());
        }
        if (!body.is_object())
          throw HttpError(400, "the body must be a JSON object");
      }
      auto deadline = requestStart + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout));
      json out = route.handle(Request{body, deadline});
      res.set_content(out.dump(-1, ' ', false, json::error_handler_t::replace) + "\n", "application/json");
    } catch (const HttpError &e) {
      res.status = e.status;
      res.set_content(errorBody(e.what()), "application/json");
    } catch (const std::exception &e) {
      res.status = 500;
      res.set_content(errorBody(std::string("internal error: ") + e.what()), "application/json");
    }
  };
}

/// Before routing: the request's start, and a body the server can bound (one with a
/// Content-Length: --max-body is checked against it before anything is read).
httplib::Server::HandlerResponse beforeRouting(const httplib::Request &req, httplib::Response &res) {
  requestStart = Clock::now();
  requestStarted = true;
  bool chunked = req.has_header("Transfer-Encoding");
  bool bodyless = req.method == "GET" || req.method == "HEAD" || req.method == "DELETE" || req.method == "OPTIONS";
  if (chunked || (!bodyless && !req.has_header("Content-Length"))) {
    res.status = 411;
    res.set_header("Connection", "close"); // the body, if any, is not read: no next request on it
    res.set_content(errorBody("a request body needs a Content-Length (chunked bodies are not taken), "
                              "even an empty one: Content-Length: 0"),
                    "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }
  return httplib::Server::HandlerResponse::Unhandled;
}

/// `h` at `path` under `method`, 405 (with Allow) under the other methods; all behind the token.
void addRoute(httplib::Server &svr, const std::string &token, const std::string &path, const std::string &method,
              const Handler &h) {
  Handler notAllowed = [path, method](const httplib::Request &, httplib::Response &res) {
    res.status = 405;
    res.set_header("Allow", method);
    res.set_content(errorBody(path + " takes " + method), "application/json");
  };
  auto pick = [&](const char *m) { return guarded(token, method == m ? h : notAllowed); };
  svr.Get(path, pick("GET"));
  svr.Post(path, pick("POST"));
  svr.Put(path, pick("PUT"));
  svr.Delete(path, pick("DELETE"));
  svr.Patch(path, pick("PATCH"));
}

void configure(httplib::Server &svr, const Options &o, Metrics &metrics, AccessLog &log,
               const std::vector<Route> &routes, const MetricsFn &extra) {
  int threads = workerThreads(o);
  svr.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  auto secs = time_t(o.timeout);
  auto usecs = time_t((o.timeout - double(secs)) * 1e6);
  svr.set_read_timeout(secs, usecs);
  svr.set_write_timeout(secs, usecs);
  svr.set_payload_max_length(o.maxBody);
  svr.set_keep_alive_max_count(1000);
  svr.set_tcp_nodelay(true); // a reply's head and body are separate writes: no Nagle delay between them
  svr.set_pre_routing_handler(beforeRouting);
  svr.set_error_handler([token = o.token](const httplib::Request &req, httplib::Response &res) {
    // An unknown endpoint's body has been read: without the token, 401 rather than 404.
    if (res.status == 404 && !authorized(req, token) && !token.empty()) {
      authorize(req, res, token);
      return;
    }
    if (!res.body.empty())
      return;
    std::string why = res.status == 404   ? "no such endpoint: " + req.method + " " + req.path
                      : res.status == 413 ? "the request body is larger than the server's --max-body"
                                          : res.status == 414 ? "the request line is too long"
                      : res.status == 408 ? "the request was not read in time (--timeout)"
                                          : "HTTP status " + std::to_string(res.status);
    res.set_content(errorBody(why), "application/json");
  });
  std::vector<std::string> known;
  for (const Route &r : routes)
    known.push_back(r.path);
  svr.set_logger([&metrics, &log, known](const httplib::Request &req, const httplib::Response &res) {
    // A request refused before its headers were read has no start: 0 s.
    double s = requestStarted ? std::chrono::duration<double>(Clock::now() - requestStart).count() : 0.0;
    requestStarted = false;
    bool isKnown = std::find(known.begin(), known.end(), req.path) != known.end() || req.path == "/metrics";
    metrics.record(isKnown ? req.method + " " + req.path : "other", res.status, s);
    log.write(req, res, s);
  });
  for (const Route &r : routes)
    addRoute(svr, o.token, r.path, r.method, handlerOf(r, o.timeout));
  addRoute(svr, o.token, "/metrics", "GET", [&metrics, extra](const httplib::Request &, httplib::Response &res) {
    res.set_content(metrics.text() + (extra ? extra() : std::string()), "text/plain; version=0.0.4");
  });
}

} // namespace

int run(const Options &o, const std::string &what, std::vector<Route> routes, MetricsFn extra,
        const std::function<void()> &onStop) {
  std::string error;
  AccessLog log;
  if (!log.open(o.accessLog, error)) {
    std::fprintf(stderr, "planrt: error: serve: %s\n", error.c_str());
    return 1;
  }
  std::signal(SIGPIPE, SIG_IGN);
  Metrics metrics;
  httplib::Server svr;
  configure(svr, o, metrics, log, routes, extra);
  int port = o.port;
  bool bound = port == 0 ? (port = svr.bind_to_any_port(o.host)) > 0 : svr.bind_to_port(o.host, port);
  if (!bound) {
    std::fprintf(stderr, "planrt: error: serve: cannot listen on %s:%d: %s\n", o.host.c_str(), o.port,
                 std::strerror(errno));
    return 1;
  }
  int rc = 0;
  {
    StopOnSignal stopper(svr);
    std::string shown = o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host;
    std::fprintf(stderr, "serve: listening on http://%s:%d (%s; %s)\n", shown.c_str(), port, what.c_str(),
                 o.token.empty() ? "no token" : "bearer token required");
    std::fflush(stderr);
    if (!svr.listen_after_bind()) {
      std::fprintf(stderr, "planrt: error: serve: the server stopped on an error: %s\n", std::strerror(errno));
      rc = 1;
    }
  }
  if (onStop)
    onStop();
  if (rc == 0)
    std::fprintf(stderr, "serve: stopped\n");
  return rc;
}

} // namespace planrt::serve

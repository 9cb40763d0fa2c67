// serve's option parsing and request-field checks (runtime/retrieval/http.h); the
// server itself runs end to end in test/e2e/serve.sh.
#include "http.h"

#include <gtest/gtest.h>

using namespace planrt::serve;

namespace {

bool parse(std::vector<std::string> args, Options &o, std::string &error) {
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  return parseOptions(int(argv.size()), argv.data(), 0, o, error);
}

int statusOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const HttpError &e) {
    return e.status;
  }
  return 200;
}

} // namespace

TEST(ServeOptions, ListenForms) {
  Options o;
  std::string error;
  ASSERT_TRUE(parse({"--listen", "[::1]:9000", "--threads", "3", "--timeout", "2.5"}, o, error)) << error;
  EXPECT_EQ(o.host, "::1");
  EXPECT_EQ(o.port, 9000);
  EXPECT_EQ(o.threads, 3);
  EXPECT_DOUBLE_EQ(o.timeout, 2.5);
  EXPECT_EQ(workerThreads(o), 3);
  EXPECT_LE(engineCount(o), 3);
  ASSERT_TRUE(parse({"--threads", "32", "--engines", "5"}, o, error)) << error;
  EXPECT_EQ(engineCount(o), 5);
  Options defaults;
  EXPECT_GE(workerThreads(defaults), 16);
  EXPECT_GE(engineCount(defaults), 1);
  ASSERT_TRUE(parse({"--listen", "0.0.0.0:0", "--max-body", "4096", "--access-log", "off"}, o, error)) << error;
  EXPECT_EQ(o.host, "0.0.0.0");
  EXPECT_EQ(o.port, 0);
  EXPECT_EQ(o.maxBody, 4096u);
  EXPECT_EQ(o.accessLog, "off");
}

TEST(ServeOptions, BadValuesNamed) {
  struct Case {
    std::vector<std::string> args;
    const char *says;
  } cases[] = {{{"--listen", "8080"}, "--listen takes HOST:PORT"},
               {{"--listen", "localhost:65536"}, "--listen takes HOST:PORT"},
               {{"--threads", "0"}, "--threads: bad value '0'"},
               {{"--threads"}, "--threads: needs a value"},
               {{"--max-body", "12"}, "--max-body: bad value '12'"},
               {{"--timeout", "-1"}, "--timeout: bad value '-1'"},
               {{"--port", "80"}, "unknown option '--port'"}};
  for (const Case &c : cases) {
    Options o;
    std::string error;
    EXPECT_FALSE(parse(c.args, o, error)) << c.args[0];
    EXPECT_NE(error.find(c.says), std::string::npos) << error;
  }
}

TEST(ServeFields, StatusesOfBadFields) {
  json body = {{"text", "abc"}, {"k", 5}, {"n", 2.5}, {"flag", true}};
  EXPECT_EQ(textField(body, "text", true, 8), "abc");
  EXPECT_EQ(intField(body, "k", 0, 1, 10), 5);
  EXPECT_EQ(intField(body, "absent", 7, 1, 10), 7);
  EXPECT_EQ(statusOf([&] { textField(body, "absent", true, 8); }), 400);
  EXPECT_EQ(statusOf([&] { textField(body, "k", false, 8); }), 400);
  EXPECT_EQ(statusOf([&] { textField(body, "text", true, 2); }), 413);
  EXPECT_EQ(statusOf([&] { intField(body, "k", 0, 6, 10); }), 400);
  EXPECT_EQ(statusOf([&] { intField(body, "n", 0, 1, 10); }), 400);
  EXPECT_EQ(statusOf([&] { intField(body, "flag", 0, 0, 1); }), 400);
  EXPECT_EQ(statusOf([&] { onlyFields(body, {"text", "k", "n"}); }), 400);
  EXPECT_EQ(statusOf([&] { onlyFields(body, {"text", "k", "n", "flag"}); }), 200);
}

TEST(ServePrepare, LoopbackWithoutTokenOnly) {
  for (const char *host : {"127.0.0.1", "127.3.2.1", "::1", "localhost"}) {
    Options o;
    o.host = host;
    EXPECT_EQ(prepare(o), "") << host;
  }
  // A host name that merely starts with "127." may resolve anywhere.
  for (const char *host : {"0.0.0.0", "10.0.0.7", "127.example.com", "::"}) {
    Options o;
    o.host = host;
    EXPECT_NE(prepare(o).find("beyond loopback needs --token-file"), std::string::npos) << host;
  }
}

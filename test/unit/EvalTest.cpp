// Constant folding: exact integer arithmetic, quantities, and their errors.
#include "Harness.h"

#include <gtest/gtest.h>

using namespace plan;
using plan::test::analyze;

namespace {
/// A model whose linear layer has `expr` output features; returns that width.
std::optional<int64_t> widthOf(const std::string &expr, test::Result *out = nullptr) {
  auto r = analyze("block b(w: int, o: int = " + expr +
                   ") (x) {\n"
                   "  p = linear(w, o)\n  q = linear(o, w)\n  return q(p(x))\n}\n"
                   "model m() (tokens, targets) {\n  e = embedding(16, 8)\n  l = b(8)\n"
                   "  return cross_entropy(e.attend(l(e(tokens))), targets)\n}\n");
  if (out)
    *out = std::move(r);
  if (!r.ok() && !out)
    return std::nullopt;
  const auto &prog = out ? *out->program : *r.program;
  if (out && !out->ok())
    return std::nullopt;
  return prog.models[0].params[1].shape[1];
}
} // namespace

TEST(Eval, IntegerArithmetic) {
  EXPECT_EQ(widthOf("4 * w"), 32);
  EXPECT_EQ(widthOf("w + w / 2 - 3"), 9);
  EXPECT_EQ(widthOf("(w + 4) * (w - 4) % 7"), 48 % 7);
  EXPECT_EQ(widthOf("-(-w)"), 8);
  EXPECT_EQ(widthOf("1_000 / 8"), 125);
}

TEST(Eval, InexactDivisionIsAnError) {
  test::Result r;
  EXPECT_FALSE(widthOf("w / 3", &r));
  ASSERT_EQ(r.errors.size(), 1u) << r.all();
  EXPECT_NE(r.errors[0].find("inexact integer division: 8 / 3 leaves a remainder of 2"), std::string::npos) << r.all();
  EXPECT_EQ(r.errors[0].substr(0, 5), "1:28:") << r.all(); // at the operator
}

TEST(Eval, DivisionByZeroAndOverflow) {
  test::Result r;
  EXPECT_FALSE(widthOf("w / (w - 8)", &r));
  EXPECT_NE(r.all().find("division by zero"), std::string::npos) << r.all();
  EXPECT_FALSE(widthOf("9223372036854775807 * w", &r));
  EXPECT_NE(r.all().find("integer overflow"), std::string::npos) << r.all();
}

TEST(Eval, QuantitiesConvertToBaseUnits) {
  auto r = analyze("mesh m {\n devices = cuda(8) * 2\n axes = [dp: 4, tp: 4]\n memory = 80 GiB\n"
                   " peak = 989 TFLOP/s\n hbm = 3.35 TB/s\n links = [node: 450 GB/s, network: 50 GB/s]\n}\n");
  ASSERT_TRUE(r.ok()) << r.all();
  const sema::Mesh &m = r.program->meshes[0];
  EXPECT_EQ(m.devices(), 16);
  EXPECT_EQ(m.perNode, 8);
  EXPECT_EQ(m.nodes, 2);
  EXPECT_EQ(*m.memoryBytes, 85899345920);
  EXPECT_DOUBLE_EQ(*m.peakFlops, 989e12);
  EXPECT_DOUBLE_EQ(*m.hbmBytesPerSecond, 3.35e12);
  EXPECT_DOUBLE_EQ(m.links.at("node"), 450e9);
  EXPECT_DOUBLE_EQ(m.links.at("network"), 50e9);
}

TEST(Eval, UnitsAreChecked) {
  auto r = analyze("mesh m {\n devices = cpu(1)\n axes = [dp: 1]\n memory = 80\n}\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.all().find("4:11: 'memory' of mesh 'm' must be a size in bytes with a unit, as in "
                         "'80 GiB'; a plain number has no unit"),
            std::string::npos)
      << r.all();
  r = analyze("mesh m {\n devices = cpu(1)\n axes = [dp: 1]\n peak = 9 TB/s\n}\n");
  EXPECT_NE(r.all().find("must be a compute rate with a unit"), std::string::npos) << r.all();
  r = analyze("mesh m {\n devices = cpu(1)\n axes = [dp: 1]\n memory = 8 GIB\n}\n");
  EXPECT_NE(r.all().find("4:13: unknown unit 'GIB'; did you mean 'GiB'?"), std::string::npos) << r.all();
}

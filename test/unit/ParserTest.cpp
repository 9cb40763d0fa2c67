// The parser: numbers, words, strings, recovery limits, and robustness.
#include "plan/Lang/Parser.h"

#include <gtest/gtest.h>

#include <random>

using namespace plan;

namespace {
struct Parsed {
  bool ok;
  ast::File file;
  std::vector<lang::SyntaxDiag> diags;
};
Parsed parse(const std::string &text) {
  Parsed p;
  p.ok = lang::parse(text, 0, p.file, p.diags);
  return p;
}
const ast::Expr &value(const Parsed &p, size_t i = 0) { return *p.file.decls[0].entries[i].value; }
} // namespace

TEST(Parser, NumberForms) {
  auto p = parse("mesh m { a = 42\n b = 3e-4\n c = 0.95\n d = 1_000_000\n e = 80 GiB\n f = 450 GB/s }");
  ASSERT_TRUE(p.ok);
  EXPECT_TRUE(value(p, 0).isInteger);
  EXPECT_EQ(value(p, 0).integer, 42);
  EXPECT_DOUBLE_EQ(value(p, 1).number, 3e-4);
  EXPECT_FALSE(value(p, 1).isInteger);
  EXPECT_DOUBLE_EQ(value(p, 2).number, 0.95);
  EXPECT_EQ(value(p, 3).integer, 1000000);
  EXPECT_EQ(value(p, 4).unit, "GiB");
  EXPECT_EQ(value(p, 5).unit, "GB/s");
}

TEST(Parser, AUnitBelongsToTheNumberOnlyOnItsLine) {
  auto p = parse("train t {\n batch = 32\n micro = 4\n}");
  ASSERT_TRUE(p.ok);
  ASSERT_EQ(p.file.decls[0].entries.size(), 2u);
  EXPECT_TRUE(value(p, 0).unit.empty());
}

TEST(Parser, DigitLedWordsAreWords) {
  auto p = parse("train t { pipeline = pp(stages: 2, schedule: 1f1b) }");
  ASSERT_TRUE(p.ok);
  const ast::Expr &call = value(p);
  ASSERT_EQ(call.kind, ast::Expr::Kind::Call);
  EXPECT_EQ(call.args[1].value->kind, ast::Expr::Kind::Word);
  EXPECT_EQ(call.args[1].value->text, "1f1b");
}

TEST(Parser, MalformedNumbersAreLocated) {
  for (const char *bad : {"1.2.3", "1__0", "3e", "1_", "7e+"}) {
    auto p = parse(std::string("mesh m {\n  x = ") + bad + "\n}");
    EXPECT_FALSE(p.ok) << bad;
    ASSERT_EQ(p.diags.size(), 1u) << bad;
    EXPECT_EQ(p.diags[0].loc.line, 2u);
    EXPECT_EQ(p.diags[0].loc.col, 7u);
    EXPECT_NE(p.diags[0].message.find("invalid number"), std::string::npos) << p.diags[0].message;
  }
  auto glued = parse("mesh m { memory = 80GiB }");
  ASSERT_EQ(glued.diags.size(), 0u); // a word: sema says where a number was needed
}

TEST(Parser, StringsAndEscapes) {
  auto p = parse(R"(train t { data = "a\"b\\c\nd" })");
  ASSERT_TRUE(p.ok);
  EXPECT_EQ(value(p).text, "a\"b\\c\nd");
  auto bad = parse(R"(train t { data = "a\qb" })");
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.diags[0].message.find("unknown escape"), std::string::npos);
  auto open = parse("train t { data = \"abc\n}");
  ASSERT_FALSE(open.ok);
  EXPECT_EQ(open.diags[0].message.substr(0, 19), "unterminated string");
}

TEST(Parser, ColumnsAreBytes) {
  // "é" is two bytes: the stray '@' after it sits at byte column 5.
  auto p = parse("// é\n\"é\"@");
  ASSERT_FALSE(p.ok);
  EXPECT_EQ(p.diags[0].loc.line, 2u);
  EXPECT_EQ(p.diags[0].loc.col, 5u);
}

TEST(Parser, MissingBraceNotesTheOpening) {
  auto p = parse("mesh m {\n  devices = cpu(1)\n");
  ASSERT_FALSE(p.ok);
  ASSERT_EQ(p.diags.size(), 1u);
  EXPECT_NE(p.diags[0].message.find("end of file"), std::string::npos) << p.diags[0].message;
  ASSERT_EQ(p.diags[0].notes.size(), 1u);
  EXPECT_EQ(p.diags[0].notes[0].first.line, 1u);
  EXPECT_EQ(p.diags[0].notes[0].first.col, 8u);
}

TEST(Parser, DeepNestingIsRefusedNotOverflowed) {
  std::string deep = "mesh m { x = " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }";
  auto p = parse(deep);
  ASSERT_FALSE(p.ok);
  EXPECT_NE(p.diags[0].message.find("nested deeper than"), std::string::npos);
}

TEST(Parser, InvalidUtf8AndNulAreLocated) {
  auto p = parse("mesh m {}\n  \xff");
  ASSERT_FALSE(p.ok);
  EXPECT_EQ(p.diags[0].loc.line, 2u);
  EXPECT_EQ(p.diags[0].loc.col, 3u);
  auto z = parse(std::string("mesh m {}\0", 10));
  ASSERT_FALSE(z.ok);
  EXPECT_NE(z.diags[0].message.find("NUL"), std::string::npos);
}

TEST(Parser, RandomBytesNeverThrowOrCrash) {
  std::mt19937 rng(1234);
  const std::string alphabet = "mesh train model block { } ( ) [ ] , : = + - * / % \" \\ 0 9 . e _ a z \n @ # //";
  for (int i = 0; i < 2000; ++i) {
    std::string s;
    int n = rng() % 200;
    for (int k = 0; k < n; ++k)
      s += alphabet[rng() % alphabet.size()];
    Parsed p = parse(s);
    if (!p.ok)
      EXPECT_FALSE(p.diags.empty()) << s;
  }
}

// Import resolution: relative, -I, stdlib; twice is a no-op; cycles and misses are errors.
#include "Harness.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "TempDir.h"

#include <gtest/gtest.h>

using namespace plan;
using plan::test::analyze;

namespace {
using plan::test::TempDir;

const char *kMesh = "mesh %s {\n  devices = cpu(1)\n  axes = [dp: 1]\n}\n";
std::string mesh(const std::string &name) {
  char buf[128];
  std::snprintf(buf, sizeof buf, kMesh, name.c_str());
  return buf;
}
} // namespace

TEST(Imports, RelativeToTheImportingFile) {
  TempDir d;
  d.write("lib/a.plan", "import \"b.plan\"\n" + mesh("a"));
  d.write("lib/b.plan", mesh("b"));
  auto r = analyze("import \"lib/a.plan\"\n", d.path + "/main.plan");
  ASSERT_TRUE(r.ok()) << r.all();
  EXPECT_EQ(r.program->files.size(), 3u);
  EXPECT_EQ(r.program->meshes.size(), 2u);
}

TEST(Imports, IncludeDirsAreSearchedAfterTheImporter) {
  TempDir here, inc;
  inc.write("shared.plan", mesh("from_include"));
  auto r = analyze("import \"shared.plan\"\n", here.path + "/main.plan", {inc.path});
  ASSERT_TRUE(r.ok()) << r.all();
  ASSERT_EQ(r.program->meshes.size(), 1u);
  EXPECT_EQ(r.program->meshes[0].name, "from_include");
  // A file next to the importer wins over -I.
  here.write("shared.plan", mesh("from_here"));
  r = analyze("import \"shared.plan\"\n", here.path + "/main.plan", {inc.path});
  ASSERT_TRUE(r.ok()) << r.all();
  EXPECT_EQ(r.program->meshes[0].name, "from_here");
}

TEST(Imports, TheStdlibIsSearchedLast) {
  auto r = analyze("import \"meshes/cpu_local.plan\"\n");
  ASSERT_TRUE(r.ok()) << r.all();
  EXPECT_TRUE(r.program->findMesh("cpu4"));
}

TEST(Imports, ImportingTwiceIsANoOp) {
  TempDir d;
  d.write("a.plan", mesh("a"));
  d.write("b.plan", "import \"a.plan\"\n");
  auto r = analyze("import \"a.plan\"\nimport \"b.plan\"\nimport \"./a.plan\"\n", d.path + "/main.plan");
  ASSERT_TRUE(r.ok()) << r.all();
  EXPECT_EQ(r.program->files.size(), 3u);
  EXPECT_EQ(r.program->meshes.size(), 1u);
}

TEST(Imports, CyclesAreErrors) {
  TempDir d;
  d.write("a.plan", "import \"b.plan\"\n");
  d.write("b.plan", "import \"a.plan\"\n");
  auto r = analyze("import \"a.plan\"\n", d.path + "/main.plan");
  ASSERT_FALSE(r.ok());
  ASSERT_EQ(r.errors.size(), 1u) << r.all();
  EXPECT_NE(r.errors[0].find("import cycle: "), std::string::npos) << r.all();
  EXPECT_NE(r.errors[0].find("a.plan → "), std::string::npos) << r.all();
  EXPECT_EQ(r.errors[0].substr(0, 5), "1:1: ") << r.all();
}

TEST(Imports, MissingImportsListWhereTheyWereSought) {
  TempDir d;
  auto r = analyze("\nimport \"nowhere.plan\"\n", d.path + "/main.plan", {"/inc"});
  ASSERT_FALSE(r.ok());
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0], "2:1: cannot find import 'nowhere.plan'");
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("/inc/nowhere.plan"), std::string::npos) << r.notes[0];
}

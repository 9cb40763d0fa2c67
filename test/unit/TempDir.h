// A temporary directory for a test, removed with everything in it at the end.
#ifndef PLANC_TEST_UNIT_TEMPDIR_H
#define PLANC_TEST_UNIT_TEMPDIR_H

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <string>

namespace plan::test {

class TempDir {
public:
  TempDir() {
    llvm::SmallString<128> p;
    EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("planc-test", p));
    path = std::string(p);
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
  /// The path of `name` inside the directory.
  std::string operator/(const std::string &name) const { return path + "/" + name; }
  /// Writes `text` to `name` (creating subdirectories); returns its path.
  std::string write(const std::string &name, const std::string &text) {
    llvm::SmallString<128> p(path);
    llvm::sys::path::append(p, name);
    llvm::sys::fs::create_directories(llvm::sys::path::parent_path(p));
    std::error_code ec;
    llvm::raw_fd_ostream os(p, ec);
    os << text;
    return std::string(p);
  }
  std::string path;
};

} // namespace plan::test

#endif // PLANC_TEST_UNIT_TEMPDIR_H

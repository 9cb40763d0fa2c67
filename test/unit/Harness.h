// Runs the front end on in-memory source and collects its diagnostics as text.
#ifndef PLANC_TEST_UNIT_HARNESS_H
#define PLANC_TEST_UNIT_HARNESS_H

#include "plan/Compiler/Pipeline.h"
#include "plan/Lang/Sema.h"

#include "mlir/IR/MLIRContext.h"

#include <optional>
#include <string>
#include <vector>

namespace plan::test {

struct Result {
  std::optional<sema::Program> program;
  std::vector<std::string> errors; ///< "line:col: message"
  std::vector<std::string> notes;
  bool ok() const { return program.has_value(); }
  std::string all() const {
    std::string s;
    for (auto &e : errors)
      s += e + "\n";
    return s;
  }
};

inline std::string locString(mlir::Location loc) {
  if (auto f = llvm::dyn_cast<mlir::FileLineColLoc>(loc))
    return std::to_string(f.getLine()) + ":" + std::to_string(f.getColumn()) + ": ";
  return "";
}

inline Result analyze(const std::string &text, const std::string &path = "/nonexistent/t.plan",
                      std::vector<std::string> includeDirs = {}) {
  static mlir::MLIRContext ctx(mlir::MLIRContext::Threading::DISABLED);
  Result r;
  lang::SourceFiles files;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
    if (d.getSeverity() == mlir::DiagnosticSeverity::Error)
      r.errors.push_back(locString(d.getLocation()) + d.str());
    for (auto &n : d.getNotes())
      r.notes.push_back(locString(n.getLocation()) + n.str());
    return mlir::success();
  });
  lang::Diags diags(&ctx, files);
  lang::FrontendOptions options;
  options.includeDirs = std::move(includeDirs);
  options.stdlibDir = PLANC_STDLIB_SOURCE_DIR;
  r.program = lang::analyzeBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, path), path, options, diags);
  return r;
}

} // namespace plan::test

#endif // PLANC_TEST_UNIT_HARNESS_H

// The front end's entry point: load a .plan file and its imports, parse, check,
// and return the checked Program. Errors are reported through Diags
// (plan/Lang/Diagnostics.h), which includers of this header get too.
#ifndef PLAN_LANG_SEMA_H
#define PLAN_LANG_SEMA_H

#include "plan/Lang/Diagnostics.h"
#include "plan/Lang/Program.h"

#include "llvm/Support/MemoryBuffer.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace plan::lang {

struct FrontendOptions {
  std::vector<std::string> includeDirs; ///< `-I DIR`, searched after the importer's dir
  std::string stdlibDir;                ///< the installed stdlib; see defaultStdlibDir()
};

/// The stdlib next to the executable (`<prefix>/share/planc/stdlib`), else
/// $PLANC_STDLIB, else the source tree's stdlib this build was configured with.
std::string defaultStdlibDir(const char *argv0);

/// Loads, parses and checks `mainPath` and everything it imports. Returns the
/// program when no error was reported.
std::optional<sema::Program> analyzeFile(const std::string &mainPath, const FrontendOptions &options, Diags &diags);

/// Same, for source text already in memory (fuzzing, tests). Relative imports
/// resolve against `displayPath`'s directory.
std::optional<sema::Program> analyzeBuffer(std::unique_ptr<llvm::MemoryBuffer> buffer, const std::string &displayPath,
                                           const FrontendOptions &options, Diags &diags);

/// Parses `mainPath` and its imports without checking them (`emit --stage ast`).
std::optional<std::vector<ast::File>> parseFiles(const std::string &mainPath, const FrontendOptions &options,
                                                 Diags &diags);

} // namespace plan::lang

#endif // PLAN_LANG_SEMA_H

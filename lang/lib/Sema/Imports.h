// Loading a .plan file and, depth first, everything it imports.
#ifndef PLAN_LANG_LIB_SEMA_IMPORTS_H
#define PLAN_LANG_LIB_SEMA_IMPORTS_H

#include "plan/Lang/Sema.h"

namespace plan::lang {

/// Reads the main file; reports a directory or an unreadable file (unlocated).
std::unique_ptr<llvm::MemoryBuffer> readMainFile(const std::string &path, Diags &diags);

/// Parses `buffer` (shown as `display`) and its imports, importers first. Returns
/// the files when no error was reported.
std::optional<std::vector<ast::File>> loadFiles(std::unique_ptr<llvm::MemoryBuffer> buffer, const std::string &display,
                                                const FrontendOptions &options, Diags &diags);

} // namespace plan::lang

#endif // PLAN_LANG_LIB_SEMA_IMPORTS_H

// Loading and import resolution: the main file, then depth first everything it
// imports, found beside the importer, in each -I directory, then in the stdlib.
#include "Imports.h"

#include "plan/Lang/Parser.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cstdlib>

using namespace plan;
using namespace plan::lang;

namespace {

/// Loads a file and, depth first, everything it imports. Imports resolve against
/// the importing file's directory, then each -I directory, then the stdlib.
class Loader {
public:
  Loader(Diags &diags, const FrontendOptions &opts) : diags(diags), opts(opts) {}

  std::vector<ast::File> files;
  bool ok = true;

  void load(std::unique_ptr<llvm::MemoryBuffer> buffer, const std::string &display, const std::string &identity,
            ast::Loc importedAt = {}) {
    SourceFiles &sf = diags.sourceFiles();
    uint32_t id = sf.add(std::move(buffer), display, identity);
    ast::File file;
    file.path = display;
    std::vector<SyntaxDiag> syntax;
    if (!parse(sf.text(id).str(), id, file, syntax)) {
      ok = false;
      for (const SyntaxDiag &d : syntax) {
        Diag diag = diags.error(d.loc, d.message);
        for (auto &[loc, msg] : d.notes)
          diag.note(loc, msg);
      }
    }
    size_t index = files.size();
    files.push_back(std::move(file));
    stack.push_back({id, importedAt});
    // Copy the imports: loading more files grows `files`.
    std::vector<ast::Import> imports = files[index].imports;
    for (const ast::Import &imp : imports)
      loadImport(imp, display);
    stack.pop_back();
  }

private:
  struct Frame {
    uint32_t file;
    ast::Loc importedAt;
  };
  Diags &diags;
  const FrontendOptions &opts;
  std::vector<Frame> stack;

  void loadImport(const ast::Import &imp, const std::string &importer) {
    if (imp.path.empty()) {
      ok = false;
      diags.error(imp.loc, "the import path is empty");
      return;
    }
    std::vector<std::string> candidates;
    if (llvm::sys::path::is_absolute(imp.path)) {
      candidates.push_back(imp.path);
    } else {
      llvm::SmallString<256> here(importer);
      llvm::sys::path::remove_filename(here);
      llvm::sys::path::append(here, imp.path);
      candidates.push_back(std::string(here));
      for (const std::string &dir : opts.includeDirs) {
        llvm::SmallString<256> p(dir);
        llvm::sys::path::append(p, imp.path);
        candidates.push_back(std::string(p));
      }
      if (!opts.stdlibDir.empty()) {
        llvm::SmallString<256> p(opts.stdlibDir);
        llvm::sys::path::append(p, imp.path);
        candidates.push_back(std::string(p));
      }
    }
    for (std::string &c : candidates) {
      llvm::SmallString<256> clean(c);
      llvm::sys::path::remove_dots(clean, /*remove_dot_dot=*/true);
      c = std::string(clean);
    }
    std::string found;
    for (const std::string &c : candidates)
      if (llvm::sys::fs::is_regular_file(c)) {
        found = c;
        break;
      }
    if (found.empty()) {
      ok = false;
      Diag d = diags.error(imp.loc, "cannot find import '" + imp.path + "'");
      std::string searched;
      for (size_t i = 0; i < candidates.size(); ++i)
        searched += (i ? ", " : "") + candidates[i];
      d.note("searched " + searched);
      return;
    }
    llvm::SmallString<256> real;
    std::string identity = llvm::sys::fs::real_path(found, real) ? found : std::string(real);
    SourceFiles &sf = diags.sourceFiles();
    // A cycle: the file is still being loaded further up the stack.
    for (size_t i = 0; i < stack.size(); ++i) {
      if (sf.identity(stack[i].file) != identity)
        continue;
      ok = false;
      std::string chain;
      for (size_t j = i; j < stack.size(); ++j)
        chain += sf.path(stack[j].file) + " → ";
      chain += sf.path(stack[i].file);
      Diag d = diags.error(imp.loc, "import cycle: " + chain);
      for (size_t j = i + 1; j < stack.size(); ++j)
        d.note(stack[j].importedAt, "'" + sf.path(stack[j].file) + "' is imported here");
      return;
    }
    if (sf.find(identity))
      return; // importing twice is a no-op
    auto buffer = llvm::MemoryBuffer::getFile(found, /*IsText=*/true);
    if (!buffer) {
      ok = false;
      diags.error(imp.loc, "cannot read import '" + found + "': " + buffer.getError().message());
      return;
    }
    load(std::move(*buffer), found, identity, imp.loc);
  }
};

} // namespace

std::string plan::lang::defaultStdlibDir(const char *argv0) {
  if (const char *env = std::getenv("PLANC_STDLIB"))
    if (*env)
      return env;
  std::string exe = llvm::sys::fs::getMainExecutable(argv0, (void *)&defaultStdlibDir);
  if (!exe.empty()) {
    llvm::SmallString<256> p(exe);
    llvm::sys::path::remove_filename(p); // bin
    llvm::sys::path::append(p, "..", "share", "planc", "stdlib");
    llvm::sys::path::remove_dots(p, true);
    if (llvm::sys::fs::is_directory(p))
      return std::string(p);
  }
  return PLANC_STDLIB_SOURCE_DIR;
}

std::optional<std::vector<ast::File>> plan::lang::loadFiles(std::unique_ptr<llvm::MemoryBuffer> buffer,
                                                            const std::string &display, const FrontendOptions &options,
                                                            Diags &diags) {
  llvm::SmallString<256> identity(display);
  llvm::sys::fs::make_absolute(identity);
  llvm::sys::path::remove_dots(identity, true);
  llvm::SmallString<256> real;
  std::string id = llvm::sys::fs::real_path(display, real) ? std::string(identity) : std::string(real);
  Loader loader(diags, options);
  loader.load(std::move(buffer), display, id);
  if (!loader.ok || diags.errorCount())
    return std::nullopt;
  return std::move(loader.files);
}

std::unique_ptr<llvm::MemoryBuffer> plan::lang::readMainFile(const std::string &path, Diags &diags) {
  if (llvm::sys::fs::is_directory(path)) {
    mlir::emitError(mlir::UnknownLoc::get(diags.context())) << "'" << path << "' is a directory, not a .plan file";
    return nullptr;
  }
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer) {
    mlir::emitError(mlir::UnknownLoc::get(diags.context()))
        << "cannot read '" << path << "': " << buffer.getError().message();
    return nullptr;
  }
  return std::move(*buffer);
}

std::optional<std::vector<ast::File>> plan::lang::parseFiles(const std::string &mainPath,
                                                             const FrontendOptions &options, Diags &diags) {
  auto buffer = readMainFile(mainPath, diags);
  if (!buffer)
    return std::nullopt;
  return loadFiles(std::move(buffer), mainPath, options, diags);
}

// The sema driver: loading and import resolution, the global namespace, and the
// order in which declarations are checked.
#include "SemaInternal.h"

#include "plan/Lang/Parser.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/ADT/SmallString.h"
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

  void load(std::unique_ptr<llvm::MemoryBuffer> buffer, const std::string &display,
            const std::string &identity, ast::Loc importedAt = {}) {
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
      return;  // importing twice is a no-op
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

Sema::Sema(Diags &diags, std::vector<ast::File> files) : diags(diags) {
  program.files = std::move(files);
}

const ast::Decl *Sema::lookupDecl(const std::string &name) const {
  auto it = decls.find(name);
  return it == decls.end() ? nullptr : it->second.decl;
}

std::vector<std::string> Sema::declNames(std::function<bool(const ast::Decl &)> filter) const {
  std::vector<std::string> names;
  for (auto &kv : decls)
    if (filter(*kv.second.decl))
      names.push_back(kv.first);
  return names;
}

std::optional<sema::Program> Sema::run() {
  static const std::set<std::string> reserved = [] {
    std::set<std::string> r = {"true", "false", "none"};
    for (const auto *table : {&layerNames(), &functionNames(), &paramTypeNames()})
      r.insert(table->begin(), table->end());
    return r;
  }();
  // Imports load after their importers, so walking back from the last file puts a
  // clash between a plan and its stdlib at the plan's own declaration.
  for (auto fit = program.files.rbegin(); fit != program.files.rend(); ++fit)
    for (const ast::Decl &d : fit->decls) {
      if (reserved.count(d.name)) {
        diags.error(d.nameLoc, "'" + d.name + "' is a built-in name and cannot name a " +
                                   ast::declKindName(d.kind));
        continue;
      }
      auto [it, inserted] = decls.insert({d.name, {&d}});
      if (!inserted) {
        const ast::Decl &prev = *it->second.decl;
        diags.error(d.nameLoc, std::string("duplicate declaration of '") + d.name + "'")
            .note(prev.nameLoc, std::string("'") + d.name + "' is first declared here as a " +
                                    ast::declKindName(prev.kind));
      }
    }
  auto each = [&](ast::Decl::Kind kind, auto fn) {
    for (const ast::File &f : program.files)
      for (const ast::Decl &d : f.decls)
        if (d.kind == kind && lookupDecl(d.name) == &d)
          fn(d);
  };
  each(ast::Decl::Kind::Block, [&](const ast::Decl &d) { checkBodyNames(d); });
  each(ast::Decl::Kind::Model, [&](const ast::Decl &d) {
    if (!d.alias)
      checkBodyNames(d);
  });
  if (diags.errorCount())
    return std::nullopt;
  each(ast::Decl::Kind::Mesh, [&](const ast::Decl &d) { checkMesh(d); });
  each(ast::Decl::Kind::Model, [&](const ast::Decl &d) {
    if (d.alias || d.params.empty())
      modelIndex(d.name, d.nameLoc);
  });
  each(ast::Decl::Kind::Retrieval, [&](const ast::Decl &d) { checkRetrieval(d); });
  each(ast::Decl::Kind::Train, [&](const ast::Decl &d) { checkTrain(d); });
  each(ast::Decl::Kind::Generate, [&](const ast::Decl &d) { checkGenerate(d); });
  if (diags.errorCount())
    return std::nullopt;
  return std::move(program);
}

std::string plan::lang::defaultStdlibDir(const char *argv0) {
  if (const char *env = std::getenv("PLANC_STDLIB"))
    if (*env)
      return env;
  std::string exe = llvm::sys::fs::getMainExecutable(argv0, (void *)&defaultStdlibDir);
  if (!exe.empty()) {
    llvm::SmallString<256> p(exe);
    llvm::sys::path::remove_filename(p);               // bin
    llvm::sys::path::append(p, "..", "share", "planc", "stdlib");
    llvm::sys::path::remove_dots(p, true);
    if (llvm::sys::fs::is_directory(p))
      return std::string(p);
  }
  return PLANC_STDLIB_SOURCE_DIR;
}

static std::optional<std::vector<ast::File>> loadAll(std::unique_ptr<llvm::MemoryBuffer> buffer,
                                                     const std::string &display,
                                                     const FrontendOptions &options,
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

static std::unique_ptr<llvm::MemoryBuffer> readMain(const std::string &path, Diags &diags) {
  if (llvm::sys::fs::is_directory(path)) {
    mlir::emitError(mlir::UnknownLoc::get(diags.context()))
        << "'" << path << "' is a directory, not a .plan file";
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
                                                             const FrontendOptions &options,
                                                             Diags &diags) {
  auto buffer = readMain(mainPath, diags);
  if (!buffer)
    return std::nullopt;
  return loadAll(std::move(buffer), mainPath, options, diags);
}

std::optional<sema::Program> plan::lang::analyzeBuffer(std::unique_ptr<llvm::MemoryBuffer> buffer,
                                                       const std::string &displayPath,
                                                       const FrontendOptions &options,
                                                       Diags &diags) {
  auto files = loadAll(std::move(buffer), displayPath, options, diags);
  if (!files)
    return std::nullopt;
  Sema sema(diags, std::move(*files));
  return sema.run();
}

std::optional<sema::Program> plan::lang::analyzeFile(const std::string &mainPath,
                                                     const FrontendOptions &options, Diags &diags) {
  auto buffer = readMain(mainPath, diags);
  if (!buffer)
    return std::nullopt;
  return analyzeBuffer(std::move(buffer), mainPath, options, diags);
}

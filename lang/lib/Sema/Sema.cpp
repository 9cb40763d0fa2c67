// The sema driver: the order in which declarations are checked. Each kind has its
// own file (Models, Mesh, Train*, Retrieval, Generate); loading is Imports.cpp.
#include "SemaInternal.h"

#include <sys/stat.h>

#include "Imports.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"

using namespace plan;
using namespace plan::lang;

Sema::Sema(Diags &diags, std::vector<ast::File> files) : diags(diags) { program.files = std::move(files); }

std::string Sema::resolvePath(const std::string &base, const std::string &path) {
  return path.empty() || path[0] == '/' || base.empty() ? path : base + "/" + path;
}

std::optional<std::string> Sema::bpePath(const Value &v, const std::string &base) {
  if (v.kind != Value::Kind::Call || v.s != "bpe" || v.items.size() != 1 || !v.items[0].key.empty()) {
    typeError(v, "a tokenizer", "a Hugging Face byte-level BPE tokenizer, as in bpe(\"tokenizer.json\")");
    return std::nullopt;
  }
  std::optional<std::string> path = toString(*v.items[0].value, "the path of 'bpe'");
  if (!path)
    return std::nullopt;
  std::string full = resolvePath(base, *path);
  struct stat st;
  if (path->empty() || ::stat(full.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    diags.error(v.items[0].value->loc, "no tokenizer file at '" + full + "'")
        .note(v.items[0].value->loc, "bpe(PATH) takes a Hugging Face tokenizer.json; relative paths start at the "
                                     "plan's directory");
    return std::nullopt;
  }
  return path;
}

std::string Sema::baseDir(ast::Loc loc) const {
  // The file's real directory, so an executable started anywhere finds relative paths.
  llvm::SmallString<256> dir(diags.sourceFiles().identity(loc.file));
  llvm::sys::path::remove_filename(dir);
  return dir.empty() ? "." : std::string(dir.str());
}

std::optional<sema::Program> Sema::run() {
  decls.declare(program.files, diags);
  auto each = [&](ast::Decl::Kind kind, auto fn) {
    for (const ast::File &f : program.files)
      for (const ast::Decl &d : f.decls)
        if (d.kind == kind && decls.lookup(d.name) == &d)
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

std::optional<sema::Program> plan::lang::analyzeBuffer(std::unique_ptr<llvm::MemoryBuffer> buffer,
                                                       const std::string &displayPath, const FrontendOptions &options,
                                                       Diags &diags) {
  auto files = loadFiles(std::move(buffer), displayPath, options, diags);
  if (!files)
    return std::nullopt;
  Sema sema(diags, std::move(*files));
  return sema.run();
}

std::optional<sema::Program> plan::lang::analyzeFile(const std::string &mainPath, const FrontendOptions &options,
                                                     Diags &diags) {
  auto buffer = readMainFile(mainPath, diags);
  if (!buffer)
    return std::nullopt;
  return analyzeBuffer(std::move(buffer), mainPath, options, diags);
}

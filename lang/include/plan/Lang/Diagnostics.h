// Located diagnostics: the files of one compilation and the bridge from AST
// locations to MLIR's diagnostic engine (errors with notes, repeats dropped, the
// source line and a caret when printed).
#ifndef PLAN_LANG_DIAGNOSTICS_H
#define PLAN_LANG_DIAGNOSTICS_H

#include "plan/Lang/AST.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace plan::lang {

/// The files of one compilation, held in an llvm::SourceMgr whose buffer names
/// are the paths shown in diagnostics.
class SourceFiles {
public:
  /// Adds a buffer; returns its file id (the index used in ast::Loc).
  uint32_t add(std::unique_ptr<llvm::MemoryBuffer> buffer, const std::string &displayPath, const std::string &identity);
  llvm::SourceMgr &sourceMgr() { return mgr; }
  const std::string &path(uint32_t id) const { return files[id].display; }
  const std::string &identity(uint32_t id) const { return files[id].identity; }
  llvm::StringRef text(uint32_t id) const;
  /// Finds a file already loaded under this identity (canonical path).
  std::optional<uint32_t> find(const std::string &identity) const;
  size_t size() const { return files.size(); }

private:
  struct FileInfo {
    std::string display, identity;
    unsigned bufferId;
    std::string raw; ///< the bytes as read; the SourceMgr holds a displayable copy
  };
  llvm::SourceMgr mgr;
  std::vector<FileInfo> files;
};

class Diags;

/// One error or warning being built; notes are attached with note(). Emitted when
/// it goes out of scope. An inert Diag (a repeat) swallows its notes.
class Diag {
public:
  Diag() = default;
  explicit Diag(mlir::InFlightDiagnostic d, const Diags *owner,
                std::vector<std::pair<ast::Loc, std::string>> context = {})
      : diag(std::move(d)), owner(owner), context(std::move(context)) {}
  Diag(Diag &&other) : diag(std::move(other.diag)), owner(other.owner), context(std::move(other.context)) {
    other.diag.reset();
  }
  Diag &operator=(Diag &&) = delete;
  /// Attaches the context notes last, then the diagnostic is reported.
  ~Diag();
  Diag &note(ast::Loc l, const llvm::Twine &message);
  /// A note without a location (printed after the error).
  Diag &note(const llvm::Twine &message);

private:
  std::optional<mlir::InFlightDiagnostic> diag;
  const Diags *owner = nullptr;
  std::vector<std::pair<ast::Loc, std::string>> context; ///< innermost first
};

/// Emits located diagnostics, counting errors and dropping exact repeats (a
/// block instantiated twelve times reports its error once).
class Diags {
public:
  Diags(mlir::MLIRContext *ctx, SourceFiles &files) : ctx(ctx), files(files) {}
  mlir::Location loc(ast::Loc l) const;
  Diag error(ast::Loc l, const llvm::Twine &message);
  Diag warning(ast::Loc l, const llvm::Twine &message);
  unsigned errorCount() const { return errors; }
  mlir::MLIRContext *context() const { return ctx; }
  SourceFiles &sourceFiles() const { return files; }

  /// While a context is pushed, every error gets a note for it, innermost first
  /// ("in 'mlp' (width = 64), instantiated here").
  void pushContext(ast::Loc loc, std::string message) { contexts.push_back({loc, std::move(message)}); }
  void popContext() { contexts.pop_back(); }

private:
  std::vector<std::pair<ast::Loc, std::string>> contexts;
  mlir::MLIRContext *ctx;
  SourceFiles &files;
  unsigned errors = 0;
  std::set<std::tuple<uint32_t, uint32_t, uint32_t, std::string>> seen;
};

/// Prints diagnostics as `file:line:col: error: message`, the source line and a
/// caret, then each note the same way; a note without a location prints as
/// `note: message`, and an unlocated error as `planc: error: message`.
class DiagnosticPrinter {
public:
  DiagnosticPrinter(mlir::MLIRContext &ctx, SourceFiles &files, llvm::raw_ostream &os);

private:
  void print(mlir::Location loc, mlir::DiagnosticSeverity severity, llvm::StringRef message, bool isNote);
  SourceFiles &files;
  llvm::raw_ostream &os;
  mlir::ScopedDiagnosticHandler handler;
};

/// "did you mean": the closest candidate within a small edit distance, or "".
std::string closestMatch(llvm::StringRef name, const std::vector<std::string> &candidates, unsigned maxDistance = 0);

} // namespace plan::lang

#endif // PLAN_LANG_DIAGNOSTICS_H

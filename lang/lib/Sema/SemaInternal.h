// Sema's internals, shared by the driver (Sema.cpp), constant evaluation
// (Eval.cpp), block and model instantiation (Models.cpp) and the checks of the
// other declaration kinds (Mesh.cpp, Train*.cpp, Retrieval.cpp, Generate.cpp).
#ifndef PLAN_LANG_LIB_SEMA_SEMAINTERNAL_H
#define PLAN_LANG_LIB_SEMA_SEMAINTERNAL_H

#include "Builtins.h"
#include "DeclTable.h"

#include "plan/Lang/Sema.h"
#include "plan/Lang/Units.h"

#include <map>
#include <memory>

namespace plan::lang {

/// Whether `name = e` binds a layer (a primitive layer, a block, or `repeat(n) b`)
/// rather than computing a tensor; names assigned before the statement shadow.
bool isLayerBinding(const DeclTable &decls, const ast::Expr &e, const std::set<std::string> &definedBefore);

/// A compile-time value: the result of evaluating a constant expression.
struct Value {
  enum class Kind { Error, None, Int, Float, Bool, String, Quantity, Name, Word, List, Call };
  Kind kind = Kind::Error;
  ast::Loc loc;
  int64_t i = 0;
  double f = 0; ///< Float; Quantity in base units
  bool b = false;
  std::string s; ///< String text; Name/Word text; Call callee; Quantity unit as written
  units::Dim dim = units::Dim::Bytes;
  struct Item {
    std::string key; ///< empty: positional
    ast::Loc keyLoc;
    Value *operator->() { return value.get(); }
    std::shared_ptr<Value> value;
  };
  std::vector<Item> items; ///< List items, Call arguments

  bool isError() const { return kind == Kind::Error; }
  static Value error() { return Value(); }
  /// "an integer", "a string", "a quantity in GiB", … for diagnostics.
  std::string describe() const;
};

using Env = std::map<std::string, Value>;

class Sema;

/// `key = value` entries of a section, checked for unknown and duplicate keys.
class Section {
public:
  Section(Sema &sema, const std::vector<ast::Entry> &entries, llvm::StringRef what,
          const std::vector<std::string> &keys);
  const ast::Entry *get(const std::string &key) const;
  /// A value entry, or an error if `key` names a nested section.
  const ast::Expr *value(const std::string &key) const;
  /// A nested section, or an error if `key` has a plain value.
  const ast::Entry *section(const std::string &key) const;
  /// Whether an unknown key of this section was probably a misspelling of `key`
  /// (then its absence is not reported again).
  bool misspelt(const std::string &key) const { return suggested.count(key); }

private:
  std::set<std::string> suggested;
  Sema &sema;
  std::string what;
  std::map<std::string, const ast::Entry *> byKey;
};

/// Arguments of a call matched to a signature: positional then named, each named
/// once, unknown names and missing required arguments reported.
struct Signature {
  struct Param {
    std::string name;
    bool required = false;
  };
  std::string name; ///< for diagnostics: "linear", "adamw", …
  std::vector<Param> params;
};
/// Returns name → argument value; std::nullopt on error (already reported).
std::optional<std::map<std::string, Value>> bindArgs(Sema &sema, const Signature &sig, const Value &call);

class Sema {
public:
  Sema(Diags &diags, std::vector<ast::File> files);
  std::optional<sema::Program> run();

  Diags &diags;
  sema::Program program;

  DeclTable decls;

  // --- Eval.cpp: constants.
  Value eval(const ast::Expr &e, const Env *env);
  Value evalBinary(const ast::Expr &e, const Env *env);
  std::optional<int64_t> toInt(const Value &v, llvm::StringRef what);
  std::optional<int64_t> toPositiveInt(const Value &v, llvm::StringRef what);
  std::optional<double> toFloat(const Value &v, llvm::StringRef what);
  std::optional<bool> toBool(const Value &v, llvm::StringRef what);
  std::optional<std::string> toString(const Value &v, llvm::StringRef what);
  std::optional<double> toQuantity(const Value &v, units::Dim dim, llvm::StringRef what);
  /// An identifier-like value (a name or a digit-led word such as `1f1b`).
  std::optional<std::string> toWord(const Value &v, llvm::StringRef what);
  /// One of `choices`; a `did you mean` otherwise.
  std::optional<std::string> toChoice(const Value &v, llvm::StringRef what, const std::vector<std::string> &choices);
  /// A name or a list of names.
  std::optional<std::vector<std::pair<std::string, ast::Loc>>> toNameList(const Value &v, llvm::StringRef what);
  void typeError(const Value &v, llvm::StringRef what, llvm::StringRef expected);
  /// A `bpe("tokenizer.json")` value: its path as written, once the file is found
  /// (relative to `baseDir`); an error at the value otherwise.
  std::optional<std::string> bpePath(const Value &v, const std::string &baseDir);
  /// `path` as the executable resolves it: relative paths against the plan's directory.
  static std::string resolvePath(const std::string &baseDir, const std::string &path);

  // --- Models.cpp: instantiation.
  /// The index into program.models of a concrete model, instantiating it once.
  std::optional<int> modelIndex(const std::string &name, ast::Loc use);
  /// Name-resolution over a block or model body without instantiating it.
  void checkBodyNames(const ast::Decl &decl);

  // --- One file per declaration kind.
  void checkMesh(const ast::Decl &decl);      // Mesh.cpp
  void checkTrain(const ast::Decl &decl);     // Train.cpp, with TrainCheck (Train.h)
  void checkRetrieval(const ast::Decl &decl); // Retrieval.cpp
  void checkGenerate(const ast::Decl &decl);  // Generate.cpp

  /// The real directory of the file holding `loc`, against which a plan's
  /// relative paths resolve at run time.
  std::string baseDir(ast::Loc loc) const;

private:
  std::map<std::string, int> modelIndices;
  std::set<std::string> modelsInProgress;
  std::set<std::string> failedModels;
  friend class Instantiator;
};

} // namespace plan::lang

#endif // PLAN_LANG_LIB_SEMA_SEMAINTERNAL_H

// The .plan abstract syntax tree: plain C++, free of ANTLR and MLIR headers so that
// the parser (built with exceptions) and sema (built without) can both include it.
#ifndef PLAN_LANG_AST_H
#define PLAN_LANG_AST_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace plan::ast {

/// A position in a source file: file index into the SourceFiles table, 1-based
/// line, 1-based byte column. line == 0 means "no location".
struct Loc {
  uint32_t file = 0;
  uint32_t line = 0;
  uint32_t col = 0;
  bool valid() const { return line != 0; }
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

/// `key: value` in a call or a list; key is empty for positional items.
struct Arg {
  std::string key;
  Loc keyLoc;
  ExprPtr value;
};

struct Expr {
  enum class Kind {
    Number, ///< `42`, `3e-4`, `80 GiB`, `450 GB/s`
    Word,   ///< a digit-led word that is not a number, e.g. `1f1b`
    String, ///< `"…"`, escapes resolved
    Name,   ///< an identifier
    List,   ///< `[a, b]` or `[dp: 2, tp: 4]`
    Call,   ///< `f(x, key: v)`
    Member, ///< `wte.attend`
    Unary,  ///< `-x`
    Binary, ///< `a * b`
    Repeat, ///< `repeat(n) block(args)`
  };
  Kind kind;
  Loc loc;

  /// Number: the literal text; Word/String/Name: the text; Member: the member
  /// name; Unary/Binary: the operator; Repeat: the repeated block's name.
  std::string text;
  /// Number: value and whether it is written as an integer.
  double number = 0;
  int64_t integer = 0;
  bool isInteger = false;
  /// Number: unit as written (`GiB`, `GB/s`, `TFLOP/s`, `ms`); empty if none.
  std::string unit;
  Loc unitLoc;

  /// List items, call arguments, repeat arguments.
  std::vector<Arg> args;
  /// Call: the callee; Member/Unary: the operand; Binary: lhs; Repeat: count.
  ExprPtr lhs;
  /// Binary: rhs.
  ExprPtr rhs;
  /// Repeat: whether the block was called with `(…)`.
  bool hasCall = false;
  /// Repeat: `repeat(n, first: block(…)) …`, the first unit's own block call (it may
  /// change the value's type: a ResNet stage's first block); null without one. `firstKey`
  /// is the key as written (sema requires `first`).
  ExprPtr first;
  std::string firstKey;
  Loc firstKeyLoc;

  Expr(Kind k, Loc l) : kind(k), loc(l) {}
};

struct Param {
  std::string name;
  Loc loc;
  std::string type;
  Loc typeLoc;
  ExprPtr defaultValue; ///< may be null
};

struct Stmt {
  enum class Kind { Assign, Return };
  Kind kind;
  std::string name; ///< Assign: the target name
  Loc loc;
  ExprPtr value;
};

/// `key = value`, `key: value` or `key { … }` inside a section.
struct Entry {
  std::string key;
  Loc loc;
  ExprPtr value;               ///< null for a nested section
  std::vector<Entry> children; ///< a nested section's entries
  bool isSection = false;
};

struct Decl {
  enum class Kind { Block, Model, Mesh, Train, Retrieval, Generate };
  Kind kind;
  std::string name;
  Loc loc;     ///< the keyword
  Loc nameLoc; ///< the name
  // block / model with a body
  std::vector<Param> params;
  std::vector<std::pair<std::string, Loc>> inputs;
  std::vector<Stmt> body;
  Loc bodyEnd;
  // `model m = family(args)`
  ExprPtr alias;
  // mesh / train / retrieval / generate
  std::vector<Entry> entries;
};

struct Import {
  std::string path;
  Loc loc;
};

/// One parsed file.
struct File {
  uint32_t id = 0;
  std::string path; ///< as shown in diagnostics
  std::vector<Import> imports;
  std::vector<Decl> decls;
};

const char *declKindName(Decl::Kind kind);

/// Prints the AST as an indented tree (`planc emit --stage ast`).
std::string printAST(const File &file);

} // namespace plan::ast

#endif // PLAN_LANG_AST_H

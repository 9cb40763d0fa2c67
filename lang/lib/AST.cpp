// AST printing for `planc emit --stage ast`: one node per line, indented, with
// line:col so a user can match every node to the source.
#include "plan/Lang/AST.h"

#include <sstream>

using namespace plan::ast;

const char *plan::ast::declKindName(Decl::Kind kind) {
  switch (kind) {
  case Decl::Kind::Block:
    return "block";
  case Decl::Kind::Model:
    return "model";
  case Decl::Kind::Mesh:
    return "mesh";
  case Decl::Kind::Train:
    return "train";
  case Decl::Kind::Retrieval:
    return "retrieval";
  case Decl::Kind::Generate:
    return "generate";
  }
  return "?";
}

namespace {
class Printer {
public:
  std::ostringstream os;

  void line(int indent, const std::string &text, Loc loc) {
    os << std::string(indent * 2, ' ') << text;
    if (loc.valid())
      os << "  @" << loc.line << ":" << loc.col;
    os << "\n";
  }

  static std::string quote(const std::string &s) {
    std::string out = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += c;
      } else if (c == '\n')
        out += "\\n";
      else if (c == '\t')
        out += "\\t";
      else
        out += c;
    }
    return out + "\"";
  }

  void expr(int indent, const Expr &e, const std::string &prefix = "") {
    switch (e.kind) {
    case Expr::Kind::Number:
      line(indent, prefix + "number " + e.text + (e.unit.empty() ? "" : " " + e.unit), e.loc);
      return;
    case Expr::Kind::Word:
      line(indent, prefix + "word " + e.text, e.loc);
      return;
    case Expr::Kind::String:
      line(indent, prefix + "string " + quote(e.text), e.loc);
      return;
    case Expr::Kind::Name:
      line(indent, prefix + "name " + e.text, e.loc);
      return;
    case Expr::Kind::List:
      line(indent, prefix + "list", e.loc);
      args(indent + 1, e.args);
      return;
    case Expr::Kind::Call:
      line(indent, prefix + "call", e.loc);
      expr(indent + 1, *e.lhs, "callee: ");
      args(indent + 1, e.args);
      return;
    case Expr::Kind::Member:
      line(indent, prefix + "member ." + e.text, e.loc);
      expr(indent + 1, *e.lhs);
      return;
    case Expr::Kind::Unary:
      line(indent, prefix + "unary " + e.text, e.loc);
      expr(indent + 1, *e.lhs);
      return;
    case Expr::Kind::Binary:
      line(indent, prefix + "binary " + e.text, e.loc);
      expr(indent + 1, *e.lhs);
      expr(indent + 1, *e.rhs);
      return;
    case Expr::Kind::Repeat:
      line(indent, prefix + "repeat " + e.text, e.loc);
      expr(indent + 1, *e.lhs, "count: ");
      if (e.first)
        expr(indent + 1, *e.first, e.firstKey + ": ");
      args(indent + 1, e.args);
      return;
    }
  }

  void args(int indent, const std::vector<Arg> &as) {
    for (const Arg &a : as)
      expr(indent, *a.value, a.key.empty() ? "" : a.key + ": ");
  }

  void entries(int indent, const std::vector<Entry> &es) {
    for (const Entry &e : es) {
      if (e.isSection) {
        line(indent, "section " + e.key, e.loc);
        entries(indent + 1, e.children);
      } else {
        expr(indent, *e.value, e.key + " = ");
      }
    }
  }

  void decl(const Decl &d) {
    line(0, std::string(declKindName(d.kind)) + " " + d.name, d.loc);
    for (const Param &p : d.params) {
      line(1, "param " + p.name + ": " + p.type, p.loc);
      if (p.defaultValue)
        expr(2, *p.defaultValue, "default: ");
    }
    for (const auto &in : d.inputs)
      line(1, "input " + in.first, in.second);
    for (const Stmt &s : d.body) {
      if (s.kind == Stmt::Kind::Return)
        expr(1, *s.value, "return ");
      else
        expr(1, *s.value, s.name + " = ");
    }
    if (d.alias)
      expr(1, *d.alias, "= ");
    entries(1, d.entries);
  }
};
} // namespace

std::string plan::ast::printAST(const File &file) {
  Printer p;
  p.os << "file " << Printer::quote(file.path) << "\n";
  for (const Import &i : file.imports)
    p.line(0, "import " + Printer::quote(i.path), i.loc);
  for (const Decl &d : file.decls)
    p.decl(d);
  return p.os.str();
}

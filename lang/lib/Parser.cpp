// ANTLR4 glue and the hand-written parse tree → AST builder.
// Compiled with exceptions (the ANTLR runtime needs them); nothing escapes parse().
#include "plan/Lang/Parser.h"

#include "PlanLexer.h"
#include "PlanParser.h"
#include "antlr4-runtime.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>

using namespace plan;
using namespace plan::lang;
using namespace plan_antlr;
using ast::Expr;
using ast::Loc;

namespace {

constexpr int kMaxNesting = 200;
/// Longest chain of operators in one expression (`a + b + …`); deeper ASTs would
/// overflow the stack of the recursive passes that follow.
constexpr int kMaxExprDepth = 1000;

/// Byte offsets of every code point and every line start, so that locations are
/// byte columns (what MLIR's SourceMgr expects) even after non-ASCII text.
class Positions {
public:
  Positions(const std::string &text, uint32_t fileId) : fileId(fileId) {
    lineStarts.push_back(0);
    for (size_t i = 0; i < text.size();) {
      cpToByte.push_back(i);
      unsigned char c = text[i];
      size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
      if (c == '\n')
        lineStarts.push_back(i + 1);
      i += len;
    }
    cpToByte.push_back(text.size());
  }
  Loc at(size_t byteOffset) const {
    auto it = std::upper_bound(lineStarts.begin(), lineStarts.end(), byteOffset);
    size_t line = it - lineStarts.begin();
    return Loc{fileId, uint32_t(line), uint32_t(byteOffset - lineStarts[line - 1] + 1)};
  }
  Loc of(const antlr4::Token *tok) const {
    size_t cp = tok->getStartIndex();
    if (tok->getType() == antlr4::Token::EOF || cp >= cpToByte.size())
      return at(cpToByte.back());
    return at(cpToByte[cp]);
  }
  /// The location just past a token (for "missing ';' after …" style notes).
  Loc after(const antlr4::Token *tok) const {
    size_t cp = tok->getStopIndex() + 1;
    return at(cp < cpToByte.size() ? cpToByte[cp] : cpToByte.back());
  }
  uint32_t fileId;

private:
  std::vector<size_t> cpToByte;
  std::vector<size_t> lineStarts;
};

/// Returns the offset of the first invalid UTF-8 sequence or NUL byte, or npos.
size_t findInvalidUtf8(const std::string &s) {
  size_t i = 0, n = s.size();
  while (i < n) {
    unsigned char c = s[i];
    if (c == 0)
      return i;
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else
      return i;
    if (i + len > n)
      return i;
    for (size_t k = 1; k < len; ++k) {
      unsigned char cc = s[i + k];
      if ((cc & 0xC0) != 0x80)
        return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and out-of-range code points.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return i;
    i += len;
  }
  return std::string::npos;
}

std::string friendlyTokenName(const antlr4::dfa::Vocabulary &vocab, size_t type) {
  if (type == antlr4::Token::EOF)
    return "end of file";
  switch (type) {
  case PlanLexer::ID:
    return "identifier";
  case PlanLexer::NUMBER:
    return "number";
  case PlanLexer::STRING:
    return "string";
  default:
    break;
  }
  std::string lit = vocab.getLiteralName(type);
  if (!lit.empty())
    return lit;
  return vocab.getSymbolicName(type);
}

std::string describeToken(const antlr4::Token *tok) {
  if (!tok || tok->getType() == antlr4::Token::EOF)
    return "end of file";
  return "'" + tok->getText() + "'";
}

/// Records the first syntax error in our own words; ANTLR's recovery after the
/// first error mostly produces follow-on noise, so later ones are dropped.
class SyntaxErrorListener : public antlr4::BaseErrorListener {
public:
  SyntaxErrorListener(const Positions &pos, std::vector<SyntaxDiag> &diags, antlr4::CommonTokenStream &tokens)
      : pos(pos), diags(diags), tokens(tokens) {}

  void syntaxError(antlr4::Recognizer *recognizer, antlr4::Token *offending, size_t, size_t, const std::string &,
                   std::exception_ptr ex) override {
    if (seen++)
      return;
    auto *parser = dynamic_cast<antlr4::Parser *>(recognizer);
    SyntaxDiag d;
    d.loc = offending ? pos.of(offending) : Loc{pos.fileId, 1, 1};
    std::string found = describeToken(offending);

    // Where a prediction failed, ANTLR's expected set is the one at the start of the
    // decision, which names what was already seen: say what may follow instead.
    bool noViable = false;
    size_t rule = size_t(-1);
    antlr4::Token *start = nullptr;
    try {
      if (ex)
        std::rethrow_exception(ex);
    } catch (antlr4::NoViableAltException &nv) {
      noViable = true;
      start = nv.getStartToken();
      if (auto *ctx = dynamic_cast<antlr4::ParserRuleContext *>(nv.getCtx()))
        rule = ctx->getRuleIndex();
    } catch (...) {
    }

    std::vector<std::string> expected;
    if (parser && !noViable) {
      antlr4::misc::IntervalSet set = parser->getExpectedTokens();
      bool identifiers = set.contains(size_t(PlanLexer::ID));
      for (size_t t : set.toList()) {
        if (identifiers && (t == PlanLexer::BLOCK || t == PlanLexer::MESH || t == PlanLexer::TRAIN ||
                            t == PlanLexer::RETRIEVAL || t == PlanLexer::GENERATE || t == PlanLexer::MODEL))
          continue; // contextual keywords are also identifiers: don't list them twice
        expected.push_back(friendlyTokenName(parser->getVocabulary(), t));
      }
    }
    if (noViable && start && start != offending && (rule == PlanParser::RuleEntry || rule == PlanParser::RuleSection)) {
      d.message = "expected '=', ':' or '{' after '" + start->getText() + "', found " + found;
    } else if (noViable && start && start != offending && rule == PlanParser::RuleStmt) {
      d.message = "expected '=' after '" + start->getText() + "', found " + found;
    } else if (!expected.empty() && expected.size() <= 10) {
      std::string list;
      for (size_t i = 0; i < expected.size(); ++i) {
        if (i)
          list += (i + 1 == expected.size()) ? " or " : ", ";
        list += expected[i];
      }
      d.message = "expected " + list + ", found " + found;
    } else {
      d.message = "unexpected " + found;
    }

    if (offending) {
      std::vector<antlr4::Token *> open;
      for (size_t i = 0; i < tokens.size(); ++i) {
        antlr4::Token *t = tokens.get(i);
        if (t->getTokenIndex() >= offending->getTokenIndex())
          break;
        size_t ty = t->getType();
        if (ty == PlanLexer::LBRACE || ty == PlanLexer::LPAREN || ty == PlanLexer::LBRACK)
          open.push_back(t);
        else if ((ty == PlanLexer::RBRACE || ty == PlanLexer::RPAREN || ty == PlanLexer::RBRACK) && !open.empty())
          open.pop_back();
      }
      auto opener = [](size_t closer) {
        return closer == PlanLexer::RBRACE   ? PlanLexer::LBRACE
               : closer == PlanLexer::RPAREN ? PlanLexer::LPAREN
                                             : PlanLexer::LBRACK;
      };
      auto declKeyword = [&](antlr4::Token *tk) {
        if (!tk || tk->getCharPositionInLine() != 0)
          return false;
        size_t ty = tk->getType();
        return ty == PlanLexer::MESH || ty == PlanLexer::TRAIN || ty == PlanLexer::MODEL || ty == PlanLexer::BLOCK ||
               ty == PlanLexer::RETRIEVAL || ty == PlanLexer::GENERATE || ty == PlanLexer::IMPORT;
      };
      antlr4::Token *before = offending->getTokenIndex() > 0 ? tokens.get(offending->getTokenIndex() - 1) : nullptr;
      size_t ty = offending->getType();
      bool closing = ty == PlanLexer::RBRACE || ty == PlanLexer::RPAREN || ty == PlanLexer::RBRACK;
      bool hasOpener = false;
      for (antlr4::Token *o : open)
        hasOpener |= closing && o->getType() == opener(ty);
      auto unclosedNote = [&](antlr4::Token *o) {
        const char *close = o->getType() == PlanLexer::LBRACE   ? "'}'"
                            : o->getType() == PlanLexer::LPAREN ? "')'"
                                                                : "']'";
        d.notes.push_back(
            {pos.of(o), std::string("unclosed '") + o->getText() + "' opened here; a " + close + " may be missing"});
      };
      antlr4::Token *decl = declKeyword(offending) ? offending : declKeyword(before) ? before : nullptr;
      if (!open.empty() && decl) {
        // A declaration keyword at the start of a line inside an open section: the
        // section's '}' is missing.
        d.loc = pos.of(decl);
        size_t o = open.back()->getType();
        d.message = std::string("expected '") +
                    (o == PlanLexer::LBRACE   ? "}"
                     : o == PlanLexer::LPAREN ? ")"
                                              : "]") +
                    "' before the next declaration, found '" + decl->getText() + "'";
        unclosedNote(open.back());
      } else if (closing && !hasOpener) {
        d.message = "unexpected " + found + ": no '" +
                    std::string(1, "({["[ty == PlanLexer::RPAREN   ? 0
                                         : ty == PlanLexer::RBRACE ? 1
                                                                   : 2]) +
                    "' is open here";
      } else if (!open.empty() && (ty == antlr4::Token::EOF || closing)) {
        unclosedNote(open.back());
      }
    }
    diags.push_back(std::move(d));
  }
  int seen = 0;

private:
  const Positions &pos;
  std::vector<SyntaxDiag> &diags;
  antlr4::CommonTokenStream &tokens;
};

/// What a digit-led token is: a number, a word such as `1f1b`, or a malformed
/// number with a hint for the user.
struct NumberClass {
  enum Kind { Valid, Word, Invalid } kind = Invalid;
  bool isInteger = false;
  std::string hint;
};

bool isDigit(char c) { return c >= '0' && c <= '9'; }

/// Validates digits with single `_` separators between them; advances i.
bool digitRun(const std::string &s, size_t &i) {
  if (i >= s.size() || !isDigit(s[i]))
    return false;
  ++i;
  while (i < s.size()) {
    if (isDigit(s[i])) {
      ++i;
    } else if (s[i] == '_' && i + 1 < s.size() && isDigit(s[i + 1])) {
      i += 2;
    } else {
      break;
    }
  }
  return true;
}

std::string numberHint(const std::string &text) {
  if (text.find("__") != std::string::npos || text.back() == '_')
    return ": '_' may only separate two digits, as in 1_000_000";
  if (std::count(text.begin(), text.end(), '.') > 1)
    return ": a number has at most one decimal point";
  if (text.back() == 'e' || text.back() == 'E' || text.back() == '+' || text.back() == '-')
    return ": the exponent has no digits";
  size_t j = 0;
  while (j < text.size() && (isDigit(text[j]) || text[j] == '.' || text[j] == '_'))
    ++j;
  if (j < text.size() && (text[j] == 'e' || text[j] == 'E') && j + 1 < text.size() &&
      (isDigit(text[j + 1]) || text[j + 1] == '+' || text[j + 1] == '-' || text[j + 1] == '_'))
    return ": the exponent is digits only, as in 1e-4";
  if (j < text.size() && std::isalpha((unsigned char)text[j]))
    return "; put a space between a number and its unit, as in '" + text.substr(0, j) + " " + text.substr(j) + "'";
  return "";
}

NumberClass classifyNumber(const std::string &text) {
  NumberClass nc;
  size_t i = 0;
  bool ok = digitRun(text, i);
  nc.isInteger = true;
  if (ok && i < text.size() && text[i] == '.') {
    ++i;
    nc.isInteger = false;
    ok = digitRun(text, i);
  }
  if (ok && i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    nc.isInteger = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-'))
      ++i;
    size_t start = i;
    while (i < text.size() && isDigit(text[i]))
      ++i;
    ok = i > start;
  }
  if (ok && i == text.size()) {
    nc.kind = NumberClass::Valid;
    return nc;
  }
  // Digits then letters and digits (`1f1b`), but not an exponent missing its digits.
  size_t j = 0;
  while (j < text.size() && isDigit(text[j]))
    ++j;
  bool word = j > 0 && j < text.size() && std::isalpha((unsigned char)text[j]) &&
              !((text[j] == 'e' || text[j] == 'E') && j + 1 == text.size());
  for (size_t k = j; word && k < text.size(); ++k)
    word = std::isalnum((unsigned char)text[k]);
  nc.kind = word ? NumberClass::Word : NumberClass::Invalid;
  if (!word)
    nc.hint = numberHint(text);
  return nc;
}

/// The offset of a `/*` that is never closed, or npos. Skips strings and line comments.
size_t findUnterminatedComment(const std::string &s) {
  size_t i = 0, n = s.size();
  while (i < n) {
    if (s[i] == '"') {
      for (++i; i < n && s[i] != '"' && s[i] != '\n'; ++i)
        if (s[i] == '\\')
          ++i;
      ++i;
    } else if (s.compare(i, 2, "//") == 0) {
      while (i < n && s[i] != '\n')
        ++i;
    } else if (s.compare(i, 2, "/*") == 0) {
      size_t close = s.find("*/", i + 2);
      if (close == std::string::npos)
        return i;
      i = close + 2;
    } else {
      ++i;
    }
  }
  return std::string::npos;
}

/// Parse tree → AST.
class Builder {
public:
  Builder(const Positions &pos, std::vector<SyntaxDiag> &diags) : pos(pos), diags(diags) {}

  void buildFile(PlanParser::FileContext *ctx, ast::File &out) {
    for (auto *child : ctx->children) {
      if (auto *imp = dynamic_cast<PlanParser::ImportDeclContext *>(child)) {
        ast::Import i;
        i.loc = pos.of(imp->IMPORT()->getSymbol());
        i.path = unquote(imp->STRING()->getSymbol());
        out.imports.push_back(std::move(i));
      } else if (auto *d = dynamic_cast<PlanParser::DeclContext *>(child)) {
        out.decls.push_back(buildDecl(d));
      }
    }
  }

private:
  void error(Loc loc, std::string msg) { diags.push_back({loc, std::move(msg), {}}); }

  Loc loc(antlr4::ParserRuleContext *ctx) { return pos.of(ctx->getStart()); }
  Loc loc(antlr4::tree::TerminalNode *n) { return pos.of(n->getSymbol()); }

  std::string unquote(antlr4::Token *tok) {
    std::string raw = tok->getText();
    std::string out;
    // raw is "…" with escapes; validate each one.
    for (size_t i = 1; i + 1 < raw.size(); ++i) {
      char c = raw[i];
      if (c != '\\') {
        out += c;
        continue;
      }
      char e = raw[++i];
      switch (e) {
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      default: {
        Loc l = pos.of(tok);
        l.col += uint32_t(i - 1); // columns are bytes, so this is the backslash's column
        error(l, std::string("unknown escape sequence '\\") + e + "' in string; the escapes are \\\" \\\\ \\n \\t");
      }
      }
    }
    return out;
  }

  ast::Decl buildDecl(PlanParser::DeclContext *ctx) {
    ast::Decl d;
    d.loc = loc(ctx);
    if (auto *b = dynamic_cast<PlanParser::BlockDeclContext *>(ctx)) {
      d.kind = ast::Decl::Kind::Block;
      fillCallable(d, b->name, b->params(), b->inputs(), b->body());
    } else if (auto *m = dynamic_cast<PlanParser::ModelDeclContext *>(ctx)) {
      d.kind = ast::Decl::Kind::Model;
      fillCallable(d, m->name, m->params(), m->inputs(), m->body());
    } else if (auto *a = dynamic_cast<PlanParser::ModelAliasContext *>(ctx)) {
      d.kind = ast::Decl::Kind::Model;
      d.name = a->name->getText();
      d.nameLoc = loc(a->name);
      d.alias = buildExpr(a->expr());
    } else if (auto *s = dynamic_cast<PlanParser::SectionDeclContext *>(ctx)) {
      switch (s->kind->getType()) {
      case PlanLexer::MESH:
        d.kind = ast::Decl::Kind::Mesh;
        break;
      case PlanLexer::TRAIN:
        d.kind = ast::Decl::Kind::Train;
        break;
      case PlanLexer::RETRIEVAL:
        d.kind = ast::Decl::Kind::Retrieval;
        break;
      default:
        d.kind = ast::Decl::Kind::Generate;
        break;
      }
      d.name = s->name->getText();
      d.nameLoc = loc(s->name);
      d.entries = buildSection(s->section());
    }
    return d;
  }

  void fillCallable(ast::Decl &d, PlanParser::IdentContext *name, PlanParser::ParamsContext *params,
                    PlanParser::InputsContext *inputs, PlanParser::BodyContext *body) {
    d.name = name->getText();
    d.nameLoc = loc(name);
    for (auto *p : params->param()) {
      ast::Param param;
      param.name = p->name->getText();
      param.loc = loc(p->name);
      param.type = p->type->getText();
      param.typeLoc = loc(p->type);
      if (p->expr())
        param.defaultValue = buildExpr(p->expr());
      d.params.push_back(std::move(param));
    }
    for (auto *i : inputs->ident())
      d.inputs.push_back({i->getText(), loc(i)});
    for (auto *s : body->stmt()) {
      ast::Stmt st;
      st.loc = loc(s);
      if (auto *r = dynamic_cast<PlanParser::ReturnStmtContext *>(s)) {
        st.kind = ast::Stmt::Kind::Return;
        st.value = buildExpr(r->expr());
      } else {
        auto *a = static_cast<PlanParser::AssignStmtContext *>(s);
        st.kind = ast::Stmt::Kind::Assign;
        st.name = a->ident()->getText();
        st.value = buildExpr(a->expr());
      }
      d.body.push_back(std::move(st));
    }
    d.bodyEnd = loc(body->RBRACE());
  }

  std::vector<ast::Entry> buildSection(PlanParser::SectionContext *ctx) {
    std::vector<ast::Entry> entries;
    for (auto *e : ctx->entry()) {
      ast::Entry entry;
      if (auto *v = dynamic_cast<PlanParser::ValueEntryContext *>(e)) {
        entry.key = v->key->getText();
        entry.loc = loc(v->key);
        entry.value = buildExpr(v->expr());
      } else {
        auto *s = static_cast<PlanParser::SectionEntryContext *>(e);
        entry.key = s->key->getText();
        entry.loc = loc(s->key);
        entry.isSection = true;
        entry.children = buildSection(s->section());
      }
      entries.push_back(std::move(entry));
    }
    return entries;
  }

  void buildArgs(std::vector<ast::Arg> &out, PlanParser::ArgsContext *args) {
    if (!args)
      return;
    for (auto *a : args->arg()) {
      ast::Arg arg;
      if (a->key) {
        arg.key = a->key->getText();
        arg.keyLoc = loc(a->key);
      }
      arg.value = buildExpr(a->expr());
      out.push_back(std::move(arg));
    }
  }

  ast::ExprPtr buildExpr(PlanParser::ExprContext *ctx) {
    struct Depth {
      int &d;
      explicit Depth(int &d) : d(d) { ++d; }
      ~Depth() { --d; }
    } guard(depth);
    if (depth > kMaxExprDepth) {
      if (!depthReported)
        error(loc(ctx), "expression nested deeper than " + std::to_string(kMaxExprDepth) +
                            " levels; split it with intermediate bindings");
      depthReported = true;
      return std::make_unique<Expr>(Expr::Kind::Name, loc(ctx));
    }
    using K = Expr::Kind;
    if (auto *m = dynamic_cast<PlanParser::MemberExprContext *>(ctx)) {
      auto e = std::make_unique<Expr>(K::Member, loc(m->ident()));
      e->text = m->ident()->getText();
      e->lhs = buildExpr(m->expr());
      return e;
    }
    if (auto *c = dynamic_cast<PlanParser::CallExprContext *>(ctx)) {
      auto e = std::make_unique<Expr>(K::Call, loc(c));
      e->lhs = buildExpr(c->expr());
      buildArgs(e->args, c->args());
      return e;
    }
    if (auto *u = dynamic_cast<PlanParser::UnaryExprContext *>(ctx)) {
      auto e = std::make_unique<Expr>(K::Unary, loc(u));
      e->text = u->op->getText();
      e->lhs = buildExpr(u->expr());
      return e;
    }
    if (auto *b = dynamic_cast<PlanParser::BinaryExprContext *>(ctx)) {
      auto e = std::make_unique<Expr>(K::Binary, pos.of(b->op));
      e->text = b->op->getText();
      e->lhs = buildExpr(b->expr(0));
      e->rhs = buildExpr(b->expr(1));
      return e;
    }
    if (auto *r = dynamic_cast<PlanParser::RepeatExprContext *>(ctx)) {
      auto e = std::make_unique<Expr>(K::Repeat, loc(r));
      e->lhs = buildExpr(r->count);
      e->text = r->callee->getText();
      e->unitLoc = loc(r->callee); // where the repeated block is named
      e->hasCall = r->LPAREN().size() > 1;
      buildArgs(e->args, r->args());
      if (r->first) {
        e->first = buildExpr(r->first);
        e->firstKey = r->firstKey->getText();
        e->firstKeyLoc = loc(r->firstKey);
      }
      return e;
    }
    if (auto *n = dynamic_cast<PlanParser::NumberExprContext *>(ctx))
      return buildNumber(n);
    if (auto *s = dynamic_cast<PlanParser::StringExprContext *>(ctx)) {
      auto e = std::make_unique<Expr>(K::String, loc(s));
      e->text = unquote(s->STRING()->getSymbol());
      return e;
    }
    if (auto *n = dynamic_cast<PlanParser::NameExprContext *>(ctx)) {
      auto e = std::make_unique<Expr>(K::Name, loc(n));
      e->text = n->getText();
      return e;
    }
    if (auto *l = dynamic_cast<PlanParser::ListExprContext *>(ctx)) {
      auto e = std::make_unique<Expr>(K::List, loc(l));
      for (auto *it : l->item()) {
        ast::Arg arg;
        if (it->key) {
          arg.key = it->key->getText();
          arg.keyLoc = loc(it->key);
        }
        arg.value = buildExpr(it->expr());
        e->args.push_back(std::move(arg));
      }
      return e;
    }
    auto *p = static_cast<PlanParser::ParenExprContext *>(ctx);
    return buildExpr(p->expr());
  }

  ast::ExprPtr buildNumber(PlanParser::NumberExprContext *n) {
    auto *tok = n->NUMBER()->getSymbol();
    std::string text = tok->getText();
    Loc l = pos.of(tok);
    NumberClass nc = classifyNumber(text);
    if (nc.kind == NumberClass::Word && !n->unit()) {
      // A digit-led word like `1f1b` names a pipeline schedule; sema decides
      // whether a word is acceptable where it appears.
      auto e = std::make_unique<Expr>(Expr::Kind::Word, l);
      e->text = text;
      return e;
    }
    if (nc.kind != NumberClass::Valid) {
      error(l, "invalid number '" + text + "'" + nc.hint);
      auto e = std::make_unique<Expr>(Expr::Kind::Number, l);
      e->text = text;
      return e;
    }
    bool isInt = nc.isInteger;
    std::string digits;
    for (char c : text)
      if (c != '_')
        digits += c;
    auto e = std::make_unique<Expr>(Expr::Kind::Number, l);
    e->text = text;
    e->isInteger = isInt;
    errno = 0;
    e->number = std::strtod(digits.c_str(), nullptr);
    if (isInt) {
      errno = 0;
      long long v = std::strtoll(digits.c_str(), nullptr, 10);
      if (errno == ERANGE)
        error(l, "integer '" + text + "' does not fit in 64 bits");
      e->integer = v;
    } else if (!std::isfinite(e->number)) {
      error(l, "number '" + text + "' is out of range");
    }
    if (auto *u = n->unit()) {
      e->unit = u->ID(0)->getText();
      if (u->ID().size() > 1)
        e->unit += "/" + u->ID(1)->getText();
      e->unitLoc = loc(u);
    }
    return e;
  }

  const Positions &pos;
  std::vector<SyntaxDiag> &diags;
  int depth = 0;
  bool depthReported = false;
};

std::string describeChar(const std::string &text) {
  unsigned char c = text.empty() ? 0 : text[0];
  if (c >= 0x20 && c < 0x7F)
    return "'" + text + "'";
  // Non-printable or non-ASCII: show the code point.
  uint32_t cp = 0;
  size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t k = 1; k < len && k < text.size(); ++k)
    cp = (cp << 6) | (text[k] & 0x3F);
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", cp);
  return buf;
}

} // namespace

bool plan::lang::parse(const std::string &text, uint32_t fileId, ast::File &out, std::vector<SyntaxDiag> &diags) {
  size_t startErrors = diags.size();
  out.id = fileId;
  try {
    Positions positions(text, fileId);
    size_t bad = findInvalidUtf8(text);
    if (bad != std::string::npos) {
      // Positions assumed valid UTF-8; compute the line/col by bytes directly.
      uint32_t line = 1, col = 1;
      for (size_t i = 0; i < bad; ++i) {
        if (text[i] == '\n') {
          ++line;
          col = 1;
        } else {
          ++col;
        }
      }
      char buf[64];
      std::snprintf(buf, sizeof buf, "%s (byte 0x%02X)",
                    text[bad] == 0 ? "NUL byte in source" : "source is not valid UTF-8",
                    (unsigned)(unsigned char)text[bad]);
      diags.push_back({Loc{fileId, line, col}, buf, {}});
      return false;
    }

    size_t comment = findUnterminatedComment(text);
    if (comment != std::string::npos) {
      diags.push_back({positions.at(comment), "unterminated comment: '/*' is never closed by '*/'", {}});
      return false;
    }

    antlr4::ANTLRInputStream input(text);
    PlanLexer lexer(&input);
    lexer.removeErrorListeners();
    antlr4::CommonTokenStream tokens(&lexer);
    tokens.fill();

    // Lexical errors and runaway nesting, before the parser sees anything.
    int depth = 0, signs = 0;
    for (antlr4::Token *t : tokens.getTokens()) {
      // A run of unary signs recurses in the parser like nested brackets do.
      signs = (t->getType() == PlanLexer::PLUS || t->getType() == PlanLexer::MINUS) ? signs + 1 : 0;
      if (signs == kMaxNesting + 1)
        diags.push_back({positions.of(t), "more than " + std::to_string(kMaxNesting) + " signs in a row", {}});
      switch (t->getType()) {
      case PlanLexer::STRAY:
        diags.push_back({positions.of(t), "unexpected character " + describeChar(t->getText()), {}});
        break;
      case PlanLexer::NUMBER: {
        NumberClass nc = classifyNumber(t->getText());
        if (nc.kind == NumberClass::Invalid)
          diags.push_back({positions.of(t), "invalid number '" + t->getText() + "'" + nc.hint, {}});
        break;
      }
      case PlanLexer::UNTERMINATED_STRING:
        diags.push_back({positions.of(t), "unterminated string: a string ends with '\"' on the same line", {}});
        break;
      case PlanLexer::LBRACE:
      case PlanLexer::LPAREN:
      case PlanLexer::LBRACK:
        if (++depth == kMaxNesting + 1)
          diags.push_back(
              {positions.of(t), "brackets nested deeper than " + std::to_string(kMaxNesting) + " levels", {}});
        break;
      case PlanLexer::RBRACE:
      case PlanLexer::RPAREN:
      case PlanLexer::RBRACK:
        if (depth > 0)
          --depth;
        break;
      default:
        break;
      }
    }
    if (diags.size() != startErrors)
      return false;

    PlanParser parser(&tokens);
    parser.removeErrorListeners();
    SyntaxErrorListener listener(positions, diags, tokens);
    parser.addErrorListener(&listener);
    PlanParser::FileContext *tree = parser.file();
    if (listener.seen)
      return false;

    Builder builder(positions, diags);
    builder.buildFile(tree, out);
  } catch (const std::exception &e) {
    diags.push_back({Loc{fileId, 1, 1}, std::string("internal parser error: ") + e.what(), {}});
  } catch (...) {
    diags.push_back({Loc{fileId, 1, 1}, "internal parser error", {}});
  }
  return diags.size() == startErrors;
}

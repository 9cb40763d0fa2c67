// Parsing .plan text into the AST. The implementation wraps the ANTLR4 parser and
// is compiled with exceptions; this header is plain C++ so MLIR code can call it.
#ifndef PLAN_LANG_PARSER_H
#define PLAN_LANG_PARSER_H

#include "plan/Lang/AST.h"

#include <string>
#include <utility>
#include <vector>

namespace plan::lang {

/// A lexical or syntax error found while parsing, with optional notes.
struct SyntaxDiag {
  ast::Loc loc;
  std::string message;
  std::vector<std::pair<ast::Loc, std::string>> notes;
};

/// Parses `text` (the contents of file `fileId`) into `out`. Returns false and
/// appends to `diags` on any lexical or syntax error; `out` is then incomplete.
/// Never throws, whatever the input.
bool parse(const std::string &text, uint32_t fileId, ast::File &out, std::vector<SyntaxDiag> &diags);

} // namespace plan::lang

#endif // PLAN_LANG_PARSER_H

// The global namespace: every top-level declaration of a program by name.
#ifndef PLAN_LANG_LIB_SEMA_DECLTABLE_H
#define PLAN_LANG_LIB_SEMA_DECLTABLE_H

#include "plan/Lang/AST.h"
#include "plan/Lang/Diagnostics.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace plan::lang {

class DeclTable {
public:
  /// Enters the declarations of `files`, reporting built-in names and duplicates.
  void declare(const std::vector<ast::File> &files, Diags &diags);
  /// The declaration `name` refers to, or null.
  const ast::Decl *lookup(const std::string &name) const;
  /// The declared names `filter` accepts, in name order (for "did you mean").
  std::vector<std::string> names(std::function<bool(const ast::Decl &)> filter) const;

private:
  std::map<std::string, const ast::Decl *> byName;
};

} // namespace plan::lang

#endif // PLAN_LANG_LIB_SEMA_DECLTABLE_H

// The declaration table: one name, one declaration, no built-in name taken.
#include "DeclTable.h"

#include "Builtins.h"

using namespace plan;
using namespace plan::lang;

void DeclTable::declare(const std::vector<ast::File> &files, Diags &diags) {
  const std::set<std::string> &reserved = reservedNames();
  // Imports load after their importers, so walking back from the last file puts a
  // clash between a plan and its stdlib at the plan's own declaration.
  for (auto fit = files.rbegin(); fit != files.rend(); ++fit)
    for (const ast::Decl &d : fit->decls) {
      if (reserved.count(d.name)) {
        diags.error(d.nameLoc, "'" + d.name + "' is a built-in name and cannot name a " + ast::declKindName(d.kind));
        continue;
      }
      auto [it, inserted] = byName.insert({d.name, &d});
      if (!inserted) {
        const ast::Decl &prev = *it->second;
        diags.error(d.nameLoc, std::string("duplicate declaration of '") + d.name + "'")
            .note(prev.nameLoc,
                  std::string("'") + d.name + "' is first declared here as a " + ast::declKindName(prev.kind));
      }
    }
}

const ast::Decl *DeclTable::lookup(const std::string &name) const {
  auto it = byName.find(name);
  return it == byName.end() ? nullptr : it->second;
}

std::vector<std::string> DeclTable::names(std::function<bool(const ast::Decl &)> filter) const {
  std::vector<std::string> names;
  for (auto &kv : byName)
    if (filter(*kv.second))
      names.push_back(kv.first);
  return names;
}

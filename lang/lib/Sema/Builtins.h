// The language's built-in names: primitive layers, tensor functions and parameter
// types, which no declaration may take.
#ifndef PLAN_LANG_LIB_SEMA_BUILTINS_H
#define PLAN_LANG_LIB_SEMA_BUILTINS_H

#include <set>
#include <string>
#include <vector>

namespace plan::lang {

const std::vector<std::string> &layerNames();
const std::vector<std::string> &functionNames();
const std::vector<std::string> &paramTypeNames();
bool isLayerName(const std::string &n);
bool isFunctionName(const std::string &n);
/// The built-in names and the literals `true`, `false` and `none`.
const std::set<std::string> &reservedNames();

} // namespace plan::lang

#endif // PLAN_LANG_LIB_SEMA_BUILTINS_H

// The tables of built-in names, shared by the declaration table (which reserves
// them) and the instantiator (which gives them meaning).
#include "Builtins.h"

#include <algorithm>

using namespace plan::lang;

const std::vector<std::string> &plan::lang::layerNames() {
  static const std::vector<std::string> n = {"embedding", "linear",  "layernorm", "rmsnorm", "attention",
                                             "dropout",   "conv2d",  "batchnorm", "maxpool", "avgpool",
                                             "shortcut"};
  return n;
}
const std::vector<std::string> &plan::lang::functionNames() {
  static const std::vector<std::string> n = {"gelu", "silu", "relu", "positions", "cross_entropy", "flatten"};
  return n;
}
const std::vector<std::string> &plan::lang::paramTypeNames() {
  static const std::vector<std::string> n = {"int", "float", "bool", "string"};
  return n;
}
bool plan::lang::isLayerName(const std::string &n) {
  auto &v = layerNames();
  return std::find(v.begin(), v.end(), n) != v.end();
}
bool plan::lang::isFunctionName(const std::string &n) {
  auto &v = functionNames();
  return std::find(v.begin(), v.end(), n) != v.end();
}

const std::set<std::string> &plan::lang::reservedNames() {
  static const std::set<std::string> reserved = [] {
    std::set<std::string> r = {"true", "false", "none"};
    for (const auto *table : {&layerNames(), &functionNames(), &paramTypeNames()})
      r.insert(table->begin(), table->end());
    return r;
  }();
  return reserved;
}

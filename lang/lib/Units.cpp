// The unit table: one place that says what every unit means.
#include "plan/Lang/Units.h"

#include <utility>

using namespace plan::units;

namespace {
struct Entry {
  const char *name;
  Unit unit;
};
const std::vector<Entry> &table() {
  static const std::vector<Entry> t = [] {
    std::vector<Entry> v;
    const std::pair<const char *, double> sizes[] = {{"B", 1},
                                                     {"KB", 1e3},
                                                     {"MB", 1e6},
                                                     {"GB", 1e9},
                                                     {"TB", 1e12},
                                                     {"PB", 1e15},
                                                     {"KiB", 1024.0},
                                                     {"MiB", 1048576.0},
                                                     {"GiB", 1073741824.0},
                                                     {"TiB", 1099511627776.0},
                                                     {"PiB", 1125899906842624.0}};
    for (auto &[n, f] : sizes) {
      v.push_back({n, {Dim::Bytes, f}});
    }
    static std::vector<std::string> rateNames; // keeps the "X/s" strings alive
    rateNames.reserve(16);
    for (auto &[n, f] : sizes) {
      rateNames.push_back(std::string(n) + "/s");
      v.push_back({rateNames.back().c_str(), {Dim::BytesPerSecond, f}});
    }
    const std::pair<const char *, double> flops[] = {{"FLOP/s", 1},    {"KFLOP/s", 1e3},  {"MFLOP/s", 1e6},
                                                     {"GFLOP/s", 1e9}, {"TFLOP/s", 1e12}, {"PFLOP/s", 1e15}};
    for (auto &[n, f] : flops)
      v.push_back({n, {Dim::FlopsPerSecond, f}});
    const std::pair<const char *, double> times[] = {{"s", 1},     {"ms", 1e-3}, {"us", 1e-6},
                                                     {"ns", 1e-9}, {"min", 60},  {"h", 3600}};
    for (auto &[n, f] : times)
      v.push_back({n, {Dim::Seconds, f}});
    return v;
  }();
  return t;
}
} // namespace

const char *plan::units::describe(Dim d) {
  switch (d) {
  case Dim::Bytes:
    return "a size in bytes";
  case Dim::BytesPerSecond:
    return "a bandwidth";
  case Dim::FlopsPerSecond:
    return "a compute rate";
  case Dim::Seconds:
    return "a duration";
  }
  return "a quantity";
}

const char *plan::units::example(Dim d) {
  switch (d) {
  case Dim::Bytes:
    return "80 GiB";
  case Dim::BytesPerSecond:
    return "450 GB/s";
  case Dim::FlopsPerSecond:
    return "989 TFLOP/s";
  case Dim::Seconds:
    return "2 ms";
  }
  return "";
}

std::optional<Unit> plan::units::lookup(const std::string &name) {
  for (const Entry &e : table())
    if (name == e.name)
      return e.unit;
  return std::nullopt;
}

const std::vector<std::string> &plan::units::allNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const Entry &e : table())
      n.push_back(e.name);
    return n;
  }();
  return names;
}

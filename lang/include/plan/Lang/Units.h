// Units of quantities in .plan files: sizes, rates, compute rates and durations.
#ifndef PLAN_LANG_UNITS_H
#define PLAN_LANG_UNITS_H

#include <optional>
#include <string>
#include <vector>

namespace plan::units {

enum class Dim { Bytes, BytesPerSecond, FlopsPerSecond, Seconds };

/// "a size in bytes", "a bandwidth", … for diagnostics.
const char *describe(Dim d);
/// An example quantity of that dimension, for diagnostics ("80 GiB").
const char *example(Dim d);

struct Unit {
  Dim dim;
  double factor; ///< multiplier to the base unit (B, B/s, FLOP/s, s)
};

/// Looks up a unit as written (`GiB`, `GB/s`, `TFLOP/s`, `ms`); case-sensitive.
std::optional<Unit> lookup(const std::string &name);
/// Every unit name, for "did you mean" and help.
const std::vector<std::string> &allNames();

} // namespace plan::units

#endif // PLAN_LANG_UNITS_H

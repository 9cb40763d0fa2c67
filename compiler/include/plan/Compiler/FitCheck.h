// The memory-fit rule of `planc check`, on top of sema's static rules.
#ifndef PLAN_COMPILER_FITCHECK_H
#define PLAN_COMPILER_FITCHECK_H

#include "plan/Lang/Sema.h"

namespace plan {

/// For every train plan of the main file whose mesh states its device memory,
/// reports an error at the declaration when the cost model's per-device total
/// exceeds it, with the breakdown and the fastest layouts that would fit.
/// Returns false if any plan does not fit.
bool checkFit(const sema::Program &program, lang::Diags &diags, const std::string &entry = "");

} // namespace plan

#endif // PLAN_COMPILER_FITCHECK_H

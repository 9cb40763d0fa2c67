// Lowers a checked program to the `plan` dialect.
#ifndef PLAN_COMPILER_PLANGEN_H
#define PLAN_COMPILER_PLANGEN_H

#include "plan/Lang/Sema.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace plan {

/// Builds a module with one `plan` op per declaration of the main file (file 0)
/// and every declaration those reference, each located at its source.
mlir::OwningOpRef<mlir::ModuleOp> genPlanModule(const sema::Program &program, const lang::Diags &diags);

/// A path written in a plan, resolved against the plan file's directory (the
/// `base_dir` attribute of its declaration); absolute and empty paths stay.
std::string resolvePlanPath(llvm::StringRef baseDir, llvm::StringRef path);

} // namespace plan

#endif // PLAN_COMPILER_PLANGEN_H

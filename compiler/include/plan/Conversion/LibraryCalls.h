// The nn ops lowered to calls (BLAS, planrt kernels) at bufferization.
#ifndef PLAN_CONVERSION_LIBRARYCALLS_H
#define PLAN_CONVERSION_LIBRARYCALLS_H

#include "mlir/IR/DialectRegistry.h"

namespace plan {
/// Attaches the BufferizableOpInterface models that turn GEMMs, attention,
/// normalisations, embeddings and cross-entropy into calls.
void registerLibraryCallModels(mlir::DialectRegistry &registry);
} // namespace plan

#endif // PLAN_CONVERSION_LIBRARYCALLS_H

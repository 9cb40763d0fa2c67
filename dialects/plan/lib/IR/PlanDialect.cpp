// The `plan` dialect: registration, enums and attribute verifiers.
#include "plan/Dialect/Plan/IR/Plan.h"
#include "planrt_manifest.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace plan::pl;

#include "plan/Dialect/Plan/IR/PlanDialect.cpp.inc"
#include "plan/Dialect/Plan/IR/PlanEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "plan/Dialect/Plan/IR/PlanAttrs.cpp.inc"

void PlanDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "plan/Dialect/Plan/IR/PlanAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "plan/Dialect/Plan/IR/PlanOps.cpp.inc"
      >();
}

LogicalResult AxisAttr::verify(function_ref<InFlightDiagnostic()> emitError, StringAttr name, int64_t size) {
  if (!name || name.getValue().empty())
    return emitError() << "a mesh axis needs a name";
  if (size < 1)
    return emitError() << "mesh axis '" << name.getValue() << "' has size " << size << "; sizes are at least 1";
  return success();
}

static LogicalResult verifyNames(function_ref<InFlightDiagnostic()> emitError, ArrayAttr names, StringRef what) {
  if (!names)
    return emitError() << what << " must be a list of axis names";
  for (Attribute a : names)
    if (!isa<StringAttr>(a))
      return emitError() << what << " must be a list of axis names";
  return success();
}

LogicalResult ParallelAttr::verify(function_ref<InFlightDiagnostic()> emitError, ArrayAttr data, int64_t zero,
                                   StringAttr tensor, StringAttr pipeline, int64_t stages, PipelineSchedule schedule,
                                   BoolAttr sequence, ArrayAttr replicate, int64_t bucket, DictionaryAttr offload,
                                   bool keepActivations) {
  if (failed(verifyNames(emitError, data, "'data'")) || failed(verifyNames(emitError, replicate, "'replicate'")))
    return failure();
  if (zero < 0 || zero > 3)
    return emitError() << "ZeRO stage must be 0, 1, 2 or 3, not " << zero;
  if (zero > 0 && data.empty())
    return emitError() << "ZeRO stage " << zero << " needs a data axis";
  if (stages < 1)
    return emitError() << "a plan has at least one pipeline stage, not " << stages;
  if ((!pipeline || pipeline.getValue().empty()) && stages != 1)
    return emitError() << stages << " pipeline stages need a pipeline axis";
  if (sequence && sequence.getValue() && (!tensor || tensor.getValue().empty()))
    return emitError() << "sequence parallel needs a tensor axis";
  if (bucket < 0)
    return emitError() << "a gradient bucket has at least 0 bytes, not " << bucket;
  if (bucket > 0 && (data.empty() || stages > 1))
    return emitError() << "buckets (bucket = " << bucket << ") need a data axis and one pipeline stage";
  if (bucket > 0 && (zero == 1 || zero == 2) && sequence && sequence.getValue())
    return emitError() << "ZeRO-" << zero << " buckets (bucket = " << bucket << ") need no sequence parallelism";
  if (offload)
    for (NamedAttribute entry : offload) {
      StringRef what = entry.getName().getValue();
      auto place = dyn_cast<DictionaryAttr>(entry.getValue());
      if (what != "optimizer" && what != "params")
        return emitError() << "offload has 'optimizer' and 'params', not '" << what << "'";
      auto target = place ? place.getAs<StringAttr>("target") : StringAttr();
      if (!target || (target.getValue() != "cpu" && target.getValue() != "nvme"))
        return emitError() << "offload '" << what << "' needs target = \"cpu\" or \"nvme\"";
      if (target.getValue() == "nvme") {
        auto dir = place.getAs<StringAttr>("dir");
        auto buffer = place.getAs<IntegerAttr>("buffer");
        namespace limits = planrt::manifest::offload;
        if (!dir || dir.getValue().empty() || !buffer || buffer.getInt() < limits::kAlign ||
            buffer.getInt() % limits::kAlign || buffer.getInt() > limits::kMaxBuffer)
          return emitError() << "offload '" << what << "' to nvme needs a dir and a buffer of a multiple of "
                             << limits::kAlign << " bytes up to " << (limits::kMaxBuffer >> 20) << " MiB";
      }
      if (what == "params" && zero != 3)
        return emitError() << "offloading the parameters needs ZeRO stage 3, not " << zero;
    }
  return success();
}

// The manifests: their JSON values as attributes and back, and their string constants.
#include "bpe.h"
#include "plan/Compiler/PlanGen.h"
#include "plan/Training/Manifest.h"

using namespace mlir;

void plan::emitStringGlobal(OpBuilder &b, Location loc, StringRef name, std::string text) {
  text.push_back('\0');
  auto i8 = IntegerType::get(b.getContext(), 8);
  LLVM::GlobalOp::create(b, loc, LLVM::LLVMArrayType::get(i8, text.size()), /*isConstant=*/true,
                         LLVM::Linkage::Internal, name, b.getStringAttr(text));
}

Attribute plan::jsonToAttr(MLIRContext *ctx, const llvm::json::Value &value) {
  Builder b(ctx);
  switch (value.kind()) {
  case llvm::json::Value::Null:
    return UnitAttr::get(ctx);
  case llvm::json::Value::Boolean:
    return b.getBoolAttr(*value.getAsBoolean());
  case llvm::json::Value::Number:
    // An integral double prints as an integer in JSON too, so the text is the same.
    if (std::optional<int64_t> i = value.getAsInteger())
      return b.getI64IntegerAttr(*i);
    return b.getF64FloatAttr(*value.getAsNumber());
  case llvm::json::Value::String:
    return b.getStringAttr(*value.getAsString());
  case llvm::json::Value::Array: {
    SmallVector<Attribute> elements;
    for (const llvm::json::Value &e : *value.getAsArray())
      elements.push_back(jsonToAttr(ctx, e));
    return b.getArrayAttr(elements);
  }
  case llvm::json::Value::Object: {
    SmallVector<NamedAttribute> fields;
    for (const auto &[key, v] : *value.getAsObject())
      fields.push_back(b.getNamedAttr(key.str(), jsonToAttr(ctx, v)));
    return b.getDictionaryAttr(fields);
  }
  }
  llvm_unreachable("a JSON value of no kind");
}

FailureOr<llvm::json::Value> plan::manifestJson(sched::ManifestOp op) {
  FailureOr<llvm::json::Value> root = attrToJson(op.getValue());
  if (failed(root))
    return op.emitOpError() << op.getSymName() << " holds an attribute that is not a JSON value";
  return root;
}

void plan::setManifestJson(sched::ManifestOp op, const llvm::json::Value &root) {
  op.setValueAttr(cast<DictionaryAttr>(jsonToAttr(op.getContext(), root)));
}

FailureOr<llvm::json::Value> plan::attrToJson(Attribute attr) {
  if (isa<UnitAttr>(attr))
    return llvm::json::Value(nullptr);
  if (auto b = dyn_cast<BoolAttr>(attr))
    return llvm::json::Value(b.getValue());
  if (auto i = dyn_cast<IntegerAttr>(attr); i && i.getType().isSignlessInteger(64))
    return llvm::json::Value(i.getInt());
  if (auto f = dyn_cast<FloatAttr>(attr); f && f.getType().isF64())
    return llvm::json::Value(f.getValueAsDouble());
  if (auto s = dyn_cast<StringAttr>(attr))
    return llvm::json::Value(s.getValue().str());
  if (auto a = dyn_cast<ArrayAttr>(attr)) {
    llvm::json::Array out;
    for (Attribute e : a) {
      FailureOr<llvm::json::Value> v = attrToJson(e);
      if (failed(v))
        return failure();
      out.push_back(std::move(*v));
    }
    return llvm::json::Value(std::move(out));
  }
  if (auto d = dyn_cast<DictionaryAttr>(attr)) {
    llvm::json::Object out;
    for (NamedAttribute f : d) {
      FailureOr<llvm::json::Value> v = attrToJson(f.getValue());
      if (failed(v))
        return failure();
      out[f.getName().getValue()] = std::move(*v);
    }
    return llvm::json::Value(std::move(out));
  }
  return failure();
}

mlir::FailureOr<std::string> plan::checkTokenizer(mlir::Operation *op, llvm::StringRef baseDir, llvm::StringRef path,
                                                  int64_t vocab, llvm::StringRef model) {
  std::string full = resolvePlanPath(baseDir, path), error;
  std::unique_ptr<planrt::tokenizer::Bpe> bpe = planrt::tokenizer::Bpe::load(full, error);
  if (!bpe)
    return op->emitError() << error;
  if (bpe->vocabSize() > vocab)
    return op->emitError() << full << ": the tokenizer has " << bpe->vocabSize() << " ids but model '" << model
                           << "' has a vocabulary of " << vocab;
  return full;
}

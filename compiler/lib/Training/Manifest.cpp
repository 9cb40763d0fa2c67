// The manifests' string constants: written, read back and rewritten by the passes.
#include "plan/Training/Manifest.h"

using namespace mlir;

void plan::emitStringGlobal(OpBuilder &b, Location loc, StringRef name, std::string text) {
  text.push_back('\0');
  auto i8 = IntegerType::get(b.getContext(), 8);
  LLVM::GlobalOp::create(b, loc, LLVM::LLVMArrayType::get(i8, text.size()), /*isConstant=*/true,
                         LLVM::Linkage::Internal, name, b.getStringAttr(text));
}

FailureOr<llvm::json::Value> plan::readJsonGlobal(LLVM::GlobalOp global) {
  auto text = dyn_cast_or_null<StringAttr>(global.getValueOrNull());
  if (!text)
    return global.emitOpError() << global.getSymName() << " holds no string";
  StringRef json = text.getValue();
  if (json.ends_with(StringRef("\0", 1)))
    json = json.drop_back();
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(json);
  if (!parsed) {
    std::string msg = llvm::toString(parsed.takeError());
    return global.emitOpError() << global.getSymName() << " is not JSON: " << msg;
  }
  return std::move(*parsed);
}

void plan::rewriteJsonGlobal(LLVM::GlobalOp global, const llvm::json::Value &root) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << root;
  OpBuilder b(global);
  emitStringGlobal(b, global.getLoc(), global.getSymName(), std::move(text));
  global.erase();
}

// The runtime ABI's entry points, their types read from the runtime's own C
// prototypes (planrt_abi.def expanded by the runtime's headers), and their builders.
#include "plan/Target/RuntimeABI.h"

#include "planrt.h"
#include "planrt_cuda.h"
#include "planrt_kernels.h"
#include "planrt_retrieval.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/raw_ostream.h"

#include <type_traits>

using namespace mlir;

namespace plan::rt {
namespace {

template <typename T> inline constexpr bool kUnsupported = false;

/// The MLIR type of a C parameter or result type.
template <typename T> Type typeOf(MLIRContext *ctx) {
  if constexpr (std::is_pointer_v<T>)
    return LLVM::LLVMPointerType::get(ctx);
  else if constexpr (std::is_same_v<T, float>)
    return Float32Type::get(ctx);
  else if constexpr (std::is_same_v<T, double>)
    return Float64Type::get(ctx);
  else if constexpr (std::is_integral_v<T> || std::is_enum_v<T>)
    return IntegerType::get(ctx, 8 * sizeof(T));
  else
    static_assert(kUnsupported<T>, "a planrt_abi.def type planc cannot pass");
}

struct Signature {
  SmallVector<Type> params;
  Type result; // null for void
};

template <typename F> struct SignatureOf;
template <typename R, typename... A> struct SignatureOf<R (*)(A...)> {
  static Signature get(MLIRContext *ctx) {
    Signature s{{typeOf<A>(ctx)...}, {}};
    if constexpr (!std::is_void_v<R>)
      s.result = typeOf<R>(ctx);
    return s;
  }
};

struct Entry {
  const char *name;
  Signature (*signature)(MLIRContext *);
};

#define PLANRT_ABI_ENTRY(name) {#name, &SignatureOf<decltype(&::name)>::get},
#define PLANRT_ABI_STEP(ret, name, params) PLANRT_ABI_ENTRY(name)
#define PLANRT_ABI_KERNEL(ret, name, params) PLANRT_ABI_ENTRY(name)
#define PLANRT_ABI_CUDA(ret, name, params) PLANRT_ABI_ENTRY(name)
#define PLANRT_ABI_RETRIEVAL(ret, name, params) PLANRT_ABI_ENTRY(name)
constexpr Entry kEntries[] = {
#include "planrt_abi.def"
};
#undef PLANRT_ABI_ENTRY

const Entry &entry(Fn fn) { return kEntries[static_cast<unsigned>(fn)]; }

/// Fatal unless `args` have the types of `fn`'s parameters.
void checkArgs(Fn fn, const Signature &s, ValueRange args) {
  std::string problem;
  llvm::raw_string_ostream os(problem);
  if (args.size() != s.params.size())
    os << args.size() << " arguments for " << s.params.size() << " parameters";
  else
    for (auto [i, a] : llvm::enumerate(args))
      if (a.getType() != s.params[i]) {
        os << "argument " << i << " is " << a.getType() << ", the ABI says " << s.params[i];
        break;
      }
  if (!problem.empty())
    llvm::report_fatal_error(llvm::Twine("planc: a call of ") + name(fn) +
                             " does not match planrt_abi.def: " + problem);
}

} // namespace

StringRef name(Fn fn) { return entry(fn).name; }

std::optional<Fn> lookup(StringRef n) {
  for (auto [i, e] : llvm::enumerate(kEntries))
    if (n == e.name)
      return static_cast<Fn>(i);
  return std::nullopt;
}

FunctionType funcType(MLIRContext *ctx, Fn fn) {
  Signature s = entry(fn).signature(ctx);
  return FunctionType::get(ctx, s.params, s.result ? TypeRange{s.result} : TypeRange{});
}

LLVM::LLVMFunctionType llvmFuncType(MLIRContext *ctx, Fn fn) {
  Signature s = entry(fn).signature(ctx);
  return LLVM::LLVMFunctionType::get(s.result ? s.result : LLVM::LLVMVoidType::get(ctx), s.params);
}

func::FuncOp declareFunc(OpBuilder &b, ModuleOp module, Fn fn) {
  if (auto f = module.lookupSymbol<func::FuncOp>(name(fn)))
    return f;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(module.getBody());
  auto f = func::FuncOp::create(b, module.getLoc(), name(fn), funcType(b.getContext(), fn));
  f.setPrivate();
  return f;
}

LLVM::LLVMFuncOp declareLLVMFunc(OpBuilder &b, ModuleOp module, Fn fn) {
  if (auto f = module.lookupSymbol<LLVM::LLVMFuncOp>(name(fn)))
    return f;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(module.getBody());
  return LLVM::LLVMFuncOp::create(b, module.getLoc(), name(fn), llvmFuncType(b.getContext(), fn));
}

func::CallOp callFunc(OpBuilder &b, Location loc, ModuleOp module, Fn fn, ValueRange args) {
  checkArgs(fn, entry(fn).signature(b.getContext()), args);
  return func::CallOp::create(b, loc, declareFunc(b, module, fn), args);
}

LLVM::CallOp callLLVMFunc(OpBuilder &b, Location loc, ModuleOp module, Fn fn, ValueRange args) {
  checkArgs(fn, entry(fn).signature(b.getContext()), args);
  return LLVM::CallOp::create(b, loc, declareLLVMFunc(b, module, fn), args);
}

} // namespace plan::rt

// libFuzzer target: any bytes through the whole front end, as `planc check` and
// `planc emit --stage plan` run it. Invariants: no crash, no sanitizer report, and
// every program sema accepts yields plan IR that verifies.
#include "plan/Compiler/PlanGen.h"
#include "plan/Compiler/Pipeline.h"
#include "plan/Lang/Sema.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstdlib>

// LLVM's allocator headers, inlined into this instrumented build, poison slab
// memory that the uninstrumented libMLIR.so then uses legitimately; ignore such
// user poisoning so ASan reports only real errors.
extern "C" const char *__asan_default_options() { return "allow_user_poisoning=0"; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::DialectRegistry registry;
  plan::registerDialects(registry);
  mlir::MLIRContext ctx(registry, mlir::MLIRContext::Threading::DISABLED);
  plan::lang::SourceFiles files;
  // Render every diagnostic, with its source line and caret, into the void.
  plan::lang::DiagnosticPrinter printer(ctx, files, llvm::nulls());
  plan::lang::Diags diags(&ctx, files);
  plan::lang::FrontendOptions options;
  options.stdlibDir = PLANC_STDLIB_SOURCE_DIR;
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(
      llvm::StringRef(reinterpret_cast<const char *>(data), size), "fuzz.plan");
  auto program = plan::lang::analyzeBuffer(std::move(buffer), "/nonexistent/fuzz.plan",
                                           options, diags);
  if (!program)
    return 0;
  mlir::OwningOpRef<mlir::ModuleOp> module = plan::genPlanModule(*program, diags);
  if (mlir::failed(mlir::verify(*module))) {
    std::fprintf(stderr, "accepted program produced plan IR that does not verify\n");
    std::abort();
  }
  return 0;
}

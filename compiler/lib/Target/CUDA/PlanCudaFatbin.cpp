// `plan-cuda-fatbin`: one cubin per architecture combined into one fat binary by the toolkit's fatbinary.
#include "plan/Target/CUDA/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

namespace plan {
#define GEN_PASS_DEF_PLANCUDAFATBIN
#include "plan/Target/CUDA/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

struct PlanCudaFatbin : plan::impl::PlanCudaFatbinBase<PlanCudaFatbin> {
  using PlanCudaFatbinBase::PlanCudaFatbinBase;

  void runOnOperation() override {
    for (gpu::BinaryOp bin : getOperation().getOps<gpu::BinaryOp>())
      if (bin.getObjects().size() > 1 && failed(combine(bin)))
        return signalPassFailure();
  }

  LogicalResult combine(gpu::BinaryOp bin) {
    SmallString<128> dir;
    if (std::error_code ec = llvm::sys::fs::createUniqueDirectory("planc-fatbin", dir))
      return bin.emitError() << "cannot make a temporary directory for the fat binary: " << ec.message();
    auto cleanup = llvm::make_scope_exit([&] { llvm::sys::fs::remove_directories(dir); });
    std::string tool = toolkit + "/bin/fatbinary";
    SmallString<128> out(dir);
    llvm::sys::path::append(out, "kernels.fatbin");
    SmallVector<std::string> args = {tool, "--64", "--create=" + out.str().str()};
    for (auto [i, a] : llvm::enumerate(bin.getObjects())) {
      auto object = cast<gpu::ObjectAttr>(a);
      auto target = dyn_cast<NVVM::NVVMTargetAttr>(object.getTarget());
      if (!target || object.getFormat() != gpu::CompilationTarget::Binary)
        return bin.emitError() << "object " << i << " is not an NVVM cubin (" << object.getTarget()
                               << "): plan-cuda-fatbin combines the cubins of gpu-module-to-binary{format=bin}";
      StringRef chip = target.getChip();
      if (!chip.consume_front("sm_"))
        return bin.emitError() << "object " << i << " is for '" << target.getChip() << "', not an sm_NN";
      SmallString<128> file(dir);
      llvm::sys::path::append(file, "sm_" + chip + ".cubin");
      std::error_code ec;
      llvm::raw_fd_ostream os(file, ec);
      if (ec)
        return bin.emitError() << "cannot write " << file << ": " << ec.message();
      os << object.getObject().getValue();
      os.close();
      args.push_back(("--image3=kind=elf,sm=" + chip + ",file=" + file).str());
    }
    SmallVector<StringRef> argv(args.begin(), args.end());
    std::string message;
    int rc = llvm::sys::ExecuteAndWait(tool, argv, std::nullopt, {}, 0, 0, &message);
    if (rc != 0)
      return bin.emitError() << "fatbinary failed (exit " << rc << (message.empty() ? "" : ": ") << message
                             << "): " << llvm::join(argv, " ");
    auto buffer = llvm::MemoryBuffer::getFile(out);
    if (!buffer)
      return bin.emitError() << "fatbinary wrote no " << out << ": " << buffer.getError().message();
    auto first = cast<gpu::ObjectAttr>(bin.getObjects()[0]);
    auto fat = gpu::ObjectAttr::get(&getContext(), first.getTarget(), gpu::CompilationTarget::Fatbin,
                                    StringAttr::get(&getContext(), (*buffer)->getBuffer()), first.getProperties(),
                                    first.getKernels());
    bin.setObjectsAttr(ArrayAttr::get(&getContext(), {fat}));
    return success();
  }
};

} // namespace

// `plan-free-buffers`: each top-level buffer of a straight-line function freed after its last use.
#include "plan/Target/CPU/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace plan {
#define GEN_PASS_DEF_PLANFREEBUFFERS
#include "plan/Target/CPU/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

struct PlanFreeBuffers : plan::impl::PlanFreeBuffersBase<PlanFreeBuffers> {
  void runOnOperation() override {
    func::FuncOp f = getOperation();
    // Only straight-line functions: one block, ending in the return.
    if (f.isExternal() || !f.getBody().hasOneBlock())
      return;
    Block &entry = f.getBody().front();
    Operation *ret = entry.getTerminator();
    // Buffers the caller receives, directly or through views, are the caller's.
    llvm::SmallPtrSet<Value, 8> returned;
    for (Value v : ret->getOperands())
      while (v && returned.insert(v).second) {
        auto view = v.getDefiningOp<ViewLikeOpInterface>();
        v = view ? view.getViewSource() : Value();
      }
    DenseMap<Operation *, unsigned> position;
    for (Operation &op : entry)
      position[&op] = position.size();
    SmallVector<memref::AllocOp> allocs;
    for (Operation &op : entry)
      if (auto a = dyn_cast<memref::AllocOp>(op))
        if (!returned.contains(a.getResult()))
          allocs.push_back(a);
    for (memref::AllocOp a : allocs) {
      // The last top-level op touching the buffer through it, its views, or its
      // address (a library call takes the pointer that
      // memref.extract_aligned_pointer_as_index gives, through casts).
      Operation *last = a;
      SmallVector<std::pair<Value, bool>> worklist{{a.getResult(), false}}; // (value, is an address)
      llvm::SmallPtrSet<Value, 16> seen;
      while (!worklist.empty()) {
        auto [v, address] = worklist.pop_back_val();
        if (!seen.insert(v).second)
          continue;
        for (Operation *user : v.getUsers()) {
          Operation *top = entry.findAncestorOpInBlock(*user);
          if (top && position[top] > position[last])
            last = top;
          auto view = dyn_cast<ViewLikeOpInterface>(user);
          bool follow = address || (view && view.getViewSource() == v);
          bool toAddress = isa<memref::ExtractAlignedPointerAsIndexOp>(user);
          if (follow || toAddress)
            for (Value r : user->getResults())
              worklist.push_back({r, address || toAddress});
        }
      }
      OpBuilder b(f.getContext());
      b.setInsertionPointAfter(last == ret ? ret->getPrevNode() : last);
      memref::DeallocOp::create(b, a.getLoc(), a);
    }
  }
};

} // namespace

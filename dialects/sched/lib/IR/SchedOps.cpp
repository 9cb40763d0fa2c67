// The `sched` dialect: registration and verifiers. Every buffer range an op
// touches must lie inside its buffer; every axis must be an axis of the mesh.
#include "plan/Dialect/Sched/IR/Sched.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"

#include "llvm/ADT/TypeSwitch.h"

#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace plan::sched;

#include "plan/Dialect/Sched/IR/SchedDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "plan/Dialect/Sched/IR/SchedTypes.cpp.inc"

void SchedDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "plan/Dialect/Sched/IR/SchedTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "plan/Dialect/Sched/IR/SchedOps.cpp.inc"
      >();
}

#define GET_OP_CLASSES
#include "plan/Dialect/Sched/IR/SchedOps.cpp.inc"

MeshOp plan::sched::getMesh(Operation *from) {
  Operation *module = from;
  while (module && !isa<ModuleOp>(module))
    module = module->getParentOp();
  if (!module)
    return {};
  for (Operation &op : cast<ModuleOp>(module).getBody()->getOperations())
    if (auto mesh = dyn_cast<MeshOp>(op))
      return mesh;
  return {};
}

LogicalResult MeshOp::verify() {
  if (getAxes().size() != getSizes().size() || getAxes().empty())
    return emitOpError() << "needs one size per axis, and at least one axis";
  for (int64_t s : getSizes())
    if (s < 1)
      return emitOpError() << "axis sizes must be at least 1";
  llvm::StringSet<> seen;
  for (Attribute a : getAxes())
    if (!seen.insert(cast<StringAttr>(a).getValue()).second)
      return emitOpError() << "names axis '" << cast<StringAttr>(a).getValue() << "' twice";
  return success();
}

FailureOr<unsigned> MeshOp::maskOf(ArrayAttr names, Operation *user) {
  unsigned mask = 0;
  for (Attribute a : names) {
    StringRef name = cast<StringAttr>(a).getValue();
    auto it = llvm::find_if(getAxes(), [&](Attribute x) { return cast<StringAttr>(x).getValue() == name; });
    if (it == getAxes().end())
      return user->emitOpError() << "names axis '" << name << "', which mesh @" << getSymName() << " lacks";
    mask |= 1u << unsigned(it - getAxes().begin());
  }
  if (!mask)
    return user->emitOpError() << "spans no axis";
  return mask;
}

int MeshOp::axisIndex(StringRef name) {
  for (auto [i, a] : llvm::enumerate(getAxes()))
    if (cast<StringAttr>(a).getValue() == name)
      return int(i);
  return -1;
}

int64_t MeshOp::numRanks() {
  int64_t n = 1;
  for (int64_t s : getSizes())
    n *= s;
  return n;
}

LogicalResult BufferOp::verify() {
  if (getFloatsAttr().getInt() < 0)
    return emitOpError() << "has a negative size";
  StringRef l = getLifetime();
  if (l != "persistent" && l != "step" && l != "transient")
    return emitOpError() << "lifetime must be persistent, step or transient, not '" << l << "'";
  return success();
}

/// A loop op's count (at least one) and its body's one i64 argument, `index`.
static LogicalResult verifyLoop(Operation *op, int64_t count, StringRef once, StringRef index) {
  if (count < 1)
    return op->emitOpError() << once;
  Block &b = op->getRegion(0).front();
  if (b.getNumArguments() != 1 || !b.getArgument(0).getType().isInteger(64))
    return op->emitOpError() << "body takes one i64 argument, " << index;
  return success();
}

LogicalResult MicroLoopOp::verify() {
  return verifyLoop(*this, getCountAttr().getInt(), "runs at least once", "the micro-batch index");
}

namespace {
/// Checks that [offset, offset + count) lies in buffer `name`.
LogicalResult checkRange(Operation *op, SymbolTableCollection &tables, FlatSymbolRefAttr name, int64_t offset,
                         int64_t count) {
  auto buffer = tables.lookupNearestSymbolFrom<BufferOp>(op, name);
  if (!buffer)
    return op->emitOpError() << "uses " << name << ", which is not a sched.buffer";
  // A pipeline buffer exists on the ranks of its coordinate of the pipeline axis only (the
  // rank of the stage it serves).
  if (std::optional<uint64_t> stage = buffer.getStage()) {
    bool inside = false;
    for (auto on = op->getParentOfType<OnOp>(); on && !inside; on = on->getParentOfType<OnOp>())
      inside = on.getCoordAttr().getInt() == int64_t(*stage);
    if (!inside)
      return op->emitOpError() << "uses " << name << ", a buffer of pipeline stage " << *stage
                               << " only, outside a sched.on region of that stage";
  }
  if (offset < 0 || count < 0 || offset + count > buffer.getFloats())
    return op->emitOpError() << "range [" << offset << ", " << offset + count << ") lies outside " << name << " of "
                             << buffer.getFloats() << " floats";
  return success();
}

/// The number of ranks a collective over `axes` spans.
FailureOr<int64_t> groupSize(Operation *op, ArrayAttr axes) {
  MeshOp mesh = getMesh(op);
  if (!mesh)
    return op->emitOpError() << "needs a sched.mesh in its module";
  FailureOr<unsigned> mask = mesh.maskOf(axes, op);
  if (failed(mask))
    return failure();
  int64_t n = 1;
  for (auto [i, s] : llvm::enumerate(mesh.getSizes()))
    if (*mask & (1u << i))
      n *= s;
  return n;
}

/// A slice [begin, begin + size) of a collective over `axes` whose whole side (n × count
/// floats at `whole`[wholeOffset]) is sliced and whose other side holds `count` floats at
/// `part`[partOffset] (a reduce-scatter's source and destination, an all-gather's
/// destination and source): both ranges in their buffers, the slice in the whole one.
LogicalResult checkSlice(Operation *op, SymbolTableCollection &tables, ArrayAttr axes, FlatSymbolRefAttr whole,
                         int64_t wholeOffset, FlatSymbolRefAttr part, int64_t partOffset, int64_t count, int64_t begin,
                         int64_t size, StringRef sliced) {
  FailureOr<int64_t> n = groupSize(op, axes);
  if (failed(n) || failed(checkRange(op, tables, whole, wholeOffset, count * *n)) ||
      failed(checkRange(op, tables, part, partOffset, count)))
    return failure();
  if (begin + size > wholeOffset + count * *n)
    return op->emitOpError() << "slice [" << begin << ", " << size << "] ends past the " << sliced << " range ["
                             << wholeOffset << ", " << count * *n << "]";
  return success();
}

/// A slice's start: non-empty, at or after the offset of the range it cuts.
LogicalResult checkSliceStart(Operation *op, int64_t begin, int64_t size, int64_t offset, StringRef side) {
  if (size <= 0 || begin < offset)
    return op->emitOpError() << "needs a non-empty slice [" << begin << ", " << size << "] at or after the " << side
                             << " offset " << offset;
  return success();
}

LogicalResult checkPieces(Operation *op, SymbolTableCollection &tables, ArrayAttr buffers, ArrayRef<int64_t> offsets) {
  for (auto [b, off] : llvm::zip(buffers, offsets))
    if (failed(checkRange(op, tables, cast<FlatSymbolRefAttr>(b), off, 0)))
      return failure();
  return success();
}

LogicalResult checkPointToPoint(Operation *op, StringRef axis, int64_t peer) {
  MeshOp mesh = getMesh(op);
  if (!mesh)
    return op->emitOpError() << "needs a sched.mesh in its module";
  for (auto [a, s] : llvm::zip(mesh.getAxes(), mesh.getSizes()))
    if (cast<StringAttr>(a).getValue() == axis) {
      if (peer < 0 || peer >= s)
        return op->emitOpError() << "peer " << peer << " lies outside axis '" << axis << "' of size " << s;
      return success();
    }
  return op->emitOpError() << "names axis '" << axis << "', which mesh @" << mesh.getSymName() << " lacks";
}
} // namespace

LogicalResult OnOp::verify() {
  MeshOp mesh = getMesh(*this);
  if (!mesh)
    return emitOpError() << "needs a sched.mesh in its module";
  for (auto [a, size] : llvm::zip(mesh.getAxes(), mesh.getSizes()))
    if (cast<StringAttr>(a).getValue() == getAxis()) {
      if (getCoordAttr().getInt() < 0 || getCoordAttr().getInt() >= size)
        return emitOpError() << "coordinate " << getCoordAttr().getInt() << " lies outside axis '" << getAxis()
                             << "' of size " << size;
      return success();
    }
  return emitOpError() << "names axis '" << getAxis() << "', which mesh @" << mesh.getSymName() << " lacks";
}

LogicalResult SumSquaresOp::verify() {
  if (getBuffers().size() != 2 || getOffsets().size() != 2)
    return emitOpError() << "reads two gradient pieces, one per optimizer group";
  return success();
}

LogicalResult UpdateOp::verify() {
  if (getBuffers().size() != 8 || getOffsets().size() != 8)
    return emitOpError() << "takes eight buffer pieces: parameters, gradients, and both moments, per group";
  return success();
}

LogicalResult AllReduceOp::verify() {
  StringRef r = getReduce();
  if (r != "sum" && r != "mean" && r != "max" && r != "sum_u64")
    return emitOpError() << "reduce must be sum, mean, max or sum_u64, not '" << r << "'";
  if (r == "sum_u64" && (getOffset() % 2 || getCount() % 2))
    return emitOpError() << "sums 64-bit integers: offset and count must be even";
  return success();
}

/// A bucket's collective started on an event of a sched.grad (DDP and ZeRO-1 gradient
/// buckets): in the grad's block, waited for once by a sched.wait there, not in flight
/// across another sched.grad with buckets.
static LogicalResult verifyBucketStart(Operation *op, Value after, Value done) {
  if (!after.getDefiningOp<GradOp>())
    return op->emitOpError() << "starts after an event of a sched.grad (a bucket of gradients), not of "
                             << (after.getDefiningOp() ? after.getDefiningOp()->getName().getStringRef()
                                                       : StringRef("a block argument"));
  Operation *grad = after.getDefiningOp();
  if (grad->getBlock() != op->getBlock())
    return op->emitOpError() << "must be in the block of its sched.grad";
  if (!done.hasOneUse() || !isa<WaitOp>(*done.getUsers().begin()) ||
      done.getUsers().begin()->getBlock() != op->getBlock())
    return op->emitOpError() << "must be waited for once, by a sched.wait in the same block";
  // The runtime knows a bucket by its number: one sched.grad's buckets in flight at a time.
  Operation *wait = *done.getUsers().begin();
  for (Operation *o = grad->getNextNode(); o && o != wait; o = o->getNextNode())
    if (auto other = dyn_cast<GradOp>(o); other && other->getNumResults() > 0)
      return op->emitOpError() << "is in flight across another sched.grad with buckets; wait for it first";
  return success();
}

LogicalResult AllReduceStartOp::verify() {
  StringRef r = getReduce();
  if (r != "sum" && r != "max")
    return emitOpError() << "reduce must be sum or max, not '" << r << "'";
  return verifyBucketStart(*this, getAfter(), getDone());
}

LogicalResult ReduceScatterStartOp::verify() {
  if (failed(checkSliceStart(*this, getBegin(), getSize(), getSourceOffset(), "source")))
    return failure();
  if (getSourceAttr() == getDestAttr())
    return emitOpError() << "scatters " << getSourceAttr() << " into itself";
  if (failed(verifyBucketStart(*this, getAfter(), getDone())))
    return failure();
  if (auto grad = getAfter().getDefiningOp<GradOp>(); grad.getGradsAttr() != getSourceAttr())
    return emitOpError() << "scatters " << getSourceAttr() << ", but its sched.grad computes its gradients in "
                         << grad.getGradsAttr();
  return success();
}
LogicalResult ReduceScatterStartOp::verifySymbolUses(SymbolTableCollection &t) {
  return checkSlice(*this, t, getAxes(), getSourceAttr(), getSourceOffset(), getDestAttr(), getDestOffset(), getCount(),
                    getBegin(), getSize(), "scattered");
}
LogicalResult AllGatherStartOp::verify() {
  if (failed(checkSliceStart(*this, getBegin(), getSize(), getDestOffset(), "destination")))
    return failure();
  if (getBucket() < 0)
    return emitOpError() << "bucket must be >= 0";
  auto grad = getDone().hasOneUse() ? dyn_cast<GradOp>(*getDone().getUsers().begin()) : GradOp();
  if (!grad || grad->getBlock() != (*this)->getBlock())
    return emitOpError() << "must be waited for once, by a sched.grad in the same block";
  if (grad.getParamsAttr() != getDestAttr())
    return emitOpError() << "gathers into " << getDestAttr() << ", but its sched.grad reads its parameters from "
                         << grad.getParamsAttr();
  // The runtime knows a bucket by its number: the gathers feed the next sched.grad, and
  // nothing between may allocate, fill or free the destination they write.
  for (Operation *op = (*this)->getNextNode(); op && op != grad; op = op->getNextNode()) {
    if (isa<GradOp>(op))
      return emitOpError() << "is in flight across another sched.grad; feed it to the next one";
    auto touched = isa<AllocOp>(op)  ? cast<AllocOp>(op).getBufferAttr()
                   : isa<FreeOp>(op) ? cast<FreeOp>(op).getBufferAttr()
                   : isa<FillOp>(op) ? cast<FillOp>(op).getBufferAttr()
                                     : FlatSymbolRefAttr();
    if (touched == getDestAttr()) {
      InFlightDiagnostic d = emitOpError() << "writes " << getDestAttr() << " while '" << op->getName().getStringRef()
                                           << "' touches it before the sched.grad";
      d.attachNote(op->getLoc()) << "here";
      return d;
    }
  }
  return success();
}
LogicalResult AllGatherStartOp::verifySymbolUses(SymbolTableCollection &t) {
  return checkSlice(*this, t, getAxes(), getDestAttr(), getDestOffset(), getSourceAttr(), getSourceOffset(), getCount(),
                    getBegin(), getSize(), "gathered");
}

LogicalResult GradOp::verify() {
  for (Value e : getGathered())
    if (!e.getDefiningOp<AllGatherStartOp>())
      return emitOpError() << "waits for events of sched.all_gather_start only (gathered parameters)";
  return success();
}

LogicalResult AllReduceStartOp::verifySymbolUses(SymbolTableCollection &t) {
  if (failed(groupSize(*this, getAxes())))
    return failure();
  return checkRange(*this, t, getBufferAttr(), getOffset(), getCount());
}

LogicalResult FillOp::verifySymbolUses(SymbolTableCollection &t) {
  return checkRange(*this, t, getBufferAttr(), getOffset(), getCount());
}
static LogicalResult checkTransient(Operation *op, SymbolTableCollection &t, FlatSymbolRefAttr name) {
  auto buffer = t.lookupNearestSymbolFrom<BufferOp>(op, name);
  if (!buffer)
    return op->emitOpError() << "uses " << name << ", which is not a sched.buffer";
  if (buffer.getLifetime() != "transient")
    return op->emitOpError() << "needs a transient buffer; " << name << " is " << buffer.getLifetime();
  return success();
}
LogicalResult AllocOp::verifySymbolUses(SymbolTableCollection &t) { return checkTransient(*this, t, getBufferAttr()); }
LogicalResult FreeOp::verifySymbolUses(SymbolTableCollection &t) { return checkTransient(*this, t, getBufferAttr()); }
LogicalResult GradOp::verifySymbolUses(SymbolTableCollection &t) {
  if (failed(checkRange(*this, t, getParamsAttr(), 0, 0)) || failed(checkRange(*this, t, getGradsAttr(), 0, 0)))
    return failure();
  return checkRange(*this, t, getStateAttr(), 0, 8);
}
LogicalResult SumSquaresOp::verifySymbolUses(SymbolTableCollection &t) {
  if (failed(checkPieces(*this, t, getBuffers(), getOffsets())))
    return failure();
  return checkRange(*this, t, getStateAttr(), 0, 8);
}
LogicalResult UpdateOp::verifySymbolUses(SymbolTableCollection &t) {
  if (failed(checkPieces(*this, t, getBuffers(), getOffsets())))
    return failure();
  return checkRange(*this, t, getStateAttr(), 0, 8);
}
LogicalResult AllReduceOp::verifySymbolUses(SymbolTableCollection &t) {
  if (failed(groupSize(*this, getAxes())))
    return failure();
  return checkRange(*this, t, getBufferAttr(), getOffset(), getCount());
}
LogicalResult AllGatherOp::verifySymbolUses(SymbolTableCollection &t) {
  FailureOr<int64_t> n = groupSize(*this, getAxes());
  if (failed(n) || failed(checkRange(*this, t, getSourceAttr(), getSourceOffset(), getCount())))
    return failure();
  return checkRange(*this, t, getDestAttr(), getDestOffset(), getCount() * *n);
}
LogicalResult ReduceScatterOp::verifySymbolUses(SymbolTableCollection &t) {
  FailureOr<int64_t> n = groupSize(*this, getAxes());
  if (failed(n) || failed(checkRange(*this, t, getSourceAttr(), getSourceOffset(), getCount() * *n)))
    return failure();
  return checkRange(*this, t, getDestAttr(), getDestOffset(), getCount());
}
LogicalResult SendOp::verifySymbolUses(SymbolTableCollection &t) {
  if (failed(checkPointToPoint(*this, getAxis(), getPeer())))
    return failure();
  return checkRange(*this, t, getBufferAttr(), getOffset(), getCount());
}
LogicalResult RecvOp::verifySymbolUses(SymbolTableCollection &t) {
  if (failed(checkPointToPoint(*this, getAxis(), getPeer())))
    return failure();
  return checkRange(*this, t, getBufferAttr(), getOffset(), getCount());
}

namespace {
/// An optional buffer range: present with its offset, or absent with none.
LogicalResult checkOptional(Operation *op, SymbolTableCollection &t, FlatSymbolRefAttr buf,
                            std::optional<uint64_t> offset, const char *what) {
  if (bool(buf) != offset.has_value())
    return op->emitOpError() << "gives " << what << " a buffer and an offset together or neither";
  return buf ? checkRange(op, t, buf, int64_t(*offset), 0) : success();
}
} // namespace

namespace {
/// A pipeline pass (sched.forward, sched.backward, sched.wgrad) names a stage.
LogicalResult verifyStage(Operation *op, int64_t stage) {
  if (stage < 0)
    return op->emitOpError() << "names a negative stage";
  return success();
}
} // namespace

LogicalResult ForwardOp::verify() { return verifyStage(*this, getStageAttr().getInt()); }
LogicalResult ForwardOp::verifySymbolUses(SymbolTableCollection &t) {
  if (failed(checkRange(*this, t, getParamsAttr(), 0, 0)) ||
      failed(checkOptional(*this, t, getInputAttr(), getInputOffset(), "its input")) ||
      failed(checkOptional(*this, t, getSavedAttr(), getSavedOffset(), "what it keeps")))
    return failure();
  return checkRange(*this, t, getOutputAttr(), getOutputOffset(), 0);
}
LogicalResult BackwardOp::verify() { return verifyStage(*this, getStageAttr().getInt()); }
LogicalResult BackwardOp::verifySymbolUses(SymbolTableCollection &t) {
  if (failed(checkRange(*this, t, getParamsAttr(), 0, 0)) || failed(checkRange(*this, t, getGradsAttr(), 0, 0)) ||
      failed(checkRange(*this, t, getStateAttr(), 0, 8)))
    return failure();
  if (failed(checkOptional(*this, t, getInputAttr(), getInputOffset(), "its input")) ||
      failed(checkOptional(*this, t, getCotangentAttr(), getCotangentOffset(), "its cotangent")) ||
      failed(checkOptional(*this, t, getSavedAttr(), getSavedOffset(), "what its forward pass kept")))
    return failure();
  if (failed(checkOptional(*this, t, getWsavedAttr(), getWsavedOffset(), "what its weight pass reads")))
    return failure();
  return checkOptional(*this, t, getDinputAttr(), getDinputOffset(), "its input's gradient");
}
LogicalResult WGradOp::verify() { return verifyStage(*this, getStageAttr().getInt()); }
LogicalResult WGradOp::verifySymbolUses(SymbolTableCollection &t) {
  if (failed(checkRange(*this, t, getParamsAttr(), 0, 0)) || failed(checkRange(*this, t, getGradsAttr(), 0, 0)) ||
      failed(checkRange(*this, t, getStateAttr(), 0, 8)))
    return failure();
  return checkRange(*this, t, getWsavedAttr(), getWsavedOffset(), 0);
}
LogicalResult SendRecvOp::verifySymbolUses(SymbolTableCollection &t) {
  if (failed(checkPointToPoint(*this, getAxis(), getTo())) || failed(checkPointToPoint(*this, getAxis(), getFrom())))
    return failure();
  if (failed(checkRange(*this, t, getBufferAttr(), getOffset(), getCount())))
    return failure();
  return checkRange(*this, t, getRecvBufferAttr(), getRecvOffset(), getRecvCount());
}

//===----------------------------------------------------------------------===//
// Federated rounds
//===----------------------------------------------------------------------===//

namespace {
/// The client axis of a federated op: an axis of the mesh.
LogicalResult checkAxis(Operation *op, StringRef axis) {
  MeshOp mesh = getMesh(op);
  if (!mesh)
    return op->emitOpError() << "needs a sched.mesh in its module";
  if (mesh.axisIndex(axis) < 0)
    return op->emitOpError() << "names axis '" << axis << "', which the mesh lacks";
  return success();
}
/// Each of `names` is a buffer of at least `floats` floats.
LogicalResult checkEach(Operation *op, SymbolTableCollection &t, ArrayAttr names, int64_t floats) {
  for (Attribute a : names)
    if (failed(checkRange(op, t, cast<FlatSymbolRefAttr>(a), 0, floats)))
      return failure();
  return success();
}
} // namespace

LogicalResult FedBeginOp::verifySymbolUses(SymbolTableCollection &t) {
  if (failed(checkAxis(*this, getAxis())))
    return failure();
  MeshOp mesh = getMesh(*this);
  int64_t clients = mesh.getSizes()[size_t(mesh.axisIndex(getAxis()))];
  if (getSampled() < 1 || int64_t(getSampled()) > clients)
    return emitOpError() << "samples " << getSampled() << " of the " << clients << " clients on '" << getAxis()
                         << "'";
  auto global = t.lookupNearestSymbolFrom<BufferOp>(*this, getGlobalAttr());
  if (!global)
    return emitOpError() << "uses " << getGlobalAttr() << ", which is not a sched.buffer";
  int64_t n = global.getFloats();
  if (failed(checkRange(*this, t, getParamsAttr(), 0, n)))
    return failure();
  return checkEach(*this, t, getMoments(), n);
}

LogicalResult FedLocalOp::verify() {
  return verifyLoop(*this, getCountAttr().getInt(), "runs at least one local step", "the local step");
}

LogicalResult FedLossOp::verifySymbolUses(SymbolTableCollection &t) {
  return checkRange(*this, t, getStateAttr(), 0, 8);
}

LogicalResult FedProxOp::verifySymbolUses(SymbolTableCollection &t) {
  if (!(getMu().convertToDouble() >= 0))
    return emitOpError() << "has a negative mu";
  for (FlatSymbolRefAttr b : {getGradsAttr(), getParamsAttr(), getGlobalAttr()})
    if (failed(checkRange(*this, t, b, 0, getCount())))
      return failure();
  return success();
}

LogicalResult FedEncodeOp::verify() {
  if (getWeighting() != "tokens" && getWeighting() != "uniform")
    return emitOpError() << "weighting must be tokens or uniform, not '" << getWeighting() << "'";
  if (getFractionBits() < 1 || getFractionBits() > 52)
    return emitOpError() << "fraction_bits must lie in [1, 52]";
  if (!(getClip().convertToDouble() >= 0))
    return emitOpError() << "has a negative clip";
  return success();
}
LogicalResult FedEncodeOp::verifySymbolUses(SymbolTableCollection &t) {
  int64_t n = getCount();
  if (failed(checkRange(*this, t, getParamsAttr(), 0, n)) || failed(checkRange(*this, t, getGlobalAttr(), 0, n)))
    return failure();
  return checkRange(*this, t, getUpdateAttr(), 0, 2 * (n + 1));
}

LogicalResult FedMaskOp::verifySymbolUses(SymbolTableCollection &t) {
  if (getCount() % 2)
    return emitOpError() << "masks 64-bit integers: count must be even, not " << getCount();
  if (failed(checkAxis(*this, getAxis())))
    return failure();
  return checkRange(*this, t, getUpdateAttr(), 0, getCount());
}

LogicalResult FedServerOp::verify() {
  StringRef o = getOptimizer();
  if (o != "sgd" && o != "adam")
    return emitOpError() << "optimizer must be sgd or adam, not '" << o << "'";
  if ((o == "adam") != (getMoments() && getMoments()->size() == 2))
    return emitOpError() << (o == "adam" ? "adam needs its two moment buffers" : "sgd keeps no moments");
  if (getFractionBits() < 1 || getFractionBits() > 52)
    return emitOpError() << "fraction_bits must lie in [1, 52]";
  return success();
}
LogicalResult FedServerOp::verifySymbolUses(SymbolTableCollection &t) {
  auto global = t.lookupNearestSymbolFrom<BufferOp>(*this, getGlobalAttr());
  if (!global)
    return emitOpError() << "uses " << getGlobalAttr() << ", which is not a sched.buffer";
  int64_t n = global.getFloats();
  if (failed(checkRange(*this, t, getUpdateAttr(), 0, 2 * (n + 1))) ||
      failed(checkRange(*this, t, getParamsAttr(), 0, n)) || failed(checkRange(*this, t, getStateAttr(), 0, 8)))
    return failure();
  return getMoments() ? checkEach(*this, t, *getMoments(), n) : success();
}

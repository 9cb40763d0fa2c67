// `sched-check-deadlock`: every rank's step program simulated against every
// other's. A collective completes when all ranks of its communicator have reached
// one of the same kind and size; a send when its peer has reached the matching
// receive. Anything else is a program that hangs, and is rejected.
#include "plan/Schedule/Passes.h"

#include "mlir/IR/Builders.h"

#include <map>

namespace plan {
#define GEN_PASS_DEF_SCHEDCHECKDEADLOCK
#include "plan/Schedule/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

struct Event {
  Operation *op;
  enum Kind { Collective, Send, Recv, SendRecv } kind;
  unsigned mask = 0; ///< collectives: the axes spanned
  int64_t color = 0; ///< collectives: the coordinates outside the mask
  int64_t peer = -1; ///< point to point: the rank sent to (Send, SendRecv) or received from (Recv)
  std::string what;  ///< kind and size, compared between ranks
  /// SendRecv: the rank received from and the size received; each half completes on
  /// its own, the event when both have.
  int64_t from = -1;
  std::string recvWhat;
  bool sent = false, received = false;
  bool sends() const { return (kind == Send || kind == SendRecv) && !sent; }
  bool receivesFrom(int64_t r) const {
    return !received && ((kind == Recv && peer == r) || (kind == SendRecv && from == r));
  }
  const std::string &received_what() const { return kind == SendRecv ? recvWhat : what; }
};

class Simulator {
public:
  Simulator(sched::MeshOp mesh) : mesh(mesh) {
    for (int64_t s : mesh.getSizes())
      sizes.push_back(s);
  }

  SmallVector<int64_t> coords(int64_t rank) const {
    SmallVector<int64_t> c(sizes.size());
    for (int64_t a = int64_t(sizes.size()) - 1; a >= 0; --a) {
      c[a] = rank % sizes[a];
      rank /= sizes[a];
    }
    return c;
  }
  int64_t rankOf(ArrayRef<int64_t> c) const {
    int64_t r = 0;
    for (size_t a = 0; a < sizes.size(); ++a)
      r = r * sizes[a] + c[a];
    return r;
  }
  int axisIndex(StringRef name) const { return mesh.axisIndex(name); }
  std::string describe(int64_t rank) const {
    std::string s = "rank " + std::to_string(rank) + " (";
    SmallVector<int64_t> c = coords(rank);
    for (auto [i, a] : llvm::enumerate(mesh.getAxes()))
      s += (i ? ", " : "") + cast<StringAttr>(a).getValue().str() + " " + std::to_string(c[i]);
    return s + ")";
  }

  /// The events of `rank` running `block`.
  LogicalResult trace(Block &block, int64_t rank, std::vector<Event> &out) {
    SmallVector<int64_t> c = coords(rank);
    for (Operation &op : block) {
      if (auto loop = dyn_cast<sched::MicroLoopOp>(op)) {
        for (int64_t i = 0; i < loop.getCountAttr().getInt(); ++i)
          if (failed(trace(loop.getBody().front(), rank, out)))
            return failure();
        continue;
      }
      if (auto callOp = dyn_cast<func::CallOp>(op)) {
        // A step program called from another (a federated round's local steps): its
        // collectives are the caller's.
        auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(callOp, callOp.getCalleeAttr());
        if (callee && !callee.isExternal() && callee.getNumArguments() > 0 &&
            callee.getArgAttr(0, "sched.context") && failed(trace(callee.getBody().front(), rank, out)))
          return failure();
        continue;
      }
      if (auto local = dyn_cast<sched::FedLocalOp>(op)) {
        // Only the round's sampled clients run it: a collective there would wait for
        // ranks that never come.
        std::vector<Event> inside;
        if (failed(trace(local.getBody().front(), rank, inside)))
          return failure();
        if (!inside.empty())
          return inside.front().op->emitOpError()
                 << "communicates inside sched.fed_local, which only the round's sampled clients run: the "
                    "clients not sampled would never join it";
        continue;
      }
      if (auto on = dyn_cast<sched::OnOp>(op)) {
        int a = axisIndex(on.getAxis());
        if (a < 0)
          return on.emitOpError() << "names axis '" << on.getAxis() << "', which the mesh lacks";
        if (c[a] == on.getCoordAttr().getInt() && failed(trace(on.getBody().front(), rank, out)))
          return failure();
        continue;
      }
      auto floats = [](int64_t n) { return std::to_string(n) + (n == 1 ? " float" : " floats"); };
      auto collective = [&](ArrayAttr axes, StringRef kind, int64_t count) -> LogicalResult {
        FailureOr<unsigned> mask = mesh.maskOf(axes, &op);
        if (failed(mask))
          return failure();
        int64_t color = 0;
        for (size_t a = 0; a < sizes.size(); ++a)
          if (!(*mask & (1u << a)))
            color = color * sizes[a] + c[a];
        out.push_back({&op, Event::Collective, *mask, color, -1, kind.str() + " of " + floats(count)});
        return success();
      };
      auto p2p = [&](StringRef axis, int64_t peer, Event::Kind kind, int64_t count) -> LogicalResult {
        int a = axisIndex(axis);
        if (a < 0)
          return op.emitOpError() << "names axis '" << axis << "', which the mesh lacks";
        SmallVector<int64_t> pc = c;
        pc[a] = peer;
        out.push_back({&op, kind, 0, 0, rankOf(pc), floats(count)});
        return success();
      };
      // The collectives a step function issues itself (tensor parallelism), listed on the
      // op that calls it, in the order every rank of their group issues them.
      auto inside = [&](ArrayAttr list) -> LogicalResult {
        if (!list)
          return success();
        for (Attribute a : list) {
          auto entry = dyn_cast<DictionaryAttr>(a);
          auto kind = entry ? entry.getAs<StringAttr>("collective") : StringAttr();
          auto axis = entry ? entry.getAs<StringAttr>("axis") : StringAttr();
          auto count = entry ? entry.getAs<IntegerAttr>("floats") : IntegerAttr();
          if (!kind || !axis || !count)
            return op.emitOpError() << "lists a collective without its kind, axis and floats: " << a;
          if (failed(collective(ArrayAttr::get(op.getContext(), {axis}),
                                (kind.getValue() + " (inside the step function)").str(), count.getInt())))
            return failure();
        }
        return success();
      };
      LogicalResult r = success();
      if (auto x = dyn_cast<sched::GradOp>(op))
        r = inside(x.getCollectivesAttr());
      else if (auto x = dyn_cast<sched::ForwardOp>(op))
        r = inside(x.getCollectivesAttr());
      else if (auto x = dyn_cast<sched::BackwardOp>(op))
        r = inside(x.getCollectivesAttr());
      else if (auto x = dyn_cast<sched::WGradOp>(op))
        r = inside(x.getCollectivesAttr());
      else if (auto x = dyn_cast<sched::AllReduceOp>(op))
        r = collective(x.getAxes(), ("all_reduce (" + x.getReduce() + ")").str(), x.getCount());
      else if (auto x = dyn_cast<sched::AllReduceStartOp>(op))
        // Started while its sched.grad runs, in this order on every rank; checked as if
        // it blocked there (stricter than the runtime, which waits at sched.wait).
        r = collective(x.getAxes(), ("all_reduce (" + x.getReduce() + ")").str(), x.getCount());
      else if (auto x = dyn_cast<sched::AllGatherOp>(op))
        r = collective(x.getAxes(), "all_gather", x.getCount());
      else if (auto x = dyn_cast<sched::ReduceScatterStartOp>(op))
        r = collective(x.getAxes(),
                       "reduce_scatter (slice [" + std::to_string(x.getBegin()) + ", " +
                           std::to_string(x.getBegin() + x.getSize()) + "))",
                       x.getCount());
      else if (auto x = dyn_cast<sched::AllGatherStartOp>(op))
        // Started here, in this order on every rank (MPI_Iallgatherv: the same slice
        // everywhere); checked as if it blocked here.
        r = collective(x.getAxes(),
                       "all_gather (slice [" + std::to_string(x.getBegin()) + ", " +
                           std::to_string(x.getBegin() + x.getSize()) + "))",
                       x.getCount());
      else if (auto x = dyn_cast<sched::ReduceScatterOp>(op))
        r = collective(x.getAxes(), "reduce_scatter", x.getCount()); // accumulate is local to the receiver
      else if (auto x = dyn_cast<sched::SendOp>(op))
        r = p2p(x.getAxis(), x.getPeer(), Event::Send, x.getCount());
      else if (auto x = dyn_cast<sched::RecvOp>(op))
        r = p2p(x.getAxis(), x.getPeer(), Event::Recv, x.getCount());
      else if (auto x = dyn_cast<sched::SendRecvOp>(op)) {
        r = p2p(x.getAxis(), x.getTo(), Event::SendRecv, x.getCount());
        if (succeeded(r)) {
          SmallVector<int64_t> pc = c;
          pc[axisIndex(x.getAxis())] = x.getFrom();
          out.back().from = rankOf(pc);
          out.back().recvWhat = floats(x.getRecvCount());
        }
      }
      if (failed(r))
        return failure();
    }
    return success();
  }

  /// How many collectives precede event i (1-based position among collectives).
  static size_t collectiveIndex(const std::vector<Event> &events, size_t i) {
    size_t n = 1;
    for (size_t k = 0; k < i; ++k)
      n += events[k].kind == Event::Collective;
    return n;
  }

  /// Runs every rank's events to completion, or reports why some rank cannot.
  LogicalResult run(Operation *fn, std::vector<std::vector<Event>> &events) {
    size_t n = events.size();
    std::vector<size_t> pc(n, 0);
    auto head = [&](size_t r) -> const Event * { return pc[r] < events[r].size() ? &events[r][pc[r]] : nullptr; };
    while (true) {
      bool progress = false, done = true;
      for (size_t r = 0; r < n; ++r) {
        const Event *e = head(r);
        if (!e)
          continue;
        done = false;
        if (e->kind == Event::Collective) {
          // Every member of the communicator must be at a collective on it.
          SmallVector<size_t> members;
          for (size_t q = 0; q < n; ++q) {
            SmallVector<int64_t> a = coords(int64_t(r)), b = coords(int64_t(q));
            bool same = true;
            for (size_t x = 0; x < sizes.size(); ++x)
              if (!(e->mask & (1u << x)) && a[x] != b[x])
                same = false;
            if (same)
              members.push_back(q);
          }
          bool ready = true;
          for (size_t q : members) {
            const Event *o = head(q);
            if (!o || o->kind != Event::Collective || o->mask != e->mask || o->color != e->color) {
              ready = false;
              break;
            }
            if (o->what != e->what) {
              InFlightDiagnostic d = e->op->emitError()
                                     << "collectives do not match: " << describe(int64_t(r)) << " issues " << e->what
                                     << " here as its collective #" << collectiveIndex(events[r], pc[r]) << " while "
                                     << describe(int64_t(q)) << " issues " << o->what
                                     << "; the ranks would hang or exchange garbage";
              d.attachNote(o->op->getLoc()) << describe(int64_t(q)) << "'s " << o->what;
              return failure();
            }
          }
          if (ready) {
            for (size_t q : members)
              ++pc[q];
            progress = true;
          }
        } else if (e->sends()) {
          // A send half meets the receive half of its peer's current event.
          size_t q = size_t(e->peer);
          Event *o = pc[q] < events[q].size() ? &events[q][pc[q]] : nullptr;
          if (o && o->receivesFrom(int64_t(r))) {
            if (o->received_what() != e->what) {
              InFlightDiagnostic d = e->op->emitError() << describe(int64_t(r)) << " sends " << e->what << " but "
                                                        << describe(int64_t(q)) << " receives " << o->received_what();
              d.attachNote(o->op->getLoc()) << "the receive";
              return failure();
            }
            events[r][pc[r]].sent = true;
            o->received = true;
            progress = true;
          }
        }
        // An event whose halves have all completed is done.
        for (size_t q : {r, e->peer >= 0 ? size_t(e->peer) : r}) {
          const Event *h = head(q);
          if (h && h->kind != Event::Collective && (h->kind == Event::Recv || h->sent) &&
              (h->kind == Event::Send || h->received)) {
            ++pc[q];
            progress = true;
          }
        }
      }
      if (done)
        return success();
      if (!progress)
        break;
    }
    // Stuck: name the first waiting rank's operation and what its peers are doing.
    size_t r = 0;
    while (!head(r))
      ++r;
    const Event *e = head(r);
    InFlightDiagnostic d = e->op->emitError()
                           << "deadlock in @" << cast<func::FuncOp>(fn).getName() << ": " << describe(int64_t(r))
                           << " waits here forever ("
                           << (e->kind == Event::Collective ? e->what
                               : e->kind == Event::Send     ? "send of " + e->what
                               : e->kind == Event::Recv     ? "receive of " + e->what
                                                            : "send of " + e->what + " and receive of " + e->recvWhat)
                           << ")";
    // Notes: the peers it waits for first (its communicator, or the other end of the
    // transfer), then other blocked ranks, which show a cycle; three at most.
    auto member = [&](size_t q) {
      if (e->kind != Event::Collective)
        return int64_t(q) == e->peer || int64_t(q) == e->from;
      SmallVector<int64_t> a = coords(int64_t(r)), b = coords(int64_t(q));
      for (size_t x = 0; x < sizes.size(); ++x)
        if (!(e->mask & (1u << x)) && a[x] != b[x])
          return false;
      return true;
    };
    int notes = 0;
    for (int pass = 0; pass < 2; ++pass)
      for (size_t q = 0; q < n && notes < 3; ++q) {
        if (q == r || member(q) != (pass == 0))
          continue;
        const Event *o = head(q);
        if (!o) {
          if (pass == 0) {
            d.attachNote(fn->getLoc()) << describe(int64_t(q)) << " has finished the function";
            ++notes;
          }
        } else if (o->op != e->op) {
          d.attachNote(o->op->getLoc()) << describe(int64_t(q)) << " waits here";
          ++notes;
        }
      }
    return failure();
  }

private:
  mutable sched::MeshOp mesh;
  SmallVector<int64_t> sizes;
};

struct SchedCheckDeadlock : plan::impl::SchedCheckDeadlockBase<SchedCheckDeadlock> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal() || fn.getNumArguments() == 0 || !fn.getArgAttr(0, "sched.context"))
        continue;
      sched::MeshOp mesh = sched::getMesh(fn);
      if (!mesh) {
        fn.emitOpError() << "is a sched program but the module has no sched.mesh";
        return signalPassFailure();
      }
      Simulator sim(mesh);
      int64_t world = mesh.numRanks();
      if (world > 4096) {
        mesh.emitOpError() << "has " << world << " ranks; the deadlock check simulates at most 4096";
        return signalPassFailure();
      }
      std::vector<std::vector<Event>> events;
      events.resize(size_t(world));
      for (int64_t r = 0; r < world; ++r)
        if (failed(sim.trace(fn.getBody().front(), r, events[size_t(r)])))
          return signalPassFailure();
      if (failed(sim.run(fn, events)))
        return signalPassFailure();
    }
  }
};

} // namespace

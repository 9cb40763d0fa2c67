// Checks of mesh declarations: the devices, the named axes whose sizes multiply to
// the device count, and the optional memory, peak, bandwidth and link figures.
#include "SemaInternal.h"

#include <cmath>

using namespace plan;
using namespace plan::lang;
using ast::Expr;

static std::string joinInts(const std::vector<std::pair<std::string, int64_t>> &v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? " × " : "") + v[i].first + " " + std::to_string(v[i].second);
  return s;
}

void Sema::checkMesh(const ast::Decl &decl) {
  std::string what = "mesh '" + decl.name + "'";
  Section sec(*this, decl.entries, what, {"devices", "axes", "memory", "peak", "hbm", "links", "pcie", "host_memory", "nvme"});
  sema::Mesh mesh;
  mesh.name = decl.name;
  mesh.loc = decl.nameLoc;
  bool ok = true;

  const Expr *devices = sec.value("devices");
  if (!devices) {
    if (!sec.get("devices"))
      diags.error(decl.nameLoc, what + " needs 'devices', as in 'devices = cpu(4)' or 'devices = cuda(8) * 2'");
    ok = false;
  } else {
    const Expr *call = devices;
    const Expr *nodes = nullptr;
    if (devices->kind == Expr::Kind::Binary && devices->text == "*" && devices->lhs->kind == Expr::Kind::Call) {
      call = devices->lhs.get();
      nodes = devices->rhs.get();
    }
    Value v = call->kind == Expr::Kind::Call ? eval(*call, nullptr) : Value::error();
    if (call->kind != Expr::Kind::Call) {
      diags.error(devices->loc, "'devices' is 'cpu(N)', 'cuda(N)' or 'cuda(N) * nodes'");
      ok = false;
    } else if (!v.isError()) {
      if (v.s != "cpu" && v.s != "cuda") {
        // No "did you mean": gpu → cpu would quietly turn GPUs into CPU processes.
        diags.error(call->loc, "unknown device kind '" + v.s +
                                   "'; the kinds are cpu (processes on the host) and cuda (NVIDIA GPUs)");
        ok = false;
      } else if (auto args = bindArgs(*this, {v.s, {{"count", true}}}, v)) {
        mesh.kind = v.s == "cpu" ? sema::DeviceKind::CPU : sema::DeviceKind::CUDA;
        auto n = toPositiveInt((*args)["count"], "the device count");
        ok &= n.has_value();
        if (n)
          mesh.perNode = *n;
      } else {
        ok = false;
      }
      if (nodes) {
        auto m = toPositiveInt(eval(*nodes, nullptr), "the node count");
        ok &= m.has_value();
        if (m)
          mesh.nodes = *m;
      }
      int64_t total;
      if (ok && __builtin_mul_overflow(mesh.perNode, mesh.nodes, &total)) {
        diags.error(devices->loc, "too many devices");
        ok = false;
      }
    } else {
      ok = false;
    }
  }

  const ast::Entry *axesEntry = sec.get("axes");
  if (const Expr *axes = sec.value("axes")) {
    Value v = eval(*axes, nullptr);
    if (!v.isError()) {
      if (v.kind != Value::Kind::List || v.items.empty() || v.items.front().key.empty()) {
        typeError(v, "'axes' of " + what, "a list of named sizes, as in [dp: 2, tp: 4]");
        ok = false;
      } else {
        for (const Value::Item &it : v.items) {
          auto n = toPositiveInt(*it.value, "the size of axis '" + it.key + "'");
          if (!n) {
            ok = false;
            continue;
          }
          if (it.key == "none" || it.key == "_") {
            diags.error(it.keyLoc, "'" + it.key + "' cannot name a mesh axis");
            ok = false;
          }
          mesh.axes.push_back({it.key, *n, it.keyLoc});
        }
      }
    } else {
      ok = false;
    }
  } else if (!axesEntry) {
    diags.error(decl.nameLoc, what + " needs 'axes', as in 'axes = [dp: 2, tp: 2]'");
    ok = false;
  } else {
    ok = false;
  }

  if (ok) {
    int64_t product = 1;
    std::vector<std::pair<std::string, int64_t>> sizes;
    bool overflow = false;
    for (auto &a : mesh.axes) {
      overflow |= __builtin_mul_overflow(product, a.size, &product);
      sizes.push_back({a.name, a.size});
    }
    if (overflow || product != mesh.devices()) {
      diags
          .error(axesEntry->loc, "the axes of " + what + " multiply to " +
                                     (overflow ? std::string("more than 2^63") : std::to_string(product)) + " (" +
                                     joinInts(sizes) + "), but it has " + std::to_string(mesh.devices()) + " devices")
          .note(sec.get("devices")->loc, "devices are declared here")
          .note("the product of the axis sizes must equal the device count");
      ok = false;
    }
  }

  auto quantity = [&](const char *key, units::Dim dim) -> std::optional<double> {
    const Expr *e = sec.value(key);
    if (!e)
      return std::nullopt;
    auto q = toQuantity(eval(*e, nullptr), dim, std::string("'") + key + "' of " + what);
    if (!q) {
      ok = false;
    } else if (!(*q > 0)) {
      diags.error(e->loc, std::string("'") + key + "' of " + what + " must be positive");
      ok = false;
      return std::nullopt;
    }
    return q;
  };
  if (auto m = quantity("memory", units::Dim::Bytes))
    mesh.memoryBytes = int64_t(std::llround(std::min(*m, 9.2e18)));
  mesh.peakFlops = quantity("peak", units::Dim::FlopsPerSecond);
  mesh.hbmBytesPerSecond = quantity("hbm", units::Dim::BytesPerSecond);
  mesh.pcieBytesPerSecond = quantity("pcie", units::Dim::BytesPerSecond);
  if (auto m = quantity("host_memory", units::Dim::Bytes))
    mesh.hostMemoryBytes = int64_t(std::llround(std::min(*m, 9.2e18)));
  mesh.nvmeBytesPerSecond = quantity("nvme", units::Dim::BytesPerSecond);
  if (const Expr *links = sec.value("links")) {
    Value v = eval(*links, nullptr);
    if (v.kind != Value::Kind::List || (!v.items.empty() && v.items.front().key.empty())) {
      typeError(v, "'links' of " + what, "a list of named bandwidths, as in [node: 450 GB/s]");
      ok = false;
    } else {
      for (const Value::Item &it : v.items) {
        auto q = toQuantity(*it.value, units::Dim::BytesPerSecond, "link '" + it.key + "'");
        if (q && !(*q > 0)) {
          diags.error(it.value->loc, "link '" + it.key + "' of " + what + " must be positive");
          ok = false;
        } else if (q) {
          mesh.links[it.key] = *q;
        } else {
          ok = false;
        }
      }
    }
  }
  if (ok)
    program.meshes.push_back(std::move(mesh));
}

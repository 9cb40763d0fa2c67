// `planc check`'s fit rule: a plan that cannot fit its devices is an error.
#include "plan/Compiler/FitCheck.h"

#include "plan/Compiler/CostModel.h"

#include "llvm/Support/FormatVariadic.h"

using namespace plan;

bool plan::checkFit(const sema::Program &program, lang::Diags &diags, const std::string &entry) {
  bool ok = true;
  for (const sema::Train &t : program.trains) {
    if (t.loc.file != 0 || (!entry.empty() && t.name != entry))
      continue;
    const sema::Mesh &mesh = program.meshes[t.mesh];
    const sema::Model &model = program.models[t.model];
    if (!mesh.memoryBytes)
      continue;
    sema::Layout layout = sema::layoutOf(t);
    cost::Estimate e = cost::estimate(model, mesh, layout, cost::axisRolesOf(t, mesh));
    cost::addFederated(e, model, t, mesh);
    if (e.fits())
      continue;
    ok = false;
    const cost::Memory &m = e.perDevice;
    lang::Diag d = diags.error(t.loc, llvm::formatv("train '{0}' needs {1} per device but mesh '{2}' has {3}", t.name,
                                                    cost::formatBytes(double(m.total())), mesh.name,
                                                    cost::formatBytes(double(*mesh.memoryBytes)))
                                          .str());
    d.note(llvm::formatv("pipeline rank {0}: parameters {1}, gradients {2}, optimizer {3}, "
                         "activations {4}, buffers {5}",
                         e.worstRank, cost::formatBytes(double(m.params)), cost::formatBytes(double(m.grads)),
                         cost::formatBytes(double(m.optimizer)), cost::formatBytes(double(m.activations)),
                         cost::formatBytes(double(m.buffers)))
               .str());
    // Every layout that fits, once; those this version builds first. Where only others
    // fit (offload on a cuda mesh), they are shown as estimates.
    cost::SearchOptions all;
    all.buildableOnly = false;
    std::vector<cost::Candidate> every = cost::search(model, mesh, layout, all), fits;
    for (cost::Candidate &c : every)
      if (cost::buildable(c.layout, c.estimate))
        fits.push_back(c);
    bool estimatedOnly = fits.empty() && !every.empty();
    if (estimatedOnly)
      fits = std::move(every);
    if (fits.empty()) {
      d.note("no layout of this batch on " + std::to_string(mesh.devices()) +
             (mesh.devices() == 1 ? " device" : " devices") +
             " fits; use more devices, a smaller model or a smaller batch");
      continue;
    }
    for (size_t i = 0; i < fits.size() && i < 3; ++i) {
      const sema::Layout &l = fits[i].layout;
      std::string offload;
      if (l.optimizerOffload.any())
        offload = std::string(", offload { optimizer = ") + sema::offloadTargetName(l.optimizerOffload.target) +
                  (l.paramsOffload.any() ? std::string("  params = ") + sema::offloadTargetName(l.paramsOffload.target)
                                         : std::string()) +
                  " }";
      d.note(llvm::formatv("would fit: data {0} x tensor {1} x pipeline {2}, zero {3}, micro {4}, "
                           "recompute {5}{6}: {7} per device, {8:f3} s per step",
                           l.data, l.tensor, l.pipeline, l.zero, l.micro, sema::recomputeName(l.recompute),
                           (l.sequence ? ", sequence parallel" : "") + offload,
                           cost::formatBytes(double(fits[i].estimate.perDevice.total())), fits[i].estimate.stepSeconds)
                 .str());
    }
    if (estimatedOnly)
      d.note("these layouts are estimates that this version of planc does not build (on a cuda mesh "
             "'optimizer = cpu' or 'params' offloaded)");
    d.note("'planc explain --search' lists every layout that fits");
  }
  return ok;
}

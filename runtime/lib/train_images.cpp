// A model over images in the training driver: its image files, its evaluation (loss
// and top-1 accuracy with batchnorm's running statistics), and those statistics as the
// model's buffers in checkpoints and exports (EXTENSIONS.md §4, docs/EXECUTABLES.md).
#include "trainer.h"

#include <cmath>
#include <cstring>

namespace planrt::train {

namespace {

/// Opens the image files the patterns match, checking their shape against the compiled one.
planrt_status openFiles(const std::vector<std::string> &files, const std::string &format, const Manifest &m,
                        planrt_images **out) {
  std::vector<const char *> patterns;
  for (const std::string &f : files)
    patterns.push_back(f.c_str());
  auto kind = format == "cifar10" ? PLANRT_IMAGES_CIFAR10 : PLANRT_IMAGES_PLANC;
  if (planrt_status s = planrt_images_open(patterns.data(), patterns.size(), kind, m.images.classes, out))
    return s;
  int64_t c, h, w;
  planrt_images_shape(*out, &c, &h, &w);
  if (c != m.images.channels || h != m.images.height || w != m.images.width)
    return fail(PLANRT_ERR_MISMATCH, "%s: its images are %lldx%lldx%lld, but this executable was built for %lldx%lldx%lld",
                files.front().c_str(), (long long)c, (long long)h, (long long)w, (long long)m.images.channels,
                (long long)m.images.height, (long long)m.images.width);
  return PLANRT_OK;
}

/// The class a row of logits predicts: the first maximum, a NaN above any number (as
/// torch.argmax).
int64_t predicted(const float *logits, int64_t classes) {
  int64_t best = 0;
  for (int64_t k = 1; k < classes; ++k)
    if (!std::isnan(logits[best]) && (logits[k] > logits[best] || std::isnan(logits[k])))
      best = k;
  return best;
}

} // namespace

planrt_status Trainer::openImages(const std::vector<std::string> &files, const std::vector<std::string> &valFiles) {
  if (planrt_status s = openFiles(files, m.images.format, m, &images))
    return s;
  ctx.images = images;
  ctx.imageTransform = m.images.transform;
  ctx.imageSeed = m.seed;
  ctx.imageFloats = m.images.floats();
  ctx.tokens.resize(size_t(m.micro * m.images.floats())); // floats, in the input buffer's int32 slots
  ctx.targets.resize(size_t(m.micro));
  ctx.running.clear();
  for (const auto &r : m.images.running)
    ctx.running.push_back({r.name, std::vector<float>(size_t(r.channels), 0.0f),
                           std::vector<float>(size_t(r.channels), 1.0f), 0});
  if (valFiles.empty() || m.evalEvery <= 0 || m.evalBatches <= 0)
    return PLANRT_OK;
  if (planrt_status s = openFiles(valFiles, m.images.valFormat, m, &valImages))
    return s;
  uint64_t needed = uint64_t(m.evalBatches * m.micro * m.dataParallel);
  if (planrt_images_count(valImages) < needed)
    return fail(PLANRT_ERR_FORMAT,
                "%s: the validation images are %llu, fewer than eval_batches × micro × data-parallel ranks = %llu",
                valFiles.front().c_str(), (unsigned long long)planrt_images_count(valImages),
                (unsigned long long)needed);
  return PLANRT_OK;
}

planrt_status Trainer::imageValidation(double &mean, double &accuracy) {
  if (planrt_status st = shareRunning())
    return st;
  e.gather(&ctx);
  if (ctx.status)
    return fail(ctx.status, "%s", ctx.error.c_str());
  const int64_t classes = m.images.classes, floats = m.images.floats();
  float *pixels = reinterpret_cast<float *>(ctx.tokens.data()); // the input buffer's int32 slots hold floats
  int32_t *labels = ctx.targets.data();
  planrt::BackendVector<float> out(size_t(1 + m.micro * classes)); // the loss, then the logits
  float loss = 0;
  uint64_t correct = 0; // exact however many images
  for (int64_t b = 0; b < m.evalBatches; ++b) {
    uint64_t first = uint64_t((b * m.dataParallel + ctx.dataRank) * m.micro);
    for (int64_t i = 0; i < m.micro; ++i)
      if (planrt_status st = planrt_images_get(valImages, first + uint64_t(i), &m.images.transform,
                                               pixels + i * floats, labels + i)) {
        e.release(&ctx);
        return st;
      }
    e.eval(data(params), ctx.tokens.data(), labels, out.data());
    loss += out[0];
    for (int64_t i = 0; i < m.micro; ++i)
      correct += predicted(out.data() + 1 + i * classes, classes) == labels[i];
  }
  e.release(&ctx);
  if (ctx.status)
    return fail(ctx.status, "%s", ctx.error.c_str());
  if (ctx.mesh && m.dataParallel > 1) {
    planrt::Waiting w(ctx, "all_reduce of the validation loss and accuracy");
    if (planrt_status st = planrt_all_reduce(ctx.mesh, m.dataMask, &loss, 1, PLANRT_SUM))
      return st;
    // One 64-bit count: two float slots summed as an integer.
    if (planrt_status st = planrt_all_reduce(ctx.mesh, m.dataMask, reinterpret_cast<float *>(&correct), 2,
                                             PLANRT_SUM_U64))
      return st;
  }
  mean = double(loss) / double(m.evalBatches * m.dataParallel);
  accuracy = double(correct) / double(m.evalBatches * m.dataParallel * m.micro);
  return PLANRT_OK;
}

planrt_status Trainer::shareRunning() {
  if (m.images.batchnormSync || !ctx.mesh || m.dataParallel <= 1 || ctx.running.empty())
    return PLANRT_OK;
  // A sum in which only data rank 0 gives non-zeros is its statistics, exactly.
  std::vector<float> all;
  for (const planrt_step_ctx::RunningStats &r : ctx.running) {
    all.insert(all.end(), r.mean.begin(), r.mean.end());
    all.insert(all.end(), r.var.begin(), r.var.end());
  }
  if (ctx.dataRank != 0)
    std::fill(all.begin(), all.end(), 0.0f);
  planrt::Waiting w(ctx, "all_reduce of data rank 0's batchnorm running statistics");
  if (planrt_status st = planrt_all_reduce(ctx.mesh, m.dataMask, all.data(), int64_t(all.size()), PLANRT_SUM))
    return st;
  size_t at = 0;
  for (planrt_step_ctx::RunningStats &r : ctx.running)
    for (std::vector<float> *v : {&r.mean, &r.var}) {
      std::copy(all.begin() + long(at), all.begin() + long(at + v->size()), v->begin());
      at += v->size();
    }
  return PLANRT_OK;
}

std::vector<planrt::ModelBuffer> Trainer::modelBuffers() {
  std::vector<planrt::ModelBuffer> out;
  for (planrt_step_ctx::RunningStats &r : ctx.running) {
    std::vector<int64_t> c{int64_t(r.mean.size())};
    out.push_back({r.name + ".running_mean", PLANRT_F32, c, r.mean.data()});
    out.push_back({r.name + ".running_var", PLANRT_F32, c, r.var.data()});
    out.push_back({r.name + ".num_batches_tracked", PLANRT_I64, {}, &r.tracked});
  }
  return out;
}

} // namespace planrt::train

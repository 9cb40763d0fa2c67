// The data of a train plan whose model classifies images: images(…) files, their shape
// and transform, and the rules of this version for such plans (EXTENSIONS.md §4).
#include "Train.h"

#include "planrt_image_file.h"

#include <fstream>
#include <glob.h>

using namespace plan;
using namespace plan::lang;

namespace {

/// The header of a planc image file (planrt_image_file.h), checked.
bool readImageHeader(const std::string &path, planrt_image_header &h, std::string &why) {
  std::ifstream in(path, std::ios::binary);
  unsigned char b[PLANRT_IMAGE_HEADER_BYTES];
  if (!in.read(reinterpret_cast<char *>(b), sizeof b)) {
    why = "cannot read its 32-byte header";
    return false;
  }
  if (!planrt_image_header_read(b, &h)) {
    why = "it is not a planc image file (no PLANCIMG magic)";
    return false;
  }
  if (h.version != PLANRT_IMAGE_VERSION || !h.channels || !h.height || !h.width) {
    why = "its header is not version 1 with positive sizes";
    return false;
  }
  return true;
}

} // namespace

bool TrainCheck::imageShape(const Value &call, sema::ImageData &out) {
  if (out.format == sema::ImageData::Format::Cifar10) {
    out.channels = 3, out.height = 32, out.width = 32;
    return true;
  }
  std::string pattern = Sema::resolvePath(t.baseDir, out.files.front()), why = "no file matches it";
  glob_t g;
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0 && g.gl_pathc > 0) {
    planrt_image_header h;
    std::string first = g.gl_pathv[0];
    bool read = readImageHeader(first, h, why);
    globfree(&g);
    if (read) {
      out.channels = h.channels, out.height = h.height, out.width = h.width;
      return true;
    }
    why = "'" + first + "': " + why;
  } else {
    globfree(&g);
  }
  diags.error(call.loc, "cannot take the image shape from '" + pattern + "': " + why)
      .note(call.loc, "the shape is read from the first file at build time; without the files, give it, as in "
                      "images(\"…\", format: planc, shape: [1, 8, 8])");
  return false;
}

void TrainCheck::imageFiles(const char *key, sema::ImageData &out) {
  Value v;
  if (!keyValue(key, v))
    return;
  std::string where = std::string("'") + key + "' of " + what;
  if (v.kind != Value::Kind::Call || v.s != "images") {
    sema.typeError(v, where + " (model '" + model->name + "' classifies images)",
                   "image files, as in images(\"data/train.bin\", format: planc)");
    ok = false;
    return;
  }
  std::vector<double> *nextList = nullptr; // normalize: [mean…], [std…]: the std list follows
  bool haveShape = false;
  for (Value::Item &it : v.items) {
    const Value &x = *it.value;
    if (it.key.empty() && nextList && x.kind == Value::Kind::List) {
      for (const Value::Item &n : x.items)
        if (auto f = sema.toFloat(*n.value, "a standard deviation of 'normalize'"))
          nextList->push_back(*f);
        else
          ok = false;
      nextList = nullptr;
    } else if (std::string(key) == "val" && (it.key == "normalize" || it.key == "crop" || it.key == "flip")) {
      diags.error(it.keyLoc, "the validation images take no '" + it.key + ":'")
          .note(it.keyLoc, "evaluation normalises them as the training images ('data' gives normalize:) and "
                           "never crops or flips them");
      ok = false;
    } else if (it.key.empty()) {
      if (auto s = sema.toString(x, "an image file"))
        out.files.push_back(*s);
      else
        ok = false;
    } else if (it.key == "format") {
      if (auto f = sema.toChoice(x, "the image format", {"planc", "cifar10"}))
        out.format = *f == "planc" ? sema::ImageData::Format::Planc : sema::ImageData::Format::Cifar10;
      else
        ok = false;
    } else if (it.key == "shape") {
      std::vector<int64_t> dims;
      for (const Value::Item &n : x.kind == Value::Kind::List ? x.items : std::vector<Value::Item>{})
        if (auto i = sema.toPositiveInt(*n.value, "an image dimension"))
          dims.push_back(*i);
      if (dims.size() != 3) {
        diags.error(x.loc, "'shape' of images(…) is [channels, height, width], as in [3, 32, 32]");
        ok = false;
      } else {
        out.channels = dims[0], out.height = dims[1], out.width = dims[2];
        haveShape = true;
      }
    } else if (it.key == "normalize") {
      if (x.kind != Value::Kind::List) {
        diags.error(x.loc, "'normalize' takes the per-channel means, then the standard deviations: "
                           "normalize: [0.49, 0.48, 0.45], [0.25, 0.24, 0.26]");
        ok = false;
        continue;
      }
      for (const Value::Item &n : x.items)
        if (auto f = sema.toFloat(*n.value, "a mean of 'normalize'"))
          out.mean.push_back(*f);
        else
          ok = false;
      nextList = &out.std;
    } else if (it.key == "crop") {
      if (auto i = sema.toInt(x, "the padding of 'crop'"); i && *i >= 0)
        out.cropPad = *i;
      else {
        if (i)
          diags.error(x.loc, "'crop' pads by a non-negative number of pixels, not " + std::to_string(*i));
        ok = false;
      }
    } else if (it.key == "flip") {
      if (auto b = sema.toBool(x, "'flip'"))
        out.flip = *b;
      else
        ok = false;
    } else {
      diags.error(it.keyLoc, "images(…) takes file paths or globs, then format:, shape:, normalize:, crop: and "
                             "flip:, not '" + it.key + "'");
      ok = false;
    }
  }
  if (!ok)
    return;
  if (out.files.empty()) {
    diags.error(v.loc, "images(…) needs at least one file path or glob");
    ok = false;
    return;
  }
  if (!haveShape && !imageShape(v, out)) {
    ok = false;
    return;
  }
  if (!out.mean.empty() &&
      (out.mean.size() != size_t(out.channels) || out.std.size() != size_t(out.channels) || out.channels > 4)) {
    diags.error(v.loc, "'normalize' gives a mean and a standard deviation per channel: " +
                           std::to_string(out.channels) + " of each (at most 4 channels), not " +
                           std::to_string(out.mean.size()) + " and " + std::to_string(out.std.size()));
    ok = false;
  }
  for (double s : out.std)
    if (!(s > 0)) {
      diags.error(v.loc, "a standard deviation of 'normalize' must be positive");
      ok = false;
    }
}

void TrainCheck::checkImages() {
  if (!model || !model->images)
    return;
  auto refuse = [&](ast::Loc at, const std::string &why) {
    diags.error(at, what + ": " + why + " is not implemented for models over images in this version")
        .note(model->loc, "model '" + model->name + "' classifies images");
    ok = false;
  };
  if (t.valImages.any() && (t.valImages.channels != t.images.channels || t.valImages.height != t.images.height ||
                            t.valImages.width != t.images.width))
    diags.error(sec.value("val")->loc, "the validation images are " + std::to_string(t.valImages.channels) + "×" +
                                           std::to_string(t.valImages.height) + "×" +
                                           std::to_string(t.valImages.width) + ", the training images " +
                                           std::to_string(t.images.channels) + "×" + std::to_string(t.images.height) +
                                           "×" + std::to_string(t.images.width)),
        ok = false;
  if (mesh && mesh->kind == sema::DeviceKind::CUDA)
    refuse(decl.nameLoc, "the CUDA target (convolutions, pooling and batch normalisation run on the CPU target)");
  if (t.tensorParallel > 1 || t.pipelineParallel > 1 || t.parallel.sequence)
    refuse(decl.nameLoc, "tensor, sequence or pipeline parallelism (data parallelism and ZeRO are)");
  if (t.adapt.rank > 0)
    refuse(decl.nameLoc, "adapt = lora(…)");
  if (t.federated.any())
    refuse(decl.nameLoc, "federated training");
  bool batchnorm = false;
  for (const sema::GraphOp &op : model->ops)
    batchnorm |= op.kind == sema::OpKind::BatchNorm;
  if (batchnorm && t.dataParallel > 1 && t.parallel.batchnormSync && t.parallel.dataAxes.size() > 1)
    refuse(t.parallel.batchnormLoc.line ? t.parallel.batchnormLoc : decl.nameLoc,
           "batchnorm = sync over several data axes (write one data axis, or batchnorm = local)");
}

// Fine-tuning a pretrained model (EXTENSIONS.md §1): where its parameters come from
// (`init = checkpoint(…)`), and the keys this version refuses by name.
#include "Train.h"

#include <sys/stat.h>

using namespace plan;
using namespace plan::lang;
using ast::Expr;

namespace {
/// The path as the executable will resolve it: relative paths against the plan's
/// directory.
std::string resolved(const std::string &base, const std::string &path) {
  if (path.empty() || path[0] == '/' || base.empty())
    return path;
  return base + "/" + path;
}
} // namespace

void TrainCheck::checkInit() {
  const Expr *e = sec.value("init");
  if (!e)
    return;
  Value v = sema.eval(*e, nullptr);
  if (v.isError()) {
    ok = false;
    return;
  }
  if (v.kind != Value::Kind::Call || v.s != "checkpoint") {
    sema.typeError(v, "'init' of " + what, "a checkpoint, as in checkpoint(\"ckpt/base\", format: hf)");
    ok = false;
    return;
  }
  auto args = bindArgs(sema, {"checkpoint", {{"path", true}, {"format", false}}}, v);
  if (!args) {
    ok = false;
    return;
  }
  auto &a = *args;
  std::optional<std::string> path = sema.toString(a["path"], "the path of 'checkpoint'");
  if (!path) {
    ok = false;
    return;
  }
  if (path->empty()) {
    diags.error(a["path"].loc, "the path of 'checkpoint' is empty");
    ok = false;
    return;
  }
  std::string full = resolved(t.baseDir, *path);
  struct stat st;
  if (::stat(full.c_str(), &st) != 0) {
    diags.error(a["path"].loc, "no checkpoint at '" + full + "': no such file or directory")
        .note(a["path"].loc, "'init = checkpoint(PATH)' takes a .safetensors file, a planc checkpoint directory "
                             "(its latest step), or a Hugging Face model directory or its "
                             "model.safetensors.index.json; relative paths start at the plan's directory");
    ok = false;
    return;
  }
  t.init.path = *path;
  if (a.count("format")) {
    if (auto f = sema.toChoice(a["format"], "checkpoint format", {"planc", "hf"}))
      t.init.format = *f;
    else
      ok = false;
  }
}

// Small queries and names over the checked program.
#include "plan/Lang/Program.h"

#include <algorithm>
#include <cmath>

using namespace plan::sema;

int64_t Parameter::numElements() const {
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  return n;
}

int64_t Model::numParameters() const {
  int64_t n = 0;
  for (const Parameter &p : params)
    n += p.numElements();
  return n;
}

int64_t Federated::sampled() const {
  // ⌈fraction × clients⌉, with fractions such as 0.3 × 10 that are whole in decimal kept whole.
  auto n = int64_t(std::ceil(fraction * double(clients) - 1e-9));
  return std::clamp<int64_t>(n, 1, clients);
}

bool Mesh::axisWithinNode(size_t i) const {
  std::vector<int64_t> sizes;
  for (const MeshAxis &a : axes)
    sizes.push_back(a.size);
  return planrt::manifest::axisWithinNode(perNode, sizes.data(), sizes.size(), i);
}

std::vector<const GraphOp *> Model::attentions() const {
  std::vector<const GraphOp *> out;
  for (const GraphOp &op : ops)
    if (op.kind == OpKind::Attention)
      out.push_back(&op);
  return out;
}

const MeshAxis *Mesh::axis(const std::string &name) const {
  for (const MeshAxis &a : axes)
    if (a.name == name)
      return &a;
  return nullptr;
}

const Model *Program::findModel(const std::string &name) const {
  for (const Model &m : models)
    if (m.name == name)
      return &m;
  return nullptr;
}

const Mesh *Program::findMesh(const std::string &name) const {
  for (const Mesh &m : meshes)
    if (m.name == name)
      return &m;
  return nullptr;
}

std::string ValueType::str() const {
  switch (kind) {
  case Kind::Tokens:
    return "token ids [batch, seq]";
  case Kind::Positions:
    return "positions [batch, seq]";
  case Kind::Hidden:
    return "activations [batch, seq, " + std::to_string(features) + "]";
  case Kind::Scalar:
    return "a scalar";
  case Kind::Images:
    return std::string("images [batch, ") + (features ? std::to_string(features) : "C") +
           (pooled ? ", 1, 1]" : ", H, W]");
  case Kind::Labels:
    return "class labels [batch]";
  }
  return "?";
}

const char *plan::sema::dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::BF16:
    return "bf16";
  case DType::F16:
    return "f16";
  case DType::I32:
    return "i32";
  }
  return "?";
}

const char *plan::sema::initName(Init i) {
  switch (i) {
  case Init::Normal:
    return "normal";
  case Init::Zeros:
    return "zeros";
  case Init::Ones:
    return "ones";
  }
  return "?";
}

const char *plan::sema::opKindName(OpKind k) {
  switch (k) {
  case OpKind::Embedding:
    return "embedding";
  case OpKind::Attend:
    return "attend";
  case OpKind::Linear:
    return "linear";
  case OpKind::LayerNorm:
    return "layernorm";
  case OpKind::RMSNorm:
    return "rmsnorm";
  case OpKind::Attention:
    return "attention";
  case OpKind::Gelu:
    return "gelu";
  case OpKind::Silu:
    return "silu";
  case OpKind::Relu:
    return "relu";
  case OpKind::Dropout:
    return "dropout";
  case OpKind::CrossEntropy:
    return "cross_entropy";
  case OpKind::Positions:
    return "positions";
  case OpKind::Add:
    return "add";
  case OpKind::Sub:
    return "sub";
  case OpKind::Mul:
    return "mul";
  case OpKind::Conv2d:
    return "conv2d";
  case OpKind::BatchNorm:
    return "batchnorm";
  case OpKind::MaxPool:
    return "maxpool";
  case OpKind::AvgPool:
    return "avgpool";
  case OpKind::Flatten:
    return "flatten";
  }
  return "?";
}

const char *plan::sema::deviceKindName(DeviceKind k) { return k == DeviceKind::CPU ? "cpu" : "cuda"; }

int64_t plan::sema::defaultBucketBytes(DeviceKind kind, int64_t dataRanks, int zero, int64_t tensorRanks,
                                       int64_t pipelineRanks) {
  return kind == DeviceKind::CUDA && dataRanks > 1 && zero != 2 && tensorRanks <= 1 && pipelineRanks <= 1
             ? int64_t(25) << 20
             : 0;
}

const char *plan::sema::offloadTargetName(OffloadTarget t) {
  switch (t) {
  case OffloadTarget::None:
    return "none";
  case OffloadTarget::CPU:
    return "cpu";
  case OffloadTarget::NVMe:
    return "nvme";
  }
  return "?";
}

const char *plan::sema::scheduleName(PipelineSchedule s) {
  switch (s) {
  case PipelineSchedule::GPipe:
    return "gpipe";
  case PipelineSchedule::OneFOneB:
    return "1f1b";
  case PipelineSchedule::Interleaved:
    return "interleaved";
  case PipelineSchedule::ZeroBubble:
    return "zb";
  }
  return "?";
}

const char *plan::sema::precisionName(Precision p) {
  switch (p) {
  case Precision::FP32:
    return "fp32";
  case Precision::BF16:
    return "bf16";
  case Precision::FP16:
    return "fp16";
  }
  return "?";
}

const char *plan::sema::recomputeName(Recompute r) {
  switch (r) {
  case Recompute::None:
    return "none";
  case Recompute::Full:
    return "full";
  case Recompute::Selective:
    return "selective";
  }
  return "?";
}

const char *plan::sema::lrScheduleName(LRSchedule s) {
  switch (s) {
  case LRSchedule::Constant:
    return "constant";
  case LRSchedule::Linear:
    return "linear";
  case LRSchedule::Cosine:
    return "cosine";
  }
  return "?";
}

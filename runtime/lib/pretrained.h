// Internal: a pretrained model's parameters on disk, read by planc's parameter names
// (`init = checkpoint(PATH, format: planc | hf)`, EXTENSIONS.md §1; the name mapping
// is tabled in docs/EXECUTABLES.md).
#ifndef PLANRT_LIB_PRETRAINED_H
#define PLANRT_LIB_PRETRAINED_H

#include "planrt.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace planrt::train {

/// The files of one pretrained model, open for reading.
///
/// `path` is a .safetensors file, a Hugging Face sharded index
/// (model.safetensors.index.json), or a directory: a planc checkpoint directory (its
/// latest step, whole or sharded), or a Hugging Face model directory (its
/// model.safetensors, or model.safetensors.index.json and the shards it lists).
///
/// `planc` reads each parameter under its own name. `hf` also accepts Hugging Face's
/// names: GPT-2's with or without the `transformer.` prefix (their Conv1D weights are
/// [in, out], as planc's), and Llama's (`model.embed_tokens`, `model.layers.N.self_attn.
/// {q,k,v,o}_proj`, `mlp.{gate,up,down}_proj`, `input_layernorm`,
/// `post_attention_layernorm`, `model.norm`, `lm_head`) onto the stdlib `llama` family:
/// nn.Linear's [out, in] transposed to planc's [in, out], q, k and v concatenated into
/// `c_attn`. planc's rotary embedding is Hugging Face's rotate-half form, so q and k
/// load as they are. F32, BF16 and F16 tensors are converted to f32 exactly.
class Pretrained {
public:
  ~Pretrained();
  static planrt_status open(const std::string &path, const std::string &format, std::unique_ptr<Pretrained> &out);

  /// Parameter `name` (planc's) of shape `shape` into dst as f32. A tensor that is
  /// missing, or has another shape or a dtype other than F32, BF16 or F16, is
  /// PLANRT_ERR_MISMATCH naming the file, the model's tensor and the checkpoint's.
  planrt_status read(const std::string &name, const std::vector<int64_t> &shape, float *dst) const;

  /// Whether the checkpoint holds tensor `name` under exactly that name.
  bool has(const std::string &name) const { return find(name) != nullptr; }
  /// A count (a 0-d I64 tensor, as PyTorch's num_batches_tracked) into out;
  /// PLANRT_ERR_MISMATCH naming the file and the tensor when it is missing or not one.
  planrt_status readCount(const std::string &name, int64_t &out) const;

  /// What was opened, for messages: the file, or the directory and the file it chose.
  const std::string &source() const { return described; }
  /// The sha256 of what was read: the file's, or for a sharded index the sha256 of each
  /// file's name and sha256 (the index's, then every shard's, in order), so that a changed
  /// shard changes it.
  planrt_status digest(std::string &hex) const;

private:
  Pretrained() = default;
  planrt_status openFile(const std::string &file);
  planrt_status openIndex(const std::string &index);
  /// The checkpoint's tensor `name`, or nullptr when no file holds it.
  const planrt_tensor *find(const std::string &name) const;
  /// Tensor t as the model's `name` of `shape` into dst: PLANRT_ERR_MISMATCH naming both
  /// when the shapes differ.
  planrt_status convert(const planrt_tensor &t, const std::string &name, const std::vector<int64_t> &shape,
                        float *dst) const;
  planrt_status readHf(const std::string &name, const std::vector<int64_t> &shape, float *dst) const;
  /// Rows of the [out, in] tensors `parts` concatenated, then transposed into dst,
  /// [in, Σ out] (planc's layout of nn.Linear weights).
  planrt_status readTransposed(const std::string &name, const std::vector<int64_t> &shape,
                               const std::vector<std::string> &parts, float *dst) const;

  bool hf = false;
  std::string described;
  std::vector<planrt_st *> files;
  std::vector<std::string> paths; ///< the index (if any), then each file opened
  std::map<std::string, planrt_tensor> tensors;
};

/// Tensor t as f32 into dst (t.rank's shape, row-major); PLANRT_ERR_MISMATCH for a
/// dtype other than F32, BF16 or F16.
planrt_status toF32(const planrt_tensor &t, const std::string &file, float *dst);

/// x rounded to `precision` ("bf16" or "fp16"; "fp32": x itself) to nearest even and back,
/// as the generated code's arith.truncf: what a bf16 or fp16 step reads of an f32 value.
float roundToPrecision(float x, const std::string &precision);

/// w [in, out] += scale · a·b for a [in, rank] and b [rank, out] (LoRA's update, summed in
/// double): what --merge writes and what a model loaded from adapters reads.
void mergeLora(float *w, const float *a, const float *b, int64_t in, int64_t out, int64_t rank, double scale);

/// The modules of Hugging Face's LlamaForCausalLM a llama-family weight of planc is made
/// of, by its module path (its name without `.weight`): `layers.3.attention.c_attn` is
/// `model.layers.3.self_attn.q_proj`, `…k_proj` and `…v_proj` (their rows stacked as its
/// columns), `layers.3.feed_forward.gate` `model.layers.3.mlp.gate_proj`, `output`
/// `lm_head`; empty for any other name.
std::vector<std::string> hfLlamaModules(const std::string &module);

} // namespace planrt::train

#endif // PLANRT_LIB_PRETRAINED_H

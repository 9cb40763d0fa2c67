#!/usr/bin/python3
"""Hugging Face checkpoints made from planc-named parameters, for `init = checkpoint(…,
format: hf)` tests (test/e2e/init_checkpoint.sh). Written from the transformers model
classes' documented state_dict layouts, not from planc's loader:

  gpt2   GPT2LMHeadModel: `transformer.` + planc's names (Conv1D weights [in, out], as
         planc's), `lm_head.weight` (tied to wte) and the `attn.bias` causal-mask buffers
         old checkpoints carry; one model.safetensors, F32.
  llama  LlamaForCausalLM: nn.Linear weights [out, in]; c_attn split into q_proj (heads ×
         head_dim rows), k_proj and v_proj (kv_heads × head_dim each); BF16, sharded in
         two files with a model.safetensors.index.json.

    hf_checkpoint.py gpt2  INIT.safetensors OUTDIR
    hf_checkpoint.py llama INIT.safetensors OUTDIR --heads H --kv-heads K
    hf_checkpoint.py bf16  INIT.safetensors OUT.safetensors   (each tensor rounded to bf16 and back)
"""
import argparse
import json
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_ref import read_safetensors, write_safetensors  # noqa: E402


def write_bf16(path, tensors):
    """safetensors with every tensor BF16 (torch's round-to-nearest-even)."""
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        t = torch.from_numpy(np.ascontiguousarray(tensors[name], dtype=np.float32)).to(torch.bfloat16)
        data = t.view(torch.int16).numpy().astype("<i2").tobytes()
        header[name] = {"dtype": "BF16", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def gpt2(params, out):
    hf = {"transformer." + k: v for k, v in params.items()}
    hf["lm_head.weight"] = params["wte.weight"]
    layers = sorted({int(k.split(".")[1]) for k in params if k.startswith("h.")})
    ctx = params["wpe.weight"].shape[0]
    for i in layers:
        hf["transformer.h.%d.attn.bias" % i] = np.tril(np.ones((ctx, ctx), np.float32)).reshape(1, 1, ctx, ctx)
    write_safetensors(os.path.join(out, "model.safetensors"), hf)


def llama(params, out, heads, kv_heads):
    hf = {"model.embed_tokens.weight": params["tok_embeddings.weight"],
          "model.norm.weight": params["norm.weight"],
          "lm_head.weight": params["output.weight"].T}
    layers = sorted({int(k.split(".")[1]) for k in params if k.startswith("layers.")})
    for i in layers:
        p, at = "layers.%d." % i, "model.layers.%d." % i
        w = params[p + "attention.c_attn.weight"]  # [width, (H + 2 KVH) D]
        d = w.shape[1] // (heads + 2 * kv_heads)
        q, k, v = np.split(w, [heads * d, (heads + kv_heads) * d], axis=1)
        hf[at + "self_attn.q_proj.weight"] = q.T
        hf[at + "self_attn.k_proj.weight"] = k.T
        hf[at + "self_attn.v_proj.weight"] = v.T
        hf[at + "self_attn.o_proj.weight"] = params[p + "attention.c_proj.weight"].T
        for name in ("gate", "up", "down"):
            hf[at + "mlp.%s_proj.weight" % name] = params[p + "feed_forward.%s.weight" % name].T
        hf[at + "input_layernorm.weight"] = params[p + "attention_norm.weight"]
        hf[at + "post_attention_layernorm.weight"] = params[p + "ffn_norm.weight"]
    names = sorted(hf)
    shards = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
              "model-00002-of-00002.safetensors": names[len(names) // 2:]}
    weight_map = {}
    for file, members in shards.items():
        write_bf16(os.path.join(out, file), {n: hf[n] for n in members})
        weight_map.update({n: file for n in members})
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=["gpt2", "llama", "bf16"])
    ap.add_argument("init")
    ap.add_argument("out")
    ap.add_argument("--heads", type=int)
    ap.add_argument("--kv-heads", type=int)
    a = ap.parse_args()
    tensors, _ = read_safetensors(a.init)
    params = {k: np.asarray(v, np.float32) for k, v in tensors.items()}
    if a.kind == "bf16":
        write_safetensors(a.out, {k: torch.from_numpy(v).to(torch.bfloat16).float().numpy()
                                  for k, v in params.items()})
        return 0
    os.makedirs(a.out, exist_ok=True)
    if a.kind == "gpt2":
        gpt2(params, a.out)
    else:
        llama(params, a.out, a.heads, a.kv_heads)
    return 0


if __name__ == "__main__":
    sys.exit(main())

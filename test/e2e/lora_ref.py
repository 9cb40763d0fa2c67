#!/usr/bin/python3
"""PyTorch reference for planc's LoRA fine-tuning (adapt = lora(…), EXTENSIONS.md §1).

gpt_ref.py's GPT-2 (or, with --family llama, llama_ref.py's Llama: RMSNorm, rotary
embeddings, grouped-query attention, SwiGLU, bias-free Linear) with every targeted Conv1D
or Linear (a module path ending with a target, at a
`.` boundary: `c_proj` matches attn.c_proj and mlp.c_proj) wrapped the way PEFT's LoRA
computes it (Hu et al. 2021): y = x·W + bias + (alpha / rank)·((x·A)·B), with A [in, rank]
and B [rank, out] (planc's [in, out] layout; PEFT's lora_A.weight is A transposed). W and
every other parameter of the base are frozen (requires_grad False), so gpt_ref.train's
AdamW, clipping and gradients see the adapters only. Parameter names are planc's:
`h.0.attn.c_attn.lora_a`, `…lora_b`.

    lora_ref.py train --rank 4 --alpha 8 --targets c_attn,c_proj,c_fc \\
        --init init.safetensors (base and adapters) [gpt_ref.py train's flags]
    lora_ref.py train --family llama --depth 2 --heads 4 --kv-heads 2 --width 64 --hidden 128 \\
        --rank 4 --alpha 8 --targets c_attn,c_proj,gate,up,down --init … [train flags]
"""
import argparse
import sys
import os

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_ref  # noqa: E402
import llama_ref  # noqa: E402


class LoRALinear(nn.Module):
    """A frozen Conv1D or Linear ([in, out] weight, bias or not) plus a trainable low-rank
    update."""

    def __init__(self, base, rank, alpha):
        super().__init__()
        n_in, n_out = base.weight.shape
        self.weight, self.bias = base.weight, getattr(base, "bias", None)
        self.lora_a = nn.Parameter(torch.zeros(n_in, rank))
        self.lora_b = nn.Parameter(torch.zeros(rank, n_out))
        self.scale = alpha / rank

    def forward(self, x):
        y = x @ self.weight + self.scale * ((x @ self.lora_a) @ self.lora_b)
        return y if self.bias is None else y + self.bias


def matches(path, target):
    return path == target or path.endswith("." + target)


def adapt(model, rank, alpha, targets):
    for p in model.parameters():
        p.requires_grad_(False)
    wrapped = 0
    for name, module in list(model.named_modules()):
        if isinstance(module, (gpt_ref.Conv1D, llama_ref.Linear)) and any(matches(name, t) for t in targets):
            parent_name, _, leaf = name.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            setattr(parent, leaf, LoRALinear(module, rank, alpha))
            wrapped += 1
    if not wrapped:
        raise ValueError("no module matches the targets %s" % targets)
    return model


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--family", choices=["gpt", "llama"], default="gpt")
    llama_ref.add_model_args(t)
    t.add_argument("--context", type=int, default=64)
    t.add_argument("--layers", type=int, default=2)
    t.add_argument("--init", required=True, help="base and adapters (planc's --save-init)")
    t.add_argument("--rank", type=int, required=True)
    t.add_argument("--alpha", type=float, required=True)
    t.add_argument("--targets", required=True, help="comma-separated")
    gpt_ref.add_train_args(t)
    args = ap.parse_args(argv)
    targets = args.targets.split(",")

    def make_model(a):
        base = llama_ref.model_from_args(a) if a.family == "llama" else gpt_ref.model_from_args(a)
        return adapt(base, args.rank, args.alpha, targets)

    gpt_ref.train(args, log=None if args.quiet else print, make_model=make_model)
    return 0


if __name__ == "__main__":
    sys.exit(main())

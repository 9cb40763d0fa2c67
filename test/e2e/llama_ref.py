#!/usr/bin/python3
"""PyTorch reference for planc's Llama training executables.

The stdlib `llama` family (stdlib/models/llama.plan, untied output head) written the plain
PyTorch way, with state_dict keys equal to planc's parameter names and the same layouts
(`planc emit PLAN --stage nn` shows them):

  tok_embeddings.weight                      [vocab, width]
  layers.{i}.attention_norm.weight           [width]           RMSNorm, eps 1e-5
  layers.{i}.attention.c_attn.weight         [width, (H + 2 KVH) D]
        q, k and v fused: H query heads, then KVH key heads, then KVH value heads, D wide
  layers.{i}.attention.c_proj.weight         [H D, width]
  layers.{i}.ffn_norm.weight                 [width]
  layers.{i}.feed_forward.{gate,up}.weight   [width, hidden]
  layers.{i}.feed_forward.down.weight        [hidden, width]   down(silu(gate x) * up x)
  norm.weight                                [width]
  output.weight                              [width, vocab]

Linear weights are [in, out] (y = x @ W) and there are no biases. Attention is causal with
scale 1/sqrt(D), grouped (query head h reads key/value head h // (H / KVH)), with rotary
embeddings on q and k in Hugging Face's rotate_half convention: for position s and
i in [0, D/2), angle = s * theta^(-2i/D) and (x[i], x[i + D/2]) ->
(x[i] cos - x[i + D/2] sin, x[i + D/2] cos + x[i] sin); theta 500000. The loss is the mean
cross-entropy.

The safetensors reader/writer, the token sampler, the learning-rate schedule and the AdamW
setup (decay on tensors of >= 2 dims only, foreach=False) are gpt_ref.py's.

Command line:

  llama_ref.py train --init init.safetensors --data train.bin --vocab 256 --depth 2 \\
      --heads 4 --kv-heads 2 --width 64 --hidden 128 --batch 4 --micro 2 --seq 32 \\
      --steps 20 --lr 3e-3 --schedule cosine --warmup 5 --min-lr 3e-4 --clip 1.0 \\
      --weight-decay 0.1 --beta1 0.9 --beta2 0.95 --eps 1e-8 --seed 1337 --out losses.json \\
      [--grads-out grads.safetensors] [--final-out params.safetensors] [--double]
  llama_ref.py eval --ckpt params.safetensors MODEL... --data val.bin --windows 0:4 --micro 2 \\
      --seq 32 [--expect LOSS --rtol R]   (gpt_ref.py eval's loss, for this model)
  llama_ref.py forward --ckpt params.safetensors MODEL... --tokens 1,2,3 --out acts.safetensors
      (every layer's intermediate activations, for locating a disagreement)
"""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_ref  # noqa: E402
from gpt_ref import FormatError, load_params, read_safetensors, write_safetensors  # noqa: E402

ROPE_THETA = 500000.0


class Linear(nn.Module):
    """A bias-free linear layer with planc's [in, out] weight: y = x @ weight."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n_in, n_out))

    def forward(self, x):
        return x @ self.weight


class RMSNorm(nn.Module):
    def __init__(self, width, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(T, D, theta, dtype):
    """cos, sin [T, D/2]: angle s * theta^(-2i/D), computed in float64."""
    i = torch.arange(D // 2, dtype=torch.float64)
    inv_freq = theta ** (-2.0 * i / D)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return angle.cos().to(dtype), angle.sin().to(dtype)


def apply_rope(x, cos, sin):
    """x [B, heads, T, D]; rotate_half: (a, b) -> (a cos - b sin, b cos + a sin)."""
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


class Attention(nn.Module):
    def __init__(self, width, heads, kv_heads, theta=ROPE_THETA):
        super().__init__()
        if width % heads or heads % kv_heads:
            raise ValueError("width %d, heads %d, kv_heads %d: width must divide by heads and heads by kv_heads"
                             % (width, heads, kv_heads))
        self.heads, self.kv_heads, self.hd, self.theta = heads, kv_heads, width // heads, theta
        self.c_attn = Linear(width, (heads + 2 * kv_heads) * self.hd)
        self.c_proj = Linear(heads * self.hd, width)

    def forward(self, x, acts=None, prefix=""):
        B, T, _ = x.shape
        H, KVH, D = self.heads, self.kv_heads, self.hd
        qkv = self.c_attn(x)
        q, k, v = qkv.split([H * D, KVH * D, KVH * D], dim=2)
        q = q.view(B, T, H, D).transpose(1, 2)
        k = k.view(B, T, KVH, D).transpose(1, 2)
        v = v.view(B, T, KVH, D).transpose(1, 2)
        cos, sin = rope_tables(T, D, self.theta, x.dtype)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        group = H // KVH
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, H * D)
        if acts is not None:
            acts[prefix + "qkv"] = qkv
            acts[prefix + "sdpa"] = y
        return self.c_proj(y)


class SwiGLU(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.gate = Linear(width, hidden)
        self.up = Linear(width, hidden)
        self.down = Linear(hidden, width)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Layer(nn.Module):
    def __init__(self, width, heads, kv_heads, hidden, eps, theta=ROPE_THETA):
        super().__init__()
        self.attention_norm = RMSNorm(width, eps)
        self.attention = Attention(width, heads, kv_heads, theta)
        self.ffn_norm = RMSNorm(width, eps)
        self.feed_forward = SwiGLU(width, hidden)

    def forward(self, x, acts=None, prefix=""):
        x = x + self.attention(self.attention_norm(x), acts, prefix + "attention.")
        if acts is not None:
            acts[prefix + "after_attention"] = x
        x = x + self.feed_forward(self.ffn_norm(x))
        if acts is not None:
            acts[prefix + "out"] = x
        return x


class Llama(nn.Module):
    def __init__(self, vocab=256, depth=2, heads=4, kv_heads=2, width=64, hidden=128, eps=1e-5,
                 theta=ROPE_THETA):
        super().__init__()
        self.vocab = vocab
        self.tok_embeddings = nn.Embedding(vocab, width)
        self.layers = nn.ModuleList(Layer(width, heads, kv_heads, hidden, eps, theta) for _ in range(depth))
        self.norm = RMSNorm(width, eps)
        self.output = Linear(width, vocab)

    def logits(self, tokens, acts=None):
        x = self.tok_embeddings(tokens)
        if acts is not None:
            acts["embedding"] = x
        for i, layer in enumerate(self.layers):
            x = layer(x, acts, "layers.%d." % i)
        logits = self.output(self.norm(x))
        if acts is not None:
            acts["logits"] = logits
        return logits

    def forward(self, tokens, targets):
        logits = self.logits(tokens)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def model_from_args(args):
    return Llama(args.vocab, args.depth, args.heads, args.kv_heads, args.width, args.hidden,
                 args.norm_eps, args.rope_theta)


def train(args, log=print):
    """gpt_ref.train's loop (accumulation, clipping, schedule, AdamW) for the Llama."""
    return gpt_ref.train(args, log, make_model=model_from_args)


def forward_cmd(args):
    model = model_from_args(args)
    tensors, _ = read_safetensors(args.ckpt)
    load_params(model, tensors, args.ckpt)
    if args.double:
        model.to(torch.float64)
    toks = torch.tensor([[int(t) for t in args.tokens.split(",")]], dtype=torch.int64)
    acts = {}
    with torch.no_grad():
        model.logits(toks, acts)
    write_safetensors(args.out, {k: v[0].float().numpy() for k, v in acts.items()})
    print(json.dumps({"out": args.out, "tensors": sorted(acts)}))
    return 0


def add_model_args(p):
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--depth", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--norm-eps", type=float, default=1e-5)
    p.add_argument("--rope-theta", type=float, default=ROPE_THETA)
    p.add_argument("--double", action="store_true", help="compute in float64 (a tighter reference)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    t = sub.add_parser("train", help="train from an initial state and log losses")
    add_model_args(t)
    t.add_argument("--init", required=True, help="initial parameters (safetensors, planc names)")
    gpt_ref.add_train_args(t)

    e = sub.add_parser("eval", help="loss over data windows of a checkpoint")
    add_model_args(e)
    e.add_argument("--ckpt", required=True, help="safetensors with every parameter, planc names")
    e.add_argument("--context", type=int, default=64, help="the default --seq")
    gpt_ref.add_eval_args(e)

    f = sub.add_parser("forward", help="intermediate activations of one token sequence")
    add_model_args(f)
    f.add_argument("--ckpt", required=True)
    f.add_argument("--tokens", required=True, help="comma-separated token ids")
    f.add_argument("--out", required=True, help="safetensors of the activations")

    args = ap.parse_args(argv)
    try:
        if args.cmd == "train":
            train(args, log=None if args.quiet else print)
            return 0
        if args.cmd == "eval":
            return gpt_ref.evaluate(args, make_model=model_from_args)
        return forward_cmd(args)
    except (FormatError, FileNotFoundError, ValueError) as e:
        print("llama_ref.py: error: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

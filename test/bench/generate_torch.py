#!/usr/bin/python3
"""Greedy decoding speed of PyTorch with a key/value cache, for docs/BENCHMARKS.md.

The same GPT-2 (test/e2e/gpt_ref.py's GPT2, Hugging Face parameter names) loaded from the
safetensors file a planc generate executable reads, prefilled with the prompt in one call, then
one token per call with each layer's keys and values cached (attention over the cached
rows), fp32, eval mode, no autograd (Debian's torch has no scaled_dot_product_attention):

  generate_torch.py --ckpt init.safetensors --vocab 50257 --context 1024 --layers 12 \\
      --heads 12 --width 768 --tokens 1,2,...,200 --max-tokens 64 [--threads N]

Prints one JSON line: prefill_s, tokens_per_s, tokens (to compare with the executable's).
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import gpt_ref  # noqa: E402
import torch  # noqa: E402


def layer(block, x, cache, pos):
    a = block.attn
    B, T, C = x.shape
    hd = C // a.heads
    q, k, v = a.c_attn(block.ln_1(x)).split(C, dim=2)
    q, k, v = (t.view(B, T, a.heads, hd).transpose(1, 2) for t in (q, k, v))
    cache[0][:, :, pos:pos + T] = k
    cache[1][:, :, pos:pos + T] = v
    K, V = cache[0][:, :, :pos + T], cache[1][:, :, :pos + T]
    mask = torch.ones(T, pos + T, dtype=torch.bool).tril(diagonal=pos)
    att = (q @ K.transpose(-2, -1)) * (1.0 / hd ** 0.5)
    y = (att.masked_fill(~mask, float("-inf")).softmax(-1) @ V).transpose(1, 2).reshape(B, T, C)
    x = x + a.c_proj(y)
    return x + block.mlp(block.ln_2(x))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    gpt_ref.add_model_args(ap)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = gpt_ref.model_from_args(args)
    tensors, _ = gpt_ref.read_safetensors(args.ckpt)
    gpt_ref.load_params(model, tensors, args.ckpt)
    model.eval()
    ctx = [int(t) for t in args.tokens.split(",")]
    hd = args.width // args.heads
    caches = [(torch.zeros(1, args.heads, args.context, hd), torch.zeros(1, args.heads, args.context, hd))
              for _ in model.h]
    out = []
    with torch.no_grad():
        def run(tokens, pos):
            t = torch.tensor([tokens])
            x = model.wte(t) + model.wpe(torch.arange(pos, pos + len(tokens)))
            for block, cache in zip(model.h, caches):
                x = layer(block, x, cache, pos)
            return (model.ln_f(x[:, -1]) @ model.wte.weight.t())[0]
        t0 = time.perf_counter()
        logits = run(ctx, 0)
        prefill = time.perf_counter() - t0
        pos = len(ctx)
        t1 = time.perf_counter()
        for i in range(args.max_tokens):
            tok = int(torch.argmax(logits))
            out.append(tok)
            if i + 1 == args.max_tokens:
                break
            logits = run([tok], pos)
            pos += 1
        decode = time.perf_counter() - t1
    print(json.dumps({"prefill_s": prefill, "tokens_per_s": len(out) / decode, "tokens": out}))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""PyTorch reference for planc's generation executables: decoding without a cache.

Loads a checkpoint into gpt_ref.GPT2 or llama_ref.Llama and continues a prompt the
plain way: at every step the whole context goes through the model again (no key/value
cache), so it checks the executable's cached, chunked decoding against an independent
computation. Greedy (argmax), with the executable's documented context rule
(docs/GENERATE.md): the context holds at most WINDOW tokens; when one more would not
fit, it restarts from its newest WINDOW // 2 tokens.

  generate_ref.py gpt --ckpt F [--vocab --context --layers --heads --width] \\
      --tokens 1,2,3 --max-tokens N --window W --out ref.json
  generate_ref.py llama --ckpt F [--vocab --depth --heads --kv-heads --width --hidden] ...
  generate_ref.py probs gpt|llama ... --tokens 1,2,3 --out p.json   # next-token distribution

ref.json: {"tokens": [...], "logprobs": [...], "gaps": [top-1 minus top-2 logit, ...]}.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_ref  # noqa: E402
import llama_ref  # noqa: E402
import torch  # noqa: E402


def load(args):
    if args.family == "gpt":
        model = gpt_ref.model_from_args(args)
    else:
        model = llama_ref.model_from_args(args)
    tensors, _ = gpt_ref.read_safetensors(args.ckpt)
    gpt_ref.load_params(model, tensors, args.ckpt)
    model.to(torch.float64)
    model.eval()
    return model


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probs", action="store_true", help="only the next-token distribution after the prompt")
    sub = ap.add_subparsers(dest="family", required=True)
    for family, mod in (("gpt", gpt_ref), ("llama", llama_ref)):
        p = sub.add_parser(family)
        mod.add_model_args(p)
        p.add_argument("--ckpt", required=True)
        p.add_argument("--tokens", required=True, help="comma-separated prompt token ids")
        p.add_argument("--max-tokens", type=int, default=1)
        p.add_argument("--window", type=int, required=True)
        p.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    model = load(args)
    ctx = [int(t) for t in args.tokens.split(",")]
    W = args.window
    if len(ctx) > W:
        ctx = ctx[-max(1, W // 2):]
    out, logprobs, gaps = [], [], []
    with torch.no_grad():
        if args.probs:
            logits = model.logits(torch.tensor([ctx], dtype=torch.int64))[0, -1]
            json.dump({"probs": torch.softmax(logits, -1).tolist()}, open(args.out, "w"))
            return 0
        for i in range(args.max_tokens):
            logits = model.logits(torch.tensor([ctx], dtype=torch.int64))[0, -1]
            top = torch.topk(logits, 2)
            tok = int(top.indices[0])
            out.append(tok)
            logprobs.append(float(torch.log_softmax(logits, -1)[tok]))
            gaps.append(float(top.values[0] - top.values[1]))
            ctx.append(tok)
            if len(ctx) > W:
                ctx = ctx[-max(1, W // 2):]
    json.dump({"tokens": out, "logprobs": logprobs, "gaps": gaps}, open(args.out, "w"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

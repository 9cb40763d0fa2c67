#!/usr/bin/env python3
"""Compares two gradient files written by --save-grads (safetensors), tensor by tensor.

    compare_grads.py REFERENCE.safetensors OTHER.safetensors [--rtol R]

Prints one Markdown row per tensor: its shape, the relative L2 error of OTHER against
REFERENCE (||b - a|| / ||a||), the largest absolute difference, and the cosine between
the two. Exit status 1 if any tensor's relative L2 error exceeds R (default 1e-3), if a
tensor is missing or its shape differs. Reads safetensors with test/e2e/same_tensors.py's
reader and numpy alone (F32, F16, BF16), so it runs on a bare GPU machine and here alike.
"""
import argparse, os, sys
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from same_tensors import read  # noqa: E402


def load(path):
    header, raws = read(path)
    out = {}
    for name, raw in raws.items():
        t = header[name]
        if t["dtype"] == "F32":
            x = np.frombuffer(raw, dtype="<f4")
        elif t["dtype"] == "F16":
            x = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        elif t["dtype"] == "BF16":
            x = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise SystemExit(f"{path}: tensor {name}: dtype {t['dtype']} is not read here")
        out[name] = x.reshape(t["shape"]).astype(np.float64)
    return out, header.get("__metadata__", {})


def main():
    p = argparse.ArgumentParser()
    p.add_argument("reference")
    p.add_argument("other")
    p.add_argument("--rtol", type=float, default=1e-3)
    args = p.parse_args()
    ref, meta_a = load(args.reference)
    oth, meta_b = load(args.other)
    bad = 0
    print(f"step-0 loss: {meta_a.get('loss', '?')} / {meta_b.get('loss', '?')}\n")
    print("| tensor | shape | rel. L2 error | max abs diff | cosine |")
    print("|---|---|---|---|---|")
    worst = 0.0
    for name in sorted(ref):
        a = ref[name]
        if name not in oth:
            print(f"| {name} | {list(a.shape)} | missing | | |")
            bad = 1
            continue
        b = oth[name]
        if a.shape != b.shape:
            print(f"| {name} | {list(a.shape)} vs {list(b.shape)} | shape differs | | |")
            bad = 1
            continue
        na, nb = np.linalg.norm(a), np.linalg.norm(b)
        rel = np.linalg.norm(b - a) / na if na > 0 else float(np.linalg.norm(b))
        cos = float((a * b).sum() / (na * nb)) if na > 0 and nb > 0 else float("nan")
        worst = max(worst, rel)
        flag = "" if rel <= args.rtol else " **over**"
        bad |= rel > args.rtol or not np.isfinite(rel)
        print(f"| {name} | {list(a.shape)} | {rel:.2e}{flag} | {np.abs(b - a).max():.2e} | {cos:.6f} |")
    for name in sorted(set(oth) - set(ref)):
        print(f"| {name} | {list(oth[name].shape)} | not in the reference | | |")
        bad = 1
    print(f"\nworst relative L2 error {worst:.2e} (limit {args.rtol:g}): {'pass' if not bad else 'FAIL'}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

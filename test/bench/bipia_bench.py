#!/usr/bin/env python3
"""The injection detector on BIPIA, a public benchmark of indirect prompt injection
(Yi et al., "Benchmarking and Defending Against Indirect Prompt Injection Attacks on
Large Language Models", 2023; github.com/microsoft/BIPIA, MIT licence). Its data is
not copied into planc: pass a checkout's root.

Clean documents are BIPIA's contexts, the external content a task retrieves (e-mails,
tables, and the forum answers a coding question is answered from); injected documents
are each context with one attack on a line of its own at its start, before one of its
sentences, or at its end, as BIPIA builds them: text attacks into e-mails and tables,
code attacks into code. The train and test splits have different contexts, and attacks
of different categories. A document is
flagged when planrt_guard_scan finds any span.

Precision is reported at equal prevalence (as many injected documents as clean
ones): recall / (recall + false-positive rate), since the benchmark has 3 × attacks
injected documents per clean one.

  bipia_bench.py LIBPLANRT_RETRIEVAL_SO BIPIA_ROOT [--split test|train] [--misses N]
"""
import json
import os
import random
import re
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from injection_bench import blocklist, load_guard, option  # noqa: E402

TASKS = [("email", "text"), ("table", "text"), ("code", "code")]


def contexts(root, task, split):
    path = os.path.join(root, "benchmark", task, f"{split}.jsonl")
    if split == "train" and task == "table" and not os.path.exists(path):
        path = os.path.join(root, "benchmark", task, "train_head.jsonl")
    seen, out = set(), []
    for line in open(path, encoding="utf-8"):
        d = json.loads(line)
        c = d["context"]
        if isinstance(c, list):
            c = "\n".join(c)
        if c not in seen:
            seen.add(c)
            out.append(c)
    return out


def attacks(root, kind, split):
    d = json.load(open(os.path.join(root, "benchmark", f"{kind}_attack_{split}.json"), encoding="utf-8"))
    return [(cat, a if isinstance(a, str) else "\n".join(a)) for cat, lst in d.items() for a in lst]


def insert(context, attack, where, seed):
    """BIPIA's insertion (bipia/data/utils.py): the attack on a line of its own at the
    start, at the end, or before a sentence chosen at random (seeded here; BIPIA finds
    sentences with NLTK's Punkt, this with a regular expression)."""
    if where == "start":
        return "\n".join([attack, context])
    if where == "end":
        return "\n".join([context, attack])
    starts = [0] + [m.end() for m in re.finditer(r"[.!?](?:\s+)", context) if m.end() < len(context)]
    at = random.Random(seed).choice(starts)
    return "\n".join([context[:at], attack, context[at:]])


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        sys.exit(2)
    guard = load_guard(sys.argv[1])
    root = sys.argv[2]
    split = option("--split", "test")
    misses = option("--misses", 0, int)

    detectors = [("guard (planrt_guard_scan)", guard), ("phrase blocklist", blocklist)]
    print(f"# BIPIA {split} split")
    print("| task | detector | clean | injected | FP | TP | recall | FP rate | precision (equal prevalence) | F1 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    total = defaultdict(lambda: [0, 0, 0, 0])
    by_cat = defaultdict(lambda: [0, 0])
    errors = []
    for task, kind in TASKS:
        ctx = contexts(root, task, split)
        att = attacks(root, kind, split)
        for name, fn in detectors:
            fp = sum(fn(c) for c in ctx)
            tp = n = 0
            for i, c in enumerate(ctx):
                for j, (cat, a) in enumerate(att):
                    for where in ("start", "middle", "end"):
                        hit = fn(insert(c, a, where, i * 1000 + j))
                        tp += hit
                        n += 1
                        if name.startswith("guard"):
                            by_cat[(task, cat)][0] += hit
                            by_cat[(task, cat)][1] += 1
                            if not hit and len(errors) < misses and where == "middle":
                                errors.append(("FN", task, cat, a))
            if name.startswith("guard") and misses:
                errors += [("FP", task, "-", c[:600]) for c in ctx if fn(c)][:misses]
            t = total[name]
            t[0] += len(ctx)
            t[1] += n
            t[2] += fp
            t[3] += tp
            print(row(task, name, len(ctx), n, fp, tp))
    for name, _ in detectors:
        t = total[name]
        print(row("**all**", name, *t))
    print("\n| task | attack category | injected | flagged by guard |")
    print("|---|---|---|---|")
    for (task, cat), (hit, n) in sorted(by_cat.items()):
        print(f"| {task} | {cat} | {n} | {hit / n:.2f} |")
    for kind, task, cat, text in errors:
        print(f"\n{kind} [{task} / {cat}] {text!r}")


def row(task, name, clean, injected, fp, tp):
    r = tp / injected if injected else 0.0
    f = fp / clean if clean else 0.0
    p = r / (r + f) if r + f else 0.0
    f1 = 2 * p * r / (p + r) if p + r else 0.0
    return f"| {task} | {name} | {clean} | {injected} | {fp} | {tp} | {r:.3f} | {f:.3f} | {p:.3f} | {f1:.3f} |"


if __name__ == "__main__":
    main()

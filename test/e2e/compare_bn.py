#!/usr/bin/python3
"""Compares a planc run's BatchNorm running statistics and evaluations with cnn_ref.py's.

    compare_bn.py --planc final.safetensors --ref ref_final.safetensors [--rtol 1e-5]
    compare_bn.py --planc-log log.jsonl --ref ref.json [--rtol 1e-4]
    compare_bn.py --planc final.safetensors --ref ref_final.safetensors \\
        --planc-log log.jsonl --ref ref.json [--rtol R] [--val-rtol R]

--ref is a safetensors file (cnn_ref.py train --final-out) or a JSON file (its --out), told
apart by their contents; given twice, it names one of each. Checks:
  * buffers (--planc): every tensor of the reference named *.running_mean or *.running_var
    is in planc's file with the same shape and, elementwise, |a − b| ≤ rtol·|b| + 1e-7
    (rtol default 1e-5); every *.num_batches_tracked has the same shape and exactly the
    same value (planc's I64, or any integer or float type holding it);
  * evaluations (--planc-log): the log's lines with "val_loss" are at the steps of the
    reference's "evals", in order; val_loss to |a − b| ≤ rtol·|b| (--val-rtol, else --rtol,
    else 1e-4); val_accuracy the same count of correct images out of eval_batches·micro
    (the reference's config), else equal to 1e-9.
Prints the worst relative errors and exits 1 on any failure, 2 when an input cannot be read.
"""
import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_training import read_planc_log, verdict  # noqa: E402
from gpt_ref import FormatError, read_safetensors  # noqa: E402

BUFFER_ATOL = 1e-7  # running means near 0: an absolute floor under the relative bound


def read_ref(path):
    """("json", object) or ("safetensors", {name: array}) by what the file holds."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        return "json", json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return "safetensors", read_safetensors(path)[0]


def compare_buffers(planc_path, ref, rtol):
    """Failures of planc's running statistics against the reference's tensors."""
    planc, _ = read_safetensors(planc_path)
    names = sorted(k for k in ref if k.endswith((".running_mean", ".running_var", ".num_batches_tracked")))
    if not names:
        return ["the reference holds no *.running_mean, *.running_var or *.num_batches_tracked tensor"]
    failures, worst = [], (0.0, None)
    print("%-28s  %8s  %12s  %12s  %s" % ("buffer", "shape", "max|a-b|", "max rel", ""))
    for k in names:
        b = np.asarray(ref[k])
        if k not in planc:
            failures.append("%s %s missing from %s" % (k, list(b.shape), planc_path))
            continue
        a = np.asarray(planc[k])
        if a.shape != b.shape:
            failures.append("%s has shape %s, the reference %s" % (k, list(a.shape), list(b.shape)))
            continue
        if k.endswith(".num_batches_tracked"):
            same = np.all(np.isfinite(a)) and np.array_equal(a.astype(np.float64), b.astype(np.float64))
            print("%-28s  %8s  %12s  %12s  %s" % (k, list(b.shape), "planc %s" % a.tolist(), "torch %s" % b.tolist(),
                                                  "" if same else "COUNT"))
            if not same:
                failures.append("%s is %s, the reference %s" % (k, a.tolist(), b.tolist()))
            continue
        x, y = a.astype(np.float64), b.astype(np.float64)
        diff = np.abs(x - y)
        ok = np.isfinite(x) & (diff <= rtol * np.abs(y) + BUFFER_ATOL)  # NaN fails too
        rel = float(np.max(diff / np.maximum(np.abs(y), 1e-30))) if y.size else 0.0
        if not np.all(np.isfinite(x)):
            rel = math.inf
        if rel >= worst[0]:
            worst = (rel, k)
        print("%-28s  %8s  %12.3g  %12.3g  %s" % (k, list(b.shape), float(diff.max()) if y.size else 0.0, rel,
                                                  "" if ok.all() else "VALUES"))
        if not ok.all():
            i = int(np.argmin(ok.reshape(-1)))
            failures.append("%s: %d of %d elements outside |a-b| <= %.3g|b| + %.1g, e.g. [%d] %.9g vs %.9g"
                            % (k, int((~ok).sum()), y.size, rtol, BUFFER_ATOL, i, x.reshape(-1)[i], y.reshape(-1)[i]))
    print("buffers: %d compared, worst relative error %.3g (%s; rtol %.3g)" % (len(names), worst[0], worst[1], rtol))
    return failures


def compare_evals(log_path, ref, rtol):
    """Failures of the log's evaluation lines against the reference's "evals"."""
    if "evals" not in ref:
        return ["the reference JSON has no \"evals\" (cnn_ref.py train --val ...)"]
    _, planc = read_planc_log(log_path)
    config = ref.get("config", {})
    total = None
    if config.get("eval_batches") and config.get("micro"):
        total = int(config["eval_batches"]) * int(config["micro"])
    failures = []
    ref_steps = [int(e["step"]) for e in ref["evals"]]
    planc_steps = [int(e["step"]) for e in planc]
    if planc_steps != ref_steps:
        failures.append("evaluations at steps %s, the reference's at %s" % (planc_steps, ref_steps))
    by_step = {int(e["step"]): e for e in planc}
    print("%5s  %14s  %14s  %10s  %10s  %10s  %s" % ("step", "planc val_loss", "torch val_loss", "rel diff",
                                                     "planc acc", "torch acc", ""))
    worst = 0.0
    for r in ref["evals"]:
        s = int(r["step"])
        p = by_step.get(s)
        if p is None:
            print("%5d  %14s  %14.8f" % (s, "missing", r["val_loss"]))
            continue
        a, b = float(p["val_loss"]), float(r["val_loss"])
        d = abs(a - b) / max(abs(b), 1e-30) if math.isfinite(a) else math.inf
        worst = max(worst, d)
        flags = []
        if not d <= rtol:
            flags.append("LOSS")
            failures.append("step %d: val_loss %.9g vs torch %.9g, rel diff %.3g > %.3g" % (s, a, b, d, rtol))
        pa, ra = float(p.get("val_accuracy", math.nan)), float(r["val_accuracy"])
        if total:  # accuracies are counts over the same images: compare the counts
            same = math.isfinite(pa) and round(pa * total) == round(ra * total) and abs(pa - ra) < 0.5 / total
        else:
            same = abs(pa - ra) <= 1e-9
        if not same:
            flags.append("ACCURACY")
            failures.append("step %d: val_accuracy %.9g vs torch %.9g%s"
                            % (s, pa, ra, " (of %d images)" % total if total else ""))
        print("%5d  %14.8f  %14.8f  %10.3g  %10.6g  %10.6g  %s" % (s, a, b, d, pa, ra, " ".join(flags)))
    print("evals: %d compared, worst val_loss rel diff %.3g (rtol %.3g)" % (len(ref["evals"]), worst, rtol))
    return failures


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--planc", help="planc's parameters with the BatchNorm buffers (safetensors)")
    ap.add_argument("--planc-log", help="the executable's --log JSON lines")
    ap.add_argument("--ref", action="append", default=[],
                    help="cnn_ref.py train --final-out safetensors and/or --out JSON (once each)")
    ap.add_argument("--rtol", type=float, help="buffers (default 1e-5); val_loss too without --val-rtol (default 1e-4)")
    ap.add_argument("--val-rtol", type=float, help="val_loss (default --rtol, else 1e-4)")
    args = ap.parse_args(argv)
    if not args.planc and not args.planc_log:
        ap.error("give --planc and/or --planc-log")

    try:
        refs = {}
        for path in args.ref:
            kind, content = read_ref(path)
            if kind in refs:
                ap.error("two %s files among --ref" % kind)
            refs[kind] = content
        failures = []
        if args.planc:
            if "safetensors" not in refs:
                ap.error("--planc needs a --ref safetensors file (cnn_ref.py train --final-out)")
            failures += compare_buffers(args.planc, refs["safetensors"], 1e-5 if args.rtol is None else args.rtol)
        if args.planc_log:
            if "json" not in refs:
                ap.error("--planc-log needs a --ref JSON file (cnn_ref.py train --out)")
            rtol = args.val_rtol if args.val_rtol is not None else 1e-4 if args.rtol is None else args.rtol
            failures += compare_evals(args.planc_log, refs["json"], rtol)
    except (OSError, ValueError, KeyError, TypeError, FormatError) as e:
        print("compare_bn.py: error: %s" % e, file=sys.stderr)
        return 2
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())

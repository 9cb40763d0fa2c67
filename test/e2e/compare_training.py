#!/usr/bin/python3
"""Compares a planc training run with the PyTorch reference (gpt_ref.py train).

    compare_training.py --planc-log log.jsonl --ref losses.json
        [--planc-grads grads.safetensors --ref-grads ref_grads.safetensors]
        [--planc-params ckpt.safetensors --ref-params ref_final.safetensors]
        [--rtol 1e-4] [--grad-rtol 1e-3] [--param-rtol 1e-2] [--min-steps 20]

Checks (docs: shared/design/TESTING.md, "vs PyTorch, fp32"):
  * loss of every step the reference ran: |planc − torch| ≤ rtol·|torch| (default 1e-4);
    the learning rate of each step to 1e-6 relative, and grad_norm to --norm-rtol;
  * the first step's accumulated gradients, per tensor, elementwise:
    |a − b| ≤ grad_rtol·|b| + atol with atol = grad_rtol·max|b| of that tensor; the same
    names and shapes on both sides. The worst tensor is reported;
  * optionally the parameters of a planc checkpoint against the reference's final
    parameters, the same elementwise rule with --param-rtol (optimizer.* tensors ignored).
Prints a table (step, planc loss, torch loss, rel diff) and exits 1 on any failure,
2 when an input cannot be read.
"""
import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_ref import FormatError, read_safetensors  # noqa: E402


def read_planc_log(path):
    """{step: record} of the training lines (those with "loss"); eval lines are kept apart;
    the topology line a run of several ranks starts with is skipped."""
    train, evals = {}, []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except ValueError as e:
                raise FormatError("%s:%d: not JSON: %s" % (path, n, e))
            if n == 1 and isinstance(rec, dict) and "hosts" in rec:
                continue  # a run of several ranks starts with where they ran
            if not isinstance(rec, dict) or "step" not in rec:
                raise FormatError("%s:%d: a log line needs a \"step\"" % (path, n))
            if "loss" in rec:
                if rec["step"] in train:
                    print("note: %s: step %s logged twice; using the later line" % (path, rec["step"]))
                train[int(rec["step"])] = rec
            elif "val_loss" in rec:
                evals.append(rec)
    return train, evals


def rel(a, b):
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    return abs(a - b) / max(abs(b), 1e-30)


def compare_losses(planc, ref_steps, rtol, norm_rtol, min_steps):
    failures = []
    print("%5s  %14s  %14s  %10s  %12s  %12s  %s" % ("step", "planc loss", "torch loss", "rel diff",
                                                     "planc |g|", "torch |g|", ""))
    worst = 0.0
    for r in ref_steps:
        s = r["step"]
        p = planc.get(s)
        if p is None:
            print("%5d  %14s  %14.8f  %10s" % (s, "missing", r["loss"], "-"))
            failures.append("step %d: missing from the planc log" % s)
            continue
        d = rel(float(p["loss"]), r["loss"])
        worst = max(worst, d)
        flags = []
        if d > rtol:
            flags.append("LOSS")
            failures.append("step %d: loss %.9g vs torch %.9g, rel diff %.3g > %.3g" % (s, p["loss"], r["loss"], d, rtol))
        if "lr" in p and rel(float(p["lr"]), r["lr"]) > 1e-6:
            flags.append("LR")
            failures.append("step %d: lr %.9g vs torch %.9g" % (s, p["lr"], r["lr"]))
        if "grad_norm" in p and rel(float(p["grad_norm"]), r["grad_norm"]) > norm_rtol:
            flags.append("GRAD_NORM")
            failures.append("step %d: grad_norm %.9g vs torch %.9g, rel diff %.3g > %.3g"
                            % (s, p["grad_norm"], r["grad_norm"], rel(float(p["grad_norm"]), r["grad_norm"]), norm_rtol))
        print("%5d  %14.8f  %14.8f  %10.3g  %12.6g  %12.6g  %s" % (
            s, p["loss"], r["loss"], d, float(p.get("grad_norm", float("nan"))), r["grad_norm"], " ".join(flags)))
    if len(ref_steps) < min_steps:
        failures.append("only %d steps compared; at least %d are needed" % (len(ref_steps), min_steps))
    print("losses: %d steps, worst rel diff %.3g (rtol %.3g)" % (len(ref_steps), worst, rtol))
    return failures


def compare_tensors(what, a_path, b_path, rtol, ignore_prefix=("optimizer.",)):
    """Elementwise |a − b| ≤ rtol·|b| + rtol·max|b| per tensor; reports the worst tensor."""
    a, _ = read_safetensors(a_path)
    b, _ = read_safetensors(b_path)
    a = {k: v for k, v in a.items() if not k.startswith(ignore_prefix)}
    b = {k: v for k, v in b.items() if not k.startswith(ignore_prefix)}
    failures = []
    for k in sorted(set(b) - set(a)):
        failures.append("%s: %s missing from %s" % (what, k, a_path))
    for k in sorted(set(a) - set(b)):
        failures.append("%s: %s in %s is not a reference tensor" % (what, k, a_path))
    rows = []
    for k in sorted(set(a) & set(b)):
        x, y = np.asarray(a[k], np.float64), np.asarray(b[k], np.float64)
        if x.shape != y.shape:
            failures.append("%s: %s has shape %s, the reference %s" % (what, k, list(x.shape), list(y.shape)))
            continue
        if not np.all(np.isfinite(x)):
            failures.append("%s: %s has non-finite values" % (what, k))
            continue
        scale = float(np.max(np.abs(y))) if y.size else 0.0
        atol = rtol * scale
        bound = rtol * np.abs(y) + atol
        diff = np.abs(x - y)
        # ratio > 1 fails; where both sides are all zeros the bound is 0 and so must the diff be
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(bound > 0, diff / bound, np.where(diff > 0, np.inf, 0.0))
        ratio = float(r.max()) if r.size else 0.0
        maxrel = float(np.max(diff) / scale) if scale > 0 else (0.0 if not np.any(diff) else math.inf)
        rows.append((ratio, k, maxrel, int(np.sum(diff > bound)), y.size))
    rows.sort(reverse=True)
    print("%s: %d tensors; worst first (ratio = max |a-b| / (rtol|b| + atol), must be <= 1):" % (what, len(rows)))
    print("  %-32s  %10s  %14s  %s" % ("tensor", "ratio", "max|a-b|/max|b|", "elements over"))
    for ratio, k, maxrel, over, size in rows[:5]:
        print("  %-32s  %10.3g  %14.3g  %d of %d" % (k, ratio, maxrel, over, size))
    for ratio, k, maxrel, over, size in rows:
        if ratio > 1:
            failures.append("%s: %s: %d of %d elements outside rtol %.3g (ratio %.3g)" % (what, k, over, size, rtol, ratio))
    if rows:
        print("%s: worst tensor %s, ratio %.3g (rtol %.3g)" % (what, rows[0][1], rows[0][0], rtol))
    return failures


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--planc-log", required=True, help="the executable's --log JSON lines")
    ap.add_argument("--ref", required=True, help="gpt_ref.py train --out JSON")
    ap.add_argument("--planc-grads", help="the executable's --save-grads safetensors")
    ap.add_argument("--ref-grads", help="gpt_ref.py train --grads-out safetensors")
    ap.add_argument("--planc-params", help="a planc checkpoint (safetensors)")
    ap.add_argument("--ref-params", help="gpt_ref.py train --final-out safetensors")
    ap.add_argument("--rtol", type=float, default=1e-4, help="per-step loss (default %(default)s)")
    ap.add_argument("--grad-rtol", type=float, default=1e-3, help="gradients and grad_norm (default %(default)s)")
    ap.add_argument("--norm-rtol", type=float, default=1e-5, help="the logged grad_norm (default %(default)s)")
    ap.add_argument("--param-rtol", type=float, default=1e-2, help="checkpoint parameters (default %(default)s)")
    ap.add_argument("--min-steps", type=int, default=20)
    args = ap.parse_args(argv)
    if bool(args.planc_grads) != bool(args.ref_grads) or bool(args.planc_params) != bool(args.ref_params):
        ap.error("--planc-grads/--ref-grads and --planc-params/--ref-params come in pairs")

    try:
        planc, evals = read_planc_log(args.planc_log)
        with open(args.ref) as f:
            ref_steps = json.load(f)["steps"]
        failures = compare_losses(planc, ref_steps, args.rtol, args.norm_rtol, args.min_steps)
        for e in evals:
            print("eval: step %s val_loss %s" % (e["step"], e["val_loss"]))
            if not math.isfinite(float(e["val_loss"])):
                failures.append("step %s: val_loss %s is not finite" % (e["step"], e["val_loss"]))
        if args.planc_grads:
            failures += compare_tensors("gradients", args.planc_grads, args.ref_grads, args.grad_rtol)
        if args.planc_params:
            failures += compare_tensors("parameters", args.planc_params, args.ref_params, args.param_rtol)
    except (OSError, ValueError, KeyError, TypeError, FormatError) as e:
        print("compare_training.py: error: %s" % e, file=sys.stderr)
        return 2
    return verdict(failures)


def verdict(failures):
    """Prints PASS, or FAIL and the first 40 problems; the exit status (0 or 1)."""
    if failures:
        print("FAIL: %d problem(s)" % len(failures))
        for f in failures[:40]:
            print("  " + f)
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())

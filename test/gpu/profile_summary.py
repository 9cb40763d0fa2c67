#!/usr/bin/env python3
"""Summarises a PLANRT_CUDA_PROFILE file (runtime/cuda/profile.cpp) by kind of operation.

    profile_summary.py PROFILE STEPS

Prints a Markdown table: per training step, the milliseconds and calls of the
generated kernels (by step function: grad, update, sumsq, eval), the GEMMs, each
library kernel, the fills and the host's waits, slowest first; then the ten slowest
operations per call, each with its longest call. The profile counts from the process's
start, so the set-up is in it, in the longest call of the first operation: an operation
whose longest call exceeds ten times its other calls' mean counts that call at the mean
instead (the per-step table leaves the set-up out; the list below shows it).
"""
import collections, sys


def main():
    path, steps = sys.argv[1], int(sys.argv[2])
    rows = []
    for line in open(path):
        if line.startswith("#"):
            continue
        f = line.split()
        name, calls, total, longest = " ".join(f[:-5]), int(f[-5]), float(f[-4]), float(f[-2])
        rows.append((name, calls, total, longest))
    kinds, calls = collections.Counter(), collections.Counter()
    for name, c, t, longest in rows:
        rest = (t - longest) / (c - 1) if c > 1 else longest
        if longest > 10 * rest:  # the set-up
            t = t - longest + rest
        if name.startswith("generated kernel planc_"):
            kind = "generated kernels (" + name.split("_")[1] + ")"
        elif name.startswith("planrt_cuda_gemm"):
            kind = "GEMMs (cuBLASLt)"
        else:
            kind = name
        kinds[kind] += t
        calls[kind] += c
    total = sum(kinds.values())
    print(f"| operation | ms per step | calls per step | share |\n|---|---|---|---|")
    for kind, t in kinds.most_common():
        print(f"| {kind} | {t / steps:.1f} | {calls[kind] / steps:.0f} | {100 * t / total:.1f} % |")
    print(f"\nslowest single operations (ms per call, the set-up's call left out as above):\n")

    def steady(row):
        name, c, t, longest = row
        rest = (t - longest) / (c - 1) if c > 1 else longest
        return rest if longest > 10 * rest else t / c

    for row in sorted(rows, key=lambda r: -steady(r))[:10]:
        print(f"- {row[0]}: {steady(row):.2f} ms × {row[1]} (longest {row[3]:.2f} ms)")


if __name__ == "__main__":
    main()

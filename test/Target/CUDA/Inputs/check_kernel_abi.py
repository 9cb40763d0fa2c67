#!/usr/bin/env python3
"""Checks that every kernel launch of the CUDA target's host code passes as many
arguments as the kernel's PTX entry declares parameters.

    check_kernel_abi.py KERNELS.ptx HOST.mlir

KERNELS.ptx is `planc emit --stage ptx`, HOST.mlir `planc emit --stage llvm --target
cuda` of the same plan. The host and the kernels are lowered by different passes
(gpu-to-llvm and convert-gpu-to-nvvm); when their memref calling conventions differ
(bare pointers on one side, expanded descriptors on the other) every launch fails on
the GPU with cudaErrorInvalidValue, or worse reads garbage, and nothing on the CPU
shows it. Prints one line per kernel; exit status 1 on any mismatch or if no launch
was found.
"""
import re, sys


def entries(ptx):
    out, name, count = {}, None, 0
    for line in ptx.splitlines():
        m = re.match(r"\s*\.visible \.entry (\w+)\(", line)
        if m:
            name, count = m.group(1), 0
            if line.rstrip().endswith(")"):
                out[name], name = 0, None
            continue
        if name is None:
            continue
        if ".param" in line:
            count += 1
        if line.strip().startswith(")"):
            out[name], name = count, None
    return out


def split_top(s):
    depth, parts, cur = 0, [], ""
    for c in s:
        if c in "(<[{":
            depth += 1
        elif c in ")>]}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += c
    if cur.strip():
        parts.append(cur)
    return parts


def launches(host):
    out = {}
    for m in re.finditer(r"gpu\.launch_func\s+@\w+::@(\w+)[^\n]*?\bargs\((.*)\)", host):
        body, depth, end = m.group(2), 0, None
        for i, c in enumerate(body):  # the args list ends at its own closing parenthesis
            depth += c == "("
            if c == ")":
                if depth == 0:
                    end = i
                    break
                depth -= 1
        out.setdefault(m.group(1), set()).add(len(split_top(body[:end] if end is not None else body)))
    return out


def main():
    ptx = open(sys.argv[1]).read()
    host = open(sys.argv[2]).read()
    params, args = entries(ptx), launches(host)
    bad = 0
    if not args:
        print("no gpu.launch_func in the host code")
        return 1
    for name in sorted(args):
        if name not in params:
            print(f"{name}: launched but no PTX entry")
            bad = 1
            continue
        for n in sorted(args[name]):
            ok = n == params[name]
            bad |= not ok
            print(f"{name}: {n} arguments, {params[name]} parameters{'' if ok else ' MISMATCH'}")
    print(f"{len(args)} kernels launched: {'ok' if not bad else 'FAIL'}")
    return bad


if __name__ == "__main__":
    sys.exit(main())

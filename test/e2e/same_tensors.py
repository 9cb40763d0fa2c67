"""Bitwise comparison of safetensors files, for the checkpoint tests (reshard.sh).

    from same_tensors import same
    same("a.st", "b.st", "what the two files are")   # asserts, then prints one line
"""
import json
import struct


def load(path):
    """Every tensor of a safetensors file: name -> its raw bytes."""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    return {k: raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]
            for k, v in head.items() if k != "__metadata__"}


def same(a, b, what):
    x, y = load(a), load(b)
    assert x.keys() == y.keys(), what
    bad = [k for k in x if x[k] != y[k]]
    assert not bad, f"{what}: {len(bad)} tensors differ, e.g. {bad[:3]}"
    print(f"reshard: {what}: {len(x)} tensors (parameters, exp_avg, exp_avg_sq) bitwise equal")

"""Bitwise comparisons for the checkpoint tests (reshard.sh): of safetensors files, and
of a resumed run's log against the uninterrupted run's.

    from same_tensors import same, resumed_bitwise
    same("a.st", "b.st", "what the two files are")   # asserts, then prints one line
    resumed_bitwise("full.jsonl", "resumed.jsonl", "what was resumed")
"""
import json
import struct


def read(path):
    """A safetensors file as (its JSON header, {name: raw bytes of the tensor})."""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    return head, {k: raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]
                  for k, v in head.items() if k != "__metadata__"}


def load(path):
    """Every tensor of a safetensors file: name -> its raw bytes."""
    return read(path)[1]


def same(a, b, what):
    x, y = load(a), load(b)
    assert x.keys() == y.keys(), what
    bad = [k for k in x if x[k] != y[k]]
    assert not bad, f"{what}: {len(bad)} tensors differ, e.g. {bad[:3]}"
    print(f"reshard: {what}: {len(x)} tensors (parameters, exp_avg, exp_avg_sq) bitwise equal")


def resumed_bitwise(full, resumed, what, steps=range(10, 20)):
    """A resumed run's log against the uninterrupted run's: the same steps, and on each the
    same loss, learning rate and gradient norm, bit for bit."""
    ref = {r["step"]: r for r in map(json.loads, open(full)) if "loss" in r}
    res = [r for r in map(json.loads, open(resumed)) if "loss" in r]
    assert [r["step"] for r in res] == list(steps), [r["step"] for r in res]
    for r in res:
        for k in ("loss", "lr", "grad_norm"):
            assert r[k] == ref[r["step"]][k], (r["step"], k, r[k], ref[r["step"]][k])
    print(f"reshard: {what}: steps {steps[0]}-{steps[-1]} bitwise equal")


def close_gradients(reference, other, what, tol=1e-5):
    """Two --save-grads files (f32): the same tensors, each within `tol` of the reference
    relative to the reference tensor's largest element."""
    import array
    floats = lambda path: {k: array.array("f", v) for k, v in load(path).items()}
    one, got = floats(reference), floats(other)
    assert one.keys() == got.keys(), sorted(set(one) ^ set(got))
    worst = max(max(abs(a - b) for a, b in zip(one[k], got[k])) / max(max(map(abs, one[k])), 1e-30) for k in one)
    assert worst < tol, (what, worst)
    print(f"reshard: --save-grads under {what}: {len(got)} whole gradients within {worst:.1e} (of each tensor's "
          f"largest) of one process")

#!/usr/bin/env python3
"""The CPU kernels of libplanrt (runtime/include/planrt_kernels.h) against PyTorch.

Usage: kernels_vs_torch.py path/to/libplanrt.so

Every forward and backward kernel runs through ctypes on random float32 inputs of
several shapes; the reference is PyTorch in float64 on the same values, the
backward by autograd. Rotary embeddings are written here independently in Hugging
Face's rotate_half form. An element passes when |kernel - ref| <= atol + rtol |ref|
with rtol = RTOL and atol = ATOL times the largest |ref| of that output (plus a
tiny floor). Prints the
max errors per kernel and exits 1 on any failure.
"""
import ctypes
import math
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

RTOL = 1e-4
ATOL = 1e-5  # relative to max |ref| of the output being compared
ATOL_FLOOR = 1e-10  # for outputs that are all rounding noise (LayerNorm with C = 1)

f32p = ctypes.POINTER(ctypes.c_float)
i32p = ctypes.POINTER(ctypes.c_int32)
i64 = ctypes.c_int64
i32 = ctypes.c_int32
f32 = ctypes.c_float

SIGNATURES = {
    "planrt_k_layernorm": [f32p, f32p, f32p, f32p, i64, i64, f32],
    "planrt_k_layernorm_bwd": [f32p, f32p, f32p, f32p, f32p, f32p, i64, i64, f32],
    "planrt_k_rmsnorm": [f32p, f32p, f32p, i64, i64, f32],
    "planrt_k_rmsnorm_bwd": [f32p, f32p, f32p, f32p, f32p, i64, i64, f32],
    "planrt_k_sdpa": [f32p, f32p, i64, i64, i64, i64, i64, i32, i32, f32],
    "planrt_k_sdpa_bwd": [f32p, f32p, f32p, i64, i64, i64, i64, i64, i32, i32, f32],
    "planrt_k_embedding": [f32p, i32p, f32p, i64, i64, i64],
    "planrt_k_embedding_bwd": [f32p, i32p, f32p, i64, i64, i64],
    "planrt_k_cross_entropy": [f32p, i32p, f32p, i64, i64],
    "planrt_k_cross_entropy_bwd": [f32p, f32p, i32p, f32p, i64, i64],
}


def load(path):
    lib = ctypes.CDLL(path)
    for name, args in SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = None
    return lib


def ptr(a):
    """A pointer to a contiguous numpy array (None stays NULL)."""
    if a is None:
        return None
    assert a.flags.c_contiguous
    return a.ctypes.data_as(f32p if a.dtype == np.float32 else i32p)


def out(*shape):
    """An output buffer prefilled with NaN: kernels must overwrite every element."""
    return np.full(shape, np.nan, dtype=np.float32)


def t64(a):
    return torch.from_numpy(np.asarray(a, dtype=np.float64)).requires_grad_(True)


class Report:
    def __init__(self):
        self.worst = {}  # kernel -> (max abs err, max err / max |ref|)
        self.failures = []

    def check(self, kernel, case, what, got, ref):
        ref = ref.detach().numpy() if isinstance(ref, torch.Tensor) else np.asarray(ref)
        got = np.asarray(got, dtype=np.float64).reshape(ref.shape)
        scale = float(np.max(np.abs(ref))) if ref.size else 0.0
        err = np.abs(got - ref)
        bad = ~(err <= ATOL * scale + ATOL_FLOOR + RTOL * np.abs(ref))  # NaN counts as bad
        max_err = float(np.max(err)) if err.size else 0.0
        rel = max_err / scale if scale > ATOL_FLOOR else 0.0
        a, r = self.worst.get(kernel, (0.0, 0.0))
        self.worst[kernel] = (max(a, max_err), max(r, rel))
        if bad.any():
            i = np.unravel_index(int(np.argmax(bad)), bad.shape)
            self.failures.append(
                f"{kernel} [{case}] {what}: {int(bad.sum())} of {bad.size} elements off; "
                f"first at {tuple(int(j) for j in i)}: got {got[i]!r}, expected {ref[i]!r}; "
                f"max abs err {max_err:.3g}, max |ref| {scale:.3g}")


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope_ref(x, theta):
    """Hugging Face's rotary embedding on x [B, heads, S, D], positions 0..S-1."""
    S, D = x.shape[-2], x.shape[-1]
    inv_freq = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    freqs = torch.outer(torch.arange(S, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return x * emb.cos() + rotate_half(x) * emb.sin()


def sdpa_ref(qkv, B, S, H, KVH, D, causal, rope, theta):
    q = qkv[..., : H * D].reshape(B, S, H, D).transpose(1, 2)
    k = qkv[..., H * D:(H + KVH) * D].reshape(B, S, KVH, D).transpose(1, 2)
    v = qkv[..., (H + KVH) * D:].reshape(B, S, KVH, D).transpose(1, 2)
    if rope:
        q, k = rope_ref(q, theta), rope_ref(k, theta)
    k = k.repeat_interleave(H // KVH, dim=1)
    v = v.repeat_interleave(H // KVH, dim=1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(D)
    if causal:
        mask = torch.ones(S, S, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, S, H * D)


def test_layernorm(lib, rep, rng):
    for rows, C, eps, bias, mean, std in [(7, 64, 1e-5, True, 0.0, 1.0),
                                          (33, 768, 1e-5, True, 3.0, 2.0),
                                          (4, 5, 0.1, False, 0.0, 0.3),
                                          (1, 1, 1e-5, True, 1.0, 1.0)]:
        case = f"rows={rows} C={C} eps={eps}" + ("" if bias else " no bias")
        x = rng.normal(mean, std, (rows, C)).astype(np.float32)
        w = rng.normal(1.0, 0.5, C).astype(np.float32)
        b = rng.normal(0.0, 0.5, C).astype(np.float32) if bias else None
        dy = rng.normal(size=(rows, C)).astype(np.float32)
        y = out(rows, C)
        lib.planrt_k_layernorm(ptr(x), ptr(w), ptr(b), ptr(y), rows, C, eps)
        dx, dw, db = out(rows, C), out(C), out(C) if bias else None
        lib.planrt_k_layernorm_bwd(ptr(dy), ptr(x), ptr(w), ptr(dx), ptr(dw), ptr(db), rows, C, eps)

        tx, tw = t64(x), t64(w)
        tb = t64(b) if bias else None
        ty = F.layer_norm(tx, (C,), tw, tb, eps)
        ty.backward(torch.from_numpy(dy.astype(np.float64)))
        rep.check("layernorm", case, "y", y, ty)
        rep.check("layernorm_bwd", case, "dx", dx, tx.grad)
        rep.check("layernorm_bwd", case, "dw", dw, tw.grad)
        if bias:
            rep.check("layernorm_bwd", case, "db", db, tb.grad)


def test_rmsnorm(lib, rep, rng):
    for rows, C, eps, mean, std in [(7, 64, 1e-6, 0.0, 1.0), (16, 512, 1e-5, 0.5, 2.0),
                                    (3, 5, 0.5, 0.0, 0.4)]:
        case = f"rows={rows} C={C} eps={eps}"
        x = rng.normal(mean, std, (rows, C)).astype(np.float32)
        w = rng.normal(1.0, 0.5, C).astype(np.float32)
        dy = rng.normal(size=(rows, C)).astype(np.float32)
        y, dx, dw = out(rows, C), out(rows, C), out(C)
        lib.planrt_k_rmsnorm(ptr(x), ptr(w), ptr(y), rows, C, eps)
        lib.planrt_k_rmsnorm_bwd(ptr(dy), ptr(x), ptr(w), ptr(dx), ptr(dw), rows, C, eps)

        tx, tw = t64(x), t64(w)
        ty = tx * torch.rsqrt((tx * tx).mean(-1, keepdim=True) + eps) * tw
        ty.backward(torch.from_numpy(dy.astype(np.float64)))
        rep.check("rmsnorm", case, "y", y, ty)
        rep.check("rmsnorm_bwd", case, "dx", dx, tx.grad)
        rep.check("rmsnorm_bwd", case, "dw", dw, tw.grad)


def test_sdpa(lib, rep, rng):
    # (B, S, H, KVH, D, causal, rope, theta[, std of qkv]); thetas exact in float32.
    # The kernels work in blocks of 64 queries: S = 100, 200, 256, 512 cover
    # several blocks, whole and partial.
    for B, S, H, KVH, D, causal, rope, theta, *std in [
            (2, 16, 4, 4, 16, 1, 0, 10000.0),   # causal multi-head
            (2, 32, 8, 2, 16, 1, 1, 10000.0),   # causal, rope, grouped-query
            (1, 24, 6, 3, 8, 0, 1, 10000.0),    # full, rope, grouped-query
            (1, 33, 4, 1, 32, 0, 0, 10000.0),   # full, one kv head
            (3, 12, 4, 2, 64, 1, 1, 500000.0),  # causal, rope (Llama 3 base)
            (1, 20, 2, 1, 6, 0, 1, 10.0),       # full, rope with fast angles
            (1, 128, 8, 2, 64, 1, 1, 10000.0),  # longer
            (1, 100, 4, 2, 64, 1, 1, 10000.0),  # causal, a partial last block
            (1, 200, 3, 3, 64, 0, 0, 10000.0),  # full, a partial last block
            (1, 70, 2, 1, 10, 1, 1, 10000.0),   # causal, rope with D/2 odd
            (2, 256, 6, 6, 64, 1, 0, 10000.0),  # the GPT's shape (fewer batches)
            (1, 512, 4, 2, 64, 1, 1, 10000.0),  # long, causal, rope, grouped-query
            (1, 96, 4, 2, 64, 0, 1, 10000.0, 4.0),   # peaked softmax (exp underflows)
            (1, 96, 4, 2, 64, 1, 0, 10000.0, 4.0)]:  # peaked softmax, causal
        std = std[0] if std else 1.0
        case = f"B={B} S={S} H={H} KVH={KVH} D={D} {'causal' if causal else 'full'}" + \
            (f" rope({theta:g})" if rope else "") + (f" std={std:g}" if std != 1.0 else "")
        width = (H + 2 * KVH) * D
        qkv = rng.normal(0.0, std, size=(B, S, width)).astype(np.float32)
        dout = rng.normal(size=(B, S, H * D)).astype(np.float32)
        o, dqkv = out(B, S, H * D), out(B, S, width)
        lib.planrt_k_sdpa(ptr(qkv), ptr(o), B, S, H, KVH, D, causal, rope, theta)
        lib.planrt_k_sdpa_bwd(ptr(dout), ptr(qkv), ptr(dqkv), B, S, H, KVH, D, causal, rope, theta)

        tqkv = t64(qkv)
        to = sdpa_ref(tqkv, B, S, H, KVH, D, causal, rope, theta)
        to.backward(torch.from_numpy(dout.astype(np.float64)))
        rep.check("sdpa", case, "out", o, to)
        g = tqkv.grad
        rep.check("sdpa_bwd", case, "dq", dqkv[..., : H * D], g[..., : H * D])
        rep.check("sdpa_bwd", case, "dk", dqkv[..., H * D:(H + KVH) * D],
                  g[..., H * D:(H + KVH) * D])
        rep.check("sdpa_bwd", case, "dv", dqkv[..., (H + KVH) * D:], g[..., (H + KVH) * D:])


def test_embedding(lib, rep, rng):
    for rows, C, V in [(10, 8, 5), (128, 64, 1000), (3, 16, 50257)]:
        case = f"rows={rows} C={C} V={V}"
        table = rng.normal(size=(V, C)).astype(np.float32)
        ids = rng.integers(0, V, rows).astype(np.int32)
        ids[-1] = V - 1
        dout = rng.normal(size=(rows, C)).astype(np.float32)
        o, dtable = out(rows, C), out(V, C)
        lib.planrt_k_embedding(ptr(table), ptr(ids), ptr(o), rows, C, V)
        lib.planrt_k_embedding_bwd(ptr(dout), ptr(ids), ptr(dtable), rows, C, V)

        ttable = t64(table)
        to = F.embedding(torch.from_numpy(ids.astype(np.int64)), ttable)
        to.backward(torch.from_numpy(dout.astype(np.float64)))
        rep.check("embedding", case, "out", o, to)
        rep.check("embedding_bwd", case, "dtable", dtable, ttable.grad)


def test_cross_entropy(lib, rep, rng):
    for rows, V, std, shift, dloss in [(8, 10, 1.0, 0.0, 1.0), (64, 1000, 3.0, 0.0, 0.7),
                                       (4, 50257, 2.0, 0.0, 1.0), (16, 100, 1.0, 80.0, 2.5)]:
        case = f"rows={rows} V={V} std={std}" + (f" shift={shift:g}" if shift else "")
        logits = (rng.normal(0.0, std, (rows, V)) + shift).astype(np.float32)
        targets = rng.integers(0, V, rows).astype(np.int32)
        targets[0] = int(np.argmax(logits[0]))  # one confident row: p close to 1
        dl = np.array([dloss], dtype=np.float32)
        loss, dlogits = out(1), out(rows, V)
        lib.planrt_k_cross_entropy(ptr(logits), ptr(targets), ptr(loss), rows, V)
        lib.planrt_k_cross_entropy_bwd(ptr(dl), ptr(logits), ptr(targets), ptr(dlogits), rows, V)

        tl = t64(logits)
        tloss = F.cross_entropy(tl, torch.from_numpy(targets.astype(np.int64)))
        tloss.backward(torch.tensor(float(dl[0]), dtype=torch.float64))
        rep.check("cross_entropy", case, "loss", loss, tloss.reshape(1))
        rep.check("cross_entropy_bwd", case, "dlogits", dlogits, tl.grad)


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    start = time.time()
    lib = load(sys.argv[1])
    torch.set_num_threads(1)
    rng = np.random.default_rng(20240611)
    rep = Report()
    for test in (test_layernorm, test_rmsnorm, test_sdpa, test_embedding, test_cross_entropy):
        test(lib, rep, rng)
    print(f"{'kernel':20s} {'max abs err':>12s} {'max err/max|ref|':>17s}")
    for kernel, (a, r) in rep.worst.items():
        print(f"{kernel:20s} {a:12.3g} {r:17.3g}")
    for f in rep.failures:
        print("FAIL:", f)
    print(f"{'FAILED' if rep.failures else 'passed'} (rtol {RTOL:g}, atol {ATOL:g} x max|ref|) "
          f"in {time.time() - start:.1f} s")
    return 1 if rep.failures else 0


if __name__ == "__main__":
    sys.exit(main())

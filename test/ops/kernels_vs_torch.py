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

PLANRT_KERNELS_ONLY=family[,family...] runs only those families' tests and looks up
only their kernels, for a library built from some of runtime/lib/kernels/ (e.g. one
file under development): layernorm, rmsnorm, sdpa, embedding, cross_entropy,
conv2d, maxpool2d, avgpool, batchnorm, or vision (the last four).
"""
import ctypes
import math
import os
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
    "planrt_k_cross_entropy": [f32p, i32p, f32p, i64, i64, i32],
    "planrt_k_cross_entropy_bwd": [f32p, f32p, i32p, f32p, i64, i64, i32, i32],
    "planrt_k_conv2d": [f32p, f32p, f32p, f32p, i64, i64, i64, i64, i64, i64, i64, i64],
    "planrt_k_conv2d_bwd_data": [f32p, f32p, f32p, i64, i64, i64, i64, i64, i64, i64, i64],
    "planrt_k_conv2d_bwd_filter": [f32p, f32p, f32p, f32p, i64, i64, i64, i64, i64, i64, i64, i64],
    "planrt_k_maxpool2d": [f32p, f32p, i64, i64, i64, i64, i64, i64, i64],
    "planrt_k_maxpool2d_bwd": [f32p, f32p, f32p, i64, i64, i64, i64, i64, i64, i64],
    "planrt_k_avgpool": [f32p, f32p, i64, i64, i64],
    "planrt_k_avgpool_bwd": [f32p, f32p, i64, i64, i64],
    "planrt_k_batchnorm_stats": [f32p, f32p, i64, i64, i64],
    "planrt_k_batchnorm_combine": [f32p, f32p, i64, i64],
    "planrt_k_batchnorm_fwd": [f32p, f32p, f32p, f32p, f32p, i64, i64, i64, f32],
    "planrt_k_batchnorm_bwd_stats": [f32p, f32p, f32p, f32p, i64, i64, i64, f32],
    "planrt_k_batchnorm_bwd_data": [f32p, f32p, f32p, f32p, f32p, f32p, i64, i64, i64, i64, f32],
    "planrt_k_batchnorm_eval": [f32p, f32p, f32p, f32p, f32p, f32p, i64, i64, i64, f32],
    "planrt_k_batchnorm_running": [f32p, f32p, f32p, i64, i64, f32],
}

# PLANRT_KERNELS_ONLY's group names (see the docstring).
FAMILY_GROUPS = {"vision": ("conv2d", "maxpool2d", "avgpool", "batchnorm")}


def load(path, families=None):
    """The library with the kernels' argument types set: all of SIGNATURES, or only
    those of `families` (a kernel belongs to the family its name starts with)."""
    lib = ctypes.CDLL(path)
    for name, args in SIGNATURES.items():
        if families is not None and not any(name.startswith("planrt_k_" + f) for f in families):
            continue
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

    def exact(self, kernel, case, what, got, ref):
        """got equal to ref bit for bit (NaN where ref is NaN)."""
        got = np.asarray(got, dtype=np.float32).reshape(ref.shape)
        bad = ~((got == ref) | (np.isnan(got) & np.isnan(ref)))
        if bad.any():
            i = np.unravel_index(int(np.argmax(bad)), bad.shape)
            self.failures.append(f"{kernel} [{case}] {what}: {int(bad.sum())} of {bad.size} elements differ; "
                                 f"first at {tuple(int(j) for j in i)}: got {got[i]!r}, expected {ref[i]!r}")


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
        lib.planrt_k_cross_entropy(ptr(logits), ptr(targets), ptr(loss), rows, V, 0)
        lib.planrt_k_cross_entropy_bwd(ptr(dl), ptr(logits), ptr(targets), ptr(dlogits), rows, V, 0, 0)
        # Asked to round its result (plan-cuda-round-results): torch's own rounding of the
        # unrounded gradient, bit for bit.
        for code, dtype in ((1, torch.bfloat16), (2, torch.float16)):
            rounded = out(rows, V)
            lib.planrt_k_cross_entropy_bwd(ptr(dl), ptr(logits), ptr(targets), ptr(rounded), rows, V, code, 0)
            want = torch.from_numpy(dlogits.copy()).to(dtype).to(torch.float32).numpy()
            rep.exact("cross_entropy_bwd", f"{case} rounded to {dtype}", "dlogits", rounded, want)

        tl = t64(logits)
        tloss = F.cross_entropy(tl, torch.from_numpy(targets.astype(np.int64)))
        tloss.backward(torch.tensor(float(dl[0]), dtype=torch.float64))
        rep.check("cross_entropy", case, "loss", loss, tloss.reshape(1))
        rep.check("cross_entropy_bwd", case, "dlogits", dlogits, tl.grad)


def test_conv2d(lib, rep, rng):
    # (N, C, H, W, K, R, stride, pad, bias)
    for N, C, H, W, K, R, stride, pad, bias in [
            (2, 3, 8, 8, 4, 3, 1, 1, True),      # 3x3 "same"
            (1, 1, 5, 7, 1, 3, 1, 0, True),      # N = 1, C = K = 1, H != W, unpadded
            (2, 4, 9, 6, 5, 3, 2, 1, True),      # stride 2, padding 1, odd sizes
            (3, 8, 6, 5, 6, 1, 1, 0, False),     # 1x1, stride 1: no im2col
            (3, 6, 7, 7, 4, 1, 2, 0, True),      # 1x1, stride 2 (a ResNet shortcut)
            (1, 3, 17, 13, 8, 7, 2, 3, True),    # 7x7 stride 2 padding 3 (a ResNet stem)
            (2, 5, 10, 12, 3, 5, 3, 2, False),   # 5x5, stride 3, padding 2
            (2, 2, 4, 4, 3, 5, 1, 2, True),      # the window larger than the image
            (1, 2, 5, 6, 3, 2, 2, 1, True),      # even window, pad = R / 2 (the largest)
            (1, 16, 14, 14, 32, 3, 1, 1, True)]:  # wider
        case = f"N={N} C={C} H={H} W={W} K={K} R={R} stride={stride} pad={pad}" + ("" if bias else " no bias")
        P, Q = (H + 2 * pad - R) // stride + 1, (W + 2 * pad - R) // stride + 1
        x = rng.normal(size=(N, C, H, W)).astype(np.float32)
        w = rng.normal(0.0, 1.0 / math.sqrt(C * R * R), (K, C, R, R)).astype(np.float32)
        b = rng.normal(size=K).astype(np.float32) if bias else None
        dy = rng.normal(size=(N, K, P, Q)).astype(np.float32)
        y, dx, dw, db = out(N, K, P, Q), out(N, C, H, W), out(K, C, R, R), out(K)
        shape = (N, C, H, W, K, R, stride, pad)
        lib.planrt_k_conv2d(ptr(x), ptr(w), ptr(b), ptr(y), *shape)
        lib.planrt_k_conv2d_bwd_data(ptr(dy), ptr(w), ptr(dx), *shape)
        lib.planrt_k_conv2d_bwd_filter(ptr(dy), ptr(x), ptr(dw), ptr(db), *shape)
        dw2 = out(K, C, R, R)  # db may be NULL
        lib.planrt_k_conv2d_bwd_filter(ptr(dy), ptr(x), ptr(dw2), None, *shape)

        tx, tw = t64(x), t64(w)
        tb = t64(b) if bias else None
        ty = F.conv2d(tx, tw, tb, stride=stride, padding=pad)
        ty.backward(torch.from_numpy(dy.astype(np.float64)))
        tdb = torch.from_numpy(dy.astype(np.float64)).sum((0, 2, 3))
        rep.check("conv2d", case, "y", y, ty)
        rep.check("conv2d_bwd_data", case, "dx", dx, tx.grad)
        rep.check("conv2d_bwd_filter", case, "dw", dw, tw.grad)
        rep.check("conv2d_bwd_filter", case, "db", db, tb.grad if bias else tdb)
        rep.check("conv2d_bwd_filter", case, "dw (db NULL)", dw2, tw.grad)


def test_maxpool2d(lib, rep, rng):
    # (N, C, H, W, R, stride, pad, inputs): "normal", "ties" (three values: many equal
    # maxima, which go to the first in row-major order), "negative" (all below 0: the
    # padding must act as -inf, not 0) or "nan" (PyTorch: a NaN is the maximum, and
    # the last NaN of a window takes the gradient).
    for N, C, H, W, R, stride, pad, inputs in [
            (2, 3, 8, 8, 2, 2, 0, "normal"),
            (2, 3, 9, 7, 3, 2, 1, "normal"),     # a ResNet's pool, H != W
            (1, 1, 5, 6, 3, 1, 1, "normal"),     # N = C = 1, overlapping windows
            (1, 2, 9, 11, 7, 2, 3, "normal"),    # 7x7
            (2, 4, 10, 9, 3, 2, 1, "ties"),
            (1, 2, 6, 6, 2, 2, 0, "ties"),
            (2, 2, 7, 8, 3, 1, 1, "ties"),       # overlapping windows summed
            (1, 3, 6, 5, 1, 2, 0, "ties"),       # 1x1 windows, stride 2
            (1, 2, 5, 5, 3, 2, 1, "negative"),
            (2, 2, 6, 7, 3, 2, 1, "nan")]:
        case = f"N={N} C={C} H={H} W={W} R={R} stride={stride} pad={pad} {inputs}"
        P, Q = (H + 2 * pad - R) // stride + 1, (W + 2 * pad - R) // stride + 1
        x = rng.normal(size=(N, C, H, W)).astype(np.float32)
        if inputs == "ties":
            x = np.round(x).clip(-1, 1).astype(np.float32)
        elif inputs == "negative":
            x = (-np.abs(x) - 1.0).astype(np.float32)
        elif inputs == "nan":
            x.reshape(-1)[rng.choice(x.size, x.size // 6, replace=False)] = np.nan
        dy = rng.normal(size=(N, C, P, Q)).astype(np.float32)
        y, dx = out(N, C, P, Q), out(N, C, H, W)
        lib.planrt_k_maxpool2d(ptr(x), ptr(y), N, C, H, W, R, stride, pad)
        lib.planrt_k_maxpool2d_bwd(ptr(dy), ptr(x), ptr(dx), N, C, H, W, R, stride, pad)

        tx = t64(x)
        ty = F.max_pool2d(tx, R, stride, pad)
        ty.backward(torch.from_numpy(dy.astype(np.float64)))
        ref, nan = ty.detach().numpy(), np.isnan(ty.detach().numpy())
        if not np.array_equal(np.isnan(y), nan):
            rep.failures.append(f"maxpool2d [{case}] y: NaN at {int(np.isnan(y).sum())} outputs, "
                                f"PyTorch at {int(nan.sum())}")
        rep.check("maxpool2d", case, "y", np.where(nan, 0.0, y), np.where(nan, 0.0, ref))
        rep.check("maxpool2d_bwd", case, "dx", dx, tx.grad)


def test_avgpool(lib, rep, rng):
    for N, C, H, W, mean in [(2, 3, 7, 7, 0.0), (1, 1, 1, 1, 0.0), (3, 16, 4, 5, 3.0), (2, 8, 1, 9, -1.0),
                             (4, 64, 8, 8, 0.5)]:
        case = f"N={N} C={C} H={H} W={W}"
        x = rng.normal(mean, 1.0, (N, C, H, W)).astype(np.float32)
        dy = rng.normal(size=(N, C)).astype(np.float32)
        y, dx = out(N, C), out(N, C, H, W)
        lib.planrt_k_avgpool(ptr(x), ptr(y), N, C, H * W)
        lib.planrt_k_avgpool_bwd(ptr(dy), ptr(dx), N, C, H * W)

        tx = t64(x)
        ty = F.adaptive_avg_pool2d(tx, 1).reshape(N, C)
        ty.backward(torch.from_numpy(dy.astype(np.float64)))
        rep.check("avgpool", case, "y", y, ty)
        rep.check("avgpool", case, "y (mean)", y, tx.detach().mean((2, 3)))
        rep.check("avgpool_bwd", case, "dx", dx, tx.grad)


def batchnorm_ref(x, w, b, dy, eps, shift):
    """BatchNorm2d in training (F.batch_norm's y and, by autograd, dx, dw, db) in float64,
    the mean taken `shift` [C] (a constant) off x's: the statistics as a float32 stats
    holds them, whose mean is off by its rounding, up to half an ulp of |mean|, which
    shifts xhat by that over std (4e-5 at mean 100, std 0.1: the size of the tolerance,
    with which PyTorch's own float32 batch_norm fails such cases). shift = 0 is
    F.batch_norm."""
    tx, tw, tb = t64(x), t64(w), t64(b)
    dims = (0, 2, 3)
    mean = tx.mean(dims, keepdim=True) + torch.from_numpy(shift).reshape(1, -1, 1, 1)
    var = tx.var(dims, unbiased=False, keepdim=True)
    c = (1, -1, 1, 1)
    ty = (tx - mean) * torch.rsqrt(var + eps) * tw.reshape(c) + tb.reshape(c)
    ty.backward(torch.from_numpy(dy.astype(np.float64)))
    return ty, tx.grad, tw.grad, tb.grad


def check_mean_rounding(rep, kernel, case, got, ref, ulps, magnitude):
    """The float32 mean in stats is the exact mean rounded (within `ulps` ulps of
    `magnitude`): what batchnorm_ref's shift may take up."""
    limit = ulps * np.spacing(np.abs(np.asarray(magnitude, np.float32)).astype(np.float32)).astype(np.float64)
    off = np.abs(got.astype(np.float64) - ref) > limit
    if off.any():
        c = int(np.argmax(off))
        rep.failures.append(f"{kernel} [{case}] mean: channel {c} is {got[c]!r}, the exact mean {ref[c]!r} "
                            f"(more than {ulps:g} ulp off)")


def test_batchnorm(lib, rep, rng):
    # The split kernels composed as on one rank (count = N*H*W): stats -> fwd for y,
    # bwd_stats -> bwd_data for dx; dstats holds (db, dw). Against F.batch_norm in
    # training mode (batchnorm_ref, given the rounding of stats' float32 mean),
    # nn.BatchNorm2d's running-statistics update, and evaluation mode. Then as
    # SyncBatchNorm over 2 and 3 ranks where they divide N: each rank's stats of its equal
    # part, combined (planrt_k_batchnorm_combine) into the whole batch's, and the ranks'
    # dstats summed. Means far from 0 (100 with std 0.1, 1000 with std 1) check that the
    # statistics keep their precision (no sum-of-squares cancellation).
    for N, C, H, W, eps, momentum, mean, std in [
            (4, 3, 5, 5, 1e-5, 0.1, 0.0, 1.0),
            (1, 1, 3, 4, 1e-5, 0.1, 2.0, 0.5),     # N = C = 1
            (8, 16, 4, 4, 1e-3, 0.01, 3.0, 2.0),   # mean away from 0
            (2, 5, 1, 1, 0.1, 0.5, 0.0, 1.0),      # one pixel, count 2
            (3, 4, 7, 6, 1e-5, 0.1, -1.0, 0.1),    # H != W, small spread
            (6, 8, 5, 5, 1e-5, 0.1, 100.0, 0.1),   # large mean, small spread
            (12, 6, 4, 3, 1e-5, 0.1, 1000.0, 1.0),  # large mean
            (6, 3, 4, 4, 1e-5, 0.1, -200.0, 0.2),  # large negative mean
            (16, 64, 7, 7, 1e-5, 0.1, 0.5, 1.5)]:  # a ResNet's last stage
        case = f"N={N} C={C} H={H} W={W} eps={eps} momentum={momentum} mean={mean} std={std}"
        HW, count = H * W, N * H * W
        x = rng.normal(mean, std, (N, C, H, W)).astype(np.float32)
        w = rng.normal(1.0, 0.5, C).astype(np.float32)
        b = rng.normal(0.0, 0.5, C).astype(np.float32)
        dy = rng.normal(size=(N, C, H, W)).astype(np.float32)
        rmean = rng.normal(size=C).astype(np.float32)
        rvar = rng.uniform(0.5, 2.0, C).astype(np.float32)
        stats, y, dstats, dx = out(2, C), out(N, C, H, W), out(2, C), out(N, C, H, W)
        lib.planrt_k_batchnorm_stats(ptr(x), ptr(stats), N, C, HW)
        lib.planrt_k_batchnorm_fwd(ptr(x), ptr(stats), ptr(w), ptr(b), ptr(y), N, C, HW, eps)
        lib.planrt_k_batchnorm_bwd_stats(ptr(dy), ptr(x), ptr(stats), ptr(dstats), N, C, HW, eps)
        lib.planrt_k_batchnorm_bwd_data(ptr(dy), ptr(x), ptr(stats), ptr(w), ptr(dstats), ptr(dx), N, C, HW,
                                        count, eps)
        ye = out(N, C, H, W)
        lib.planrt_k_batchnorm_eval(ptr(x), ptr(rmean), ptr(rvar), ptr(w), ptr(b), ptr(ye), N, C, HW, eps)
        new_mean, new_var = rmean.copy(), rvar.copy()
        lib.planrt_k_batchnorm_running(ptr(stats), ptr(new_mean), ptr(new_var), C, count, momentum)

        x64 = x.astype(np.float64)
        ref_mean = x64.mean((0, 2, 3))
        ref_var = torch.from_numpy(x64).var((0, 2, 3), unbiased=False)
        rep.check("batchnorm_stats", case, "mean", stats[0], ref_mean)
        rep.check("batchnorm_stats", case, "var", stats[1], ref_var)
        check_mean_rounding(rep, "batchnorm_stats", case, stats[0], ref_mean, 0.5, ref_mean)
        ty, tdx, tdw, tdb = batchnorm_ref(x, w, b, dy, eps, stats[0] - ref_mean)
        rep.check("batchnorm_fwd", case, "y", y, ty)
        rep.check("batchnorm_bwd_stats", case, "db = dstats[0]", dstats[0], tdb)
        rep.check("batchnorm_bwd_stats", case, "dw = dstats[1]", dstats[1], tdw)
        rep.check("batchnorm_bwd_data", case, "dx", dx, tdx)

        bn = torch.nn.BatchNorm2d(C, eps=eps, momentum=momentum).double().train()
        with torch.no_grad():
            bn.running_mean.copy_(torch.from_numpy(rmean.astype(np.float64)))
            bn.running_var.copy_(torch.from_numpy(rvar.astype(np.float64)))
            bn(torch.from_numpy(x64))
        rep.check("batchnorm_running", case, "mean", new_mean, bn.running_mean)
        rep.check("batchnorm_running", case, "var", new_var, bn.running_var)
        tye = F.batch_norm(torch.from_numpy(x64), torch.from_numpy(rmean.astype(np.float64)),
                           torch.from_numpy(rvar.astype(np.float64)), torch.from_numpy(w.astype(np.float64)),
                           torch.from_numpy(b.astype(np.float64)), training=False, eps=eps)
        rep.check("batchnorm_eval", case, "y", ye, tye)

        for ranks in (2, 3):
            if N % ranks:
                continue
            sync = f"{case} over {ranks} ranks"
            n = N // ranks
            parts = [np.ascontiguousarray(a) for a in np.split(x, ranks)]
            dys = [np.ascontiguousarray(a) for a in np.split(dy, ranks)]
            gathered = out(ranks, 2, C)
            for r in range(ranks):
                part = out(2, C)
                lib.planrt_k_batchnorm_stats(ptr(parts[r]), ptr(part), n, C, HW)
                gathered[r] = part
            whole = out(2, C)
            lib.planrt_k_batchnorm_combine(ptr(gathered), ptr(whole), ranks, C)
            rep.check("batchnorm_combine", sync, "mean", whole[0], ref_mean)
            rep.check("batchnorm_combine", sync, "var", whole[1], ref_var)
            # Each rank's mean rounded, then their mean: within an ulp of the largest.
            check_mean_rounding(rep, "batchnorm_combine", sync, whole[0], ref_mean, 1.0,
                                np.abs(gathered[:, 0]).max(0))
            ys, dsum = [], np.zeros((2, C), np.float32)
            for r in range(ranks):
                yr, dr = out(n, C, H, W), out(2, C)
                lib.planrt_k_batchnorm_fwd(ptr(parts[r]), ptr(whole), ptr(w), ptr(b), ptr(yr), n, C, HW, eps)
                lib.planrt_k_batchnorm_bwd_stats(ptr(dys[r]), ptr(parts[r]), ptr(whole), ptr(dr), n, C, HW, eps)
                ys.append(yr)
                dsum += dr  # the all-reduce
            dxs = []
            for r in range(ranks):
                dxr = out(n, C, H, W)
                lib.planrt_k_batchnorm_bwd_data(ptr(dys[r]), ptr(parts[r]), ptr(whole), ptr(w), ptr(dsum), ptr(dxr),
                                                n, C, HW, count, eps)
                dxs.append(dxr)
            ty, tdx, tdw, tdb = batchnorm_ref(x, w, b, dy, eps, whole[0] - ref_mean)
            rep.check("batchnorm_fwd", sync, "y", np.concatenate(ys), ty)
            rep.check("batchnorm_bwd_stats", sync, "db = summed dstats[0]", dsum[0], tdb)
            rep.check("batchnorm_bwd_stats", sync, "dw = summed dstats[1]", dsum[1], tdw)
            rep.check("batchnorm_bwd_data", sync, "dx", np.concatenate(dxs), tdx)


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    start = time.time()
    tests = (test_layernorm, test_rmsnorm, test_sdpa, test_embedding, test_cross_entropy, test_conv2d,
             test_maxpool2d, test_avgpool, test_batchnorm)
    families = None
    if os.environ.get("PLANRT_KERNELS_ONLY"):
        families = [f for word in os.environ["PLANRT_KERNELS_ONLY"].split(",")
                    for f in FAMILY_GROUPS.get(word.strip(), (word.strip(),))]
        known = [t.__name__[len("test_"):] for t in tests]
        unknown = [f for f in families if f not in known]
        if unknown:
            print(f"PLANRT_KERNELS_ONLY: unknown {', '.join(unknown)} (known: {', '.join(known)}, "
                  f"{', '.join(FAMILY_GROUPS)})", file=sys.stderr)
            return 2
        tests = tuple(t for t in tests if t.__name__[len("test_"):] in families)
    lib = load(sys.argv[1], families)
    torch.set_num_threads(1)
    rng = np.random.default_rng(20240611)
    rep = Report()
    for test in tests:
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

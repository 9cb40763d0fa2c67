#!/usr/bin/env python3
"""The vision kernels of libplanrt against PyTorch's CPU kernels, same shapes, same threads.

Usage: vision_kernels.py path/to/libplanrt.so [threads]

Times one ResNet-style 3x3 convolution (forward, data and filter gradients), a 3x3/2 max
pooling with its backward and a BatchNorm2d forward and backward, on a CIFAR-sized
batch, as the median of 5 runs after a warm-up. OpenBLAS (planc) and PyTorch both get
`threads` threads (default 2). Prints one row per kernel: ms for planc, for PyTorch,
and their ratio. A benchmark: nothing is asserted.
"""
import ctypes
import os
import statistics
import sys
import time

THREADS = int(sys.argv[2]) if len(sys.argv) > 2 else 2
os.environ["OPENBLAS_NUM_THREADS"] = str(THREADS)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(THREADS)
lib = ctypes.CDLL(sys.argv[1])
f32p = ctypes.POINTER(ctypes.c_float)
i64, f32 = ctypes.c_int64, ctypes.c_float


def ptr(a):
    return a.ctypes.data_as(f32p)


def median_ms(fn):
    fn()
    runs = []
    for _ in range(5):
        t = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t) * 1e3)
    return statistics.median(runs)


def row(name, ours, theirs):
    print(f"{name:<34}{ours:>9.2f}{theirs:>9.2f}{ours / theirs:>8.2f}")


def main():
    rng = np.random.default_rng(0)
    N, C, H, W, K, R = 32, 64, 32, 32, 64, 3
    x = rng.standard_normal((N, C, H, W), dtype=np.float32)
    w = rng.standard_normal((K, C, R, R), dtype=np.float32) * 0.05
    b = np.zeros(K, np.float32)
    y = np.empty((N, K, H, W), np.float32)
    dy = rng.standard_normal(y.shape, dtype=np.float32)
    dx, dw, db = np.empty_like(x), np.empty_like(w), np.empty_like(b)
    shape = [i64(v) for v in (N, C, H, W, K, R, 1, 1)]
    tx, tw, tb = torch.from_numpy(x), torch.from_numpy(w).requires_grad_(), torch.from_numpy(b)
    tdy = torch.from_numpy(dy)
    print(f"threads {THREADS}; conv {N}x{C}x{H}x{W}, {K} filters {R}x{R}, pad 1   planc ms  torch ms  ratio")
    row("conv2d forward", median_ms(lambda: lib.planrt_k_conv2d(ptr(x), ptr(w), ptr(b), ptr(y), *shape)),
        median_ms(lambda: F.conv2d(tx, tw.detach(), tb, padding=1)))
    txg = tx.clone().requires_grad_()

    def torch_bwd():
        out = F.conv2d(txg, tw, tb, padding=1)
        out.backward(tdy)

    ours_bwd = median_ms(lambda: (lib.planrt_k_conv2d_bwd_data(ptr(dy), ptr(w), ptr(dx), *shape),
                                  lib.planrt_k_conv2d_bwd_filter(ptr(dy), ptr(x), ptr(dw), ptr(db), *shape)))
    fwd_torch = median_ms(lambda: F.conv2d(txg, tw, tb, padding=1))
    row("conv2d backward (data + filter)", ours_bwd, median_ms(torch_bwd) - fwd_torch)

    p = np.empty((N, C, H // 2, W // 2), np.float32)
    pool = [i64(v) for v in (N, C, H, W, 3, 2, 1)]
    row("maxpool2d 3x3/2 forward", median_ms(lambda: lib.planrt_k_maxpool2d(ptr(x), ptr(p), *pool)),
        median_ms(lambda: F.max_pool2d(tx, 3, 2, 1)))
    dp = rng.standard_normal(p.shape, dtype=np.float32)
    row("maxpool2d 3x3/2 backward", median_ms(lambda: lib.planrt_k_maxpool2d_bwd(ptr(dp), ptr(x), ptr(dx), *pool)),
        median_ms(lambda: torch.ops.aten.max_pool2d_with_indices_backward(
            torch.from_numpy(dp), tx, [3, 3], [2, 2], [1, 1], [1, 1], False,
            F.max_pool2d(tx, 3, 2, 1, return_indices=True)[1])))

    g, s = np.ones(C, np.float32), np.zeros(C, np.float32)
    stats, dstats = np.empty((2, C), np.float32), np.empty((2, C), np.float32)
    HW, count, eps = H * W, N * H * W, f32(1e-5)

    def ours_bn():
        lib.planrt_k_batchnorm_stats(ptr(x), ptr(stats), i64(N), i64(C), i64(HW))
        lib.planrt_k_batchnorm_fwd(ptr(x), ptr(stats), ptr(g), ptr(s), ptr(y), i64(N), i64(C), i64(HW), eps)
        lib.planrt_k_batchnorm_bwd_stats(ptr(dy), ptr(x), ptr(stats), ptr(dstats), i64(N), i64(C), i64(HW), eps)
        lib.planrt_k_batchnorm_bwd_data(ptr(dy), ptr(x), ptr(stats), ptr(g), ptr(dstats), ptr(dx), i64(N), i64(C),
                                        i64(HW), i64(count), eps)

    tg, ts = torch.ones(C, requires_grad=True), torch.zeros(C, requires_grad=True)

    def torch_bn():
        out = F.batch_norm(txg, None, None, tg, ts, training=True)
        out.backward(torch.from_numpy(dy[:, :C]))

    row("batchnorm forward + backward", median_ms(ours_bn), median_ms(torch_bn))


if __name__ == "__main__":
    main()

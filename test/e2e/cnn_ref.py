#!/usr/bin/python3
"""PyTorch reference for planc's training executables of models over images.

  * CNN below: the model test/e2e/vision.sh writes as a plan, with planc's parameter
    names as state_dict keys (conv weights [out, in, k, k], linear weights [in, out] as
    planc stores them, BatchNorm2d's weight and bias);
  * ImageData: the runtime's image files (runtime/include/planrt.h, "Image data": the
    PLANCIMG header, uint8 NCHW pixels, uint16 labels) and its sampler: image, crop and
    flip drawn from splitmix64 of (seed, global sample index), pixels / 255, normalised;
  * training by gpt_ref.train (accumulation, clipping, schedule, AdamW as
    torch.optim.AdamW(foreach=False) with decay on tensors of >= 2 dims).

    cnn_ref.py train --init init.safetensors --data train.bin --head flatten|pool \\
        --batch 8 --micro 4 --steps 20 --lr 1e-3 ... --out losses.json [--crop 1 --flip]
        [--mean 0.5 --std 0.25] [--ranks R] [--grads-out grads.safetensors] [--final-out params.safetensors]

    --micro is the micro-step's samples over all ranks; --ranks R splits them into R equal
    parts in rank order, each normalised by its own batch statistics (batchnorm = local).

    cnn_ref.py write --out train.bin --count 64 --channels 1 --size 8 --classes 10 --seed 7
        writes a planc image file of random images (a test's data set).

Torch uses PLANC_REF_THREADS threads (default 1).
"""
import argparse
import json
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_ref  # noqa: E402  (safetensors, splitmix64, the training loop)

torch.set_num_threads(int(os.environ.get("PLANC_REF_THREADS", "1")))


def read_images(path):
    """(pixels uint8 [N, C, H, W], labels int64 [N]) of a planc image file."""
    raw = open(path, "rb").read()
    if raw[:8] != b"PLANCIMG":
        raise gpt_ref.FormatError("%s: not a planc image file" % path)
    version, c, h, w, n = struct.unpack_from("<IIIIQ", raw, 8)
    pixels = np.frombuffer(raw, np.uint8, n * c * h * w, 32).reshape(n, c, h, w)
    labels = np.frombuffer(raw, "<u2", n, 32 + n * c * h * w).astype(np.int64)
    return pixels, labels


def write_images(path, pixels, labels):
    n, c, h, w = pixels.shape
    with open(path, "wb") as f:
        f.write(b"PLANCIMG" + struct.pack("<IIIIQ", 1, c, h, w, n))
        f.write(np.ascontiguousarray(pixels, np.uint8).tobytes())
        f.write(np.asarray(labels, "<u2").tobytes())


class ImageData:
    """The runtime's planrt_images_sample over one planc image file."""

    def __init__(self, path, seed, crop=0, flip=False, mean=None, std=None):
        self.pixels, self.labels = read_images(path)
        self.seed, self.crop, self.flip = seed, crop, flip
        self.mean, self.std = mean, std

    def sample(self, index):
        base = gpt_ref.mix(self.seed ^ gpt_ref.mix(index))
        draw = lambda k: base if k == 0 else gpt_ref.mix((base + k) & gpt_ref.M64)  # noqa: E731
        i = gpt_ref.below(draw(0), len(self.labels))
        img = self.pixels[i].astype(np.float32) / np.float32(255.0)
        c, h, w = img.shape
        if self.crop:
            p = self.crop
            dy, dx = gpt_ref.below(draw(1), 2 * p + 1), gpt_ref.below(draw(2), 2 * p + 1)
            padded = np.zeros((c, h + 2 * p, w + 2 * p), np.float32)
            padded[:, p:p + h, p:p + w] = img
            img = padded[:, dy:dy + h, dx:dx + w]
        if self.flip and draw(3) >> 63:
            img = img[:, :, ::-1]
        if self.mean is not None:
            m = np.asarray(self.mean, np.float32)[:, None, None]
            s = np.asarray(self.std, np.float32)[:, None, None]
            img = (img - m) / s
        return np.ascontiguousarray(img), self.labels[i]

    def batch(self, first, count, seq=1):
        xs, ys = zip(*(self.sample(first + j) for j in range(count)))
        return torch.from_numpy(np.stack(xs)), torch.tensor(ys)


class CNN(nn.Module):
    """conv1 (3x3, pad 1, no bias: bn1 follows) → bn1 → ReLU → maxpool 2 → conv2 (3x3,
    stride 2, pad 1) → ReLU → head → fc: `pool` = global average pooling then fc(16, classes);
    `flatten` = flatten of [16, size/4, size/4] then fc(16·(size/4)², classes)."""

    def __init__(self, channels=1, size=8, classes=10, head="pool", ranks=1):
        super().__init__()
        self.ranks = ranks  # batchnorm = local on this many data-parallel ranks
        self.conv1 = nn.Conv2d(channels, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.head = head
        self.fc = gpt_ref.Conv1D(16 if head == "pool" else 16 * (size // 4) ** 2, classes)  # planc's linear

    def forward(self, images, labels):
        if self.ranks > 1:  # DDP without SyncBatchNorm: each rank's statistics, the mean loss
            parts = zip(images.chunk(self.ranks), labels.chunk(self.ranks))
            return sum(self.one_rank(x, y) for x, y in parts) / self.ranks
        return self.one_rank(images, labels)

    def one_rank(self, images, labels):
        x = F.relu(self.bn1(self.conv1(images)))
        x = F.max_pool2d(x, 2)
        x = F.relu(self.conv2(x))
        x = x.mean((2, 3)) if self.head == "pool" else x.flatten(1)
        return F.cross_entropy(self.fc(x), labels)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("--out", required=True)
    for k, d in (("count", 64), ("channels", 1), ("size", 8), ("classes", 10), ("seed", 7)):
        w.add_argument("--" + k, type=int, default=d)
    t = sub.add_parser("train")
    t.add_argument("--init", required=True)
    t.add_argument("--data", required=True)
    t.add_argument("--head", choices=("pool", "flatten"), default="pool")
    for k, d in (("channels", 1), ("size", 8), ("classes", 10), ("batch", 8), ("micro", 4), ("steps", 20),
                 ("seed", 1337), ("warmup", 0), ("crop", 0), ("ranks", 1)):
        t.add_argument("--" + k, type=int, default=d)
    for k, d in (("lr", 1e-3), ("min-lr", 0.0), ("clip", 0.0), ("weight-decay", 0.0), ("beta1", 0.9),
                 ("beta2", 0.95), ("eps", 1e-8)):
        t.add_argument("--" + k, type=float, default=d)
    t.add_argument("--schedule", default="constant")
    t.add_argument("--flip", action="store_true")
    t.add_argument("--mean", type=float, nargs="*")
    t.add_argument("--std", type=float, nargs="*")
    t.add_argument("--out")
    t.add_argument("--grads-out")
    t.add_argument("--final-out")
    args = ap.parse_args(argv)
    if args.cmd == "write":
        rng = np.random.default_rng(args.seed)
        pixels = rng.integers(0, 256, (args.count, args.channels, args.size, args.size), dtype=np.uint8)
        write_images(args.out, pixels, rng.integers(0, args.classes, args.count))
        return 0
    args.seq, args.double, args.ckpt_out = 1, False, None
    gpt_ref.train(args, log=None, make_model=lambda a: CNN(a.channels, a.size, a.classes, a.head, a.ranks),
                  make_data=lambda a: ImageData(a.data, a.seed, a.crop, a.flip, a.mean, a.std))
    return 0


if __name__ == "__main__":
    sys.exit(main())

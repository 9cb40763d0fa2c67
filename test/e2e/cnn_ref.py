#!/usr/bin/python3
"""PyTorch reference for planc's training executables of models over images.

  * CNN below: the model test/e2e/vision.sh writes as a plan, with planc's parameter
    names as state_dict keys (conv weights [out, in, k, k], linear weights [in, out] as
    planc stores them, BatchNorm2d's weight and bias);
  * ImageData: the runtime's image files (runtime/include/planrt.h, "Image data": the
    PLANCIMG header, uint8 NCHW pixels, uint16 labels) and its sampler: image, crop and
    flip drawn from splitmix64 of (seed, global sample index), pixels / 255, normalised;
  * training by gpt_ref.train (accumulation, clipping, schedule, AdamW as
    torch.optim.AdamW(foreach=False) with decay on tensors of >= 2 dims);
  * evaluation on a second image file with BatchNorm's running statistics (eval mode).

    cnn_ref.py train --init init.safetensors --data train.bin --head flatten|pool \\
        --batch 8 --micro 4 --steps 20 --lr 1e-3 ... --out losses.json [--crop 1 --flip]
        [--mean 0.5 --std 0.25] [--ranks R] [--grads-out grads.safetensors] [--final-out params.safetensors]
        [--val val.bin --eval-every N --eval-batches M]

    --micro is the micro-step's samples over all ranks; --ranks R splits them into R equal
    parts in rank order, each normalised by its own batch statistics (batchnorm = local).
    BatchNorm2d's running statistics (momentum 0.1, unbiased variance) follow every micro-step
    of rank 0's part only: DDP (broadcast_buffers) hands rank 0's buffers to the others.

    With --val, after each step s (0-based) with (s + 1) % N == 0 and after the last step
    (N = 0, the default: the last only), the model in eval mode runs the val file's images
    0 .. M·micro − 1 (M default 1) in file order (pixels / 255, --mean/--std; no crop or flip)
    in M batches of --micro: val_loss is the mean of the batches' mean cross-entropies,
    val_accuracy the share of argmax(logits) == label. --out gets them as "evals":
    [{"step", "val_loss", "val_accuracy"}]; --final-out holds the parameters and the buffers
    (bn1.running_mean, bn1.running_var as f32, bn1.num_batches_tracked as a 0-d i64).

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
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "digits"))
import make_data  # noqa: E402  (planc image files)

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


# The writer of planc image files is the digits example's (one source of the format's writer).
write_images = make_data.write_images


class ImageData:
    """The runtime's planrt_images_sample over one planc image file."""

    def __init__(self, path, seed, crop=0, flip=False, mean=None, std=None):
        self.pixels, self.labels = read_images(path)
        self.seed, self.crop, self.flip = seed, crop, flip
        self.mean, self.std = mean, std

    def normalise(self, img):
        """(img − mean) / std per channel, when --mean/--std are given."""
        if self.mean is None:
            return img
        m = np.asarray(self.mean, np.float32)[:, None, None]
        s = np.asarray(self.std, np.float32)[:, None, None]
        return (img - m) / s

    def get(self, i):
        """Image i of the file (file order, no crop or flip) and its label: evaluation's."""
        img = self.pixels[i].astype(np.float32) / np.float32(255.0)
        return np.ascontiguousarray(self.normalise(img)), self.labels[i]

    def images(self, first, count):
        """Images first .. first + count − 1 in file order, as (images, labels) tensors."""
        xs, ys = zip(*(self.get(first + j) for j in range(count)))
        return torch.from_numpy(np.stack(xs)), torch.tensor(ys)

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
        return np.ascontiguousarray(self.normalise(img)), self.labels[i]

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
            parts = enumerate(zip(images.chunk(self.ranks), labels.chunk(self.ranks)))
            return sum(F.cross_entropy(self.logits(x, track=r == 0), y) for r, (x, y) in parts) / self.ranks
        return F.cross_entropy(self.logits(images), labels)

    def logits(self, images, track=True):
        """Logits of one rank's images. In training mode with track=False (a rank other than
        0) bn1 normalises by the batch's statistics and leaves the running buffers alone."""
        x = self.conv1(images)
        if track or not self.training:
            x = self.bn1(x)
        else:
            x = F.batch_norm(x, None, None, self.bn1.weight, self.bn1.bias, training=True, eps=self.bn1.eps)
        x = F.max_pool2d(F.relu(x), 2)
        x = F.relu(self.conv2(x))
        x = x.mean((2, 3)) if self.head == "pool" else x.flatten(1)
        return self.fc(x)


def evaluate(model, val, micro, batches):
    """(val_loss, val_accuracy) of the model in eval mode over val's first batches·micro
    images in file order, in batches of micro; the model is back in training mode after."""
    dtype = next(model.parameters()).dtype
    losses, correct = [], 0
    model.eval()
    with torch.no_grad():
        for b in range(batches):
            x, y = val.images(b * micro, micro)
            logits = model.logits(x.to(dtype))
            losses.append(F.cross_entropy(logits, y).item())
            correct += int((logits.argmax(1) == y).sum())
    model.train()
    return sum(losses) / batches, correct / (batches * micro)


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
                 ("seed", 1337), ("warmup", 0), ("crop", 0), ("ranks", 1), ("eval-every", 0), ("eval-batches", 1)):
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
    t.add_argument("--val")
    args = ap.parse_args(argv)
    if args.cmd == "write":
        rng = np.random.default_rng(args.seed)
        pixels = rng.integers(0, 256, (args.count, args.channels, args.size, args.size), dtype=np.uint8)
        write_images(args.out, pixels, rng.integers(0, args.classes, args.count))
        return 0
    args.seq, args.double, args.ckpt_out = 1, False, None
    evals, after_step = [], None
    if args.val:
        val = ImageData(args.val, args.seed, mean=args.mean, std=args.std)
        if args.eval_batches < 1 or args.eval_batches * args.micro > len(val.labels):
            raise ValueError("--eval-batches %d of --micro %d: %s holds %d images"
                             % (args.eval_batches, args.micro, args.val, len(val.labels)))

        def after_step(s, model):
            if (args.eval_every and (s + 1) % args.eval_every == 0) or s == args.steps - 1:
                loss, accuracy = evaluate(model, val, args.micro, args.eval_batches)
                evals.append({"step": s, "val_loss": loss, "val_accuracy": accuracy})
    _, model = gpt_ref.train(args, log=None, make_model=lambda a: CNN(a.channels, a.size, a.classes, a.head, a.ranks),
                             make_data=lambda a: ImageData(a.data, a.seed, a.crop, a.flip, a.mean, a.std),
                             after_step=after_step)
    if args.out:  # gpt_ref.train wrote "config" and "steps"
        with open(args.out) as f:
            out = json.load(f)
        out["evals"] = evals
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
    if args.final_out:  # gpt_ref.train wrote the parameters; BatchNorm's buffers join them
        tensors, meta = gpt_ref.read_safetensors(args.final_out)
        for name, b in model.named_buffers():
            tensors[name] = b.detach().float().numpy() if b.is_floating_point() else b.detach().numpy()
        gpt_ref.write_safetensors(args.final_out, tensors, meta)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""The digits example's data: scikit-learn's bundled 8×8 handwritten digits as planc image files.

load_digits() gives 1,797 grayscale 8×8 images (values 0..16) of the digits 0-9, offline.
Pixels become uint8 round(v · 255 / 16); a permutation from numpy's default_rng(0) splits
them into train.bin (its first 1,437 images) and test.bin (the other 360). Both are the
runtime's image files (runtime/include/planrt.h, "Image data": the 32-byte PLANCIMG header,
uint8 NCHW pixels, uint16 little-endian labels). Deterministic: the same files every time.

    examples/digits/make_data.py [--out DIR]    # default: data/digits under the repository root
"""
import argparse
import os
import struct

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = 1437  # of 1,797; the other 360 are the test set


def write_images(path, pixels, labels):
    """A planc image file: header (magic, version 1, C, H, W, N), NCHW uint8 pixels, uint16 labels."""
    n, c, h, w = pixels.shape
    with open(path, "wb") as f:
        f.write(b"PLANCIMG" + struct.pack("<IIIIQ", 1, c, h, w, n))
        f.write(np.ascontiguousarray(pixels, np.uint8).tobytes())
        f.write(np.asarray(labels, "<u2").tobytes())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "data", "digits"), help="directory (default %(default)s)")
    args = ap.parse_args(argv)

    from sklearn.datasets import load_digits  # the data ships with scikit-learn
    digits = load_digits()
    pixels = np.rint(digits.images * (255.0 / 16.0)).astype(np.uint8)[:, None, :, :]  # [1797, 1, 8, 8]
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(labels))
    train, test = order[:TRAIN], order[TRAIN:]

    os.makedirs(args.out, exist_ok=True)
    for name, idx in (("train.bin", train), ("test.bin", test)):
        write_images(os.path.join(args.out, name), pixels[idx], labels[idx])
        counts = np.bincount(labels[idx], minlength=10)
        print("%s: %d images 1x8x8, per class %s" % (os.path.join(args.out, name), len(idx), " ".join(map(str, counts))))


if __name__ == "__main__":
    main()

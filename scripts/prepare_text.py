#!/usr/bin/python3
"""Byte-level text dataset from the license texts every Debian machine has offline.

Concatenates the regular files in /usr/share/common-licenses/ (sorted by name; symlinks
such as GPL -> GPL-3 are skipped so no text appears twice), one token per byte (vocab 256),
and splits the bytes 90% / 10% into train.bin and val.bin: nanoGPT's raw little-endian
uint16 token files, no header. Deterministic: the same machine gives the same files.

    scripts/prepare_text.py [OUTDIR]        # default: data/licenses under the repository root
"""
import argparse
import hashlib
import os
import struct
import sys

SOURCE = "/usr/share/common-licenses"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_uint16(path, data):
    """Writes bytes `data` as little-endian uint16 tokens (one per byte)."""
    try:
        import numpy as np
        np.frombuffer(data, dtype=np.uint8).astype("<u2").tofile(path)
    except ImportError:
        with open(path, "wb") as f:
            f.write(struct.pack("<%dH" % len(data), *data))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir", nargs="?", default=os.path.join(ROOT, "data", "licenses"))
    ap.add_argument("--source", default=SOURCE, help="directory of texts (default %(default)s)")
    ap.add_argument("--val-fraction", type=float, default=0.1)
    args = ap.parse_args(argv)

    if not os.path.isdir(args.source):
        sys.exit("prepare_text.py: %s does not exist (Debian's base-files provides it)" % args.source)
    names = sorted(n for n in os.listdir(args.source)
                   if os.path.isfile(os.path.join(args.source, n))
                   and not os.path.islink(os.path.join(args.source, n)))
    if not names:
        sys.exit("prepare_text.py: no files in %s" % args.source)
    parts = []
    for n in names:
        with open(os.path.join(args.source, n), "rb") as f:
            b = f.read()
        print("  %-12s %7d bytes" % (n, len(b)))
        parts.append(b)
    text = b"".join(parts)
    split = int(len(text) * (1.0 - args.val_fraction))
    train, val = text[:split], text[split:]

    os.makedirs(args.outdir, exist_ok=True)
    write_uint16(os.path.join(args.outdir, "train.bin"), train)
    write_uint16(os.path.join(args.outdir, "val.bin"), val)
    print("%d files, %d bytes (sha256 %s)" % (len(names), len(text), hashlib.sha256(text).hexdigest()[:16]))
    print("wrote %s: train.bin %d tokens, val.bin %d tokens (uint16, vocab 256)"
          % (args.outdir, len(train), len(val)))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Byte-level text dataset from the license texts every Debian machine has offline.

Concatenates the regular files in /usr/share/common-licenses/ (sorted by name; symlinks
such as GPL -> GPL-3 are skipped so no text appears twice), one token per byte (vocab 256),
and splits the bytes 90% / 10% into train.bin and val.bin: nanoGPT's raw little-endian
uint16 token files, no header. Deterministic: the same machine gives the same files.

    scripts/prepare_text.py [OUTDIR]        # default: data/licenses under the repository root
    scripts/prepare_text.py --clients 4     # also OUTDIR/clients/{0..3}/train.bin, clients/val.bin

With --clients N (federated plans, docs/FEDERATED.md) the files are also dealt to N clients
in turn (client k gets files k, k + N, …: different licenses, so the clients' data differ):
each client's train.bin holds the first 90% of each of its files, and clients/val.bin the
last 10% of every file.
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
    ap.add_argument("--clients", type=int, default=0, help="also write N federated clients' files")
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
    if args.clients > 0:
        write_clients(args, names, parts)


def write_clients(args, names, parts):
    """Client k: the first (1 − val_fraction) of files k, k + N, …; clients/val.bin the rest of each."""
    if args.clients > len(names):
        sys.exit("prepare_text.py: %d clients but only %d files to deal" % (args.clients, len(names)))
    base = os.path.join(args.outdir, "clients")
    val = []
    for k in range(args.clients):
        mine = []
        for n, b in list(zip(names, parts))[k::args.clients]:
            cut = int(len(b) * (1.0 - args.val_fraction))
            mine.append(b[:cut])
        os.makedirs(os.path.join(base, str(k)), exist_ok=True)
        data = b"".join(mine)
        write_uint16(os.path.join(base, str(k), "train.bin"), data)
        print("  client %d: %s, %d tokens" % (k, ", ".join(names[k::args.clients]), len(data)))
    for b in parts:
        val.append(b[int(len(b) * (1.0 - args.val_fraction)):])
    write_uint16(os.path.join(base, "val.bin"), b"".join(val))
    print("wrote %s: %d clients' train.bin, val.bin %d tokens" % (base, args.clients, sum(len(v) for v in val)))


if __name__ == "__main__":
    main()

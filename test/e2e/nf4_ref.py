#!/usr/bin/python3
"""Reference for planc's NF4 weight quantization (QLoRA, Dettmers et al. 2023), with and
without double quantization: the values the C++ implementation must reproduce bit for bit.

A 2-D float32 weight of n values, flattened row-major, is cut into blocks of `block`
consecutive values (the last may be partial):

  * absmax[b] = max |w| of block b; code = index of the NF4 level nearest to w / absmax[b]
    (float32; a tie goes to the lower index); a block whose absmax is 0 is all code 7 (0.0);
  * without double quantization w' = level[code] * absmax[b];
  * with it, absmax is stored as FP8 E4M3 around offset = float32(mean absmax, summed in
    float64 in block order): r = absmax - offset, groups of 256 blocks (the last may be
    partial) with scale s[g] = max |r| / 448, fp8 = E4M3(clamp(r / s[g], ±448)) rounded to
    nearest, ties to the even code (s[g] == 0: every code 0); then a' = fp8 * s[g] + offset
    and w' = level[code] * a'.

Every step is one float32 operation as numpy does it (IEEE, round to nearest even). The
E4M3 encoder is a nearest-value search in the table of the 127 non-negative finite codes,
not bit manipulation. Size: codes ceil(n/2) bytes, padded to 4; plus absmax as 4 nblocks
bytes, or with double quantization nblocks bytes padded to 4, 4 per group and 4 (offset).

    nf4_ref.py dequantize --in IN.safetensors --out OUT.safetensors --match REGEX \\
        [--block 64] [--double 1|0]
    nf4_ref.py levels-check      # the level table against the normal quantiles it comes from
    nf4_ref.py selftest          # E4M3 values and ties, zeros, absmax, error of a normal matrix

dequantize replaces every 2-D tensor whose name matches REGEX (re.search) by its quantized
then dequantized float32 values, copies every other tensor (and the metadata) unchanged, and
prints one line: the number of tensors quantized and their bits per parameter.
"""
import argparse
import os
import re
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_ref  # noqa: E402  (read_safetensors, write_safetensors, FormatError)

F32 = np.float32

# The 16 NF4 levels of the QLoRA paper (appendix E), as float32.
LEVELS = np.array([
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
    -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
    0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
    0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0], dtype=F32)
ZERO_CODE = 7          # LEVELS[7] == 0.0
GROUP = 256            # blocks per double-quantization group
FP8_MAX = F32(448.0)   # the largest finite E4M3 value

# ---------------------------------------------------------------------------- NF4 levels


def derived_levels(delta=0.9677083):
    """The levels from the normal quantile function, as QLoRA builds them: 8 positive and
    7 negative quantiles, 0, sorted and normalized to [-1, 1]."""
    ppf = statistics.NormalDist().inv_cdf
    positive = [ppf(p) for p in np.linspace(delta, 0.5, 9)[:-1]]
    negative = [-ppf(p) for p in np.linspace(delta, 0.5, 8)[:-1]]
    v = np.array(sorted(positive + negative + [0.0]))
    return v / v.max()


def levels_check(tol=2e-7):
    """None if the derived levels agree with LEVELS within tol, else a message."""
    d = derived_levels()
    worst = np.abs(d - LEVELS.astype(np.float64)).max()
    if len(d) != len(LEVELS) or not worst <= tol:
        return "NF4 levels: derived %s differ from the table by up to %.3g (> %g)" % (d.tolist(), worst, tol)
    return None

# ---------------------------------------------------------------------------- FP8 E4M3


def e4m3_value(code):
    """The value of a magnitude code 0..126 (exponent bias 7, 3 mantissa bits), exact."""
    e, m = code >> 3, code & 7
    return m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)


E4M3 = np.array([e4m3_value(c) for c in range(127)])   # ascending; E4M3[126] == 448
E4M3_DECODE = np.array([(-1 if c & 0x80 else 1) * e4m3_value(c & 0x7F) if c & 0x7F != 0x7F else np.nan
                        for c in range(256)], dtype=F32)


def fp8_encode(y):
    """float32 values (already within ±448) -> uint8 E4M3 codes, nearest value, a tie to the
    even code; a magnitude that rounds to 0 is code 0 (no -0)."""
    a = np.abs(np.asarray(y, dtype=F32)).astype(np.float64)
    hi = np.clip(np.searchsorted(E4M3, a, side="left"), 1, len(E4M3) - 1)   # E4M3[hi-1] < a <= E4M3[hi]
    lo = hi - 1
    twice, mid2 = 2 * a, E4M3[lo] + E4M3[hi]                                # exact in float64
    up = (twice > mid2) | ((twice == mid2) & (hi % 2 == 0))
    mag = np.where(up, hi, lo).astype(np.uint8)
    return np.where((np.asarray(y) < 0) & (mag != 0), mag | 0x80, mag).astype(np.uint8)


def fp8_decode(codes):
    return E4M3_DECODE[np.asarray(codes, dtype=np.uint8)]

# ---------------------------------------------------------------------------- quantization


def blocks_of(w, block):
    """A flat float32 array as [nblocks, block], the last block padded with zeros (which
    change neither a block's absmax nor the values kept)."""
    n = w.size
    nblocks = -(-n // block)
    out = np.zeros(nblocks * block, dtype=F32)
    out[:n] = w
    return out.reshape(nblocks, block)


def nf4_codes(blocks, absmax):
    """[nblocks, block] float32 and their absmax -> uint8 codes: nearest level of
    w / absmax, ties to the lower index; 7 where absmax is 0."""
    safe = np.where(absmax == 0, F32(1), absmax).astype(F32)
    x = (blocks / safe[:, None]).astype(F32)
    best = np.abs(x - LEVELS[0])
    code = np.zeros(x.shape, dtype=np.uint8)
    for j in range(1, len(LEVELS)):
        d = np.abs(x - LEVELS[j])
        better = d < best                      # strict: the first minimum wins a tie
        best = np.where(better, d, best)
        code[better] = j
    code[absmax == 0, :] = ZERO_CODE
    return code


def double_quantize(absmax):
    """absmax [nblocks] float32 -> (fp8 codes [nblocks], scales [ngroups], offset)."""
    nblocks = absmax.size
    offset = F32(np.cumsum(absmax.astype(np.float64))[-1] / nblocks)   # a sequential float64 sum
    r = (absmax - offset).astype(F32)
    ngroups = -(-nblocks // GROUP)
    padded = np.zeros(ngroups * GROUP, dtype=F32)
    padded[:nblocks] = r
    scale = (np.abs(padded).reshape(ngroups, GROUP).max(axis=1).astype(F32) / FP8_MAX).astype(F32)
    s = np.repeat(scale, GROUP)[:nblocks]
    safe = np.where(s == 0, F32(1), s).astype(F32)
    y = np.clip((r / safe).astype(F32), -FP8_MAX, FP8_MAX).astype(F32)
    codes = np.where(s == 0, np.uint8(0), fp8_encode(y)).astype(np.uint8)
    return codes, scale, offset


def double_dequantize(codes, scale, offset):
    """a' = fp8 * s + offset, the product and the sum each rounded to float32."""
    s = np.repeat(scale, GROUP)[:codes.size]
    return ((fp8_decode(codes) * s).astype(F32) + offset).astype(F32)


def roundtrip(w, block=64, double=True):
    """A float32 array of any shape, quantized (flattened row-major) then dequantized."""
    w = np.ascontiguousarray(w, dtype=F32)
    if w.size == 0:
        return w.copy()
    blocks = blocks_of(w.reshape(-1), block)
    absmax = np.abs(blocks).max(axis=1).astype(F32)
    codes = nf4_codes(blocks, absmax)
    if double:
        absmax = double_dequantize(*double_quantize(absmax))
    out = (LEVELS[codes] * absmax[:, None]).astype(F32)
    return out.reshape(-1)[:w.size].reshape(w.shape)


def nbytes(n, block=64, double=True):
    """Bytes of a quantized tensor of n values: codes, then absmax (float32, or FP8 codes,
    group scales and the offset)."""
    up4 = lambda b: -(-b // 4) * 4
    nblocks = -(-n // block)
    if double:
        return up4(-(-n // 2)) + up4(nblocks) + 4 * -(-nblocks // GROUP) + 4
    return up4(-(-n // 2)) + 4 * nblocks

# ---------------------------------------------------------------------------- commands


def dequantize_cmd(args):
    tensors, meta = gpt_ref.read_safetensors(args.inp)
    pattern = re.compile(args.match)
    count = params = size = 0
    for name in sorted(tensors):
        t = tensors[name]
        if t.ndim == 2 and pattern.search(name):
            tensors[name] = roundtrip(t.astype(F32), args.block, bool(args.double))
            count, params, size = count + 1, params + t.size, size + nbytes(t.size, args.block, bool(args.double))
    if not count:
        raise ValueError("no 2-D tensor of %s matches %r" % (args.inp, args.match))
    gpt_ref.write_safetensors(args.out, tensors, meta)
    print("nf4_ref: %d tensors quantized (%d parameters, block %d, double %d): %.4f bits per parameter"
          % (count, params, args.block, args.double, 8 * size / params if params else 0.0))
    return 0


def selftest():
    # E4M3: known codes, every code back to itself, ties to the even code, clamping
    assert fp8_decode(0x7E) == 448 and fp8_decode(0x08) == 2.0 ** -6, "E4M3 values"
    assert fp8_decode(0x01) == 2.0 ** -9 and fp8_decode(0x38) == 1.0 and fp8_decode(0xB8) == -1.0, "E4M3 values"
    mags = np.arange(127, dtype=np.uint8)
    assert (fp8_encode(fp8_decode(mags)) == mags).all(), "E4M3 codes do not round-trip"
    assert (fp8_encode(-fp8_decode(mags[1:])) == (mags[1:] | 0x80)).all(), "negative E4M3 codes"
    ties = fp8_encode(np.array([1.0625, 1.1875, -1.0625, 2.0 ** -10, 3 * 2.0 ** -10, 448, 0.0], dtype=F32))
    assert ties.tolist() == [0x38, 0x3A, 0xB8, 0x00, 0x02, 0x7E, 0x00], [hex(c) for c in ties]
    assert fp8_encode(np.array([1.07], dtype=F32))[0] == 0x39, "1.07 is nearer 1.125"
    # NF4: ties to the lower index
    x = np.array([[LEVELS[8] / 2, LEVELS[6] / 2, 1.0, -1.0]], dtype=F32)
    assert nf4_codes(x, np.array([1.0], dtype=F32)).tolist() == [[7, 6, 15, 0]], "NF4 ties"
    rng = np.random.default_rng(0)
    w = rng.standard_normal((37, 61)).astype(F32)          # 2257 values: a partial last block
    w[3, :] = 0                                            # zeros inside blocks 2 and 3
    w.reshape(-1)[64 * 5:64 * 6] = 0                       # block 5 all zero
    for double in (False, True):
        q = roundtrip(w, 64, double)
        assert q.dtype == F32 and q.shape == w.shape
        assert (q.reshape(-1)[64 * 5:64 * 6] == 0).all(), "a zero block is not zero (double %d)" % double
        assert (roundtrip(np.zeros((3, 100), F32), 64, double) == 0).all(), "zeros (double %d)" % double
    plain = roundtrip(w, 64, False).reshape(-1)
    flat = w.reshape(-1)
    for b in range(0, flat.size, 64):
        i = np.argmax(np.abs(flat[b:b + 64]))
        assert plain[b + i] == flat[b + i], "block %d: absmax %r came back as %r" % (b // 64, flat[b + i], plain[b + i])
    big = rng.standard_normal((300, 257)).astype(F32)      # 1205 blocks: 5 groups, the last partial
    for double in (False, True):
        q = roundtrip(big, 64, double)
        rel = np.abs(q - big).mean() / np.abs(big).mean()
        assert rel < 0.1, "mean relative error %.4f (double %d)" % (rel, double)
    a = np.abs(blocks_of(big.reshape(-1), 64)).max(axis=1).astype(F32)
    codes, scale, offset = double_quantize(a)
    assert ((codes & 0x7F) == 0x7E).sum() >= len(scale), "each group's largest |r| is not ±448"
    back = double_dequantize(codes, scale, offset)
    assert np.abs(back - a).max() <= 0.05 * a.max(), "double quantization of absmax"
    assert nbytes(64 * 256, 64, True) == 8192 + 256 + 4 + 4 and nbytes(3, 64, False) == 4 + 4
    print("nf4_ref: selftest passed (E4M3, NF4 ties, zeros, absmax, error %.4f)" % rel)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dequantize", help="quantize then dequantize the matching 2-D tensors")
    d.add_argument("--in", dest="inp", required=True)
    d.add_argument("--out", required=True)
    d.add_argument("--block", type=int, default=64)
    d.add_argument("--double", type=int, choices=[0, 1], default=1, help="double quantization (default 1)")
    d.add_argument("--match", required=True, help="regular expression (re.search) on tensor names")
    sub.add_parser("levels-check", help="the NF4 table against the normal quantiles")
    sub.add_parser("selftest", help="checks of this reference")
    args = ap.parse_args(argv)
    if args.cmd == "levels-check":
        bad = levels_check()
        if bad:
            print("nf4_ref.py: %s" % bad, file=sys.stderr)
            return 1
        print("nf4_ref: the 16 NF4 levels agree with the normal quantiles")
        return 0
    if args.cmd == "selftest":
        return selftest()
    if args.block <= 0:
        ap.error("--block must be positive")
    try:
        return dequantize_cmd(args)
    except (gpt_ref.FormatError, FileNotFoundError, ValueError, re.error) as e:
        print("nf4_ref.py: error: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

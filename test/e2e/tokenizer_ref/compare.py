#!/usr/bin/python3
"""Comparisons of test/e2e/tokenizer_reference.sh.

compare.py ids LIST OURS REFERENCE LABEL
    OURS and REFERENCE hold one line of ids per file of LIST; prints each file whose ids
    differ, with the first differing position and the ids around it on both sides.
compare.py text LIST DECODED LABEL
    DECODED must be the files of LIST one after another, byte for byte; prints the file
    where it first differs.
Exit status 1 on any difference.
"""
import sys

WINDOW = 8
MAX_REPORTED = 10


def window(ids, at):
    lo = max(0, at - WINDOW)
    return ('… ' if lo else '') + ' '.join(ids[lo:at + WINDOW]) + (' …' if at + WINDOW < len(ids) else '')


def compare_ids(files, ours_path, ref_path, label):
    bad = tokens = 0
    with open(ours_path) as ours, open(ref_path) as ref:
        for i, name in enumerate(files):
            a, b = ours.readline(), ref.readline()
            if not a.endswith('\n') or not b.endswith('\n'):
                print(f'{label}: {name}: no line of ids from {"planc-tokenize" if not a.endswith(chr(10)) else "the reference"}')
                return 1
            a, b = a.split(), b.split()
            tokens += len(b)
            if a == b:
                continue
            bad += 1
            if bad <= MAX_REPORTED:
                at = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
                print(f'{label}: MISMATCH {name}: first at token {at} ({len(a)} tokens vs {len(b)})\n'
                      f'  planc-tokenize: {window(a, at)}\n  reference:      {window(b, at)}')
        if ours.readline() or ref.readline():
            print(f'{label}: more lines of ids than files')
            return 1
    print(f'{label}: {len(files) - bad} of {len(files)} files equal, {tokens} reference tokens')
    return 1 if bad else 0


def compare_text(files, decoded_path, label):
    with open(decoded_path, 'rb') as f:
        decoded = f.read()
    at = 0
    for name in files:
        with open(name, 'rb') as f:
            data = f.read()
        got = decoded[at:at + len(data)]
        if got != data:
            k = next((k for k in range(min(len(got), len(data))) if got[k] != data[k]), min(len(got), len(data)))
            print(f'{label}: MISMATCH {name}: decode(encode(file)) differs at byte {k}: '
                  f'{got[max(0, k - 20):k + 20]!r} vs {data[max(0, k - 20):k + 20]!r}')
            return 1
        at += len(data)
    if at != len(decoded):
        print(f'{label}: {len(decoded) - at} bytes more decoded than the files hold')
        return 1
    print(f'{label}: decode(encode(file)) == file for all {len(files)} files ({at} bytes)')
    return 0


def main():
    mode, list_path = sys.argv[1], sys.argv[2]
    with open(list_path) as f:
        files = f.read().split('\n')[:-1]
    if mode == 'ids':
        return compare_ids(files, *sys.argv[3:6])
    return compare_text(files, *sys.argv[3:5])


if __name__ == '__main__':
    sys.exit(main())

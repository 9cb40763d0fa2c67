#!/usr/bin/python3
"""The corpus of test/e2e/tokenizer_reference.sh, copied under OUT_DIR/corpus, and its
list (one path a line) in OUT_DIR/corpus.list.

Every regular file of /usr/share/common-licenses; the man pages /usr/share/man/man*/*.gz
(regular files, not the links to them) in C-locale sorted order, every STRIDE-th one
(the 1st, the STRIDE+1-th, ...; STRIDE 1 takes them all), decompressed (as gzip -dc);
and the EXTRA files given. A file that is not UTF-8 is copied decoded with U+FFFD for
each ill-formed sequence (Python's and the WHATWG decoder's replacement, which node uses),
so that both sides see the same text; the count of such files is printed.

usage: corpus.py OUT_DIR STRIDE [EXTRA...]
"""
import glob
import gzip
import os
import sys


def sources(stride, extra):
    licenses = sorted(p for p in glob.glob('/usr/share/common-licenses/*')
                      if os.path.isfile(p) and not os.path.islink(p))
    pages = sorted((p for p in glob.glob('/usr/share/man/man*/*.gz')
                    if os.path.isfile(p) and not os.path.islink(p)), key=lambda p: p.encode())
    for p in licenses:
        yield p, 'licenses/' + os.path.basename(p), False
    for p in pages[::stride]:
        yield p, 'man/' + os.path.relpath(p, '/usr/share/man')[:-3], True
    for p in extra:
        yield p, 'extra/' + os.path.basename(p), False


def main():
    out, stride, extra = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    files, total, replaced = [], 0, 0
    for src, name, compressed in sources(stride, extra):
        with (gzip.open(src) if compressed else open(src, 'rb')) as f:
            data = f.read()
        try:
            data.decode('utf-8')
        except UnicodeDecodeError:
            data = data.decode('utf-8', 'replace').encode('utf-8')
            replaced += 1
        path = os.path.join(out, 'corpus', name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'wb') as f:
            f.write(data)
        files.append(path)
        total += len(data)
    with open(os.path.join(out, 'corpus.list'), 'w') as f:
        f.write(''.join(p + '\n' for p in files))
    print(f'corpus: {len(files)} files, {total / 1e6:.1f} MB (every {stride}. man page; '
          f'{replaced} not UTF-8, compared as decoded with U+FFFD)')


if __name__ == '__main__':
    main()

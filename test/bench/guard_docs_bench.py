#!/usr/bin/env python3
"""False alarms of the injection detector on ordinary documentation: how many chunks of
the machine's own /usr/share/doc (READMEs, NEWS files and changelogs, release notes,
markdown and text manuals, as installed by Debian's packages) planrt_guard_scan flags.
None of them holds an injection, so every flag is a false alarm; this is the genre a
documentation assistant retrieves from, and the one in which imperative sentences
("Add…", "Remove…", "Document…") and words such as user, message, password and
prompt are everyday.

Files are cut into chunks of whole paragraphs packed up to about 1,200 bytes (like
planc's paragraph chunking, which the C ABI does not expose), and a file gives its first
ten chunks (a project's long changelog would otherwise be most of the corpus). A file's
half is fixed by a hash of its path: "dev" is the half that may be read while changing
the detector, "held-out" the half that is only counted. Files are drawn in a seeded
order, so two machines with the same packages get the same chunks.

  guard_docs_bench.py LIBPLANRT_RETRIEVAL_SO [--files N] [--examples N]
"""
import collections
import gzip
import hashlib
import itertools
import os
import random
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from injection_bench import load_guard_flags, option  # noqa: E402

ROOT = "/usr/share/doc"
# Documentation by file name: README, NEWS, FAQ, TODO (packages ship such files)… or a text
# or markdown file.
DOC_PREFIXES = ("readme", "news", "faq", "todo", "usage", "howto", "changelog")
DOC_SUFFIXES = (".md", ".txt", ".rst", ".md.gz", ".txt.gz")


def doc_files():
    out = []
    for root, _, names in os.walk(ROOT):
        for name in names:
            low = name.lower()
            if low.startswith(DOC_PREFIXES) or low.endswith(DOC_SUFFIXES):
                out.append(os.path.join(root, name))
    out.sort()
    random.Random(1).shuffle(out)
    return out


def genre(path):
    low = os.path.basename(path).lower()
    if re.search(r"news|change|relnotes", low) or "/RelNotes/" in path:
        return "news, changelogs, release notes"
    if "readme" in low:
        return "readme"
    if low.endswith((".md", ".md.gz")):
        return "markdown"
    return "other text"


def chunks(path, size=1200):
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", errors="replace") as f:
            text = f.read()
    except (OSError, EOFError):
        return
    cur = ""
    for para in text.split("\n\n"):
        if cur and len(cur) + len(para) > size:
            yield cur
            cur = ""
        cur += para + "\n\n"
    if cur.strip():
        yield cur


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    scan = load_guard_flags(sys.argv[1])
    files = option("--files", 1500, int)
    examples = option("--examples", 0, int)
    total = collections.Counter()
    flagged = collections.Counter()
    kinds = collections.Counter()
    shown = []
    for path in doc_files()[:files]:
        half = "dev" if hashlib.sha1(path.encode()).digest()[0] % 2 == 0 else "held-out"
        g = genre(path)
        for text in itertools.islice(chunks(path), 10):
            total[half, g] += 1
            flags = scan(text)
            if not flags:
                continue
            flagged[half, g] += 1
            kinds[half, flags[0][0]] += 1
            if half == "dev" and len(shown) < examples:
                shown.append((path, flags[0]))
    print("| half | genre | chunks | flagged | rate |")
    print("|---|---|---|---|---|")
    for half in ("dev", "held-out"):
        for g in sorted({g for h, g in total if h == half}):
            print(f"| {half} | {g} | {total[half, g]} | {flagged[half, g]} | {flagged[half, g] / total[half, g]:.3f} |")
        n = sum(v for (h, _), v in total.items() if h == half)
        f = sum(v for (h, _), v in flagged.items() if h == half)
        print(f"| **{half}** | all | {n} | {f} | **{f / n:.3f}** |")
    for half in ("dev", "held-out"):
        by = ", ".join(f"{k} {v}" for (h, k), v in kinds.most_common() if h == half)
        print(f"\n{half}, first flag's kind: {by}")
    for path, (kind, span, score) in shown:
        print(f"\n[{kind} {score:.2f}] {path}: {span[:200]!r}")


if __name__ == "__main__":
    main()

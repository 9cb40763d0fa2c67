#!/usr/bin/env python3
"""BIPIA's train split as labelled data for the guard's learned detector, in
runtime/retrieval/guard_data/'s format: OUT_DIR/injections.txt (each train attack; of a
code attack, the request before its code) and OUT_DIR/benign.txt (each line of the train
split's e-mails, tables and code answers, outside code fences). Build planc with
-DPLANRT_GUARD_EXTRA_DATA=OUT_DIR to train on it beside guard_data/; bipia_bench.py
--split test then measures what BIPIA's own train split adds (docs/BENCHMARKS.md).
BIPIA's text stays out of planc: OUT_DIR is the user's.

  bipia_guard_data.py BIPIA_ROOT OUT_DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bipia_bench import TASKS, attacks, contexts  # noqa: E402


def one_line(text):
    return " ".join(text.split())


def data_line(text):
    """A line as guard_data/ holds it: one line, never read as a "# " comment."""
    line = one_line(text)
    return line[1:].lstrip() if line.startswith("# ") else line


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(2)
    root, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    injections, benign = [], []
    for task, kind in TASKS:
        for _, attack in attacks(root, kind, "train"):
            request = attack.split("```")[0]
            if request.strip():
                injections.append(data_line(request))
        for context in contexts(root, task, "train"):
            fenced = False
            for line in context.split("\n"):
                if line.lstrip().startswith("```"):
                    fenced = not fenced
                    continue
                if not fenced and line.strip():
                    benign.append(data_line(line))
    for name, lines in (("injections.txt", injections), ("benign.txt", benign)):
        unique = list(dict.fromkeys(x for x in lines if x))
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            f.write(f"# BIPIA train split ({name[:-4]}), written by bipia_guard_data.py\n")
            f.write("\n".join(unique) + "\n")
        print(f"{name}: {len(unique)} lines")


if __name__ == "__main__":
    main()

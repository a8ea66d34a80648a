#!/usr/bin/env python3
"""Check that every ```c block of a document appears verbatim in a source file.

usage: doc-snippets.py DOC.md SOURCE.c

The tutorial quotes the example bot instead of keeping a second copy of the code; this
check fails (and names the first differing line) when the two drift apart, so every
snippet a reader copies is code that compiles and runs in CI.
"""
import re
import sys


def main() -> int:
    doc_path, src_path = sys.argv[1], sys.argv[2]
    doc = open(doc_path, encoding="utf-8").read()
    src = open(src_path, encoding="utf-8").read()
    blocks = re.findall(r"^```c\n(.*?)^```$", doc, flags=re.S | re.M)
    if not blocks:
        print(f"{doc_path}: no ```c blocks found")
        return 1
    bad = 0
    for i, block in enumerate(blocks, 1):
        if block in src:
            continue
        bad += 1
        lines = block.splitlines()
        first = next((l for l in lines if l.strip() and l not in src), lines[0] if lines else "")
        print(f"{doc_path}: C block {i} is not in {src_path}; first line not found: {first!r}")
    print(f"{doc_path}: {len(blocks) - bad} of {len(blocks)} C blocks found in {src_path}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

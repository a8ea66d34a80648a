#!/usr/bin/env python3
"""Doxygen INPUT_FILTER for libtgbot's public headers.

The headers use plain C comments (STYLE.md): a block above a declaration documents it, a
comment after a member documents that member, the first block of a file describes the
file, and "/* ---- name ---- */" lines separate sections (left alone). Doxygen only reads /** and /**<
comments, so this filter rewrites the comments the way a reader already understands them,
and turns each Bot API page address into a "see" link. It changes comments only (lines
keep their numbers), never code, and prints the result on stdout.

usage: doxyfilter.py HEADER.h
"""
import re
import sys

SECTION = re.compile(r"^\s*/\* ---- (.*?) ---- \*/\s*$")
BOTAPI = re.compile(r"(https://core\.telegram\.org/bots/api#[a-z0-9-]+)")


PLACEHOLDER = re.compile(r"<([A-Za-z_][A-Za-z0-9_]*)>")  # "<token>", "<lang>" in prose
AT_WORD = re.compile(r"(?<![\\\w])@(?=\w)")  # "@username", "@mention" in prose


def see_links(comment: str) -> str:
    """Prose for Doxygen: a Bot API address becomes an explicit \\see paragraph (kept on its
    line); <placeholders> and @names are escaped so they are not read as HTML or commands."""
    comment = PLACEHOLDER.sub(r"\\<\1\\>", comment)
    comment = AT_WORD.sub(r"\\@", comment)
    return BOTAPI.sub(r"\\see \1", comment)


def filter_text(text: str) -> str:
    out = []
    lines = text.split("\n")
    first_block = True
    in_block = False  # inside a multi-line comment we opened as a doc comment
    for line in lines:
        if in_block:
            out.append(see_links(line))
            if "*/" in line:
                in_block = False
            continue
        if SECTION.match(line):  # a section divider documents nothing: left as is
            out.append(line)
            continue
        stripped = line.lstrip()
        if stripped.startswith("/*") and not stripped.startswith(("/**", "/*!")):
            indent = line[: len(line) - len(stripped)]
            body = stripped[2:]
            banner = "do not edit" in body and "*/" in body  # a one-line "generated" banner
            opener = "/** \\file" if first_block and not indent and not banner else "/**"
            if banner:
                out.append(line)
                continue
            first_block = False
            out.append(indent + opener + see_links(body))
            in_block = "*/" not in body
            continue
        code_then_comment = re.match(r"^(\s*\S.*?)/\*(?![*!<])(.*)$", line)
        if code_then_comment and not line.lstrip().startswith("#include"):
            code, rest = code_then_comment.groups()
            out.append(code + "/**<" + see_links(rest))
            in_block = "*/" not in rest
            continue
        out.append(line)
    return "\n".join(out)


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as f:
        sys.stdout.write(filter_text(f.read()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

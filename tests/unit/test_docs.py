#!/usr/bin/env python3
"""test_docs.py: README.md stays a front door, and the docs stay a map.

Each check below is one case (the unit suite counts them):
  readme_lines    README.md is at most 220 lines;
  table_cells     no Markdown table cell of README.md or docs/ is over 300
                  characters (a paragraph belongs in prose, not a cell);
  reachable       every file under docs/ is reached from docs/README.md by
                  following relative links, page to page;
  readme_paths    every repository path README.md names exists: each
                  relative link, and each `code span` whose first part is
                  a top-level entry of the repository (`scripts/demo.sh`,
                  `examples/...`, `docs/...`);
  links           every relative link of README.md and docs/ names a file
                  that exists, and an anchor (#...) a heading of that page.
A failure names the file, the line and what is wrong.

usage: test_docs.py SOURCE_ROOT
"""
import os
import re
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "fixtures"))
from checkrun import run  # noqa: E402

MAX_README_LINES = 220
MAX_CELL = 300

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\n]+)`")


def pages(root):
    """README.md and every Markdown file under docs/, relative paths."""
    out = ["README.md"]
    for d, _, files in os.walk(os.path.join(root, "docs")):
        for f in sorted(files):
            if f.endswith(".md"):
                out.append(os.path.relpath(os.path.join(d, f), root))
    return out


def lines_outside_code(text):
    """(line number, line) of a page, skipping fenced code blocks."""
    fence = False
    for n, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if not fence:
            yield n, line


def cells(line):
    """The cells of a table row (| a | b |), `\\|` kept inside a cell."""
    s = line.strip()
    if not s.startswith("|"):
        return []
    return [c.strip() for c in re.split(r"(?<!\\)\|", s.strip("|"))]


def slug(heading):
    """GitHub's anchor of a heading."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(text):
    out = set()
    for _, line in lines_outside_code(text):
        m = re.match(r"^#{1,6} (.*)$", line)
        if m:
            out.add(slug(m.group(1)))
    return out


def links(text):
    """(line, target) of every relative link of a page."""
    for n, line in lines_outside_code(text):
        for m in LINK.finditer(line):
            t = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", t, re.I):
                continue            # https:, mailto:, ...
            yield n, t


def read(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        return f.read()


def check_readme_lines(root):
    n = read(root, "README.md").count("\n")
    if n > MAX_README_LINES:
        return [f"README.md has {n} lines (at most {MAX_README_LINES})"]
    return []


def check_table_cells(root):
    bad = []
    for p in pages(root):
        for n, line in lines_outside_code(read(root, p)):
            for c in cells(line):
                if len(c) > MAX_CELL:
                    bad.append(f"{p}:{n}: a table cell of {len(c)} "
                               f"characters (at most {MAX_CELL}): "
                               f"{c[:60]}...")
    return bad


def check_reachable(root):
    start = "docs/README.md"
    if not os.path.isfile(os.path.join(root, start)):
        return [f"{start} is missing"]
    seen, todo = {start}, [start]
    while todo:
        p = todo.pop()
        if not p.endswith(".md"):
            continue
        for _, t in links(read(root, p)):
            f = t.split("#")[0]
            if not f:
                continue
            q = os.path.normpath(os.path.join(os.path.dirname(p), f))
            if q not in seen and os.path.isfile(os.path.join(root, q)):
                seen.add(q)
                todo.append(q)
    bad = []
    for d, _, files in os.walk(os.path.join(root, "docs")):
        for f in sorted(files):
            rel = os.path.relpath(os.path.join(d, f), root)
            if rel not in seen:
                bad.append(f"{rel} is not reached from {start}")
    return bad


def check_readme_paths(root):
    text = read(root, "README.md")
    top = set(os.listdir(root)) - {".git"}
    bad = []
    for n, t in links(text):
        f = t.split("#")[0]
        if f and not os.path.exists(os.path.join(root, f)):
            bad.append(f"README.md:{n}: links {t}, which does not exist")
    for n, line in enumerate(text.split("\n"), 1):
        for m in CODE.finditer(line):
            path = m.group(1).strip().rstrip("/")
            if (" " in path or any(c in path for c in "*?[<>$")
                    or "/" not in path):
                continue
            if path.split("/")[0] not in top:
                continue
            if not os.path.exists(os.path.join(root, path)):
                bad.append(f"README.md:{n}: names `{m.group(1)}`, "
                           "which does not exist")
    return bad


def check_links(root):
    bad = []
    for p in pages(root):
        for n, t in links(read(root, p)):
            f, _, a = t.partition("#")
            q = os.path.normpath(os.path.join(os.path.dirname(p), f)) \
                if f else p
            if not os.path.exists(os.path.join(root, q)):
                bad.append(f"{p}:{n}: links {t}: no {q}")
            elif a and q.endswith(".md") and \
                    a not in anchors(read(root, q)):
                bad.append(f"{p}:{n}: links {t}: no heading #{a} in {q}")
    return bad


CHECKS = [("readme_lines", check_readme_lines),
          ("table_cells", check_table_cells),
          ("reachable", check_reachable),
          ("readme_paths", check_readme_paths),
          ("links", check_links)]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    return run(CHECKS, sys.argv[1])


if __name__ == "__main__":
    sys.exit(main())

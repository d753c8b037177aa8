#!/usr/bin/env python3
"""test_budgets.py: the size budgets of the code, held.

Each check is one case (the suite counts them); a failure names every
file or function over its budget, with its size:
  files       every hand-written C or Go file (.c, .h, .go: src/,
              include/, csi/, examples/, the C tests and fuzzers under
              tests/) is at most 700 lines;
  functions   every C function and every Go func is at most 100 lines,
              from the first line of its declaration to its closing brace;
  door        the door header of the source layer, src/lib/source/source.h,
              is near 200 lines: at most 220.
A file that says "@generated" in its first 10 lines (the Unicode table
src/lib/format/unorm_table.h, written by scripts/gen-unorm.py) is made by
a program, not by hand, and is exempt.  Python test files are not counted
here (the budget of the issue that set these, 51, is the code's).

C functions are found by the project's style: the body's `{` and `}` alone
at the start of a line, the declaration just above the `{` (from the first
line after a blank line, a `;`, a `}`, a comment's end or a preprocessor
line).  Go funcs start at `func ` at the start of a line and end at the
first `}` alone at the start of a line.

usage: test_budgets.py SOURCE_ROOT
"""
import os
import re
import subprocess
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "fixtures"))
from checkrun import run  # noqa: E402

MAX_FILE = 700
MAX_FUNC = 100
DOOR = "src/lib/source/source.h"
MAX_DOOR = 220

ROOTS = ("src", "include", "csi", "examples", "tests")
EXT = (".c", ".h", ".go")


def sources(root):
    """Tracked C and Go files under ROOTS (git ls-files, else a walk)."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "--"] +
                             list(ROOTS), capture_output=True, text=True,
                             check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        out = []
        for top in ROOTS:
            for d, _, files in os.walk(os.path.join(root, top)):
                out += [os.path.relpath(os.path.join(d, f), root)
                        for f in files]
    return sorted(p for p in out if p.endswith(EXT) and
                  os.path.isfile(os.path.join(root, p)))


def generated(lines):
    return any("@generated" in l for l in lines[:10])


def c_functions(lines):
    """(name, first line, lines) of each function definition of a C file."""
    out = []
    i = 0
    while i < len(lines):
        if lines[i].rstrip() != "{":
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].startswith("}"):
            j += 1
        # the declaration: back to a blank line, ';', '}', '*/' or '#'
        s = i
        while s > 0:
            prev = lines[s - 1].rstrip()
            if (not prev or prev.endswith((";", "}", "*/")) or
                    prev.startswith(("#", "}", "/*", " *"))):
                break
            s -= 1
        decl = " ".join(l.strip() for l in lines[s:i])
        m = re.match(r"START_TEST\s*\((\w+)\)", decl) or \
            re.search(r"([A-Za-z_]\w*)\s*\(", decl)
        if m and "=" not in decl.split("(")[0]:
            out.append((m.group(1), s + 1, j - s + 1))
        i = j + 1
    return out


def go_functions(lines):
    out = []
    i = 0
    while i < len(lines):
        m = re.match(r"^func\s+(?:\([^)]*\)\s*)?([A-Za-z_]\w*)", lines[i])
        if not m or lines[i].rstrip().endswith("}"):
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].startswith("}"):
            j += 1
        out.append((m.group(1), i + 1, j - i + 1))
        i = j + 1
    return out


def load(root, p):
    with open(os.path.join(root, p), encoding="utf-8",
              errors="replace") as f:
        return f.read().split("\n")[:-1] or [""]


def check_files(root):
    bad = []
    for p in sources(root):
        lines = load(root, p)
        if not generated(lines) and len(lines) > MAX_FILE:
            bad.append(f"{p}: {len(lines)} lines (at most {MAX_FILE})")
    return bad


def check_functions(root):
    bad = []
    for p in sources(root):
        lines = load(root, p)
        if generated(lines):
            continue
        fns = go_functions(lines) if p.endswith(".go") else \
            c_functions(lines)
        for name, at, n in fns:
            if n > MAX_FUNC:
                bad.append(f"{p}:{at}: {name}: {n} lines "
                           f"(at most {MAX_FUNC})")
    return bad


def check_door(root):
    n = len(load(root, DOOR))
    if n > MAX_DOOR:
        return [f"{DOOR}: {n} lines (near 200: at most {MAX_DOOR})"]
    return []


CHECKS = [("files", check_files), ("functions", check_functions),
          ("door", check_door)]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    return run(CHECKS, sys.argv[1], most=10**9, why=": over budget")


if __name__ == "__main__":
    sys.exit(main())

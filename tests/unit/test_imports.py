#!/usr/bin/env python3
"""test_imports.py: tests/ stays in folders by job, and a test file imports
no test file.

Each check below is one case (the unit suite counts them):
  no_test_imports  no Python file under tests/ (a test, a fixture, a
                   server, a benchmark, a seed writer) imports a test file
                   (test_*.py): what tests share is in tests/fixtures/ and
                   tests/servers/;
  shared_modules   a module of the tests' own that a test file imports is
                   in tests/fixtures/ or tests/servers/ (not beside the
                   test, where the other folders' tests do not look);
  by_job           no test, fixture or source file lies at the top of
                   tests/, and each folder of tests/ has a README.md;
  registered       every test file (test_*.py) and Check file (check_*.c)
                   is named in its folder's meson.build, each test file in
                   a test() whose suites hold the folder's name (or a suite
                   of its own the folder allows: budgets in unit/, cluster
                   in csi/).
A failure names the file and what is wrong.

usage: test_imports.py SOURCE_ROOT
"""
import ast
import os
import re
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "fixtures"))
from checkrun import run  # noqa: E402

SHARED = ("fixtures", "servers")
# suites a folder's tests may have instead of the folder's own: those left
# out of the default run (tests/meson.build's add_test_setup)
OWN_SUITES = {"unit": {"budgets"}, "csi": {"cluster"}}
SKIP_DIRS = {".venv", "node_modules", "__pycache__", "data", "regressions"}
NO_README = {".venv", "node_modules", "__pycache__"}


def py_files(tests):
    """Every Python file under tests/ (no venv, no corpus), relative."""
    out = []
    for d, dirs, files in os.walk(tests):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and
                         not x.startswith("."))
        for f in sorted(files):
            if f.endswith(".py"):
                out.append(os.path.relpath(os.path.join(d, f), tests))
    return out


def imported(path):
    """(line, top-level module name) of each import in the file."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and \
                not node.level:
            out.append((node.lineno, node.module.split(".")[0]))
    return out


def is_test(rel):
    return os.path.basename(rel).startswith("test_")


def check_no_test_imports(tests):
    files = py_files(tests)
    test_mods = {os.path.basename(r)[:-3] for r in files if is_test(r)}
    bad = []
    for rel in files:
        for n, mod in imported(os.path.join(tests, rel)):
            if mod in test_mods:
                bad.append(f"tests/{rel}:{n}: imports {mod}, a test file")
    return bad


def check_shared_modules(tests):
    files = py_files(tests)
    where = {}
    for r in files:
        where.setdefault(os.path.basename(r)[:-3], []).append(r)
    bad = []
    for rel in files:
        if not is_test(rel):
            continue
        for n, mod in imported(os.path.join(tests, rel)):
            homes = where.get(mod, [])
            if homes and not any(h.split(os.sep)[0] in SHARED and
                                 h.count(os.sep) == 1 for h in homes):
                bad.append(f"tests/{rel}:{n}: imports {mod} from "
                           f"tests/{homes[0]}, not from tests/fixtures/ "
                           "or tests/servers/")
    return bad


def check_by_job(tests):
    bad = []
    for e in sorted(os.listdir(tests)):
        p = os.path.join(tests, e)
        if os.path.isdir(p):
            if e not in NO_README and not e.startswith(".") and \
                    not os.path.isfile(os.path.join(p, "README.md")):
                bad.append(f"tests/{e}/ has no README.md")
        elif e != "meson.build" and e != "README.md":
            bad.append(f"tests/{e} is at the top of tests/: move it to "
                       "the folder of its job")
    return bad


def test_calls(text):
    """Each test(...) call of a meson.build: its text, by parentheses."""
    out = []
    for m in re.finditer(r"^test\(", text, re.M):
        depth, i, quote = 0, m.start() + 4, False
        while i < len(text):
            c = text[i]
            if c == "'":
                quote = not quote
            elif not quote and c == "(":
                depth += 1
            elif not quote and c == ")":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        out.append(text[m.start():i + 1])
    return out


def check_registered(tests):
    bad = []
    for folder in sorted(os.listdir(tests)):
        d = os.path.join(tests, folder)
        if not os.path.isdir(d) or folder in SKIP_DIRS:
            continue
        mine = sorted(f for f in os.listdir(d)
                      if re.match(r"(test_.*\.py|check_.*\.c)$", f))
        if not mine:
            continue
        try:
            with open(os.path.join(d, "meson.build")) as f:
                text = f.read()
        except FileNotFoundError:
            bad.append(f"tests/{folder}/ has test files but no meson.build")
            continue
        named = set(re.findall(r"'([^']+\.(?:py|c))'", text))
        suites_of = {}
        for call in test_calls(text):
            m = re.search(r"\bsuite:\s*(\[[^\]]*\]|'[^']*')", call)
            suites = set(re.findall(r"'([^']*)'", m.group(1))) if m else set()
            for f in re.findall(r"files\('([^']+\.py)'", call):
                suites_of[f] = suites
        allowed = {folder} | OWN_SUITES.get(folder, set())
        for f in mine:
            if f not in named:
                bad.append(f"tests/{folder}/{f} is not in "
                           f"tests/{folder}/meson.build")
            elif f.endswith(".py") and not suites_of.get(f, set()) & allowed:
                bad.append(f"tests/{folder}/{f}: its suites "
                           f"{sorted(suites_of.get(f, set()))} hold none "
                           f"of {sorted(allowed)}")
    return bad


CHECKS = [("no_test_imports", check_no_test_imports),
          ("shared_modules", check_shared_modules),
          ("by_job", check_by_job),
          ("registered", check_registered)]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    return run(CHECKS, os.path.join(sys.argv[1], "tests"))


if __name__ == "__main__":
    sys.exit(main())

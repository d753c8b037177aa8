#!/usr/bin/env python3
"""test_globals.py: libstfs keeps no mutable state at file scope.

The remote layer is one object per model (docs/design.md): every piece of
state of src/lib/source lives in an object its owner frees, so two models
in one process can be configured apart.  This test proves it on the
compiled objects: `nm` lists every symbol each object of the static
archives defines, with its section, and a writable one (.data, .bss,
.tdata, .tbss, .data.rel, ...: nm's classes b, B, d, D) fails.  Constants
that hold pointers (an ops table, a table of strings) live in
.data.rel.ro, which the loader makes read-only after relocation: they
pass.  src/lib/source has no exception at all; the other layers' few
(listed below with their reason) are known and counted, so a new one
fails too.

usage: test_globals.py libstfs_source.a [libstfs.a ...]
"""
import subprocess
import sys

# Writable symbols of the other layers, known and kept: name -> why.
KNOWN = {
    # content.c: a small free list of read states, shared by every
    # content of the process (a cache of allocations, not configuration)
    "pool": "content.c read-state free list",
    "pool_mu": "content.c read-state free list",
    "pool_n": "content.c read-state free list",
    # convert.c: float32 tables of the 8- and 16-bit formats, built once
    # (pthread_once) and read-only after
    "e4m3": "convert.c table", "e4m3fnuz": "convert.c table",
    "e5m2fnuz": "convert.c table", "e8m0": "convert.c table",
    "half": "convert.c table", "tables_once": "convert.c table",
}

READ_ONLY = (".data.rel.ro", ".rodata")


def writable(archive):
    """(member, name, class, section) of each writable symbol defined."""
    out = subprocess.run(["nm", "--defined-only", "-f", "sysv", archive],
                         check=True, capture_output=True, text=True).stdout
    member, found = "?", []
    for line in out.splitlines():
        if line.startswith("Symbols from "):
            member = line.split("[")[-1].rstrip("]:")
            continue
        f = [x.strip() for x in line.split("|")]
        if len(f) < 7 or f[2] not in ("b", "B", "d", "D"):
            continue
        if not f[6].startswith(READ_ONLY):
            found.append((member, f[0], f[2], f[6]))
    return found


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    passed = failed = 0
    for archive in sys.argv[1:]:
        strict = "source" in archive.rsplit("/", 1)[-1]
        bad = [w for w in writable(archive)
               if strict or w[1] not in KNOWN]
        for member, name, cls, section in bad:
            print(f"FAIL {archive}: {member} defines {name} ({cls}, "
                  f"{section}): writable state at file scope")
        if bad:
            failed += 1
        else:
            print(f"ok {archive}: no writable file-scope symbol"
                  + ("" if strict else " beyond the known ones"))
            passed += 1
    # the check itself must see what it looks for: a known one is there
    known = [w for a in sys.argv[1:] for w in writable(a) if w[1] in KNOWN]
    if any("source" not in a.rsplit("/", 1)[-1] for a in sys.argv[1:]):
        if known:
            print(f"ok the check sees writable symbols ({len(known)} known)")
            passed += 1
        else:
            print("FAIL nm showed no known writable symbol: the check "
                  "is blind")
            failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""test_layers.py: the rooms of src/lib/source call each other one way only.

docs/design.md draws the rooms of the source layer and which may use
which (ALLOWED below is that drawing).  This test proves it on what the
compiler made and on the sources:

  * symbols: `nm` lists what each object of the source layer's static
    archives defines and what it leaves undefined; an object is put in
    its room by its source file's path (src/lib/source/ROOM/x.c is room
    ROOM, src/lib/source/x.c is room x).  Every symbol one room takes
    from another must be an edge ALLOWED has (and, where HELPERS names
    the symbols of an edge, one of those);
  * cycles: the rooms' graph, as the objects make it, has no cycle (one
    is printed, room by room, with a symbol of each step);
  * includes: every #include "..." of a room's .c and .h files names a
    header of the room itself or of a room it may use.

It must see what it checks: the rooms it finds are those of ALLOWED, and
the engine's fetch interface and the service table are where they are
said to be, so that an archive list gone wrong fails instead of passing.

usage: test_layers.py SRCDIR libstfs_source*.a...
"""
import os
import re
import subprocess
import sys

# room -> the rooms it may use (docs/design.md, "The rooms of the source
# layer").  Bottom first.
ALLOWED = {
    "source": set(),                    # the door: source.c
    "metrics": set(),                   # the owner's counters (metrics.h)
    "scheme": set(),                    # URLs and schemes
    "rlist": {"source"},                # a repository's list of files
    "local": {"source"},                # a local file
    "blocks": {"source", "metrics"},    # the block engine and the cache
    "http": {"blocks", "scheme", "source", "metrics"},
    "s3": {"http", "blocks", "locate", "rlist", "scheme", "source",
           "metrics"},
    "hub": {"http", "blocks", "locate", "rlist", "scheme", "source"},
    "locate": {"http", "blocks", "local", "rlist", "scheme", "source"},
    "repo": {"locate", "http", "blocks", "local", "rlist", "scheme",
             "source"},
    "remote": {"http", "blocks", "s3", "source", "metrics"},
    "services": {"locate", "http", "hub", "s3", "mirror", "source"},
    # -o mirror=: the manifest, the mirror's tier in front of the origin
    "mirror": {"locate", "s3", "http", "blocks", "rlist", "scheme",
               "source"},
    # `stfs mirror`: it locates as a mount does, and copies
    "mcopy": {"services", "remote", "repo", "locate", "mirror", "http",
              "blocks", "rlist", "scheme", "source"},
}

# Edges allowed only through some symbols: a service calls the locator's
# helpers, never the locator itself.
HELPERS = {
    ("hub", "locate"): {"stfs_location_pick_one"},
    ("s3", "locate"): {"stfs_location_pick_one"},
}

# The headers outside the rooms' own directories, and the room each is
# the header of.  engine.h holds no code (its functions are inline): it
# is the engine's object, at the engine's level.
HEADER_ROOM = {
    "source.h": "source",
    "sourceops.h": "source",
    "scheme.h": "scheme",
    "rlist.h": "rlist",
    "cache.h": "blocks",
    "engine.h": "blocks",
    "auth.h": "http",
    "locate.h": "locate",
    "metrics.h": "metrics",
}
# Headers below src/lib/source: the format layer, the public header.
BELOW = {"format.h", "stfs/stfs.h", "stfs/remote.h", "stfs/metrics.h",
         "stfs/mirror.h"}


def room_of(rel):
    """The room of a path relative to src/lib/source."""
    parts = rel.split("/")
    if len(parts) > 1:
        return parts[0]
    return HEADER_ROOM.get(rel) or os.path.splitext(rel)[0]


def sources(srcdir):
    """Every .c and .h under srcdir, relative."""
    out = []
    for d, _, files in os.walk(srcdir):
        for f in files:
            if f.endswith((".c", ".h")):
                out.append(os.path.relpath(os.path.join(d, f), srcdir))
    return sorted(out)


def member_rooms(srcdir):
    """The object name meson gives each .c file -> its room."""
    m = {}
    for rel in sources(srcdir):
        if rel.endswith(".c"):
            m["source_" + rel.replace("/", "_") + ".o"] = room_of(rel)
    return m


def nm(args, archive):
    """(member, symbol) of nm's listing of archive with args."""
    out = subprocess.run(["nm", "-A", "-g"] + args + [archive], check=True,
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        # "ARCHIVE:MEMBER:VALUE TYPE NAME" (no VALUE when undefined)
        if archive + ":" not in line:
            continue
        member, rest = line[len(archive) + 1:].split(":", 1)
        yield os.path.basename(member), rest.split()[-1]


def symbol_edges(srcdir, archives):
    """{(from room, to room): {symbol: member}} of the objects."""
    rooms = member_rooms(srcdir)
    defs, uses = {}, []
    for a in archives:
        for member, sym in nm(["--defined-only"], a):
            if member not in rooms:
                sys.exit(f"FAIL {a}: {member} is no .c file of {srcdir}")
            defs[sym] = rooms[member]
        for member, sym in nm(["--undefined-only"], a):
            uses.append((rooms.get(member), member, sym))
    edges = {}
    for room, member, sym in uses:
        to = defs.get(sym)
        if room and to and to != room:
            edges.setdefault((room, to), {})[sym] = member
    return edges, set(rooms.values())


def find_cycle(edges):
    """A cycle of the graph of edges, as a list of rooms, or None."""
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    state, path = {}, []

    def visit(n):
        state[n] = 1
        path.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return path[path.index(m):] + [m]
            if not state.get(m):
                c = visit(m)
                if c:
                    return c
        path.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if not state.get(n):
            c = visit(n)
            if c:
                return c
    return None


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def include_faults(srcdir):
    """What each file includes that its room may not."""
    bad = []
    for rel in sources(srcdir):
        room = room_of(rel)
        with open(os.path.join(srcdir, rel)) as f:
            text = f.read()
        for inc in INCLUDE.findall(text):
            if inc in BELOW:
                continue
            here = os.path.join(os.path.dirname(rel), inc)
            if os.path.exists(os.path.join(srcdir, here)):
                target = os.path.normpath(here)
            elif os.path.exists(os.path.join(srcdir, inc)):
                target = inc
            else:
                bad.append(f"{rel}: includes \"{inc}\", found nowhere "
                           "in src/lib/source")
                continue
            to = room_of(target)
            if to != room and to not in ALLOWED.get(room, ()):
                bad.append(f"{rel} (room {room}) includes {target} "
                           f"(room {to})")
    return bad


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    srcdir, archives = sys.argv[1], sys.argv[2:]
    failed = 0

    def check(ok, good, why):
        nonlocal failed
        if ok:
            print("ok", good)
        else:
            print("FAIL", why)
            failed += 1

    # the drawing itself has no cycle
    c = find_cycle({(a, b) for a, bs in ALLOWED.items() for b in bs})
    check(not c, "the allowed rooms' graph has no cycle",
          "ALLOWED has a cycle: " + " -> ".join(c or []))

    edges, rooms = symbol_edges(srcdir, archives)
    check(rooms == set(ALLOWED), f"the objects are the rooms of ALLOWED "
          f"({len(rooms)})", f"rooms {sorted(rooms)} are not ALLOWED's "
          f"{sorted(ALLOWED)}")
    # the check sees what it looks for: the engine's one way to http/
    # (remote.c fills it in from http/) and the services' table
    check(("remote", "http") in edges and ("http", "blocks") in edges and
          ("services", "hub") in edges and ("services", "locate") in edges,
          "the objects show remote -> http, http -> blocks, services -> "
          "hub, services -> locate", "nm showed none of the rooms' known "
          "edges: the archives are not libstfs_source's")

    for (a, b), syms in sorted(edges.items()):
        if b not in ALLOWED.get(a, ()):
            for sym, member in sorted(syms.items()):
                print(f"FAIL {member} (room {a}) uses {sym} of room {b}:"
                      f" {a} may not use {b}")
            failed += 1
            continue
        only = HELPERS.get((a, b))
        extra = sorted(s for s in syms if only is not None and
                       s not in only)
        for sym in extra:
            print(f"FAIL {syms[sym]} (room {a}) uses {sym} of room {b}: "
                  f"only {', '.join(sorted(only))} of it")
        failed += bool(extra)
    print(f"ok {len(edges)} edges between rooms checked")

    c = find_cycle(edges)
    if c:
        steps = [f"{a} -> {b} ({sorted(edges[(a, b)])[0]})"
                 for a, b in zip(c, c[1:])]
        print("FAIL a cycle of rooms: " + ", ".join(steps))
        failed += 1
    else:
        print("ok the rooms' graph has no cycle")

    bad = include_faults(srcdir)
    for b in bad:
        print("FAIL", b)
    failed += bool(bad)
    if not bad:
        print("ok every #include names a header of its room or below")

    print(f"{'FAIL' if failed else 'ok'}: {failed} failure(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""gen-unorm.py: write src/lib/format/unorm_table.h, the Unicode facts
src/lib/format/unorm.c needs to put a name in its canonical decomposition
(NFD): each code point's full canonical decomposition (Hangul syllables
excepted: unorm.c decomposes them by the algorithm of Unicode's chapter
3.12) and the canonical combining class of every code point that has
one.  The facts are those of this Python's unicodedata module (its
Unicode version is written into the table); run it again, and commit the
table, to move to a newer Unicode.

    python3 scripts/gen-unorm.py > src/lib/format/unorm_table.h
"""
import sys
import unicodedata as ud

HANGUL = range(0xAC00, 0xD7A4)


def full(cp):
    """cp's full canonical decomposition, as a list of code points."""
    d = ud.decomposition(chr(cp))
    if not d or d.startswith("<"):
        return [cp]
    out = []
    for x in d.split():
        out += full(int(x, 16))
    return out


def main():
    decomp, ccc = [], []
    for cp in range(0x110000):
        if cp in HANGUL or 0xD800 <= cp <= 0xDFFF:
            continue
        f = full(cp)
        if f != [cp]:
            decomp.append((cp, f))
        c = ud.combining(chr(cp))
        if c:
            if ccc and ccc[-1][1] == cp - 1 and ccc[-1][2] == c:
                ccc[-1][1] = cp
            else:
                ccc.append([cp, cp, c])
    w = sys.stdout.write
    w("/*\n * unorm_table.h: Unicode %s's canonical decompositions and "
      "combining\n * classes, for unorm.c.  Written by "
      "scripts/gen-unorm.py: do not edit.\n */\n" % ud.unidata_version)
    w("#define STFS_UNORM_VERSION \"%s\"\n\n" % ud.unidata_version)
    w("/* code point, where its decomposition starts in decomp_cps, its "
      "length */\n")
    w("static const struct { uint32_t cp; uint16_t at; uint8_t n; } "
      "decomp[%d] = {\n" % len(decomp))
    pool, at = [], 0
    for cp, f in decomp:
        w("\t{ 0x%04x, %d, %d },\n" % (cp, at, len(f)))
        pool += f
        at += len(f)
    w("};\n\nstatic const uint32_t decomp_cps[%d] = {\n" % len(pool))
    for i in range(0, len(pool), 8):
        w("\t" + " ".join("0x%04x," % x for x in pool[i:i + 8]) + "\n")
    w("};\n\n/* the ranges of code points with a canonical combining class "
      "(not 0) */\n")
    w("static const struct { uint32_t lo, hi; uint8_t ccc; } "
      "combining[%d] = {\n" % len(ccc))
    for lo, hi, c in ccc:
        w("\t{ 0x%04x, 0x%04x, %d },\n" % (lo, hi, c))
    w("};\n")


if __name__ == "__main__":
    main()

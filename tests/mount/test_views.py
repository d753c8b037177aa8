#!/usr/bin/env python3
"""test_views.py: the .npy and .f32 views, read through the kernel.

Every valid file of the real-world corpus is mounted with -o npy,convert=f32:
the raw tensor files and their xattrs are unchanged; numpy.load() of every
.npy view, plainly and with mmap_mode='r', equals the tensor; every .f32
view equals an independent Python decoding of the source format, bit for
bit (NaN for NaN); reads at any offset and size agree; the views' xattrs
tell their own dtype.  Then: a file holding every dtype and every bit
pattern of the 8- and 16-bit float formats, flat-mode names that would
collide, a truncated source, and the examples of docs/reading.md.
Needs Debian's python3-numpy.
"""
import hashlib
import json
import math
import os
import random
import struct
import subprocess
import sys

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402

import numpy as np  # noqa: E402

EXPECTED = os.path.join(T.REAL, "expected.json")
NPY = {"BOOL": "|b1", "U8": "|u1", "I8": "|i1", "U16": "<u2", "I16": "<i2",
       "F16": "<f2", "U32": "<u4", "I32": "<i4", "F32": "<f4", "U64": "<u8",
       "I64": "<i8", "F64": "<f8", "C64": "<c8"}
CONVERT = ("BF16", "F16", "F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ",
           "F8_E5M2FNUZ", "F8_E8M0")


def inspect(src, *extra):
    r = subprocess.run([T.STFS, "inspect", "--json"] + list(extra) + [src],
                       capture_output=True)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return json.loads(r.stdout)


# ---- an independent reference decoder (Python floats, then float32) ------

def small_float(v, ebits, mbits, bias):
    sign = -1.0 if v >> (ebits + mbits) & 1 else 1.0
    e = (v >> mbits) & ((1 << ebits) - 1)
    m = v & ((1 << mbits) - 1)
    if e == 0:
        return sign * m / (1 << mbits) * 2.0 ** (1 - bias)
    return sign * (1 + m / (1 << mbits)) * 2.0 ** (e - bias)


def decode(dtype, raw):
    """float32 values of raw bytes of dtype, as a numpy array."""
    if dtype == "BF16":
        u = np.frombuffer(raw, "<u2").astype("<u4") << 16
        return u.view("<f4")
    if dtype == "F16":
        return np.frombuffer(raw, "<f2").astype("<f4")
    out = []
    for v in raw:
        if dtype == "F8_E5M2":
            e, m = (v >> 2) & 31, v & 3
            x = (math.copysign(math.inf, -(v >> 7)) if m == 0 else
                 math.nan) if e == 31 else small_float(v, 5, 2, 15)
            if e == 31 and m == 0:
                x = -math.inf if v & 0x80 else math.inf
        elif dtype == "F8_E4M3":
            x = math.nan if v & 0x7f == 0x7f else small_float(v, 4, 3, 7)
        elif dtype == "F8_E4M3FNUZ":
            x = math.nan if v == 0x80 else small_float(v, 4, 3, 8)
        elif dtype == "F8_E5M2FNUZ":
            x = math.nan if v == 0x80 else small_float(v, 5, 2, 16)
        elif dtype == "F8_E8M0":
            x = math.nan if v == 0xff else 2.0 ** (v - 127)
        out.append(x)
    return np.array(out, dtype="<f8").astype("<f4")


def same_f32(got, want):
    """Bitwise equal, except that any NaN matches any NaN."""
    g = np.asarray(got, "<f4").ravel()
    w = np.asarray(want, "<f4").ravel()
    if g.shape != w.shape:
        return False
    gn, wn = np.isnan(g), np.isnan(w)
    return bool((gn == wn).all() and
                (g.view("<u4")[~gn] == w.view("<u4")[~wn]).all())


# ---- checks on one mounted tensor -----------------------------------------

def check_views(mnt, t, raw, sha=None):
    """t: an inspect --json --npy --convert=f32 tensor entry."""
    dtype, shape = t["dtype"], tuple(t["shape"])
    rawp = os.path.join(mnt, t["path"])
    with open(rawp, "rb") as f:
        assert f.read() == raw
    x = {k: os.getxattr(rawp, k) for k in os.listxattr(rawp)}
    assert x["user.safetensors.dtype"] == dtype.encode()
    assert "user.safetensors.view" not in x
    views = {v["view"]: v for v in t["views"]}
    want_views = set()
    if dtype in NPY:
        want_views.add("npy")
    if dtype in CONVERT:
        want_views |= {"f32", "f32.npy"}
    assert set(views) == want_views, (t["name"], views.keys())
    siblings = set(os.listdir(os.path.dirname(rawp)))
    for v in views.values():
        p = os.path.join(mnt, v["path"])
        assert os.path.basename(p) in siblings
        assert os.stat(p).st_size == v["bytes"]
        x = {k: os.getxattr(p, k) for k in os.listxattr(p)}
        assert x["user.safetensors.view"] == v["view"].encode()
        assert x["user.safetensors.source_dtype"] == dtype.encode()
        assert x["user.safetensors.dtype"] == v["dtype"].encode()
        assert x["user.safetensors.shape"] == json.dumps(
            list(shape), separators=(",", ":")).encode()
        assert x["user.safetensors.data_start"] == \
            str(v["data_start"]).encode()
        assert "user.safetensors.data_offsets" not in x
    if "npy" in views:
        p = os.path.join(mnt, views["npy"]["path"])
        want = np.frombuffer(raw, NPY[dtype]).reshape(shape)
        for a in (np.load(p), np.load(p, mmap_mode="r")):
            assert a.dtype == want.dtype and a.shape == shape
            assert a.tobytes() == want.tobytes(), t["name"]
        assert views["npy"]["data_start"] % 64 == 0
    if "f32" in views:
        want = decode(dtype, raw)
        with open(os.path.join(mnt, views["f32"]["path"]), "rb") as f:
            got = np.frombuffer(f.read(), "<f4")
        assert same_f32(got, want), t["name"]
        p = os.path.join(mnt, views["f32.npy"]["path"])
        for a in (np.load(p), np.load(p, mmap_mode="r")):
            assert a.dtype == np.float32 and a.shape == shape
            assert same_f32(a, want), t["name"]


def test_real_corpus(mnt):
    with open(EXPECTED) as f:
        c = json.load(f)
    files = npys = f32s = 0
    for rel, info in sorted(c["files"].items()):
        if not info["valid"]:
            continue
        src = os.path.join(T.REAL, rel)
        tensors = inspect(src, "--npy", "--convert=f32")["tensors"]
        sha = {t["name"]: t["sha256"] for t in info["tensors"]}
        p = T.mount_fg(src, mnt, "-o", "npy,convert=f32")
        try:
            with open(src, "rb") as f:
                data = f.read()
            n = struct.unpack("<Q", data[:8])[0]
            for t in tensors:
                b, e = t["data_offsets"]
                raw = data[8 + n + b:8 + n + e]
                assert hashlib.sha256(raw).hexdigest() == sha[t["name"]]
                try:
                    check_views(mnt, t, raw)
                except Exception as ex:
                    raise AssertionError("%s: %s: %s" % (rel, t["name"],
                                                         ex)) from ex
                npys += t["dtype"] in NPY
                f32s += t["dtype"] in CONVERT
        finally:
            T.stop_fg(p, mnt)
        files += 1
    print("   %d files, %d .npy views, %d .f32 views checked" %
          (files, npys, f32s))
    assert files >= 60 and npys > 2000 and f32s > 60


def all_dtypes_file(path):
    """One tensor per dtype; the float formats hold every bit pattern."""
    rng = random.Random(7)
    tensors = []
    for dt in ("BOOL", "U8", "I8", "U16", "I16", "U32", "I32", "F32",
               "U64", "I64", "F64", "C64"):
        size = T.BITS[dt] // 8
        if dt == "BOOL":
            data = bytes(rng.choice((0, 1)) for _ in range(24))
        else:
            data = bytes(rng.randrange(256) for _ in range(24 * size))
        tensors.append(("all." + dt, dt, [2, 3, 4], data))
    tensors.append(("bits.F16", "F16", [256, 256],
                    b"".join(struct.pack("<H", v) for v in range(65536))))
    tensors.append(("bits.BF16", "BF16", [65536],
                    b"".join(struct.pack("<H", v) for v in range(65536))))
    for dt in ("F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ",
               "F8_E8M0"):
        tensors.append(("bits." + dt, dt, [16, 16], bytes(range(256))))
    tensors.append(("scalar.F16", "F16", [], struct.pack("<H", 0x3c00)))
    tensors.append(("empty.BF16", "BF16", [0, 5], b""))
    tensors.append(("packed.F4", "F4", [4], b"\x12\x34"))
    return T.write_st(path, tensors)


def test_every_dtype_and_bit_pattern(d, mnt):
    src = all_dtypes_file(os.path.join(d, "all.safetensors"))
    tensors = inspect(src, "--npy", "--convert=f32")["tensors"]
    with open(src, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    p = T.mount_fg(src, mnt, "-o", "npy,convert=f32")
    try:
        for t in tensors:
            b, e = t["data_offsets"]
            check_views(mnt, t, data[8 + n + b:8 + n + e])
        assert sorted(os.listdir(os.path.join(mnt, "packed"))) == ["F4"]
        # every F16 pattern against numpy's own conversion
        a = np.load(os.path.join(mnt, "bits/F16.f32.npy"))
        want = np.arange(65536, dtype="<u2").view("<f2").astype("<f4")
        assert same_f32(a.ravel(), want)
        # reads at any offset and size agree with the whole file
        rng = random.Random(3)
        for path in ("bits/F16.f32", "bits/BF16.f32.npy", "bits/F16.npy",
                     "bits/F8_E4M3.f32", "bits/F8_E8M0.f32.npy",
                     "all/C64.npy", "scalar/F16.f32.npy"):
            fp = os.path.join(mnt, path)
            with open(fp, "rb") as f:
                whole = f.read()
            fd = os.open(fp, os.O_RDONLY)
            try:
                for _ in range(300):
                    off = rng.randrange(len(whole) + 8)
                    size = rng.choice((1, 2, 3, 5, 63, 64, 65, 4095,
                                       rng.randrange(1, 300000)))
                    assert os.pread(fd, size, off) == \
                        whole[off:off + size], (path, off, size)
            finally:
                os.close(fd)
        assert os.stat(os.path.join(mnt, "empty/BF16.f32")).st_size == 0
        assert np.load(os.path.join(mnt, "empty/BF16.f32.npy")).shape == \
            (0, 5)
        assert float(np.load(os.path.join(mnt, "scalar/F16.npy"))) == 1.0
    finally:
        T.stop_fg(p, mnt)
    # without the options there are no views
    p = T.mount_fg(src, mnt)
    try:
        assert sorted(os.listdir(os.path.join(mnt, "bits"))) == sorted(
            ["F16", "BF16", "F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ",
             "F8_E5M2FNUZ", "F8_E8M0"])
    finally:
        T.stop_fg(p, mnt)


def test_names_and_options(d, mnt):
    src = T.write_st(os.path.join(d, "n.safetensors"), [
        ("w", "F32", [1], b"\0\0\x80\x3f"),
        ("w.npy", "F32", [1], b"\0\0\0\x40"),
        ("a.b", "F16", [1], b"\0\x3c"),
        ("a.b.c", "F16", [1], b"\0\x40"),
        ("x" * 300, "BF16", [1], b"\x80\x3f"),
    ])
    p = T.mount_fg(src, mnt, "-o", "flat,npy,convert=f32")
    try:
        names = os.listdir(mnt)
        assert "w.npy" in names and "w%v1.npy" in names, names
        # "w.npy" is the tensor itself: its raw bytes, no NPY header
        with open(os.path.join(mnt, "w.npy"), "rb") as f:
            assert f.read() == b"\0\0\0\x40"
        assert np.load(os.path.join(mnt, "w%v1.npy"))[0] == 1.0
        assert np.load(os.path.join(mnt, "w.npy.npy"))[0] == 2.0
        assert all(len(n.encode()) <= 255 for n in names)
        longs = [n for n in names if n.startswith("xxxx")]
        assert len(longs) == 3 and len(set(longs)) == 3
        info = inspect(src, "--flat", "--npy", "--convert=f32")
        paths = [t["path"] for t in info["tensors"]] + \
            [v["path"] for t in info["tensors"] for v in t["views"]]
        assert sorted(paths + ["%header.json"]) == sorted(names)
    finally:
        T.stop_fg(p, mnt)
    p = T.mount_fg(src, mnt, "-o", "npy,convert=f32")
    try:
        assert sorted(os.listdir(os.path.join(mnt, "a", "b"))) == \
            ["%self", "%self.f32", "%self.f32.npy", "%self.npy", "c",
             "c.f32", "c.f32.npy", "c.npy"]
        assert np.load(os.path.join(mnt, "a/b/c.f32.npy"))[0] == 2.0
    finally:
        T.stop_fg(p, mnt)
    for bad in ("convert=f64", "convert=", "npy=1"):
        r = subprocess.run([T.STFS, "mount", "-o", bad, src, mnt],
                           capture_output=True, timeout=30)
        assert r.returncode == 2, (bad, r)
        assert not T.is_mount(mnt)


def test_truncated_views(d, mnt):
    src = T.write_st(os.path.join(d, "t.safetensors"), [
        ("a", "BF16", [1024], os.urandom(2048)),
        ("b", "BF16", [65536], os.urandom(131072)),
    ])
    p = T.mount_fg(src, mnt, "-o", "npy,convert=f32")
    try:
        with open(src, "r+b") as f:
            f.truncate(os.path.getsize(src) - 100000)
        for path in ("b.f32", "b.f32.npy"):
            fd = os.open(os.path.join(mnt, path), os.O_RDONLY)
            try:
                os.pread(fd, 65536, 200000)
                raise AssertionError("read past the truncation worked")
            except OSError as e:
                assert e.errno == 5, e      # EIO
            finally:
                os.close(fd)
        assert np.load(os.path.join(mnt, "a.f32.npy")).shape == (1024,)
        assert p.poll() is None
    finally:
        T.stop_fg(p, mnt)


def test_reading_doc_examples(d, mnt):
    """Run every ```sh block of docs/reading.md against the sample."""
    root = os.path.join(TESTS_DIR, "..")
    doc = os.path.join(root, "docs", "reading.md")
    with open(doc) as f:
        text = f.read()
    blocks = []
    for part in text.split("```sh\n")[1:]:
        blocks.append(part.split("```", 1)[0])
    assert len(blocks) >= 5, "docs/reading.md has %d sh blocks" % len(blocks)
    sample = os.path.join(root, "examples", "tiny-llama.safetensors")
    p = T.mount_fg(sample, mnt, "-o", "npy,convert=f32")
    try:
        env = dict(os.environ, M=mnt, PATH="/usr/bin:/bin:" +
                   os.environ.get("PATH", ""))
        for b in blocks:
            r = subprocess.run(["bash", "-euo", "pipefail", "-c", b],
                               capture_output=True, text=True, env=env,
                               timeout=120)
            assert r.returncode == 0, "block failed:\n%s\n%s%s" % (
                b, r.stdout, r.stderr)
            assert "OK" in r.stdout, "block printed no OK:\n%s\n%s" % (
                b, r.stdout)
    finally:
        T.stop_fg(p, mnt)


def main():
    return T.run_tests([
        test_real_corpus,
        test_every_dtype_and_bit_pattern,
        test_names_and_options,
        test_truncated_views,
        test_reading_doc_examples,
    ])


if __name__ == "__main__":
    sys.exit(main())

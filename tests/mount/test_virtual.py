#!/usr/bin/env python3
"""test_virtual.py: virtual safetensors files (docs/virtual.md).

Every directory of a mount has %model.safetensors, the tensors under it as
one safetensors file generated on demand and served from the sources'
ranges.  These tests read them through the kernel and check them with a
parser of their own (below, independent of stfs's) and with stfs itself:
- every valid real file and the real shard set: the root virtual file is
  valid, and every tensor's bytes are the source's (sha256); the merged
  shard set equals the unsharded original tensor by tensor; numpy reads a
  tensor at 8 + N + begin; mounting the virtual file gives the same tree;
- directory files, with full and stripped names; the .f32 variant;
- include= / exclude= selection, and a pattern that matches nothing;
- du, find and ls do not count virtual files (unless show_virtual);
- random reads across tensor boundaries; a truncated shard gives EIO and
  the daemon lives; a header over the reference's limit is refused on
  open, with a log line, and the mount goes on working.
"""
import hashlib
import json
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
VFILE = "%model.safetensors"
STRIPPED = "%model.stripped.safetensors"
F32FILE = "%model.f32.safetensors"


# ---- an independent reader ------------------------------------------------

def no_dups(pairs):
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), "duplicate keys"
    return dict(pairs)


def parse(data):
    """A strict reader of a safetensors file held in memory, written from
    the format's description: {name: (dtype, shape, bytes)}, metadata.
    Also checks what stfs promises of its virtual files: packed in file
    order with no holes, N a multiple of 8 padded with spaces."""
    n = struct.unpack("<Q", data[:8])[0]
    assert n <= 100000000 and 8 + n <= len(data)
    text = data[8:8 + n].decode("utf-8")
    assert n % 8 == 0, "header not padded to 8"
    body = text.rstrip(" ")
    assert body.endswith("}") and body.startswith("{")
    hdr = json.loads(body, object_pairs_hook=no_dups)
    meta = hdr.pop("__metadata__", None)
    start = 8 + n
    spans = sorted((v["data_offsets"][0], v["data_offsets"][1], k)
                   for k, v in hdr.items())
    at = 0
    order = []
    for b, e, k in spans:
        assert b == at, "hole or overlap at %d" % b
        at = e
        order.append(k)
    assert start + at == len(data), "data section is not exactly filled"
    out = {}
    for k, v in hdr.items():
        b, e = v["data_offsets"]
        nb = T.nbytes(v["dtype"], v["shape"])
        assert e - b == nb, "size of %r" % k
        out[k] = (v["dtype"], v["shape"], data[start + b:start + e])
    return out, meta, order


def read(path):
    with open(path, "rb") as f:
        return f.read()


def sha(b):
    return hashlib.sha256(b).hexdigest()


# ---- the real corpus --------------------------------------------------------

def test_real_corpus(d, mnt):
    with open(EXPECTED) as f:
        exp = json.load(f)
    n = 0
    for rel, info in sorted(exp["files"].items()):
        if not info["valid"]:
            continue
        src = os.path.join(T.REAL, rel)
        p = T.mount_fg(src, mnt)
        try:
            v = os.path.join(mnt, VFILE)
            data = read(v)
            assert os.stat(v).st_size == len(data)
            tensors, meta, order = parse(data)
            want = {t["name"]: t for t in info["tensors"]}
            assert set(tensors) == set(want), rel
            for name, (dt, shape, b) in tensors.items():
                assert dt == want[name]["dtype"], (rel, name)
                assert shape == want[name]["shape"], (rel, name)
                assert sha(b) == want[name]["sha256"], (rel, name)
            # source order: the order of the original offsets
            assert order == [t["name"] for t in sorted(
                info["tensors"], key=lambda t: (t["begin"], t["end"],
                                                t["name"]))], rel
            assert (meta or None) == (info.get("metadata") or None), rel
            # stfs's own parser takes it too
            j = T.inspect_json(v)
            assert len(j["tensors"]) == len(want)
        finally:
            T.stop_fg(p, mnt)
        n += 1
    assert n >= 60, n
    print("     %d real files: root virtual file valid, bytes equal" % n)


def test_real_shards_merged(d, mnt):
    """jl-sharded's merged file equals jl-nonsharded, tensor by tensor;
    numpy reads a tensor with file-offset arithmetic; a mount of the
    virtual file shows the same tree and bytes."""
    shards = os.path.join(T.REAL, "jl-sharded")
    whole = os.path.join(T.REAL, "jl-nonsharded", "model.safetensors")
    ref, _, _ = parse(read(whole))
    p = T.mount_fg(shards, mnt)
    mnt2 = os.path.join(d, "inner")
    os.mkdir(mnt2)
    try:
        v = os.path.join(mnt, VFILE)
        data = read(v)
        merged, meta, _ = parse(data)
        assert set(merged) == set(ref)
        for k in ref:
            assert merged[k] == ref[k], k
        # numpy: at 8 + N + begin, as for any safetensors file
        n = struct.unpack("<Q", data[:8])[0]
        hdr = json.loads(data[8:8 + n])
        name = "float32_35"
        b, e = hdr[name]["data_offsets"]
        a = np.memmap(v, dtype="<f4", mode="r", offset=8 + n + b,
                      shape=tuple(hdr[name]["shape"]))
        assert a.tobytes() == ref[name][2]
        del a
        # stfs over stfs: the virtual file mounted is the same model
        p2 = T.mount_fg(v, mnt2)
        try:
            for k, (dt, shape, b) in ref.items():
                fp = os.path.join(mnt2, k.replace(".", "/"))
                assert read(fp) == b, k
                assert os.getxattr(fp, "user.safetensors.dtype") == \
                    dt.encode()
            listing = sorted(os.listdir(mnt2))
            assert listing == sorted(list(ref) + ["%header.json"]), listing
        finally:
            T.stop_fg(p2, mnt2)
    finally:
        T.stop_fg(p, mnt)


# ---- directories, names, variants ---------------------------------------------

def model(d, name="m.safetensors", meta=None):
    rng = random.Random(3)
    tensors = []
    for layer in range(3):
        for w, dt in (("q", "BF16"), ("k", "F16"), ("norm", "F32"),
                      ("idx", "I64")):
            n = rng.choice((1, 3, 17, 1000))
            tensors.append(("model.layers.%d.%s" % (layer, w), dt, [n],
                            os.urandom(n * T.BITS[dt] // 8)))
    tensors.append(("model.embed", "BF16", [4, 8], os.urandom(64)))
    tensors.append(("model.layers.1", "U8", [2], b"xy"))   # a %self
    tensors.append(("lm_head.lora_A.weight", "F32", [2, 2],
                    os.urandom(16)))
    tensors.append(("lm_head.lora_B.weight", "F32", [2], os.urandom(8)))
    tensors.append(("empty", "F32", [0], b""))
    return T.write_st(os.path.join(d, name), tensors,
                      metadata=meta), {t[0]: t for t in tensors}


def test_directories_and_stripping(d, mnt):
    src, tensors = model(d, meta={"format": "pt"})
    p = T.mount_fg(src, mnt, "-o", "convert=f32")
    try:
        # a directory's file: its tensors, full names
        sub, meta, _ = parse(read(os.path.join(mnt, "model/layers",
                                               VFILE)))
        want = {k for k in tensors if k.startswith("model.layers.")} | \
            {"model.layers.1"}
        assert set(sub) == want, set(sub) ^ want
        assert meta == {"format": "pt"}
        for k, (dt, shape, b) in sub.items():
            assert (dt, shape, b) == (tensors[k][1], tensors[k][2],
                                      tensors[k][3]), k
        # stripped: the directory's own components dropped
        st, _, _ = parse(read(os.path.join(mnt, "model/layers", STRIPPED)))
        assert set(st) == {k[len("model.layers."):] for k in want
                           if k != "model.layers.1"} | {"1"}
        st1, _, _ = parse(read(os.path.join(mnt, "model/layers/1",
                                            STRIPPED)))
        assert set(st1) == {"q", "k", "norm", "idx", ""}   # "" is %self
        assert st1[""][2] == b"xy"
        assert not os.path.exists(os.path.join(mnt, STRIPPED))
        # f32: BF16 and F16 converted, the rest raw
        f32, _, _ = parse(read(os.path.join(mnt, F32FILE)))
        for k, (dt, shape, b) in f32.items():
            odt = tensors[k][1]
            if odt in ("BF16", "F16"):
                assert dt == "F32"
                raw = np.frombuffer(tensors[k][3], dtype="<u2")
                want = (raw.astype("<u4") << 16).view("<f4") \
                    if odt == "BF16" else raw.view("<f2").astype("<f4")
                # NaNs come out quiet (docs/views.md): compare values
                assert np.array_equal(np.frombuffer(b, "<f4"), want,
                                      equal_nan=True), k
            else:
                assert (dt, b) == (odt, tensors[k][3]), k
        # not listed, not counted, but there
        files = [os.path.join(r, f) for r, _, fs in os.walk(mnt)
                 for f in fs]
        assert not [f for f in files if "%model" in f], files
        du = int(subprocess.run(["du", "-sb", mnt], capture_output=True,
                                check=True).stdout.split()[0])
        total = sum(os.stat(f).st_size for f in files)
        assert du <= total + 4096 * 64, (du, total)
        find = subprocess.run(["find", mnt, "-type", "f"],
                              capture_output=True, check=True).stdout
        assert b"%model" not in find
        # reads at random offsets and sizes, across tensor boundaries
        v = os.path.join(mnt, VFILE)
        whole = read(v)
        rng = random.Random(9)
        fd = os.open(v, os.O_RDONLY)
        try:
            for _ in range(400):
                off = rng.randrange(len(whole) + 10)
                size = rng.choice((1, 7, 100, 4096, 70000))
                assert os.pread(fd, size, off) == whole[off:off + size]
        finally:
            os.close(fd)
        # read-only like everything else
        try:
            open(v, "r+b")
            raise AssertionError("opened for writing")
        except OSError as e:
            assert e.errno == 30    # EROFS
    finally:
        T.stop_fg(p, mnt)
    # show_virtual lists them
    p = T.mount_fg(src, mnt, "-o", "show_virtual")
    try:
        assert VFILE in os.listdir(mnt)
        assert STRIPPED in os.listdir(os.path.join(mnt, "model"))
        assert F32FILE not in os.listdir(mnt)
    finally:
        T.stop_fg(p, mnt)


def test_selection(d, mnt):
    src, tensors = model(d)
    p = T.mount_fg(src, mnt, "-o", "include=*.lora_*,include=model.embed",
                   "-o", "exclude=*.lora_B*")
    try:
        v, _, _ = parse(read(os.path.join(mnt, VFILE)))
        assert set(v) == {"lm_head.lora_A.weight", "model.embed"}
        assert sorted(os.listdir(mnt)) == ["%header.json", "lm_head",
                                           "model"]
        assert os.listdir(os.path.join(mnt, "model")) == ["embed"]
        # the header file: the source's entries for the selected tensors
        hdr = json.loads(read(os.path.join(mnt, "%header.json")))
        orig = json.loads(T.header_of(src)[1])
        assert hdr == {k: orig[k] for k in ("lm_head.lora_A.weight",
                                            "model.embed")}, hdr
    finally:
        T.stop_fg(p, mnt)
    j = T.inspect_json("--exclude=model.layers.*", src)
    assert {t["name"] for t in j["tensors"]} == \
        {k for k in tensors if not k.startswith("model.layers.")}
    for opt in ("include=nothing.*", "exclude=*.lora_C*"):
        r = subprocess.run([T.STFS, "mount", "-o", opt, src, mnt],
                           capture_output=True, timeout=30)
        assert r.returncode == 1, r
        assert r.stderr.decode() == "stfs: %s: %s matches no tensor\n" % (
            src, opt), r.stderr
        assert not T.is_mount(mnt) and not T.daemons_for(mnt)


# ---- shards: merging, faults, limits ------------------------------------------

def test_truncated_shard(d, mnt):
    a = T.write_st(os.path.join(d, "a.safetensors"),
                   [("x", "U8", [1 << 20], os.urandom(1 << 20))])
    T.write_st(os.path.join(d, "b.safetensors"),
               [("y", "U8", [1 << 20], os.urandom(1 << 20))])
    p = T.mount_fg(d, mnt)
    try:
        v = os.path.join(mnt, VFILE)
        whole = read(v)
        tensors, _, _ = parse(whole)
        assert set(tensors) == {"x", "y"}
        os.truncate(a, 4096)
        fd = os.open(v, os.O_RDONLY | os.O_DIRECT)
        try:
            try:
                os.pread(fd, 1 << 20, 0)
                raise AssertionError("read past a truncated shard")
            except OSError as e:
                assert e.errno == 5     # EIO
        finally:
            os.close(fd)
        assert read(os.path.join(mnt, "y")) == tensors["y"][2]
        assert p.poll() is None
    finally:
        T.stop_fg(p, mnt)


def test_too_large_header(d, mnt):
    """Two shards of 700,000 tensors each have headers of about 55 MB,
    each within the reference's limit; their merged header is not.  The
    root file is refused on open with a log line; its directories' files
    and everything else still work."""
    for k in range(2):
        path = os.path.join(d, "s%d.safetensors" % k)
        parts = ['"s%d.l.%d":{"dtype":"U8","shape":[1],'
                 '"data_offsets":[%d,%d]}' % (k, i, i, i + 1)
                 for i in range(700000)]
        h = ("{" + ",".join(parts) + "}").encode()
        h += b" " * (-len(h) % 8)
        assert len(h) < 100000000
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h + bytes(700000))
    log = os.path.join(d, "log")
    r = subprocess.run([T.STFS, "mount", "-o", "log=" + log, d, mnt],
                       capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr
    T._mounts.append(mnt)
    try:
        v = os.path.join(mnt, VFILE)
        assert os.stat(v).st_size > 100000000
        try:
            open(v, "rb")
            raise AssertionError("opened a file whose header is too large")
        except OSError as e:
            assert e.errno == 27        # EFBIG
        with open(log) as f:
            text = f.read()
        assert "%s: %s: its generated header would be" % (d, VFILE) in \
            text and "over the reference's limit" in text, text
        sub, _, _ = parse(read(os.path.join(mnt, "s1/l", VFILE)))
        assert len(sub) == 700000
        assert read(os.path.join(mnt, "s0/l/5")) == b"\0"
    finally:
        T.unmount(mnt)


def main():
    return T.run_tests([
        test_real_corpus,
        test_real_shards_merged,
        test_directories_and_stripping,
        test_selection,
        test_truncated_shard,
        test_too_large_header,
    ])


if __name__ == "__main__":
    sys.exit(main())

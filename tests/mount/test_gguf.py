#!/usr/bin/env python3
"""test_gguf.py: GGUF files mounted as tensor trees (docs/formats.md).

The files are written by the tests' own writer (ggufw.py, from the GGUF
specification), with quantized blocks made by its numpy quantizers, and
read through real mounts:
- every plain type and several quantized ones, v2 and v3, the default and
  custom alignments, metadata of every value type with arrays and arrays of
  arrays: ls, the bytes of every tensor (cat and dd), the xattrs, the .f32
  views of Q8_0, Q4_0, Q4_K, Q5_K and Q6_K against the tests' own numpy
  dequantizer, %header.json's metadata; every tensor's offset, type and
  shape against an independent parser (@huggingface/gguf, pinned in
  tests/loaders/ggufjs/package-lock.json);
- %model.safetensors (and the stripped and f32 variants) taken by stfs's
  strict reader and by the tests' own, tensor by tensor, with the
  quantized tensors left out and `stfs inspect` saying why;
- hostile files refused with the file, the key or tensor and the rule;
- a GGUF served by nginx through http:// (only the header's blocks are
  fetched to mount and list it), through hf://ORG/NAME/FILE.gguf (the
  tests' Hub emulator) and through s3:// (Swift).
"""
import json
import os
import shutil
import struct
import subprocess
import sys

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402
import ggufw as G  # noqa: E402
import s3server  # noqa: E402
import numpy as np  # noqa: E402

GGUFJS = os.path.join(TESTS_DIR, "loaders", "ggufjs")
X = "user.safetensors."
QUANT = ["Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K"]
F32Q = QUANT + ["Q4_1", "Q5_0", "Q2_K"]     # the types with a .f32 view
NP = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I8": "i1", "I16": "<i2",
      "I32": "<i4", "I64": "<i8"}
KVS = [("general.architecture", "string", "llama"),
       ("general.name", "string", "tiny \u00e9t\u00e9 \"q\"\n"),
       ("t.u8", "u8", 255), ("t.i8", "i8", -128), ("t.u16", "u16", 65535),
       ("t.i16", "i16", -32768), ("t.u32", "u32", 4000000000),
       ("t.i32", "i32", -2000000000), ("t.f32", "f32", 0.25),
       ("t.bool", "bool", False), ("t.u64", "u64", (1 << 64) - 1),
       ("t.i64", "i64", -(1 << 63)), ("t.f64", "f64", -1.5e300),
       ("t.tokens", "array", ("string", ["<s>", "</s>", "\u2581a", ""])),
       ("t.scores", "array", ("f32", [0.0, -1.5, 2.0])),
       ("t.empty", "array", ("i64", [])),
       ("t.nested", "array", ("array", [("u8", [1, 2]), ("bool", [True])]))]
KV_JSON = {"general.architecture": "llama",
           "general.name": "tiny \u00e9t\u00e9 \"q\"\n", "t.u8": 255,
           "t.i8": -128, "t.u16": 65535, "t.i16": -32768,
           "t.u32": 4000000000, "t.i32": -2000000000, "t.f32": 0.25,
           "t.bool": False, "t.u64": (1 << 64) - 1, "t.i64": -(1 << 63),
           "t.f64": -1.5e300, "t.tokens": ["<s>", "</s>", "\u2581a", ""],
           "t.scores": [0.0, -1.5, 2.0], "t.empty": [],
           "t.nested": [[1, 2], [True]]}


def read(path):
    with open(path, "rb") as f:
        return f.read()


def stfs(*args):
    return subprocess.run([T.STFS] + list(args), capture_output=True,
                          timeout=120, text=True, errors="replace")


def xattr(path, name):
    return os.getxattr(path, name).decode()


def tensors(seed=1, rows=2):
    """(name, ggml type, shape, raw, values or None) of a model with every
    plain type, the five dequantized types and raw-only quantized ones."""
    rng = np.random.default_rng(seed)
    out = []
    for gt in ["F32", "F16", "F64", "I8", "I16", "I32", "I64"]:
        a = (rng.standard_normal((3, 5)) * 100).astype(NP[gt])
        out.append(("plain.%s.weight" % gt.lower(), gt, [3, 5], a.tobytes(),
                    a.astype(np.float32)))
    bf = rng.standard_normal(6).astype(np.float32)
    bfraw = (bf.view(np.uint32) >> 16).astype("<u2")
    out.append(("plain.bf16.weight", "BF16", [6], bfraw.tobytes(),
                (bfraw.astype(np.uint32) << 16).view(np.float32)))
    out.append(("plain.scalar", "F32", [], np.float32(7).tobytes(),
                np.float32([7])))
    for i, q in enumerate(QUANT):
        n = 256 * rows
        x = rng.standard_normal(n).astype(np.float32)
        raw = G.quantize(q, x)
        out.append(("blk.%d.%s.weight" % (i, q.lower()), q, [rows, 256],
                    raw, G.dequantize(q, raw, n)))
    # random blocks (any bytes are blocks): dequantized by the tests'
    # numpy dequantizer where stfs has a .f32 view, else raw only
    for q in ["Q4_1", "Q5_0", "Q2_K", "IQ4_NL"]:
        _, blk, size = G.GGML[q]
        raw = rng.integers(0, 256, size * (256 // blk) * rows,
                           dtype=np.uint8).tobytes()
        out.append(("raw.%s" % q.lower(), q, [rows, 256], raw,
                    G.dequantize(q, raw, 256 * rows) if q in F32Q else
                    None))
    return out


def write_model(path, version=3, alignment=None, seed=1):
    ts = tensors(seed)
    where = G.write(path, [t[:4] for t in ts], KVS, version=version,
                    alignment=alignment)
    return ts, where


def js_parse(path):
    """What @huggingface/gguf sees of the file, or None without node."""
    node = shutil.which("node")
    mods = os.path.join(GGUFJS, "node_modules", "@huggingface", "gguf")
    if not node or not os.path.isdir(mods):
        if os.environ.get("CI") == "true":
            raise AssertionError("node or %s missing (npm ci in %s)" % (
                mods, GGUFJS))
        print("     (node or @huggingface/gguf missing: npm ci in %s)" %
              GGUFJS)
        return None
    r = subprocess.run([node, os.path.join(GGUFJS, "check.mjs"), path],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def check_tree(mnt, ts, where):
    """Every tensor through the kernel: bytes, xattrs, .f32 views."""
    for name, gt, shape, raw, vals in ts:
        p = os.path.join(mnt, *name.split("."))
        assert read(p) == raw, name
        assert os.stat(p).st_size == len(raw), name
        assert xattr(p, X + "name") == name
        assert xattr(p, X + "shape") == json.dumps(shape).replace(" ", "")
        assert xattr(p, "user.stfs.format") == "gguf"
        assert xattr(p, "user.gguf.type") == gt
        assert int(xattr(p, X + "file_offset")) == where[name][0], name
        if gt in G.PLAIN:
            assert xattr(p, X + "dtype") == G.PLAIN[gt], name
        else:
            assert X + "dtype" not in os.listxattr(p), name
        if gt in F32Q or gt in ("F16", "BF16"):
            f = np.frombuffer(read(p + ".f32"), "<f4")
            assert xattr(p + ".f32", X + "dtype") == "F32"
            assert f.shape == vals.reshape(-1).shape, name
            assert np.array_equal(f, vals.reshape(-1), equal_nan=True), name
        else:
            assert not os.path.exists(p + ".f32"), name


def check_js(path, ts, where):
    js = js_parse(path)
    if js is None:
        return
    base = int(js["tensorDataOffset"])
    got = {t["name"]: t for t in js["tensors"]}
    assert set(got) == {t[0] for t in ts}
    j = T.inspect_json(path)
    mine = {t["name"]: t for t in j["tensors"]}
    for name, gt, shape, raw, _ in ts:
        g = got[name]
        assert g["type"] == G.GGML[gt][0], name
        assert [int(x) for x in reversed(g["dims"])] == shape or \
            (shape == [] and g["dims"] == []), name
        assert base + int(g["offset"]) == mine[name]["file_offset"], name
        assert mine[name]["type"] == gt and mine[name]["shape"] == shape
        assert mine[name]["bytes"] == len(raw)
    for k, v in KV_JSON.items():
        assert js["metadata"][k]["value"] == v or k in (
            "t.u64", "t.i64") and int(js["metadata"][k]["value"]) == v, k


def test_every_type(d, mnt):
    """v2 and v3, default and custom alignment: the tree, bytes, xattrs,
    .f32 views, metadata and the independent parser's offsets."""
    for version, align in [(3, None), (2, None), (3, 64), (2, 4096)]:
        path = os.path.join(d, "m-v%d-%s.gguf" % (version, align))
        ts, where = write_model(path, version, align)
        for n, (off, _) in where.items():
            assert off % (align or 32) == 0
        p = T.mount_fg(path, mnt, "-o", "convert=f32")
        try:
            assert sorted(os.listdir(mnt)) == ["%header.json", "blk",
                                               "plain", "raw"]
            check_tree(mnt, ts, where)
            # dd of a slice of a quantized tensor and of its .f32 view
            q = os.path.join(mnt, "blk", "2", "q4_k", "weight")
            r = subprocess.run(["dd", "if=" + q + ".f32", "bs=100",
                                "skip=7", "count=9", "status=none"],
                               capture_output=True)
            assert r.stdout == read(q + ".f32")[700:1600]
            hdr = json.loads(read(os.path.join(mnt, "%header.json")))
            assert hdr["format"] == "gguf"
            meta = hdr["metadata"]
            want = dict(KV_JSON)
            if align:
                want["general.alignment"] = align
            assert meta == want, set(meta.items()) ^ set(want.items())
            assert hdr["tensors"]["blk.2.q4_k.weight"]["dtype"] is None
        finally:
            T.stop_fg(p, mnt)
        check_js(path, ts, where)
    print("     v2, v3, alignments 32, 64, 4096: %d tensors each" % len(ts))


def parse_st(data):
    """The tests' own strict reading of a safetensors file: {name: (dtype,
    shape, bytes)}; the tensors fill the data section in order."""
    n = struct.unpack("<Q", data[:8])[0]
    hdr = json.loads(data[8:8 + n])
    hdr.pop("__metadata__", None)
    at, out = 0, {}
    for k, v in sorted(hdr.items(), key=lambda kv: kv[1]["data_offsets"]):
        b, e = v["data_offsets"]
        assert b == at and e - b == T.nbytes(v["dtype"], v["shape"]), k
        at = e
        out[k] = (v["dtype"], v["shape"], data[8 + n + b:8 + n + e])
    assert 8 + n + at == len(data)
    return out


def test_model_safetensors(d, mnt):
    """%model.safetensors is valid (stfs's strict reader and the tests'),
    holds every plain tensor byte for byte and no quantized one; inspect
    says what was left out; the stripped and f32 variants."""
    path = os.path.join(d, "m.gguf")
    ts, _ = write_model(path)
    p = T.mount_fg(path, mnt, "-o", "convert=f32")
    try:
        out = os.path.join(d, "copy.safetensors")
        shutil.copyfile(os.path.join(mnt, "%model.safetensors"), out)
        f32 = read(os.path.join(mnt, "%model.f32.safetensors"))
        strip = read(os.path.join(mnt, "plain", "%model.stripped."
                                  "safetensors"))
    finally:
        T.stop_fg(p, mnt)
    got = parse_st(read(out))
    plain = {t[0]: t for t in ts if t[1] in G.PLAIN}
    assert set(got) == set(plain)
    for name, (dt, shape, b) in got.items():
        assert dt == G.PLAIN[plain[name][1]] and shape == plain[name][2]
        assert b == plain[name][3], name
    j = T.inspect_json(out)            # stfs's strict reader takes it
    assert {t["name"] for t in j["tensors"]} == set(plain)
    g32 = parse_st(f32)
    for name, gt, shape, raw, vals in ts:
        if gt in F32Q:
            assert g32[name][0] == "F32"
            assert np.array_equal(np.frombuffer(g32[name][2], "<f4"),
                                  vals, equal_nan=True), name
        elif gt not in G.PLAIN:
            assert name not in g32, name
    gs = parse_st(strip)
    assert set(gs) == {n[len("plain."):] for n in plain if
                       n.startswith("plain.")}
    r = stfs("inspect", path)
    assert r.returncode == 0, r.stderr
    assert "left out of %model.safetensors:" in r.stdout
    for name, gt, *_ in ts:
        line = [x for x in r.stdout.splitlines() if x.startswith(
            "  %s (%s): " % (name, gt))]
        assert bool(line) == (gt not in G.PLAIN), (name, r.stdout)
    j = T.inspect_json(path)
    assert j["files"][0]["format"] == "gguf"
    assert j["files"][0]["key_values"]["t.tokens"] == KV_JSON["t.tokens"]
    lo = {t["name"] for t in j["tensors"] if "left_out" in t}
    assert lo == {t[0] for t in ts if t[1] not in G.PLAIN}


# ---- hostile files ----------------------------------------------------------

def kv_bytes(k, vt, v):
    return G.gstr(k) + struct.pack("<I", G.VTYPES[vt]) + G.value(vt, v)


def tinfo(name, dims, gtype, off):
    return (G.gstr(name) + struct.pack("<I", len(dims)) +
            b"".join(struct.pack("<Q", x) for x in dims) +
            struct.pack("<IQ", gtype, off))


def raw_file(nt, kvs, infos, data=b"\0" * 256, version=3, pad=32):
    head = b"GGUF" + struct.pack("<IQQ", version, nt, len(kvs))
    head += b"".join(kvs) + b"".join(infos)
    head += b"\0" * (-len(head) % pad)
    return head + data


def hostile():
    """(name, bytes, what the message must hold) of refused files."""
    f32 = lambda n, off=0, dims=(4,): tinfo(n, list(dims), 0, off)  # noqa
    ok_kv = kv_bytes("general.architecture", "string", "llama")
    return [
        ("magic-v1", raw_file(0, [], [], version=1), ["version 1",
                                                      "gguf-version"]),
        ("version-9", raw_file(0, [], [], version=9), ["gguf-version"]),
        ("kv-count", raw_file(0, [], [])[:16] + struct.pack("<Q", 1 << 40),
         ["key-values", "gguf-count"]),
        ("tensor-count", b"GGUF" + struct.pack("<IQQ", 3, 1 << 50, 0),
         ["tensors", "gguf-count"]),
        ("string-past-end", b"GGUF" + struct.pack("<IQQ", 3, 0, 1) +
         struct.pack("<Q", 1 << 40) + b"abc" + b"\0" * 16,
         ["string of", "gguf-string"]),
        ("value-string-past-end", raw_file(0, [G.gstr("k.s") + struct.pack(
            "<IQ", 8, 1 << 33)], [], data=b"x" * 40),
         ['key "k.s"', "gguf-string"]),
        ("array-past-end", raw_file(0, [G.gstr("k.a") + struct.pack(
            "<IIQ", 9, 5, 1 << 30)], [], data=b""),
         ['key "k.a"', "gguf-count"]),
        ("value-type", raw_file(0, [G.gstr("k.t") + struct.pack(
            "<I", 77)], []), ['key "k.t"', "gguf-type"]),
        ("ggml-type", raw_file(1, [ok_kv], [tinfo("w", [4], 99, 0)]),
         ['tensor "w"', "unknown ggml type 99", "gguf-type"]),
        ("removed-ggml-type", raw_file(1, [], [tinfo("w", [32], 4, 0)]),
         ['tensor "w"', "gguf-type"]),
        ("overlap", raw_file(2, [], [f32("a", 0, (8,)), f32("b", 0,
                                                          (8,))],
                             data=b"\0" * 64),
         ['"b"', '"a"', "overlap"]),
        ("misaligned", raw_file(1, [], [f32("w", 4)]),
         ['tensor "w"', "alignment", "gguf-offset"]),
        ("past-end", raw_file(1, [], [f32("w", 0, (1000,))], data=b"\0" * 64),
         ['tensor "w"', "gguf-range"]),
        ("dims-overflow", raw_file(1, [], [f32("w", 0, (1 << 32, 1 << 32,
                                                         16))]),
         ['tensor "w"', "overflow", "gguf-dims"]),
        ("too-many-dims", raw_file(1, [], [f32("w", 0, (1,) * 5)]),
         ['tensor "w"', "gguf-dims"]),
        ("block", raw_file(1, [], [tinfo("q", [20], 8, 0)]),
         ['tensor "q"', "gguf-block"]),
        ("alignment", raw_file(0, [kv_bytes("general.alignment", "u32",
                                            24)], []),
         ['key "general.alignment"', "gguf-alignment"]),
        ("alignment-type", raw_file(0, [kv_bytes("general.alignment",
                                                 "string", "32")], []),
         ["gguf-alignment"]),
        ("duplicate-tensor", raw_file(2, [], [f32("w", 0), f32("w", 32)],
                                      data=b"\0" * 64),
         ['"w"', "duplicate-name"]),
        ("duplicate-key", raw_file(0, [ok_kv, ok_kv], []),
         ["general.architecture", "duplicate-key"]),
        ("bool", raw_file(0, [G.gstr("k.b") + struct.pack("<IB", 7, 2)], []),
         ['key "k.b"', "gguf-bool"]),
        ("nesting", raw_file(0, [G.gstr("k.n") + struct.pack("<I", 9) +
                                 struct.pack("<IQ", 9, 1) * 12 +
                                 struct.pack("<IQ", 0, 0)], []),
         ['key "k.n"', "gguf-depth"]),
        ("truncated", raw_file(1, [ok_kv], [f32("w")])[:60],
         ["gguf-"]),
        ("name-utf8", raw_file(1, [], [f32(b"\xff\xfe", 0)]),
         ["name-utf8"]),
        ("long-key", raw_file(0, [kv_bytes("k" * 65536, "u8", 1)], []),
         ["65536 bytes", "65535", "gguf-string"]),
        ("long-tensor-name", raw_file(1, [], [f32("w" * 70000, 0)]),
         ["70000 bytes", "gguf-string"]),
    ]


def test_hostile(d, mnt):
    """Each hostile file: `stfs inspect` and `stfs mount` refuse it at
    once, exit 1, naming the file, the key or tensor and the rule."""
    for name, data, want in hostile():
        path = os.path.join(d, name + ".gguf")
        with open(path, "wb") as f:
            f.write(data)
        r = stfs("inspect", path)
        assert r.returncode == 1, (name, r)
        assert r.stderr.startswith("stfs: %s: GGUF" % path) or \
            r.stderr.startswith("stfs: %s: tensor" % path) or \
            r.stderr.startswith("stfs: %s: key" % path), (name, r.stderr)
        for w in want:
            assert w in r.stderr, (name, w, r.stderr)
        assert r.stderr.count("\n") == 1, r.stderr
    r = stfs("mount", os.path.join(d, "overlap.gguf"), mnt)
    assert r.returncode == 1 and "overlap" in r.stderr
    assert not T.is_mount(mnt)
    print("     %d hostile files refused" % len(hostile()))


def test_long_strings(d, mnt):
    """Two 40 MiB strings of control bytes (each byte 6 of JSON): cut at
    64 KiB with the marker naming the length and the offset in
    %header.json and inspect; memory stays small (it was 1.07 GB and a
    503 MB %header.json); a string of exactly 64 KiB is whole."""
    path = os.path.join(d, "long.gguf")
    big, edge = b"\x01" * (40 << 20), "\u00e9" * (1 << 15)  # 64 KiB
    x = np.arange(4, dtype=np.float32)
    G.write(path, [("w", "F32", [4], x.tobytes())],
            [("a", "string", big), ("b", "string", big),
             ("edge", "string", edge), ("general.name", "string", "x")])
    with open(path, "rb") as f:
        raw = f.read(1 << 20)
    at_a = raw.index(b"\x01" * 64)
    peak = ("import resource, subprocess, sys\n"
            "r = subprocess.run(sys.argv[1:])\n"
            "print(r.returncode, resource.getrusage("
            "resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", peak, T.STFS, "inspect",
                        path], capture_output=True, text=True)
    rc, kb = r.stderr.split()[-2:]
    assert rc == "0", r.stderr
    if not os.environ.get("STFS_SANITIZED"):
        assert int(kb) < 200 * 1024, kb
    mark = "[... cut by stfs: %d bytes in all, at byte %d of the file]" % (
        40 << 20, at_a)
    assert mark in r.stdout, r.stdout[-2000:]
    p = T.mount_fg(path, mnt)
    try:
        h = read(os.path.join(mnt, "%header.json"))
        assert len(h) < (1 << 20), len(h)
        meta = json.loads(h)["metadata"]
        assert meta["a"] == "\x01" * (64 << 10) + " " + mark, \
            meta["a"][-200:]
        assert meta["edge"] == edge
        assert meta["general.name"] == "x"
        assert read(os.path.join(mnt, "w")) == x.tobytes()
    finally:
        T.stop_fg(p, mnt)
    # a cut inside a character leaves the character out
    path = os.path.join(d, "utf8.gguf")
    G.write(path, [("w", "F32", [4], x.tobytes())],
            [("u", "string", "a" + "\u00e9" * (1 << 15))])
    meta = json.loads(stfs("inspect", "--json", path).stdout)
    text = json.dumps(meta)
    assert "\\ufffd" not in text and "cut by stfs: 65537" in text, \
        text[-300:]


# ---- remote sources ---------------------------------------------------------

def big_model(path):
    """A GGUF with a header of some 600 KB (a vocabulary) and 24 MiB of
    tensors: the header is read without any tensor byte."""
    rng = np.random.default_rng(5)
    vocab = ["tok%06d" % i for i in range(40000)]
    kvs = KVS + [("tokenizer.ggml.tokens", "array", ("string", vocab))]
    ts = []
    for i in range(6):
        x = rng.standard_normal(1 << 20).astype(np.float32)
        ts.append(("blk.%d.w" % i, "F32", [1024, 1024], x.tobytes()))
    q = rng.standard_normal(1 << 18).astype(np.float32)
    ts.append(("blk.q", "Q8_0", [1024, 256], G.quantize("Q8_0", q)))
    where = G.write(path, ts, kvs)
    return ts, where


def test_http(d, mnt):
    """nginx serves a GGUF: mounting and listing it (xattrs included)
    fetch only the blocks of its header; every tensor reads back."""
    from fixtures import Nginx
    data = os.path.join(d, "www")
    os.makedirs(data)
    ts, where = big_model(os.path.join(data, "m.gguf"))
    hlen = min(off for off, _ in where.values())
    ngx = Nginx(os.path.join(d, "ngx"), data)
    try:
        p = T.mount_fg(ngx.url("m.gguf"), mnt, "-o", "block_size=64K",
                       "-o", "nocache")
        try:
            for root, dirs, files in os.walk(mnt):
                for f in files:
                    os.listxattr(os.path.join(root, f))
            j = json.loads(read(os.path.join(mnt, "%header.json")))
            assert len(j["metadata"]["tokenizer.ggml.tokens"]) == 40000
            rs = ngx.ranges()
            assert rs, "no range request"
            top = max(last for _, last in rs)
            # the header's blocks, and at most one read window (1 MiB)
            # past it: none of the 24 MiB of tensors
            assert top < hlen + (1 << 20) + 65536, (top, hlen)
            got = sum(b - a + 1 for a, b in rs)
            assert got < hlen + (1 << 20) + 65536, (got, hlen)
            print("     header %d bytes: %d range requests up to byte %d "
                  "to mount and list" % (hlen, len(rs), top))
            for name, gt, shape, raw in ts:
                assert read(os.path.join(mnt, *name.split("."))) == raw
        finally:
            T.stop_fg(p, mnt)
    finally:
        ngx.stop()


def test_hub_file(d, mnt):
    """hf://ORG/NAME/FILE.gguf mounts that one file of a repo with two."""
    from fixtures import world
    a = os.path.join(d, "a.gguf")
    b = os.path.join(d, "b.gguf")
    ts, _ = write_model(a, seed=1)
    write_model(b, seed=2)
    with world(d) as w:
        w.hub.push(w.hub.repo("org/tiny-GGUF"), {
            "tiny-Q4_K.gguf": read(a), "tiny-Q8_0.gguf": read(b),
            "README.md": b"x"})
        src = "hf://org/tiny-GGUF/tiny-Q4_K.gguf"
        p = T.mount_fg(src, mnt)
        try:
            for name, gt, shape, raw, _ in ts:
                assert read(os.path.join(mnt, *name.split("."))) == raw
            q = os.path.join(mnt, "blk", "0", "q8_0", "weight")
            assert xattr(q, X + "repo") == "org/tiny-GGUF"
        finally:
            T.stop_fg(p, mnt)
        r = stfs("inspect", "hf://org/tiny-GGUF/nope.gguf")
        assert r.returncode == 1 and "no file nope.gguf" in r.stderr, \
            r.stderr


def test_s3(d, mnt):
    """s3://BUCKET/KEY.gguf through the S3 emulator (Swift)."""
    path = os.path.join(d, "m.gguf")
    ts, _ = write_model(path)
    with s3server.creds(d) as sw:
        sw.put("models", "gguf/m.gguf", read(path))
        p = T.mount_fg("s3://models/gguf/m.gguf", mnt)
        try:
            for name, gt, shape, raw, _ in ts:
                assert read(os.path.join(mnt, *name.split("."))) == raw
        finally:
            T.stop_fg(p, mnt)


def main():
    try:
        return run()
    finally:
        s3server.stop_shared()


def run():
    return T.run_tests([
        test_every_type,
        test_model_safetensors,
        test_hostile,
        test_long_strings,
        test_http,
        test_hub_file,
        test_s3,
    ])


if __name__ == "__main__":
    sys.exit(main())

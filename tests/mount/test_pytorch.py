#!/usr/bin/env python3
"""test_pytorch.py: PyTorch checkpoints mounted without running pickle.
torch (python3-torch from Debian, 1.13) writes every checkpoint here:
- a Lightning-like checkpoint in both serialization formats (the zip of
  torch >= 1.6 and the legacy one), with every dtype torch 1.13 has, views
  with storage offsets, transposed and strided tensors, tied weights,
  parameters, nested dicts and lists, plain values, and an object of a
  class whose module is deleted before the mount: every tensor read
  through the mount equals what torch.load gives, with the xattrs of a
  safetensors mount and the format's; the object is named, not made;
- %model.safetensors copied out is a valid safetensors file (stfs inspect
  and a mount of it) holding every representable tensor, equal to
  torch.load's, and inspect says what it left out and why;
- a bare tensor; a sharded checkpoint through pytorch_model.bin.index.json,
  its directory, and a directory of .bin files; an hf:// repo with only
  .bin files (the Hub emulator) and one .bin file of it; an s3:// prefix
  of .bin shards (Swift);
- hostile files: a pickle that calls os.system (nothing is run), deep
  nesting, memo abuse, a truncated zip, compressed records, a storage too
  small for its tensor, integer overflow in size and stride: refused with
  a message naming the file and the rule, nothing mounted;
- one checkpoint over http:// from nginx: the mount fetches at most three
  ranges (the zip's end, its directory and data.pkl), and reads match.
"""
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import zipfile

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402
import s3server  # noqa: E402
from fixtures import Nginx, stfs  # noqa: E402
import torch_hostile as H  # noqa: E402

import torch  # noqa: E402

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16,
          torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
          torch.bool, torch.complex64, torch.complex128]
ST = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16",
      torch.bfloat16: "BF16", torch.uint8: "U8", torch.int8: "I8",
      torch.int16: "I16", torch.int32: "I32", torch.int64: "I64",
      torch.bool: "BOOL", torch.complex64: "C64"}


def tbytes(t):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def flat(o, k=""):
    """(key, tensor) of every tensor, keys joined with '.' as stfs does."""
    if isinstance(o, torch.Tensor):
        yield (k or "tensor"), o
    elif isinstance(o, dict):
        for a, b in o.items():
            yield from flat(b, (k + "." if k else "") + str(a))
    elif isinstance(o, (list, tuple)):
        for i, b in enumerate(o):
            yield from flat(b, (k + "." if k else "") + str(i))


def make_ckpt(d, path, legacy, big=0):
    """A Lightning-like checkpoint; the class of one object is in a module
    deleted afterwards.  Returns the path."""
    mod = os.path.join(d, "gone_%d" % legacy)
    os.makedirs(mod, exist_ok=True)
    with open(os.path.join(mod, "throwaway.py"), "w") as f:
        f.write("class Hyper:\n    def __init__(self):\n"
                "        self.lr = 0.1\n")
    code = r"""
import collections, sys, torch
sys.path.insert(0, %r)
import throwaway
g = torch.Generator().manual_seed(1)
base = torch.randn(64, generator=g)
m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
sd = {
  "state_dict": collections.OrderedDict(
      ("model." + k, v) for k, v in m.state_dict().items()),
  "epoch": 7, "global_step": 1234, "lr": 0.5, "name": "run-1",
  "flag": True, "nothing": None,
  "hyper_parameters": throwaway.Hyper(),
  "views": {"offset": base[5:17].view(3, 4),
            "transposed": base[:12].view(3, 4).t(),
            "strided": base[::3],
            "expanded": base[:4].view(4, 1).expand(4, 5),
            "deep": base[2:50].view(4, 12)[1:3, 2:10:2]},
  "tied_a": base, "tied_b": base,
  "param": torch.nn.Parameter(torch.ones(3, 2)),
  "optimizer_states": [{"param_groups": [{"lr": 0.1, "params": [0, 1]}],
                        "state": {0: {"step": torch.tensor(3.0),
                                      "exp_avg": torch.zeros(3)}}}],
  "dtypes": {},
  "empty": torch.zeros(0, 3),
  "scalar": torch.tensor(2.5, dtype=torch.float64),
}
if %d:
    sd["big"] = torch.randn(%d // 4, generator=g)
for dt in %s:
    name = str(dt).split(".")[1]
    if dt.is_complex:
        t = torch.randn(3, 2, generator=g, dtype=dt)
    elif dt.is_floating_point:
        t = torch.randn(3, 2, generator=g).to(dt)
    elif dt == torch.bool:
        t = torch.tensor([[True, False], [False, True], [True, True]])
    else:
        t = torch.randint(-100 if dt != torch.uint8 else 0, 100, (3, 2),
                          generator=g).to(dt)
    sd["dtypes"][name] = t
torch.save(sd, %r, _use_new_zipfile_serialization=%s)
""" % (mod, big, big, "[" + ", ".join(str(x) for x in DTYPES) + "]",
           path, not legacy)
    subprocess.run(["/usr/bin/python3", "-c", code], check=True)
    shutil.rmtree(mod)            # the class no longer exists
    return path


def load(path):
    """torch.load, with the deleted class put back for torch only."""
    d = os.path.join(os.path.dirname(path), "load_only")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "throwaway.py"), "w") as f:
        f.write("class Hyper:\n    pass\n")
    sys.path.insert(0, d)
    try:
        return torch.load(path)
    finally:
        sys.path.remove(d)
        sys.modules.pop("throwaway", None)
        shutil.rmtree(d)


def compare(obj, mnt, left_out=("complex128",)):
    n = 0
    for k, t in flat(obj):
        p = os.path.join(mnt, *k.split("."))
        got = open(p, "rb").read()
        assert got == tbytes(t), "%s differs" % k
        if t.dtype in ST:
            assert os.getxattr(p, "user.safetensors.dtype").decode() == \
                ST[t.dtype], k
        assert json.loads(os.getxattr(p, "user.safetensors.shape")) == \
            list(t.shape), k
        assert os.getxattr(p, "user.safetensors.name").decode() == k
        assert os.getxattr(p, "user.stfs.format") == b"pytorch"
        n += 1
    return n


def check_ckpt(d, mnt, legacy):
    path = make_ckpt(d, os.path.join(d, "ck.pt"), legacy)
    obj = load(path)
    p = T.mount_fg(path, mnt)
    try:
        n = compare(obj, mnt)
        assert n == 28, n
        # the object of the deleted class is named, never made
        info = T.inspect_json(path)
        text = json.dumps(info)
        assert "throwaway.Hyper" in text, text[:2000]
        assert not os.path.exists(os.path.join(mnt, "hyper_parameters"))
        # %model.safetensors: every representable tensor, checked by the
        # project's strict reader and by a mount of the copy
        out = os.path.join(d, "out.safetensors")
        shutil.copyfile(os.path.join(mnt, "%model.safetensors"), out)
    finally:
        T.stop_fg(p, mnt)
    r = subprocess.run([T.STFS, "inspect", out], capture_output=True)
    assert r.returncode == 0, r.stderr
    p = T.mount_fg(out, mnt)
    try:
        m = 0
        for k, t in flat(obj):
            q = os.path.join(mnt, *k.split("."))
            if t.dtype == torch.complex128:
                assert not os.path.exists(q), k
                continue
            assert open(q, "rb").read() == tbytes(t), k
            assert os.getxattr(q, "user.safetensors.dtype").decode() == \
                ST[t.dtype]
            m += 1
        assert m == n - 1, (m, n)
    finally:
        T.stop_fg(p, mnt)
    r = subprocess.run([T.STFS, "inspect", path], capture_output=True)
    assert r.returncode == 0, r.stderr
    o = r.stdout.decode()
    assert "epoch = 7" in o and "name = " in o and "run-1" in o, o
    assert "throwaway.Hyper" in o, o
    assert "left out of %model.safetensors" in o and "complex128" in o, o


def test_zip(d, mnt):
    check_ckpt(d, mnt, False)


def test_legacy(d, mnt):
    check_ckpt(d, mnt, True)


def test_bare_tensor(d, mnt):
    for legacy in (False, True):
        path = os.path.join(d, "bare%d.pt" % legacy)
        t = torch.arange(40, dtype=torch.int32)[3:23].view(4, 5).t()
        torch.save(t, path, _use_new_zipfile_serialization=not legacy)
        p = T.mount_fg(path, mnt)
        try:
            assert open(os.path.join(mnt, "tensor"), "rb").read() == \
                tbytes(t)
        finally:
            T.stop_fg(p, mnt)


def test_shards(d, mnt):
    wm, want = {}, {}
    for i in range(3):
        sd = {"layer%d.w" % i: torch.randn(5, 3), "layer%d.b" % i:
              torch.randn(3)}
        name = "pytorch_model-%05d-of-00003.bin" % (i + 1)
        torch.save(sd, os.path.join(d, name))
        for k, v in sd.items():
            wm[k] = name
            want[k] = v
    ix = os.path.join(d, "pytorch_model.bin.index.json")
    with open(ix, "w") as f:
        json.dump({"metadata": {}, "weight_map": wm}, f)
    # the index, the directory (which has it), and a directory of .bin
    # files without an index
    alone = os.path.join(d, "alone")
    os.mkdir(alone)
    for f in set(wm.values()):
        shutil.copy(os.path.join(d, f), alone)
    for src in (ix, d, alone):
        p = T.mount_fg(src, mnt)
        try:
            for k, v in want.items():
                assert open(os.path.join(mnt, *k.split(".")),
                            "rb").read() == tbytes(v), (src, k)
        finally:
            T.stop_fg(p, mnt)


def bin_repo(d):
    """Two .bin shards and their index, as older Hub repos have them:
    ({file: bytes}, {key: tensor})."""
    files, want, wm = {}, {}, {}
    for i in range(2):
        sd = {"model.layers.%d.w" % i: torch.randn(6, 4)[:, 1:3],
              "model.layers.%d.b" % i: torch.randn(4).to(torch.bfloat16)}
        name = "pytorch_model-%05d-of-00002.bin" % (i + 1)
        buf = io.BytesIO()
        torch.save(sd, buf)
        files[name] = buf.getvalue()
        for k, v in sd.items():
            wm[k] = name
            want[k] = v
    files["pytorch_model.bin.index.json"] = json.dumps(
        {"metadata": {}, "weight_map": wm}).encode()
    return files, want


def check_want(mnt, want):
    for k, v in want.items():
        assert open(os.path.join(mnt, *k.split(".")), "rb").read() == \
            tbytes(v), k


def test_hub_bin_only(d, mnt):
    """hf://ORG/NAME of a repo with only .bin files: its index; and
    hf://ORG/NAME/FILE.bin: that file."""
    from fixtures import world
    files, want = bin_repo(d)
    with world(d) as w:
        w.hub.push(w.hub.repo("org/old-model"),
                   dict(files, **{"README.md": b"x", "config.json": b"{}"}))
        p = T.mount_fg("hf://org/old-model", mnt)
        try:
            check_want(mnt, want)
        finally:
            T.stop_fg(p, mnt)
        p = T.mount_fg("hf://org/old-model/pytorch_model-00002-of-00002.bin",
                       mnt)
        try:
            assert sorted(os.listdir(os.path.join(mnt, "model", "layers"))) \
                == ["1"], os.listdir(os.path.join(mnt, "model", "layers"))
        finally:
            T.stop_fg(p, mnt)


def test_s3_bin(d, mnt):
    """s3://BUCKET/PREFIX/ holding .bin shards and their index."""
    files, want = bin_repo(d)
    with s3server.creds(d) as sw:
        for name, data in files.items():
            sw.put("models", "old/" + name, data)
        p = T.mount_fg("s3://models/old/", mnt)
        try:
            check_want(mnt, want)
        finally:
            T.stop_fg(p, mnt)


# ---- hostile files -------------------------------------------------------

def refused(path, mnt, *words):
    """inspect and mount both refuse path, naming it and the words."""
    r = subprocess.run([T.STFS, "inspect", path], capture_output=True,
                       timeout=60)
    err = r.stderr.decode(errors="replace")
    assert r.returncode != 0, "accepted: %s" % r.stdout[:500]
    assert os.path.basename(path) in err, err
    for w in words:
        assert w in err, "%r not in %s" % (w, err)
    r = subprocess.run([T.STFS, "mount", path, mnt], capture_output=True,
                       timeout=60)
    assert r.returncode != 0 and not T.is_mount(mnt), r.stderr
    return err


def zip_with_pickle(path, pkl, storages=None):
    """A torch-shaped zip: archive/data.pkl and archive/data/KEY."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pkl)
        for k, v in (storages or {}).items():
            z.writestr("archive/data/" + k, v)
        z.writestr("archive/version", "3\n")
    return path


def tensor_pickle(numel, offset, size, stride):
    """data.pkl of {'w': _rebuild_tensor_v2(storage '0', ...)}, written
    with opcodes by hand (torch cannot write a bad one)."""
    def uni(s):
        return b"X" + struct.pack("<I", len(s)) + s.encode()

    def num(v):
        return b"\x8a\x08" + struct.pack("<Q", v)
    return (b"\x80\x02}(" + uni("w") +
            b"ctorch._utils\n_rebuild_tensor_v2\n((" + uni("storage") +
            b"ctorch\nFloatStorage\n" + uni("0") + uni("cpu") + num(numel) +
            b"tQ" + num(offset) + num(size) + b"\x85" + num(stride) +
            b"\x85\x89ccollections\nOrderedDict\n)RtRu.")


def test_os_system_not_run(d, mnt):
    flag = os.path.join(d, "PWNED")

    class Evil:
        def __reduce__(self):
            return (os.system, ("touch " + flag,))
    path = os.path.join(d, "evil.pt")
    torch.save({"w": torch.ones(2), "evil": Evil()}, path)
    for legacy in (False, True):
        if legacy:
            torch.save({"w": torch.ones(2), "evil": Evil()}, path,
                       _use_new_zipfile_serialization=False)
        r = subprocess.run([T.STFS, "inspect", path], capture_output=True)
        assert r.returncode == 0, r.stderr
        assert b"posix.system" in r.stdout or b"os.system" in r.stdout, \
            r.stdout
        p = T.mount_fg(path, mnt)
        try:
            assert sorted(os.listdir(mnt)) == ["%header.json", "w"], \
                os.listdir(mnt)
            assert open(os.path.join(mnt, "w"), "rb").read() == \
                tbytes(torch.ones(2))
        finally:
            T.stop_fg(p, mnt)
        assert not os.path.exists(flag), "the pickle's command ran"


def test_deep_nesting(d, mnt):
    o = torch.ones(1)
    for _ in range(150):
        o = [o]
    path = os.path.join(d, "deep.pt")
    torch.save({"x": o}, path)
    refused(path, mnt, "nested deeper", "T4 limits")


def test_memo_abuse(d, mnt):
    # LONG_BINPUT at index 2^32 - 1, and a BINGET of an index never put
    path = zip_with_pickle(os.path.join(d, "memo.pt"),
                           b"\x80\x02}r\xff\xff\xff\xff.")
    refused(path, mnt, "memo index past the limit", "P3 memo")
    path = zip_with_pickle(os.path.join(d, "memo2.pt"),
                           b"\x80\x02}q\x00h\x07.")
    refused(path, mnt, "never put", "P3 memo")


def test_unknown_opcode(d, mnt):
    path = zip_with_pickle(os.path.join(d, "op.pt"), b"\x80\x02}\xff.")
    refused(path, mnt, "unknown opcode", "P1 opcode")


def test_truncated_zip(d, mnt):
    src = os.path.join(d, "ok.pt")
    torch.save({"w": torch.randn(100, 100)}, src)
    data = open(src, "rb").read()
    for cut in (len(data) // 2, len(data) - 30, 100):
        path = os.path.join(d, "cut%d.pt" % cut)
        with open(path, "wb") as f:
            f.write(data[:cut])
        refused(path, mnt)


def test_compressed(d, mnt):
    src = os.path.join(d, "ok.pt")
    torch.save({"w": torch.randn(10, 10)}, src)
    path = os.path.join(d, "deflated.pt")
    with zipfile.ZipFile(src) as zi, \
            zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zo:
        for info in zi.infolist():
            zo.writestr(info.filename, zi.read(info.filename))
    err = refused(path, mnt, "compressed", "Z5 stored-only")
    assert "ok/data.pkl" in err or "ok/data/0" in err or "ok/" in err, err


def test_storage_too_small(d, mnt):
    cases = [
        (tensor_pickle(10, 2, 5, 2), 40, "T3 tensor-bounds"),
        (tensor_pickle(10, 0, 11, 1), 40, "T3 tensor-bounds"),
        (tensor_pickle(10, 0, 2, 1), 36, "T2 storage"),
        (tensor_pickle(1 << 62, 0, 2, 1), 40, "T2 storage"),
        (tensor_pickle(10, 0, 1 << 62, 4), 40, "T3 tensor-bounds"),
        (tensor_pickle(10, 0, 2, 1 << 62), 40, "T3 tensor-bounds"),
        (tensor_pickle(10, (1 << 63) - 1, 2, 1), 40, "T3 tensor-bounds"),
    ]
    for i, (pkl, n, rule) in enumerate(cases):
        path = zip_with_pickle(os.path.join(d, "small%d.pt" % i), pkl,
                               {"0": b"\0" * n})
        refused(path, mnt, rule, '"w"')


def test_http(d, mnt):
    root = os.path.join(d, "www")
    os.mkdir(root)
    # 64 MiB of storage ahead of the directory: the mount must not
    # fetch it
    path = make_ckpt(d, os.path.join(root, "ck.pt"), False, 64 << 20)
    obj = load(path)
    ng = Nginx(os.path.join(d, "ng"), root)
    try:
        p = T.mount_fg(ng.url("ck.pt"), mnt, "-o", "nocache")
        try:
            rr = ng.ranges()
            n_mount = len(rr)
            assert 1 <= n_mount <= 3, rr
            fetched = sum(b - a + 1 for a, b in rr)
            assert fetched < (4 << 20), rr
            print("  http: %d range requests at mount" % n_mount)
            compare(obj, mnt)
        finally:
            T.stop_fg(p, mnt)
    finally:
        ng.stop()


def test_http_many_storages(d, mnt):
    """48 storages of 2 MiB over a URL: every local header is read (no two
    within one read), 16 reads at a time; every tensor right, and the
    same file refused alike when one header lies."""
    root = os.path.join(d, "www")
    os.mkdir(root)
    path = os.path.join(root, "many.bin")
    g = torch.Generator().manual_seed(9)
    sd = {"layers.%d.weight" % i: torch.rand(512 * 1024, generator=g)
          for i in range(48)}
    torch.save(sd, path)
    ng = Nginx(os.path.join(d, "ng"), root)
    try:
        p = T.mount_fg(ng.url("many.bin"), mnt, "-o", "nocache")
        try:
            for k, t in sd.items():
                got = open(os.path.join(mnt, *k.split(".")), "rb").read()
                assert got == tbytes(t), "%s differs" % k
        finally:
            T.stop_fg(p, mnt)
        # a local header that names another file, in the 40th storage:
        # refused, naming it, whichever read of the batch found it
        with open(path, "rb") as f:
            b = bytearray(f.read())
        name = b"many/data/39"
        pos = b.index(name)     # its local header's, before the directory
        assert b[pos - 30:pos - 26] == b"PK\x03\x04"
        b[pos + len(name) - 2:pos + len(name)] = b"x9"
        with open(os.path.join(root, "bad.bin"), "wb") as f:
            f.write(b)
        r = stfs("inspect", ng.url("bad.bin"))
        assert r.returncode == 1, r
        assert "many/data/39" in r.stderr and "Z4" in r.stderr, r.stderr
    finally:
        ng.stop()


# ---- issue 35: crafted files that went wrong -----------------------------

def test_zip_gap(d, mnt):
    """64 bytes after a storage's data: torch.load reads it right; the
    local and the remote mount refuse it alike (Z6), never serving the
    inserted bytes."""
    root = os.path.join(d, "www")
    os.makedirs(root, exist_ok=True)
    good = os.path.join(d, "good.pt")
    torch.save({"a": torch.arange(64, dtype=torch.float32),
                "b": torch.arange(32, dtype=torch.float32)}, good)
    with zipfile.ZipFile(good) as z:
        rec = [n for n in z.namelist() if n.endswith("/data/0")][0]
    path = H.zip_insert_gap(good, os.path.join(root, "gap.pt"), rec,
                            b"\xab" * 64)
    assert torch.load(path)["a"].equal(torch.arange(64,
                                                    dtype=torch.float32))
    refused(path, mnt, "Z6 record-bounds", "gap", rec)
    shutil.copyfile(good, os.path.join(root, "good.pt"))
    ng = Nginx(os.path.join(d, "ng"), root)
    try:
        for opts in ("nocache,block_size=64K", "nocache"):
            r = subprocess.run([T.STFS, "mount", ng.url("gap.pt"), mnt, "-o",
                                opts], capture_output=True, timeout=60)
            err = r.stderr.decode()
            assert r.returncode != 0 and not T.is_mount(mnt), err
            assert "Z6 record-bounds" in err and "gap" in err, err
        p = T.mount_fg(ng.url("good.pt"), mnt, "-o", "nocache,block_size=64K")
        try:
            assert open(os.path.join(mnt, "a"), "rb").read() == \
                tbytes(torch.arange(64, dtype=torch.float32))
        finally:
            T.stop_fg(p, mnt)
    finally:
        ng.stop()


def test_view_size_limit(d, mnt):
    """Views with stride 0 over a 1-byte storage, 2^61-1 elements each:
    left out with the reason (view-size), never a wrapped size; one of
    1000 elements (a fair expand) is served."""
    for n in (1, 4, 8):
        path = zip_with_pickle(os.path.join(d, "expand%d.pt" % n),
                               H.pickle_expand(n), {"0": b"\x07"})
        info = T.inspect_json(path)
        text = json.dumps(info)
        assert text.count("view-size") == n, text[:2000]
        p = T.mount_fg(path, mnt)
        try:
            assert "ok" in os.listdir(mnt), os.listdir(mnt)
            assert not os.path.exists(os.path.join(mnt, "t0"))
            assert open(os.path.join(mnt, "ok"), "rb").read() == b"\x07"
            st = os.stat(os.path.join(mnt, "%model.safetensors"))
            assert st.st_size < 4096, st.st_size
            with open(os.path.join(mnt, "%model.safetensors"), "rb") as f:
                assert len(f.read()) == st.st_size
        finally:
            T.stop_fg(p, mnt)
    path = zip_with_pickle(os.path.join(d, "fair.pt"), H.pickle_dict(
        [(H.key_str("e"), H.val_tensor("0", 1, 0, (1000,), (0,),
                                       "ByteStorage"))]), {"0": b"\x07"})
    p = T.mount_fg(path, mnt)
    try:
        assert open(os.path.join(mnt, "e"), "rb").read() == b"\x07" * 1000
    finally:
        T.stop_fg(p, mnt)


def test_complex_views(d, mnt):
    """Transposed complex128 and complex64 tensors are gathered by their
    element size (16, 8); the rest mounts."""
    g = torch.Generator().manual_seed(3)
    t = torch.randn(3, 4, dtype=torch.complex128, generator=g)
    path = os.path.join(d, "cplx.pt")
    # big enough (1 MiB, 512 KiB) that the kernel reads them in several
    # requests, at offsets inside the view: each one's bytes come from
    # the gather, never from past its buffer
    big = torch.randn(256, 256, dtype=torch.complex128, generator=g)
    torch.save({"c128": t.t(), "c64": t.to(torch.complex64).t(),
                "c128_strided": t[:, ::2], "ok": torch.ones(2),
                "big128": big.t(), "big64": big.to(torch.complex64).t()},
               path)
    obj = torch.load(path)
    p = T.mount_fg(path, mnt)
    try:
        # first, reads that start inside the view (nothing cached yet)
        want = tbytes(obj["big128"])
        fd = os.open(os.path.join(mnt, "big128"), os.O_RDONLY)
        try:
            for off in (16, 131072 + 48, 700000, len(want) - 4096):
                got = os.pread(fd, 8192, off)
                assert got == want[off:off + 8192], off
        finally:
            os.close(fd)
        for k, v in obj.items():
            assert open(os.path.join(mnt, k), "rb").read() == tbytes(v), k
        assert os.getxattr(os.path.join(mnt, "c128"),
                           "user.pytorch.type") == b"torch.complex128"
    finally:
        T.stop_fg(p, mnt)


def test_dict_keys(d, mnt):
    """Keys Python holds equal are one key, the first naming it and the
    last one's value winning, as torch.load's dict; a float key is named
    as repr() writes it; a NaN key is left out with the reason."""
    path = zip_with_pickle(os.path.join(d, "keys.pt"), H.pickle_dict([
        (H.key_int(1), H.val_tensor("0")),
        (H.key_bool(True), H.val_tensor("1")),
        (H.key_float(1.0), H.val_tensor("2")),
        (H.key_float(-0.0), H.val_tensor("0")),
        (H.key_int(0), H.val_tensor("1")),
        (H.key_float(2.5), H.val_tensor("3")),
        (H.key_float(1e-05), H.val_tensor("3")),
        (H.key_float(float("nan")), H.val_tensor("3")),
        (H.key_str("s"), H.val_tensor("0")),
        (H.key_str("s"), H.val_tensor("2"))]),
        {k: bytes([i + 1]) * 4 for i, k in enumerate("0123")})
    obj = torch.load(path)
    want = {repr(k): v for k, v in obj.items() if k == k}
    assert sorted(want) == ["'s'", "-0.0", "1", "1e-05", "2.5"], want
    p = T.mount_fg(path, mnt)
    try:
        names = set()
        for k, v in obj.items():
            if k != k:
                continue                  # NaN: left out
            f = os.path.join(mnt, *str(k).split("."))
            if os.path.isdir(f):
                f = os.path.join(f, "%self")
            assert open(f, "rb").read() == tbytes(v), k
            names.add(os.getxattr(f, "user.safetensors.name").decode())
        assert names == {"1", "-0.0", "2.5", "1e-05", "s"}, names
    finally:
        T.stop_fg(p, mnt)
    r = subprocess.run([T.STFS, "inspect", path], capture_output=True)
    out = r.stdout.decode()
    assert r.returncode == 0 and "a dict entry whose key is a float NaN" \
        in out and "object of class a dict" not in out, out


def test_byteorder_refused_clean(d, mnt):
    """A byteorder record that is not "little": refused (T1), and a
    sanitizer build reports nothing (the data.pkl buffer is freed)."""
    good = os.path.join(d, "bo.pt")
    torch.save({"w": torch.ones(3)}, good)
    path = H.zip_with_byteorder(good, os.path.join(d, "big.pt"), b"big")
    err = refused(path, mnt, "T1 checkpoint-layout", "byteorder")
    assert "Sanitizer" not in err, err
    ok = H.zip_with_byteorder(good, os.path.join(d, "little.pt"), b"little")
    p = T.mount_fg(ok, mnt)
    try:
        assert open(os.path.join(mnt, "w"), "rb").read() == \
            tbytes(torch.ones(3))
    finally:
        T.stop_fg(p, mnt)


def test_frame_past_end(d, mnt):
    """A protocol-4 FRAME claiming 2^40 bytes: torch.load refuses it as
    truncated, and so does stfs (P5)."""
    path = zip_with_pickle(os.path.join(d, "frame.pt"),
                           H.pickle_frame_past_end())
    try:
        torch.load(path)
        assert False, "torch.load accepted it"
    except Exception as e:  # noqa: BLE001 (torch's own error types vary)
        assert "truncated" in str(e) or "frame" in str(e).lower(), e
    refused(path, mnt, "P5 truncated", "FRAME")


def main():
    try:
        return T.run_tests([
            test_zip, test_legacy, test_bare_tensor, test_shards,
            test_hub_bin_only, test_s3_bin,
            test_os_system_not_run, test_deep_nesting, test_memo_abuse,
            test_unknown_opcode, test_truncated_zip, test_compressed,
            test_storage_too_small, test_http, test_http_many_storages,
            test_zip_gap,
            test_view_size_limit, test_complex_views, test_dict_keys,
            test_byteorder_refused_clean, test_frame_past_end])
    finally:
        s3server.stop_shared()


if __name__ == "__main__":
    sys.exit(main())

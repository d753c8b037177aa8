#!/usr/bin/env python3
"""test_repo.py: %repo/, every file of the source under its own path.

- a diffusers-style repository (model_index.json, no weights at the top,
  component folders) and a sentence-transformers one, from a local
  directory and from hf:// (the tests' Hub emulator): `ls -R` and the
  sha256 of every file equal the source's; user.stfs.revision;
- PyTorch reads from %repo/: torch.load of pytorch_model.bin, and
  torch.UntypedStorage.from_file (the private mapping safe_open makes)
  of a safetensors shard, every tensor equal;
- -o repo: the repository at the root, the tensors under %tensors/;
  -o files=GLOB; `stfs inspect --files`;
- hostile names (a symlink out of the directory, "..", control bytes,
  NUL, over 255 bytes, case-only twins, NFC and NFD twins, a file that
  is also a folder):
  left out with a warning, never a name outside the mount;
- small files: fetched and verified at mount, so config.json is read with
  no request; a small file whose bytes do not match its checksum is EIO,
  the log naming the file and both checksums; a listing that lies about
  a weight's size is EIO;
- a large LFS file read whole through %repo/ is checked against its
  sha256 at its end: the bytes served by a tampered server make the read
  that ends the file EIO (logged with both digests), and every later
  open; a part read of it, or an untampered file, reads as ever;
- two repos listing the same sha256s, one serving tampered bytes, with
  one cache= in both orders: the good repo's tensor and %repo/ reads are
  its own bytes, the bad one's whole reads EIO (blocks are shared by
  content within one repo on one endpoint, never across them);
- S3's checksums (the tests' server gives them with its s3extras
  middleware): a small file checked against the answer's full-object
  x-amz-checksum-sha256 or -crc64nvme, else its MD5 ETag; SSE-KMS and
  SSE-C objects' ETags are not MD5s (served unchecked, said so); a
  composite checksum is not used; a mismatch or a malformed value: EIO,
  logged; what inspect --files says of each; and AWS's own client
  (@aws-sdk/client-s3, tests/loaders/s3js) validates the same checksums itself;
- hostile servers and names (issue 40): Hub oids that are not 40/64
  lower-case hex (ESC, BEL, short, upper case) refuse their file and
  never reach the output, a missing oid serves the file unchecked (said
  so), C1 and bidi controls in names are printed quoted, a lazy non-LFS
  file is checked against its blob sha1 when read whole; an S3 object
  replaced between listing and GET by a server that ignores If-Match is
  refused; -o repo with a file named %tensors; more files than the
  open-file soft limit; inspect --files with --json is a usage error;
- st_blksize (`stat -c %o`) of a remote mount's files, tensor files and
  %repo/ files alike, is the block size (-o block_size=, 4 MiB by
  default); a local mount's stays 64 KiB.
"""
import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402
from fixtures import env, fake_cache, stfs, world  # noqa: E402
from repofix import (S3World, diffusers_repo, st_model_repo, tree,  # noqa
                     tree_of, write_tree)

REV = "user.stfs.revision"


def check_repo(root, files):
    """root shows exactly files ({path: bytes}), byte for byte."""
    got = tree(root)
    want = tree_of(files)
    assert got == want, (sorted(set(got) ^ set(want)))[:10]
    ls = subprocess.run(["ls", "-R", root], capture_output=True, text=True)
    assert ls.returncode == 0, ls.stderr
    assert os.getxattr(root, REV)
    for p in files:
        assert os.getxattr(os.path.join(root, p), REV)


def test_local_diffusers(d, mnt):
    files = diffusers_repo()
    src = write_tree(os.path.join(d, "src"), files)
    p = T.mount_fg(src, mnt)
    try:
        check_repo(os.path.join(mnt, "%repo"), files)
        # there by name; listed with the virtual files (show_virtual)
        assert "%repo" not in os.listdir(mnt)
        st = os.stat(os.path.join(mnt, "%repo", "unet"))
        assert st.st_mode & 0o777 == 0o555
        st = os.stat(os.path.join(mnt, "%repo", "model_index.json"))
        assert st.st_mode & 0o777 == 0o444
        try:
            open(os.path.join(mnt, "%repo", "README.md"), "w")
            raise AssertionError("a %repo/ file opened for writing")
        except OSError:
            pass
    finally:
        T.stop_fg(p, mnt)
    p = T.mount_fg(src, mnt, "-o", "show_virtual")
    try:
        assert "%repo" in os.listdir(mnt)
    finally:
        T.stop_fg(p, mnt)


def torch_checks(root, files):
    """torch.load of the .bin and from_file of the safetensors shard."""
    import torch
    from repofix import _arrays  # the same arrays the repo was written with
    want = _arrays(3, ["embeddings.word_embeddings.weight",
                       "encoder.layer.0.attention.self.query.weight"])
    sd = torch.load(os.path.join(root, "pytorch_model.bin"))
    for k, v in want.items():
        assert np.array_equal(sd[k].numpy(), v), k
    path = os.path.join(root, "model.safetensors")
    size = os.path.getsize(path)
    s = torch.UntypedStorage.from_file(path, shared=False, nbytes=size) \
        if hasattr(torch, "UntypedStorage") else None
    raw = bytes(s) if s is not None else open(path, "rb").read()
    import json
    import struct
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    for k, v in want.items():
        b, e = hdr[k]["data_offsets"]
        a = np.frombuffer(raw[8 + n + b:8 + n + e], dtype=np.float32)
        assert np.array_equal(a.reshape(v.shape), v), k
    assert len(raw) == len(files["model.safetensors"])


def test_local_st_model(d, mnt):
    files = st_model_repo()
    src = write_tree(os.path.join(d, "src"), files)
    p = T.mount_fg(src, mnt)
    try:
        root = os.path.join(mnt, "%repo")
        check_repo(root, files)
        torch_checks(root, files)
        # the shard and the tensor file: the same bytes of one source
        t = os.path.join(mnt, "embeddings", "word_embeddings", "weight")
        with open(t, "rb") as f:
            tb = f.read()
        assert tb in files["model.safetensors"]
    finally:
        T.stop_fg(p, mnt)
    r = stfs("inspect", "--files", src)
    assert r.returncode == 0, r.stderr
    lines = [x.split("\t") for x in r.stdout.splitlines()]
    assert [x[0] for x in lines] == sorted(files), lines
    for x in lines:
        assert int(x[1]) == len(files[x[0]]) and x[3] == "lazy", x


def test_repo_root(d, mnt):
    """-o repo: the repository is the root, the tensors %tensors/."""
    files = st_model_repo()
    src = write_tree(os.path.join(d, "src"), files)
    p = T.mount_fg(src, mnt, "-o", "repo")
    try:
        want = tree_of(files)
        got = [x for x in tree(mnt) if not x[0].startswith("%tensors")]
        assert got == want
        assert sorted(os.listdir(mnt)) == sorted(
            ["%tensors"] + list({f.split("/")[0] for f in files}))
        assert os.path.exists(os.path.join(mnt, "%tensors", "%header.json"))
        assert os.path.exists(os.path.join(
            mnt, "%tensors", "embeddings", "word_embeddings", "weight"))
        assert os.path.realpath(os.path.join(mnt, "%tensors", "..")) == \
            os.path.realpath(mnt)
        torch_checks(mnt, files)
    finally:
        T.stop_fg(p, mnt)
    p = T.mount_fg(src, mnt, "-o", "files=*.json", "-o", "files=vocab.txt")
    try:
        shown = sorted(x[0] for x in tree(os.path.join(mnt, "%repo"))
                       if x[1] == "file")
        assert shown == sorted(f for f in files if f.endswith(".json") or
                               f == "vocab.txt"), shown
    finally:
        T.stop_fg(p, mnt)
    r = stfs("mount", "-o", "files=nothing*", src, mnt)
    assert r.returncode == 1 and "files=" in r.stderr and \
        "matches no file" in r.stderr, r.stderr


def test_repo_root_tensors_name(d, mnt):
    """-o repo with a repository file (or folder) named %tensors: the
    root lists %tensors once, the tensors' folder; the file is left out
    with a warning (under %repo/, without -o repo, it is shown)."""
    files = dict(st_model_repo(), **{"%tensors": b"a file",
                                     "%tensors2/x": b"x"})
    src = write_tree(os.path.join(d, "src"), files)
    os.makedirs(os.path.join(d, "src2"))
    src2 = write_tree(os.path.join(d, "src2"), dict(
        st_model_repo(), **{"%tensors/x.json": b"{}"}))
    for source, what in ((src, "%tensors"), (src2, "%tensors/x.json")):
        p = T.mount_fg(source, mnt, "-o", "repo")
        try:
            names = os.listdir(mnt)
            assert names.count("%tensors") == 1, names
            assert os.path.isdir(os.path.join(mnt, "%tensors"))
            assert os.path.exists(os.path.join(mnt, "%tensors",
                                               "%header.json"))
            if source == src:
                with open(os.path.join(mnt, "%tensors2", "x"), "rb") as f:
                    assert f.read() == b"x"
        finally:
            T.unmount(mnt)
            log = p.communicate(timeout=10)[1].decode()
        assert "%%repo/: %s is left out: its name is the tensors' " \
            "folder" % what in log, log
    p = T.mount_fg(src, mnt)
    try:
        with open(os.path.join(mnt, "%repo", "%tensors"), "rb") as f:
            assert f.read() == b"a file"
    finally:
        T.stop_fg(p, mnt)


def test_many_files(d, mnt):
    """A local directory of more files than the open-file soft limit (a
    lazy %repo/ file stays open until unmount): every file reads, the
    daemon raising its soft limit to the hard one."""
    import resource
    files = dict(st_model_repo(), **{"many/f%03d.txt" % i: b"%d\n" % i
                                     for i in range(600)})
    src = write_tree(os.path.join(d, "src"), files)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1024:
        raise AssertionError("the hard open-file limit is %d" % hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    try:
        p = T.mount_fg(src, mnt)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        bad = []
        for i in range(600):
            try:
                with open(os.path.join(mnt, "%repo", "many",
                                       "f%03d.txt" % i), "rb") as f:
                    if f.read() != b"%d\n" % i:
                        bad.append((i, "bytes"))
            except OSError as e:
                bad.append((i, e.errno))
        assert not bad, (len(bad), bad[:5])
    finally:
        T.stop_fg(p, mnt)


NFC, NFD = "caf\u00e9.json", "cafe\u0301.json"     # one name to macOS


def test_hostile_local(d, mnt):
    src = os.path.join(d, "src")
    files = {"model.safetensors": st_model_repo()["model.safetensors"],
             "A.json": b"1", "a.json": b"2", "ctl\x01name": b"3",
             "ok/x.txt": b"4", NFC: b"nfc", NFD: b"nfd"}
    write_tree(src, files)
    with open(os.path.join(d, "secret"), "wb") as f:
        f.write(b"secret")
    os.symlink(os.path.join(d, "secret"), os.path.join(src, "out"))
    os.symlink("ok/x.txt", os.path.join(src, "in"))
    p = T.mount_fg(src, mnt)
    try:
        root = os.path.join(mnt, "%repo")
        names = sorted(os.listdir(root))
        assert "out" not in names and "ctl\x01name" not in names
        assert names.count("A.json") + names.count("a.json") == 1
        assert (NFC in names) + (NFD in names) == 1, names
        with open(os.path.join(root, "in"), "rb") as f:
            assert f.read() == b"4"
    finally:
        T.stop_fg(p, mnt)
    r = stfs("inspect", "--files", src)
    assert "out\t0\t-\tleft out: a symbolic link" in r.stdout, r.stdout
    assert "only in case" in r.stdout and "control byte" in r.stdout
    assert "\tleft out: its path is another's under Unicode " \
        "normalization (NFC and NFD) or case" in r.stdout, r.stdout
    assert "warning: %repo/" in r.stderr
    # --files is its own table: with --json (or -q), a usage error
    for other in ("--json", "-q"):
        r = stfs("inspect", "--files", other, src)
        assert r.returncode == 2 and "--files is a table of its own: " \
            "not with " + other in r.stderr and not r.stdout, (other, r)


def test_swapped_for_link(d, mnt):
    """A file, or a folder, swapped for a symbolic link out of the
    directory after the mount is refused at open: the mount never serves
    a byte from outside the directory, even of the listed size."""
    src = os.path.join(d, "src")
    secret = b"the secret bytes"
    write_tree(src, {"model.safetensors": st_model_repo()["model.safetensors"],
                     "notes.txt": b"x" * len(secret),
                     "sub/notes.txt": b"y" * len(secret)})
    outside = os.path.join(d, "outside")
    os.mkdir(outside)
    with open(os.path.join(outside, "notes.txt"), "wb") as f:
        f.write(secret)
    p = T.mount_fg(src, mnt)
    try:
        root = os.path.join(mnt, "%repo")
        assert os.path.getsize(os.path.join(root, "notes.txt")) == len(secret)
        os.unlink(os.path.join(src, "notes.txt"))
        os.symlink(os.path.join(outside, "notes.txt"),
                   os.path.join(src, "notes.txt"))
        os.rename(os.path.join(src, "sub"), os.path.join(d, "sub.old"))
        os.symlink(outside, os.path.join(src, "sub"))
        for name in ("notes.txt", "sub/notes.txt"):
            try:
                with open(os.path.join(root, name), "rb") as f:
                    got = f.read()
            except OSError:
                continue
            assert secret not in got, name
            raise AssertionError("%s opened through a link: %r" % (name, got))
    finally:
        T.stop_fg(p, mnt)


def hub_repo(w, rid, files):
    return w.hub.push(w.hub.repo(rid), files)


def test_hub_layouts(d, mnt):
    """Both layouts over hf://; small files fetched at mount, verified,
    read after it with no request."""
    with world(d) as w:
        for rid, files in (("org/pipe", diffusers_repo()),
                           ("org/st", st_model_repo())):
            sha_ = hub_repo(w, rid, files)
            p = T.mount_fg("hf://" + rid, mnt)
            try:
                root = os.path.join(mnt, "%repo")
                n = w.hub.log.count()
                with open(os.path.join(root, "model_index.json" if
                                       "pipe" in rid else "config.json"),
                          "rb") as f:
                    f.read()
                assert w.hub.log.count() == n
                ngx = w.nginx_log().count("\n")
                with open(os.path.join(root, "README.md"), "rb") as f:
                    f.read()
                assert w.nginx_log().count("\n") == ngx, "a request"
                check_repo(root, files)
                assert os.getxattr(root, REV) == sha_.encode()
                if "st" in rid:
                    torch_checks(root, files)
            finally:
                T.stop_fg(p, mnt)
            r = stfs("inspect", "--files", "hf://" + rid)
            assert r.returncode == 0, r.stderr
            for line in r.stdout.splitlines():
                path, size, how, kind = line.split("\t")
                data = files[path]
                assert int(size) == len(data)
                if path.endswith(".safetensors") or path.endswith(".bin"):
                    assert how == "sha256:" + hashlib.sha256(
                        data).hexdigest() and kind == "lazy", line
                else:
                    assert how.startswith("sha1-blob:") and \
                        kind == "small", line


def blksizes(mnt, paths):
    """`stat -c %o` of each of paths under mnt."""
    r = subprocess.run(["stat", "-c", "%o"] + [os.path.join(mnt, x)
                                                for x in paths],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return [int(x) for x in r.stdout.split()]


def test_blksize(d, mnt):
    """st_blksize: the block size reads are best made in."""
    files = st_model_repo()
    paths = ["embeddings/word_embeddings/weight", "%repo/config.json",
             "%repo/model.safetensors", "%repo/1_Pooling/config.json"]
    src = write_tree(os.path.join(d, "src"), files)
    p = T.mount_fg(src, mnt)
    try:
        assert blksizes(mnt, paths) == [65536] * 4
    finally:
        T.stop_fg(p, mnt)
    with world(d) as w:
        hub_repo(w, "org/st", files)
        for opts, block in (((), 4 << 20),
                            (("-o", "block_size=1M"), 1 << 20)):
            p = T.mount_fg("hf://org/st", mnt, *opts)
            try:
                got = blksizes(mnt, paths)
                assert got == [block] * 4, (opts, got)
            finally:
                T.stop_fg(p, mnt)


def test_hub_lfs_whole(d, mnt):
    """A whole read of an LFS file whose bytes do not match its sha256:
    EIO at its end, logged; the same file untampered reads whole."""
    rng = np.random.default_rng(7)
    big = rng.integers(0, 256, 5 << 20, dtype=np.uint8).tobytes()
    files = dict(st_model_repo(), **{"onnx/model.onnx_data": big})
    path = "%repo/onnx/model.onnx_data"
    with world(d) as w:
        hub_repo(w, "org/good", files)
        sha_ = hub_repo(w, "org/bad", files)
        with open(os.path.join(w.files, "org/bad", sha_,
                               "onnx/model.onnx_data"), "r+b") as f:
            f.seek(3 << 20)
            f.write(b"tampered")
        bad = big[:3 << 20] + b"tampered" + big[(3 << 20) + 8:]
        p = T.mount_fg("hf://org/good", mnt)
        try:
            with open(os.path.join(mnt, path), "rb") as f:
                assert f.read() == big
            r = subprocess.run(["sha256sum", os.path.join(mnt, path)],
                               capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
        finally:
            T.stop_fg(p, mnt)
        p = T.mount_fg("hf://org/bad", mnt)
        try:
            # a part read: nothing to check
            with open(os.path.join(mnt, path), "rb") as f:
                assert f.read(4096) == bad[:4096]
        finally:
            T.stop_fg(p, mnt)
        p = T.mount_fg("hf://org/bad", mnt)
        try:
            got, err = b"", None
            with open(os.path.join(mnt, path), "rb", buffering=0) as f:
                try:
                    while True:
                        b = f.read(1 << 20)
                        if not b:
                            break
                        got += b
                except OSError as e:
                    err = e.errno
            assert err == 5, (err, len(got))
            assert got == bad[:len(got)] and len(got) < len(bad)
            T.expect_errno(os.path.join(mnt, path), 5, 10)
        finally:
            T.unmount(mnt)
            log = p.communicate(timeout=10)[1].decode()
        want = "expected sha256 %s, computed %s" % (
            hashlib.sha256(big).hexdigest(),
            hashlib.sha256(bad).hexdigest())
        assert "onnx/model.onnx_data" in log and want in log, log


def read_whole(path):
    """(bytes read, errno or None) of path read to its end."""
    got, err = [], None
    with open(path, "rb", buffering=0) as f:
        try:
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                got.append(b)
        except OSError as e:
            err = e.errno
    return b"".join(got), err


def test_hub_shared_sha256(d, mnt):
    """Two repos list the same sha256s, one serving tampered bytes past
    their first 64 KiB (so from the blocks, not the open's head); with
    one cache= for every mount, in both orders (and the first mounted
    again last): the good repo's tensor and %repo/ reads are the good
    bytes, the bad one's tensor read is what its server sends and its
    whole reads EIO: a file's blocks are shared within a repo, never
    across repos.  The same repo through another origin of the endpoint
    (localhost for 127.0.0.1) fetches its bytes again."""
    rng = np.random.default_rng(11)
    w_ = rng.integers(0, 256, 2 << 20, dtype=np.uint8).tobytes()
    st = open(T.write_st(os.path.join(d, "m.safetensors"),
                         [("x.w", "U8", [len(w_)], w_)]), "rb").read()
    onnx = rng.integers(0, 256, 2 << 20, dtype=np.uint8).tobytes()
    files = {"config.json": b'{"hidden_size": 8}\n',
             "model.safetensors": st, "onnx/model.onnx_data": onnx}
    at = 1 << 20                        # in a tensor's bytes, in block 0

    def tamper(b):
        return b[:at] + b"tampered" + b[at + 8:]
    bad_st = tamper(st)
    bad_w = bad_st[len(st) - len(w_):]
    assert bad_w != w_
    with world(d) as w:
        hub_repo(w, "org/good", files)
        sha_ = hub_repo(w, "org/bad", files)
        for f in ("model.safetensors", "onnx/model.onnx_data"):
            with open(os.path.join(w.files, "org/bad", sha_, f), "r+b") as o:
                o.seek(at)
                o.write(b"tampered")
        for n, order in enumerate((("good", "bad", "good"),
                                   ("bad", "good", "bad"))):
            cache = os.path.join(d, "cache%d" % n)
            for rid in order:
                p = T.mount_fg("hf://org/" + rid, mnt, "-o", "cache=" + cache)
                try:
                    t = os.path.join(mnt, "x/w")
                    st_p = os.path.join(mnt, "%repo/model.safetensors")
                    on_p = os.path.join(mnt, "%repo/onnx/model.onnx_data")
                    with open(t, "rb") as f:
                        got = f.read()
                    if rid == "good":
                        assert got == w_, (order, rid)
                        assert read_whole(st_p) == (st, None), (order, rid)
                        assert read_whole(on_p) == (onnx, None), (order, rid)
                    else:
                        assert got == bad_w, (order, rid)
                        for path, good in ((st_p, st), (on_p, onnx)):
                            b, err = read_whole(path)
                            assert err == 5 and len(b) < len(good), \
                                (order, rid, path, err, len(b))
                            assert b == tamper(good)[:len(b)]
                finally:
                    T.stop_fg(p, mnt)
        # another origin of the same endpoint: another trust domain
        cache = os.path.join(d, "cache0")
        before = len(w.nginx_log().splitlines())
        w.hub.page = 100        # (its Link names 127.0.0.1: one page)
        with env(HF_ENDPOINT=w.hub.url.replace("127.0.0.1", "localhost")):
            p = T.mount_fg("hf://org/good", mnt, "-o", "cache=" + cache)
            try:
                assert read_whole(os.path.join(
                    mnt, "%repo/onnx/model.onnx_data")) == (onnx, None)
            finally:
                T.stop_fg(p, mnt)
        asked = 0
        for line in w.nginx_log().splitlines()[before:]:
            m = re.search(r"/model\.onnx_data \d+ bytes=(\d+)-(\d+)", line)
            if m:
                asked += int(m.group(2)) - int(m.group(1)) + 1
        # (the same origin asks 64 KiB, the open's)
        assert asked >= len(onnx) - (64 << 10), asked

def test_hub_faults(d, mnt):
    """A small file whose bytes do not match: EIO, logged; a weight
    whose listed size lies: EIO; hostile names left out."""
    with world(d) as w:
        files = st_model_repo()
        files.update({"../evil": b"x", "a\x01b": b"x", "n\0ul": b"x",
                      "L" * 300: b"x", "dup/A": b"1", "dup/a": b"2",
                      "f": b"file", "f/g": b"under a file"})
        sha_ = hub_repo(w, "org/bad", files)
        on_disk = os.path.join(w.files, "org/bad", sha_)
        with open(os.path.join(on_disk, "config.json"), "r+b") as f:
            f.write(b"X")
        with open(os.path.join(on_disk, "pytorch_model.bin"), "ab") as f:
            f.write(b"longer than listed")
        p = T.mount_fg("hf://org/bad", mnt)
        try:
            root = os.path.join(mnt, "%repo")
            T.expect_errno(os.path.join(root, "config.json"), 5, 10)
            T.expect_errno(os.path.join(root, "pytorch_model.bin"), 5, 10)
            names = os.listdir(root)
            assert not any(".." in n or n == "evil" for n in names)
            assert not any(n.startswith("a") and "b" in n and len(n) == 3
                           for n in names)
            assert not any(len(n) > 255 for n in names)
            assert len(os.listdir(os.path.join(root, "dup"))) == 1
            assert "f" in names and os.path.isfile(os.path.join(root, "f"))
            with open(os.path.join(root, "tokenizer.json"), "rb") as f:
                assert f.read() == files["tokenizer.json"]
        finally:
            T.unmount(mnt)
            err = p.communicate(timeout=10)[1].decode()
        assert "config.json" in err and "checksum mismatch" in err, err
        assert "expected sha1-blob" in err and "computed" in err, err
        assert "pytorch_model.bin" in err, err


C1_NAME = "c1\u009b[2J.txt"           # CSI: clears a terminal's screen
BIDI_NAME = "bidi\u202egnp.exe.txt"   # shows as "bidi" "txt.exe.png"
ESC_OID = "\x1b]0;owned\x07" + "a" * 30  # 40 bytes: sets a title


def test_hub_hostile_oids(d, mnt):
    """What a hostile Hub names: an oid that is not 40 (blob) or 64 (LFS)
    lower-case hex digits is malformed, the file refused (EIO), and it
    never reaches the output (ESC, BEL); a file listed with no oid is
    served unchecked, said so; names with a C1 or a bidirectional control
    are printed quoted (\\u009b, \\u202e) by inspect --files and the
    mount's warnings; a file lazy for its weight-format name (not LFS)
    is checked against its git blob sha1 at the end of a whole read."""
    files = st_model_repo()
    bad = {"esc.json": b'{"e": 1}', "short.json": b'{"s": 1}',
           "lfsbad.json": b'{"l": 1}', C1_NAME: b"c1", BIDI_NAME: b"bidi"}
    files.update(bad)
    files.update({"none.json": b'{"n": 1}', "w.npy": b"npy-one",
                  "ok.npy": b"npy-two"})

    def edit(entries):
        for e in entries:
            if e["path"] in ("esc.json", C1_NAME):
                e["oid"] = ESC_OID
            elif e["path"] in ("short.json", BIDI_NAME):
                e["oid"] = "abc"
            elif e["path"] == "lfsbad.json":
                e["lfs"] = {"oid": "Z" * 64, "size": 8}
            elif e["path"] == "none.json":
                del e["oid"]
        return entries

    with world(d) as w:
        w.hub.edit_tree = edit
        sha_ = hub_repo(w, "org/oids", files)
        with open(os.path.join(w.files, "org/oids", sha_, "w.npy"),
                  "r+b") as f:
            f.write(b"NPY")         # served bytes that are not the blob's
        p = T.mount_fg("hf://org/oids", mnt)
        try:
            root = os.path.join(mnt, "%repo")
            for name in bad:
                T.expect_errno(os.path.join(root, name), 5, 10)
            with open(os.path.join(root, "none.json"), "rb") as f:
                assert f.read() == files["none.json"]
            with open(os.path.join(root, "ok.npy"), "rb") as f:
                assert f.read() == files["ok.npy"]
            T.expect_errno(os.path.join(root, "w.npy"), 5, 10)
        finally:
            T.unmount(mnt)
            log = p.communicate(timeout=10)[1].decode("utf-8", "replace")
        r = stfs("inspect", "--files", "hf://org/oids")
    assert r.returncode == 0, r.stderr
    for out in (log, r.stdout, r.stderr):
        for raw in ("\x1b", "\x07", "\u009b", "\u202e"):
            assert raw not in out, (raw, out)
    assert "\\u009b" in r.stdout and "\\u202e" in r.stdout, r.stdout
    assert "\\u009b" in log and "\\u202e" in log, log
    lines = {x.split("\t")[0]: x.split("\t") for x in r.stdout.splitlines()}
    for name in ("esc.json", "short.json", "lfsbad.json"):
        assert lines[name][2] == "-" and lines[name][3].startswith(
            "refused: its checksum in the Hub's listing is malformed"), \
            lines[name]
    assert lines["none.json"][2:] == [
        "unchecked (the listing gives no oid)", "small"], lines["none.json"]
    assert lines["w.npy"][2].startswith("sha1-blob:") and \
        lines["w.npy"][3] == "lazy", lines["w.npy"]
    assert "none.json: served unchecked (the listing gives no oid)" in log, \
        log
    assert "w.npy" in log and "expected sha1-blob" in log, log


def test_hub_offline(d, mnt):
    """HF_HUB_OFFLINE=1: %repo/ is the Hugging Face cache's snapshot,
    every file, with no server at all."""
    files = st_model_repo()
    cache = os.path.join(d, "hub")
    fake_cache(cache, "org/off", files)
    with env(HF_HUB_OFFLINE="1", HF_HUB_CACHE=cache,
             HF_ENDPOINT="http://127.0.0.1:9", HF_TOKEN=None):
        p = T.mount_fg("hf://org/off", mnt)
        try:
            root = os.path.join(mnt, "%repo")
            check_repo(root, files)
            torch_checks(root, files)
        finally:
            T.stop_fg(p, mnt)


def test_s3_layouts(d, mnt):
    """Both layouts under s3:// prefixes: every object under the prefix,
    small ones verified against their single-part MD5 ETag."""
    with S3World(d) as s3:
        for prefix, files in (("pipe/", diffusers_repo()),
                              ("st/", st_model_repo())):
            s3.put_tree(prefix, files)
            src = "s3://repos/" + prefix
            p = T.mount_fg(src, mnt)
            try:
                root = os.path.join(mnt, "%repo")
                check_repo(root, files)
                if prefix == "st/":
                    torch_checks(root, files)
            finally:
                T.stop_fg(p, mnt)
            r = stfs("inspect", "--files", src)
            assert r.returncode == 0, r.stderr
            for line in r.stdout.splitlines():
                path, size, how, kind = line.split("\t")
                assert how == "md5:" + hashlib.md5(files[path]).hexdigest()
                assert kind == ("lazy" if path.endswith(
                    (".safetensors", ".bin")) else "small"), line


def crc64nvme(data):
    """CRC-64/NVME, bit by bit (reflected 0x9a6c9329ac4bc9b5, all ones in
    and out), written here from its definition."""
    c = 0xffffffffffffffff
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x9a6c9329ac4bc9b5 if c & 1 else c >> 1
    return c ^ 0xffffffffffffffff


# (path, what the server's s3extras middleware answers for it, how stfs
# checks it: "sha256", "crc64nvme", "md5", "-", "unchecked (...)", or
# "EIO crc64nvme"/"EIO sha256"/"EIO base64": refused)
S3_SUMS = [
    ("config.json", "sha256", "sha256"),
    ("tokenizer.json", "crc64nvme", "crc64nvme"),
    ("vocab.txt", None, "md5"),
    ("tampered.json", "crc64nvme,tamper", "EIO crc64nvme"),
    ("sha_tampered.json", "sha256,tamper", "EIO sha256"),
    ("kms.json", "kms", "unchecked (SSE-KMS ETag)"),
    ("ssec.json", "ssec", "unchecked (SSE-C ETag)"),
    ("kms_sum.json", "kms,crc64nvme", "crc64nvme"),
    ("kms_tampered.json", "kms,sha256,tamper", "EIO sha256"),
    ("multipart.json", "composite", "-"),
    ("bad_b64.json", "badb64", "EIO base64"),
]


def s3_sum_want(how, data):
    """What inspect's verify column is for a file checked as how."""
    if how == "sha256":
        return "sha256:" + hashlib.sha256(data).hexdigest()
    if how == "crc64nvme":
        return "crc64nvme:%016x" % crc64nvme(data)
    if how == "md5":
        return "md5:" + hashlib.md5(data).hexdigest()
    return how


def test_s3_checksums(d, mnt):
    """S3's flexible checksums and SSE ETags: a small file is checked
    against the full-object SHA-256 or CRC64NVME of the GET's answer
    (x-amz-checksum-mode, which must be signed), else a single-part MD5
    ETag unless the object is SSE-KMS/SSE-C encrypted (served unchecked,
    and said so); a composite checksum is never taken as the whole
    file's; a checksum that does not match or does not parse: EIO."""
    files = st_model_repo()
    for i, (path, _, _) in enumerate(S3_SUMS):
        files.setdefault(path, b'{"file": %d, "path": "%s"}\n'
                         % (i, path.encode()))
    with S3World(d) as s3:
        s3.put_tree("sums/", files, {p: m for p, m, _ in S3_SUMS if m})
        # the server refuses x-amz-checksum-mode unsigned, as AWS does
        # (so a mount that reads the checksums has signed it)
        key = "/repos/sums/config.json"
        st, _, body = s3.sw.request(
            "GET", key, unsigned={"x-amz-checksum-mode": "ENABLED"})
        assert st == 403 and b"not signed" in body, (st, body)
        st, h, _ = s3.sw.request(
            "GET", key, headers={"x-amz-checksum-mode": "ENABLED"})
        assert st == 200 and h["x-amz-checksum-sha256"], (st, h)
        src = "s3://repos/sums/"
        p = T.mount_fg(src, mnt)
        try:
            root = os.path.join(mnt, "%repo")
            for path, _, how in S3_SUMS:
                fp = os.path.join(root, path)
                if how.startswith("EIO"):
                    T.expect_errno(fp, 5, 10)
                    continue
                r = subprocess.run(["sha256sum", fp], capture_output=True,
                                   text=True)
                assert r.returncode == 0, (path, r.stderr)
                assert r.stdout.split()[0] == hashlib.sha256(
                    files[path]).hexdigest(), path
            with open(os.path.join(root, "model.safetensors"), "rb") as f:
                assert f.read() == files["model.safetensors"]
        finally:
            T.unmount(mnt)
            log = p.communicate(timeout=10)[1].decode()
        for path, _, how in S3_SUMS:
            if how.startswith("EIO") and how != "EIO base64":
                kind = how.split()[1]
                bad = files[path] + b"!"        # what the server summed
                exp = s3_sum_want(kind, bad).split(":")[1]
                got = s3_sum_want(kind, files[path]).split(":")[1]
                want = "%%repo/%s: checksum mismatch: expected %s %s, " \
                       "computed %s" % (path, kind, exp, got)
                assert want in log, (want, log)
            elif how.startswith("unchecked"):
                assert "%%repo/%s: served %s" % (path, how) in log, log
        assert "%repo/bad_b64.json: the answer's x-amz-checksum-sha256 " \
            "is not a base64 sha256" in log, log
        r = stfs("inspect", "--files", src)
        assert r.returncode == 0, r.stderr
        seen = {}
        for line in r.stdout.splitlines():
            path, size, verify, kind = line.split("\t")
            seen[path] = (verify, kind)
        for path, _, how in S3_SUMS:
            verify, kind = seen[path]
            if how.startswith("EIO"):
                assert kind.startswith("refused: "), (path, kind)
            else:
                assert kind == "small", (path, kind)
                assert verify == s3_sum_want(how, files[path]), (path, verify)
        # the weights are lazy: their listing's MD5 ETag, as before
        assert seen["model.safetensors"][1] == "lazy"


S3JS = os.path.join(TESTS_DIR, "loaders", "s3js")


def bucket_env(b, d):
    """The environment of an unsigned client of s3server.Bucket b."""
    return env(AWS_ENDPOINT_URL=b.url, AWS_ENDPOINT_URL_S3=None,
               AWS_ACCESS_KEY_ID=None, AWS_SECRET_ACCESS_KEY=None,
               AWS_SESSION_TOKEN=None, AWS_REGION=None,
               AWS_DEFAULT_REGION=None, AWS_PROFILE=None,
               AWS_SHARED_CREDENTIALS_FILE=os.path.join(d, "no"),
               AWS_CONFIG_FILE=os.path.join(d, "no"),
               XDG_CACHE_HOME=os.path.join(d, "xdg"))


def test_s3_swapped(d, mnt):
    """A small object replaced between the listing and its GET, by a
    server that ignores If-Match: its answer's own ETag (and MD5) match
    the new bytes, but not the listing's ETag: refused (EIO), logged
    "changed since it was listed", and inspect --files says so."""
    import s3server
    b = s3server.Bucket({"m/model.safetensors":
                         st_model_repo()["model.safetensors"],
                         "m/config.json": b'{"v": 1}',
                         "m/vocab.txt": b"a\nb\n"})
    b.swap["m/config.json"] = b'{"v": 2}'
    try:
        with bucket_env(b, d):
            p = T.mount_fg("s3://b/m/", mnt)
            try:
                root = os.path.join(mnt, "%repo")
                T.expect_errno(os.path.join(root, "config.json"), 5, 10)
                with open(os.path.join(root, "vocab.txt"), "rb") as f:
                    assert f.read() == b"a\nb\n"
            finally:
                T.unmount(mnt)
                log = p.communicate(timeout=10)[1].decode()
            r = stfs("inspect", "--files", "s3://b/m/")
        gets = [x for x in b.seen if x[0] == "GET" and
                x[1].endswith("/config.json")]
        assert gets and gets[0][2].get("If-Match") == \
            s3server.Bucket.etag(b'{"v": 1}'), gets
    finally:
        b.stop()
    assert "config.json: changed since it was listed" in log, log
    line = [x for x in r.stdout.splitlines() if x.startswith("config.json")]
    assert line and "\trefused: changed since it was listed" in line[0], \
        r.stdout


def test_s3_checksums_aws_client(d):
    """AWS's own client (@aws-sdk/client-s3, pinned in tests/loaders/s3js) gets
    each object of test_s3_checksums with ChecksumMode ENABLED and
    validates the answer's checksum itself: the middleware's checksums
    are AWS's (the tampered ones are refused by it, as by stfs)."""
    node = shutil.which("node")
    mods = os.path.join(S3JS, "node_modules", "@aws-sdk", "client-s3")
    if not node or not os.path.isdir(mods):
        if os.environ.get("CI") == "true":
            raise AssertionError("node or %s missing (npm ci in %s)" % (
                mods, S3JS))
        print("     (node or @aws-sdk/client-s3 missing: npm ci in %s)" %
              S3JS)
        return
    files = {p: b'{"n": %d}\n' % i for i, (p, _, _) in enumerate(S3_SUMS)}
    with S3World(d) as s3:
        s3.put_tree("js/", files, {p: m for p, m, _ in S3_SUMS if m})
        r = subprocess.run([node, os.path.join(S3JS, "check.mjs"),
                            s3.sw.endpoint, "repos"] +
                           ["js/" + p for p, _, _ in S3_SUMS],
                           capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    got = {j["key"][3:]: j for j in map(json.loads, r.stdout.splitlines())}
    for path, mode, how in S3_SUMS:
        j = got[path]
        if how in ("EIO sha256", "EIO crc64nvme"):
            assert not j["ok"] and "Checksum mismatch" in j["error"], j
            continue
        if how == "EIO base64":
            continue            # the SDK's own handling of a bad value
        assert j["ok"] and j["length"] == len(files[path]), j
        if how in ("sha256", "crc64nvme"):
            want = s3_sum_want(how, files[path]).split(":")[1]
            assert bytes.fromhex(want) == base64.b64decode(
                j[how]), (j, want)
        if "kms" in (mode or ""):
            assert j["sse"] == "aws:kms", j
        if how == "-":
            assert j["type"] == "COMPOSITE", j


if __name__ == "__main__":
    sys.exit(T.run_tests([test_local_diffusers, test_local_st_model,
                          test_repo_root, test_repo_root_tensors_name,
                          test_many_files,
                          test_hostile_local,
                          test_swapped_for_link,
                          test_hub_layouts, test_blksize, test_hub_lfs_whole,
                          test_hub_shared_sha256,
                          test_hub_faults, test_hub_hostile_oids,
                          test_hub_offline,
                          test_s3_layouts, test_s3_checksums,
                          test_s3_swapped,
                          test_s3_checksums_aws_client]))

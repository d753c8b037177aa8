#!/usr/bin/env python3
"""test_mount.py: stfs mounted for real and read through the kernel.

Every valid file of the real-world corpus (tests/data/real, whose
expected.json gives each tensor's dtype, shape, offsets and sha256) is
mounted and every tensor read back and compared; every invalid one must be
refused with nothing left mounted or running.  Then the contract: stat,
xattrs (getfattr), the header file, mmap, EROFS, ENOENT, options, the
background and mount-helper forms, laziness on a sparse 100 GB file, and a
source truncated while mounted.
"""
import errno
import hashlib
import json
import mmap
import os
import random
import shutil
import stat
import struct
import subprocess
import sys
import time

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402


def inspect(src, *extra):
    r = subprocess.run([T.STFS, "inspect", "--json"] + list(extra) + [src],
                       capture_output=True)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return json.loads(r.stdout)


def paths_by_name(src, *extra):
    return {t["name"]: t["path"] for t in inspect(src, *extra)["tensors"]}


def getfattr(path):
    """All user.* xattrs via the getfattr tool, as bytes values."""
    r = subprocess.run(["getfattr", "-d", "-e", "hex", "--absolute-names",
                        path], capture_output=True)
    assert r.returncode == 0, r.stderr
    out = {}
    for line in r.stdout.decode().splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            out[k] = bytes.fromhex(v[2:]) if v.startswith("0x") else b""
    return out


# ---- the real-world corpus ------------------------------------------------

def test_real_file(rel, src, info, mnt):
    paths = paths_by_name(src)
    p = T.mount_fg(src, mnt)
    try:
        # ls -R: every tensor and the header file, nothing else
        files = []
        for root, dirs, names in os.walk(mnt):
            files += [os.path.relpath(os.path.join(root, n), mnt)
                      for n in names]
        assert sorted(files) == sorted(list(paths.values()) +
                                       ["%header.json"]), "tree differs"
        src_stat = os.stat(src)
        for t in info["tensors"]:
            fp = os.path.join(mnt, paths[t["name"]])
            st = os.stat(fp)
            assert stat.S_ISREG(st.st_mode)
            assert stat.S_IMODE(st.st_mode) == 0o444
            assert st.st_size == t["end"] - t["begin"]
            assert st.st_blocks == (st.st_size + 511) // 512
            assert st.st_uid == os.getuid()
            assert int(st.st_mtime) == int(src_stat.st_mtime)
            with open(fp, "rb") as f:
                data = f.read()
            assert hashlib.sha256(data).hexdigest() == t["sha256"], \
                "bytes of %s" % t["name"]
            x = {k: os.getxattr(fp, k) for k in os.listxattr(fp)}
            assert x["user.safetensors.dtype"] == t["dtype"].encode()
            assert x["user.safetensors.shape"] == \
                json.dumps(t["shape"], separators=(",", ":")).encode()
            assert x["user.safetensors.data_offsets"] == \
                json.dumps(t["data_offsets"], separators=(",", ":")).encode()
            assert x["user.safetensors.file_offset"] == \
                str(t["begin"]).encode()
            assert x["user.safetensors.name"] == t["name"].encode()
        n, hdr = T.header_of(src)
        with open(os.path.join(mnt, "%header.json"), "rb") as f:
            assert f.read() == hdr
        root = {k: os.getxattr(mnt, k) for k in os.listxattr(mnt)}
        meta = info.get("metadata") or {}
        assert root == {"user.safetensors.metadata." + k: v.encode()
                        for k, v in meta.items()}, root
        # inode numbers are stable across mounts
        inos = {p2: os.stat(os.path.join(mnt, p2)).st_ino
                for p2 in paths.values()}
    finally:
        T.stop_fg(p, mnt)
    p = T.mount_fg(src, mnt)
    try:
        for p2, ino in inos.items():
            assert os.stat(os.path.join(mnt, p2)).st_ino == ino
    finally:
        T.stop_fg(p, mnt)


def test_real_corpus(mnt):
    n = 0
    for rel, src, info in T.real_files():
        if not info["valid"]:
            continue
        try:
            test_real_file(rel, src, info, mnt)
        except Exception as e:
            raise AssertionError("%s: %s" % (rel, e)) from e
        n += 1
    assert n >= 60, "only %d valid files" % n


def invalid_files(d):
    """The corpus's invalid files, and written here the equivalents of four
    found in repositories that state no licence (tests/data/real/README.md):
    an empty file, a 2-byte CRLF placeholder, a header length past the end
    of the file and a header with duplicate keys."""
    t = '{"dtype":"U8","shape":[1],"data_offsets":[%d,%d]}'
    dup = "{%s}" % ",".join('"%s":%s' % (k, t % (i, i + 1)) for i, k in
                            enumerate(["key01", "key02", "key01", "key03",
                                       "key01", "key03"]))
    made = {"zero_len.safetensors": b"",
            "crlf_placeholder.safetensors": b"\r\n",
            "header_size_too_big.safetensors":
                struct.pack("<Q", 255) + b"{" + b" " * 7,
            "duplicate_keys.safetensors":
                struct.pack("<Q", len(dup)) + dup.encode() + bytes(6)}
    out = [src for _, src, info in T.real_files() if not info["valid"]]
    for name, data in made.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
        out.append(os.path.join(d, name))
    return out


def test_invalid_real_world(d, mnt):
    srcs = invalid_files(d)
    assert len(srcs) >= 5
    for src in srcs:
        rel = os.path.basename(src)
        r = subprocess.run([T.STFS, "mount", src, mnt], capture_output=True,
                           timeout=30)
        err = r.stderr.decode(errors="replace")
        assert r.returncode == 1, (rel, r.returncode, err)
        assert err.startswith("stfs: %s: " % src), err
        assert "(R" in err, "names the rule: " + err
        assert not T.is_mount(mnt)
        assert not T.daemons_for(mnt)
        r = subprocess.run([T.STFS, "inspect", src], capture_output=True)
        assert r.returncode == 1 and r.stderr.decode().startswith("stfs: ")
        r = subprocess.run([T.STFS, "inspect", "-q", src],
                           capture_output=True)
        assert r.returncode == 1 and r.stdout == b"" and r.stderr == b""


# ---- the contract, on generated files --------------------------------------

def sample(d):
    rnd = random.Random(7)
    tensors = []
    for name, dt, shape in [
            ("model.embed_tokens.weight", "BF16", [64, 32]),
            ("model.layers.0.self_attn.q_proj.weight", "F32", [32, 32]),
            ("model.layers.0.mlp.up_proj.weight", "F16", [16, 32]),
            ("model.layers.0.mlp.up_proj", "F32", [3]),   # prefix tensor
            ("model.norm.weight", "F32", [32]),
            ("scalar", "I64", []),
            ("empty", "U8", [0]),
            ("lerobot/action/max", "F64", [2])]:
        tensors.append((name, dt, shape,
                        bytes(rnd.getrandbits(8)
                              for _ in range(T.nbytes(dt, shape)))))
    return T.write_st(os.path.join(d, "m.safetensors"), tensors,
                      metadata={"format": "pt", "a.b": "c d"}), tensors


def test_contract(d, mnt):
    src, tensors = sample(d)
    paths = paths_by_name(src)
    assert paths["model.layers.0.mlp.up_proj"] == \
        "model/layers/0/mlp/up_proj/%self"
    assert paths["lerobot/action/max"] == "lerobot%2Faction%2Fmax"
    p = T.mount_fg(src, mnt)
    try:
        # ls -R through the real tool
        r = subprocess.run(["ls", "-R", mnt], capture_output=True)
        assert r.returncode == 0 and b"q_proj" in r.stdout
        # dd | sha256sum of one tensor, and getfattr -d
        fp = os.path.join(mnt, "model/embed_tokens/weight")
        r = subprocess.run("dd if='%s' bs=1M status=none | sha256sum" % fp,
                           shell=True, capture_output=True)
        assert r.stdout.split()[0].decode() == \
            hashlib.sha256(tensors[0][3]).hexdigest()
        x = getfattr(fp)
        assert x["user.safetensors.dtype"] == b"BF16"
        assert x["user.safetensors.shape"] == b"[64,32]"
        assert x["user.safetensors.data_offsets"] == b"[0,4096]"
        assert x["user.safetensors.name"] == b"model.embed_tokens.weight"
        n, _ = T.header_of(src)
        assert x["user.safetensors.file_offset"] == str(8 + n).encode()
        # scalar shape and empty tensor
        sp = os.path.join(mnt, "scalar")
        assert os.getxattr(sp, "user.safetensors.shape") == b"[]"
        assert os.stat(os.path.join(mnt, "empty")).st_size == 0
        with open(os.path.join(mnt, "empty"), "rb") as f:
            assert f.read() == b""
        # root metadata xattrs
        assert os.getxattr(mnt, "user.safetensors.metadata.format") == b"pt"
        assert os.getxattr(mnt, "user.safetensors.metadata.a.b") == b"c d"
        # dirs
        st = os.stat(os.path.join(mnt, "model"))
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o555
        assert st.st_nlink == 2 + 3    # layers, embed_tokens, norm: dirs
        # reads at any offset and size, and past the end
        data = tensors[1][3]
        fp = os.path.join(mnt, "model/layers/0/self_attn/q_proj/weight")
        fd = os.open(fp, os.O_RDONLY)
        try:
            rnd = random.Random(1)
            for _ in range(300):
                off = rnd.randrange(0, len(data) + 10)
                size = rnd.randrange(0, 5000)
                assert os.pread(fd, size, off) == data[off:off + size]
            assert os.pread(fd, 100, len(data)) == b""
            assert os.pread(fd, 100, 1 << 40) == b""
            # mmap of the tensor file
            with mmap.mmap(fd, 0, prot=mmap.PROT_READ) as mm:
                assert mm[:] == data
        finally:
            os.close(fd)
        # ENOENT, twice (the second from the negative cache)
        for _ in range(2):
            try:
                os.stat(os.path.join(mnt, "model/nope"))
                raise AssertionError("stat of a missing name worked")
            except FileNotFoundError:
                pass
        try:
            os.stat(os.path.join(mnt, "scalar/x"))
            raise AssertionError("a tensor file is not a directory")
        except NotADirectoryError:
            pass
        # EROFS on everything that writes
        fp = os.path.join(mnt, "scalar")
        for what, fn in [
                ("open for write", lambda: os.open(fp, os.O_WRONLY)),
                ("open rdwr", lambda: os.open(fp, os.O_RDWR)),
                ("create", lambda: os.open(os.path.join(mnt, "new"),
                                           os.O_CREAT | os.O_WRONLY)),
                ("mkdir", lambda: os.mkdir(os.path.join(mnt, "d"))),
                ("unlink", lambda: os.unlink(fp)),
                ("rmdir", lambda: os.rmdir(os.path.join(mnt, "model"))),
                ("rename", lambda: os.rename(fp, fp + "2")),
                ("truncate", lambda: os.truncate(fp, 0)),
                ("chmod", lambda: os.chmod(fp, 0o644)),
                ("utime", lambda: os.utime(fp, (1, 1))),
                ("setxattr", lambda: os.setxattr(fp, "user.x", b"1")),
                ("removexattr", lambda: os.removexattr(
                    fp, "user.safetensors.dtype")),
                ("symlink", lambda: os.symlink("x", os.path.join(mnt, "l"))),
                ("link", lambda: os.link(fp, os.path.join(mnt, "l")))]:
            try:
                fn()
                raise AssertionError(what + " worked")
            except OSError as e:
                assert e.errno == errno.EROFS, (what, e)
        # xattr protocol: size-0 probe, ERANGE, ENODATA
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        n = libc.getxattr(fp.encode(), b"user.safetensors.dtype", None, 0)
        assert n == 3
        buf = ctypes.create_string_buffer(2)
        assert libc.getxattr(fp.encode(), b"user.safetensors.dtype", buf,
                             2) == -1 and ctypes.get_errno() == errno.ERANGE
        n = libc.listxattr(fp.encode(), None, 0)
        assert n == len(b"\0".join(
            x.encode() for x in os.listxattr(fp))) + 1
        assert libc.listxattr(fp.encode(), buf, 2) == -1 and \
            ctypes.get_errno() == errno.ERANGE
        try:
            os.getxattr(fp, "user.nope")
            raise AssertionError("missing xattr")
        except OSError as e:
            assert e.errno == errno.ENODATA
        # the header file
        _, hdr = T.header_of(src)
        with open(os.path.join(mnt, "%header.json"), "rb") as f:
            assert f.read() == hdr
        json.loads(hdr)
        # statfs
        sv = os.statvfs(mnt)
        assert sv.f_flag & os.ST_RDONLY and sv.f_namemax == 255
        # mount shows the source, fuse.stfs, ro
        with open("/proc/self/mounts") as f:
            line = [ln for ln in f if ln.split()[1] == mnt][0].split()
        assert line[0] == os.path.realpath(src), line
        assert line[2] == "fuse.stfs" and "ro" in line[3].split(","), line
    finally:
        T.stop_fg(p, mnt)


def test_flat_and_owner(d, mnt):
    src, tensors = sample(d)
    p = T.mount_fg(src, mnt, "-o", "flat,uid=1234,gid=4321,umask=027")
    try:
        names = sorted(os.listdir(mnt))
        assert "model.embed_tokens.weight" in names
        assert "lerobot%2Faction%2Fmax" in names
        st = os.stat(os.path.join(mnt, "model.norm.weight"))
        assert (st.st_uid, st.st_gid) == (1234, 4321)
        assert stat.S_IMODE(st.st_mode) == 0o440
        assert stat.S_IMODE(os.stat(mnt).st_mode) == 0o550
        with open(os.path.join(mnt, "model.norm.weight"), "rb") as f:
            assert f.read() == tensors[4][3]
    finally:
        T.stop_fg(p, mnt)


def bdi_readahead(mnt):
    with open("/proc/self/mountinfo") as f:
        for line in f:
            x = line.split()
            if x[4] == os.path.realpath(mnt):
                dev = x[2]
    with open("/sys/class/bdi/%s/read_ahead_kb" % dev) as f:
        return int(f.read())


def test_readahead(d, mnt):
    """readahead= reaches the mount's read_ahead_kb (written after INIT,
    which can only lower it): the kernel's read requests are that large."""
    src = T.write_st(os.path.join(d, "r.safetensors"),
                     [("w", "U8", [8 << 20], os.urandom(8 << 20))])
    for opts, want in (([], 1024), (["-o", "readahead=4096"], 4096),
                       (["-o", "readahead=256"], 256)):
        p = T.mount_fg(src, mnt, *opts)
        try:
            assert bdi_readahead(mnt) == want, (opts, bdi_readahead(mnt))
        finally:
            T.stop_fg(p, mnt)
    p = subprocess.Popen([T.STFS, "mount", "-d", src, mnt],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    T._procs.append(p)
    T._mounts.append(mnt)
    assert T.wait_mount(mnt, p)
    with open(os.path.join(mnt, "w"), "rb") as f:
        assert len(f.read()) == 8 << 20
    T.unmount(mnt)
    err = p.communicate(timeout=10)[1].decode(errors="replace")
    reads = err.count("opcode: READ (15)")
    assert 8 <= reads <= 12, "%d READ requests for 8 MiB" % reads


def count_reads(src, mnt, opts, size):
    """Read the whole tensor w through a -d mount: (READ requests, bdi
    readahead, sha256 of the bytes)."""
    p = subprocess.Popen([T.STFS, "mount", "-d"] + opts + [src, mnt],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    T._procs.append(p)
    T._mounts.append(mnt)
    assert T.wait_mount(mnt, p)
    ra = bdi_readahead(mnt)
    with open(os.path.join(mnt, "w"), "rb") as f:
        h = hashlib.sha256(f.read()).hexdigest()
    T.unmount(mnt)
    err = p.communicate(timeout=30)[1].decode(errors="replace")
    return err.count("opcode: READ (15)"), ra, h


def test_max_request(d, mnt):
    """max_request= (and the default) ask the kernel at INIT for read
    requests larger than libfuse's 1 MiB, as far as the kernel's
    fs.fuse.max_pages_limit allows; an explicit value raises that limit
    (root).  The readahead follows unless readahead= is given."""
    limit_path = "/proc/sys/fs/fuse/max_pages_limit"
    data = os.urandom(64 << 20)
    want = hashlib.sha256(data).hexdigest()
    src = T.write_st(os.path.join(d, "r.safetensors"),
                     [("w", "U8", [len(data)], data)])
    with open(limit_path) as f:
        old = f.read().strip()
    try:
        with open(limit_path, "w") as f:
            f.write("256\n")
        # the kernel's default limit: libfuse's 1 MiB requests
        reads, ra, h = count_reads(src, mnt, [], len(data))
        assert h == want and ra == 1024 and 60 <= reads <= 72, (reads, ra)
        # asked for: the limit is raised, 8 MiB requests
        reads, ra, h = count_reads(src, mnt, ["-o", "max_request=8192"],
                                   len(data))
        assert h == want and ra == 8192 and 7 <= reads <= 12, (reads, ra)
        with open(limit_path) as f:
            assert f.read().strip() == "2048"
        # a limit someone raised: the default asks for up to 16 MiB
        reads, ra, h = count_reads(src, mnt, [], len(data))
        assert h == want and ra == 8192 and 7 <= reads <= 12, (reads, ra)
        with open(limit_path, "w") as f:
            f.write("8192\n")
        reads, ra, h = count_reads(src, mnt, [], len(data))
        assert h == want and ra == 16384 and 3 <= reads <= 6, (reads, ra)
        # readahead= wins over the request size
        reads, ra, h = count_reads(src, mnt, ["-o", "readahead=1024"],
                                   len(data))
        assert h == want and ra == 1024 and 60 <= reads <= 72, (reads, ra)
    finally:
        with open(limit_path, "w") as f:
            f.write(old + "\n")
    for bad in ("0", "3", "262141", "1k", "-4", ""):
        r = subprocess.run([T.STFS, "mount", "-o", "max_request=" + bad,
                            src, mnt], capture_output=True, timeout=30)
        assert r.returncode == 2 and b"max_request=" in r.stderr and \
            b"give 4 to 262140 (KiB)" in r.stderr, (bad, r)
        assert not T.is_mount(mnt)


def test_background_and_helper(d, mnt):
    src, tensors = sample(d)
    # stfs mount returns once the mount is live
    r = subprocess.run([T.STFS, "mount", src, mnt], capture_output=True,
                       timeout=30)
    T._mounts.append(mnt)
    assert r.returncode == 0, r.stderr
    assert os.listdir(mnt), "ls right after stfs mount"
    pids = T.daemons_for(mnt)
    assert len(pids) == 1, pids
    r = subprocess.run([T.STFS, "umount", mnt], capture_output=True)
    assert r.returncode == 0, r.stderr
    assert not T.is_mount(mnt)
    assert T.wait_gone(mnt), "daemon left after unmount"
    # INIT is answered before stfs mount returns: a max_read= that libfuse
    # once refused at INIT made the mount vanish after "success"
    r = subprocess.run([T.STFS, "mount", "-o", "max_read=65536", src, mnt],
                       capture_output=True, timeout=30)
    T._mounts.append(mnt)
    assert r.returncode == 0, r.stderr
    time.sleep(0.5)
    assert T.is_mount(mnt) and len(T.daemons_for(mnt)) == 1
    with open(os.path.join(mnt, "model/norm/weight"), "rb") as f:
        assert f.read() == tensors[4][3]
    T.unmount(mnt)
    assert T.wait_gone(mnt)
    # the mount-helper form that mount.fuse3 uses, options after
    r = subprocess.run([T.STFS, src, mnt, "-o", "ro,nofail,_netdev,"
                        "x-systemd.automount,flat"], capture_output=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    assert "scalar" in os.listdir(mnt)
    T.unmount(mnt)
    # mount -t fuse.stfs, as fstab does.  mount(8) gives its helper a
    # fixed PATH, so that needs stfs installed (CI installs it); without
    # an identical installed copy, mount -t fuse with the binary's path.
    installed = None
    for b in ("/usr/local/bin", "/usr/bin", "/bin", "/usr/local/sbin"):
        c = os.path.join(b, "stfs")
        if os.path.exists(c):
            with open(c, "rb") as f1, open(T.STFS, "rb") as f2:
                if f1.read() == f2.read():
                    installed = c
            break
    if os.environ.get("STFS_REQUIRE_INSTALLED") == "1":
        assert installed, "stfs under test must be installed for this"
    if installed:
        cmd = ["mount", "-t", "fuse.stfs", src, mnt]
    else:
        cmd = ["mount", "-t", "fuse", os.path.abspath(T.STFS) + "#" + src,
               mnt]
    r = subprocess.run(cmd + ["-o", "ro,allow_other,nofail,_netdev"],
                       capture_output=True, timeout=30)
    T._mounts.append(mnt)
    assert r.returncode == 0, r.stderr
    assert "scalar" in os.listdir(mnt)
    with open("/proc/self/mounts") as f:
        line = [ln for ln in f if ln.split()[1] == mnt][0].split()
    assert line[2] == "fuse.stfs" and "allow_other" in line[3], line
    T.unmount(mnt)


def test_errors_leave_nothing(d, mnt):
    src, _ = sample(d)
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    notdir = os.path.join(d, "file")
    open(notdir, "w").close()
    emptydir = os.path.join(d, "empty")
    os.mkdir(emptydir)
    cases = [
        ([src, os.path.join(d, "missing")], "mountpoint"),
        ([src, notdir], "Not a directory"),
        ([os.path.join(d, "nosuch.safetensors"), mnt], "No such file"),
        ([fifo, mnt], "not a regular file"),
        ([emptydir, mnt], "no *.safetensors"),
        (["-o", "bogus_option", src, mnt], "invalid mount options"),
        (["-o", "uid=abc", src, mnt], "uid=abc: give a user id"),
        (["-o", "uid=-5", src, mnt], "uid=-5: give a user id"),
        (["-o", "gid=4294967295", src, mnt], "gid=4294967295: give a"),
        (["-o", "threads=0", src, mnt], "threads=0: give 1 to 256"),
        (["-o", "threads=-1", src, mnt], "threads=-1: give 1 to 256"),
        (["-o", "threads=4294967297", src, mnt], "threads=4294967297"),
        (["-o", "threads= 2", src, mnt], "threads= 2: give"),
        (["-o", "readahead=0", src, mnt], "readahead=0: give 1 to"),
        (["-o", "readahead=4194304", src, mnt], "readahead=4194304"),
        (["-o", "readahead=4294967297", src, mnt], "readahead=4294967297"),
        (["-o", "umask=999", src, mnt], "umask=999: give an octal mode"),
        (["-o", "umask=1777", src, mnt], "umask=1777"),
        (["-o", "umask=+22", src, mnt], "umask=+22"),
        (["-o", "max_read=4k", src, mnt], "max_read=4k: give a size"),
        ([src], "MOUNTPOINT"),
    ]
    for args, want in cases:
        r = subprocess.run([T.STFS, "mount"] + args, capture_output=True,
                           timeout=30)
        err = r.stderr.decode(errors="replace")
        # a source not there: 3, not found (stfs(1), EXIT STATUS)
        missing = want in ("No such file", "no *.safetensors")
        assert r.returncode in ((3,) if missing else (1, 2)), \
            (args, r.returncode, err)
        assert want in err, (args, err)
        assert not T.is_mount(mnt), args
        assert not T.daemons_for(mnt), args
    # a busy mountpoint
    p = T.mount_fg(src, mnt)
    try:
        r = subprocess.run([T.STFS, "mount", src, mnt], capture_output=True,
                           timeout=30)
        assert r.returncode == 1 and b"busy" in r.stderr, r.stderr
    finally:
        T.stop_fg(p, mnt)
    # nothing left in /tmp by the refused mounts (no temporary files)
    assert sorted(os.listdir(d)) == sorted(["m.safetensors", "fifo", "file",
                                            "empty"])


def test_lazy_sparse(d, mnt):
    """A 100 GB data section mounts at once and nothing of it is read."""
    src = os.path.join(d, "big.safetensors")
    size = 100 * 10**9
    h = json.dumps({"big": {"dtype": "U8", "shape": [size],
                            "data_offsets": [0, size]},
                    "tail": {"dtype": "U8", "shape": [4],
                             "data_offsets": [size, size + 4]}}).encode()
    with open(src, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h)
        f.truncate(8 + len(h) + size + 4)
        f.seek(8 + len(h) + size)
        f.write(b"TAIL")
    t0 = time.time()
    p = T.mount_fg(src, mnt)
    ms = (time.time() - t0) * 1000
    try:
        assert os.stat(os.path.join(mnt, "big")).st_size == size
        with open(os.path.join(mnt, "tail"), "rb") as f:
            assert f.read() == b"TAIL"
        with open(os.path.join(mnt, "big"), "rb") as f:
            f.seek(size - 4096)
            assert f.read() == bytes(4096)
        rss = T.rss_kb(p.pid)
        print("     sparse 100 GB: mounted in %.0f ms, daemon RSS %d KiB"
              % (ms, rss))
        assert rss < 64 * 1024, rss
        assert ms < 5000
    finally:
        T.stop_fg(p, mnt)


def test_truncated_source(d, mnt):
    """Source shrinks while mounted: EIO for lost bytes, daemon lives."""
    rnd = random.Random(3)
    a = bytes(rnd.getrandbits(8) for _ in range(1 << 20))
    b = bytes(rnd.getrandbits(8) for _ in range(1 << 20))
    src = T.write_st(os.path.join(d, "t.safetensors"),
                     [("a", "U8", [len(a)], a), ("b", "U8", [len(b)], b)])
    p = T.mount_fg(src, mnt)
    try:
        n, _ = T.header_of(src)
        os.truncate(src, 8 + n + len(a) + 1000)
        with open(os.path.join(mnt, "a"), "rb") as f:
            assert f.read() == a
        try:
            with open(os.path.join(mnt, "b"), "rb") as f:
                f.seek(8192)
                f.read(65536)
            raise AssertionError("read of lost bytes worked")
        except OSError as e:
            assert e.errno == errno.EIO, e
        assert p.poll() is None, "daemon died"
        with open(os.path.join(mnt, "a"), "rb") as f:
            assert f.read() == a
    finally:
        T.stop_fg(p, mnt)


def test_deleted_and_replaced(d, mnt):
    """The mount keeps serving the bytes it was mounted with."""
    src, tensors = sample(d)
    p = T.mount_fg(src, mnt)
    try:
        other = T.write_st(os.path.join(d, "o.safetensors"),
                           [("x", "U8", [1], b"z")])
        os.rename(other, src)
        with open(os.path.join(mnt, "model/norm/weight"), "rb") as f:
            assert f.read() == tensors[4][3]
        os.unlink(src)
        with open(os.path.join(mnt, "model/embed_tokens/weight"), "rb") as f:
            assert f.read() == tensors[0][3]
    finally:
        T.stop_fg(p, mnt)


def test_signals(d, mnt):
    """SIGTERM and SIGINT unmount cleanly; after kill -9, fusermount3 -u
    recovers and a fresh mount works."""
    src, _ = sample(d)
    import signal
    for sig in (signal.SIGTERM, signal.SIGINT):
        p = T.mount_fg(src, mnt)
        p.send_signal(sig)
        assert p.wait(timeout=10) == 0
        p.stdout.close()
        p.stderr.close()
        assert not T.is_mount(mnt), "still mounted after %s" % sig
    p = T.mount_fg(src, mnt)
    p.kill()
    p.wait()
    p.stdout.close()
    p.stderr.close()
    r = subprocess.run([T.STFS, "mount", src, mnt], capture_output=True)
    assert r.returncode == 1, "mounting over a dead mount must fail"
    assert subprocess.run(["fusermount3", "-u", mnt]).returncode == 0
    p = T.mount_fg(src, mnt)
    try:
        assert "model" in os.listdir(mnt)
    finally:
        T.stop_fg(p, mnt)


def test_hostile_names(d, mnt):
    names = ["a.b", "a.b.c", "a", "a/b", "", ".", "..", "../x", "a..b",
             ".a", "a.", "/", "//etc/passwd", "a\0b", "A.b", "\u00e9",
             "e\u0301", "%header.json", "x.%self", "\x1b]0;t\x07", "%",
             "n" * 100000, "n" * 99999 + "m", "d." * 300,
             "\u00e9" * 128]
    tensors = [(n, "U8", [i + 1], bytes([i % 256]) * (i + 1))
               for i, n in enumerate(names)]
    hdr = {}
    off = 0
    for n, dt, shape, data in tensors:
        hdr[n] = {"dtype": dt, "shape": shape,
                  "data_offsets": [off, off + len(data)]}
        off += len(data)
    raw = json.dumps(hdr).encode()
    src = T.write_st(os.path.join(d, "h.safetensors"), tensors,
                     raw_header=raw)
    for flat in ([], ["--flat"]):
        info = inspect(src, *flat)
        by = {t["name"]: t["path"] for t in info["tensors"]}
        assert len(by) == len(names)
        assert len(set(by.values())) == len(names)
        p = T.mount_fg(src, mnt, *(["-o", "flat"] if flat else []))
        try:
            seen = []
            for root, dirs, files in os.walk(mnt):
                assert os.path.realpath(root).startswith(mnt)
                for f in files:
                    assert len(f.encode()) <= 255
                    seen.append(os.path.relpath(os.path.join(root, f), mnt))
            assert sorted(seen) == sorted(list(by.values()) +
                                          ["%header.json"])
            for n, dt, shape, data in tensors:
                parts = by[n].split("/")
                fd = os.open(mnt, os.O_RDONLY | os.O_DIRECTORY)
                for c in parts[:-1]:   # openat walk: paths may be long
                    nfd = os.open(c, os.O_RDONLY | os.O_DIRECTORY,
                                  dir_fd=fd)
                    os.close(fd)
                    fd = nfd
                try:
                    ffd = os.open(parts[-1], os.O_RDONLY, dir_fd=fd)
                finally:
                    os.close(fd)
                try:
                    assert os.read(ffd, len(data) + 1) == data, n
                    raw = n.encode()
                    if len(raw) <= 65536:
                        assert os.getxattr(
                            ffd, "user.safetensors.name") == raw, n
                    else:   # the kernel's limit for one xattr value
                        try:
                            os.getxattr(ffd, "user.safetensors.name")
                            raise AssertionError("xattr over 64 KiB")
                        except OSError as e:
                            assert e.errno == errno.E2BIG, e
                finally:
                    os.close(ffd)
            first = sorted(os.listdir(mnt))
            assert first == sorted(os.listdir(mnt))
        finally:
            T.stop_fg(p, mnt)


def test_shards(d, mnt):
    one = os.path.join(T.REAL, "jl-nonsharded", "model.safetensors")
    want = {}
    p = T.mount_fg(one, mnt)
    try:
        for name, path in paths_by_name(one).items():
            with open(os.path.join(mnt, path), "rb") as f:
                want[name] = f.read()
    finally:
        T.stop_fg(p, mnt)
    sharded = os.path.join(T.REAL, "jl-sharded")
    for src in (sharded,
                os.path.join(sharded, "model.safetensors.index.json")):
        info = inspect(src)
        assert len(info["tensors"]) == len(want) == 36
        p = T.mount_fg(src, mnt)
        try:
            for t in info["tensors"]:
                fp = os.path.join(mnt, t["path"])
                with open(fp, "rb") as f:
                    assert f.read() == want[t["name"]], t["name"]
                shard = os.getxattr(fp, "user.safetensors.file").decode()
                assert shard == t["file"]
                off = int(os.getxattr(fp, "user.safetensors.file_offset"))
                with open(os.path.join(sharded, shard), "rb") as f:
                    f.seek(off)
                    assert f.read(t["bytes"]) == want[t["name"]]
            with open(os.path.join(mnt, "%header.json")) as f:
                idx = json.load(f)
            assert len(idx["weight_map"]) == 36
            assert idx["metadata"]["total_size"] == 4305
            assert os.getxattr(mnt, "user.safetensors.metadata.format") \
                == b"pt"
        finally:
            T.stop_fg(p, mnt)


def test_shard_refusals(d, mnt):
    def shard(dirn, name, tensors):
        os.makedirs(dirn, exist_ok=True)
        return T.write_st(os.path.join(dirn, name),
                          [(n, "U8", [1], b"x") for n in tensors])

    def index(dirn, wm, text=None):
        with open(os.path.join(dirn, "model.safetensors.index.json"),
                  "w") as f:
            f.write(text if text is not None else
                    json.dumps({"metadata": {}, "weight_map": wm}))

    cases = []
    c = os.path.join(d, "missing-shard")
    shard(c, "a.safetensors", ["x"])
    index(c, {"x": "a.safetensors", "y": "b.safetensors"})
    cases.append((c, "b.safetensors"))
    c = os.path.join(d, "missing-tensor")
    shard(c, "a.safetensors", ["x"])
    index(c, {"x": "a.safetensors", "y": "a.safetensors"})
    cases.append((c, 'tensor "y" is not in shard a.safetensors'))
    c = os.path.join(d, "dup")
    shard(c, "a.safetensors", ["x", "y"])
    shard(c, "b.safetensors", ["y"])
    cases.append((c, 'tensor "y" is in two shards: a.safetensors and '
                  'b.safetensors'))
    # one real shard copied twice, no index: every name is in both, and
    # names of one shard do not sort next to each other (bool_3 and
    # bool_35 lie between the two copies of bool_3)
    c = os.path.join(d, "copies")
    os.makedirs(c)
    real = os.path.join(T.REAL, "jl-sharded",
                        "model-00001-of-00006.safetensors")
    for n in ("a.safetensors", "b.safetensors"):
        shutil.copy(real, os.path.join(c, n))
    cases.append((c, "is in two shards: a.safetensors and b.safetensors"))
    c = os.path.join(d, "badjson")
    shard(c, "a.safetensors", ["x"])
    index(c, None, text='{"weight_map": {"x": "a.safetensors",}')
    cases.append((c, "invalid index JSON"))
    c = os.path.join(d, "nul-name")
    shard(c, "a.safetensors", ["x"])
    index(c, None, text='{"weight_map": {"x\\u0000y": "a.safetensors"}}')
    cases.append((c, "invalid index JSON: a name holds \\u0000"))
    c = os.path.join(d, "not-string")
    shard(c, "a.safetensors", ["x"])
    index(c, {"x": 3})
    cases.append((c, 'weight_map["x"] is not a file name'))
    for bad in ("../x.safetensors", "/etc/passwd", "sub/a.safetensors"):
        c = os.path.join(d, "escape%d" % len(cases))
        shard(c, "a.safetensors", ["x"])
        index(c, {"x": bad})
        cases.append((c, "plain file names"))
    c = os.path.join(d, "two-indexes")
    shard(c, "a.safetensors", ["x"])
    index(c, {"x": "a.safetensors"})
    with open(os.path.join(c, "other.safetensors.index.json"), "w") as f:
        f.write("{}")
    cases.append((c, "several index files"))
    c = os.path.join(d, "bad-shard")
    shard(c, "a.safetensors", ["x"])
    with open(os.path.join(c, "b.safetensors"), "wb") as f:
        f.write(b"\x02\0\0\0\0\0\0\0{}trailing")
    cases.append((c, "shard b.safetensors: "))
    for src, want in cases:
        for cmd in (["mount", src, mnt], ["inspect", src]):
            r = subprocess.run([T.STFS] + cmd, capture_output=True,
                               timeout=30)
            err = r.stderr.decode(errors="replace")
            # a shard not there: the mount's status is 3, not found
            assert r.returncode == (3 if cmd[0] == "mount" and src.endswith(
                "missing-shard") else 1), (src, err)
            assert err.startswith("stfs: %s: " % src), err
            assert want in err, (src, want, err)
            assert not T.is_mount(mnt)
    # hidden tensors: a warning, and they are not shown
    c = os.path.join(d, "hidden")
    shard(c, "a.safetensors", ["x", "y", "z"])
    index(c, {"x": "a.safetensors"})
    r = subprocess.run([T.STFS, "inspect", c], capture_output=True)
    assert r.returncode == 0 and b"2 tensors in the shards are not in " \
        b"the index's weight_map" in r.stderr, r.stderr
    # a directory with just model.safetensors
    c = os.path.join(d, "single")
    shard(c, "model.safetensors", ["w.a", "w.b"])
    p = T.mount_fg(c, mnt)
    try:
        assert sorted(os.listdir(os.path.join(mnt, "w"))) == ["a", "b"]
        assert os.getxattr(os.path.join(mnt, "w/a"),
                           "user.safetensors.file") == b"model.safetensors"
    finally:
        T.stop_fg(p, mnt)


def test_405b_shaped(d, mnt):
    """191 sparse shards, 1,146 tensors, ~800 GB: mount time, daemon RSS,
    every tensor reachable, ls -R and getfattr over all of it."""
    n = T.make_405b(d)
    t0 = time.time()
    p = T.mount_fg(d, mnt)
    mount_ms = (time.time() - t0) * 1000
    try:
        rss = T.rss_kb(p.pid)
        t0 = time.time()
        found = 0
        for root, dirs, files in os.walk(mnt):
            for f in files:
                if f != "%header.json":
                    found += 1
                    fp = os.path.join(root, f)
                    os.listxattr(fp)
                    os.getxattr(fp, "user.safetensors.shape")
        walk_ms = (time.time() - t0) * 1000
        assert found == n, (found, n)
        total = sum(os.stat(os.path.join(r, f)).st_size
                    for r, _, fs in os.walk(mnt) for f in fs
                    if f != "%header.json")
        assert total > 790 * 10**9
        with open(os.path.join(mnt, "model/layers/190/mlp/w5/weight"),
                  "rb") as f:
            f.seek(16384 * 21568 * 2 - 8)
            assert f.read() == bytes(8)
        print("     405B-shaped (%d shards, %d tensors, %.0f GB): mount "
              "%.0f ms (incl. process start), daemon RSS %d KiB, walk + "
              "getfattr %.0f ms" % (191, n, total / 1e9, mount_ms, rss,
                                     walk_ms))
        assert rss < 64 * 1024
    finally:
        T.stop_fg(p, mnt)


def main():
    return T.run_tests([
        test_real_corpus,
        test_invalid_real_world,
        test_contract,
        test_flat_and_owner,
        test_readahead,
        test_max_request,
        test_background_and_helper,
        test_errors_leave_nothing,
        test_lazy_sparse,
        test_truncated_source,
        test_deleted_and_replaced,
        test_signals,
        test_hostile_names,
        test_shards,
        test_shard_refusals,
        test_405b_shaped,
    ])


if __name__ == "__main__":
    sys.exit(main())

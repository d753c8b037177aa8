#!/usr/bin/env python3
"""test_faults.py: stfs under load, faults and other users.

- 16 threads doing random preads over many tensors and views for a minute
  (STFS_STRESS_SECONDS) while two others walk the tree and read every
  xattr: every byte verified, no error;
- the thread pool: helpers idle for one stream, busy for four, and
  SIGTERM while they are busy ends the daemon cleanly;
- unmounting (fusermount3 -u, -z, stfs umount) and SIGTERM while readers are
  mid-read: nothing hangs, the daemon exits 0, no mount is left;
- an ordinary user mounts, reads and unmounts through fusermount3;
- permissions: without allow_other other users cannot enter the mount;
  with allow_other and default_permissions, modes, uid=, gid= and umask=
  hold for other users;
- sources that are a device or unreadable give a clear error, nothing
  mounted;
- a header of 1,000,000 tensors: mount time, daemon memory bounded by a
  small multiple of the header size, O(log n) lookups;
- out of memory while opening a source: a message that says so.
"""
import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402

SECONDS = float(os.environ.get("STFS_STRESS_SECONDS", "60"))
NOBODY = 65534


def stress_file(d):
    rng = random.Random(11)
    tensors = []
    dts = ["U8", "F32", "BF16", "F16", "I64", "F8_E4M3"]
    for i in range(48):
        dt = dts[i % len(dts)]
        per = T.BITS[dt] // 8
        n = rng.choice((1, 7, 1000, 4096, 65537, 300000, 1 << 20))
        tensors.append(("layers.%d.%s.w" % (i // 6, dt.lower()), dt, [n],
                        os.urandom(n * per)))
    return T.write_st(os.path.join(d, "stress.safetensors"), tensors), \
        tensors


def test_concurrent_readers(d, mnt):
    src, tensors = stress_file(d)
    info = {t["name"]: t for t in json.loads(subprocess.run(
        [T.STFS, "inspect", "--json", "--npy", "--convert=f32", src],
        capture_output=True, check=True).stdout)["tensors"]}
    p = T.mount_fg(src, mnt, "-o", "npy,convert=f32,threads=4")
    try:
        # expected contents: raw from the source; views read once, alone,
        # and checked by size (test_views.py checks their values)
        files = {}
        for name, dt, shape, data in tensors:
            t = info[name]
            files[t["path"]] = data
            for v in t["views"]:
                with open(os.path.join(mnt, v["path"]), "rb") as f:
                    files[v["path"]] = f.read()
                assert len(files[v["path"]]) == v["bytes"]
        paths = sorted(files)
        attrs = {}
        for name, dt, shape, data in tensors:
            attrs[info[name]["path"]] = (dt.encode(), json.dumps(
                shape, separators=(",", ":")).encode())
        stop = time.time() + SECONDS
        stats = {"reads": 0, "bytes": 0, "walks": 0, "xattrs": 0}
        errors = []
        lock = threading.Lock()

        def reader(seed):
            rng = random.Random(seed)
            fds = {}
            try:
                while time.time() < stop and not errors:
                    path = rng.choice(paths)
                    want = files[path]
                    if path not in fds:
                        fds[path] = os.open(os.path.join(mnt, path),
                                            os.O_RDONLY)
                    size = rng.choice((1, 3, 4095, 4096, 65536, 131072,
                                       1 << 20, rng.randrange(1, 1 << 21)))
                    off = rng.randrange(len(want) + 16)
                    got = os.pread(fds[path], size, off)
                    if got != want[off:off + size]:
                        errors.append("mismatch %s at %d+%d" % (path, off,
                                                                size))
                    with lock:
                        stats["reads"] += 1
                        stats["bytes"] += len(got)
            except Exception as e:
                errors.append("reader %d: %r" % (seed, e))
            finally:
                for fd in fds.values():
                    os.close(fd)

        def walker(seed):
            try:
                while time.time() < stop and not errors:
                    seen = 0
                    for root, dirs, names in os.walk(mnt):
                        for n in names:
                            fp = os.path.join(root, n)
                            rel = os.path.relpath(fp, mnt)
                            if rel == "%header.json":
                                continue
                            seen += 1
                            keys = os.listxattr(fp)
                            vals = {k: os.getxattr(fp, k) for k in keys}
                            if rel in attrs and (
                                    vals["user.safetensors.dtype"],
                                    vals["user.safetensors.shape"]) != \
                                    attrs[rel]:
                                errors.append("xattrs of %s" % rel)
                            with lock:
                                stats["xattrs"] += len(keys)
                    if seen != len(files):
                        errors.append("walk saw %d of %d" %
                                      (seen, len(files)))
                    with lock:
                        stats["walks"] += 1
            except Exception as e:
                errors.append("walker %d: %r" % (seed, e))

        ts = [threading.Thread(target=reader, args=(i,)) for i in range(16)]
        ts += [threading.Thread(target=walker, args=(100 + i,))
               for i in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        print("     %.0f s: %d preads (%.1f GB) by 16 readers, %d tree "
              "walks reading %d xattrs, %d errors" % (
                  SECONDS, stats["reads"], stats["bytes"] / 1e9,
                  stats["walks"], stats["xattrs"], len(errors)))
        assert not errors, errors[:5]
        assert stats["reads"] > 1000 and stats["walks"] > 2
        assert p.poll() is None
    finally:
        T.stop_fg(p, mnt)


def start_readers(path, n=4):
    """n shell loops reading path forever (dd, 4 KiB blocks)."""
    return [subprocess.Popen(
        ["bash", "-c", "while :; do dd if=%s of=/dev/null bs=4k "
         "status=none || exit 3; done" % path],
        stderr=subprocess.DEVNULL) for _ in range(n)]


def stop_readers(rs):
    for r in rs:
        if r.poll() is None:
            r.kill()
        r.wait(timeout=10)


def thread_cpu_ns(pid):
    """{tid: ns on a CPU} for every thread of pid (schedstat)."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
            out[int(tid)] = int(f.read().split()[0])
    return out


def direct_readers(mnt, jobs, seconds=None):
    """A thread for each (name, start, length) of jobs, reading that range
    over and over with O_DIRECT (so every read reaches the daemon), for
    seconds or until a read fails."""
    stop = [False]
    errs = []

    def one(name, start, length):
        fd = os.open(os.path.join(mnt, name), os.O_RDONLY | os.O_DIRECT)
        try:
            end = time.time() + (seconds or 60)
            off = start
            while not stop[0] and time.time() < end:
                b = os.pread(fd, 1 << 20, off)
                if not b or b.count(0) != len(b):
                    errs.append("bad bytes in %s at %d" % (name, off))
                    return
                off += len(b)
                if off >= start + length:
                    off = start
        except OSError as e:
            errs.append(e.errno)
        finally:
            os.close(fd)
    ts = [threading.Thread(target=one, args=j) for j in jobs]
    for t in ts:
        t.start()
    return ts, stop, errs


def test_thread_pool(d, mnt):
    """threads=4: one stream is served by the main thread alone; parallel
    readers of four files, or of one file at four places, bring the
    helpers in; SIGTERM while they are busy ends the daemon cleanly."""
    size, big = 16 << 20, 256 << 20
    info = {"t%d" % i: {"dtype": "U8", "shape": [size],
                        "data_offsets": [i * size, (i + 1) * size]}
            for i in range(4)}
    info["big"] = {"dtype": "U8", "shape": [big],
                   "data_offsets": [4 * size, 4 * size + big]}
    hdr = json.dumps(info).encode()
    hdr += b" " * (-len(hdr) % 8)
    src = os.path.join(d, "pool.safetensors")
    with open(src, "wb") as f:
        f.write(len(hdr).to_bytes(8, "little") + hdr)
        f.truncate(8 + len(hdr) + 4 * size + big)     # sparse: zeros
    files = [("t%d" % i, 0, size) for i in range(4)]
    quarters = [("big", i * big // 4, big // 4) for i in range(4)]
    p = T.mount_fg(src, mnt, "-o", "threads=4")
    stop = [False]
    try:
        time.sleep(0.2)
        before = thread_cpu_ns(p.pid)
        helpers = sorted(t for t in before if t != p.pid)
        assert len(helpers) == 3, before
        # one stream, of a small file and of a big one: helpers idle
        for job in (files[0], ("big", 0, big)):
            ts, _, errs = direct_readers(mnt, [job], seconds=1.0)
            for t in ts:
                t.join()
            assert not errs, errs
            one = thread_cpu_ns(p.pid)
            assert one[p.pid] > before[p.pid]
            assert [one[t] - before[t] for t in helpers] == [0, 0, 0], \
                "helpers ran for one stream: %r %r" % (before, one)
            before = one
        # four streams: helpers serve
        for jobs in (files, quarters):
            ts, _, errs = direct_readers(mnt, jobs, seconds=1.0)
            for t in ts:
                t.join()
            assert not errs, errs
            four = thread_cpu_ns(p.pid)
            busy = [t for t in helpers if four[t] - one[t] > 1000000]
            assert len(busy) >= 2, "helpers idle with 4 readers of %s: " \
                "%r %r" % (jobs[0][0], one, four)
            one = four
            time.sleep(0.5)     # parked again
        # SIGTERM mid-read with the helpers busy: exit 0, nothing hangs
        ts, stop, errs = direct_readers(mnt, files)
        time.sleep(0.5)
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=20) == 0
        stop[0] = True
        for t in ts:
            t.join(timeout=20)
            assert not t.is_alive()
        assert errs and all(isinstance(e, int) for e in errs), errs
    finally:
        stop[0] = True
        if p.poll() is None:
            T.stop_fg(p, mnt)
        else:
            p.stdout.close()
            p.stderr.close()
            T.unmount(mnt)
    assert not T.is_mount(mnt) and T.wait_gone(mnt)


def test_unmount_while_reading(d, mnt):
    src = T.write_st(os.path.join(d, "u.safetensors"),
                     [("w", "U8", [64 << 20], os.urandom(64 << 20))])
    tensor = os.path.join(mnt, "w")
    # 1. plain unmount of a busy mount fails and leaves it working
    p = T.mount_fg(src, mnt)
    rs = start_readers(tensor)
    try:
        time.sleep(0.5)
        fd = os.open(tensor, os.O_RDONLY)
        r = subprocess.run([T.STFS, "umount", mnt], capture_output=True,
                           timeout=30)
        assert r.returncode != 0 and T.is_mount(mnt), r
        assert b"busy" in r.stderr.lower(), r.stderr
        # 2. lazy unmount: detached at once, open files keep reading
        r = subprocess.run([T.STFS, "umount", "-z", mnt],
                           capture_output=True, timeout=30)
        assert r.returncode == 0, r.stderr
        assert not T.is_mount(mnt)
        with open(src, "rb") as f:
            f.seek(8 + T.header_of(src)[0] + 12345)
            want = f.read(100000)
        assert os.pread(fd, 100000, 12345) == want
        assert p.poll() is None, "daemon gone while files are open"
    finally:
        stop_readers(rs)
    os.close(fd)
    # the last close ends the daemon, cleanly
    assert p.wait(timeout=20) == 0
    p.stdout.close()
    p.stderr.close()
    assert not T.daemons_for(mnt)
    # 3. SIGTERM with readers mid-read: clean exit, readers fail, no hang
    p = T.mount_fg(src, mnt)
    rs = start_readers(tensor)
    try:
        time.sleep(0.5)
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=20) == 0
        p.stdout.close()
        p.stderr.close()
        for r in rs:
            assert r.wait(timeout=20) == 3   # dd failed, loop ended
        assert not T.is_mount(mnt)
    finally:
        stop_readers(rs)
    # 4. fusermount3 -u -z with readers, then they stop: daemon exits 0
    p = T.mount_fg(src, mnt)
    rs = start_readers(tensor)
    try:
        time.sleep(0.3)
        assert subprocess.run(["fusermount3", "-u", "-z", mnt]).returncode \
            == 0
    finally:
        stop_readers(rs)
    assert p.wait(timeout=20) == 0
    p.stdout.close()
    p.stderr.close()
    assert not T.is_mount(mnt) and not T.daemons_for(mnt)


def test_lazy_unmount_repeated(d, mnt):
    """fusermount3 -u -z under readers, 24 times: each time the daemon
    exits 0 once they stop. (The kernel may end the connection with
    ECONNABORTED rather than ENODEV on that path: about 1 unmount in 20
    here, which the daemon took for a failure, exiting 1.)"""
    src = T.write_st(os.path.join(d, "a.safetensors"),
                     [("w", "U8", [16 << 20], os.urandom(16 << 20))])
    codes = []
    for _ in range(24):
        p = T.mount_fg(src, mnt)
        rs = start_readers(os.path.join(mnt, "w"))
        try:
            time.sleep(0.2)
            assert subprocess.run(["fusermount3", "-u", "-z",
                                   mnt]).returncode == 0
        finally:
            stop_readers(rs)
        try:
            codes.append((p.wait(timeout=20), p.stderr.read()[-300:]))
        finally:
            p.stdout.close()
            p.stderr.close()
        assert not T.is_mount(mnt) and not T.daemons_for(mnt)
    assert all(c == 0 for c, _ in codes), codes


def as_user(uid, gid, code):
    """Run python code as uid/gid; returns its stdout (one word per op)."""
    def drop():
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True,
                       text=True, preexec_fn=drop, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


PROBE = """
import os, sys
m = sys.argv[1] if len(sys.argv) > 1 else %r
def op(f):
    try:
        f()
        print("ok")
    except OSError as e:
        print(os.strerror(e.errno).replace(" ", "_"))
op(lambda: os.listdir(m))
op(lambda: open(os.path.join(m, "w"), "rb").read())
op(lambda: os.getxattr(os.path.join(m, "w"), "user.safetensors.dtype"))
"""


def open_path(d, mnt):
    """Let other users reach d and mnt (mkdtemp makes them 0700)."""
    for p in (d, os.path.dirname(mnt)):
        os.chmod(p, 0o755)


def test_permissions(d, mnt):
    open_path(d, mnt)
    src = T.write_st(os.path.join(d, "p.safetensors"),
                     [("w", "F32", [4], bytes(16))])
    os.chmod(src, 0o644)
    probe = PROBE % mnt
    deny = ["Permission_denied"] * 3
    cases = [
        ([], deny, deny),                       # no allow_other
        (["-o", "allow_other"], ["ok"] * 3, ["ok"] * 3),
        (["-o", "allow_other,default_permissions,umask=0077"], deny, deny),
        (["-o", "allow_other,default_permissions,uid=%d,gid=%d,umask=0027"
          % (NOBODY, NOBODY)], ["ok"] * 3, deny),
        (["-o", "allow_other,default_permissions,gid=%d,umask=0007" %
          NOBODY], ["ok"] * 3, deny),
    ]
    for opts, for_nobody, for_other in cases:
        p = T.mount_fg(src, mnt, *opts)
        try:
            got = as_user(NOBODY, NOBODY, probe)
            assert got == for_nobody, (opts, "nobody", got)
            got = as_user(NOBODY - 1, NOBODY - 1, probe)
            assert got == for_other, (opts, "other", got)
            # root can always read
            with open(os.path.join(mnt, "w"), "rb") as f:
                assert f.read() == bytes(16)
            st = os.stat(os.path.join(mnt, "w"))
            if "umask=0027" in "".join(opts):
                assert (st.st_uid, st.st_gid) == (NOBODY, NOBODY)
                assert st.st_mode & 0o777 == 0o440
                assert os.stat(mnt).st_mode & 0o777 == 0o550
        finally:
            T.stop_fg(p, mnt)


def test_source_kinds(d, mnt):
    open_path(d, mnt)
    secret = T.write_st(os.path.join(d, "secret.safetensors"),
                        [("w", "U8", [1], b"x")])
    os.chmod(secret, 0o600)
    r = subprocess.run([T.STFS, "mount", "/dev/null", mnt],
                       capture_output=True, timeout=30)
    assert r.returncode == 1 and b"not a regular file" in r.stderr, r
    assert not T.is_mount(mnt) and not T.daemons_for(mnt)

    def drop():
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    r = subprocess.run([T.stfs_for_others(), "inspect", secret],
                       capture_output=True, preexec_fn=drop, timeout=30)
    assert r.returncode == 1, r
    assert r.stderr.decode() == "stfs: %s: cannot open: Permission " \
        "denied\n" % secret, r.stderr


def test_user_mount(d, mnt):
    """An ordinary user mounts, reads and unmounts through the setuid
    fusermount3, as on a workstation; what needs root is refused or
    falls back with a clear word."""
    open_path(d, mnt)
    data = bytes(range(16))
    src = T.write_st(os.path.join(d, "u.safetensors"),
                     [("layer.w", "F32", [4], data)])
    os.chmod(src, 0o644)
    um = os.path.join(d, "umnt")
    os.mkdir(um)
    os.chown(um, NOBODY, NOBODY)

    def drop():
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)

    def stfs(*args):
        return subprocess.run([T.stfs_for_others()] + list(args),
                              capture_output=True, text=True,
                              preexec_fn=drop, timeout=30)
    # Without access to /dev/fuse (this machine kind makes it 0600; udev
    # makes it 0666 on a normal system) a user mount fails clearly...
    mode = os.stat("/dev/fuse").st_mode & 0o777
    os.chmod("/dev/fuse", 0o600)
    try:
        r = stfs("mount", src, um)
        assert r.returncode == 1, r
        assert "/dev/fuse: Permission denied" in r.stderr and \
            r.stderr.endswith("stfs: %s: cannot mount on %s\n" % (src, um)), \
            r.stderr
        assert not T.is_mount(um) and T.wait_gone(um)
        # ...and with it, as on a normal system, works
        os.chmod("/dev/fuse", 0o666)
        user_mount_cases(src, um, data, stfs)
    finally:
        os.chmod("/dev/fuse", mode)


def user_mount_cases(src, um, data, stfs):
    r = stfs("mount", src, um)
    T._mounts.append(um)
    try:
        assert r.returncode == 0, r.stderr
        assert T.is_mount(um)
        with open("/proc/self/mountinfo") as f:
            line = next(l for l in f if l.split()[4] == um)
        assert "user_id=%d" % NOBODY in line, line
        # no root to raise the readahead: the default falls back quietly
        assert r.stderr == "", r.stderr
        got = as_user(NOBODY, NOBODY, """
import hashlib, os
m = %r
print(hashlib.sha256(open(m + "/layer/w", "rb").read()).hexdigest())
print(os.getxattr(m + "/layer/w", "user.safetensors.dtype").decode())
print(os.stat(m + "/layer/w").st_uid)
""" % um)
        assert got == [hashlib.sha256(data).hexdigest(), "F32",
                       str(NOBODY)], got
        # without allow_other nobody else gets in, not even root
        try:
            os.listdir(um)
            raise AssertionError("root could list a user's mount")
        except PermissionError:
            pass
        r = stfs("umount", um)
        assert r.returncode == 0, r.stderr
        assert not T.is_mount(um) and T.wait_gone(um)
    finally:
        T.unmount(um)
    # allow_other needs user_allow_other in /etc/fuse.conf
    with open("/etc/fuse.conf") as f:
        allowed = any(l.strip() == "user_allow_other" for l in f)
    r = stfs("mount", "-o", "allow_other", src, um)
    T._mounts.append(um)
    try:
        if allowed:
            assert r.returncode == 0, r.stderr
        else:
            assert r.returncode == 1, r
            assert "user_allow_other" in r.stderr, r.stderr
            assert not T.is_mount(um) and T.wait_gone(um)
    finally:
        T.unmount(um)
    # an explicit readahead= that cannot be set is a warning, not an error
    r = stfs("mount", "-o", "readahead=4096", src, um)
    T._mounts.append(um)
    try:
        assert r.returncode == 0, r.stderr
        assert re.fullmatch(r"stfs: %s: readahead=4096: cannot set it "
                            r"\(Permission denied\); the mount keeps the "
                            r"kernel's \d+ KiB\n" % re.escape(src),
                            r.stderr), r.stderr
        assert T.is_mount(um)
    finally:
        T.unmount(um)


def test_million_tensors(d, mnt):
    src = os.path.join(d, "many.safetensors")
    hlen = T.make_many(src)
    t = time.time()
    r = subprocess.run([T.STFS, "mount", src, mnt], capture_output=True,
                       timeout=120)
    mount_s = time.time() - t
    assert r.returncode == 0, r.stderr
    T._mounts.append(mnt)
    try:
        pids = T.daemons_for(mnt)
        assert len(pids) == 1
        rss = T.rss_kb(pids[0]) * 1024
        rng = random.Random(2)
        t = time.time()
        for _ in range(2000):
            i = rng.randrange(1000000)
            path = os.path.join(mnt, "model/layers/%d/w/%d" % (i // 1000,
                                                             i % 1000))
            st = os.stat(path)
            assert st.st_size == 1
            with open(path, "rb") as f:
                assert f.read() == bytes([i % 251])
        lookups = (time.time() - t) / 2000 * 1e6
        assert len(os.listdir(os.path.join(mnt, "model/layers"))) == 1000
        assert len(os.listdir(os.path.join(mnt, "model/layers/999/w"))) \
            == 1000
        print("     1,000,000 tensors, %.1f MB header: mount %.2f s, "
              "daemon RSS %.0f MiB (%.1fx the header), stat+read %.0f us" %
              (hlen / 1e6, mount_s, rss / 2**20, rss / hlen, lookups))
        # ASan's shadow memory and redzones are not the daemon's own
        limit = 12 if os.environ.get("STFS_SANITIZED") else 4
        assert rss <= limit * hlen, (rss, hlen)
    finally:
        T.unmount(mnt)
    assert T.wait_gone(mnt)


def test_out_of_memory(d, mnt):
    """Out of memory while opening a source: a message that says so, exit
    1, nothing mounted.  The release build runs under an address-space
    limit; under ASan (which reserves terabytes of shadow) allocations
    above 8 MB fail instead."""
    src = os.path.join(d, "many.safetensors")
    hlen = T.make_many(src, 200000)
    env = dict(os.environ)
    limits = [None]
    if os.environ.get("STFS_SANITIZED"):
        env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + \
            ":allocator_may_return_null=1:max_allocation_size_mb=8"
    else:
        # from too little to map the file up to enough to parse it: every
        # allocation on the way fails once
        limits = [hlen + (k << 20) for k in range(4, 120, 4)]
    seen = set()
    for lim in limits:
        pre = ["prlimit", "--as=%d" % lim] if lim else []
        for cmd in (["inspect"], ["mount"]):
            args = pre + [T.STFS] + cmd + [src] + \
                ([mnt] if cmd == ["mount"] else [])
            r = subprocess.run(args, capture_output=True, timeout=60,
                               env=env)
            err = r.stderr.decode(errors="replace")
            if r.returncode == 0:       # enough memory: a working mount
                if cmd == ["mount"]:
                    T._mounts.append(mnt)
                    assert os.path.getsize(os.path.join(
                        mnt, "model/layers/3/w/5")) == 1
                    T.unmount(mnt)
                continue
            assert not T.is_mount(mnt) and not T.daemons_for(mnt)
            if r.returncode == 127 and "while loading shared libraries" \
                    in err:
                continue        # too little for the loader: not stfs's

            assert r.returncode == 1, (lim, cmd, r.returncode, err)
            # (ASan may say first that an allocation failed)
            line = [x for x in err.splitlines() if x.startswith("stfs: ")]
            assert len(line) == 1 and re.match(
                r"stfs: %s: \S.*memory" % re.escape(src), line[0],
                re.I), (lim, cmd, err)
            seen.add(line[0].split(": ", 2)[2].strip())
    assert seen, "no limit made stfs run out of memory"
    if not os.environ.get("STFS_SANITIZED"):
        assert len(seen) >= 3, seen
    print("     messages: %s" % sorted(seen))


def main():
    return T.run_tests([
        test_concurrent_readers,
        test_thread_pool,
        test_unmount_while_reading,
        test_lazy_unmount_repeated,
        test_permissions,
        test_source_kinds,
        test_user_mount,
        test_million_tensors,
        test_out_of_memory,
    ])


if __name__ == "__main__":
    sys.exit(main())

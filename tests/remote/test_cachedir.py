#!/usr/bin/env python3
"""test_cachedir.py: the on-disk cache is trusted only when it is private,
against nginx on 127.0.0.1 and real mounts.

- what stfs makes is private: the cache 0700, its directories 0700, its
  files 0600, owned by the mounting user;
- a cache directory (or one under it) writable by group or others, or
  owned by another user (nobody), is refused at mount with why and how to
  fix it; a version directory that is a symbolic link is refused, and
  nothing is written where it points;
- blocks planted (owned by nobody, or writable by others) or not whole
  (the wrong size, truncated) are never served: the right bytes are
  fetched again;
- every block is checked when read back (its header and checksums): a
  byte flipped, a block truncated, two blocks swapped are EIO offline and
  fetched again online (only they), never served, and the log says which;
- a block the cache cannot take (cache_size under a block, a full disk)
  is held in memory for its readers: a cat fetches the model about once;
- daemons sharing one cache directory share its cache_size; two reading
  the same block fetch it at most twice and leave it whole;
- the temporary file of a killed writer is removed at the next start, a
  live writer's is kept and counted in cache_size;
- eviction with symbolic links under the cache deletes nothing outside;
- cache_size counts every file stfs writes there (heads, kept answers,
  meta, latest, their directories), not only blocks.
"""
import errno
import fcntl
import os
import stat
import subprocess
import sys

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402
from fixtures import (Nginx, big_file, cache_files, mount_logged,  # noqa: E402
                      slurp, stop_logged, wait_blocks)

NOBODY = 65534
ROOT = os.geteuid() == 0


def mount_fails(url, mnt, opts, *says):
    r = subprocess.run([T.STFS, "mount", "-o", opts, url, mnt],
                       capture_output=True, timeout=60)
    err = r.stderr.decode()
    assert r.returncode != 0, (opts, err)
    for s in says:
        assert s in err, (s, err)
    assert not T.is_mount(mnt) and not T.daemons_for(mnt)
    return err


def read_all(mnt, tensors, which=None):
    """Read tensors (all, or those numbered in which) with O_DIRECT, from
    the daemon, and compare."""
    for i, t in enumerate(tensors):
        if which is not None and i not in which:
            continue
        p = os.path.join(mnt, "layers/%d/w" % i)
        fd = os.open(p, os.O_RDONLY | os.O_DIRECT)
        try:
            out, off = [], 0
            while True:
                b = os.pread(fd, 1 << 20, off)
                if not b:
                    break
                out.append(b)
                off += len(b)
        finally:
            os.close(fd)
        assert b"".join(out) == t[3], t[0]


def version_dirs(cache):
    """v1/URL/VERSION directories."""
    v1 = os.path.join(cache, "v1")
    return [os.path.join(v1, a, b) for a in os.listdir(v1)
            for b in os.listdir(os.path.join(v1, a))
            if os.path.isdir(os.path.join(v1, a, b))]


def served(d, name="big.safetensors"):
    data = os.path.join(d, "data")
    os.mkdir(data)
    src, tensors = big_file(data, name)
    ngx = Nginx(os.path.join(d, "ngx"), data)
    return tensors, ngx, ngx.url(name)


def test_private(d, mnt):
    """What stfs makes is private; a cache that is not, is refused."""
    tensors, ngx, url = served(d)
    cache = os.path.join(d, "c", "stfs")
    try:
        p = T.mount_fg(url, mnt, "-o", "cache=" + cache)
        try:
            read_all(mnt, tensors, [0])
        finally:
            T.stop_fg(p, mnt)
        for root, dirs, files in os.walk(cache):
            for n in dirs:
                st = os.lstat(os.path.join(root, n))
                assert stat.S_IMODE(st.st_mode) == 0o700, (root, n)
            for n in files:
                st = os.lstat(os.path.join(root, n))
                assert stat.S_IMODE(st.st_mode) == 0o600, (root, n)
                assert st.st_uid == os.geteuid()
        assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700
        # writable by others, by the group: refused, saying how to fix it
        sub = os.path.dirname(version_dirs(cache)[0])
        for path, mode, says in ((cache, 0o777, "group and others"),
                                 (cache, 0o770, "its group"),
                                 (sub, 0o707, "others")):
            os.chmod(path, mode)
            mount_fails(url, mnt, "cache=" + cache, "writable by " + says,
                        "mode %04o" % mode, "chmod go-w")
            os.chmod(path, 0o700)
        # ... which a local file's mount never looks at
        os.chmod(cache, 0o777)
        p = T.mount_fg(os.path.join(d, "data", "big.safetensors"), mnt,
                       "-o", "cache=" + cache)
        T.stop_fg(p, mnt)
        os.chmod(cache, 0o700)
        if ROOT:
            # owned by another user
            for path in (cache, sub):
                os.chown(path, NOBODY, NOBODY)
                mount_fails(url, mnt, "cache=" + cache,
                            "owned by uid %d, not by you" % NOBODY)
                os.chown(path, 0, 0)
        else:
            print("     (not root: the chown cases need root)")
        # a version directory that is a link: refused, nothing outside
        ver = version_dirs(cache)[0]
        outside = os.path.join(d, "outside")
        os.rename(ver, outside)
        before = sorted(os.listdir(outside))
        os.symlink(outside, ver)
        mount_fails(url, mnt, "cache=" + cache, "symbolic link is never "
                    "followed")
        assert sorted(os.listdir(outside)) == before
        os.unlink(ver)
        # fixed, it mounts again
        p = T.mount_fg(url, mnt, "-o", "cache=" + cache)
        try:
            read_all(mnt, tensors, [0])
        finally:
            T.stop_fg(p, mnt)
    finally:
        ngx.stop()


def test_planted_blocks(d, mnt):
    """Blocks that are not ours, or not whole, are never served."""
    tensors, ngx, url = served(d)
    cache = os.path.join(d, "cache")
    try:
        p = T.mount_fg(url, mnt, "-o", "cache=" + cache)
        try:
            read_all(mnt, tensors)
        finally:
            T.stop_fg(p, mnt)
        blocks = sorted(f for f in cache_files(cache)
                        if os.path.basename(f).isdigit())
        assert len(blocks) >= 20, blocks
        kinds = ["mode", "long", "short"] + (["owner"] if ROOT else [])
        for i, b in enumerate(blocks):
            kind = kinds[i % len(kinds)]
            size = os.path.getsize(b)
            with open(b, "r+b") as f:
                f.write(b"\xee" * size)     # wrong bytes, in every case
                if kind == "long":
                    f.write(b"\xee")
                elif kind == "short":
                    f.truncate(size - 4096)
            if kind == "mode":
                os.chmod(b, 0o666)
            elif kind == "owner":
                os.chown(b, NOBODY, NOBODY)
        k = len(ngx.ranges())
        p = T.mount_fg(url, mnt, "-o", "cache=" + cache)
        try:
            read_all(mnt, tensors)
        finally:
            T.stop_fg(p, mnt)
        assert len(ngx.ranges()) - k >= len(blocks) // 2, \
            "the planted blocks were not fetched again"
    finally:
        ngx.stop()


def block_of(b):
    """The block number of a block file."""
    return int(os.path.basename(b))


def test_checked_blocks(d, mnt):
    """A byte flipped, a block truncated, two blocks of the same size
    swapped: offline, the tensors on them are EIO and the rest right;
    online, right, with only the bad blocks fetched again; the log says
    which block failed and why."""
    data = os.path.join(d, "data")
    os.mkdir(data)
    MiB = 1 << 20
    tensors = [("layers.%d.w" % i, "U8", [2 * MiB], os.urandom(2 * MiB))
               for i in range(14)]
    T.write_st(os.path.join(data, "m.safetensors"), tensors)
    ngx = Nginx(os.path.join(d, "ngx"), data)
    url = ngx.url("m.safetensors")
    cache = os.path.join(d, "cache")
    log = os.path.join(d, "log")
    try:
        p = T.mount_fg(url, mnt, "-o", "cache=" + cache)
        try:
            read_all(mnt, tensors)
            wait_blocks(cache, 8)
        finally:
            T.stop_fg(p, mnt)
        blocks = {block_of(f): f for f in cache_files(cache)
                  if os.path.basename(f).isdigit()}
        assert sorted(blocks) == list(range(8)), sorted(blocks)
        # block 1: a byte of its bytes flipped; 3: cut short; 5 and 6
        # (both 4 MiB): swapped
        with open(blocks[1], "r+b") as f:
            f.seek(4096 + 3 * MiB + 12345)
            c = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([c[0] ^ 0x10]))
        os.truncate(blocks[3], os.path.getsize(blocks[3]) - 65536)
        os.rename(blocks[5], blocks[5] + "x")
        os.rename(blocks[6], blocks[5])
        os.rename(blocks[5] + "x", blocks[6])
        bad = {1, 3, 5, 6}
        # tensor j is the bytes [hdr + 2 MiB j, hdr + 2 MiB (j + 1)) of
        # the file; it must be EIO if it holds the flipped byte or a byte
        # of blocks 3, 5, 6, and right if it touches no bad block
        hdr = 8 + int.from_bytes(open(os.path.join(data, "m.safetensors"),
                                      "rb").read(8), "little")
        span = [(hdr + 2 * MiB * j, hdr + 2 * MiB * (j + 1))
                for j in range(14)]
        flipped = 4 * MiB + 3 * MiB + 12345
        on = [{a // (4 * MiB), (z - 1) // (4 * MiB)} for a, z in span]
        must_fail = [a <= flipped < z or bool(on[j] & {3, 5, 6})
                     for j, (a, z) in enumerate(span)]
        assert sum(must_fail) >= 4, must_fail

        k = len(ngx.ranges())
        p = mount_logged(url, mnt, log, "-o", "offline,cache=" + cache)
        try:
            for j, t in enumerate(tensors):
                try:
                    read_all(mnt, tensors, [j])     # right, if read
                    assert not must_fail[j], (j, "served from a bad block")
                except OSError as e:
                    assert e.errno == errno.EIO and on[j] & bad, (j, e)
        finally:
            stop_logged(p, mnt)
        assert len(ngx.ranges()) == k
        text = slurp(log)
        for b, why in ((1, "fail their checksum"), (3, "bytes, not"),
                       (5, "another block of its object"),
                       (6, "another block of its object")):
            assert ("block %d (bytes" % b) in text and why in text, \
                (b, why, text)
        assert "not served (offline: EIO)" in text, text
        assert "removed" not in text, text

        p = mount_logged(url, mnt, log, "-o", "cache=" + cache)
        try:
            read_all(mnt, tensors)
        finally:
            stop_logged(p, mnt)
        got = ngx.ranges()[k:]
        assert got[0] == (0, 65535), got    # the open's: size and version
        got = got[1:]
        assert got, "the bad blocks were not fetched again"
        for first, last in got:
            assert first // (4 * MiB) in bad and \
                last // (4 * MiB) == first // (4 * MiB), (first, last, got)
        assert {first // (4 * MiB) for first, _ in got} == bad, got
        assert "removed, and fetched again" in slurp(log)
    finally:
        ngx.stop()


def fetched(ngx, k):
    """Bytes nginx was asked for since its k-th range request, but for the
    open's (the object's first 64 KiB)."""
    return sum(z - a + 1 for a, z in ngx.ranges()[k:] if (a, z) != (0, 65535))


def test_cache_cannot_take(d, mnt):
    """A block the cache cannot take (cache_size under one block; a full
    disk) is held in memory for its readers as with nocache: a cat of the
    model fetches it about once, not once per readahead; the log says so,
    once (issue 40, item 13: 2.57x and 2.80x before)."""
    data = os.path.join(d, "data")
    os.mkdir(data)
    MiB = 1 << 20
    tensors = [("layers.%d.w" % i, "U8", [8 * MiB], os.urandom(8 * MiB))
               for i in range(3)]
    src = T.write_st(os.path.join(data, "m.safetensors"), tensors)
    size = os.path.getsize(src)
    ngx = Nginx(os.path.join(d, "ngx"), data)
    url = ngx.url("m.safetensors")
    full = os.path.join(d, "full")
    cases = [("cache_size=1M", os.path.join(d, "c1"), "is larger than "
              "cache_size=1048576")]
    if ROOT:
        os.mkdir(full)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4M,mode=0700",
                        "stfs-test", full], check=True)
        os.mkdir(os.path.join(full, "c"), 0o700)
        # room for an object's small files (its head: 68 KiB), not for a
        # block
        st = os.statvfs(full)
        with open(os.path.join(full, "filler"), "wb") as f:
            f.write(b"\0" * (st.f_bavail * st.f_frsize - (256 << 10)))
        cases.append(("cache_size=10G", os.path.join(full, "c"),
                      "No space left on device"))
    else:
        print("     (not root: the full disk case needs mount(8))")
    try:
        for opt, cache, says in cases:
            log = os.path.join(d, "log-" + opt)
            k = len(ngx.ranges())
            p = mount_logged(url, mnt, log, "-o",
                             "%s,cache=%s" % (opt, cache))
            try:
                for i, t in enumerate(tensors):
                    with open(os.path.join(mnt, "layers/%d/w" % i),
                              "rb") as f:
                        assert f.read() == t[3], (opt, i)
            finally:
                stop_logged(p, mnt)
            got = fetched(ngx, k)
            text = slurp(log)
            print("     %s: fetched %.2fx the model" % (opt, got / size))
            assert got <= 1.1 * size, (opt, got, size)
            assert text.count(says) == 1 and "logged once" in text, text
    finally:
        ngx.stop()
        if ROOT:
            subprocess.run(["umount", full])


def test_shared_size(d, mnt):
    """4 daemons sharing one cache directory, each reading its own model,
    with cache_size half their sum: the blocks on the disk never pass
    cache_size by more than the blocks being written; every byte read is
    right, no EIO (issue 42: 4 x 128 MiB into 256M left 512 MiB)."""
    import threading
    import time
    data = os.path.join(d, "data")
    os.mkdir(data)
    MiB = 1 << 20
    models = []
    for k in range(4):
        t = [("layers.%d.w" % i, "U8", [8 * MiB], os.urandom(8 * MiB))
             for i in range(3)]
        T.write_st(os.path.join(data, "m%d.safetensors" % k), t)
        models.append(t)
    ngx = Nginx(os.path.join(d, "ngx"), data)
    cache = os.path.join(d, "cache")
    size = 48 * MiB                     # half of 4 x 24 MiB
    mnts = [os.path.join(d, "mnt%d" % k) for k in range(4)]
    peak, stop, errors = [0], threading.Event(), []

    def watch():
        while not stop.is_set():
            try:
                used = sum(os.path.getsize(f) for f in cache_files(cache)
                           if os.path.basename(f).isdigit())
            except OSError:
                continue
            peak[0] = max(peak[0], used)
            time.sleep(0.02)

    def reader(k):
        try:
            read_all(mnts[k], models[k])
        except Exception as e:         # noqa: BLE001 (reported below)
            errors.append((k, e))

    ps = []
    try:
        for m in mnts:
            os.mkdir(m)
            ps.append(T.mount_fg(ngx.url(os.path.basename(
                "m%d.safetensors" % len(ps))), m, "-o",
                "cache=%s,cache_size=%d" % (cache, size)))
        w = threading.Thread(target=watch, daemon=True)
        w.start()
        th = [threading.Thread(target=reader, args=(k,)) for k in range(4)]
        for t in th:
            t.start()
        for t in th:
            t.join(120)
    finally:
        for p, m in zip(ps, mnts):
            T.stop_fg(p, m)
        stop.set()
        ngx.stop()
    used = sum(os.path.getsize(f) for f in cache_files(cache)
               if os.path.basename(f).isdigit())
    print("     4 daemons, cache_size=48M: at most %.1f MiB of blocks, "
          "%.1f MiB at the end" % (peak[0] / MiB, used / MiB))
    assert not errors, errors
    # (in flight: a batch of each daemon's writer, published together)
    assert used <= size and peak[0] <= size + 4 * (4 * MiB + 4096), \
        (peak[0], used)


def test_two_daemons_one_block(d, mnt):
    """Two daemons on one cache reading the same model at once: each
    block fetched at most twice (once by each), every byte right, and
    the cache's blocks whole (a third mount, offline, reads them all)."""
    import threading
    data = os.path.join(d, "data")
    os.mkdir(data)
    MiB = 1 << 20
    tensors = [("layers.%d.w" % i, "U8", [8 * MiB], os.urandom(8 * MiB))
               for i in range(3)]
    T.write_st(os.path.join(data, "m.safetensors"), tensors)
    ngx = Nginx(os.path.join(d, "ngx"), data)
    url = ngx.url("m.safetensors")
    cache = os.path.join(d, "cache")
    mnts = [os.path.join(d, "mnt%d" % k) for k in range(2)]
    errors, ps = [], []

    def reader(k):
        try:
            read_all(mnts[k], tensors)
        except Exception as e:         # noqa: BLE001 (reported below)
            errors.append((k, e))

    try:
        for m in mnts:
            os.mkdir(m)
            ps.append(T.mount_fg(url, m, "-o", "cache=" + cache))
        th = [threading.Thread(target=reader, args=(k,)) for k in range(2)]
        for t in th:
            t.start()
        for t in th:
            t.join(120)
        for m in mnts:
            wait_blocks(cache, 7)
    finally:
        for p, m in zip(ps, mnts):
            T.stop_fg(p, m)
    try:
        assert not errors, errors
        # bytes asked of each block (a fetch may be two requests: a
        # reader's tail first, then the start)
        per = {}
        for a, z in ngx.ranges():
            if (a, z) != (0, 65535):
                per[a // (4 * MiB)] = per.get(a // (4 * MiB), 0) + \
                    z - a + 1
        assert per and max(per.values()) <= 2 * 4 * MiB, per
        p = T.mount_fg(url, mnt, "-o", "offline,cache=" + cache)
        try:
            read_all(mnt, tensors)
        finally:
            T.stop_fg(p, mnt)
    finally:
        ngx.stop()


def test_tmp_files(d, mnt):
    """A killed writer's temporary file is removed at the next start; a
    live writer's is kept, and counted in cache_size."""
    tensors, ngx, url = served(d)
    cache = os.path.join(d, "cache")
    try:
        p = T.mount_fg(url, mnt, "-o", "cache=" + cache)
        try:
            read_all(mnt, tensors, [0])
        finally:
            T.stop_fg(p, mnt)
        ver = version_dirs(cache)[0]
        dead = os.path.join(ver, "7.tmp.999999.1")
        live = os.path.join(ver, "8.tmp.999998.1")
        for f in (dead, live):
            with open(f, "wb") as fh:
                fh.write(b"\0" * (4 << 20))
            os.chmod(f, 0o600)
        held = os.open(live, os.O_RDONLY)
        try:
            fcntl.flock(held, fcntl.LOCK_EX)
            p = T.mount_fg(url, mnt, "-o", "cache=%s,cache_size=12M" %
                           cache)
            try:
                read_all(mnt, tensors, [1])
            finally:
                T.stop_fg(p, mnt)
            assert not os.path.exists(dead)
            assert os.path.getsize(live) == 4 << 20
            used = sum(os.path.getsize(f) for f in cache_files(cache)
                       if os.path.basename(f).isdigit())
            assert 0 < used <= 8 << 20, used
        finally:
            os.close(held)
    finally:
        ngx.stop()


def test_evict_links(d, mnt):
    """Symbolic links under the cache, as a version directory and as a
    block: eviction deletes nothing where they point."""
    tensors, ngx, url = served(d)
    cache = os.path.join(d, "cache")
    outside = os.path.join(d, "outside")
    os.mkdir(outside)
    for n in ("0", "1", "2"):
        with open(os.path.join(outside, n), "wb") as f:
            f.write(b"x" * (4 << 20))
    try:
        p = T.mount_fg(url, mnt, "-o", "cache=" + cache)
        try:
            read_all(mnt, tensors, [0])
        finally:
            T.stop_fg(p, mnt)
        ver = version_dirs(cache)[0]
        os.symlink(outside, os.path.join(os.path.dirname(ver),
                                         "0123456789abcdef"))
        os.symlink(os.path.join(outside, "0"), os.path.join(ver, "99999"))
        os.symlink(outside, os.path.join(cache, "v1", "fedcba9876543210"))
        p = T.mount_fg(url, mnt, "-o", "cache=%s,cache_size=8M" % cache)
        try:
            read_all(mnt, tensors)
        finally:
            T.stop_fg(p, mnt)
        assert sorted(os.listdir(outside)) == ["0", "1", "2"]
        assert all(os.path.getsize(os.path.join(outside, n)) == 4 << 20
                   for n in ("0", "1", "2"))
        used = sum(os.path.getsize(f) for f in cache_files(cache)
                   if os.path.basename(f).isdigit() and
                   not os.path.islink(f))
        assert 0 < used <= 8 << 20, used
    finally:
        ngx.stop()


def on_disk(cache):
    """The bytes the file system gives the cache directory and all under
    it, as du(1) counts them."""
    tot = os.lstat(cache).st_blocks * 512
    for r, ds, fs in os.walk(cache):
        for n in ds + fs:
            tot += os.lstat(os.path.join(r, n)).st_blocks * 512
    return tot


def test_size_counts_all(d, mnt):
    """cache_size=100K (under one block) after reading a Hub model of two
    shards: at most 100 KiB on the disk, heads, kept answers (the Hub's
    listings), meta, latest and their directories counted, every byte
    read right; and DIR/usage says what is there (issue 47, item 7: 220
    KiB before)."""
    from fixtures import world
    MiB = 1 << 20
    big = [("layers.%d.w" % i, "U8", [3 * MiB], os.urandom(3 * MiB))
           for i in range(3)]
    small = [("b.%d.w" % i, "U8", [100], os.urandom(100)) for i in range(3)]
    files = {}
    for name, t in (("model-00001-of-00002.safetensors", big),
                    ("model-00002-of-00002.safetensors", small)):
        with open(T.write_st(os.path.join(d, name), t), "rb") as f:
            files[name] = f.read()
    files["config.json"] = b"{}"
    cache = os.path.join(d, "cache")
    with world(os.path.join(d, "w")) as w:
        w.hub.push(w.hub.repo("org/m"), files)
        p = T.mount_fg("hf://org/m", mnt, "-o",
                       "cache=%s,cache_size=100K" % cache)
        try:
            for name, data in files.items():
                with open(os.path.join(mnt, "%repo", name), "rb") as f:
                    assert f.read() == data, name
            for i, t in enumerate(big):
                with open(os.path.join(mnt, "layers/%d/w" % i), "rb") as f:
                    assert f.read() == t[3], i
        finally:
            T.stop_fg(p, mnt)
    used = on_disk(cache)
    with open(os.path.join(cache, "usage")) as f:
        said = int(f.read())
    print("     cache_size=100K: %.1f KiB on the disk, usage says %.1f KiB"
          % (used / 1024, said / 1024))
    assert used <= 100 << 10, sorted(cache_files(cache))
    assert said <= 100 << 10 and abs(said - used) <= 8192, \
        (said, used)


def main():
    home = os.environ["XDG_CACHE_HOME"] = T.tmpdir()
    try:
        return T.run_tests([
            test_private,
            test_planted_blocks,
            test_checked_blocks,
            test_cache_cannot_take,
            test_shared_size,
            test_two_daemons_one_block,
            test_tmp_files,
            test_evict_links,
            test_size_counts_all,
        ])
    finally:
        import shutil
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

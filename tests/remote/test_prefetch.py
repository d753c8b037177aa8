#!/usr/bin/env python3
"""test_prefetch.py: `stfs prefetch` and -o prefetch= against nginx on
127.0.0.1 (its access log counts the requests and their bytes):

- a full warm, then every tensor read: no request more, the bytes right;
- --include of shard names splits a 4-shard model between two "ranks":
  each fetches the blocks of its shards only, each block once;
- PATH arguments (a directory of the tree) warm those tensors only;
- the state: user.stfs.prefetch.* xattrs on the root, --status, --json,
  --background;
- a local mount: a no-op that says so; a pattern that names nothing, a
  warm larger than cache_size and a mount without a cache: refused with
  the numbers and the option, nothing fetched;
- a server that is gone: exit 1 naming the file, state failed;
- -o prefetch=all warms at mount, and reads then make no request;
- a cold reader going on to a shard's end has the next shard's start
  fetched ahead, also when it is behind its prefetch (reading what the
  prefetch cached); one reading a warmed share does not;
- an unmount during a long warm (a paced server) is not held up;
- the ioctl is the mount owner's and root's (another user, let in by
  allow_other, reads but gets EPERM); globs past what a request holds are
  refused before it; a mount of include= warms what it shows;
- `stfs mount` on a terminal shows a progress line while slow headers
  arrive (a paced server), erased when the mount is live; off a terminal,
  none.

Every wait is on a condition, with a generous bound (a busy machine, a
sanitizer): nginx's log is read once a marker request is in it.
"""
import json
import os
import pty
import pwd
import re
import select
import subprocess
import sys
import mmap
import time

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402
from fixtures import (Nginx, big_file, free_port, paced_server,  # noqa
                      read, requests, sha, wait_port)


def prefetch(*args):
    return subprocess.run([T.STFS, "prefetch"] + list(args),
                          capture_output=True, text=True, timeout=120)


def wait_until(cond, what, timeout=300):
    """Wait for cond() (a generous bound: a busy machine, a sanitizer)."""
    end = time.time() + timeout
    while not cond():
        assert time.time() < end, what()
        time.sleep(0.05)


def state(mnt, name="state"):
    return os.getxattr(mnt, "user.stfs.prefetch." + name).decode()


def wait_state(mnt, want, timeout=300):
    end = time.time() + timeout
    while time.time() < end:
        s = state(mnt)
        if s in want:
            return s
        time.sleep(0.05)
    raise AssertionError("prefetch state %s, not %s" % (state(mnt), want))


def read_all(mnt, tensors, prefix="layers"):
    for name, _, _, data in tensors:
        p = os.path.join(mnt, name.replace(".", "/"))
        assert sha(read(p)) == sha(data), p


def shards(d, n=4, per=2, size=5 << 20):
    """n shards of per U8 tensors of size bytes each, with an index."""
    wm, tensors = {}, []
    for i in range(n):
        name = "model-%05d-of-%05d.safetensors" % (i + 1, n)
        ts = [("layers.%d.w%d" % (i, k), "U8", [size],
               bytes([(i * per + k) % 251]) * size) for k in range(per)]
        T.write_st(os.path.join(d, name), ts)
        for t in ts:
            wm[t[0]] = name
        tensors += ts
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wm}, f)
    return tensors


# ---- the tests -------------------------------------------------------------

def test_full_warm(d, mnt):
    srv = os.path.join(d, "srv")
    os.mkdir(srv)
    _, tensors = big_file(srv)
    ngx = Nginx(os.path.join(d, "ngx"), srv)
    try:
        p = T.mount_fg(ngx.url("big.safetensors"), mnt, "-o",
                       "cache=%s/cache" % d)
        assert state(mnt) == "idle"
        r = prefetch("-q", mnt)
        assert r.returncode == 0, r.stderr
        assert state(mnt) == "done"
        asked = int(state(mnt, "bytes_asked"))
        assert asked == os.path.getsize(os.path.join(srv,
                                                     "big.safetensors"))
        assert int(state(mnt, "bytes_cached")) == asked
        assert state(mnt, "files") == "1/1"
        got = requests(ngx)
        fetched = sum(b - a + 1 for _, a, b in got)
        # every byte once (the head, fetched at open, twice at most)
        assert asked <= fetched <= asked + (4 << 20), (asked, fetched)
        read_all(mnt, tensors)
        assert requests(ngx) == got, "reads after the warm made requests"
        st = json.loads(prefetch("--status", "--json", mnt).stdout)
        assert st["state"] == "done" and st["bytes_cached"] == asked
        T.stop_fg(p, mnt)
    finally:
        ngx.stop()


def resident(files):
    """Bytes of files in the page cache (fincore)."""
    r = subprocess.run(["fincore", "-b", "-n", "-o", "RES"] + files,
                       capture_output=True, text=True, check=True)
    return sum(int(x) for x in r.stdout.split())


def test_warm_in_memory(d, mnt):
    """The blocks a warm fetched stay in the page cache until they are
    read through the mount, and leave it then: a read after the warm,
    with the server stopped, gets every byte (0 requests), and the cache's
    pages after it are a small part of the bytes read (the mount's page
    cache holds them once) (issue 42)."""
    srv = os.path.join(d, "srv")
    os.mkdir(srv)
    _, tensors = big_file(srv)
    size = os.path.getsize(os.path.join(srv, "big.safetensors"))
    ngx = Nginx(os.path.join(d, "ngx"), srv)
    cache = os.path.join(d, "cache")
    try:
        p = T.mount_fg(ngx.url("big.safetensors"), mnt, "-o",
                       "cache=" + cache)
        try:
            r = prefetch("-q", mnt)
            assert r.returncode == 0, r.stderr
            blocks = [os.path.join(r_, f) for r_, _, fs in os.walk(cache)
                      for f in fs if f.isdigit()]
            warm = resident(blocks)
            # (the first block was fetched for the open's reads)
            assert warm >= size - (8 << 20), (warm, size)
            ngx.stop()
            read_all(mnt, tensors)
            after = resident(blocks)
            print("     after the warm: %.0f MiB of the cache in memory; "
                  "after the read: %.1f MiB" % (warm / 2**20,
                                                 after / 2**20))
            assert after <= 0.1 * size, (after, size)
        finally:
            T.stop_fg(p, mnt)
    finally:
        ngx.stop()


def next_asked(ngx, since, nxt="model-00002-of-00004.safetensors"):
    """Whether the next shard's start was asked for since request since."""
    return any(u.endswith("/" + nxt) and a == 0
               for u, a, _ in requests(ngx)[since:])


def blocks_cached(cache):
    return sum(1 for _, _, fs in os.walk(cache) for f in fs if f.isdigit())


def read_direct(path, after=None):
    """path read with O_DIRECT, 1 MiB at a time; after(): called after
    the first read."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buf, off, out = mmap.mmap(-1, 1 << 20), 0, b""
    try:
        while True:
            n = os.preadv(fd, [buf], off)
            if not n:
                return out
            out += buf[:n]
            off += n
            if after:
                after()
                after = None
    finally:
        os.close(fd)


def test_next_shard(d, mnt):
    """A cold reader going on to a shard's end has the next shard's start
    fetched before it reads there (loaders read shards in order); one
    reading cached blocks does not (test_include_ranks).  Cold is the
    reader the network feeds, also when its prefetch is ahead of it and
    it reads what the prefetch brought from the cache (a slow reader, a
    busy machine): an O_DIRECT reader that waits, before each tensor's
    rest, until the prefetch its first read started has cached its
    blocks (issue 47, item 8: under load, the next shard was not fetched
    ahead).  Each waits on conditions, not on time."""
    srv = os.path.join(d, "srv")
    os.mkdir(srv)
    tensors = shards(srv)
    ngx = Nginx(os.path.join(d, "ngx"), srv)
    nxt = "model-00002-of-00004.safetensors"
    try:
        p = T.mount_fg(ngx.url("model.safetensors.index.json"), mnt,
                       "-o", "cache=%s/cache" % d)
        try:
            opened = len(requests(ngx))
            read_all(mnt, tensors[:2])          # shard 1, in order
            wait_until(lambda: next_asked(ngx, opened), lambda:
                       "the next shard was not fetched ahead: %r" %
                       requests(ngx)[opened:])
            before = len(requests(ngx))
            read_all(mnt, tensors[2:4])         # and it is read from there
            assert not any(u.endswith("/" + nxt) and a == 0
                           for u, a, _ in requests(ngx)[before:])
        finally:
            T.stop_fg(p, mnt)
        # the slow reader: shard 1 is 3 blocks (10 MiB and its header)
        cache = os.path.join(d, "cache2")
        p = T.mount_fg(ngx.url("model.safetensors.index.json"), mnt,
                       "-o", "cache=" + cache)
        try:
            opened = len(requests(ngx))
            for (name, _, _, data), n in zip(tensors[:2], (2, 3)):
                got = read_direct(os.path.join(mnt, name.replace(".", "/")),
                                  lambda: wait_until(
                                      lambda: blocks_cached(cache) >= n,
                                      lambda: "%d blocks cached, not %d" %
                                      (blocks_cached(cache), n)))
                assert got == data, name
            wait_until(lambda: next_asked(ngx, opened), lambda:
                       "the next shard was not fetched ahead of a reader "
                       "behind its prefetch: %r" % requests(ngx)[opened:])
        finally:
            T.stop_fg(p, mnt)
    finally:
        ngx.stop()


def test_include_ranks(d, mnt):
    srv = os.path.join(d, "srv")
    os.mkdir(srv)
    tensors = shards(srv)
    ngx = Nginx(os.path.join(d, "ngx"), srv)
    try:
        split = [("model-0000[12]-*",), ("model-0000[34]-*",)]
        for rank, globs in enumerate(split):
            before = len(requests(ngx))
            p = T.mount_fg(ngx.url("model.safetensors.index.json"), mnt,
                           "-o", "cache=%s/cache%d" % (d, rank))
            opened = len(requests(ngx))
            r = prefetch(*(["--include=" + g for g in globs] + [mnt]))
            assert r.returncode == 0, r.stderr
            mine = requests(ngx)[opened:]
            names = {os.path.basename(u) for u, _, _ in mine}
            want = {"model-%05d-of-00004.safetensors" % (2 * rank + k + 1)
                    for k in range(2)}
            assert names == want, (rank, names)
            blocks = [(u, a >> 22) for u, a, _ in mine]
            assert len(blocks) == len(set(blocks)), "a block fetched twice"
            size = sum(os.path.getsize(os.path.join(srv, n)) for n in want)
            assert sum(b - a + 1 for _, a, b in mine) == size
            assert int(state(mnt, "bytes_asked")) == size
            assert state(mnt, "files") == "2/2"
            # its share reads from the cache; the other half fetches
            read_all(mnt, tensors[4 * rank:4 * rank + 4])
            assert len(requests(ngx)) == opened + len(mine)
            T.stop_fg(p, mnt)
            assert before < opened
    finally:
        ngx.stop()


def test_paths(d, mnt):
    srv = os.path.join(d, "srv")
    os.mkdir(srv)
    tensors = shards(srv, n=2, per=2)
    ngx = Nginx(os.path.join(d, "ngx"), srv)
    try:
        p = T.mount_fg(ngx.url("model.safetensors.index.json"), mnt, "-o",
                       "cache=%s/cache" % d)
        opened = len(requests(ngx))
        r = prefetch("-q", mnt, os.path.join(mnt, "layers", "1"))
        assert r.returncode == 0, r.stderr
        mine = requests(ngx)[opened:]
        assert {os.path.basename(u) for u, _, _ in mine} == \
            {"model-00002-of-00002.safetensors"}
        assert int(state(mnt, "bytes_asked")) == os.path.getsize(
            os.path.join(srv, "model-00002-of-00002.safetensors"))
        read_all(mnt, tensors[2:])
        assert len(requests(ngx)) == opened + len(mine)
        r = prefetch(mnt, os.path.join(d, "srv"))
        assert r.returncode == 2 and "not in the mount" in r.stderr
        T.stop_fg(p, mnt)
    finally:
        ngx.stop()


def test_status_background(d, mnt):
    srv = os.path.join(d, "srv")
    os.mkdir(srv)
    big_file(srv)
    ngx = Nginx(os.path.join(d, "ngx"), srv)
    try:
        p = T.mount_fg(ngx.url("big.safetensors"), mnt, "-o",
                       "cache=%s/cache" % d)
        r = prefetch("--status", mnt)
        assert r.returncode == 0 and "state: idle" in r.stdout, r.stdout
        r = prefetch("--background", mnt)
        assert r.returncode == 0 and "started" in r.stdout, r.stdout
        assert wait_state(mnt, ("done",)) == "done"
        r = prefetch("--status", mnt)
        assert r.returncode == 0 and "state: done" in r.stdout
        assert "of 120.0 MiB (100%)" in r.stdout, r.stdout
        assert "files 1/1" in r.stdout
        r = prefetch("--json", mnt)     # again: every block a cache hit
        lines = [json.loads(x) for x in r.stdout.splitlines()]
        assert r.returncode == 0 and lines[-1]["state"] == "done"
        assert lines[-1]["bytes_cached"] == lines[-1]["bytes_asked"]
        assert state(mnt, "error") == ""
        T.stop_fg(p, mnt)
    finally:
        ngx.stop()


def test_local_noop(d, mnt):
    _, tensors = big_file(d)
    p = T.mount_fg(os.path.join(d, "big.safetensors"), mnt)
    r = prefetch(mnt)
    assert r.returncode == 0, r.stderr
    assert "nothing to prefetch: a local mount" in r.stdout, r.stdout
    st = json.loads(prefetch("--status", "--json", mnt).stdout)
    assert st["state"] == "done" and st["local"] and st["bytes_asked"] == 0
    r = prefetch(d)
    assert r.returncode == 1 and "not an stfs mount" in r.stderr, r.stderr
    T.stop_fg(p, mnt)


def test_refused(d, mnt):
    srv = os.path.join(d, "srv")
    os.mkdir(srv)
    big_file(srv)
    ngx = Nginx(os.path.join(d, "ngx"), srv)
    try:
        p = T.mount_fg(ngx.url("big.safetensors"), mnt, "-o",
                       "cache=%s/cache,cache_size=64M" % d)
        opened = len(requests(ngx))
        r = prefetch(mnt)
        assert r.returncode == 1, r.stderr
        assert "125829376 bytes" in r.stderr and "67108864" in r.stderr, \
            r.stderr
        assert "cache_size=" in r.stderr, r.stderr
        assert state(mnt) == "failed" and "cache_size" in state(mnt, "error")
        r = prefetch("--include=nothing.here", mnt)
        assert r.returncode == 1 and "names no tensor" in r.stderr, r.stderr
        r = prefetch("--include=layers/0/*", mnt)      # 40 MiB: it fits
        assert r.returncode == 0, r.stderr
        assert len(requests(ngx)) - opened == 11       # 40 MiB + a bit
        T.stop_fg(p, mnt)
        p = T.mount_fg(ngx.url("big.safetensors"), mnt, "-o", "nocache")
        r = prefetch(mnt)
        assert r.returncode == 1 and "no cache" in r.stderr, r.stderr
        T.stop_fg(p, mnt)
    finally:
        ngx.stop()


def test_server_gone(d, mnt):
    srv = os.path.join(d, "srv")
    os.mkdir(srv)
    big_file(srv)
    ngx = Nginx(os.path.join(d, "ngx"), srv)
    try:
        p = T.mount_fg(ngx.url("big.safetensors"), mnt, "-o",
                       "cache=%s/cache,retries=1,connect_timeout=2" % d)
        ngx.stop()
        r = prefetch(mnt)
        assert r.returncode == 1, r.stderr
        assert "prefetch failed: big.safetensors: bytes" in r.stderr, \
            r.stderr
        assert state(mnt) == "failed"
        assert state(mnt, "error").startswith("big.safetensors: ")
        T.stop_fg(p, mnt)
    finally:
        ngx.stop()


def test_mount_option(d, mnt):
    srv = os.path.join(d, "srv")
    os.mkdir(srv)
    tensors = shards(srv, n=2, per=2)
    ngx = Nginx(os.path.join(d, "ngx"), srv)
    try:
        p = T.mount_fg(ngx.url("model.safetensors.index.json"), mnt, "-o",
                       "cache=%s/cache,prefetch=layers/1/*" % d)
        assert wait_state(mnt, ("done", "failed")) == "done"
        assert state(mnt, "files") == "1/1"
        got = requests(ngx)
        read_all(mnt, tensors[2:])
        assert requests(ngx) == got
        T.stop_fg(p, mnt)
        p = T.mount_fg(ngx.url("model.safetensors.index.json"), mnt, "-o",
                       "cache=%s/cache2,prefetch=all" % d)
        assert wait_state(mnt, ("done", "failed")) == "done"
        got = requests(ngx)
        read_all(mnt, tensors)
        assert requests(ngx) == got
        T.stop_fg(p, mnt)
    finally:
        ngx.stop()


def test_unmount_while_warming(d, mnt):
    """A warm that has far to go (120 MiB at 1 MB/s a connection, 8 of
    them: 16 s) does not hold up the unmount: its queued blocks are
    dropped, those on the wire (4 s each) end first.  The unmount ends
    before the warm would have: fewer blocks are in the cache than the
    file has (a condition, where a time bound failed on a busy
    machine)."""
    srv = os.path.join(d, "srv")
    os.mkdir(srv)
    big_file(srv)
    port = free_port()
    paced = subprocess.Popen([sys.executable, os.path.join(
        TESTS_DIR, "servers", "pacedhttp.py"), srv, str(port),
        str(1000 * 1000)])
    T._procs.append(paced)
    cache = os.path.join(d, "cache")
    try:
        assert wait_port(port), "pacedhttp.py did not start"
        p = T.mount_fg("http://127.0.0.1:%d/big.safetensors" % port, mnt,
                       "-o", "cache=" + cache)
        r = prefetch("--background", mnt)
        assert r.returncode == 0, r.stderr
        assert wait_state(mnt, ("warming",)) == "warming"
        t = time.time()
        T.stop_fg(p, mnt)
        took = time.time() - t
        size = os.path.getsize(os.path.join(srv, "big.safetensors"))
        n = blocks_cached(cache)
        assert n < size >> 22, "the unmount waited %.1f s for the warm " \
            "(%d blocks cached)" % (took, n)
        print("     the unmount took %.1f s; %d of %d blocks cached" %
              (took, n, size >> 22))
    finally:
        paced.kill()
        paced.wait()


def mount_on_tty(url, mnt, tty):
    """`stfs mount -o nocache url mnt` (it returns once the daemon
    serves) with stderr on a terminal or not: its status and stderr."""
    if not tty:
        r = subprocess.run([T.STFS, "mount", "-o", "nocache", url, mnt],
                           capture_output=True, timeout=120)
        return r.returncode, r.stderr.decode(errors="replace")
    master, slave = pty.openpty()
    p = subprocess.Popen([T.STFS, "mount", "-o", "nocache", url, mnt],
                         stdin=subprocess.DEVNULL, stdout=slave,
                         stderr=slave)
    os.close(slave)
    out, end = b"", time.time() + 120
    while time.time() < end:
        if select.select([master], [], [], 0.2)[0]:
            try:
                b = os.read(master, 4096)
            except OSError:         # the terminal's last holder is gone
                b = b""
            if not b and p.poll() is not None:
                break
            out += b
        elif p.poll() is not None:
            break
    os.close(master)
    return p.wait(timeout=10), out.decode(errors="replace")


def test_mount_progress_line(d, mnt):
    """Headers that take seconds to arrive (3 shards of ~120 KB headers,
    50 KB/s a connection): on a terminal, `stfs mount` draws the line
    (files read of 3, bytes, rate, time) and erases it before it returns;
    with stderr not a terminal, it prints nothing."""
    srv = os.path.join(d, "srv")
    os.mkdir(srv)
    wm = {}
    for i in range(3):
        name = "model-%05d-of-00003.safetensors" % (i + 1)
        ts = [("model.layers.%d.block_%05d.weight" % (i, k), "U8", [1],
               bytes([k % 251])) for k in range(1500)]
        T.write_st(os.path.join(srv, name), ts)
        wm.update({t[0]: name for t in ts})
    with open(os.path.join(srv, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wm}, f)
    paced, port = paced_server(srv, 50 * 1000)
    url = "http://127.0.0.1:%d/" % port
    try:
        t = time.time()
        rc, out = mount_on_tty(url, mnt, tty=True)
        took = time.time() - t
        T._mounts.append(mnt)
        assert rc == 0, out
        assert took > 1.5, "headers too quick to test the line: %.1f s" % \
            took
        lines = re.findall(r"\rstfs: reading headers: (\d+) of 3 files, "
                           r"[0-9.]+ [KMG]?i?B, [0-9.]+ [KMG]?i?B/s, "
                           r"(\d+) s\x1b\[K", out)
        assert lines, repr(out)
        assert all(0 <= int(n) <= 3 for n, _ in lines), lines
        assert out.endswith("\r\x1b[K"), "the line was not erased: %r" % \
            out[-200:]
        assert os.path.exists(os.path.join(mnt, "model", "layers", "2",
                                           "block_01499", "weight"))
        T.unmount(mnt)
        rc, out = mount_on_tty(url, mnt, tty=False)
        T._mounts.append(mnt)
        assert rc == 0, out
        assert "reading headers" not in out and "\r" not in out, repr(out)
        T.unmount(mnt)
    finally:
        paced.kill()
        paced.wait()


def as_nobody(*cmd):
    """cmd run as nobody (its output, text)."""
    pw = pwd.getpwnam("nobody")

    def drop():
        os.setgroups([])
        os.setgid(pw.pw_gid)
        os.setuid(pw.pw_uid)
    return subprocess.run(list(cmd), capture_output=True, text=True,
                          preexec_fn=drop, timeout=60)


def test_owner_only(d, mnt):
    """With -o allow_other another user reads the mount but may not
    start a warm, nor so set the state readiness probes read: EPERM, said
    so, the state untouched; the owner (root here) may.  Globs past what
    one request holds (2,000 --include, or 5,000 bytes) are refused
    before it is sent, saying the bound."""
    srv = os.path.join(d, "srv")
    os.makedirs(srv)
    tensors = shards(srv, n=2, per=1, size=1 << 20)
    for x in (d, srv, os.path.dirname(mnt)):
        os.chmod(x, 0o755)
    ngx = Nginx(os.path.join(d, "ngx"), srv)
    try:
        p = T.mount_fg(ngx.url("model.safetensors.index.json"), mnt, "-o",
                       "allow_other,cache=%s/cache" % d)
        other = T.stfs_for_others()
        for args in (["--include=nothing.here"], ["--include=layers/0/*"]):
            r = as_nobody(other, "prefetch", *args, mnt)
            assert r.returncode == 1 and "only the user who mounted it " \
                "and root may prefetch it" in r.stderr, r.stderr
            assert state(mnt) == "idle", state(mnt)
        r = as_nobody(sys.executable, "-c", "import sys; sys.stdout.write("
                      "str(len(open(sys.argv[1], 'rb').read())))",
                      os.path.join(mnt, "layers", "1", "w0"))
        assert r.returncode == 0 and r.stdout == str(1 << 20), r.stderr
        r = prefetch(*["--include=layers/%d/*" % i for i in range(2000)],
                     mnt)
        assert r.returncode == 2 and "2000 --include globs" in r.stderr \
            and "256 at most" in r.stderr, r.stderr
        r = prefetch("--exclude=" + "x" * 5000, mnt)
        assert r.returncode == 2 and "4095 at most" in r.stderr, r.stderr
        assert state(mnt) == "idle"
        r = prefetch(mnt)
        assert r.returncode == 0 and state(mnt) == "done", r.stderr
        read_all(mnt, [(n, 0, 0, b) for n, _, _, b in tensors])
        T.stop_fg(p, mnt)
    finally:
        ngx.stop()


def test_include_mount(d, mnt):
    """A mount of a rank's share (-o include=): `stfs prefetch MNT`
    warms the tensors it shows, not its shards whole; those then read
    with no request."""
    srv = os.path.join(d, "srv")
    os.mkdir(srv)
    tensors = shards(srv, n=2, per=2, size=1 << 20)
    ngx = Nginx(os.path.join(d, "ngx"), srv)
    try:
        p = T.mount_fg(ngx.url("model.safetensors.index.json"), mnt,
                       "-o", "cache=%s/cache,block_size=64K,"
                       "include=layers.0.w0" % d)
        opened = len(requests(ngx))
        r = prefetch(mnt)
        assert r.returncode == 0, r.stderr
        asked = int(state(mnt, "bytes_asked"))
        assert (1 << 20) <= asked <= (1 << 20) + (64 << 10), asked
        mine = requests(ngx)[opened:]
        assert {os.path.basename(u) for u, _, _ in mine} == \
            {"model-00001-of-00002.safetensors"}, mine
        assert sum(b - a + 1 for _, a, b in mine) == asked
        n = len(requests(ngx))
        read_all(mnt, tensors[:1])
        assert len(requests(ngx)) == n
        assert not os.path.exists(os.path.join(mnt, "layers", "1"))
        T.stop_fg(p, mnt)
    finally:
        ngx.stop()


TESTS = [test_full_warm, test_warm_in_memory, test_include_ranks,
         test_next_shard, test_paths,
         test_status_background,
         test_local_noop, test_refused, test_server_gone, test_mount_option,
         test_unmount_while_warming, test_mount_progress_line,
         test_owner_only, test_include_mount]

if __name__ == "__main__":
    sys.exit(T.run_tests(TESTS))

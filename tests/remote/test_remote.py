#!/usr/bin/env python3
"""test_remote.py: checkpoints behind http:// URLs, against real servers
started here on 127.0.0.1: nginx from Debian (ranges, ETag, 416, and a
location with ranges turned off), and for faults nginx cannot make, a
small standard-library server (503 then 200, 429 with Retry-After, a
stall).  Every read is compared (sha256) with the source.

- the real corpus and the real shard set (its directory URL and its index
  URL) mounted and inspected over HTTP, tensor by tensor; 40 shards opened
  several at a time, the first broken one (in order) reported;
- large tensors read through the worker pool, the virtual file, random
  reads;
- refused at mount with a clear message and nothing mounted: 404, no
  server, a server that ignores ranges, a URL with no path;
- after mount: an object replaced on the server gives EIO (never bytes of
  two versions), a stopped server gives EIO in bounded time and reads
  work again once it is back, 503 and 429 are retried, a stall ends in
  EIO; failures are logged;
- the on-disk cache: offline, versions, torn blocks, its size, nocache;
  readers of blocks being fetched and of cached ones, the block files the
  daemon keeps open, blocks removed while mounted;
- a read in the middle of a block is answered from the block's tail,
  fetched first, and so is a second reader of that tail;
- without a cache, prefetch into memory: whole blocks ahead for a reader
  in order, exactly the bytes of random reads, nothing on disk;
- unmounting while readahead requests wait for a slow block: answered
  before the FUSE channel closes, and the daemon exits at once.
"""
import errno
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402
from fixtures import (Nginx, big_file, cache_files, check_real_file,  # noqa: E402
                      disarm, faulty_server, free_port, mount_logged,
                      read, stop_logged)
from rawhttp import RawServer, file_range  # noqa: E402

EXPECTED = os.path.join(T.REAL, "expected.json")


# ---- the tests -------------------------------------------------------------

def test_real_corpus(d, mnt):
    ngx = Nginx(os.path.join(d, "ngx"), T.REAL)
    try:
        with open(EXPECTED) as f:
            exp = json.load(f)
        n = 0
        for rel, info in sorted(exp["files"].items()):
            if not info["valid"]:
                continue
            url = ngx.url(rel)

            def has_url(fp):
                assert os.getxattr(fp, "user.safetensors.url") == \
                    url.encode(), fp
            check_real_file(url, info["tensors"], mnt, has_url)
            n += 1
        print("     %d real files over HTTP: every tensor's sha256" % n)
    finally:
        ngx.stop()


def test_real_shards(d, mnt):
    ngx = Nginx(os.path.join(d, "ngx"), T.REAL)
    try:
        want = {t["name"]: t for t in T.inspect_json(
            os.path.join(T.REAL, "jl-sharded"))["tensors"]}
        for url in (ngx.url("jl-sharded/"),
                    ngx.url("jl-sharded/model.safetensors.index.json")):
            j = T.inspect_json(url)
            assert j["source"] == url and j["sharded"]
            assert {t["name"]: (t["file"], t["file_offset"], t["dtype"])
                    for t in j["tensors"]} == \
                {k: (v["file"], v["file_offset"], v["dtype"])
                 for k, v in want.items()}
            p = T.mount_fg(url, mnt)
            try:
                for k, t in want.items():
                    with open(os.path.join(T.REAL, "jl-sharded",
                                           t["file"]), "rb") as f:
                        f.seek(t["file_offset"])
                        b = f.read(t["bytes"])
                    assert read(os.path.join(mnt, t["path"])) == b, k
                merged = read(os.path.join(mnt, "%model.safetensors"))
                assert len(merged) == os.stat(
                    os.path.join(mnt, "%model.safetensors")).st_size
            finally:
                T.stop_fg(p, mnt)
    finally:
        ngx.stop()


def test_many_shards(d, mnt):
    """40 shards open several at a time: all there, in order; with two
    broken, the mount fails naming the first of them, as if one by one."""
    data = os.path.join(d, "data")
    os.mkdir(data)
    n = T.make_405b(data, shards=40, per=2)
    ngx = Nginx(os.path.join(d, "ngx"), data)
    try:
        j = T.inspect_json(ngx.url())
        assert len(j["tensors"]) == n
        files = sorted({t["file"] for t in j["tensors"]})
        assert len(files) == 40 and files[0].startswith("model-00001-")
        p = T.mount_fg(ngx.url(), mnt)
        try:
            assert len(os.listdir(os.path.join(mnt, "model/layers"))) == 40
            st = os.stat(os.path.join(mnt, "model/layers/39/mlp/w1/weight"))
            assert st.st_size == 16384 * 21568 * 2
        finally:
            T.stop_fg(p, mnt)
        os.unlink(os.path.join(data, "model-00031-of-00040.safetensors"))
        with open(os.path.join(data, "model-00017-of-00040.safetensors"),
                  "r+b") as f:
            f.write((1 << 40).to_bytes(8, "little"))
        for cmd in (["mount", ngx.url(), mnt], ["inspect", ngx.url()]):
            r = subprocess.run([T.STFS] + cmd, capture_output=True,
                               timeout=60)
            err = r.stderr.decode()
            assert r.returncode == 1, r
            assert "shard model-00017-of-00040.safetensors" in err, err
            assert "00031" not in err, err
            assert not T.is_mount(mnt) and not T.daemons_for(mnt)
    finally:
        ngx.stop()


def test_large_reads(d, mnt):
    data = os.path.join(d, "data")
    os.mkdir(data)
    src, tensors = big_file(data)
    ngx = Nginx(os.path.join(d, "ngx"), data)
    try:
        p = T.mount_fg(ngx.url("big.safetensors"), mnt)
        try:
            # three readers at once: the worker pool serves them
            out = {}

            def one(name):
                out[name] = read(os.path.join(mnt, name.replace(".", "/")))
            th = [threading.Thread(target=one, args=(t[0],))
                  for t in tensors]
            for t in th:
                t.start()
            for t in th:
                t.join()
            for name, _, _, b in tensors:
                assert out[name] == b, name
            whole = read(src)
            assert read(os.path.join(mnt, "%model.safetensors")) == whole
            fd = os.open(os.path.join(mnt, "layers/1/w"), os.O_RDONLY |
                         os.O_DIRECT)
            try:
                rng = random.Random(4)
                for _ in range(50):
                    off = rng.randrange(40 << 20)
                    off -= off % 4096
                    n = rng.choice((4096, 65536, 1 << 20))
                    assert os.pread(fd, n, off) == tensors[1][3][off:off + n]
            finally:
                os.close(fd)
        finally:
            T.stop_fg(p, mnt)
    finally:
        ngx.stop()


def test_refused_at_mount(d, mnt):
    data = os.path.join(d, "data")
    os.mkdir(data)
    big_file(data)
    # /coded/: bytes labelled as compressed, which stfs never asks for
    ngx = Nginx(os.path.join(d, "ngx"), data, extra="    location /coded/ "
                "{ alias %s/; add_header Content-Encoding gzip always; }\n"
                "    location /auth/ { return 401; }" % data)
    dead = "http://127.0.0.1:%d/x.safetensors" % free_port()
    try:
        # and the mount's exit status: the failure's class (stfs(1))
        cases = [
            (ngx.url("nope.safetensors"), "HTTP 404", 3),
            (ngx.url("noranges/big.safetensors"),
             "the server ignores range requests", 1),
            (dead, "Couldn't connect", 5),
            (ngx.url("nothing/"), "the index: HTTP 404", 3),
            ("http://127.0.0.1:%d" % ngx.port, "a URL needs a path", 1),
            (ngx.url("coded/big.safetensors"),
             "the server sent the bytes encoded (Content-Encoding: gzip)", 1),
            (ngx.url("auth/big.safetensors"), "HTTP 401", 4),
        ]
        for url, want, status in cases:
            for cmd, st in ((["mount", "-o", "retries=1", url, mnt], status),
                            (["inspect", url], 1)):
                t = time.time()
                r = subprocess.run([T.STFS] + cmd, capture_output=True,
                                   timeout=60)
                err = r.stderr.decode()
                assert r.returncode == st, (cmd, r)
                assert err.startswith("stfs: %s: " % url) and want in err, \
                    (url, err)
                assert time.time() - t < 20
                assert not T.is_mount(mnt) and not T.daemons_for(mnt)
    finally:
        ngx.stop()


def test_public_net(d, mnt):
    """-o public_net: a connection to a loopback address is refused
    before it is made (no retry, a clear message, nothing mounted), the
    server's own address passes with -o allow_net=, and a redirect from
    it to another loopback address (127.0.0.2) is refused all the same;
    without public_net that redirect is followed (the control)."""
    data = os.path.join(d, "data")
    os.mkdir(data)
    w = os.urandom(1 << 16)
    T.write_st(os.path.join(data, "big.safetensors"),
               [("layers.0.w", "U8", [len(w)], w)])
    port = free_port()
    ngx = Nginx(os.path.join(d, "ngx"), data, port=port, also=("127.0.0.2",),
                extra="    location /to2/ { return 302 "
                "http://127.0.0.2:%d/big.safetensors; }" % port)
    direct = ngx.url("big.safetensors")
    via = ngx.url("to2/big.safetensors")
    log = os.path.join(d, "ngx", "access.log")

    def asked():
        with open(log) as f:
            return sum(1 for x in f if x.startswith("/big.safetensors "))
    try:
        # the exit status: 6, refused by policy; 2, a usage error
        for url, opts, says, status in (
                (direct, "public_net",
                 "a connection to 127.0.0.1 refused: a loopback address "
                 "(public_net)", 6),
                (via, "public_net,allow_net=127.0.0.1",
                 "a connection to 127.0.0.2 refused: a loopback address "
                 "(public_net)", 6),
                (via, "public_net,allow_net=127.0.0.1/32,"
                 "allow_net=::1",
                 "a connection to 127.0.0.2 refused", 6),
                (direct, "public_net,allow_net=127.0.0.1/33",
                 "allow_net=127.0.0.1/33: give an address or a CIDR", 2),
                (direct, "public_net,allow_net=localhost",
                 "allow_net=localhost: give an address or a CIDR", 2)):
            before = asked()
            t = time.time()
            r = subprocess.run([T.STFS, "mount", "-o", opts, url, mnt],
                               capture_output=True, timeout=60)
            err = r.stderr.decode()
            assert r.returncode == status and says in err, \
                (url, opts, r.returncode, err)
            assert time.time() - t < 5, "retried"
            assert not T.is_mount(mnt) and not T.daemons_for(mnt)
            assert asked() == before, "the refused address was asked"
        # allowed: the server's address, and 127.0.0.0/8 for the redirect
        for url, opts in ((direct, "public_net,allow_net=127.0.0.1"),
                          (via, "public_net,allow_net=127.0.0.0/8"),
                          (via, "retries=0")):
            before = asked()
            p = T.mount_fg(url, mnt, "-o", opts)
            try:
                assert read(os.path.join(mnt, "layers/0/w")) == w, opts
            finally:
                T.stop_fg(p, mnt)
            assert asked() > before
    finally:
        ngx.stop()


def test_public_net_proxy(d, mnt):
    """-o public_net connects straight to the source's address: a proxy
    variable is not used, since the proxy would connect on to whatever
    address it is asked for (here the "proxy" at 127.0.0.2, which
    allow_net= lets in, would hand over 127.0.0.1's bytes).  Without
    public_net the same environment goes through the proxy (the control:
    the variable is in effect)."""
    data = os.path.join(d, "data")
    os.mkdir(data)
    w = os.urandom(1 << 12)
    T.write_st(os.path.join(data, "big.safetensors"),
               [("layers.0.w", "U8", [len(w)], w)])
    ngx = Nginx(os.path.join(d, "ngx"), data)
    proxy = Nginx(os.path.join(d, "proxy"), data, host="127.0.0.2")
    url = ngx.url("big.safetensors")
    env = {k: v for k, v in os.environ.items()
           if not k.lower().endswith("_proxy")}
    env["http_proxy"] = "http://127.0.0.2:%d" % proxy.port

    def asked(who):
        with open(os.path.join(d, who, "access.log")) as f:
            return sum(1 for x in f if x.startswith("/big.safetensors "))
    try:
        r = subprocess.run([T.STFS, "mount", "-o",
                            "public_net,allow_net=127.0.0.2", url, mnt],
                           capture_output=True, timeout=60, env=env)
        if r.returncode == 0:
            T._mounts.append(mnt)
        err = r.stderr.decode()
        assert r.returncode == 6 and "a connection to 127.0.0.1 refused: " \
            "a loopback address (public_net)" in err, err
        assert asked("ngx") == 0 and asked("proxy") == 0
        # the control: the proxy variable is in effect without public_net
        r = subprocess.run([T.STFS, "mount", "-o", "retries=0", url, mnt],
                           capture_output=True, timeout=60, env=env)
        assert r.returncode == 0, r.stderr
        T._mounts.append(mnt)
        assert read(os.path.join(mnt, "layers/0/w")) == w
        T.unmount(mnt)
        assert asked("proxy") > 0 and asked("ngx") == 0
    finally:
        ngx.stop()
        proxy.stop()


def test_changed_and_down(d, mnt):
    data = os.path.join(d, "data")
    os.mkdir(data)
    src, tensors = big_file(data)
    ngx = Nginx(os.path.join(d, "ngx"), data)
    log = os.path.join(d, "log")
    url = ngx.url("big.safetensors")
    try:
        # connections=8: a window of 32 MiB, so the reader of layers.0
        # leaves layers.1's last blocks (40 MiB) to be fetched after the
        # change (with connections=0 the window grows with the link, and
        # may cache all of layers.1 first: served, as the version seen)
        r = subprocess.run([T.STFS, "mount", "-o", "log=" + log +
                            ",connect_timeout=2,stall_timeout=2,retries=1"
                            ",connections=8", url, mnt],
                           capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr
        T._mounts.append(mnt)
        w0 = os.path.join(mnt, "layers/0/w")
        w2 = os.path.join(mnt, "layers/2/w")
        assert read(w0) == tensors[0][3]
        # the server stops: EIO, in bounded time, and the daemon lives
        ngx.stop()
        T.expect_errno(w2, 5, 30)
        assert T.daemons_for(mnt)
        # ... and comes back (a read of bytes that failed less than
        # 0.5 s ago fails at once: that is the kernel's retry)
        ngx.start()
        time.sleep(0.6)
        assert read(w2) == tensors[2][3]
        # the object is replaced: never bytes of two versions
        _, new = big_file(data, seed=9)
        os.utime(src, (time.time() + 100, time.time() + 100))
        T.expect_errno(os.path.join(mnt, "layers/1/w"), 5, 30)
        with open(log) as f:
            text = f.read()
        assert "%s: bytes" % url in text, text
        assert "changed" in text or "412" in text, text
    finally:
        T.unmount(mnt)
        ngx.stop()


def test_retries(d, mnt):
    data = os.path.join(d, "data")
    os.mkdir(data)
    src, tensors = big_file(data)
    srv = faulty_server(data)
    base = "http://127.0.0.1:%d/" % srv.server_address[1]
    try:
        for fault, opts, want_min in (("503x2", "retries=3", 0.0),
                                      ("429", "retries=2", 1.0),
                                      ("429date", "retries=2", 2.0)):
            p = T.mount_fg(base + fault + "/big.safetensors", mnt, "-o",
                           opts)
            try:
                with srv.lock:
                    srv.counts.clear()
                    srv.armed = True
                t = time.time()
                assert read(os.path.join(mnt, "layers/1/w")) == \
                    tensors[1][3], fault
                assert time.time() - t >= want_min, fault
                srv.armed = False
            finally:
                T.stop_fg(p, mnt)
        # a stall: EIO after stall_timeout for each attempt
        p = T.mount_fg(base + "stall/big.safetensors", mnt, "-o",
                       "stall_timeout=2,retries=1")
        try:
            with srv.lock:
                srv.counts.clear()
                srv.armed = True
            el = T.expect_errno(os.path.join(mnt, "layers/2/w"), 5, 20)
            assert el >= 2, el
        finally:
            disarm(srv, p, mnt)
        # a trickle (20 bytes/s, under min_speed) ends as a stall does,
        # each attempt after stall_timeout; min_speed=0 lets it go on
        srv.stalled.clear()
        for opts, want in (("", 5), (",min_speed=0", None)):
            p = T.mount_fg(base + "trickle/big.safetensors", mnt, "-o",
                           "stall_timeout=2,retries=1" + opts)
            try:
                with srv.lock:
                    srv.counts.clear()
                    srv.armed, srv.trickled = True, 0
                if want:
                    el = T.expect_errno(os.path.join(mnt, "layers/2/w"),
                                        want, 20)
                    assert el >= 3.5 and srv.trickled >= 2, \
                        (el, srv.trickled)
                else:
                    got = []
                    t = threading.Thread(target=lambda: got.append(
                        read(os.path.join(mnt, "layers/2/w"))))
                    t.start()
                    t.join(6)               # past 2 attempts of 2 s
                    assert t.is_alive() and srv.trickled >= 1, \
                        srv.trickled
                    srv.stalled.set()       # the rest comes at once
                    t.join(20)
                    assert got == [tensors[2][3]]
            finally:
                disarm(srv, p, mnt)
                srv.stalled.clear()
    finally:
        srv.shutdown()


def test_cut_clean(d, mnt):
    """A 206 whose body ends early but cleanly (no Content-Length and the
    connection closed; or chunked, with its last 0-chunk) is a cut
    transfer: retried, and the read gets its bytes (issue 40, item 11).
    The raw server cuts the first answer for each block range in half."""
    data = os.path.join(d, "data")
    os.mkdir(data)
    MiB = 1 << 20
    tensors = [("layers.%d.w" % i, "U8", [3 * MiB], os.urandom(3 * MiB))
               for i in range(4)]
    src = T.write_st(os.path.join(data, "m.safetensors"), tensors)
    seen = set()
    lock = threading.Lock()

    def answer(method, path, headers):
        first, last, size, body = file_range(src, headers)
        hdrs = ['ETag: "v1"', "Content-Range: bytes %d-%d/%d" %
                (first, last, size)]
        with lock:
            cut = first > 0 and (path, first, last) not in seen
            seen.add((path, first, last))
        if cut:
            body = body[:len(body) // 2]
        if path.startswith("/chunked/"):
            hdrs.append("Transfer-Encoding: chunked")
            body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
        return "206 Partial Content", hdrs, body

    srv = RawServer(answer)
    try:
        for how in ("closed", "chunked"):
            log = os.path.join(d, "log-" + how)
            p = mount_logged(srv.url(how + "/m.safetensors"), mnt, log,
                             "-o", "retries=2,cache=" +
                             os.path.join(d, "cache-" + how))
            try:
                for i, t in enumerate(tensors):
                    with open(os.path.join(mnt, "layers/%d/w" % i),
                              "rb") as f:
                        assert f.read() == t[3], (how, i)
            finally:
                stop_logged(p, mnt)
            # every block's first answer was cut, and asked again
            asked = [h.get("range") for m, pth, h in srv.requests
                     if pth.startswith("/" + how + "/")]
            again = {r for r in asked if asked.count(r) >= 2}
            assert len(again) >= 3, (how, asked)
    finally:
        srv.stop()


def test_retry_after_storm(d, mnt):
    """A 429 storm with Retry-After: 30 and more readers than connections
    (retries=1; 12 O_DIRECT readers of 12 blocks with connections=4, then
    24 readers of 24 blocks with connections=8): every read fails within
    its bound, retries x 30 s (+1 s) as the reader measures it, however
    many readers wait (issue 40, item 12; before, the reads queued behind
    workers sitting out their backoff failed at 30, 60 and 90 s; issue
    47, item 6: with 24 readers, 9 reads still ended past 60 s)."""
    data = os.path.join(d, "data")
    os.mkdir(data)
    KiB = 1 << 10
    tensors = [("layers.%d.w" % i, "U8", [64 * KiB], os.urandom(64 * KiB))
               for i in range(26)]
    src = T.write_st(os.path.join(data, "m.safetensors"), tensors)

    def answer(method, path, headers):
        first, last, size, body = file_range(src, headers)
        if first:
            return "429 Too Many Requests", ["Retry-After: 30"], b""
        return "206 Partial Content", ['ETag: "v1"',
                                       "Content-Range: bytes %d-%d/%d" %
                                       (first, last, size)], body

    srv = RawServer(answer)

    def reader(i, took):
        fd = os.open(os.path.join(mnt, "layers/%d/w" % i),
                     os.O_RDONLY | os.O_DIRECT)
        t = time.time()         # the read's bound: from the read
        try:
            os.pread(fd, 4096, 0)
            took[i] = "read"
        except OSError as e:
            took[i] = (e.errno, time.time() - t)
        finally:
            os.close(fd)

    try:
        for n, conns in ((12, 4), (24, 8)):
            took = {}
            p = T.mount_fg(srv.url("m.safetensors"), mnt, "-o",
                           "block_size=64K,connections=%d,retries=1,"
                           "cache=%s" % (conns, os.path.join(
                               d, "cache%d" % n)))
            try:
                th = [threading.Thread(target=reader, args=(i, took),
                                       daemon=True)
                      for i in range(1, n + 1)]
                for t in th:
                    t.start()
                for t in th:
                    t.join(150)
            finally:
                T.stop_fg(p, mnt)
            worst = max(v[1] for v in took.values())
            assert len(took) == n and all(v[0] == errno.EIO
                                          for v in took.values()), took
            assert worst < 31, (n, conns, sorted(took.items()))
            print("     %d readers, %d connections: EIO after at most "
                  "%.1f s" % (n, conns, worst))
    finally:
        srv.stop()


def test_block_part(d, mnt):
    """A reader of a block a prefetch has on the wire is answered as soon
    as its own bytes have come, not once the whole block has (the server
    holds back the second half of every block), and asks for nothing
    itself: with a cache and without."""
    data = os.path.join(d, "data")
    os.mkdir(data)
    src, tensors = big_file(data)
    n, _ = T.header_of(src)
    h, blk = 8 + n, 4 << 20
    srv = faulty_server(data)
    url = "http://127.0.0.1:%d/halfblock/big.safetensors" % \
        srv.server_address[1]
    # layers.1 starts at 40 MiB + h (block 10); 1 MiB into block 12
    t = (12 * blk + (1 << 20) - h - (40 << 20)) // 4096 * 4096
    want = tensors[1][3]
    try:
        for opt in ("cache=" + os.path.join(d, "c"), "nocache"):
            srv.armed, got = True, {}
            srv.stalled.clear()
            del srv.ranges[:]
            p = T.mount_fg(url, mnt, "-o", opt)
            fd = os.open(os.path.join(mnt, "layers/1/w"),
                         os.O_RDONLY | os.O_DIRECT)
            try:
                # the tensor's start: the blocks after it are prefetched
                assert os.pread(fd, 4096, 0) == want[:4096]
                for _ in range(100):
                    if ("halfblock", 12 * blk, 13 * blk - 1) in srv.ranges:
                        break
                    time.sleep(0.1)
                else:
                    raise AssertionError("block 12 not prefetched: %r" %
                                         srv.ranges)
                th = threading.Thread(target=lambda: got.update(
                    b=os.pread(fd, 4096, t)), daemon=True)
                th.start()
                th.join(10)
                assert got.get("b") == want[t:t + 4096], \
                    (opt, "the reader waited for the whole block")
                mine = [r for r in srv.ranges
                        if r[1] <= h + (40 << 20) + t <= r[2]]
                assert mine == [("halfblock", 12 * blk, 13 * blk - 1)], \
                    (opt, mine)
            finally:
                srv.stalled.set()
                os.close(fd)
                disarm(srv, p, mnt)
    finally:
        srv.shutdown()


def test_block_retry_changed(d, mnt):
    """A block's request breaks off after its first half, which a reader
    was answered from; the retry's answer is of another version (zeros
    under another ETag).  Bytes readers were told are in are never
    written over: a reader of the first half gets the right bytes or
    EIO, never the other version's, and one of the second half EIO."""
    data = os.path.join(d, "data")
    os.mkdir(data)
    src, tensors = big_file(data)
    n, _ = T.header_of(src)
    h, blk = 8 + n, 4 << 20
    srv = faulty_server(data)
    url = "http://127.0.0.1:%d/changed/big.safetensors" % \
        srv.server_address[1]
    base = 40 << 20                     # layers.1 starts at base + h
    t1 = (12 * blk + (1 << 20) - h - base) // 4096 * 4096
    t0 = (12 * blk + (512 << 10) - h - base) // 4096 * 4096
    t2 = (12 * blk + (3 << 20) - h - base) // 4096 * 4096
    want = tensors[1][3]
    ask = ("changed", 12 * blk, 13 * blk - 1)
    got = {}

    def pread(key, fd, off):
        try:
            got[key] = os.pread(fd, 4096, off)
        except OSError as e:
            got[key] = e.errno

    try:
        srv.armed = True
        p = T.mount_fg(url, mnt, "-o", "cache=" + os.path.join(d, "c"))
        fd = os.open(os.path.join(mnt, "layers/1/w"),
                     os.O_RDONLY | os.O_DIRECT)
        try:
            assert os.pread(fd, 4096, 0) == want[:4096]
            for _ in range(100):
                if ask in srv.ranges:
                    break
                time.sleep(0.1)
            assert ask in srv.ranges, srv.ranges
            pread("first", fd, t1)              # from the first half
            assert got["first"] == want[t1:t1 + 4096]
            th = threading.Thread(target=pread, args=("second", fd, t2),
                                  daemon=True)
            th.start()                          # waits for the second half
            srv.stalled.set()                   # the connection drops
            for _ in range(100):
                if srv.ranges.count(ask) == 2:
                    break
                time.sleep(0.1)
            assert srv.ranges.count(ask) == 2, "no retry: %r" % srv.ranges
            time.sleep(0.5)                     # its zeros come
            pread("again", fd, t0)
            assert got["again"] in (want[t0:t0 + 4096], errno.EIO), \
                "a reader got the other version's bytes"
            srv.stalled2.set()
            th.join(20)
            assert got.get("second") == errno.EIO, got.get("second")
        finally:
            os.close(fd)
            disarm(srv, p, mnt)
    finally:
        srv.shutdown()


def test_tail_first(d, mnt):
    """A read in the middle of a block fetches the block's tail first; a
    second reader of that tail is answered before the block's start has
    come (the server holds every request for a block's start)."""
    data = os.path.join(d, "data")
    os.mkdir(data)
    src, tensors = big_file(data)
    n, _ = T.header_of(src)
    srv = faulty_server(data)
    url = "http://127.0.0.1:%d/stallstart/big.safetensors" % \
        srv.server_address[1]
    blk = 4 << 20
    # block 3 of the object, in layers.0: 3.5 MiB and 3.8 MiB into it
    a = (3 * blk + (7 << 19) - 8 - n) // 4096 * 4096
    b = (3 * blk + 3984588 - 8 - n) // 4096 * 4096
    got = {}
    try:
        p = T.mount_fg(url, mnt, "-o", "cache=" + os.path.join(d, "c"))
        try:
            srv.armed = True
            fd = os.open(os.path.join(mnt, "layers/0/w"),
                         os.O_RDONLY | os.O_DIRECT)
            assert os.pread(fd, 4096, a) == tensors[0][3][a:a + 4096]
            th = threading.Thread(target=lambda: got.update(
                b=os.pread(fd, 4096, b)), daemon=True)
            th.start()
            th.join(10)
            assert got.get("b") == tensors[0][3][b:b + 4096], \
                "the tail's second reader waited for the block's start"
            srv.stalled.set()           # the start comes
            c = (3 * blk - 8 - n + 4095) // 4096 * 4096
            h = 8 + n                   # object offset = h + tensor offset
            assert (h + c) // blk == (h + a) // blk and c < a - (64 << 10)
            assert os.pread(fd, 4096, c) == tensors[0][3][c:c + 4096]
            os.close(fd)
        finally:
            disarm(srv, p, mnt)
    finally:
        srv.shutdown()


def big_served(d):
    """big_file() in d/data, served by nginx: the file, its tensors, where
    each starts in the file, the server and the file's URL."""
    data = os.path.join(d, "data")
    os.mkdir(data)
    src, tensors = big_file(data)
    n, _ = T.header_of(src)
    start = [8 + n + i * (40 << 20) for i in range(3)]
    ngx = Nginx(os.path.join(d, "ngx"), data)
    return src, tensors, start, ngx, ngx.url("big.safetensors")


def test_stats_per_mount(d, mnt):
    """Each mount's remote layer is its own object, counting for itself:
    `stfs inspect` prints what it fetched, and at unmount each daemon logs
    its own requests, bytes and cache hits (a mount that read 40 MiB, one
    beside it that read nothing, and a second mount served by the
    cache)."""
    src, tensors, start, ngx, url = big_served(d)
    cache = os.path.join(d, "cache")
    mnt2 = os.path.join(d, "mnt2")
    os.mkdir(mnt2)
    logs = [os.path.join(d, "log%d" % i) for i in range(3)]

    def mount(m, log, opts):
        r = subprocess.run([T.STFS, "mount", "-o", "log=" + log + "," +
                            opts, url, m], capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr
        T._mounts.append(m)

    def counted(log):
        with open(log) as f:
            text = f.read()
        m = re.search(r"fetched (\d+) bytes in (\d+) requests \((\d+) "
                      r"retries\), (\d+) blocks read from the cache, "
                      r"(\d+) reads failed", text)
        assert m, text
        return [int(x) for x in m.groups()]

    try:
        r = subprocess.run([T.STFS, "inspect", url], capture_output=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        m = re.search(rb"fetched (\d+) bytes in (\d+) request", r.stderr)
        assert m and 0 < int(m.group(1)) <= 64 << 10, r.stderr
        mount(mnt, logs[0], "cache=" + cache)
        mount(mnt2, logs[1], "nocache")
        assert read(os.path.join(mnt, "layers/0/w")) == tensors[0][3]
        os.stat(os.path.join(mnt2, "layers/0/w"))
        T.unmount(mnt)
        T.unmount(mnt2)
        got, n, _, hits, failed = counted(logs[0])
        assert got >= 40 << 20 and n >= 10 and failed == 0, (got, n)
        got2, n2, _, hits2, _ = counted(logs[1])
        assert got2 <= 64 << 10 and n2 == 1 and hits2 == 0, (got2, n2)
        # the same object again, from the first mount's cache
        mount(mnt, logs[2], "cache=" + cache)
        assert read(os.path.join(mnt, "layers/0/w")) == tensors[0][3]
        T.unmount(mnt)
        got3, n3, _, hits3, _ = counted(logs[2])
        assert hits3 >= 1 and got3 < got, (got3, hits3)
    finally:
        T.unmount(mnt)
        T.unmount(mnt2)
        ngx.stop()


def test_prefetch(d, mnt):
    """Reading the start of a tensor fetches ahead within it, and not past
    it; a reader going through the file in order gets the next tensor
    fetched ahead; random reads fetch only the blocks they touch."""
    src, tensors, start, ngx, url = big_served(d)
    block = 4 << 20
    cache = os.path.join(d, "cache")

    def fetched(before):
        time.sleep(1.0)                 # prefetches land
        return ngx.ranges()[before:]
    try:
        p = T.mount_fg(url, mnt, "-o", "cache=" + cache)
        try:
            # the first MiB of layers.1: blocks ahead within it, none
            # past its end
            k = len(ngx.ranges())
            fd = os.open(os.path.join(mnt, "layers/1/w"), os.O_RDONLY)
            assert os.pread(fd, 1 << 20, 0) == tensors[1][3][:1 << 20]
            os.close(fd)
            got = fetched(k)
            ahead = [r for r in got if r[0] >= start[1] + block]
            assert len(ahead) >= 4, got
            assert all(r[0] < start[2] for r in got), got
            # 32 MiB ahead: not the tensor's last block (40 MiB on)
            last = (start[2] - 1) // block
            assert all(r[1] // block < last for r in got), got
        finally:
            T.stop_fg(p, mnt)
        shutil.rmtree(cache)
        # connections=16: a block a connection ahead (64 MiB), so all of
        # layers.1 to its end, and still nothing past it
        p = T.mount_fg(url, mnt, "-o", "cache=%s,connections=16" % cache)
        try:
            k = len(ngx.ranges())
            fd = os.open(os.path.join(mnt, "layers/1/w"), os.O_RDONLY)
            assert os.pread(fd, 1 << 20, 0) == tensors[1][3][:1 << 20]
            os.close(fd)
            got = fetched(k)
            assert any(r[1] // block == last for r in got), got
            assert all(r[0] < start[2] for r in got), got
        finally:
            T.stop_fg(p, mnt)
        shutil.rmtree(cache)
        # a sequential reader of layers.0 gets layers.1 fetched ahead
        p = T.mount_fg(url, mnt, "-o", "cache=" + cache)
        try:
            k = len(ngx.ranges())
            assert read(os.path.join(mnt, "layers/0/w")) == tensors[0][3]
            got = fetched(k)
            assert any(start[1] <= r[0] < start[2] for r in got), got
        finally:
            T.stop_fg(p, mnt)
        shutil.rmtree(cache)
        # random 4 KiB reads inside tensors: no more blocks than touched,
        # each fetched from the read's 64 KiB piece to the block's end
        # first (the reader waits for its own bytes only), then the rest
        p = T.mount_fg(url, mnt, "-o", "cache=" + cache)
        try:
            k = len(ngx.ranges())
            fd = os.open(os.path.join(mnt, "layers/2/w"), os.O_RDONLY |
                         os.O_DIRECT)
            rng = random.Random(8)
            reads = []
            for _ in range(6):
                off = rng.randrange(1, 9) * block + \
                    rng.randrange(1, 60) * 65536 + 8192
                if (start[2] + off) // block in {x // block for x in reads}:
                    continue
                reads.append(start[2] + off)
                assert os.pread(fd, 4096, off) == \
                    tensors[2][3][off:off + 4096]
            os.close(fd)
            got = fetched(k)
            blocks = {r[0] // block for r in got}
            assert len(blocks) <= len(reads) + 1, (got, reads)
            size = os.path.getsize(src)
            for x in reads:
                b0 = x // block * block
                cut = x % block & ~0xffff
                tail = (b0 + cut, min(b0 + block, size) - 1)
                assert cut and tail in got, (x, tail, got)
                assert (b0, b0 + cut - 1) in got[got.index(tail) + 1:], \
                    (x, got)
        finally:
            T.stop_fg(p, mnt)
    finally:
        ngx.stop()


def test_prefetch_nocache(d, mnt):
    """Without a cache, prefetch works as with one, into memory: a reader
    going through a tensor in order gets whole blocks fetched ahead, and
    the server sends the tensor about once; a random reader's reads fetch
    exactly their bytes; nothing is written to disk."""
    _, tensors, start, ngx, url = big_served(d)
    block = 4 << 20
    home = os.environ["XDG_CACHE_HOME"]
    before = cache_files(home)
    try:
        p = T.mount_fg(url, mnt, "-o", "nocache")
        try:
            k = len(ngx.ranges())
            assert read(os.path.join(mnt, "layers/0/w")) == tensors[0][3]
            got = [r for r in ngx.ranges()[k:] if r[0] < start[1]]
            whole = [r for r in got if r[0] % block == 0 and
                     r[1] - r[0] + 1 == block]
            assert len(whole) >= 5, got
            sent = sum(r[1] - r[0] + 1 for r in got)
            assert sent < (40 << 20) * 1.25, (sent, got)
            # random 4 KiB reads, none at a tensor's start: exactly those
            time.sleep(1.0)             # the prefetches into layers.1 land
            k = len(ngx.ranges())
            fd = os.open(os.path.join(mnt, "layers/2/w"), os.O_RDONLY |
                         os.O_DIRECT)
            rng = random.Random(9)
            want = set()
            for _ in range(6):
                off = rng.randrange(1, (40 << 20) // 4096) * 4096
                assert os.pread(fd, 4096, off) == \
                    tensors[2][3][off:off + 4096]
                want.add((start[2] + off, start[2] + off + 4095))
            os.close(fd)
            time.sleep(0.5)
            got = ngx.ranges()[k:]
            assert sorted(got) == sorted(want), (got, want)
        finally:
            T.stop_fg(p, mnt)
        assert cache_files(home) == before
    finally:
        ngx.stop()


def test_unmount_in_flight(d, mnt):
    """Unmounting while the kernel's readahead requests still wait for a
    slow block: the daemon ends their transfers and answers them before
    it closes its FUSE channel (under ThreadSanitizer, a reply not ordered
    before that close is a report), and exits 0 long before the block
    could have come."""
    data = os.path.join(d, "data")
    os.mkdir(data)
    src, tensors = big_file(data)
    ngx = Nginx(os.path.join(d, "ngx"), data, extra="    location /slow/ "
                "{ alias %s/; limit_rate 64k; }\n" % data)
    url = ngx.url("slow/big.safetensors")
    try:
        for opt in ("cache=" + os.path.join(d, "cache"), "nocache"):
            p = T.mount_fg(url, mnt, "-o", opt)
            try:
                fd = os.open(os.path.join(mnt, "layers/1/w"), os.O_RDONLY)
                assert os.pread(fd, 4096, 0) == tensors[1][3][:4096]
                os.close(fd)
                time.sleep(0.3)         # readahead on its way
                t = time.time()
            finally:
                T.stop_fg(p, mnt)
            # a 4 MiB block at 64 KiB/s would take a minute
            assert time.time() - t < 8, (opt, time.time() - t)
    finally:
        ngx.stop()


def read_direct(path, bs=1 << 20):
    """The whole file with O_DIRECT: from the daemon, not the page cache."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        out, off = [], 0
        while True:
            b = os.pread(fd, bs, off)
            if not b:
                return b"".join(out)
            out.append(b)
            off += len(b)
    finally:
        os.close(fd)


def test_cache_reads(d, mnt):
    """Readers of blocks being fetched, and of cached blocks: four at once
    on a cold cache all get the right bytes; the daemon keeps at most 16
    block files open per object; blocks removed from the cache while
    mounted are read from the files it holds or fetched again; another
    block_size caches blocks of that size; bad ones are refused."""
    data = os.path.join(d, "data")
    os.mkdir(data)
    src, tensors = big_file(data)
    cache = os.path.join(d, "cache")
    ngx = Nginx(os.path.join(d, "ngx"), data)
    try:
        p = T.mount_fg(ngx.url("big.safetensors"), mnt, "-o",
                       "cache=" + cache)
        try:
            w = os.path.join(mnt, "layers/1/w")
            out = [None] * 4

            def one(i):
                out[i] = read_direct(w, bs=(1 << 20) >> i)
            th = [threading.Thread(target=one, args=(i,)) for i in range(4)]
            for t in th:
                t.start()
            for t in th:
                t.join()
            for i in range(4):
                assert out[i] == tensors[1][3], i
            for i in range(3):
                assert read_direct(os.path.join(
                    mnt, "layers/%d/w" % i)) == tensors[i][3], i
            fds = [os.readlink("/proc/%d/fd/%s" % (p.pid, f))
                   for f in os.listdir("/proc/%d/fd" % p.pid)]
            # block files (the cache's own directory is held open too,
            # and its shared use, usage)
            held = [f for f in fds if f.startswith(cache + "/") and
                    f != os.path.join(cache, "usage")]
            assert 0 < len(held) <= 16, (held, cache_files(cache))
            for f in cache_files(cache):
                if os.path.basename(f).isdigit():
                    os.unlink(f)
            for i in range(3):
                assert read_direct(os.path.join(
                    mnt, "layers/%d/w" % i)) == tensors[i][3], i
        finally:
            T.stop_fg(p, mnt)
        # another block size: blocks of that size, kept apart
        p = T.mount_fg(ngx.url("big.safetensors"), mnt, "-o",
                       "cache=%s,block_size=1M" % cache)
        try:
            assert read_direct(os.path.join(mnt, "layers/2/w")) == \
                tensors[2][3]
        finally:
            T.stop_fg(p, mnt)
        sizes = {os.path.getsize(f) for f in cache_files(cache)
                 if os.path.basename(f).isdigit()}
        hdr = 4096                      # a block file: its header, then it
        assert (1 << 20) + hdr in sizes and (4 << 20) + hdr in sizes, sizes
        for opt, bad, says in (("block_size", ("3M", "32K", "128M", "x"),
                                 b": give a power of two"),
                                ("min_speed", ("x", "2G", "-1", "1.5K"),
                                 b": give bytes per second")):
            for b in bad:
                o = "%s=%s" % (opt, b)
                r = subprocess.run([T.STFS, "mount", "-o", o,
                                    ngx.url("big.safetensors"), mnt],
                                   capture_output=True, timeout=30)
                assert r.returncode == 2 and \
                    o.encode() + says in r.stderr, r
                assert not T.is_mount(mnt)
    finally:
        ngx.stop()


def test_cache(d, mnt):
    """The on-disk cache: a second mount reads what was read with the
    server stopped; offline fails fast for the rest; a changed object is
    never served from the old version's blocks; a torn block is a miss;
    the cache keeps to its size; nocache writes nothing."""
    data = os.path.join(d, "data")
    os.mkdir(data)
    src, tensors = big_file(data)
    cache = os.path.join(d, "cache")
    ngx = Nginx(os.path.join(d, "ngx"), data)
    url = ngx.url("big.safetensors")
    w = [os.path.join(mnt, "layers/%d/w" % i) for i in range(3)]
    opts = "cache=%s,connect_timeout=1,retries=1" % cache
    try:
        n, _ = T.header_of(src)
        # the blocks of layers.0: a reader is answered as its bytes come,
        # and a block still on the wire at unmount is not kept, so the
        # last one's fetch (it runs on into layers.1) is waited for
        want = {str(b) for b in range((8 + n + (40 << 20) - 1 >> 22) + 1)}
        p = T.mount_fg(url, mnt, "-o", opts)
        try:
            assert read(w[0]) == tensors[0][3]
            for _ in range(200):
                blocks = {os.path.basename(f) for f in cache_files(cache)}
                if want <= blocks:
                    break
                time.sleep(0.1)
        finally:
            T.stop_fg(p, mnt)
        blocks = [f for f in cache_files(cache)
                  if os.path.basename(f).isdigit()]
        assert want <= {os.path.basename(f) for f in blocks}, blocks
        # the window ahead follows the connections (up to 32 blocks), so
        # it may have brought the next tensors too: what lies past
        # layers.0's blocks goes, as a cache that never held it
        for f in blocks:
            if os.path.basename(f) not in want:
                os.unlink(f)
        blocks = [f for f in blocks if os.path.basename(f) in want]
        # the server stops: a new mount reads what the cache holds
        ngx.stop()
        p = T.mount_fg(url, mnt, "-o", opts)
        try:
            assert read(w[0]) == tensors[0][3]
            T.expect_errno(w[1], 5, 20)
        finally:
            T.stop_fg(p, mnt)
        # offline: no network at all, and fast
        p = T.mount_fg(url, mnt, "-o", opts + ",offline")
        try:
            assert read(w[0]) == tensors[0][3]
            T.expect_errno(w[2], 5, 2)
        finally:
            T.stop_fg(p, mnt)
        r = subprocess.run([T.STFS, "inspect", "--offline",
                            ngx.url("other.safetensors")],
                           capture_output=True, timeout=30,
                           env=dict(os.environ, XDG_CACHE_HOME=cache))
        assert r.returncode == 1 and b"not in the cache" in r.stderr, r
        # a torn block (as a kill -9 mid-write could leave, had it no
        # rename) is a miss: fetched again, right bytes
        ngx.start()
        torn = sorted(blocks)[-1]
        with open(torn, "r+b") as f:
            f.truncate(100)
        p = T.mount_fg(url, mnt, "-o", opts)
        try:
            assert read(w[0]) == tensors[0][3]
        finally:
            T.stop_fg(p, mnt)
        # written again: by the writer thread, after its reader had been
        # answered, and at the latest before the daemon exits
        assert os.path.getsize(torn) == (4 << 20) + 4096     # and a header
        # the object changes: its new bytes, never the old version's
        _, new = big_file(data, seed=7)
        os.utime(src, (time.time() + 50, time.time() + 50))
        p = T.mount_fg(url, mnt, "-o", opts)
        try:
            assert read(w[0]) == new[0][3]
        finally:
            T.stop_fg(p, mnt)
        # at most cache_size of blocks (one block over while it writes)
        small = os.path.join(d, "small")
        p = T.mount_fg(url, mnt, "-o", "cache=%s,cache_size=8M" % small)
        try:
            for i in range(3):
                assert read(w[i]) == new[i][3]
        finally:
            T.stop_fg(p, mnt)
        used = sum(os.path.getsize(f) for f in cache_files(small)
                   if os.path.basename(f).isdigit())
        assert 0 < used <= 8 << 20, used
        # nocache: nothing written, not even to the default cache
        home = os.environ["XDG_CACHE_HOME"]
        before = cache_files(home)
        p = T.mount_fg(url, mnt, "-o", "nocache")
        try:
            assert read(w[1]) == new[1][3]
        finally:
            T.stop_fg(p, mnt)
        assert cache_files(home) == before
        for bad in ("cache_size=0", "cache_size=12Q", "nocache,offline"):
            r = subprocess.run([T.STFS, "mount", "-o", bad, url, mnt],
                               capture_output=True, timeout=30)
            assert r.returncode == 2, (bad, r)
            assert not T.is_mount(mnt)
    finally:
        ngx.stop()


def main():
    # the default cache ($XDG_CACHE_HOME/stfs) of these tests: their own
    home = os.environ["XDG_CACHE_HOME"] = T.tmpdir()
    try:
        return run()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def run():
    return T.run_tests([
        test_real_corpus,
        test_real_shards,
        test_many_shards,
        test_large_reads,
        test_refused_at_mount,
        test_public_net,
        test_public_net_proxy,
        test_changed_and_down,
        test_retries,
        test_cache,
        test_cache_reads,
        test_prefetch,
        test_tail_first,
        test_block_part,
        test_block_retry_changed,
        test_cut_clean,
        test_retry_after_storm,
        test_prefetch_nocache,
        test_unmount_in_flight,
        test_stats_per_mount,
    ])


if __name__ == "__main__":
    sys.exit(main())

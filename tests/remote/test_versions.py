#!/usr/bin/env python3
"""test_versions.py: the bytes of a remote object are of one version, or
EIO; never bytes of two versions, never bytes of an ambiguous answer.
Against real servers started here on 127.0.0.1: nginx (ETag and
Last-Modified; a location with `etag off;` for Last-Modified alone) and
a raw-socket server of the tests' own (tests/servers/rawhttp.py) for answers nginx
will not give.

- an object changed while mounted (new bytes, same size): nginx answers
  the conditional request (If-Match, or If-Unmodified-Since) with 412;
  the raw server, which ignores conditions, with a validator that changed
  or disappeared: every read of it is EIO, or bytes of the version
  mounted, and a log line says why;
- an object with no validator (or a weak ETag alone) is refused at mount,
  with -o unvalidated mounted and read, and nothing of it cached;
- ambiguous answers after the mount (two Content-Range headers, a
  Content-Length that disagrees with the range, two different ETags, two
  Last-Modified) are EIO; at mount, a refusal;
- a 429 with a large Retry-After: a buffered read (dd) and an O_DIRECT
  read fail within the documented bound as the reader measures it (the
  kernel's retry of a failed read fails at once).
"""
import os
import subprocess
import sys
import time

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402
from rawhttp import RawServer, file_range  # noqa: E402
from fixtures import Nginx, big_file, cache_files, faulty_server  # noqa

MIB = 1 << 20
LM1 = "Sun, 22 Nov 2026 08:00:00 GMT"
LM2 = "Sun, 22 Nov 2026 08:00:09 GMT"


def read_log(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def replace(src, seed):
    """New bytes, the same size, a later mtime (a second apart at least,
    which nginx's ETag and any Last-Modified can tell)."""
    _, new = big_file(os.path.dirname(src), os.path.basename(src), seed)
    t = time.time() + 100
    os.utime(src, (t, t))
    return new


def only_old_or_eio(path, old):
    """Read path with O_DIRECT, 1 MiB at a time: each read gives the bytes
    of the version mounted (old) or fails with EIO; at least one fails.
    The count of reads that failed."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    failed = 0
    try:
        for off in range(0, len(old), 4 * MIB):
            try:
                got = os.pread(fd, MIB, off)
            except OSError as e:
                assert e.errno == 5, e
                failed += 1
                continue
            assert got == old[off:off + MIB], "bytes of another version"
    finally:
        os.close(fd)
    assert failed, "every read gave bytes"
    return failed


def mount_bg(url, mnt, log, *opts):
    """A mount in the background (its log in log), so that reads see the
    daemon's own log lines."""
    o = ["-o", ",".join(("log=" + log,) + opts)]
    r = subprocess.run([T.STFS, "mount"] + o + [url, mnt],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    T._mounts.append(mnt)


def test_nginx_changed(d, mnt):
    """nginx with ETag and Last-Modified, and a location with `etag off;`:
    the object changes under the mount; reads are EIO (nginx answers the
    condition stfs sent with 412), never the new bytes."""
    data = os.path.join(d, "data")
    os.mkdir(data)
    ngx = Nginx(os.path.join(d, "ngx"), data, extra="    location /noetag/"
                " { alias %s/; etag off; }\n" % data)
    try:
        for path, kind in (("big.safetensors", "ETag"),
                           ("noetag/big.safetensors", "Last-Modified")):
            src, tensors = big_file(data)
            log = os.path.join(d, "log-" + kind)
            mount_bg(ngx.url(path), mnt, log, "cache=" +
                     os.path.join(d, "cache"), "retries=1")
            try:
                fd = os.open(os.path.join(mnt, "layers/0/w"), os.O_RDONLY)
                assert os.pread(fd, 4096, 0) == tensors[0][3][:4096]
                os.close(fd)
                with open(os.path.join(d, "ngx", "access.log")) as f:
                    before = f.read().count(" 412 ")
                replace(src, 9)
                only_old_or_eio(os.path.join(mnt, "layers/2/w"),
                                tensors[2][3])
                with open(os.path.join(d, "ngx", "access.log")) as f:
                    assert f.read().count(" 412 ") > before, kind
                text = read_log(log)
                assert "412" in text, (kind, text)
            finally:
                T.unmount(mnt)
        # a new mount sees the new version, whole
        new = replace(src, 11)
        p = T.mount_fg(ngx.url("noetag/big.safetensors"), mnt, "-o",
                       "cache=" + os.path.join(d, "cache"))
        try:
            with open(os.path.join(mnt, "layers/1/w"), "rb") as f:
                assert f.read() == new[1][3]
        finally:
            T.stop_fg(p, mnt)
    finally:
        ngx.stop()


class Raw:
    """The raw server's answers, by the path's first component (MODE):
    /MODE/NAME serves the file NAME of root with a Content-Range and the
    validators and faults MODE says; faults apply to requests after the
    first (the mount's), i.e. to ranges that do not start at 0."""

    def __init__(self, root):
        self.root = root
        self.lm = LM1           # the Last-Modified of /lmchanges/

    def __call__(self, method, path, h):
        mode, name = path.lstrip("/").split("/", 1)
        p = os.path.join(self.root, name)
        if not os.path.isfile(p):
            return "404 Not Found", ["Content-Length: 0"], b""
        first, last, size, body = file_range(p, h)
        later = bool(first)
        hdrs = ["Content-Range: bytes %d-%d/%d" % (first, last, size),
                "Content-Length: %d" % len(body)]
        etag = ['ETag: "v1"']
        lm = ["Last-Modified: " + LM1]
        if mode == "both":
            hdrs += etag + lm
        elif mode == "none":
            pass
        elif mode == "etagfirst":
            hdrs += [] if later else etag
        elif mode == "weak":
            hdrs += ['ETag: W/"v1"']
        elif mode == "weaklm":
            hdrs += ['ETag: W/"v1"'] + lm
        elif mode == "lmchanges":
            hdrs += ["Last-Modified: " + (self.lm if later else LM1)]
        elif mode == "tworanges":
            hdrs += etag
            if later or name.startswith("first"):
                hdrs.append("Content-Range: bytes %d-%d/%d" %
                            (first + 1, last + 1, size))
        elif mode == "badlength":
            hdrs += etag
            if later:
                body = body[:-1]
                hdrs[1] = "Content-Length: %d" % len(body)
        elif mode == "twoetags":
            hdrs += etag + (['ETag: "v2"'] if later else [])
        elif mode == "twolm":
            hdrs += lm + (["Last-Modified: " + LM2] if later else [])
        return "206 Partial Content", hdrs, body


def test_raw_validators(d, mnt):
    """The raw server: no validator is refused (with -o unvalidated read,
    uncached); a weak ETag is no validator; an ETag on the first answer
    only, or a Last-Modified that changes, makes reads EIO; with a weak
    ETag and Last-Modified the condition sent is If-Unmodified-Since."""
    data = os.path.join(d, "data")
    os.mkdir(data)
    src, tensors = big_file(data)
    raw = Raw(data)
    srv = RawServer(raw)
    cache = os.path.join(d, "cache")
    try:
        for mode, says in (("none", "neither a strong ETag nor "
                            "Last-Modified, so a change"),
                           ("weak", 'only the weak ETag W/"v1"')):
            for cmd in (["mount", srv.url(mode + "/big.safetensors"), mnt],
                        ["inspect", srv.url(mode + "/big.safetensors")]):
                r = subprocess.run([T.STFS] + cmd, capture_output=True,
                                   timeout=60)
                err = r.stderr.decode()
                assert r.returncode == 1 and says in err and \
                    "-o unvalidated" in err, (cmd, err)
                assert not T.is_mount(mnt)
        # asked for: read, and nothing of it kept in the cache
        r = subprocess.run([T.STFS, "inspect", "--unvalidated", "-q",
                            srv.url("none/big.safetensors")],
                           capture_output=True, timeout=60)
        assert r.returncode == 0, r
        p = T.mount_fg(srv.url("none/big.safetensors"), mnt, "-o",
                       "unvalidated,cache=" + cache)
        try:
            with open(os.path.join(mnt, "layers/1/w"), "rb") as f:
                assert f.read() == tensors[1][3]
        finally:
            T.stop_fg(p, mnt)
        # nothing of it kept (the cache's use, counted at the open of a
        # remote source, is the one file there)
        kept = [f for f in cache_files(cache)
                if f != os.path.join(cache, "usage")]
        assert kept == [], kept
        with open(os.path.join(cache, "usage")) as f:
            assert int(f.read()) <= 12 << 10
        # a validator that disappears, or changes: EIO, and why
        for mode, why in (("etagfirst", "the answer has no ETag"),
                          ("lmchanges", "the object changed "
                           "(Last-Modified " + LM2)):
            raw.lm = LM2
            log = os.path.join(d, "log-" + mode)
            mount_bg(srv.url(mode + "/big.safetensors"), mnt, log,
                     "cache=" + cache, "retries=1")
            try:
                only_old_or_eio(os.path.join(mnt, "layers/1/w"),
                                tensors[1][3])
                assert why in read_log(log), (mode, read_log(log))
            finally:
                T.unmount(mnt)
        # a weak ETag and Last-Modified: If-Unmodified-Since, no If-Match
        n = len(srv.requests)
        p = T.mount_fg(srv.url("weaklm/big.safetensors"), mnt, "-o",
                       "cache=" + cache)
        try:
            fd = os.open(os.path.join(mnt, "layers/2/w"),
                         os.O_RDONLY | os.O_DIRECT)
            assert os.pread(fd, MIB, 0) == tensors[2][3][:MIB]
            os.close(fd)
        finally:
            T.stop_fg(p, mnt)
        later = [h for _, _, h in srv.requests[n:]
                 if not h.get("range", "").startswith("bytes=0-")]
        assert later and all(h.get("if-unmodified-since") == LM1 and
                             "if-match" not in h for h in later), later
    finally:
        srv.stop()


def test_raw_ambiguous(d, mnt):
    """Answers that say two things: at mount a refusal, after it EIO and a
    log line naming the ambiguity, never bytes."""
    data = os.path.join(d, "data")
    os.mkdir(data)
    src, tensors = big_file(data)
    os.link(src, os.path.join(data, "first.safetensors"))
    srv = RawServer(Raw(data))
    cache = os.path.join(d, "cache")
    try:
        r = subprocess.run([T.STFS, "mount", srv.url(
            "tworanges/first.safetensors"), mnt], capture_output=True,
            timeout=60)
        assert r.returncode == 1 and b"ambiguous answer (two Content-Range" \
            b" headers)" in r.stderr, r
        assert not T.is_mount(mnt)
        for mode, why in (("tworanges", "two Content-Range headers"),
                          ("badlength", "with a Content-Length of"),
                          ("twoetags", "two different ETag headers"),
                          ("twolm", "two different Last-Modified headers")):
            log = os.path.join(d, "log-" + mode)
            mount_bg(srv.url(mode + "/big.safetensors"), mnt, log,
                     "retries=1", "cache=" + cache)
            try:
                only_old_or_eio(os.path.join(mnt, "layers/1/w"),
                                tensors[1][3])
                assert why in read_log(log), (mode, read_log(log))
            finally:
                T.unmount(mnt)
    finally:
        srv.stop()


def test_429_bound(d, mnt):
    """A server that answers 429 with Retry-After: 3600 to every request:
    with retries=1 a read waits one Retry-After, capped at 30 s, and then
    fails; the reader, buffered (dd) or O_DIRECT, sees EIO within that
    bound (not twice it: the kernel's retry of the failed read fails at
    once)."""
    data = os.path.join(d, "data")
    os.mkdir(data)
    big_file(data)
    srv = faulty_server(data)
    url = "http://127.0.0.1:%d/429hold/big.safetensors" % \
        srv.server_address[1]
    try:
        for direct in (False, True):
            p = T.mount_fg(url, mnt, "-o", "retries=1,cache=" +
                           os.path.join(d, "cache"))
            try:
                srv.armed = True
                t = time.time()
                cmd = ["dd", "if=" + os.path.join(mnt, "layers/1/w"),
                       "of=/dev/null", "bs=1M", "count=1"]
                r = subprocess.run(cmd + (["iflag=direct"] if direct else
                                          []), capture_output=True,
                                   timeout=120)
                el = time.time() - t
                assert r.returncode == 1 and \
                    b"Input/output error" in r.stderr, r
                assert 29 <= el < 36, (direct, el)
                print("     %s read: EIO after %.1f s" %
                      ("O_DIRECT" if direct else "buffered", el))
            finally:
                srv.armed = False
                T.stop_fg(p, mnt)
    finally:
        srv.shutdown()


def main():
    home = os.environ["XDG_CACHE_HOME"] = T.tmpdir()
    try:
        return T.run_tests([
            test_nginx_changed,
            test_raw_validators,
            test_raw_ambiguous,
            test_429_bound,
        ])
    finally:
        import shutil
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""test_mirror_hostile.py: a writer of the bucket against a node that
lists from the manifest (a pinned hf:// source, a `complete` manifest:
docs/mirror.md, "The trust model"), with the Hub and its CDN down so the
manifest is all there is: names a repository may not hold, a file that
is also a folder, names of the mount's virtual files, a size the object
does not have, block sums of another block size, and an object of the
right size with other bytes.  Nothing wrong is served, the daemon does
not crash, and the log names the file and the rule.
"""
import json
import os
import socket
import subprocess
import sys
import threading

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402
import s3server  # noqa: E402
from fixtures import env, slurp, stop_logged  # noqa: E402
from tenantfix import Gate  # noqa: E402
from mirrorfix import (BLOCK, Env, crc32c, manifest, mirror,  # noqa
                       model, node, read_all)
from mirrorfix import stfs as T_stfs  # noqa: E402


def put_manifest(e, prefix, m):
    e.sw.put("models", prefix + "/.stfs-mirror/manifest.json",
             json.dumps(m).encode())


def files_of(mnt):
    out = []
    for root, dirs, files in os.walk(os.path.join(mnt, "%repo")):
        for f in files:
            out.append(os.path.relpath(os.path.join(root, f),
                                       os.path.join(mnt, "%repo")))
    return sorted(out)


def test_hostile_listing(d):
    """Hostile names and sizes in a complete manifest, the Hub down."""
    with Env(d) as e:
        sha, data = model(d, e.w)
        src = "hf://org/m@" + sha
        mirror(src, "s3://models/hl")
        m0 = manifest(e.sw, "hl")
        # a size larger than the object's: not served (EIO), said
        m = json.loads(json.dumps(m0))
        big = next(f for f in m["files"] if f["path"] == "model.safetensors")
        nb = (len(data["model.safetensors"]) + BLOCK - 1) // BLOCK
        big["size"] = (nb + 2) * BLOCK
        big["crc32c"] = big["crc32c"] + "00000000" * 2
        # block sums for another block size: the mount's blocks are 4M,
        # the sums here of 1M blocks (the manifest says 4M): every block
        # fails its check
        sm = next(f for f in m["files"]
                  if f["path"] == "extra/small.safetensors")
        sb = data["extra/small.safetensors"]
        sm["crc32c"] = "%08x" % crc32c(sb[:1 << 20])
        # the right size, other bytes (the object replaced, ETag and
        # all, and the manifest made to match its ETag but not its CRCs)
        put_manifest(e, "hl", m)
        p, mnt, log = node(d, 1, src, "mirror=s3://models/hl")
        try:
            with open(os.path.join(mnt, "%repo", "model.safetensors"),
                      "rb") as f:
                b = f.read()
            raise AssertionError("read %d bytes of a size the object "
                                 "does not have" % len(b))
        except OSError:
            pass
        try:
            with open(os.path.join(mnt, "%repo", "extra/small.safetensors"),
                      "rb") as f:
                b = f.read()
            assert b == sb, "other bytes served"
        except OSError:
            pass
        with open(os.path.join(mnt, "%repo", "README.md"), "rb") as f:
            assert f.read() == data["README.md"]
        stop_logged(p, mnt)
        text = slurp(log)
        assert p.returncode == 0, text
        assert "extra/small.safetensors: block 0 fails its check" in text, \
            text
        assert "model.safetensors" in text, text
        e.w.hub.stop()
        e.w.ngx.stop()
        # a file that is also a folder, and the mount's own names: the
        # entries that are refused or shadowed, never a crash
        m = json.loads(json.dumps(m0))
        cfg = next(f for f in m["files"] if f["path"] == "config.json")
        for p in ("config.json/inner.json", "x/%model.safetensors",
                  "%repo", ".stfs-mirror.json", "a/" * 40 + "deep.json"):
            m["files"].append(dict(cfg, path=p))
        put_manifest(e, "hl", m)
        p, mnt, log = node(d, 0, src, "mirror=s3://models/hl", "retries=0")
        got = files_of(mnt)
        with open(os.path.join(mnt, "%repo", "config.json"), "rb") as f:
            assert f.read() == data["config.json"]
        stop_logged(p, mnt)
        text = slurp(log)
        assert p.returncode == 0, text
        assert "config.json/inner.json" not in got, (got, text)


class RecGate(Gate):
    """A gate that forwards and records every byte the client sent."""

    def __init__(self, port):
        self.sent = bytearray()
        super().__init__(port)

    def _pipe(self, c):
        u = socket.create_connection(self.up, timeout=10)
        u.settimeout(None)

        def copy(a, b, rec):
            try:
                while True:
                    data = a.recv(65536)
                    if not data:
                        break
                    if rec:
                        with self.lock:
                            self.sent += data
                    b.sendall(data)
            except OSError:
                pass
            for x in (a, b):
                try:
                    x.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        t = threading.Thread(target=copy, args=(u, c, False), daemon=True)
        t.start()
        copy(c, u, True)
        t.join()
        c.close()
        u.close()


def test_header_injection(d):
    """A manifest's ETag with CR LF and a header after it (the mirror
    object's, sent as If-Match to the bucket; the origin's, sent to the
    origin): refused with the file and the field named, never put on the
    wire; the files read from the origin."""
    with Env(d) as e:
        sha, data = model(d, e.w)
        src = "hf://org/m@" + sha
        mirror(src, "s3://models/hi")
        m = manifest(e.sw, "hi")
        f = next(f for f in m["files"] if f["path"] == "README.md")
        f["etag"] = f["etag"] + "\r\nX-Stfs-Injected: 1"
        put_manifest(e, "hi", m)
        gate = RecGate(int(e.sw.endpoint.rsplit(":", 1)[1]))
        try:
            with env(AWS_ENDPOINT_URL=gate.url):
                p, mnt, log = node(d, 0, src, "mirror=s3://models/hi")
                read_all(mnt, data)
                stop_logged(p, mnt)
        finally:
            gate.stop()
        text = slurp(log)
        assert b"X-Stfs-Injected" not in gate.sent, text
        assert "not used: its manifest: README.md: \"etag\" holds a " \
            "control byte" in text, text
        # the origin's ETag, a string of the manifest as well
        m = manifest(e.sw, "hi")
        f = next(f for f in m["files"] if f["path"] == "README.md")
        f["etag"] = f["etag"].split("\r")[0]
        f["origin_etag"] = '"x"\nstfs: forged log line'
        put_manifest(e, "hi", m)
        p, mnt, log = node(d, 1, src, "mirror=s3://models/hi")
        read_all(mnt, data)
        stop_logged(p, mnt)
        text = slurp(log)
        assert "\nstfs: forged log line" not in text, text
        assert "README.md: \"origin_etag\" holds a control byte" in text, \
            text


def test_mirror_hostile_names(d):
    """`stfs mirror` of a repository whose listing names a file with a
    line feed in its name (a name git holds, a disk and a mirror never):
    not mirrored, said with the name quoted, no line of the name's
    making in the output."""
    with Env(d) as e:
        sha, data = model(d, e.w)
        bad = "x\nstfs: forged line.json"
        sha = e.w.hub.push(e.w.hub.repos["org/m"], {bad: b"{}"})
        r = T_stfs("mirror", "hf://org/m@" + sha, "s3://models/hn")
        assert r.returncode == 0, r
        out = r.stdout + r.stderr
        assert "\nstfs: forged line" not in out, out
        assert "not mirrored" in out and "forged line" in out, out


def test_many_files(d):
    """A complete manifest of 100,000 files (the reader's limit), the Hub
    down: the mount starts (waited for up to 10 minutes: under ASan on a
    loaded machine it takes 40 s; its time is tests/bench/
    bench_manifest_files.py's), lists them all and reads the model."""
    with Env(d) as e:
        sha, data = model(d, e.w)
        src = "hf://org/m@" + sha
        mirror(src, "s3://models/many")
        m = manifest(e.sw, "many")
        e.w.hub.stop()
        e.w.ngx.stop()
        cfg = next(f for f in m["files"] if f["path"] == "README.md")
        for i in range(100000 - len(m["files"])):
            m["files"].append(dict(cfg, path="d%d/f%d.md" % (i % 300, i),
                                   size=0, crc32c=""))
        put_manifest(e, "many", m)
        mnt, log = os.path.join(d, "mnt0"), os.path.join(d, "node0.log")
        os.makedirs(mnt)
        with open(log, "wb") as f:
            p = subprocess.Popen([T.STFS, "mount", "-f", "-o", "cache=" +
                                  os.path.join(d, "cache0") + ",retries=0,"
                                  "mirror=s3://models/many", src, mnt],
                                 stdout=f, stderr=subprocess.STDOUT)
        T._procs.append(p)
        T._mounts.append(mnt)
        assert T.wait_mount(mnt, p, timeout=600), slurp(log)
        n = sum(len(fs) for _, _, fs in os.walk(os.path.join(mnt, "%repo")))
        read_all(mnt, data)
        stop_logged(p, mnt)
        assert n == 100000, n
        assert "from it (100000 of its 100000 files; the listing from " \
            "its manifest)" in slurp(log)


def run():
    try:
        return T.run_tests([test_hostile_listing, test_header_injection,
                            test_mirror_hostile_names, test_many_files])
    finally:
        s3server.stop_shared()


if __name__ == "__main__":
    sys.exit(run())

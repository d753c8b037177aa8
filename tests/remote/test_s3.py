#!/usr/bin/env python3
"""test_s3.py: s3:// sources against a real S3-compatible server started
here on 127.0.0.1: OpenStack Swift from Debian with its s3api middleware
(tests/servers/s3server.py), which checks every request's SigV4 signature.  Its
listing pages are 3 keys long, so listings go on with continuation
tokens.  And nginx as an unsigned, public "bucket".

- the real corpus and the real shard set, by key, by prefix (its index),
  by the index's key, and a prefix with no index (every *.safetensors
  directly under it, over several listing pages); keys with spaces;
- credentials: the environment, AWS_PROFILE in ~/.aws/credentials and
  ~/.aws/config (with the region and endpoint_url there); virtual-hosted
  addressing; none (unsigned requests);
- refused at mount with the service's code and message, nothing mounted:
  a wrong secret, an unknown key id (Swift calls both
  SignatureDoesNotMatch), no such key, no such bucket, a user
  without access; after mount: an object replaced (If-Match: 412) or
  deleted gives EIO and a log line, never bytes of two versions;
- the cache: an object's blocks are kept under its endpoint, bucket, key,
  ETag and size; the same bytes under another key, bucket or endpoint
  are fetched again (bytes counted at a proxy).
"""
import hashlib
import json
import os
import subprocess
import sys
import time

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402
import s3server  # noqa: E402
from fixtures import check_real_file, env, Nginx, read, refused  # noqa: E402
from fixtures import stfs as stfs_cmd  # noqa: E402
from fixtures import wait_blocks  # noqa: E402

X = "user.safetensors."
creds = s3server.creds


def put_tree(sw, prefix, folder, names=None):
    for n in sorted(names or os.listdir(folder)):
        with open(os.path.join(folder, n), "rb") as f:
            sw.put("models", prefix + n, f.read())


def test_real_corpus(d, mnt):
    with creds(d) as sw:
        n = 0
        for rel, src, info in T.real_files():
            if not info["valid"]:
                continue
            with open(src, "rb") as f:
                data = f.read()
            key = "corpus/" + rel.replace("/", "/ ")     # spaces in keys
            etag = sw.put("models", key, data)
            src = "s3://models/" + key

            def has_origin(fp):
                assert os.getxattr(fp, X + "etag") == etag.encode()
                assert os.getxattr(fp, X + "url").startswith(
                    sw.endpoint.encode() + b"/models/corpus/")
            check_real_file(src, info["tensors"], mnt, has_origin)
            n += 1
        print("     %d real files from s3://" % n)


def test_shards(d, mnt):
    folder = os.path.join(T.REAL, "jl-sharded")
    want = {t["name"]: t for t in T.inspect_json(folder)["tensors"]}
    shards = [n for n in os.listdir(folder) if n.endswith(".safetensors")]
    with creds(d) as sw:
        put_tree(sw, "sharded/", folder)
        put_tree(sw, "noindex/", folder, shards)
        sw.put("models", "noindex/deeper/x.safetensors", b"not read")
        sw.put("models", "noindex/notes.txt", b"not read")
        for src in ("s3://models/sharded/",
                    "s3://models/sharded/model.safetensors.index.json",
                    "s3://models/noindex/"):
            j = T.inspect_json(src)
            assert j["sharded"], src
            assert {t["name"]: (t["file"], t["file_offset"])
                    for t in j["tensors"]} == \
                {k: (v["file"], v["file_offset"]) for k, v in want.items()}
            p = T.mount_fg(src, mnt)
            try:
                for k, t in want.items():
                    with open(os.path.join(folder, t["file"]), "rb") as f:
                        f.seek(t["file_offset"])
                        assert read(os.path.join(mnt, t["path"])) == \
                            f.read(t["bytes"]), (src, k)
                hdr = json.loads(read(os.path.join(mnt, "%header.json")))
                assert all(v["url"].startswith(sw.endpoint)
                           for v in hdr["shards"].values())
            finally:
                T.stop_fg(p, mnt)
        # a whole bucket with no weights at its top
        # (it mounts: %repo/ shows its objects, and it says why no tensor)
        r = stfs_cmd("inspect", "--files", "s3://models/")
        assert r.returncode == 0 and "no *.safetensors files" in r.stderr
        assert "noindex/deeper/x.safetensors\t8\t" in r.stdout, r.stdout
        refused("s3://other/", mnt, "no *.safetensors files", status=3)


def test_profiles_and_styles(d, mnt):
    """~/.aws files, AWS_PROFILE, the region, virtual-hosted addressing."""
    with creds(d) as sw:
        with open(os.path.join(T.REAL, "jl-nonsharded",
                               "model.safetensors"), "rb") as f:
            data = f.read()
        sw.put("models", "p/model.safetensors", data)
    credf, conff = os.path.join(d, "credentials"), os.path.join(d, "config")
    with open(credf, "w") as f:
        f.write("[default]\naws_access_key_id = nobody\n"
                "aws_secret_access_key = wrong\n\n"
                "[tester]\n# the test user\naws_access_key_id = %s\n"
                "aws_secret_access_key = %s\n" % (s3server.ACCESS,
                                                  s3server.SECRET))
    with open(conff, "w") as f:
        f.write("[default]\nregion = us-east-1\n\n[profile tester]\n"
                "region = us-east-1\nendpoint_url = %s\n" % sw.endpoint)
    files = dict(AWS_SHARED_CREDENTIALS_FILE=credf, AWS_CONFIG_FILE=conff,
                 AWS_ACCESS_KEY_ID=None, AWS_SECRET_ACCESS_KEY=None)
    with creds(d, AWS_PROFILE="tester", AWS_ENDPOINT_URL=None, **files):
        assert T.inspect_json("s3://models/p/model.safetensors")["tensors"]
    with creds(d, **files):               # the default profile: refused
        # Swift says SignatureDoesNotMatch for a key id it does not
        # know (AWS: InvalidAccessKeyId): the service's code, as it is
        refused("s3://models/p/model.safetensors", mnt, "403",
                "SignatureDoesNotMatch", status=4)
    # the region is part of what is signed: a wrong one is refused
    with creds(d, AWS_REGION="eu-west-7"):
        refused("s3://models/p/model.safetensors", mnt, "400",
                "AuthorizationHeaderMalformed", "eu-west-7")
    # virtual-hosted: http://models.localhost:PORT/p/model.safetensors
    local = sw.endpoint.replace("127.0.0.1", "localhost")
    with creds(d, AWS_ENDPOINT_URL=local):
        r = subprocess.run([T.STFS, "inspect", "--json",
                            "--s3-style=virtual",
                            "s3://models/p/model.safetensors"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        p = T.mount_fg("s3://models/p/", mnt, "-o", "s3_style=virtual")
        try:
            t = json.loads(r.stdout)["tensors"][0]
            fp = os.path.join(mnt, t["path"])
            assert os.getxattr(fp, X + "url").startswith(
                b"http://models.localhost:")
            assert read(fp) == data[t["file_offset"]:t["file_offset"] +
                                    t["bytes"]]
        finally:
            T.stop_fg(p, mnt)
        r = subprocess.run([T.STFS, "mount", "-o", "s3_style=sideways",
                            "s3://models/p/", mnt], capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 2 and "s3_style" in r.stderr, r


def test_refused(d, mnt):
    with creds(d) as sw:
        with open(os.path.join(T.REAL, "jl-nonsharded",
                               "model.safetensors"), "rb") as f:
            sw.put("models", "r/model.safetensors", f.read())
        src = "s3://models/r/model.safetensors"
        with env(AWS_SECRET_ACCESS_KEY="wrong"):
            refused(src, mnt, "403", "SignatureDoesNotMatch", status=4)
        with env(AWS_ACCESS_KEY_ID="test:nobody"):
            refused(src, mnt, "403", "SignatureDoesNotMatch", status=4)
        with env(AWS_ACCESS_KEY_ID=s3server.READER,
                 AWS_SECRET_ACCESS_KEY=s3server.READER_SECRET):
            refused(src, mnt, "403", "AccessDenied", status=4)
        refused("s3://models/r/nothere.safetensors", mnt, "404",
                "NoSuchKey", status=3)
        refused("s3://nobucket/x.safetensors", mnt, "404", "NoSuchBucket",
                status=3)
        for bad in ("s3://", "s3://b@d/x", "s3:///x.safetensors"):
            r = subprocess.run([T.STFS, "inspect", bad], capture_output=True,
                               text=True, timeout=30)
            assert r.returncode == 1 and r.stderr.startswith(
                "stfs: %s: " % bad), (bad, r)
        with env(AWS_ENDPOINT_URL="ftp://x"):
            refused(src, mnt, "endpoint")


def test_changed_after_mount(d, mnt):
    """Replaced: If-Match fails (412), EIO; deleted: EIO; logged; the
    other files still read.  (Small files are read whole at mount, and
    stay as they were then: these are larger.)"""
    blob = bytes(range(256)) * 1200
    with creds(d) as sw:
        for i in range(3):
            small = [("t%d" % i, "U8", [len(blob)], blob)]
            path = T.write_st(os.path.join(d, "s%d.safetensors" % i), small)
            with open(path, "rb") as f:
                sw.put("models", "c/s%d.safetensors" % i, f.read())
        log = os.path.join(d, "log")
        r = subprocess.run([T.STFS, "mount", "-o", "nocache,log=" + log,
                            "s3://models/c/", mnt], capture_output=True,
                           timeout=60)
        assert r.returncode == 0 and not r.stderr, r
        T._mounts.append(mnt)
        try:
            with open(os.path.join(d, "s0.safetensors"), "rb") as f:
                data = bytearray(f.read())
            data[-1] ^= 0xff            # same size, other bytes
            sw.put("models", "c/s0.safetensors", bytes(data))
            sw.delete("models", "c/s1.safetensors")
            names = sorted(n for n in os.listdir(mnt) if n[0] != "%")
            assert len(names) == 3, names
            T.expect_errno(os.path.join(mnt, names[0]), 5, 60)
            T.expect_errno(os.path.join(mnt, names[1]), 5, 60)
            assert read(os.path.join(mnt, names[2])) == blob
        finally:
            T.unmount(mnt)
        text = open(log).read()
        assert "412" in text, text
        assert "NoSuchKey" in text, text


def test_public_unsigned(d, mnt):
    """No credentials: unsigned requests, as for a public bucket (nginx
    serving a folder as the bucket)."""
    root = os.path.join(d, "root")
    os.makedirs(os.path.join(root, "pub", "m"))
    src = os.path.join(T.REAL, "jl-nonsharded", "model.safetensors")
    with open(src, "rb") as f, \
            open(os.path.join(root, "pub", "m", "model.safetensors"),
                 "wb") as g:
        g.write(f.read())
    os.makedirs(os.path.join(d, "ngx"))
    ngx = Nginx(os.path.join(d, "ngx"), root)
    try:
        with env(AWS_ENDPOINT_URL=ngx.url().rstrip("/"),
                 AWS_ACCESS_KEY_ID=None, AWS_SECRET_ACCESS_KEY=None,
                 AWS_PROFILE=None,
                 AWS_SHARED_CREDENTIALS_FILE=os.path.join(d, "none"),
                 AWS_CONFIG_FILE=os.path.join(d, "none"),
                 XDG_CACHE_HOME=os.path.join(d, "xdg")):
            j = T.inspect_json("s3://pub/m/model.safetensors")
            p = T.mount_fg("s3://pub/m/model.safetensors", mnt)
            try:
                for t in j["tensors"]:
                    read(os.path.join(mnt, t["path"]))
            finally:
                T.stop_fg(p, mnt)
        with open(os.path.join(d, "ngx", "access.log")) as f:
            text = f.read()
        assert "/pub/m/model.safetensors" in text and "AWS4" not in text
    finally:
        ngx.stop()


class CountingProxy:
    """A TCP proxy to 127.0.0.1:port that counts the connections made
    through it (.n) and the bytes it brings back (.down)."""

    def __init__(self, port):
        import socket
        import threading
        self.port_up, self.n, self.socket = port, 0, socket
        self.down = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _pipe(self, a, b, down=False):
        try:
            while True:
                x = a.recv(65536)
                if not x:
                    break
                if down:
                    self.down += len(x)
                b.sendall(x)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(self.socket.SHUT_RDWR)
                except OSError:
                    pass

    def _serve(self):
        import threading
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.n += 1
            u = self.socket.create_connection(("127.0.0.1", self.port_up))
            threading.Thread(target=self._pipe, args=(c, u),
                             daemon=True).start()
            threading.Thread(target=self._pipe, args=(u, c, True),
                             daemon=True).start()

    def stop(self):
        self.sock.close()


def test_keys_per_object(d, mnt):
    """An object's blocks are kept under its endpoint, bucket, key, ETag
    and size, never its ETag alone: the same bytes (the same ETag) under
    another key, in another bucket, or through another endpoint, mounted
    with one cache=, are fetched again; the same object again is not."""
    import urllib.parse
    MiB = 1 << 20
    t = [("x.w", "U8", [4 * MiB], os.urandom(4 * MiB))]
    with open(T.write_st(os.path.join(d, "m.safetensors"), t), "rb") as f:
        data = f.read()
    cache = os.path.join(d, "keys-cache")
    with creds(d) as sw:
        for b, k in (("models", "ka/"), ("models", "kb/"), ("other", "ka/")):
            sw.put(b, k + "model.safetensors", data)
        port = urllib.parse.urlsplit(sw.endpoint).port
        p1, p2 = CountingProxy(port), CountingProxy(port)
        try:
            def fetched(proxy, src):
                before = proxy.down
                with env(AWS_ENDPOINT_URL=proxy.url):
                    p = T.mount_fg(src, mnt, "-o", "cache=" + cache)
                    try:
                        assert read(os.path.join(mnt, "x/w")) == t[0][3]
                    finally:
                        T.stop_fg(p, mnt)
                return proxy.down - before
            assert fetched(p1, "s3://models/ka/") >= len(data) - 65536
            again = fetched(p1, "s3://models/ka/")
            assert again < MiB, again           # its open, the listing
            for proxy, src in ((p1, "s3://models/kb/"),
                               (p1, "s3://other/ka/"),
                               (p2, "s3://models/ka/")):
                n = fetched(proxy, src)
                assert n >= len(data) - 65536, (src, n)
        finally:
            p1.stop()
            p2.stop()


def test_offline_own_cache(d, mnt):
    """An s3:// prefix mounted once mounts again with -o offline from
    stfs's own cache: not one connection; the small files and the tensors
    read are there, a tensor never read is EIO at once; the object
    overwritten (a new ETag) is fetched again (issue 42)."""
    import urllib.parse
    MiB = 1 << 20
    tensors = [("layers.%d.w" % i, "U8", [n * MiB], os.urandom(n * MiB))
               for i, n in enumerate((1, 1, 40, 1))]
    path = T.write_st(os.path.join(d, "m.safetensors"), tensors)
    cfg = b'{"model_type": "own"}\n'
    cache = os.path.join(d, "own-cache")
    with creds(d) as sw:
        with open(path, "rb") as f:
            sw.put("models", "own/model.safetensors", f.read())
        sw.put("models", "own/config.json", cfg)
        proxy = CountingProxy(urllib.parse.urlsplit(sw.endpoint).port)
        try:
            with env(AWS_ENDPOINT_URL=proxy.url):
                p = T.mount_fg("s3://models/own/", mnt, "-o",
                               "cache=" + cache)
                try:
                    for i in (0, 1):
                        assert read(os.path.join(mnt, "layers/%d/w" % i)) \
                            == tensors[i][3]
                    assert read(os.path.join(mnt, "%repo/config.json")) \
                        == cfg
                    wait_blocks(cache, 1)   # block 0: tensors 0 and 1
                finally:
                    T.stop_fg(p, mnt)
                n = proxy.n
                assert n > 0
                p = T.mount_fg("s3://models/own/", mnt, "-o",
                               "offline,cache=" + cache)
                try:
                    for i in (0, 1):
                        assert read(os.path.join(mnt, "layers/%d/w" % i)) \
                            == tensors[i][3]
                    assert read(os.path.join(mnt, "%repo/config.json")) \
                        == cfg
                    T.expect_errno(os.path.join(mnt, "layers/3/w"), 5, 1)
                finally:
                    T.stop_fg(p, mnt)
                assert proxy.n == n, "connections made offline"
                # overwritten (a new ETag, the same size): its new bytes,
                # never the old version's blocks
                t2 = [(a, b, c, os.urandom(len(e))) for a, b, c, e in
                      tensors]
                with open(T.write_st(os.path.join(d, "m2"), t2), "rb") as f:
                    sw.put("models", "own/model.safetensors", f.read())
                # (Swift updates its listing a moment after the PUT: a
                # listing with the old ETag makes the read EIO, If-Match
                # failing; never the old bytes)
                for attempt in range(10):
                    p = T.mount_fg("s3://models/own/", mnt, "-o",
                                   "cache=" + cache)
                    try:
                        got = [read(os.path.join(mnt, "layers/%d/w" % i))
                               for i in (0, 1)]
                    except OSError as e:
                        assert e.errno == 5, e
                        got = None
                    finally:
                        T.stop_fg(p, mnt)
                    if got is not None:
                        break
                    time.sleep(0.5)
                assert got == [t2[0][3], t2[1][3]], "old bytes served"
        finally:
            proxy.stop()


def run():
    try:
        return T.run_tests([
            test_real_corpus,
            test_shards,
            test_profiles_and_styles,
            test_refused,
            test_changed_after_mount,
            test_public_unsigned,
            test_offline_own_cache,
            test_keys_per_object,
        ])
    finally:
        s3server.stop_shared()


if __name__ == "__main__":
    sys.exit(run())

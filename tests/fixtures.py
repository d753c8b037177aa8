"""fixtures.py: servers and helpers the mount tests share.

nginx from Debian on loopback (Nginx), a small standard-library HTTP
server with faults nginx cannot make (faulty_server), ports, reading and
hashing files, a generated file of large tensors (big_file), the files of a cache
(cache_files), the check of
one file of the real corpus mounted from any source (check_real_file), the
Hub emulator behind nginx (world), a Hugging Face cache folder
(fake_cache), a certificate authority and server certificates made with
openssl (make_ca, make_cert), and environment and refusal helpers.
Mounting and the test runner are in stfstest.py.  Standard library only.
"""
import base64
import contextlib
import email.utils
import hashlib
import http.server
import json
import os
import random
import re
import shutil
import socket
import struct
import subprocess
import threading
import time

import hubemu
import stfstest as T


NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
# the official JS client of the Hub (@huggingface/hub), installed there
HUBJS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hubjs")
MiB = 1 << 20


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, timeout=10, host="127.0.0.1"):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection((host, port), 0.2).close()
            return True
        except OSError:
            time.sleep(0.02)
    return False


class Nginx:
    """nginx serving root at http://127.0.0.1:PORT/ (and /noranges/, the
    same with ranges turned off), with its config and logs in d; with
    tls=(CERT, KEY) at https://, also=[HOST] listens on those hosts too,
    and extra is more of the server block."""

    def __init__(self, d, root, port=None, host="127.0.0.1", tls=None,
                 also=(), extra=""):
        self.d, self.root, self.host = d, root, host
        self.port = port or free_port()
        self.scheme = "https" if tls else "http"
        ssl = " ssl" if tls else ""
        listen = "".join("    listen %s:%d%s;\n" % (h, self.port, ssl)
                         for h in (host,) + tuple(also))
        if tls:
            listen += ("    ssl_certificate %s;\n"
                       "    ssl_certificate_key %s;\n" % tls)
        self.proc = None
        os.makedirs(os.path.join(d, "tmp"), exist_ok=True)
        conf = """daemon off;
master_process off;
worker_processes 1;
pid %(d)s/nginx.pid;
error_log %(d)s/error.log;
events { worker_connections 256; }
http {
  log_format ranges '$request_uri $status $http_range [$http_authorization]';
  access_log %(d)s/access.log ranges;
  log_format sent '$status $body_bytes_sent "$http_range"';
  access_log %(d)s/sent.log sent;
  client_body_temp_path %(d)s/tmp;
  proxy_temp_path %(d)s/tmp;
  fastcgi_temp_path %(d)s/tmp;
  uwsgi_temp_path %(d)s/tmp;
  scgi_temp_path %(d)s/tmp;
  server {
%(listen)s    root %(root)s;
    location /noranges/ { alias %(root)s/; max_ranges 0; }
%(extra)s
  }
}
""" % {"d": d, "root": root, "listen": listen, "extra": extra}
        self.conf = os.path.join(d, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(conf)
        self.start()

    def url(self, path="", host=None):
        return "%s://%s:%d/%s" % (self.scheme, host or self.host, self.port,
                                  path)

    def start(self):
        self.proc = subprocess.Popen([NGINX, "-c", self.conf, "-p", self.d],
                                     stderr=subprocess.PIPE)
        T._procs.append(self.proc)
        assert wait_port(self.port, host=self.host), "nginx did not start"

    def ranges(self):
        """(first, last) of every range request logged so far."""
        out = []
        with open(os.path.join(self.d, "access.log")) as f:
            for line in f:
                m = re.search(r"bytes=(\d+)-(\d+)", line)
                if m:
                    out.append((int(m.group(1)), int(m.group(2))))
        return out

    def sent(self):
        """(status, body bytes sent, Range asked or "") of every request
        logged so far (test_metrics.py)."""
        out = []
        with open(os.path.join(self.d, "sent.log")) as f:
            for line in f:
                st, n, rng = line.rstrip("\n").split(" ", 2)
                out.append((int(st), int(n), rng.strip('"').strip("-")))
        return out

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


def openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True,
                   capture_output=True, timeout=60)


def make_ca(d, name="stfs test CA"):
    """A CA in d: (ca.pem, key)."""
    ca, key = os.path.join(d, "ca.pem"), os.path.join(d, "ca.key")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", ca,
            "-days", "2", "-subj", "/CN=" + name)
    return ca, key


def make_cert(d, ca, san="IP:127.0.0.1"):
    """A server certificate for san signed by ca: (cert, key)."""
    crt, key = os.path.join(d, "srv.pem"), os.path.join(d, "srv.key")
    csr, ext = os.path.join(d, "srv.csr"), os.path.join(d, "ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=%s\n" % san)
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=stfs")
    openssl("x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1],
            "-CAcreateserial", "-out", crt, "-days", "2", "-extfile", ext)
    return crt, key


class Faulty(http.server.BaseHTTPRequestHandler):
    """Serves files of a directory with ranges and an ETag, with faults:
    /503x2/PATH fails twice with 503 then serves, /429/PATH answers 429
    with Retry-After: 1 once (/429date/PATH: an HTTP date 3 s ahead;
    /429hold/PATH: 429 with Retry-After: 3600 while armed), /stall/PATH sends headers and then nothing
    for a minute, /stallstart/PATH holds back the ranges that start a 4 MiB
    block (but the object's) until stalled is set, /halfblock/PATH sends
    the first 2 MiB of such a range and the rest once stalled is set,
    /changed/PATH sends the first 2 MiB of such a range, waits for
    stalled and drops the connection; the retry gets another ETag, 1 MiB
    of zeros, and the rest of its zeros once stalled2 is set,
    /trickle/PATH sends 4 bytes every 0.2 s (20 bytes/s) until stalled is
    set.  Counts are per server; ranges lists (fault, first, last) of
    every range asked for."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        srv = self.server
        m = re.match(r"^/(503x2|429|429date|429hold|stall|stallstart|"
                     r"halfblock|changed|trickle|ok)/"
                     r"(.*)$", self.path)
        if not m:
            self.send_error(404)
            return
        fault, rel = m.groups()
        path = os.path.join(srv.root, rel)
        if not os.path.isfile(path):
            self.send_error(404)
            return
        with srv.lock:
            n = srv.counts.get((fault, rel), 0)
            srv.counts[(fault, rel)] = n + 1
        if fault == "503x2" and n < 2 and srv.armed:
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if fault in ("429", "429date") and n < 1 and srv.armed:
            self.send_response(429)
            self.send_header("Retry-After", "1" if fault == "429" else
                             email.utils.formatdate(time.time() + 3,
                                                    usegmt=True))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if fault == "429hold" and srv.armed:
            self.send_response(429)
            self.send_header("Retry-After", "3600")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        size = os.path.getsize(path)
        first, last = 0, size - 1
        r = re.match(r"bytes=(\d+)-(\d+)$", self.headers.get("Range", ""))
        if r:
            first, last = int(r.group(1)), min(int(r.group(2)), size - 1)
            with srv.lock:
                srv.ranges.append((fault, first, last))
        etag = '"%x-%x"' % (int(os.path.getmtime(path)), size)
        with open(path, "rb") as f:
            f.seek(first)
            body = f.read(last - first + 1)
        if fault == "changed" and srv.armed and first > 0 and \
                first % (4 << 20) == 0 and first in srv.changed_seen:
            etag = '"another-version"'          # the retry's
        self.send_response(206 if r else 200)
        self.send_header("ETag", etag)
        self.send_header("Content-Length", str(len(body)))
        if r:
            self.send_header("Content-Range", "bytes %d-%d/%d" %
                             (first, last, size))
        self.end_headers()
        if fault == "stall" and srv.armed and first > 0:
            srv.stalled.wait(60)
            return
        if fault == "trickle" and srv.armed and first > 0:
            with srv.lock:
                srv.trickled += 1
            try:
                while not srv.stalled.wait(0.2) and body:
                    self.wfile.write(body[:4])
                    self.wfile.flush()
                    body = body[4:]
            except OSError:
                return                          # the client hung up
        if fault == "changed" and srv.armed and first > 0 and \
                first % (4 << 20) == 0:
            self.changed(srv, first, etag, body)
            return
        if fault == "halfblock" and srv.armed and first > 0 and \
                first % (4 << 20) == 0:
            try:
                self.wfile.write(body[:2 << 20])
                self.wfile.flush()
            except OSError:
                return
            body = body[2 << 20:]
            srv.stalled.wait(60)        # the rest once stalled is set
        if fault == "stallstart" and srv.armed and first > 0 and \
                first % (4 << 20) == 0:
            srv.stalled.wait(60)        # a block's start, not its tail,
                                        # comes once stalled is set
        try:
            self.wfile.write(body)
        except OSError:
            pass                                # the client hung up


def _changed(self, srv, first, etag, body):
    """/changed/: the first answer for a block breaks off after 2 MiB
    (once stalled is set); the retry is of another version."""
    with srv.lock:
        again = first in srv.changed_seen
        srv.changed_seen.add(first)
    try:
        if not again:
            self.wfile.write(body[:2 << 20])
            self.wfile.flush()
            srv.stalled.wait(60)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.close_connection = True
            return
        zeros = bytes(len(body))
        self.wfile.write(zeros[:1 << 20])
        self.wfile.flush()
        srv.stalled2.wait(60)
        self.wfile.write(zeros[1 << 20:])
    except OSError:
        pass                                    # the client hung up


Faulty.changed = _changed


def faulty_server(root):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Faulty)
    srv.daemon_threads = True
    srv.root, srv.counts, srv.lock = root, {}, threading.Lock()
    srv.armed, srv.stalled = False, threading.Event()
    srv.trickled, srv.ranges = 0, []
    srv.stalled2, srv.changed_seen = threading.Event(), set()
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def disarm(srv, p, mnt):
    """Let the faulty server's stalled requests go, end its faults, and
    unmount."""
    srv.stalled.set()
    srv.stalled2.set()
    srv.armed = False
    T.stop_fg(p, mnt)


def sha(b):
    return hashlib.sha256(b).hexdigest()


def read(path):
    with open(path, "rb") as f:
        return f.read()


def cache_files(cache):
    """Every file under the directory cache."""
    return [os.path.join(r, f) for r, _, fs in os.walk(cache) for f in fs]


def big_file(d, name="big.safetensors", seed=1):
    """Three 40 MiB tensors: more than the 32 MiB stfs fetches ahead, so
    reading the first leaves the last unfetched."""
    rng = random.Random(seed)
    tensors = [("layers.%d.w" % i, "U8", [40 << 20],
                bytes(rng.getrandbits(8) for _ in range(4096)) * (10 << 10))
               for i in range(3)]
    return T.write_st(os.path.join(d, name), tensors), tensors


def check_real_file(src, want, mnt, check=None):
    """Inspect and mount src, a file of the real corpus whose tensors
    expected.json lists in want: every tensor's sha256, and check(path) of
    each tensor's file if given."""
    j = T.inspect_json(src)
    assert len(j["tensors"]) == len(want), src
    by_name = {x["name"]: x for x in want}
    p = T.mount_fg(src, mnt)
    try:
        for t in j["tensors"]:
            fp = os.path.join(mnt, t["path"])
            assert sha(read(fp)) == by_name[t["name"]]["sha256"], \
                (src, t["name"])
            if check:
                check(fp)
    finally:
        T.stop_fg(p, mnt)


@contextlib.contextmanager
def env(**kw):
    """os.environ with kw set (None: unset) for the block."""
    old = {k: os.environ.get(k) for k in kw}
    for k, v in kw.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def stfs(*args):
    return subprocess.run([T.STFS] + list(args), capture_output=True,
                          timeout=120, text=True)


def refused(src, mnt, *want, status=1):
    """Mounting src fails at once, exit status (1, or the class stfs(1)
    names: 3 not found, 4 refused, 5 unreachable, 6 policy), naming src
    and each of want; nothing is mounted."""
    r = stfs("mount", src, mnt)
    assert r.returncode == status, (src, status, r)
    assert r.stderr.startswith("stfs: %s: " % src), r.stderr
    for w in want:
        assert w in r.stderr, (w, r.stderr)
    assert not T.is_mount(mnt)
    return r.stderr


class World:
    """The emulator, nginx behind it, and an environment that points at
    them with a fresh HF_HOME and stfs cache and no token.  With
    lifetime (seconds), nginx checks signed links as a CDN does and the
    Hub redirects to links signed for that long (style: hubemu.Signer);
    rate: nginx's limit_rate per connection; cdn_host: where nginx is
    (another address than the Hub's by default).  The Hub logs every
    request to d/hub.log."""

    def __init__(self, d, lifetime=None, style="expires", rate=None,
                 cdn_host="127.0.0.2"):
        self.d = d
        self.files = os.path.join(d, "files")
        os.makedirs(self.files)
        os.makedirs(os.path.join(d, "ngx"))
        self.ngx = Nginx(os.path.join(d, "ngx"), self.files,
                         host=cdn_host, extra=hubemu.cdn_conf(rate=rate)
                         if lifetime else "")
        self.hub = hubemu.Hub(self.files, self.ngx.url(),
                              log=os.path.join(d, "hub.log"))
        if lifetime:
            self.hub.sign(lifetime, style)
        self.env = env(HF_ENDPOINT=self.hub.url,
                       HF_HOME=os.path.join(d, "hfhome"),
                       HF_HUB_CACHE=None, HF_TOKEN=None,
                       HUGGING_FACE_HUB_TOKEN=None, HF_TOKEN_PATH=None,
                       HF_HUB_OFFLINE=None,
                       XDG_CACHE_HOME=os.path.join(d, "xdg"))
        self.env.__enter__()

    def nginx_log(self):
        with open(os.path.join(self.ngx.d, "access.log")) as f:
            return f.read()

    def close(self):
        self.env.__exit__(None, None, None)
        self.hub.stop()
        self.ngx.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@contextlib.contextmanager
def world(d):
    w = World(d)
    try:
        yield w
    finally:
        w.close()


def fake_cache(hub_cache, rid, files, rev="main"):
    """A Hugging Face cache folder as huggingface_hub makes it: blobs
    named by ETag, snapshot files linking to them, refs/REV."""
    sha_ = hashlib.sha1(repr(sorted(files)).encode()).hexdigest()
    top = os.path.join(hub_cache, "models--" + rid.replace("/", "--"))
    os.makedirs(os.path.join(top, "blobs"), exist_ok=True)
    os.makedirs(os.path.join(top, "refs"), exist_ok=True)
    with open(os.path.join(top, "refs", rev), "w") as f:
        f.write(sha_)
    for path, data in files.items():
        etag = hashlib.sha256(data).hexdigest()
        with open(os.path.join(top, "blobs", etag), "wb") as f:
            f.write(data)
        link = os.path.join(top, "snapshots", sha_, path)
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(os.path.relpath(os.path.join(top, "blobs", etag),
                                   os.path.dirname(link)), link)
    return sha_


def shard_files():
    """The real shard set (data/real/jl-sharded): {file name: bytes}."""
    d = os.path.join(T.REAL, "jl-sharded")
    out = {}
    for n in os.listdir(d):
        if n.endswith(".safetensors") or n.endswith(".json"):
            with open(os.path.join(d, n), "rb") as f:
                out[n] = f.read()
    return out


def signed(url, path, expires, secret="stfs-secret"):
    """url with the query nginx's secure_link checks: an MD5 of the
    expiry, path and secret, until expires (Unix time)."""
    h = hashlib.md5(("%d%s %s" % (expires, path, secret)).encode())
    sig = base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()
    return "%s?md5=%s&expires=%d" % (url, sig, expires)


def pattern(off, n):
    """The bytes [off, off + n) of a test tensor (off and n multiples of
    4 KiB): each 4 KiB page starts with its offset and a hash of it, the
    rest zeros: cheap to make and check, and no two pages alike."""
    b = bytearray(n)
    for p in range(0, n, 4096):
        o = off + p
        struct.pack_into("<QQ", b, p, o, (o * 0x9E3779B97F4A7C15) &
                         0xFFFFFFFFFFFFFFFF)
    return bytes(b)


def make_model(path, size):
    """A safetensors file of one U8 tensor "w" of size bytes of
    pattern(); returns hubemu.Big of it (sha256 made while writing)."""
    h = json.dumps({"w": {"dtype": "U8", "shape": [size],
                          "data_offsets": [0, size]}}).encode()
    h += b" " * (-len(h) % 8)
    sha = hashlib.sha256()
    with open(path, "wb") as f:
        for part in (struct.pack("<Q", len(h)), h):
            f.write(part)
            sha.update(part)
        for off in range(0, size, MiB):
            b = pattern(off, min(MiB, size - off))
            f.write(b)
            sha.update(b)
    return hubemu.Big(path, sha.hexdigest())


def mount_logged(src, mnt, log, *opts, wrap=()):
    """`stfs mount -f` with its log (stderr) in the file log; wrap: an
    argv prefix it runs under (nsenter into a node's namespace)."""
    f = open(log, "ab")
    p = subprocess.Popen(list(wrap) + [T.STFS, "mount", "-f"] + list(opts) +
                         [src, mnt],
                         stdout=f, stderr=subprocess.STDOUT)
    f.close()
    T._procs.append(p)
    T._mounts.append(mnt)
    if not T.wait_mount(mnt, p):
        raise AssertionError("mount of %s failed: %s" % (src, slurp(log)))
    return p


def stop_logged(p, mnt):
    T.unmount(mnt)
    try:
        rc = p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        where = T.threads_of(p.pid)
        held = T.holders(mnt)
        p.kill()
        p.wait()
        raise AssertionError("daemon did not exit after unmount; its "
                             "threads: %s; holders: %s" % (where, held))
    assert rc == 0, "daemon exit status %d" % rc


def slurp(path):
    with open(path, errors="replace") as f:
        return f.read()


def wait_blocks(cache, n):
    """Wait (20 s at most) for n block files in cache: a reader is
    answered as its bytes come, and a block still on the wire at unmount
    is not kept."""
    import time as _t
    for _ in range(200):
        if sum(1 for r, _, fs in os.walk(cache) for f in fs
               if f.isdigit()) >= n:
            return
        _t.sleep(0.1)

"""s3server.py: a real S3-compatible server for the tests: OpenStack Swift
from Debian (proxy, account, container and object servers, one node, one
replica) with its s3api middleware, which checks every request's SigV4
signature against tempauth's users.  Its configuration is in tests/servers/swift/;
rings, devices and logs go to a directory of the test's own.  It lives
across the tests of a file (it takes seconds to start), so its servers
are not in stfstest's per-test cleanup: stop() ends them, and so does an
exit hook, even when a test fails.

Lister is a small standard-library S3 "bucket" that lists forever, the
fault Swift will not make: every ListObjectsV2 page is truncated, with the
same continuation token (loop=True) or a new one each time.  Bucket is a
small standard-library bucket of fixed objects whose GET can answer with
other bytes and another ETag than its listing gave, ignoring If-Match
(a fault of some servers and proxies).

Objects are put with Swift's own API (tempauth tokens), so the data a test
starts from does not depend on stfs's signer.

shared() is the one Swift of a test run (with buckets "models" and
"other"), creds() the environment of a signed client of it, and
stop_shared() ends it; the test files that use S3 share these.
"""
import contextlib
import os
import shutil
import subprocess
import time
import datetime
import hashlib
import hmac
import urllib.error
import urllib.request
from urllib.parse import quote

import atexit
import http.server
import threading
import urllib.parse

import stfstest as T
from fixtures import env, free_port, wait_port

CONF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "swift")
ACCESS, SECRET = "test:tester", "tester-7QfZ-s3key"
READER, READER_SECRET = "test:reader", "secret2"
SHARED = []         # the one Swift of this run (it takes seconds to start)


def sign(method, host, path, query, data, access, secret, headers,
         region="us-east-1", now=None):
    """SigV4 headers for an S3 request (AWS's "Signature Calculations for
    the Authorization Header"): headers plus Host, X-Amz-Date,
    X-Amz-Content-Sha256 and Authorization."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    amzdate = now.strftime("%Y%m%dT%H%M%SZ")
    day = amzdate[:8]
    payload = hashlib.sha256(data).hexdigest()
    headers.update({"Host": host, "X-Amz-Date": amzdate,
                    "X-Amz-Content-Sha256": payload})
    canon_h = sorted((k.lower(), " ".join(str(v).split()))
                     for k, v in headers.items())
    signed = ";".join(k for k, _ in canon_h)
    q = "&".join("%s=%s" % (quote(k, safe="-_.~"), quote(v, safe="-_.~"))
                 for k, v in sorted(p.partition("=")[::2] for p in
                                    query.split("&") if p))
    creq = "\n".join([method, path, q] +
                     ["%s:%s" % kv for kv in canon_h] +
                     ["", signed, payload])
    scope = "%s/%s/s3/aws4_request" % (day, region)
    sts = "\n".join(["AWS4-HMAC-SHA256", amzdate, scope,
                     hashlib.sha256(creq.encode()).hexdigest()])
    k = ("AWS4" + secret).encode()
    for part in (day, region, "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    headers["Authorization"] = (
        "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s"
        % (access, scope, signed, sig))
    return headers


def available():
    return shutil.which("swift-proxy-server") is not None or \
        os.path.exists("/usr/bin/swift-proxy-server")


class Swift:
    def __init__(self, d):
        self.d = d
        self.procs = []
        atexit.register(self.stop)
        self.ports = {k: free_port() for k in
                      ("proxy", "account", "container", "object",
                       "memcache")}
        os.makedirs(os.path.join(d, "devices", "d1"), exist_ok=True)
        for name in ("swift.conf", "proxy-server.conf",
                     "account-server.conf", "container-server.conf",
                     "object-server.conf"):
            with open(os.path.join(CONF, name)) as f:
                text = f.read()
            kind = name.split("-")[0]
            text = text.replace("@DIR@", d).replace(
                "@PORT@", str(self.ports.get(kind, 0))).replace(
                "@MEMCACHE@", str(self.ports["memcache"]))
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        for kind in ("account", "container", "object"):
            b = os.path.join(d, kind + ".builder")
            for args in (["create", "6", "1", "1"],
                         ["add", "r1z1-127.0.0.1:%d/d1" % self.ports[kind],
                          "100"],
                         ["rebalance"]):
                r = subprocess.run(["swift-ring-builder", b] + args,
                                   capture_output=True, cwd=d)
                assert r.returncode in (0, 1), r
        # tempauth keeps its tokens in memcached
        p = subprocess.Popen(["memcached", "-l", "127.0.0.1", "-p",
                              str(self.ports["memcache"]), "-U", "0",
                              "-u", "root", "-m", "16"])
        self.procs.append(p)
        for kind in ("account", "container", "object", "proxy"):
            log = open(os.path.join(d, kind + ".log"), "wb")
            # the proxy finds the tests' own middleware (s3extras.py)
            penv = dict(os.environ, PYTHONPATH=CONF)
            p = subprocess.Popen(["/usr/bin/swift-%s-server" % kind, "-v",
                                  os.path.join(d, kind + "-server.conf")],
                                 stdout=log, stderr=subprocess.STDOUT,
                                 env=penv)
            log.close()
            self.procs.append(p)
        for kind, port in self.ports.items():
            if not wait_port(port, 120):
                self.stop()
                raise AssertionError("%s did not start" % kind)
        self.endpoint = "http://127.0.0.1:%d" % self.ports["proxy"]
        end = time.time() + 30
        while True:                 # the proxy answers once it is ready
            try:
                self.request("GET", "/")
                break
            except OSError:
                if time.time() > end:
                    raise
                time.sleep(0.2)

    def request(self, method, path, data=b"", access=ACCESS, secret=SECRET,
                headers=None, unsigned=None):
        """An S3 request signed by this file's own SigV4 signer (written
        from AWS's description, independent of stfs's), with the headers
        unsigned added after signing: (status, headers, body)."""
        host = self.endpoint.split("//", 1)[1]
        path, _, query = path.partition("?")
        h = sign(method, host, path, query, data, access, secret,
                 dict(headers or {}))
        h.update(unsigned or {})
        req = urllib.request.Request(self.endpoint + path +
                                     ("?" + query if query else ""),
                                     data=data if method == "PUT" else None,
                                     method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def bucket(self, name):
        # a Swift just started answers 503 until its account and container
        # servers take requests (seen on a loaded machine): bounded retries
        end = time.time() + 60
        while True:
            st, _, body = self.request("PUT", "/" + name)
            if st != 503 or time.time() > end:
                break
            time.sleep(0.5)
        assert st == 200, body

    def put(self, bucket, key, data, headers=None):
        st, h, body = self.request("PUT", "/%s/%s" % (bucket, quote(key)),
                                   data, headers=headers)
        assert st == 200, body
        return h["ETag"]

    def delete(self, bucket, key):
        st, _, body = self.request("DELETE", "/%s/%s" % (bucket, quote(key)))
        assert st == 204, body

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def shared():
    """The Swift of this test run, started on first use, with the buckets
    "models" and "other"."""
    if not SHARED:
        d = T.tmpdir()
        sw = Swift(d)
        sw.dir = d
        sw.bucket("models")
        sw.bucket("other")
        SHARED.append(sw)
    return SHARED[0]


def stop_shared():
    """End the shared Swift, if one was started, and remove its files."""
    while SHARED:
        sw = SHARED.pop()
        sw.stop()
        shutil.rmtree(sw.dir, ignore_errors=True)


@contextlib.contextmanager
def creds(d, **kw):
    """The environment of a signed client of the shared Swift, with kw on
    top."""
    sw = shared()
    base = dict(AWS_ENDPOINT_URL=sw.endpoint, AWS_ENDPOINT_URL_S3=None,
                AWS_ACCESS_KEY_ID=ACCESS, AWS_SECRET_ACCESS_KEY=SECRET,
                AWS_SESSION_TOKEN=None, AWS_REGION=None,
                AWS_DEFAULT_REGION=None, AWS_PROFILE=None,
                AWS_SHARED_CREDENTIALS_FILE=os.path.join(d, "no-creds"),
                AWS_CONFIG_FILE=os.path.join(d, "no-config"),
                XDG_CACHE_HOME=os.path.join(d, "xdg"))
    base.update(kw)
    with env(**base):
        yield sw


class Lister:
    """A bucket whose ListObjectsV2 never ends: each page holds one key
    and IsTruncated true, its NextContinuationToken always "again"
    (loop=True) or new each page.  Every request's query is in .seen."""

    def __init__(self, loop=True):
        self.loop, self.seen, self.lock = loop, [], threading.Lock()
        lister = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # one write per answer, sent at once (no delayed-ACK waits)
            wbufsize = 1 << 16
            disable_nagle_algorithm = True

            def log_message(self, *a):
                pass

            def do_GET(self):
                q = urllib.parse.parse_qs(urllib.parse.urlsplit(
                    self.path).query)
                with lister.lock:
                    lister.seen.append(q)
                    n = len(lister.seen)
                token = "again" if lister.loop else "page-%d" % n
                body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                        "<ListBucketResult><Name>b</Name><Prefix>p/"
                        "</Prefix><KeyCount>1</KeyCount><MaxKeys>1"
                        "</MaxKeys><IsTruncated>true</IsTruncated>"
                        "<Contents><Key>p/k%d.bin</Key><Size>1</Size>"
                        "</Contents><NextContinuationToken>%s"
                        "</NextContinuationToken></ListBucketResult>"
                        % (n, token)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever,
                         daemon=True).start()
        atexit.register(self.stop)

    def stop(self):
        if self.server:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


class Bucket:
    """A small standard-library S3 bucket "b" of objects ({key: bytes})
    for the faults Swift will not make: ListObjectsV2 (one page) lists
    each object with the MD5 ETag of its bytes, GET and HEAD (with a
    Range) serve it; .swap ({key: bytes}) replaces an object's bytes
    (and its ETag) after the listing, for a GET that ignores If-Match
    as some servers and proxies do.  Requests are not checked for a
    signature.  Every request's method, path and headers are in .seen."""

    def __init__(self, objects):
        self.objects, self.swap, self.seen = dict(objects), {}, []
        self.lock = threading.Lock()
        bucket = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            wbufsize = 1 << 16
            disable_nagle_algorithm = True

            def log_message(self, *a):
                pass

            def do_GET(self):
                bucket._handle(self, True)

            def do_HEAD(self):
                bucket._handle(self, False)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever,
                         daemon=True).start()
        atexit.register(self.stop)

    @staticmethod
    def etag(data):
        return '"%s"' % hashlib.md5(data).hexdigest()

    def _send(self, h, code, headers, body, with_body):
        h.send_response(code)
        for k, v in headers:
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if with_body:
            h.wfile.write(body)

    def _handle(self, h, with_body):
        u = urllib.parse.urlsplit(h.path)
        with self.lock:
            self.seen.append((h.command, h.path, dict(h.headers)))
        q = urllib.parse.parse_qs(u.query)
        if u.path in ("/b", "/b/") and "list-type" in q:
            pre = q.get("prefix", [""])[0]
            items = "".join(
                "<Contents><Key>%s</Key><Size>%d</Size><ETag>%s</ETag>"
                "</Contents>" % (
                    k.replace("&", "&amp;").replace("<", "&lt;"), len(v),
                    self.etag(v).replace('"', "&quot;"))
                for k, v in sorted(self.objects.items())
                if k.startswith(pre))
            body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                    "<ListBucketResult><Name>b</Name><Prefix>%s</Prefix>"
                    "<IsTruncated>false</IsTruncated>%s"
                    "</ListBucketResult>" % (pre, items)).encode()
            return self._send(h, 200, [("Content-Type", "application/xml")],
                              body, with_body)
        key = urllib.parse.unquote(u.path[len("/b/"):])
        if not u.path.startswith("/b/") or key not in self.objects:
            return self._send(h, 404, [], b"<Error><Code>NoSuchKey</Code>"
                              b"</Error>", with_body)
        data = self.swap.get(key, self.objects[key])
        headers = [("ETag", self.etag(data)),
                   ("Last-Modified", "Tue, 24 Nov 2026 10:00:00 GMT"),
                   ("Accept-Ranges", "bytes")]
        rng = h.headers.get("Range")
        if rng and rng.startswith("bytes="):
            a, _, b = rng[6:].partition("-")
            a, b = int(a), min(int(b) if b else len(data) - 1,
                               len(data) - 1)
            headers.append(("Content-Range", "bytes %d-%d/%d" % (
                a, b, len(data))))
            return self._send(h, 206, headers, data[a:b + 1], with_body)
        return self._send(h, 200, headers, data, with_body)

    def stop(self):
        if self.server:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

"""hubemu.py: a Hugging Face Hub emulator for the tests (standard library
only), as the Hub answers (checked against the official JavaScript client,
@huggingface/hub, in test_hub.py):

- GET /api/{models,datasets}/ORG/NAME/revision/REV: {"id", "sha",
  "siblings"}; REV a branch, a tag, refs/pr/N or a commit (URL-encoded);
  GET /api/{models,datasets}/ORG/NAME: the same of main (huggingface_hub's
  model_info);
- GET /api/.../tree/REV[/PATH][?recursive=true]: a JSON array of
  {"type", "oid", "size", "path", "lfs"}, PAGE entries a page, the next
  page in a Link: <...>; rel="next" header (with a cursor);
- GET/HEAD /[datasets/]ORG/NAME/raw/REV/PATH: the file as git holds it
  (an LFS pointer for *.safetensors);
- GET/HEAD /[datasets/]ORG/NAME/resolve/REV/PATH: 302 to the file in a
  folder that nginx serves on another address (REPO/SHA/PATH), with
  X-Repo-Commit, X-Linked-Etag and X-Linked-Size, as the Hub does for
  LFS files;
- gated repos: 401 with X-Error-Code: GatedRepo and X-Error-Message
  without the right token (Authorization: Bearer TOKEN); unknown repos
  and revisions: 401/404 with the Hub's codes.

A fault mode: with .tree_loop set, the last page of a tree listing links
back to its first page (Link: next to a page already seen); .moved
{"ORG/NAME": URL}: the repo's API calls answer 307 to URL + the rest of
their path (a renamed repo: URL on the Hub itself; or elsewhere); with
.tree_endless, every page links to a next one (a new cursor each time,
empty past the end).  A hostile
listing: .edit_tree, a function of a tree's entries (a list of dicts, in
path order) that returns the entries to list instead.

push() makes a new commit on a branch (the files nginx serves for every
commit stay, as the Hub's do); a file is bytes, or Big(PATH), a file on
disk linked into nginx's folder (a 1 GiB model without 1 GiB in memory).
Every request's path and Authorization header is recorded in .seen, and
with its method, status and time in .log (and the file log=, one line
each).

At scale, as huggingface.co is (test_hub_resolve.py):
- sign(lifetime): /resolve redirects to a signed URL that expires
  (?md5=SIG&expires=EPOCH), which the nginx of cdn_conf() checks on every
  request (its secure_link module: a wrong signature is 403, an expired
  link 410); other styles put the expiry where CloudFront or S3 do, or
  where no client can read it (Signer); the signer's .bad = N makes the
  next N signatures wrong;
- rate_limit(limit, window): /resolve calls are counted in fixed windows
  of window seconds; past limit, 429 with RateLimit: "resolvers";r=0;t=S,
  RateLimit-Policy and Retry-After: S (S the seconds left in the window),
  as the Hub's are; storm=S answers every /resolve so (t=S) until unset.
  Every /resolve answer carries RateLimit with what remains.
ShortLinks: a plain http:// server whose /s/NAME redirects (302) to a
signed URL of NAME on the same nginx (a short link to a presigned
location), logged the same way.
"""
import base64
import hashlib
import http.server
import json
import os
import shutil
import ssl
import threading
import time
import urllib.parse

import stfstest as T  # noqa: F401  (the tests' cleanup)

PAGE = 2
TOKEN = "hf_stfs_test_token"
SECRET = "stfs-cdn-secret"


def cdn_conf(secret=SECRET, rate=None):
    """The server-block lines that make test_remote.Nginx check the
    signature and expiry of every request, as a signed CDN does (the
    expiry in expires= or, opaque, p=); rate: nginx's limit_rate per
    connection (e.g. "2m")."""
    return """    location / {
      secure_link $arg_md5,$arg_expires$arg_p;
      secure_link_md5 "$secure_link_expires$uri %s";
      if ($secure_link = "") { return 403; }
      if ($secure_link = "0") { return 410; }
%s    }
""" % (secret, "      limit_rate %s;\n" % rate if rate else "")


class Signer:
    """Signed URLs for the nginx of cdn_conf(): md5 over the expiry, the
    path and the secret, base64url without padding.  style says where
    the expiry is: "expires" (expires=EPOCH, as nginx's secure_link
    links), "Expires" (Expires=EPOCH, as CloudFront's), "amz" (p=EPOCH
    for nginx, and X-Amz-Date=YYYYMMDDTHHMMSSZ&X-Amz-Expires=SECONDS for
    the client, as an S3 presigned URL) or "opaque" (p=EPOCH only, which
    a client cannot read)."""

    def __init__(self, lifetime, secret=SECRET, style="expires"):
        assert style in ("expires", "Expires", "amz", "opaque")
        self.lifetime, self.secret, self.style = lifetime, secret, style
        self.bad = 0            # the next this many are signed wrong
        self.lock = threading.Lock()

    def sign(self, base, path):
        """base (scheme://host:port) + path (decoded, /...) signed."""
        exp = int(time.time()) + self.lifetime
        secret = self.secret
        with self.lock:
            if self.bad > 0:
                self.bad -= 1
                secret = "wrong"
        md5 = base64.urlsafe_b64encode(hashlib.md5(
            ("%d%s %s" % (exp, path, secret)).encode()).digest()
        ).decode().rstrip("=")
        q = "md5=%s&" % md5
        if self.style in ("expires", "Expires"):
            q += "%s=%d" % (self.style, exp)
        else:
            q += "p=%d" % exp
        if self.style == "amz":
            q = "X-Amz-Date=%s&X-Amz-Expires=%d&%s" % (time.strftime(
                "%Y%m%dT%H%M%SZ", time.gmtime(exp - self.lifetime)),
                self.lifetime, q)
        return "%s%s?%s" % (base, urllib.parse.quote(path), q)


class Big:
    """A file on disk pushed as is (linked, not read into memory); its
    sha256 given, or computed once here."""

    def __init__(self, path, sha256=None):
        self.path = path
        self.size = os.path.getsize(path)
        if sha256 is None:
            h = hashlib.sha256()
            with open(path, "rb") as f:
                for b in iter(lambda: f.read(1 << 20), b""):
                    h.update(b)
            sha256 = h.hexdigest()
        self.sha256 = sha256


# Files the Hub keeps in LFS (as .gitattributes of a new repo says): the
# tree gives their sha256 as lfs.oid
LFS = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".onnx",
       ".onnx_data", ".h5", ".msgpack")


def _lfs(path):
    return path.endswith(LFS)


def _size(data):
    return data.size if isinstance(data, Big) else len(data)


def _sha256(data):
    return data.sha256 if isinstance(data, Big) else \
        hashlib.sha256(data).hexdigest()


class Log:
    """Every request a server answered: .entries (dicts of t, method,
    path (with its query), status, auth) and, with a path, one line each
    in that file."""

    def __init__(self, path=None):
        self.entries, self.path = [], path
        self.lock = threading.Lock()

    def add(self, method, path, status, auth):
        e = {"t": time.time(), "method": method, "path": path,
             "status": status, "auth": auth}
        with self.lock:
            self.entries.append(e)
            if self.path:
                with open(self.path, "a") as f:
                    f.write("%.3f %s %s %d [%s]\n" % (
                        e["t"], method, path, status, auth or "-"))

    def count(self, pred=lambda e: True):
        with self.lock:
            return sum(1 for e in self.entries if pred(e))


class Repo:
    def __init__(self, rid, dataset=False, gated=False):
        self.id, self.dataset, self.gated = rid, dataset, gated
        self.refs = {}          # branch, tag or refs/pr/N -> sha
        self.commits = {}       # sha -> {path: bytes}


class Hub:
    def __init__(self, files_root, files_url, port=None, tls=None,
                 log=None):
        """files_root: the folder nginx serves at files_url; with
        tls=(CERT, KEY), https; log: a file to log requests to.  .page:
        the tree's entries a page."""
        self.root, self.files_url = files_root, files_url.rstrip("/")
        self.repos = {}
        self.seen = []
        self.log = Log(log)
        self.tree_loop = False      # the fault: the tree's pages loop
        self.tree_endless = False   # or never end (a new cursor each)
        self.edit_tree = None       # a hostile listing: f(entries)
        self.moved = {}             # "ORG/NAME" -> where its API went
        self.page = PAGE
        self.trees = {}             # (sha, path, recursive) -> entries
        self.lock = threading.Lock()
        self.signer = None
        self.limit, self.window = None, 300
        self.window_start, self.window_calls = 0.0, 0
        self.storm = None
        hub = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                hub._handle(self, True)

            def do_HEAD(self):
                hub._handle(self, False)

        class Server(http.server.ThreadingHTTPServer):
            request_queue_size = 512    # a burst of connections at once

        self.server = Server(("127.0.0.1", port or 0), H)
        self.port = self.server.server_address[1]
        self.url = "http://127.0.0.1:%d" % self.port
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            self.server.socket = ctx.wrap_socket(self.server.socket,
                                                 server_side=True)
            self.url = "https://127.0.0.1:%d" % self.port
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    # ---- at scale ----------------------------------------------------

    def sign(self, lifetime, style="expires", secret=SECRET):
        """/resolve redirects to URLs signed for lifetime seconds."""
        self.signer = Signer(lifetime, secret, style)
        return self.signer

    def rate_limit(self, limit, window=300):
        """At most limit /resolve calls per window seconds (None: no
        limit); a new window starts now."""
        with self.lock:
            self.limit, self.window = limit, window
            self.window_start, self.window_calls = time.time(), 0

    def resolves(self, status=None):
        """How many /resolve requests were answered (with status)."""
        return self.log.count(lambda e: "/resolve/" in e["path"] and (
            status is None or e["status"] == status))

    def _throttle(self):
        """(status, headers) of the rate limit for one /resolve call:
        (None, headers) when it may go on."""
        with self.lock:
            now = time.time()
            if self.storm is not None:
                t = self.storm
                return 429, [("RateLimit", '"resolvers";r=0;t=%d' % t),
                             ("RateLimit-Policy", '"fixed window";'
                              '"resolvers";q=%d;w=%d' % (
                                  self.limit or 0, self.window)),
                             ("Retry-After", str(t))]
            if self.limit is None:
                return None, []
            if now - self.window_start >= self.window:
                self.window_start, self.window_calls = now, 0
            self.window_calls += 1
            left = self.window_start + self.window - now
            t = max(1, int(left + 0.999))
            policy = ("RateLimit-Policy", '"fixed window";"resolvers";'
                      'q=%d;w=%d' % (self.limit, self.window))
            r = self.limit - self.window_calls
            if r < 0:
                return 429, [("RateLimit", '"resolvers";r=0;t=%d' % t),
                             policy, ("Retry-After", str(t))]
            return None, [("RateLimit", '"resolvers";r=%d;t=%d' % (r, t)),
                          policy]

    # ---- the repos ----------------------------------------------------

    def repo(self, rid, dataset=False, gated=False):
        r = Repo(rid, dataset, gated)
        self.repos[("datasets/" if dataset else "") + rid] = r
        return r

    def push(self, repo, files, branch="main", keep=True):
        """A new commit on branch: the files of the last commit there
        (if keep) updated with files ({path: bytes}); returns its sha."""
        base = dict(repo.commits.get(repo.refs.get(branch), {})) \
            if keep else {}
        base.update(files)
        sha = hashlib.sha1(("%s %d %s" % (repo.id, len(repo.commits),
                                          sorted(base))).encode()
                           ).hexdigest()
        repo.commits[sha] = base
        repo.refs[branch] = sha
        top = os.path.join(self.root, repo.id, sha)
        for path, data in base.items():
            p = os.path.join(top, path)
            # a name git holds but a disk cannot (hostile names: "..",
            # NUL, over 255 bytes, a file that is also a folder) is
            # listed by the tree API and never served
            if "\0" in path or not os.path.normpath(p).startswith(
                    top + "/"):
                continue
            try:
                os.makedirs(os.path.dirname(p), exist_ok=True)
            except OSError:
                continue
            if isinstance(data, Big):
                try:
                    os.link(data.path, p)
                except OSError:
                    shutil.copyfile(data.path, p)
                continue
            try:
                with open(p, "wb") as f:
                    f.write(data)
            except OSError:
                continue
        return sha

    # ---- the API -----------------------------------------------------

    def _send(self, h, code, body=b"", headers=(), with_body=True):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            headers = list(headers) + [("Content-Type", "application/json")]
        self.log.add(h.command, h.path, code, h.headers.get("Authorization"))
        h.send_response(code)
        for k, v in headers:
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if with_body:
            h.wfile.write(body)

    def _error(self, h, code, ecode, msg, with_body):
        self._send(h, code, {"error": msg},
                   [("X-Error-Code", ecode), ("X-Error-Message", msg)],
                   with_body)

    def _find(self, parts):
        """(repo, rest of the path parts) from parts after /api/models
        or the like."""
        for n in (3, 2):
            key = "/".join(parts[:n])
            if key in self.repos:
                return self.repos[key], parts[n:]
        return None, parts

    def _sha(self, repo, rev):
        if rev in repo.refs:
            return repo.refs[rev]
        if rev in repo.commits:
            return rev
        return None

    def _handle(self, h, with_body):
        u = urllib.parse.urlsplit(h.path)
        auth = h.headers.get("Authorization")
        with self.lock:
            self.seen.append((u.path, auth))
        parts = [urllib.parse.unquote(p) for p in u.path.split("/")[1:]]
        api = parts[:1] == ["api"]
        moved = self.moved.get("/".join(parts[2:4])) if api else None
        if moved:
            # a renamed repo's API: 307 to its new place (the rest of the
            # path and the query kept)
            rest = "/".join(u.path.split("/")[5:])
            return self._send(h, 307, b"", [("Location", "%s/%s%s" % (
                moved, rest, "?" + u.query if u.query else ""))],
                with_body)
        if api:
            if len(parts) < 2 or parts[1] not in ("models", "datasets"):
                return self._error(h, 404, "EntryNotFound", "Not Found",
                                   with_body)
            kind = parts[1]
            repo, rest = self._find((["datasets"] if kind == "datasets"
                                     else []) + parts[2:])
        else:
            repo, rest = self._find(parts)
        dataset = kind == "datasets" if api else parts[:1] == ["datasets"]
        if repo is None or dataset != repo.dataset:
            return self._error(h, 401, "RepoNotFound",
                               "Repository Not Found for url: %s%s. Please "
                               "make sure you specified the correct "
                               "`repo_id` and `repo_type`." % (
                                   self.url, h.path), with_body)
        if repo.gated and auth != "Bearer " + TOKEN:
            return self._error(h, 401, "GatedRepo",
                               "Access to model %s is restricted. You must "
                               "have access to it and be authenticated to "
                               "access it. Please log in." % repo.id,
                               with_body)
        if api and (rest[:1] == ["revision"] or not rest):
            # the repo's own page is its default branch's revision
            rev = "/".join(rest[1:]) if rest else "main"
            sha = self._sha(repo, rev)
            if not sha:
                return self._error(h, 404, "RevisionNotFound",
                                   "Invalid rev id: %s" % rev, with_body)
            return self._send(h, 200, {
                "_id": repo.id, "id": repo.id, "sha": sha,
                "private": False, "gated": "auto" if repo.gated else False,
                "siblings": [{"rfilename": p}
                             for p in sorted(repo.commits[sha])]},
                with_body=with_body)
        if api and rest[:1] == ["tree"]:
            return self._tree(h, repo, rest[1:], u, with_body)
        if not api and rest[:1] == ["resolve"] and len(rest) >= 3:
            return self._resolve(h, repo, rest[1:], with_body)
        if not api and rest[:1] == ["raw"] and len(rest) >= 3:
            return self._raw(h, repo, rest[1:], with_body)
        return self._error(h, 404, "EntryNotFound", "Not Found", with_body)

    def _revision_and_path(self, repo, rest):
        """refs/pr/N spans three parts of the path."""
        for n in (3, 1):
            rev = "/".join(rest[:n])
            sha = self._sha(repo, rev)
            if sha:
                return sha, "/".join(rest[n:])
        return None, None

    def _tree(self, h, repo, rest, u, with_body):
        sha, path = self._revision_and_path(repo, rest)
        if not sha:
            return self._error(h, 404, "RevisionNotFound",
                               "Invalid rev id: %s" % "/".join(rest[:1]),
                               with_body)
        q = urllib.parse.parse_qs(u.query)
        # "true", or "True" as huggingface_hub (requests) writes it
        recursive = q.get("recursive", ["false"])[0].lower() in ("true", "1")
        key = (repo.id, sha, path, recursive)
        with self.lock:
            entries = self.trees.get(key)
        if entries is None:
            entries = self._entries(repo.commits[sha], path, recursive)
            if self.edit_tree:
                entries = self.edit_tree(entries)
            with self.lock:
                self.trees[key] = entries
        if path and not entries:
            return self._error(h, 404, "EntryNotFound",
                               "%s does not exist on \"%s\"" % (path, sha),
                               with_body)
        start = int(q.get("cursor", ["0"])[0])
        page = entries[start:start + self.page]
        headers = []
        if start + self.page < len(entries) or self.tree_endless:
            nq = dict((k, v[0]) for k, v in q.items())
            nq["cursor"] = str(start + self.page)
            headers.append(("Link", '<%s%s?%s>; rel="next"' % (
                self.url, u.path, urllib.parse.urlencode(nq))))
        elif self.tree_loop and start:
            # the fault: the last page links back to the first one
            nq = dict((k, v[0]) for k, v in q.items() if k != "cursor")
            headers.append(("Link", '<%s%s%s>; rel="next"' % (
                self.url, u.path, "?" + urllib.parse.urlencode(nq)
                if nq else "")))
        self._send(h, 200, page, headers, with_body)

    @staticmethod
    def _entries(files, path, recursive):
        """The tree's entries under path, in path order."""
        pre = path + "/" if path else ""
        entries, dirs = [], set()
        for p in sorted(files):
            if not p.startswith(pre):
                continue
            rel = p[len(pre):]
            if "/" in rel:
                d = pre + rel.split("/")[0]
                if d not in dirs:
                    dirs.add(d)
                    entries.append({"type": "directory", "oid": hashlib.sha1(
                        d.encode()).hexdigest(), "size": 0, "path": d})
                if not recursive:
                    continue
            data = files[p]
            e = {"type": "file", "oid": hashlib.sha1(
                b"blob %d\0" % _size(data) + (
                    data.sha256.encode() if isinstance(data, Big)
                    else data)).hexdigest(),
                "size": _size(data), "path": p}
            if _lfs(p):
                e["lfs"] = {"oid": _sha256(data),
                            "size": _size(data), "pointerSize": 134}
            entries.append(e)
        entries.sort(key=lambda e: e["path"])
        return entries

    def _file(self, repo, rest):
        """(commit, path, bytes) of REVISION/PATH; bytes None if none."""
        sha, path = self._revision_and_path(repo, rest)
        if not sha or path not in repo.commits[sha]:
            return sha, path, None
        return sha, path, repo.commits[sha][path]

    def _raw(self, h, repo, rest, with_body):
        """The file as git has it: an LFS pointer for weights."""
        sha, path, data = self._file(repo, rest)
        if data is None:
            return self._error(h, 404, "EntryNotFound",
                               "Entry not found", with_body)
        if _lfs(path):
            data = ("version https://git-lfs.github.com/spec/v1\n"
                    "oid sha256:%s\nsize %d\n" % (
                        _sha256(data), _size(data))).encode()
        elif isinstance(data, Big):
            with open(data.path, "rb") as f:
                data = f.read()
        self._send(h, 200, data, [("X-Repo-Commit", sha)], with_body)

    def _resolve(self, h, repo, rest, with_body):
        status, limits = self._throttle()
        if status:
            return self._send(h, status, {
                "error": "You have been rate-limited; you can retry this "
                "action in about %s seconds." % dict(limits)["Retry-After"]},
                limits, with_body)
        sha, path, data = self._file(repo, rest)
        if data is None:
            return self._error(h, 404, "EntryNotFound",
                               "Entry not found", with_body)
        etag = _sha256(data)
        if self.signer:
            u = urllib.parse.urlsplit(self.files_url)
            loc = self.signer.sign("%s://%s" % (u.scheme, u.netloc),
                                   "%s/%s/%s/%s" % (u.path, repo.id, sha,
                                                    path))
        else:
            loc = "%s/%s/%s/%s" % (self.files_url,
                                   urllib.parse.quote(repo.id), sha,
                                   urllib.parse.quote(path))
        self._send(h, 302, b"", limits + [
            ("Location", loc), ("X-Repo-Commit", sha),
            ("X-Linked-Etag", '"%s"' % etag),
            ("X-Linked-Size", str(_size(data))),
            ("ETag", '"%s"' % etag)], with_body)


class ShortLinks:
    """http://127.0.0.1:PORT/s/NAME: 302 to NAME on the signed CDN at
    cdn_base (scheme://host:port), signed by signer; nothing else.
    Requests are logged in .log."""

    def __init__(self, cdn_base, signer, log=None):
        self.cdn, self.signer = cdn_base.rstrip("/"), signer
        self.log = Log(log)
        links = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                links._handle(self)

            do_HEAD = do_GET

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       daemon=True)
        self.thread.start()

    def url(self, name):
        return "http://127.0.0.1:%d/s/%s" % (self.port, name)

    def _handle(self, h):
        path = urllib.parse.urlsplit(h.path).path
        if not path.startswith("/s/") or len(path) < 4:
            code, headers = 404, []
        else:
            code = 302
            headers = [("Location", self.signer.sign(
                self.cdn, "/" + urllib.parse.unquote(path[3:])))]
        self.log.add(h.command, h.path, code, h.headers.get("Authorization"))
        h.send_response(code)
        for k, v in headers:
            h.send_header(k, v)
        h.send_header("Content-Length", "0")
        h.end_headers()

    def hits(self):
        return self.log.count(lambda e: e["path"].startswith("/s/"))

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

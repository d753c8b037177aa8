"""hubemu.py: a Hugging Face Hub emulator for the tests (standard library
only), as the Hub answers (checked against the official JavaScript client,
@huggingface/hub, in test_hub.py):

- GET /api/{models,datasets}/ORG/NAME/revision/REV: {"id", "sha",
  "siblings"}; REV a branch, a tag, refs/pr/N or a commit (URL-encoded);
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
back to its first page (Link: next to a page already seen).

push() makes a new commit on a branch (the files nginx serves for every
commit stay, as the Hub's do).  Every request's path and Authorization
header is recorded in .seen.
"""
import hashlib
import http.server
import json
import os
import ssl
import threading
import urllib.parse

import stfstest as T  # noqa: F401  (the tests' cleanup)

PAGE = 2
TOKEN = "hf_stfs_test_token"


class Repo:
    def __init__(self, rid, dataset=False, gated=False):
        self.id, self.dataset, self.gated = rid, dataset, gated
        self.refs = {}          # branch, tag or refs/pr/N -> sha
        self.commits = {}       # sha -> {path: bytes}


class Hub:
    def __init__(self, files_root, files_url, port=None, tls=None):
        """files_root: the folder nginx serves at files_url; with
        tls=(CERT, KEY), https."""
        self.root, self.files_url = files_root, files_url.rstrip("/")
        self.repos = {}
        self.seen = []
        self.tree_loop = False      # the fault: the tree's pages loop
        self.lock = threading.Lock()
        hub = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                hub._handle(self, True)

            def do_HEAD(self):
                hub._handle(self, False)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1",
                                                       port or 0), H)
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
        for path, data in base.items():
            p = os.path.join(self.root, repo.id, sha, path)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "wb") as f:
                f.write(data)
        return sha

    # ---- the API -----------------------------------------------------

    def _send(self, h, code, body=b"", headers=(), with_body=True):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            headers = list(headers) + [("Content-Type", "application/json")]
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
        if api and rest[:1] == ["revision"]:
            rev = "/".join(rest[1:])
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
        recursive = q.get("recursive", ["false"])[0] == "true"
        files = repo.commits[sha]
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
                b"blob %d\0" % len(data) + data).hexdigest(),
                "size": len(data), "path": p}
            if p.endswith(".safetensors"):
                e["lfs"] = {"oid": hashlib.sha256(data).hexdigest(),
                            "size": len(data), "pointerSize": 134}
            entries.append(e)
        if pre and not entries:
            return self._error(h, 404, "EntryNotFound",
                               "%s does not exist on \"%s\"" % (path, sha),
                               with_body)
        entries.sort(key=lambda e: e["path"])
        start = int(q.get("cursor", ["0"])[0])
        page = entries[start:start + PAGE]
        headers = []
        if start + PAGE < len(entries):
            nq = dict((k, v[0]) for k, v in q.items())
            nq["cursor"] = str(start + PAGE)
            headers.append(("Link", '<%s%s?%s>; rel="next"' % (
                self.url, u.path, urllib.parse.urlencode(nq))))
        elif self.tree_loop and start:
            # the fault: the last page links back to the first one
            nq = dict((k, v[0]) for k, v in q.items() if k != "cursor")
            headers.append(("Link", '<%s%s%s>; rel="next"' % (
                self.url, u.path, "?" + urllib.parse.urlencode(nq)
                if nq else "")))
        self._send(h, 200, page, headers, with_body)

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
        if path.endswith(".safetensors"):
            data = ("version https://git-lfs.github.com/spec/v1\n"
                    "oid sha256:%s\nsize %d\n" % (
                        hashlib.sha256(data).hexdigest(), len(data))
                    ).encode()
        self._send(h, 200, data, [("X-Repo-Commit", sha)], with_body)

    def _resolve(self, h, repo, rest, with_body):
        sha, path, data = self._file(repo, rest)
        if data is None:
            return self._error(h, 404, "EntryNotFound",
                               "Entry not found", with_body)
        etag = hashlib.sha256(data).hexdigest()
        loc = "%s/%s/%s/%s" % (self.files_url, urllib.parse.quote(repo.id),
                               sha, urllib.parse.quote(path))
        self._send(h, 302, b"", [
            ("Location", loc), ("X-Repo-Commit", sha),
            ("X-Linked-Etag", '"%s"' % etag),
            ("X-Linked-Size", str(len(data))),
            ("ETag", '"%s"' % etag)], with_body)

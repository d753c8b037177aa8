#!/usr/bin/env python3
"""test_hub.py: hf:// sources against a Hugging Face Hub emulator
(tests/servers/hubemu.py, on 127.0.0.1) whose /resolve redirects to nginx on
another address (127.0.0.2), as the Hub's do to its CDN.

- the real corpus and the real shard set pushed to repos, mounted by
  repo id, every tensor's sha256 checked; xattrs repo, revision, etag;
- the official JavaScript client (@huggingface/hub: listFiles,
  parseSafetensorsMetadata) against the emulator gets what stfs gets;
- revisions: a branch, a tag, refs/pr/N, a commit; a push during a mount
  changes nothing; folders (a diffusers layout) and what is said without
  one; datasets;
- the token: from HF_TOKEN, HUGGING_FACE_HUB_TOKEN, HF_TOKEN_PATH and
  $HF_HOME/token, sent to the Hub and never to nginx; a gated repo
  without it is refused with the Hub's reason, nothing mounted;
- the API's redirects: followed on the Hub (a renamed repo), refused to
  another origin;
- the Hugging Face cache (models--ORG--NAME): HF_HUB_OFFLINE=1 with no
  server at all, and online with the files read from disk;
- offline from stfs's own cache: a pinned repo mounted once mounts again
  with -o offline, no Hugging Face cache and not one request; its small
  files and the tensors read are there, a tensor never read is EIO at
  once, a tampered block is EIO and a tampered listing refuses the mount.
"""
import errno
import hashlib
import json
import os
import shutil
import subprocess
import sys

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402
import hubemu  # noqa: E402
from fixtures import (HUBJS, check_real_file, env, fake_cache,  # noqa: E402
                      free_port, read, refused, shard_files, stfs,
                      wait_blocks, world)

X = "user.safetensors."


def corpus():
    """(repo file name, bytes, expected tensors) of each valid real file."""
    for rel, src, info in T.real_files():
        if info["valid"] and not rel.startswith("jl-sharded/"):
            with open(src, "rb") as f:
                yield rel, f.read(), info["tensors"]


def test_real_corpus(d, mnt):
    """Every valid real file as the model.safetensors of its own repo."""
    with world(d) as w:
        n = 0
        for rel, data, want in corpus():
            rid = "org/m%d" % n
            sha_ = w.hub.push(w.hub.repo(rid), {"model.safetensors": data,
                                                "README.md": b"# model\n"})
            src = "hf://" + rid

            def has_origin(fp):
                assert os.getxattr(fp, X + "repo") == rid.encode()
                assert os.getxattr(fp, X + "revision") == sha_.encode()
                assert os.getxattr(fp, X + "etag") == \
                    hashlib.sha256(data).hexdigest().encode()
            check_real_file(src, want, mnt, has_origin)
            n += 1
        # every byte came from nginx, from the commit, with no token
        log = w.nginx_log()
        assert "/%s/" % sha_ in log and "[-]" in log
        assert "Bearer" not in log
        print("     %d real files from hf:// repos" % n)


def test_real_shards(d, mnt):
    """The real shard set, through its index; the tree API's pages."""
    with world(d) as w:
        files = shard_files()
        sha_ = w.hub.push(w.hub.repo("org/sharded"), files)
        want = {t["name"]: t for t in T.inspect_json(
            os.path.join(T.REAL, "jl-sharded"))["tensors"]}
        j = T.inspect_json("hf://org/sharded")
        assert j["sharded"] and {t["name"] for t in j["tensors"]} == \
            set(want)
        p = T.mount_fg("hf://org/sharded", mnt)
        try:
            for k, t in want.items():
                with open(os.path.join(T.REAL, "jl-sharded", t["file"]),
                          "rb") as f:
                    f.seek(t["file_offset"])
                    b = f.read(t["bytes"])
                fp = os.path.join(mnt, t["path"])
                assert read(fp) == b, k
                assert os.getxattr(fp, X + "etag") == hashlib.sha256(
                    files[t["file"]]).hexdigest().encode()
                assert os.getxattr(fp, X + "revision") == sha_.encode()
            hdr = json.loads(read(os.path.join(mnt, "%header.json")))
            assert hdr["origin"] == {"repo": "org/sharded",
                                     "revision": sha_}
            assert {k: v["etag"] for k, v in hdr["shards"].items()} == {
                k: hashlib.sha256(v).hexdigest() for k, v in files.items()
                if k.endswith(".safetensors")}
        finally:
            T.stop_fg(p, mnt)
        # more files than a page: the listing went on to the next pages
        pages = [s for s, _ in w.hub.seen if "/tree/" in s]
        assert len(pages) >= len(files) // hubemu.PAGE, pages


def test_js_client(d, mnt):
    """@huggingface/hub against the emulator gets what stfs gets."""
    node = shutil.which("node")
    mods = os.path.join(HUBJS, "node_modules", "@huggingface", "hub")
    if not node or not os.path.isdir(mods):
        if os.environ.get("CI") == "true":
            raise AssertionError("node or %s missing (npm ci in %s)" % (
                mods, HUBJS))
        print("     (node or @huggingface/hub missing: npm ci in %s)" %
              HUBJS)
        return
    with world(d) as w:
        files = shard_files()
        single = open(os.path.join(T.REAL, "jl-nonsharded",
                                   "model.safetensors"), "rb").read()
        w.hub.push(w.hub.repo("org/sharded"), dict(files, **{
            "extra/notes.txt": b"x"}))
        w.hub.push(w.hub.repo("org/single"), {"model.safetensors": single})
        for rid in ("org/sharded", "org/single"):
            r = subprocess.run([node, os.path.join(HUBJS, "check.mjs"),
                                w.hub.url, rid, "main"],
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            js = json.loads(r.stdout)
            st = T.inspect_json("hf://" + rid)
            # the files: every *.safetensors the client lists is a file
            # of stfs's, with the same size
            listed = {f["path"]: f["size"] for f in js["files"]
                      if f["path"].endswith(".safetensors")}
            assert listed == {f["file"]: f["size"] for f in st["files"]}
            # the tensors: the same dtype, shape, offsets and file
            assert {k: (v["file"], v["dtype"], v["shape"],
                        v["data_offsets"])
                    for k, v in js["tensors"].items()} == \
                {t["name"]: (t["file"], t["dtype"], t["shape"],
                             t["data_offsets"]) for t in st["tensors"]}
            assert js["sharded"] == st["sharded"]


def test_revisions(d, mnt):
    """Branches, tags, refs/pr/N and commits; a push while mounted."""
    with world(d) as w:
        a = open(os.path.join(T.REAL, "jl-nonsharded",
                              "model.safetensors"), "rb").read()
        b = open(os.path.join(T.REAL, "candle", "jfk-codes.safetensors"),
                 "rb").read()
        r = w.hub.repo("org/rev")
        s1 = w.hub.push(r, {"model.safetensors": a})
        r.refs["v1"] = s1
        s2 = w.hub.push(r, {"model.safetensors": b}, branch="refs/pr/1")
        names = lambda src: {t["name"] for t in T.inspect_json(src)[  # noqa
            "tensors"]}
        na, nb = names(os.path.join(T.REAL, "jl-nonsharded",
                                    "model.safetensors")), \
            names(os.path.join(T.REAL, "candle", "jfk-codes.safetensors"))
        for src, want in (("hf://org/rev", na), ("hf://org/rev@main", na),
                          ("hf://org/rev@v1", na), ("hf://org/rev@" + s1, na),
                          ("hf://org/rev@refs/pr/1", nb),
                          ("hf://org/rev@refs%2Fpr%2F1", nb),
                          ("hf://org/rev@" + s2, nb)):
            assert names(src) == want, src
        # a push to main while mounted changes nothing there
        p = T.mount_fg("hf://org/rev", mnt)
        try:
            t = sorted(na)[0]
            before = read(os.path.join(mnt, t))
            s3 = w.hub.push(r, {"model.safetensors": b})
            assert s3 != s1
            assert read(os.path.join(mnt, t)) == before
            assert os.getxattr(os.path.join(mnt, t), X + "revision") == \
                s1.encode()
            assert sorted(os.listdir(mnt)) == sorted(
                os.listdir(mnt))       # still there, still the same
        finally:
            T.stop_fg(p, mnt)
        assert names("hf://org/rev") == nb       # a new mount: the push
        refused("hf://org/rev@nope", mnt, "404", "Invalid rev id: nope",
                status=3)


def test_folders(d, mnt):
    """A diffusers layout: a folder mounts; the repo without one says
    which folders hold weights; datasets."""
    with world(d) as w:
        a = open(os.path.join(T.REAL, "jl-nonsharded",
                              "model.safetensors"), "rb").read()
        files = shard_files()
        layout = {"model_index.json": b"{}",
                  "unet/diffusion_pytorch_model.safetensors": a,
                  "unet/config.json": b"{}"}
        layout.update({"text_encoder/" + k: v for k, v in files.items()})
        w.hub.push(w.hub.repo("org/pipe"), layout)
        j = T.inspect_json("hf://org/pipe/unet")
        assert not j["sharded"] and j["files"][0]["file"] == \
            "diffusion_pytorch_model.safetensors"
        j = T.inspect_json("hf://org/pipe/text_encoder/")
        assert j["sharded"] and len(j["files"]) == 6
        p = T.mount_fg("hf://org/pipe/text_encoder", mnt)
        try:
            t = j["tensors"][0]
            with open(os.path.join(T.REAL, "jl-sharded", t["file"]),
                      "rb") as f:
                f.seek(t["file_offset"])
                assert read(os.path.join(mnt, t["path"])) == \
                    f.read(t["bytes"])
        finally:
            T.stop_fg(p, mnt)
        # the repo itself mounts (%repo/ shows every file), and says
        # which folders hold weights
        r = stfs("inspect", "--files", "hf://org/pipe")
        assert r.returncode == 0, r.stderr
        for w_ in ("text_encoder", "unet", "hf://org/pipe/"):
            assert w_ in r.stderr, r.stderr
        assert "unet/config.json\t2\t" in r.stdout, r.stdout
        refused("hf://org/pipe/vae", mnt, "404", status=3)
        w.hub.push(w.hub.repo("org/data", dataset=True),
                   {"model.safetensors": a})
        assert T.inspect_json("hf://datasets/org/data")["tensors"]
        # the Hub: 401 for a repository it will not say exists: 4
        refused("hf://org/data", mnt, "Repository Not Found", status=4)
        for bad in ("hf://", "hf://org", "hf://org/", "hf://../x",
                    "hf://org/na me", "hf://org/x@", "hf://org/x/../y"):
            r = stfs("inspect", bad)
            assert r.returncode == 1 and r.stderr.startswith(
                "stfs: %s: " % bad), (bad, r)


def test_token(d, mnt):
    """Where the token comes from; it goes to the Hub only; a gated repo
    without it says the Hub's reason."""
    with world(d) as w:
        a = open(os.path.join(T.REAL, "jl-nonsharded",
                              "model.safetensors"), "rb").read()
        w.hub.push(w.hub.repo("org/gated", gated=True),
                   {"model.safetensors": a})
        # exit status 4: the credentials refused (stfs(1))
        refused("hf://org/gated", mnt, "401", "GatedRepo" if False else
                "Access to model org/gated is restricted", status=4)
        with env(HF_TOKEN="hf_wrong"):
            refused("hf://org/gated", mnt, "restricted", status=4)
        tokfile = os.path.join(d, "tok")
        with open(tokfile, "w") as f:
            f.write(hubemu.TOKEN + "\n")
        os.makedirs(os.environ["HF_HOME"], exist_ok=True)
        with open(os.path.join(os.environ["HF_HOME"], "token"), "w") as f:
            f.write(hubemu.TOKEN + "\n")
        ways = [dict(HF_TOKEN=hubemu.TOKEN),
                dict(HUGGING_FACE_HUB_TOKEN=hubemu.TOKEN),
                dict(HF_TOKEN_PATH=tokfile),
                dict()]                           # $HF_HOME/token
        for way in ways:
            with env(**way):
                p = T.mount_fg("hf://org/gated", mnt)
                try:
                    names = [n for n in os.listdir(mnt) if n[0] != "%"]
                    assert names
                    read(os.path.join(mnt, names[0]))
                finally:
                    T.stop_fg(p, mnt)
        # HF_TOKEN comes before the file
        with env(HF_TOKEN="hf_wrong"):
            refused("hf://org/gated", mnt, "restricted", status=4)
        seen = [a for s, a in w.hub.seen if "/org/gated/" in s]
        assert "Bearer " + hubemu.TOKEN in seen
        assert hubemu.TOKEN not in w.nginx_log()
        assert "Bearer" not in w.nginx_log()


def test_api_redirects(d, mnt):
    """The Hub's API calls follow a redirect on the Hub itself (a renamed
    repo's; the token goes with it), and refuse one elsewhere, as a next
    page elsewhere is: the listing stays on the Hub's origin."""
    a = open(os.path.join(T.REAL, "jl-nonsharded", "model.safetensors"),
             "rb").read()
    with world(d) as w, env(HF_TOKEN=hubemu.TOKEN):
        new = w.hub.repo("org/new")
        w.hub.push(new, {"model.safetensors": a, "a.txt": b"a"})
        w.hub.repos["org/old"] = w.hub.repos["org/away"] = new
        w.hub.moved["org/old"] = w.hub.url + "/api/models/org/new"
        other = hubemu.Hub(os.path.join(d, "other"), w.ngx.url())
        try:
            other.push(other.repo("org/new"), {"model.safetensors": a,
                                               "a.txt": b"a"})
            w.hub.moved["org/away"] = other.url + "/api/models/org/new"
            p = T.mount_fg("hf://org/old", mnt)
            try:
                assert sorted(os.listdir(os.path.join(mnt, "%repo"))) == \
                    ["a.txt", "model.safetensors"]
            finally:
                T.stop_fg(p, mnt)
            moved = [a_ for s_, a_ in w.hub.seen if s_.startswith(
                "/api/models/org/new/")]
            assert moved and all(x == "Bearer " + hubemu.TOKEN
                                 for x in moved), moved
            err = refused("hf://org/away", mnt, "the Hub's API redirects "
                          "elsewhere: " + other.url + "/api/models/org/new")
            assert not other.seen, other.seen
            assert hubemu.TOKEN not in err
        finally:
            other.stop()


def test_error_text(d, mnt):
    """A server's own reason for an error (the Hub's X-Error-Message, a
    JSON {"error": ...}) reaches the output as one plain line: C1 and
    bidirectional controls and bytes of no UTF-8 sequence never raw."""
    import rawhttp
    said = []

    def answer(method, path, headers):
        if not said:
            said.append(path)
            return "404 Not Found", ["X-Error-Code: RepoNotFound",
                                     "X-Error-Message: gone\x9b[2J for "
                                     "good"], b""
        said.append(path)
        body = json.dumps({"error": "gone\u009b[2J\u202egnp.exe for "
                           "good"}).encode()
        return "404 Not Found", ["Content-Type: application/json",
                                 "Content-Length: %d" % len(body)], body
    srv = rawhttp.RawServer(answer)
    try:
        with env(HF_ENDPOINT="http://127.0.0.1:%d" % srv.port,
                 HF_TOKEN=None, HF_HUB_OFFLINE=None,
                 HF_HOME=os.path.join(d, "hf")):
            for _ in range(2):
                r = subprocess.run([T.STFS, "inspect", "hf://org/x"],
                                   capture_output=True)
                assert r.returncode == 1, r
                err = r.stderr
                for raw in (b"\x9b", b"\x1b", b"\x07",
                            "\u009b".encode(), "\u202e".encode()):
                    assert raw not in err, (raw, err)
                assert b"gone" in err and b"for good" in err, err
    finally:
        srv.stop()


def test_hf_cache(d, mnt):
    """The Hugging Face cache: offline with no server, and online with
    the files read from disk, not fetched."""
    hub_cache = os.path.join(d, "hub-cache")
    files = shard_files()
    sha_ = fake_cache(hub_cache, "org/cached", files)
    want = {t["name"]: t for t in T.inspect_json(
        os.path.join(T.REAL, "jl-sharded"))["tensors"]}
    dead = "http://127.0.0.1:%d" % free_port()
    with env(HF_HUB_CACHE=hub_cache, HF_HUB_OFFLINE="1", HF_ENDPOINT=dead,
             XDG_CACHE_HOME=os.path.join(d, "xdg")):
        j = T.inspect_json("hf://org/cached")
        assert {t["name"] for t in j["tensors"]} == set(want)
        p = T.mount_fg("hf://org/cached", mnt)
        try:
            for k, t in want.items():
                fp = os.path.join(mnt, t["path"])
                with open(os.path.join(T.REAL, "jl-sharded", t["file"]),
                          "rb") as f:
                    f.seek(t["file_offset"])
                    assert read(fp) == f.read(t["bytes"]), k
                assert os.getxattr(fp, X + "revision") == sha_.encode()
                assert os.getxattr(fp, X + "etag") == hashlib.sha256(
                    files[t["file"]]).hexdigest().encode()
        finally:
            T.stop_fg(p, mnt)
        assert T.inspect_json("hf://org/cached@" + sha_)["tensors"]
        refused("hf://org/cached@v2", mnt, "offline", "refs/v2", status=3)
        refused("hf://org/other", mnt, "offline", status=3)
    # online: the revision from the Hub, the bytes from the cache
    with world(d) as w:
        r = w.hub.repo("org/cached")
        online_sha = w.hub.push(r, files)
        fake_cache(hub_cache, "org/cached", {})     # no files there...
        top = os.path.join(hub_cache, "models--org--cached", "snapshots")
        os.rename(os.path.join(top, sha_), os.path.join(top, online_sha))
        with env(HF_HUB_CACHE=hub_cache):
            p = T.mount_fg("hf://org/cached", mnt)
            try:
                for k, t in want.items():
                    read(os.path.join(mnt, t["path"]))
            finally:
                T.stop_fg(p, mnt)
        assert ".safetensors" not in w.nginx_log(), w.nginx_log()


def read_direct(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        out, off = [], 0
        while True:
            b = os.pread(fd, 1 << 20, off)
            if not b:
                return b"".join(out)
            out.append(b)
            off += len(b)
    finally:
        os.close(fd)


def test_offline_own_cache(d, mnt):
    """-o offline from stfs's own cache alone (issue 42)."""
    MiB = 1 << 20
    # tensor 3 lies past what reading 0 and 1 fetches ahead (32 MiB)
    tensors = [("layers.%d.w" % i, "U8", [n * MiB], os.urandom(n * MiB))
               for i, n in enumerate((1, 1, 40, 1))]
    path = T.write_st(os.path.join(d, "m.safetensors"), tensors)
    model = open(path, "rb").read()
    cfg, readme = b'{"model_type": "x"}\n', b"# own\n"
    empty = os.path.join(d, "no-hf-cache")
    os.mkdir(empty)
    cache = os.path.join(d, "own-cache")
    with world(d) as w, env(HF_HUB_CACHE=empty):
        sha_ = w.hub.push(w.hub.repo("org/own"), {
            "model.safetensors": model, "config.json": cfg,
            "README.md": readme})
        src = "hf://org/own@" + sha_
        p = T.mount_fg(src, mnt, "-o", "cache=" + cache)
        try:
            for i in (0, 1):
                assert read_direct(os.path.join(mnt, "layers/%d/w" % i)) \
                    == tensors[i][3], i
            assert read(os.path.join(mnt, "%repo/config.json")) == cfg
            wait_blocks(cache, 1)           # block 0: tensors 0 and 1
        finally:
            T.stop_fg(p, mnt)
        hub_n, cdn = len(w.hub.seen), w.nginx_log()
        p = T.mount_fg(src, mnt, "-o", "offline,cache=" + cache)
        try:
            for i in (0, 1):
                assert read_direct(os.path.join(mnt, "layers/%d/w" % i)) \
                    == tensors[i][3], i
            assert read(os.path.join(mnt, "%repo/config.json")) == cfg
            assert read(os.path.join(mnt, "%repo/README.md")) == readme
            T.expect_errno(os.path.join(mnt, "layers/3/w"), errno.EIO, 1)
        finally:
            T.stop_fg(p, mnt)
        assert len(w.hub.seen) == hub_n and w.nginx_log() == cdn, \
            "requests made offline"
        # a tampered block: EIO; a tampered listing: the mount refused
        files = [os.path.join(r, f) for r, _, fs in os.walk(cache)
                 for f in fs]
        blocks = [f for f in files if os.path.basename(f) == "0" and
                  os.path.getsize(f) == 4 * MiB + 4096]
        assert len(blocks) == 1, files
        with open(blocks[0], "r+b") as f:
            f.seek(4096 + MiB // 2)        # in tensor 0
            c = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([c[0] ^ 1]))
        p = T.mount_fg(src, mnt, "-o", "offline,cache=" + cache)
        try:
            T.expect_errno(os.path.join(mnt, "layers/0/w"), errno.EIO, 1)
            assert read_direct(os.path.join(mnt, "layers/1/w")) == \
                tensors[1][3]
        finally:
            T.stop_fg(p, mnt)
        docs = [f for f in files if os.path.basename(f) == "doc"]
        assert len(docs) >= 2, files        # the revision, the tree
        for doc in docs:
            with open(doc, "r+b") as f:
                f.seek(4096 + 3)
                c = f.read(1)
                f.seek(-1, 1)
                f.write(bytes([c[0] ^ 1]))
        r = subprocess.run([T.STFS, "mount", "-o", "offline,cache=" + cache,
                            src, mnt], capture_output=True, timeout=60)
        assert r.returncode == 3 and b"offline" in r.stderr, r
        assert not T.is_mount(mnt)
        assert len(w.hub.seen) == hub_n and w.nginx_log() == cdn


def test_content_keys(d, mnt):
    """Blocks are kept by content: commit 2 of a repo whose 4 shards
    differ from commit 1's in one shard, mounted with commit 1's cache,
    asks the CDN for that shard's bytes, and of the others only the first
    64 KiB the open of an object asks (its size and version); every byte
    is commit 2's (issue 42)."""
    import re
    MiB = 1 << 20
    shard = {}
    for i in range(4):
        t = [("layers.%d.w" % i, "U8", [8 * MiB], os.urandom(8 * MiB))]
        shard["model-%05d-of-00004.safetensors" % (i + 1)] = (t, open(
            T.write_st(os.path.join(d, "s%d" % i), t), "rb").read())
    new_t = [("layers.2.w", "U8", [8 * MiB], os.urandom(8 * MiB))]
    new = open(T.write_st(os.path.join(d, "new"), new_t), "rb").read()
    changed = "model-00003-of-00004.safetensors"
    cache = os.path.join(d, "ck-cache")

    def read_all(want):
        for i, t in enumerate(want):
            assert read_direct(os.path.join(mnt, "layers/%d/w" % i)) == \
                t, i

    with world(d) as w:
        r = w.hub.repo("org/ck")
        s1 = w.hub.push(r, {n: b for n, (_, b) in shard.items()})
        s2 = w.hub.push(r, {changed: new})
        p = T.mount_fg("hf://org/ck@" + s1, mnt, "-o", "cache=" + cache)
        try:
            read_all([t[0][3] for t, _ in shard.values()])
            wait_blocks(cache, 12)          # 3 blocks of each shard
        finally:
            T.stop_fg(p, mnt)
        before = len(w.nginx_log().splitlines())
        p = T.mount_fg("hf://org/ck@" + s2, mnt, "-o", "cache=" + cache)
        try:
            want = [t[0][3] for t, _ in shard.values()]
            want[2] = new_t[0][3]
            read_all(want)
        finally:
            T.stop_fg(p, mnt)
        asked = {}
        for line in w.nginx_log().splitlines()[before:]:
            m = re.search(r"/([^/ ]+\.safetensors) \d+ bytes=(\d+)-(\d+)",
                          line)
            if m:
                asked[m.group(1)] = asked.get(m.group(1), 0) + \
                    int(m.group(3)) - int(m.group(2)) + 1
        total = sum(asked.values())
        print("     commit 2: %.3fx the changed shard fetched (%s)" %
              (total / len(new), asked))
        assert asked.get(changed, 0) >= len(new) - 65536, asked
        assert all(v <= 65536 for k, v in asked.items() if k != changed), \
            asked
        assert total <= 1.05 * len(new), asked


def run():
    return T.run_tests([
        test_real_corpus,
        test_real_shards,
        test_js_client,
        test_revisions,
        test_folders,
        test_token,
        test_api_redirects,
        test_error_text,
        test_hf_cache,
        test_offline_own_cache,
        test_content_keys,
    ])


if __name__ == "__main__":
    sys.exit(run())

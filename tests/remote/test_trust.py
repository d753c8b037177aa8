#!/usr/bin/env python3
"""test_trust.py: what a careless user or a hostile server must not get
out of stfs (issue 26), against real servers started here: nginx, the Hub
emulator (hubemu.py), a looping S3 lister (s3server.py) and small
raw-socket servers of this file's own; mounts read through the kernel.

- secrets: a URL's password and a presigned URL's query are gone from the
  command line of every stfs process (the one mounting, while it talks to
  the server, and the daemon), from /proc/mounts, xattrs, the log and the
  messages; so are HF_TOKEN and AWS keys;
- offline (HF_HUB_OFFLINE=1, -o offline) with a snapshot link whose blob
  is missing: no request at all, an error naming the file;
- listings that loop (a Hub Link: next back to a page seen, an S3
  continuation token repeated) stop at the first repeat; ones that never
  end (a new cursor or token each page) stop at list_timeout=;
- names with control characters from a server are escaped in messages
  and logs;
- stfs umount unmounts only stfs mounts (a tmpfs and a plain directory
  are refused);
- cache= empty, a regular file or on a read-only file system: refused at
  mount;
- URL schemes in any case; revisions that climb out of the Hugging Face
  cache are refused;
- AWS credentials and profiles resolved as the aws CLI resolves them.
"""
import errno
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402
import hubemu  # noqa: E402
import s3server  # noqa: E402
from fixtures import env, world, fake_cache, refused  # noqa: E402
from fixtures import Nginx, free_port, read, shard_files, signed  # noqa

X = "user.safetensors."


def stfs(*args, **kw):
    return subprocess.run([T.STFS] + list(args), capture_output=True,
                          timeout=120, text=True, **kw)


def small_model(path, seed=0):
    data = bytes((i * 7 + seed) % 251 for i in range(4096))
    T.write_st(path, [("a.w", "U8", [4096], data)])
    return data


# ---- schemes and revisions ------------------------------------------------

def test_scheme_case(d, mnt):
    """HTTP://, Hf:// and S3:// are URLs, never local paths; a password in
    an upper-case URL is never shown."""
    data = os.path.join(d, "data")
    os.makedirs(os.path.join(data, "bucket"))
    want = small_model(os.path.join(data, "m.safetensors"))
    shutil.copy(os.path.join(data, "m.safetensors"),
                os.path.join(data, "bucket", "m.safetensors"))
    ngx = Nginx(os.path.join(d, "ngx0"), data)
    try:
        url = ngx.url("m.safetensors").replace("http://", "HTTP://")
        p = T.mount_fg(url, mnt)
        try:
            assert read(os.path.join(mnt, "a", "w")) == want
            assert os.getxattr(os.path.join(mnt, "a", "w"),
                               X + "url").startswith(b"http://127.0.0.1")
        finally:
            T.stop_fg(p, mnt)
        dead = "HtTpS://user:sekrit-pw@127.0.0.1:%d/x.safetensors" % \
            free_port()
        for cmd in (["inspect", dead], ["mount", dead, mnt]):
            r = stfs(*cmd)
            # the mount: 5, the origin not reached (stfs(1))
            assert r.returncode == (5 if cmd[0] == "mount" else 1) and \
                "sekrit" not in r.stderr, r
            assert "Couldn't connect" in r.stderr, r.stderr
            assert "No such file" not in r.stderr, r.stderr
        with env(AWS_ENDPOINT_URL=ngx.url("").rstrip("/").upper(),
                 AWS_ACCESS_KEY_ID=None, AWS_SECRET_ACCESS_KEY=None,
                 AWS_PROFILE=None, AWS_CONFIG_FILE=os.path.join(d, "no"),
                 AWS_SHARED_CREDENTIALS_FILE=os.path.join(d, "no")):
            j = T.inspect_json("S3://bucket/m.safetensors")
            assert [t["name"] for t in j["tensors"]] == ["a.w"]
    finally:
        ngx.stop()
    with world(d) as w:
        with open(os.path.join(data, "m.safetensors"), "rb") as f:
            w.hub.push(w.hub.repo("org/up"), {"model.safetensors": f.read()})
        j = T.inspect_json("Hf://org/up")
        assert [t["name"] for t in j["tensors"]] == ["a.w"]


def test_revision_outside_cache(d, mnt):
    """A revision like ..%2F..%2FFILE would read FILE outside the cache's
    refs/ (and mount the commit it names): refused, offline and online,
    before any request."""
    hub_cache = os.path.join(d, "hub-cache")
    model = os.path.join(d, "m.safetensors")
    small_model(model)
    with open(model, "rb") as f:
        files = {"model.safetensors": f.read()}
    sha_ = fake_cache(hub_cache, "org/m", files)
    # planted outside the repo's folder: a ref naming the cached commit
    with open(os.path.join(hub_cache, "planted"), "w") as f:
        f.write(sha_)
    dead = "http://127.0.0.1:%d" % free_port()
    bad = ["..%2F..%2Fplanted", "../../planted", "%2E%2E%2Fplanted",
           "%2Fetc%2Fpasswd", "main%0Aevil", "a@{1}", "x.lock", ".hidden"]
    with env(HF_HUB_CACHE=hub_cache, HF_HUB_OFFLINE="1", HF_ENDPOINT=dead,
             XDG_CACHE_HOME=os.path.join(d, "xdg")):
        assert T.inspect_json("hf://org/m")["tensors"]      # the control
        for rev in bad:
            err = refused("hf://org/m@" + rev, mnt, "not a valid revision")
            assert "\n" not in err.rstrip("\n"), err
        # a commit and refs/pr/N stay valid revisions
        assert T.inspect_json("hf://org/m@" + sha_)["tensors"]
        refused("hf://org/m@refs%2Fpr%2F1", mnt, "offline", "refs/pr/1",
                status=3)
    with world(d) as w:
        w.hub.push(w.hub.repo("org/m"), files)
        for rev in bad:
            n = len(w.hub.seen)
            refused("hf://org/m@" + rev, mnt, "not a valid revision")
            assert len(w.hub.seen) == n, w.hub.seen[n:]


# ---- stfs umount -----------------------------------------------------------

def test_umount_only_stfs(d, mnt):
    """stfs umount refuses a tmpfs (which fusermount3 would unmount as
    root) and a plain directory; it unmounts an stfs mount by a path
    through a symlink, and a dead one (its daemon killed)."""
    model = os.path.join(d, "m.safetensors")
    small_model(model)
    plain = os.path.join(d, "plain")
    os.mkdir(plain)
    r = stfs("umount", plain)
    assert r.returncode == 1, r
    assert r.stderr == "stfs: %s: not an stfs mount\n" % plain, r.stderr
    tm = os.path.join(d, "tm")
    os.mkdir(tm)
    if os.geteuid() == 0:
        subprocess.run(["mount", "-t", "tmpfs", "stfs-test", tm],
                       check=True)
        try:
            with open(os.path.join(tm, "keep"), "w") as f:
                f.write("x")
            for args in (["umount", tm], ["umount", "-z", tm]):
                r = stfs(*args)
                assert r.returncode == 1, r
                assert r.stderr == "stfs: %s: not an stfs mount\n" % tm, \
                    r.stderr
                assert T.is_mount(tm) and os.path.exists(
                    os.path.join(tm, "keep"))
        finally:
            subprocess.run(["umount", tm], check=True)
    else:
        print("     (not root: the tmpfs case needs mount(8))")
    # an stfs mount, through a symlink to it
    link = os.path.join(d, "link")
    os.symlink(mnt, link)
    r = stfs("mount", model, mnt)
    assert r.returncode == 0, r
    T._mounts.append(mnt)
    r = stfs("umount", link)
    assert r.returncode == 0, r
    assert not T.is_mount(mnt)
    assert T.wait_gone(mnt)
    # a dead one: its daemon killed
    r = stfs("mount", model, mnt)
    assert r.returncode == 0, r
    T._mounts.append(mnt)
    for pid in T.daemons_for(mnt):
        os.kill(pid, 9)
    assert T.wait_gone(mnt)
    try:
        os.stat(mnt)
    except OSError as e:
        # ENOTCONN; ECONNABORTED when the kernel ends the connection
        # while this request is already queued (its daemon's exit and
        # the release of /dev/fuse race with it)
        assert e.errno in (errno.ENOTCONN, errno.ECONNABORTED), e
    r = stfs("umount", mnt)
    assert r.returncode == 0, r
    assert not T.is_mount(mnt)


# ---- the cache directory ----------------------------------------------------

def test_cache_unusable(d, mnt):
    """cache= (empty), a regular file, a folder on a read-only file
    system: errors at mount, nothing mounted, no request made."""
    data = os.path.join(d, "data")
    os.mkdir(data)
    want = small_model(os.path.join(data, "m.safetensors"))
    afile = os.path.join(d, "afile")
    with open(afile, "w") as f:
        f.write("x")
    ro = os.path.join(d, "ro")
    os.mkdir(ro)
    ngx = Nginx(os.path.join(d, "ngx"), data)
    url = ngx.url("m.safetensors")
    cases = [("cache=", "cache=: give a directory"),
             ("cache=" + afile, "Not a directory"),
             ("cache=" + afile + "/sub", "Not a directory")]
    mounted = False
    if os.geteuid() == 0:
        # private (0700, as a cache must be: test_cachedir), read-only
        subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,mode=0700",
                        "stfs-ro", ro], check=True)
        mounted = True
        cases += [("cache=" + ro, "Read-only file system"),
                  ("cache=" + ro + "/not/yet", "Read-only file system")]
    try:
        for opt, msg in cases:
            r = stfs("mount", "-o", opt, url, mnt, cwd=d)
            assert r.returncode != 0, (opt, r)
            assert r.stderr.startswith("stfs: %s: " % url) and \
                msg in r.stderr, (opt, r.stderr)
            assert not T.is_mount(mnt) and not T.daemons_for(mnt)
        assert ngx.ranges() == [], ngx.ranges()
        assert not os.path.exists(os.path.join(d, "stfs"))
        # offline only reads the cache: a read-only one is fine then
        if mounted:
            r = stfs("mount", "-o", "offline,cache=" + ro, url, mnt)
            assert r.returncode == 3 and "not in the cache" in r.stderr, r
        # the control: a cache that can be written
        p = T.mount_fg(url, mnt, "-o", "cache=" + os.path.join(d, "c"))
        try:
            assert read(os.path.join(mnt, "a", "w")) == want
        finally:
            T.stop_fg(p, mnt)
    finally:
        if mounted:
            subprocess.run(["umount", ro], check=True)
        ngx.stop()


# ---- listings that loop -----------------------------------------------------

def test_listing_loops(d, mnt):
    """A Hub tree whose last page links back to its first, an S3 listing
    that repeats its continuation token: stopped at the first repeat,
    with a message that says so; a listing that never ends stops at
    10,000 pages."""
    model = os.path.join(d, "m.safetensors")
    small_model(model)
    with open(model, "rb") as f:
        files = {"model.safetensors": f.read(), "a.txt": b"a",
                 "b.txt": b"b", "c.txt": b"c"}
    with world(d) as w:
        w.hub.push(w.hub.repo("org/loop"), files)
        assert T.inspect_json("hf://org/loop")["tensors"]    # the control
        w.hub.tree_loop = True
        n = len(w.hub.seen)
        t = time.time()
        err = refused("hf://org/loop", mnt, "the Hub's file list loops",
                      "page 2 links back to a page already listed")
        assert time.time() - t < 10
        trees = [s for s, _ in w.hub.seen[n:] if "/tree/" in s]
        assert len(trees) == 2, w.hub.seen[n:]
        assert "\x1b" not in err
    lister = s3server.Lister(loop=True)
    try:
        with env(AWS_ENDPOINT_URL=lister.url, AWS_ACCESS_KEY_ID=None,
                 AWS_SECRET_ACCESS_KEY=None, AWS_PROFILE=None,
                 AWS_CONFIG_FILE=os.path.join(d, "no"),
                 AWS_SHARED_CREDENTIALS_FILE=os.path.join(d, "no")):
            refused("s3://b/p/", mnt, "the bucket's listing loops",
                    "page 2 gives a continuation token already used",
                    "(again)")
            assert len(lister.seen) == 2, lister.seen
            assert lister.seen[1]["continuation-token"] == ["again"]
            # tokens that never repeat: the bound
            lister.loop, lister.seen = False, []
            t = time.time()
            refused("s3://b/p/", mnt, "the bucket's listing goes on past "
                    "10000 pages")
            assert len(lister.seen) == 10000, len(lister.seen)
            print("     10,000 pages listed and refused in %.1f s" %
                  (time.time() - t))
    finally:
        lister.stop()


def test_listing_deadline(d, mnt):
    """A listing whose pages never end (a new cursor, a new token each
    time) is refused at its deadline, list_timeout= seconds after its
    first page, with a message naming it: from the Hub and from S3."""
    model = os.path.join(d, "m.safetensors")
    small_model(model)
    with open(model, "rb") as f:
        files = {"model.safetensors": f.read(), "a.txt": b"a"}
    with world(d) as w:
        w.hub.push(w.hub.repo("org/endless"), files)
        w.hub.tree_endless = True
        t = time.time()
        r = stfs("mount", "-o", "list_timeout=1", "hf://org/endless", mnt)
        assert r.returncode == 1 and "the Hub's file list goes on past " \
            "list_timeout=1 (seconds; " in r.stderr, r
        assert not T.is_mount(mnt)
        assert time.time() - t < 8, time.time() - t
        assert len([s for s, _ in w.hub.seen if "/tree/" in s]) > 2
    lister = s3server.Lister(loop=False)
    try:
        with env(AWS_ENDPOINT_URL=lister.url, AWS_ACCESS_KEY_ID=None,
                 AWS_SECRET_ACCESS_KEY=None, AWS_PROFILE=None,
                 AWS_CONFIG_FILE=os.path.join(d, "no"),
                 AWS_SHARED_CREDENTIALS_FILE=os.path.join(d, "no")):
            t = time.time()
            r = stfs("mount", "-o", "list_timeout=1", "s3://b/p/", mnt)
            assert r.returncode == 1 and "the bucket's listing goes on " \
                "past list_timeout=1 (seconds; " in r.stderr, r
            assert not T.is_mount(mnt)
            assert time.time() - t < 8, time.time() - t
            assert 2 < len(lister.seen) < 10000, len(lister.seen)
    finally:
        lister.stop()


# ---- offline ----------------------------------------------------------------

def test_offline_missing_blob(d, mnt):
    """HF_HUB_OFFLINE=1 or -o offline, with a snapshot link whose blob is
    gone (an interrupted download): refused naming the file, and not one
    request to the Hub (which is up, with the repo, and logs every
    request) or to the file server, token or not."""
    hub_cache = os.path.join(d, "hub-cache")
    files = shard_files()
    sha_ = fake_cache(hub_cache, "org/gap", files)
    shard = sorted(n for n in files if n.endswith(".safetensors"))[-1]
    top = os.path.join(hub_cache, "models--org--gap")
    os.unlink(os.path.join(top, "blobs",
                           hashlib.sha256(files[shard]).hexdigest()))
    with world(d) as w:
        w.hub.push(w.hub.repo("org/gap"), files)
        with env(HF_HUB_CACHE=hub_cache, HF_TOKEN=hubemu.TOKEN):
            for how, opts in (("HF_HUB_OFFLINE", []),
                              ("-o offline", ["-o", "offline"])):
                with env(HF_HUB_OFFLINE="1" if opts == [] else None):
                    r = stfs("mount", *opts, "hf://org/gap", mnt)
                    assert r.returncode == 3, (how, r)       # not found
                    assert "offline, and the blob of %s is missing" % \
                        shard in r.stderr, (how, r.stderr)
                    assert sha_ in r.stderr, r.stderr
                    assert not T.is_mount(mnt)
                    args = ["inspect", "hf://org/gap"] + (
                        ["--offline"] if opts else [])
                    r = stfs(*args)
                    assert r.returncode == 1 and shard in r.stderr, r
            assert w.hub.seen == [], w.hub.seen
            assert w.nginx_log() == "", w.nginx_log()
            # online, the same cache: the missing file comes from the Hub
            p = T.mount_fg("hf://org/gap", mnt)
            try:
                j = T.inspect_json(os.path.join(T.REAL, "jl-sharded"))
                for t in j["tensors"]:
                    if t["file"] == shard:
                        with open(os.path.join(T.REAL, "jl-sharded",
                                               shard), "rb") as f:
                            f.seek(t["file_offset"])
                            assert read(os.path.join(mnt, t["path"])) \
                                == f.read(t["bytes"])
            finally:
                T.stop_fg(p, mnt)
            assert shard in w.nginx_log()


# ---- secrets ----------------------------------------------------------------

class Snooper:
    """A raw-socket TCP proxy in front of a server.  At each connection it
    first records the command line of every stfs process (what any
    user's ps reads), then relays the bytes.  down=True: connections are
    closed at once (the server is gone; set_down())."""

    def __init__(self, port):
        self.upstream, self.cmdlines, self.down = port, [], False
        self.live = []
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.sock.listen(64)
        self.url = "http://127.0.0.1:%d/" % self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.cmdlines.extend(stfs_cmdlines())
            if self.down:
                c.close()
                continue
            u = socket.create_connection(("127.0.0.1", self.upstream))
            self.live += [c, u]
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pipe, args=(a, b),
                                 daemon=True).start()

    @staticmethod
    def _pipe(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def set_down(self, down):
        """down: live connections cut, new ones closed at once."""
        self.down = down
        if down:
            for c in self.live:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.live = []

    def close(self):
        self.set_down(True)
        self.sock.close()


def stfs_cmdlines():
    """(pid, command line bytes) of every process running stfs."""
    exe = os.path.realpath(T.STFS)
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.path.realpath("/proc/%s/exe" % pid) != exe:
                continue
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                out.append((int(pid), f.read()))
        except OSError:
            continue
    return out


def everything_shown(mnt, log, outputs):
    """All that stfs shows of a mount: the command lines of its
    processes (and ps), the mount table, every xattr and the header
    file, the log, and what it printed."""
    parts = [c for _, c in stfs_cmdlines()]
    parts.append(subprocess.run(["ps", "-eo", "args"], capture_output=True
                                ).stdout)
    for name in ("/proc/mounts", "/proc/self/mountinfo"):
        with open(name, "rb") as f:
            parts.append(f.read())
    for top, dirs, files in os.walk(mnt):
        for n in dirs + files:
            p = os.path.join(top, n)
            for x in os.listxattr(p):
                parts.append(os.getxattr(p, x))
    with open(os.path.join(mnt, "%header.json"), "rb") as f:
        parts.append(f.read())
    if log and os.path.exists(log):
        with open(log, "rb") as f:
            parts.append(f.read())
    parts.extend(o.encode() if isinstance(o, str) else o for o in outputs)
    return b"\n".join(parts)


def two_blocks(path):
    """Two 1 MiB tensors: with block_size=64K and nocache, reading the
    second one takes requests after the mount."""
    a, b = os.urandom(1 << 20), os.urandom(1 << 20)
    T.write_st(path, [("a", "U8", [1 << 20], a), ("b", "U8", [1 << 20], b)])
    return a, b


def secret_mount(url, mnt, d, secrets, snoop=None):
    """Mount url in the background with a log, read through it, and find
    none of secrets anywhere stfs shows things: the processes' command
    lines while they talked to the server (snoop) and after, the mount
    table, xattrs, the log, messages."""
    log = os.path.join(d, "stfs.log")
    if os.path.exists(log):
        os.unlink(log)
    r = stfs("mount", "-o", "log=%s,nocache,block_size=64K,retries=0" % log,
             url, mnt)
    T._mounts.append(mnt)
    outputs = [r.stdout, r.stderr]
    assert r.returncode == 0, r
    try:
        daemons = T.daemons_for(mnt)
        assert len(daemons) == 1, daemons
        with open("/proc/%d/cmdline" % daemons[0], "rb") as f:
            daemon_cmd = f.read()
        assert b"stfs" in daemon_cmd
        if snoop:
            snoop.set_down(True)
            try:
                read(os.path.join(mnt, "b"))
                raise AssertionError("read with the server down")
            except OSError:
                pass
            snoop.set_down(False)
        got = read(os.path.join(mnt, "a"))
        shown = everything_shown(mnt, log, outputs)
    finally:
        T.unmount(mnt)
        assert T.wait_gone(mnt)
    with open(log, "rb") as f:
        shown += f.read()
    if snoop:
        pids = {p for p, _ in snoop.cmdlines}
        assert len(pids) >= 2, snoop.cmdlines    # the parent, the daemon
        shown += b"\n".join(c for _, c in snoop.cmdlines)
    for s in secrets:
        assert s.encode() not in shown, (s, shown[:2000])
    return got, shown, daemon_cmd


def test_no_secret_shown(d, mnt):
    """A URL's password and a presigned URL's query, HF_TOKEN, AWS keys
    and session token: in no command line (the mounting process while it
    talks to the server, the daemon after), not in /proc/mounts, xattrs,
    %header.json, the log (with a failed read logged) or messages."""
    data = os.path.join(d, "data")
    os.makedirs(os.path.join(data, "bucket"))
    a, _ = two_blocks(os.path.join(data, "m.safetensors"))
    shutil.copy(os.path.join(data, "m.safetensors"),
                os.path.join(data, "bucket", "m.safetensors"))
    htpasswd = os.path.join(d, "htpasswd")
    h = subprocess.run(["openssl", "passwd", "-apr1", "Pa55-w0rd-xyz"],
                       capture_output=True, check=True).stdout.decode()
    with open(htpasswd, "w") as f:
        f.write("alice:" + h)
    ngx = Nginx(os.path.join(d, "ngx0"), data, extra="""
    location /private/ { alias %s/; auth_basic stfs;
                         auth_basic_user_file %s; }
    location /signed/ {
      alias %s/;
      secure_link $arg_md5,$arg_expires;
      secure_link_md5 "$secure_link_expires$uri stfs-secret";
      if ($secure_link = "") { return 403; }
      if ($secure_link = "0") { return 403; }
    }
""" % (data, htpasswd, data))
    snoop = Snooper(ngx.port)
    try:
        with env(HOME=d):
            # a password in the URL
            url = snoop.url.replace("http://", "http://alice:Pa55-w0rd-xyz@"
                                    ) + "private/m.safetensors"
            got, shown, cmd = secret_mount(url, mnt, d, ["Pa55-w0rd-xyz"],
                                           snoop)
            assert got == a
            assert b"\0http://127.0.0.1:%d/private/m.safetensors\0" % \
                snoop.port in cmd, cmd
            assert b": bytes " in shown, "the failed read was not logged"
            # a presigned URL: its query
            path = "/signed/m.safetensors"
            url = signed(snoop.url + path[1:], path, int(time.time()) + 600)
            query = url.split("?", 1)[1]
            snoop.cmdlines = []
            got, shown, cmd = secret_mount(
                url, mnt, d, [query, query.split("&")[0]], snoop)
            assert got == a
            assert b"\0http://127.0.0.1:%d/signed/m.safetensors\0" % \
                snoop.port in cmd, cmd
        # AWS keys and a session token (nginx, a public bucket, ignores
        # the signature)
        with env(AWS_ENDPOINT_URL=ngx.url("").rstrip("/"),
                 AWS_ACCESS_KEY_ID="AKIDSTFSTEST",
                 AWS_SECRET_ACCESS_KEY="aws-secret-key-xyz",
                 AWS_SESSION_TOKEN="aws-session-token-xyz",
                 AWS_PROFILE=None, AWS_CONFIG_FILE=os.path.join(d, "no"),
                 AWS_SHARED_CREDENTIALS_FILE=os.path.join(d, "no")):
            got, _, _ = secret_mount("s3://bucket/m.safetensors", mnt, d,
                                     ["aws-secret-key-xyz",
                                      "aws-session-token-xyz",
                                      "AKIDSTFSTEST"])
            assert got == a
    finally:
        snoop.close()
        ngx.stop()
    # HF_TOKEN, to a gated repo
    with world(d) as w:
        with open(os.path.join(data, "m.safetensors"), "rb") as f:
            w.hub.push(w.hub.repo("org/gated", gated=True),
                       {"model.safetensors": f.read()})
        with env(HF_TOKEN=hubemu.TOKEN):
            got, _, _ = secret_mount("hf://org/gated", mnt, d,
                                     [hubemu.TOKEN])
            assert got == a
        assert ("/api/models/org/gated/revision/main",
                "Bearer " + hubemu.TOKEN) in w.hub.seen


# ---- names with control characters ------------------------------------------

def no_control(text):
    """One line per message; no control byte (ESC, BEL, a newline in a
    name) reaches the terminal."""
    for line in text.split("\n"):
        assert not any(ord(c) < 0x20 or ord(c) == 0x7f for c in line), \
            repr(text)


def test_names_escaped(d, mnt):
    """File names from a server with ESC, BEL and a newline in them are
    escaped in every message, log line and listing."""
    model = os.path.join(d, "m.safetensors")
    small_model(model)
    with open(model, "rb") as f:
        mbytes = f.read()
    esc, bel, nl = "a\x1b[31m", "b\x07", "c\nd"
    with world(d) as w:
        # two indexes: "several index files, give one of them"
        w.hub.push(w.hub.repo("org/idx"), {
            esc + ".safetensors.index.json": b"{}",
            bel + ".safetensors.index.json": b"{}"})
        err = refused("hf://org/idx", mnt, "several index files",
                      "a\\x1b[31m.safetensors.index.json",
                      "b\\x07.safetensors.index.json")
        no_control(err)
        # weights only in folders whose names are hostile: the repo
        # mounts (its %repo/, the hostile paths left out) and the warning
        # names the folders, escaped
        w.hub.push(w.hub.repo("org/dirs"), {
            esc + "/model.safetensors": mbytes,
            nl + "/model.safetensors": mbytes})
        r = stfs("mount", "hf://org/dirs", mnt)
        T._mounts.append(mnt)
        try:
            assert r.returncode == 0, r
            for want in ("these folders hold weights", "a\\x1b[31m",
                         "c\\x0ad", "a control byte in a name"):
                assert want in r.stderr, r.stderr
            no_control(r.stderr)
            assert os.listdir(os.path.join(mnt, "%repo")) == [], \
                os.listdir(os.path.join(mnt, "%repo"))
        finally:
            T.unmount(mnt)
            assert T.wait_gone(mnt)
    # an index whose shard names are hostile, on nginx
    data = os.path.join(d, "data")
    os.mkdir(data)
    a, b = bytes(range(256)) * 4, bytes(reversed(range(256))) * 4
    s1, s2 = esc + ".safetensors", nl + bel + ".safetensors"
    T.write_st(os.path.join(data, s1), [("x.a", "U8", [1024], a)])
    T.write_st(os.path.join(data, s2), [("x.b", "U8", [1024], b)])
    with open(os.path.join(data, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": {"x.a": s1, "x.b": s2}},
                  f)
    ngx = Nginx(os.path.join(d, "ngx0"), data)
    try:
        url = ngx.url("")
        r = stfs("inspect", url)
        assert r.returncode == 0, r
        no_control(r.stdout + r.stderr)
        assert "a\\x1b[31m.safetensors" in r.stdout, r.stdout
        assert "c\\x0adb\\x07.safetensors" in r.stdout, r.stdout
        log = os.path.join(d, "stfs.log")
        r = stfs("mount", "-o", "log=" + log, url, mnt)
        T._mounts.append(mnt)
        assert r.returncode == 0, r
        try:
            assert read(os.path.join(mnt, "x", "a")) == a
            assert read(os.path.join(mnt, "x", "b")) == b
        finally:
            T.unmount(mnt)
            assert T.wait_gone(mnt)
        os.unlink(os.path.join(data, s2))
        err = refused(url, mnt, "shard c\\x0adb\\x07.safetensors: "
                      "HTTP 404", status=3)
        no_control(err)
        with open(log) as f:
            no_control(f.read())
    finally:
        ngx.stop()


# ---- AWS credentials as the AWS CLI reads them ------------------------------

TESTER = ("[%s]\naws_access_key_id = test:tester\n"
          "aws_secret_access_key = tester-7QfZ-s3key\n")
READER = ("[%s]\naws_access_key_id = test:reader\n"
          "aws_secret_access_key = secret2\n")
WRONG = "[%s]\naws_access_key_id = AKwrongone\naws_secret_access_key = nope\n"

# (what, credentials file, config file, environment); None: no file
AWS_CASES = [
    ("[default] in credentials", TESTER % "default", None, {}),
    ("[profile default] in config", None, TESTER % "profile default", {}),
    ("[default] then [profile default]: the later",
     None, WRONG % "default" + TESTER % "profile default", {}),
    ("[profile default] then [default]: the later",
     None, TESTER % "profile default" + WRONG % "default", {}),
    ("AWS_PROFILE, its region", None,
     TESTER % "profile prof" + "region = eu-west-7\n",
     {"AWS_PROFILE": "prof"}),
    ("AWS_PROFILE naming no profile", TESTER % "default", None,
     {"AWS_PROFILE": "nope"}),
    ("AWS_PROFILE before AWS_DEFAULT_PROFILE",
     TESTER % "a" + READER % "b", None,
     {"AWS_DEFAULT_PROFILE": "a", "AWS_PROFILE": "b"}),
    ("AWS_DEFAULT_PROFILE alone", TESTER % "a" + READER % "b", None,
     {"AWS_DEFAULT_PROFILE": "b"}),
    ("AWS_DEFAULT_PROFILE naming no profile", TESTER % "default", None,
     {"AWS_DEFAULT_PROFILE": "gone"}),
    ("key names in any case, spaces, ':'",
     "[default]\nAWS_Access_Key_ID   =   test:tester\n"
     "aws_secret_access_key:tester-7QfZ-s3key\n", None, {}),
    ("an indented line continues the value before it",
     "[default]\naws_access_key_id = test:tester\n"
     "  aws_secret_access_key = tester-7QfZ-s3key\n", None, {}),
    ("a key id without its secret in credentials",
     "[default]\naws_access_key_id = test:tester\n", TESTER % "default",
     {}),
    ("[profile x] in credentials is not profile x",
     TESTER % "profile x", None, {"AWS_PROFILE": "x"}),
    ("profile names are case-sensitive", TESTER % "Tester", None,
     {"AWS_PROFILE": "tester"}),
    ("[profile   spaced  ]", None, TESTER % "profile   spaced  ",
     {"AWS_PROFILE": "spaced"}),
    ("[DEFAULT] gives every section its keys",
     "[DEFAULT]\naws_secret_access_key = tester-7QfZ-s3key\n[default]\n"
     "aws_access_key_id = test:tester\n", None, {}),
    ("a '#' after a value is part of it",
     "[default]\naws_access_key_id = test:tester\n"
     "aws_secret_access_key = tester-7QfZ-s3key # the tester\n", None, {}),
    ("the credentials file's region over the config's",
     TESTER % "default" + "region = eu-west-7\n",
     "[default]\nregion = us-east-1\n", {}),
    ("a key given twice", TESTER % "default" + "aws_secret_access_key = x\n",
     None, {}),
    ("a section given twice", TESTER % "default" + TESTER % "default", None,
     {}),
    ("the environment's keys first", WRONG % "default", None,
     {"AWS_ACCESS_KEY_ID": "test:tester", "AWS_SECRET_ACCESS_KEY": "tester-7QfZ-s3key"}),
    ("AWS_ACCESS_KEY_ID without AWS_SECRET_ACCESS_KEY", TESTER % "default",
     None, {"AWS_ACCESS_KEY_ID": "test:tester"}),
    ("~/.aws/ when the variables are unset", "HOME:" + TESTER % "default",
     None, {}),
]

AWS_VARS = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
            "AWS_SECURITY_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION",
            "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",
            "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_CA_BUNDLE")


# Debian's AWS CLI, whatever else PATH may hold
AWS = "/usr/bin/aws"


def aws_cli_says(environ):
    """What the aws CLI resolves: ("ok", whose keys (tester, reader,
    wrong or None, told by the last 4 characters of the key id and of
    the secret), region),
    ("notfound", profile), ("partial",) or ("unreadable",)."""
    r = subprocess.run([AWS, "configure", "list"], env=environ,
                       capture_output=True, text=True, timeout=60)
    out = r.stdout + r.stderr
    if "could not be found" in out:
        return ("notfound",)
    if "Partial credentials" in out:
        return ("partial",)
    if "Unable to parse config file" in out:
        return ("unreadable",)
    assert r.returncode == 0, out
    rows = {ln.split()[0]: ln.split()[1:] for ln in r.stdout.splitlines()
            if ln.split()}
    key, secret = rows["access_key"][0], rows["secret_key"][0]
    region = rows["region"][0]
    who = None if key == "<not" else {
        ("ster", "3key"): "tester", ("ader", "ret2"): "reader"}.get(
            (key[-4:], secret[-4:]), "wrong")
    return ("ok", who, None if region == "<not" else region)


def test_aws_profiles(d, mnt):
    """Each layout of credential files and environment, resolved by stfs
    (signing requests to OpenStack Swift, which checks every signature
    and the region in it) as the aws CLI resolves it (`aws configure
    list` on the same files and environment)."""
    if not os.path.exists(AWS):
        raise AssertionError("Debian's aws CLI is needed (apt-get install "
                             "awscli)")
    sw = s3server.shared()
    with env(AWS_ENDPOINT_URL=sw.endpoint, AWS_ACCESS_KEY_ID="test:tester",
             AWS_SECRET_ACCESS_KEY="tester-7QfZ-s3key", AWS_PROFILE=None,
             AWS_CONFIG_FILE=os.path.join(d, "no"),
             AWS_SHARED_CREDENTIALS_FILE=os.path.join(d, "no")):
        small_model(os.path.join(d, "m.safetensors"))
        with open(os.path.join(d, "m.safetensors"), "rb") as f:
            sw.put("models", "trust/m.safetensors", f.read())
    base = {k: v for k, v in os.environ.items() if k not in AWS_VARS}
    for i, (what, cred, conf, extra) in enumerate(AWS_CASES):
        home = os.path.join(d, "case%d" % i)
        os.makedirs(os.path.join(home, ".aws"))
        e = dict(base, HOME=home, XDG_CACHE_HOME=os.path.join(home, "xdg"))
        if cred and cred.startswith("HOME:"):
            with open(os.path.join(home, ".aws", "credentials"), "w") as f:
                f.write(cred[5:])
        else:
            e["AWS_SHARED_CREDENTIALS_FILE"] = os.path.join(home, "creds")
            e["AWS_CONFIG_FILE"] = os.path.join(home, "conf")
            for path, text in ((e["AWS_SHARED_CREDENTIALS_FILE"], cred),
                               (e["AWS_CONFIG_FILE"], conf)):
                if text is not None:
                    with open(path, "w") as f:
                        f.write(text)
        e.update(extra)
        cli = aws_cli_says(e)
        r = subprocess.run([T.STFS, "inspect",
                            "s3://models/trust/m.safetensors"],
                           env=dict(e, AWS_ENDPOINT_URL=sw.endpoint),
                           capture_output=True, text=True, timeout=60)
        err = r.stderr
        if cli[0] == "notfound":
            name = extra.get("AWS_PROFILE", extra.get("AWS_DEFAULT_PROFILE"))
            want = ['the AWS profile "%s"' % name]
        elif cli[0] == "partial":
            want = ["no aws_secret_access_key", "AWS_SECRET_ACCESS_KEY is "
                    "not"]
        elif cli[0] == "unreadable":
            want = ["the AWS CLI cannot read it either"]
        elif cli[1] == "tester" and cli[2] in (None, "us-east-1"):
            want = None
        elif cli[1] == "tester":
            want = ["AuthorizationHeaderMalformed"]
        elif cli[1] in ("reader", None):
            want = ["AccessDenied"]
        else:
            want = ["SignatureDoesNotMatch"]
        print("     %-50s aws: %-28s stfs: %s" % (
            what[:50], " ".join(str(c) for c in cli),
            "ok" if r.returncode == 0 else
            err.strip().split(": ", 2)[-1][:60]))
        if want is None:
            assert r.returncode == 0, (what, cli, err)
        else:
            assert r.returncode == 1 and any(w in err for w in want), \
                (what, cli, err)


def run():
    return T.run_tests([
        test_no_secret_shown,
        test_offline_missing_blob,
        test_listing_loops, test_listing_deadline,
        test_names_escaped,
        test_umount_only_stfs,
        test_cache_unusable,
        test_scheme_case,
        test_revision_outside_cache,
        test_aws_profiles,
    ])


def main():
    # the default cache ($XDG_CACHE_HOME/stfs) of these tests: their own
    home = os.environ["XDG_CACHE_HOME"] = T.tmpdir()
    try:
        return run()
    finally:
        shutil.rmtree(home, ignore_errors=True)
        s3server.stop_shared()              # test_aws_profiles' Swift


if __name__ == "__main__":
    sys.exit(main())

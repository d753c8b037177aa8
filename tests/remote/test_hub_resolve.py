#!/usr/bin/env python3
"""test_hub_resolve.py: the Hub at scale (issue 28).  The Hub emulator
(tests/servers/hubemu.py) redirects /resolve to an nginx that checks a signature
and an expiry on every request (secure_link: a wrong link is 403, an
expired one 410), with a lifetime the test sets, and counts /resolve
calls in windows, answering 429 with RateLimit and Retry-After past a
limit the test sets.  Both log every request.

- a sequential read of a 1 GiB model (4 MiB blocks, 8 connections)
  resolves its file once, plus once per expiry of the signed URL, and
  under a limit of 20 resolves a window it ends with no EIO and no 429;
- reads that span several expiries (an expiry the URL says, one it does
  not say, a wrongly signed link) are byte-exact, each expiry costing one
  resolve;
- a 429 storm on /resolve: EIO within the documented bound, logged once
  with the Hub's numbers; then the mount recovers by itself;
- the token goes to the Hub only, never to the CDN (nginx's log of
  Authorization), even one on the Hub's own address;
- a plain http:// short link to a presigned location is followed once,
  and its target reused while it is valid.

`python3 test_hub_resolve.py --read PATH SIZE` is the reader the tests
run (a process of its own, so that a test can stop a read stuck in
waits): it reads PATH from its start in 1 MiB reads, checks every byte
against pattern(), and prints what it got as JSON.
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402
import hubemu  # noqa: E402
from fixtures import (HUBJS, MiB, Nginx, World, env, make_model,  # noqa: E402
                      mount_logged, pattern, slurp, stop_logged)

BLOCK = 4 * MiB
OPTS = ("-o", "connections=8,block_size=4M")
# A refresh ahead of expiry may come up to a fifth of the lifetime early:
# it still counts as the one resolve of that expiry.
EARLY = 0.8


def reader_main(path, size):
    """The --read process."""
    t, got, bad, err = time.time(), 0, None, None
    try:
        with open(path, "rb", buffering=0) as f:
            while got < size:
                b = f.read(min(MiB, size - got))
                if not b:
                    break
                if bad is None and b != pattern(got, len(b)):
                    bad = got
                got += len(b)
    except OSError as e:
        err = e.errno
    print(json.dumps({"bytes": got, "bad": bad, "errno": err,
                      "secs": time.time() - t}))


def read_checked(path, size, timeout, stop_if=lambda: False):
    """Run the reader on path: its JSON, or {"stopped": why} when it
    ran past timeout or stop_if() said why it should stop."""
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__),
                          "--read", path, str(size)],
                         stdout=subprocess.PIPE, text=True)
    T._procs.append(p)
    end = time.time() + timeout
    why = None
    while p.poll() is None:
        why = stop_if() or ("still reading after %d s" % timeout
                            if time.time() > end else None)
        if why:
            p.kill()
            p.wait()
            p.stdout.close()
            return {"stopped": why}
        time.sleep(0.1)
    out = p.stdout.read()
    p.stdout.close()
    return json.loads(out)


def resolves_said(text):
    """The count of resolves a stats line (unmount, inspect) says."""
    m = re.findall(r"(\d+) resolves?\b", text)
    assert m, "no count of resolves in: %r" % text[-2000:]
    return int(m[-1])


def allowed(files, secs, lifetime):
    """One resolve per file, plus one per expiry in secs."""
    return files * (1 + math.ceil(secs / (lifetime * EARLY)))


def cdn_statuses(w):
    """{status: count} of nginx's access log."""
    out = {}
    for line in w.nginx_log().splitlines():
        st = line.split()[1]
        out[st] = out.get(st, 0) + 1
    return out


def test_one_resolve_per_file(d, mnt):
    """(a) A 1 GiB model, read from its start by one reader: one resolve
    for the file, plus one per expiry; no 429 under a limit of 20."""
    size, life = 1 << 30, 30
    with World(d, lifetime=life) as w:
        w.hub.push(w.hub.repo("org/big"),
                   {"model.safetensors": make_model(
                       os.path.join(d, "model.safetensors"), size)})
        w.hub.rate_limit(20, 300)
        r = subprocess.run([T.STFS, "inspect", "hf://org/big"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        n_inspect = w.hub.resolves()
        assert n_inspect == 1, "inspect: %d resolves" % n_inspect
        log = os.path.join(d, "stfs.log")
        t0 = time.time()
        p = mount_logged("hf://org/big", mnt, log, *OPTS)
        try:
            got = read_checked(
                os.path.join(mnt, "w"), size, 600,
                lambda: w.hub.resolves(429) and "429 from /resolve after "
                "%d resolves" % (w.hub.resolves() - n_inspect))
        finally:
            secs = time.time() - t0
            stop_logged(p, mnt)
        n = w.hub.resolves() - n_inspect
        print("     1 GiB in %.1f s: %d resolves (%d answered 429), "
              "%d CDN requests %s" % (secs, n, w.hub.resolves(429),
                                      len(w.nginx_log().splitlines()),
                                      cdn_statuses(w)))
        assert "stopped" not in got, got
        assert got == dict(got, bytes=size, bad=None, errno=None), got
        assert w.hub.resolves(429) == 0
        assert n <= allowed(1, secs, life), \
            "%d resolves in %.1f s (lifetime %d s)" % (n, secs, life)
        assert resolves_said(slurp(log)) == n, slurp(log)
        assert resolves_said(r.stderr) == 1, r.stderr


def test_expiries(d, mnt):
    """(b) Reads that span several expiries of the signed URL (2 s, the
    read about 8 s): byte-exact, one resolve per expiry, whether the URL
    says when it expires (expires=, Expires=, X-Amz-Date+X-Amz-Expires)
    or not (a 410 from the CDN is the news); a wrongly signed link (403)
    is resolved again once, mid-read, unseen by the reader."""
    size, life = 96 * MiB, 2
    with World(d, lifetime=life, rate="1500k") as w:
        w.hub.push(w.hub.repo("org/m"), {"model.safetensors": make_model(
            os.path.join(d, "model.safetensors"), size)})
        for style in ("expires", "Expires", "amz", "opaque"):
            w.hub.sign(life, style)
            before, log = w.hub.resolves(), os.path.join(d, style + ".log")
            cache = os.path.join(d, "cache-" + style)
            t0 = time.time()
            p = mount_logged("hf://org/m", mnt, log, *OPTS,
                             "-o", "cache=" + cache)
            try:
                if style == "expires":        # a bad link, mid-read
                    w.hub.signer.bad = 1
                got = read_checked(os.path.join(mnt, "w"), size, 120)
            finally:
                secs = time.time() - t0
                stop_logged(p, mnt)
            n = w.hub.resolves() - before
            print("     %s: %d MiB in %.1f s, %d resolves, CDN %s" % (
                style, size >> 20, secs, n, cdn_statuses(w)))
            assert got == dict(got, bytes=size, bad=None, errno=None), \
                (style, got, slurp(log)[-2000:])
            # the bad link costs one more; an unsaid expiry one more
            # (the 410 that tells it)
            assert n <= allowed(1, secs, life) + 1 + (style == "opaque"), \
                "%s: %d resolves in %.1f s" % (style, n, secs)
        # links that are never good: at mount, refused (403) after one
        # more resolve; after the mount, once the good link has expired,
        # reads fail, with no loop of resolves (one, and one again after
        # the 403; then none for a while, whatever the readers)
        w.hub.sign(life, "expires")
        w.hub.signer.bad = 1000
        before = w.hub.resolves()
        r = subprocess.run([T.STFS, "inspect", "hf://org/m"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and "HTTP 403" in r.stderr, r
        assert w.hub.resolves() - before == 2, w.hub.resolves() - before
        w.hub.signer.bad = 0
        p = mount_logged("hf://org/m", mnt, os.path.join(d, "bad.log"),
                         *OPTS, "-o", "cache=" + os.path.join(d, "c2"))
        try:
            w.hub.signer.bad = 1000
            time.sleep(life + 1)
            before = w.hub.resolves()
            got = read_checked(os.path.join(mnt, "w"), size, 120)
            assert got.get("errno") in (13, 5), got
            got = read_checked(os.path.join(mnt, "w"), size, 120)
            assert got.get("errno") in (13, 5), got
            assert w.hub.resolves() - before == 2, \
                w.hub.resolves() - before
        finally:
            stop_logged(p, mnt)
        w.hub.signer.bad = 0


def test_429_storm(d, mnt):
    """(c) Every /resolve answers 429 (RateLimit t=2, Retry-After 2)
    when a read needs a new URL: EIO within the documented bound
    (`retries` waits of what the Hub says, each at most 30 s; here
    3 x 2 s), one log line with the Hub's numbers; a read right after
    fails at once, asking nothing (the Hub said 2 s); when the storm has
    ended, the next read succeeds with no remount."""
    size, life = 32 * MiB, 2
    with World(d, lifetime=life) as w:
        w.hub.push(w.hub.repo("org/m"), {"model.safetensors": make_model(
            os.path.join(d, "model.safetensors"), size)})
        log = os.path.join(d, "stfs.log")
        p = mount_logged("hf://org/m", mnt, log, *OPTS, "-o", "nocache")
        try:
            time.sleep(life + 1)              # the URL of the mount expired
            w.hub.storm = 2
            t = time.time()
            got = read_checked(os.path.join(mnt, "w"), size, 120)
            el = time.time() - t
            assert got.get("errno") == 5, got
            assert el < 3 * 2 + 10, "EIO after %.1f s" % el
            stormed = w.hub.resolves(429)
            assert stormed >= 2, stormed          # it did wait and retry
            t = time.time()
            got = read_checked(os.path.join(mnt, "w"), size, 120)
            assert got.get("errno") == 5 and time.time() - t < 1.5, got
            assert w.hub.resolves(429) == stormed
            w.hub.storm = None
            time.sleep(2.5)
            got = read_checked(os.path.join(mnt, "w"), size, 120)
            assert got == dict(got, bytes=size, bad=None, errno=None), got
        finally:
            stop_logged(p, mnt)
        text = slurp(log)
        said = [ln for ln in text.splitlines()
                if "429" in ln and "RateLimit" in ln]
        print("     EIO after %.1f s, %d answers 429; logged: %s" % (
            el, stormed, said))
        assert len(said) == 1 and "t=2" in said[0], text[-3000:]


def test_token_cdn(d, mnt):
    """(d) HF_TOKEN goes to /resolve and the API, never to the CDN:
    nginx logs every request's Authorization; the CDN on another address,
    then on the Hub's own address (another port)."""
    for host in ("127.0.0.2", "127.0.0.1"):
        sub = os.path.join(d, host)
        os.makedirs(sub)
        with World(sub, lifetime=30, cdn_host=host) as w, \
                env(HF_TOKEN=hubemu.TOKEN):
            w.hub.push(w.hub.repo("org/gated", gated=True),
                       {"model.safetensors": make_model(
                           os.path.join(sub, "m.safetensors"), 24 * MiB)})
            p = mount_logged("hf://org/gated", mnt,
                             os.path.join(sub, "stfs.log"), *OPTS)
            try:
                got = read_checked(os.path.join(mnt, "w"), 24 * MiB, 120)
            finally:
                stop_logged(p, mnt)
            assert got == dict(got, bytes=24 * MiB, bad=None), got
            res = [e for e in w.hub.log.entries if "/resolve/" in e["path"]]
            assert res and all(e["auth"] == "Bearer " + hubemu.TOKEN
                               for e in res), res
            log = w.nginx_log().splitlines()
            assert len(log) >= 6, log
            for line in log:
                assert line.endswith("[-]") and "md5=" in line, line
            assert hubemu.TOKEN not in w.nginx_log()


def test_js_signed(d, mnt):
    """The emulator's signed redirects work for the official client
    (@huggingface/hub follows /resolve to the signed CDN URL and reads
    the header there), as huggingface.co's do."""
    node = shutil.which("node")
    mods = os.path.join(HUBJS, "node_modules", "@huggingface", "hub")
    if not node or not os.path.isdir(mods):
        assert os.environ.get("CI") != "true", "npm ci in " + HUBJS
        print("     (node or @huggingface/hub missing: npm ci in %s)" %
              HUBJS)
        return
    with World(d, lifetime=30) as w:
        w.hub.push(w.hub.repo("org/m"), {"model.safetensors": make_model(
            os.path.join(d, "model.safetensors"), 8 * MiB)})
        r = subprocess.run([node, os.path.join(HUBJS, "check.mjs"),
                            w.hub.url, "org/m", "main"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        js = json.loads(r.stdout)
        assert js["tensors"] == {"w": {"file": "model.safetensors",
                                       "dtype": "U8", "shape": [8 * MiB],
                                       "data_offsets": [0, 8 * MiB]}}, js
        assert w.hub.resolves(302) >= 1
        assert all("md5=" in ln and " 206 " in ln
                   for ln in w.nginx_log().splitlines()), w.nginx_log()


def test_short_link(d, mnt):
    """(e) http://HOST/s/NAME redirects (302) to a presigned URL (S3's
    X-Amz-Date and X-Amz-Expires, 3 s): followed once, its target reused
    while valid, then followed again: never once per block."""
    size, life = 64 * MiB, 3
    files = os.path.join(d, "files")
    os.makedirs(os.path.join(d, "ngx"))
    os.makedirs(files)
    make_model(os.path.join(files, "big.safetensors"), size)
    ngx = Nginx(os.path.join(d, "ngx"), files, host="127.0.0.2",
                extra=hubemu.cdn_conf(rate="1500k"))
    signer = hubemu.Signer(life, style="amz")
    links = hubemu.ShortLinks(ngx.url().rstrip("/"), signer,
                              log=os.path.join(d, "links.log"))
    try:
        with env(XDG_CACHE_HOME=os.path.join(d, "xdg")):
            t0 = time.time()
            p = mount_logged(links.url("big.safetensors"), mnt,
                             os.path.join(d, "stfs.log"), *OPTS)
            try:
                got = read_checked(os.path.join(mnt, "w"), size, 120)
            finally:
                secs = time.time() - t0
                stop_logged(p, mnt)
        n = links.hits()
        cdn = open(os.path.join(ngx.d, "access.log")).read().splitlines()
        sigs = {re.search(r"md5=([^&\s]+)", ln).group(1) for ln in cdn}
        print("     %d MiB in %.1f s: %d short-link hits, %d CDN requests "
              "with %d signatures" % (size >> 20, secs, n, len(cdn),
                                      len(sigs)))
        assert got == dict(got, bytes=size, bad=None, errno=None), got
        assert n <= allowed(1, secs, life), \
            "%d hits of the short link in %.1f s" % (n, secs)
        assert n < size // BLOCK
        assert len(cdn) > n                 # targets were reused
    finally:
        links.stop()
        ngx.stop()


def run():
    return T.run_tests([
        test_one_resolve_per_file,
        test_expiries,
        test_429_storm,
        test_token_cdn,
        test_js_signed,
        test_short_link,
    ])


if __name__ == "__main__":
    if sys.argv[1:2] == ["--read"]:
        reader_main(sys.argv[2], int(sys.argv[3]))
        sys.exit(0)
    sys.exit(run())

#!/usr/bin/env python3
"""test_tls.py: https://, credentials, presigned URLs and proxies, against
nginx from Debian started here on 127.0.0.1 (and 127.0.0.2), with a
certificate authority and certificates made here by openssl.  Every read
is compared (sha256) with the source.

- TLS is verified: a server whose CA nobody trusts, or whose certificate
  names another host, is refused at mount (exit 1, nothing mounted);
  CURL_CA_BUNDLE, SSL_CERT_FILE and SSL_CERT_DIR add a CA, for s3://
  AWS_CA_BUNDLE or a profile's ca_bundle, for hf:// REQUESTS_CA_BUNDLE
  (the Hub emulator speaking https);
- a user and password in a URL are sent (basic authentication) to that
  host only, never to the host of a redirect, and never shown: not in
  the mount table, the xattrs, %header.json, `inspect`, messages or the
  log; ~/.netrc (or $NETRC) gives them without a URL; a wrong password
  is a clear error at mount;
- a presigned URL (nginx's secure_link) is read with its query and shown
  without it; unsigned or tampered it is refused; once it expires, what
  is not cached gives EACCES and what is cached still reads;
- http_proxy is honoured, and no_proxy.
"""
import base64
import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
import time

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import hubemu  # noqa: E402
import stfstest as T  # noqa: E402
from fixtures import (Nginx, big_file, check_real_file, make_ca,  # noqa: E402
                      make_cert, openssl, read, signed)

EXPECTED = os.path.join(T.REAL, "expected.json")
SAMPLES = ["fusebox-slashnames/model.safetensors",
           "jl-nonsharded/model.safetensors"]


# variables that would change what these tests see
CLEAN = ["CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR", "AWS_CA_BUNDLE",
         "REQUESTS_CA_BUNDLE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN",
         "HF_TOKEN_PATH", "HF_HUB_OFFLINE", "HF_HUB_CACHE",
         "NETRC", "http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy",
         "ALL_PROXY", "no_proxy", "NO_PROXY", "AWS_ACCESS_KEY_ID",
         "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
         "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_CONFIG_FILE",
         "AWS_SHARED_CREDENTIALS_FILE"]


@contextlib.contextmanager
def env(**kw):
    """os.environ (which stfs inherits) with CLEAN unset and kw set, for
    the block; restored after, even on failure."""
    saved = dict(os.environ)
    try:
        for k in CLEAN:
            os.environ.pop(k, None)
        os.environ.update(kw)
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def stfs(*args):
    return subprocess.run([T.STFS] + list(args), capture_output=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def refused(url, mnt, why, status=1):
    """inspect and mount of url fail with why, exit 1 (the mount: status,
    its class in stfs(1)), nothing mounted."""
    for cmd in (["inspect", url], ["mount", url, mnt]):
        r = stfs(*cmd)
        err = r.stderr.decode()
        assert r.returncode == (status if cmd[0] == "mount" else 1), (cmd, r)
        assert why in err, (cmd, err)
        assert not T.is_mount(mnt) and not T.daemons_for(mnt)
    return err


def want(rel):
    with open(EXPECTED) as f:
        return json.load(f)["files"][rel]["tensors"]


# ---- the tests -------------------------------------------------------------

def test_tls_verified(d, mnt):
    ca = make_ca(d)
    ngx = Nginx(os.path.join(d, "ngx"), T.REAL, also=("127.0.0.2",),
                tls=make_cert(d, ca))
    try:
        url = ngx.url(SAMPLES[0])
        with env(HOME=d):
            refused(url, mnt, "SSL certificate problem")
        # trusted: every tensor's bytes through the mount
        with env(HOME=d, CURL_CA_BUNDLE=ca[0]):
            for rel in SAMPLES:
                check_real_file(ngx.url(rel), want(rel), mnt)
            j = T.inspect_json(ngx.url("jl-sharded/"))
            assert j["sharded"] and len(j["tensors"]) == len(
                T.inspect_json(os.path.join(T.REAL, "jl-sharded"))
                ["tensors"])
            # a certificate for 127.0.0.1 does not do for 127.0.0.2
            err = refused(ngx.url(SAMPLES[0], host="127.0.0.2"), mnt,
                          "127.0.0.2")
            assert "certificate" in err, err
        with env(HOME=d, SSL_CERT_FILE=ca[0]):
            assert stfs("inspect", url).returncode == 0
        cadir = os.path.join(d, "cadir")
        os.mkdir(cadir)
        shutil.copy(ca[0], cadir)
        openssl("rehash", cadir)
        with env(HOME=d, SSL_CERT_DIR=cadir):
            assert stfs("inspect", url).returncode == 0
        # another CA's bundle is not this server's (with a cache of its
        # own: a server that fails, TLS included, leaves what the cache
        # holds readable)
        other = os.path.join(d, "other")
        os.mkdir(other)
        with env(HOME=d, CURL_CA_BUNDLE=make_ca(other, "other CA")[0],
                 XDG_CACHE_HOME=other):
            refused(url, mnt, "SSL certificate problem")
    finally:
        ngx.stop()


def test_tls_s3(d, mnt):
    """s3:// to an https endpoint with a private CA: AWS_CA_BUNDLE, or
    ca_bundle in the profile (unsigned requests: no credentials here)."""
    root = os.path.join(d, "root")
    os.makedirs(os.path.join(root, "bkt"))
    rel = SAMPLES[0]
    shutil.copy(os.path.join(T.REAL, rel),
                os.path.join(root, "bkt", "a.safetensors"))
    ca = make_ca(d)
    ngx = Nginx(os.path.join(d, "ngx"), root, tls=make_cert(d, ca))
    src = "s3://bkt/a.safetensors"
    nofile = os.path.join(d, "none")
    conf = os.path.join(d, "config")
    with open(conf, "w") as f:
        f.write("[default]\nca_bundle = %s\n" % ca[0])
    base = dict(HOME=d, AWS_ENDPOINT_URL=ngx.url().rstrip("/"),
                AWS_SHARED_CREDENTIALS_FILE=nofile)
    try:
        with env(AWS_CONFIG_FILE=nofile, **base):
            refused(src, mnt, "SSL certificate problem")
        with env(AWS_CONFIG_FILE=nofile, AWS_CA_BUNDLE=ca[0], **base):
            check_real_file(src, want(rel), mnt)
        with env(AWS_CONFIG_FILE=conf, **base):
            check_real_file(src, want(rel), mnt)
    finally:
        ngx.stop()


def test_tls_hub(d, mnt):
    """hf:// with HF_ENDPOINT at an https Hub (the emulator with a
    certificate of a private CA): refused untrusted; trusted through
    REQUESTS_CA_BUNDLE, as the Python tools take it, or CURL_CA_BUNDLE."""
    rel = SAMPLES[1]
    files = os.path.join(d, "files")
    os.mkdir(files)
    ca = make_ca(d)
    ngx = Nginx(os.path.join(d, "ngx"), files, host="127.0.0.2")
    hub = hubemu.Hub(files, ngx.url(), tls=make_cert(d, ca))
    with open(os.path.join(T.REAL, rel), "rb") as f:
        hub.push(hub.repo("org/m"), {"model.safetensors": f.read()})
    base = dict(HOME=d, HF_ENDPOINT=hub.url, HF_HOME=os.path.join(d, "hf"))
    try:
        assert hub.url.startswith("https://")
        with env(**base):
            refused("hf://org/m", mnt, "SSL certificate problem")
        with env(REQUESTS_CA_BUNDLE=ca[0], **base):
            check_real_file("hf://org/m", want(rel), mnt)
        with env(CURL_CA_BUNDLE=ca[0], **base):
            check_real_file("hf://org/m", want(rel), mnt)
    finally:
        hub.stop()
        ngx.stop()


def test_credentials(d, mnt):
    """Basic authentication from the URL or ~/.netrc; /moved/ redirects
    to another host, which must never see the password."""
    rel = SAMPLES[1]
    other = Nginx(os.path.join(d, "other"), T.REAL, host="127.0.0.2")
    htpasswd = os.path.join(d, "htpasswd")
    h = subprocess.run(["openssl", "passwd", "-apr1", "p@ss:w"],
                       capture_output=True, check=True).stdout.decode()
    with open(htpasswd, "w") as f:
        f.write("alice:" + h)
    ngx = Nginx(os.path.join(d, "ngx"), T.REAL, extra="""
    location /private/ { alias %s/; auth_basic stfs;
                         auth_basic_user_file %s; }
    location /moved/ { auth_basic stfs; auth_basic_user_file %s;
                       rewrite ^/moved/(.*)$ http://127.0.0.2:%d/$1 redirect; }
""" % (T.REAL, htpasswd, htpasswd, other.port))
    basic = base64.b64encode(b"alice:p@ss:w").decode()
    try:
        with env(HOME=d):
            url = ngx.url("private/" + rel).replace(
                "http://", "http://alice:p%40ss%3Aw@")
            shown = ngx.url("private/" + rel)

            def no_secret(fp):
                assert os.getxattr(fp, "user.safetensors.url") == \
                    shown.encode(), fp
            check_real_file(url, want(rel), mnt, no_secret)
            with open(os.path.join(ngx.d, "access.log")) as f:
                assert "[Basic %s]" % basic in f.read()
            # nothing shows the password
            log = os.path.join(d, "stfs.log")
            T._mounts.append(mnt)
            r = stfs("mount", "-o", "log=" + log, url, mnt)
            assert r.returncode == 0 and not r.stderr, r
            try:
                with open("/proc/self/mountinfo") as f:
                    line = [x for x in f if " %s " % mnt in x][0]
                assert shown in line and "p%40ss" not in line, line
                hdr = read(os.path.join(mnt, "%header.json")).decode()
                assert "p%40ss" not in hdr and "p@ss" not in hdr
            finally:
                T.unmount(mnt)
                assert T.wait_gone(mnt)
            with open(log) as f:
                text = f.read()
            assert shown in text and "p%40ss" not in text, text
            r = stfs("inspect", "--json", url)
            assert r.returncode == 0, r
            out = (r.stdout + r.stderr).decode()
            assert json.loads(r.stdout)["source"] == shown
            assert "p%40ss" not in out and "alice" not in out, out
            # refused: no password, a wrong one; the message hides it
            refused(shown, mnt, "HTTP 401 (Unauthorized)", 4)
            bad = url.replace("p%40ss", "wrong")
            err = refused(bad, mnt, "HTTP 401 (Unauthorized)", 4)
            assert "wrong" not in err and shown in err, err
            # a redirect to another host: it gets the request, not the
            # password
            moved = url.replace("/private/", "/moved/")
            check_real_file(moved, want(rel), mnt)
            with open(os.path.join(other.d, "access.log")) as f:
                lines = f.read().splitlines()
            assert lines and all(x.endswith("[-]") for x in lines), lines
        # ~/.netrc, and $NETRC
        netrc = "machine 127.0.0.1 login alice password p@ss:w\n"
        with open(os.path.join(d, ".netrc"), "w") as f:
            f.write(netrc)
        os.chmod(os.path.join(d, ".netrc"), 0o600)
        with env(HOME=d):
            check_real_file(shown, want(rel), mnt)
        elsewhere = os.path.join(d, "netrc")
        os.rename(os.path.join(d, ".netrc"), elsewhere)
        with env(HOME=d, NETRC=elsewhere):
            check_real_file(shown, want(rel), mnt)
        with env(HOME=d):
            refused(shown, mnt, "HTTP 401 (Unauthorized)", 4)
    finally:
        ngx.stop()
        other.stop()


def test_presigned(d, mnt):
    """A presigned URL (nginx's secure_link: a signature and an expiry in
    the query): read with its query, shown without it; once it expires,
    what is not cached gives EACCES and what is cached still reads."""
    data = os.path.join(d, "data")
    os.mkdir(data)
    src, tensors = big_file(data)
    rel = SAMPLES[1]
    ngx = Nginx(os.path.join(d, "ngx"), T.REAL, extra="".join("""
    location /%s/ {
      alias %s/;
      secure_link $arg_md5,$arg_expires;
      secure_link_md5 "$secure_link_expires$uri stfs-secret";
      if ($secure_link = "") { return 403; }
      if ($secure_link = "0") { return 403; }
    }
""" % loc for loc in (("signed", T.REAL), ("data", data))))
    try:
        with env(HOME=d):
            path = "/signed/" + rel
            plain = ngx.url(path[1:])
            url = signed(plain, path, int(time.time()) + 3600)

            def no_query(fp):
                assert os.getxattr(fp, "user.safetensors.url") == \
                    plain.encode(), fp
            check_real_file(url, want(rel), mnt, no_query)
            j = T.inspect_json(url)
            assert j["source"] == plain, j["source"]
            refused(plain, mnt, "HTTP 403 (Forbidden)", 4)
            err = refused(url.replace("md5=", "md5=x"), mnt,
                          "HTTP 403 (Forbidden)", 4)
            assert "md5" not in err and plain in err, err
            refused(signed(ngx.url("signed/jl-sharded/"),
                           "/signed/jl-sharded/", int(time.time()) + 60),
                    mnt, "shards need a URL each")
            # expiry while mounted
            path = "/data/big.safetensors"
            url = signed(ngx.url(path[1:]), path, int(time.time()) + 8)
            p = T.mount_fg(url, mnt)
            try:
                with open("/proc/self/mountinfo") as f:
                    line = [x for x in f if " %s " % mnt in x][0]
                assert "md5" not in line and "expires" not in line, line
                first = os.path.join(mnt, "layers/0/w")
                last = os.path.join(mnt, "layers/2/w")
                assert read(first) == tensors[0][3]
                while time.time() < int(url.rsplit("=", 1)[1]) + 1:
                    time.sleep(0.2)
                T.expect_errno(last, errno.EACCES, 30)
                assert read(first) == tensors[0][3]     # the cache's
            finally:
                T.stop_fg(p, mnt)
    finally:
        ngx.stop()


def test_proxy(d, mnt):
    """http_proxy: requests for a host only the proxy can reach go
    through it; no_proxy: straight to the server."""
    rel = SAMPLES[0]
    origin = Nginx(os.path.join(d, "origin"), T.REAL)
    proxy = Nginx(os.path.join(d, "proxy"), T.REAL, extra="""
    location / { proxy_pass http://127.0.0.1:%d; }
""" % origin.port)
    plog = os.path.join(proxy.d, "access.log")

    def proxied():
        with open(plog) as f:
            return len(f.read().splitlines())
    try:
        # a name that resolves nowhere: only the proxy makes it work
        url = "http://stfs-origin.invalid:%d/%s" % (origin.port, rel)
        with env(HOME=d, http_proxy=proxy.url().rstrip("/")):
            check_real_file(url, want(rel), mnt)
            n = proxied()
            assert n > 0
            with env(HOME=d, http_proxy=proxy.url().rstrip("/"),
                     no_proxy="127.0.0.1"):
                check_real_file(origin.url(rel), want(rel), mnt)
            assert proxied() == n
        with env(HOME=d, XDG_CACHE_HOME=os.path.join(d, "none")):
            r = stfs("inspect", url)
            assert r.returncode == 1 and b"stfs-origin.invalid" in \
                r.stderr, r
    finally:
        proxy.stop()
        origin.stop()


def main():
    home = os.environ["XDG_CACHE_HOME"] = T.tmpdir()
    try:
        return T.run_tests([
            test_tls_verified,
            test_tls_s3,
            test_tls_hub,
            test_credentials,
            test_presigned,
            test_proxy,
        ])
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""test_tenants.py: no cached byte fetched with a credential reaches a
mount that does not prove the same right (issue 47, items 1 and 2), on
real mounts against real servers started here: the Hub emulator
(hubemu.py) with nginx as its signed CDN, the tests' Swift (s3server.py)
and nginx with a password; each origin behind a Gate of this file, a TCP
proxy that forwards, refuses, answers nothing (a timeout) or closes at
once (an empty reply).

Tenant A reads a tensor with its credential into a node cache; then tenant
B, on the same cache, names the same bytes every other way (the resolve
URL, the CDN URL, path-style and virtual-hosted S3 URLs, the source with
no credential, with another one) with the origin up and unreachable: B's
mount is refused, or reads none of A's bytes.  A mount with A's own
credential reads them back offline, and public bytes stay shared (the
controls that show the cache is still used).
"""
import os
import sys

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402
import hubemu  # noqa: E402
import s3server  # noqa: E402
from fixtures import Nginx, env, make_ca, make_cert  # noqa: E402
from tenantfix import (FAST, STATES, Gate, HubWorld, a_reads,  # noqa: E402
                       b_gets_nothing, model, stfs)

# B's requests give up fast: a silent origin is a stall in seconds


UNREACHABLE = "and the cache holds no copy fetched without credentials"


def matrix(gates, spellings, mnt, cache, secret):
    """Every spelling (src, env, the words of its refusal online) with
    every gate in every state: B gets nothing.  Every case is tried; the
    failures are told together."""
    failed = []
    for state in STATES:
        for g in gates:
            g.set(state)
        for src, environ, online in spellings:
            # "_CRED": B carries a credential in the URL; "_OPTS": B's
            # more -o options
            with env(**{k: v for k, v in environ.items() if k[0] != "_"}):
                why = online if state == "up" else ()
                if state != "up" and "://" in src and \
                        src.split("://")[0] in ("http", "https") and \
                        not environ.get("_CRED"):
                    why = (UNREACHABLE,)
                try:
                    b_gets_nothing(src, mnt, cache, secret, state, why,
                                   environ.get("_OPTS", ""))
                except AssertionError as e:
                    failed.append("%s %s: %s" % (
                        state, sorted(k for k in environ if k[0] != "_"),
                        str(e)[:300]))
    for g in gates:
        g.set("up")
    assert not failed, "%d of %d cases:\n%s" % (
        len(failed), len(STATES) * len(spellings), "\n".join(failed))


# ---- the Hub --------------------------------------------------------------


def test_hub_gated(d, mnt):
    """A gated hf:// file read with HF_TOKEN: its resolve URL, its CDN URL
    (unsigned), the hf:// source with no token and with another one, the
    resolve URL with a password: nothing, with the Hub and the CDN up,
    refused, silent and closing at once.  A's own token reads it offline;
    a public repo's bytes are still shared with B (the cache is used)."""
    w = HubWorld(d)
    cache = os.path.join(d, "cache")
    try:
        data, secret = model(os.path.join(d, "g.safetensors"), 1)
        sha = w.hub.push(w.hub.repo("org/gated", gated=True),
                         {"model.safetensors": data})
        pub, public = model(os.path.join(d, "p.safetensors"), 2)
        psha = w.hub.push(w.hub.repo("org/open"), {"model.safetensors": pub})
        with env(HF_TOKEN=hubemu.TOKEN):
            a_reads("hf://org/gated@" + sha, mnt, cache, secret)
        a_reads("hf://org/open@" + psha, mnt, cache, public)
        resolve = "%s/org/gated/resolve/%s/model.safetensors" % (
            w.gate.url, sha)
        cdn = "%s/org/gated/%s/model.safetensors" % (w.cdn.url, sha)
        spellings = [
            (resolve, {}, ("401",)),
            (resolve, {"HF_TOKEN": hubemu.TOKEN}, ("401",)),
            (resolve.replace("http://", "http://tenant:pw@"),
             {"_CRED": "1"}, ("401",)),
            (cdn, {}, ("403",)),
            ("hf://org/gated@" + sha, {}, ("restricted",)),
            ("hf://org/gated@" + sha, {"HF_TOKEN": "hf_another_token"},
             ("restricted",)),
        ]
        matrix([w.gate, w.cdn], spellings, mnt, cache, secret)
        # the controls: A's own token reads its bytes offline; a public
        # file read by anyone is served to B while the Hub is down
        with env(HF_TOKEN=hubemu.TOKEN):
            a_reads("hf://org/gated@" + sha, mnt, cache, secret,
                    "offline")
        for other in (None, "hf_another_token"):
            with env(HF_TOKEN=other):
                r = stfs("mount", "-o", "cache=%s,offline" % cache,
                         "hf://org/gated@" + sha, mnt)
            T._mounts.append(mnt)
            assert r.returncode == 3 and "offline" in r.stderr, (
                "offline with token %s" % other, r)     # not found
        w.gate.set("refused")
        w.cdn.set("refused")
        a_reads("%s/org/open/resolve/%s/model.safetensors" % (
            w.gate.url, psha), mnt, cache, public, FAST)
    finally:
        w.close()


# ---- S3 -------------------------------------------------------------------

def s3_matrix(d, mnt, a_env, prefix, style=()):
    """A reads s3://models/PREFIX/ with the keys a_env gives (with style,
    its -o s3_style= option, virtual-hosted through the endpoint
    localhost: Swift's storage_domain); B names the object every other
    way."""
    sw = s3server.shared()
    gate = Gate(int(sw.endpoint.rsplit(":", 1)[1]))
    cache = os.path.join(d, "cache")
    try:
        data, secret = model(os.path.join(d, "m.safetensors"), 3)
        sw.put("models", prefix + "/model.safetensors", data)
        endpoint = gate.url.replace("127.0.0.1", "localhost") if style \
            else gate.url
        base = dict(AWS_ENDPOINT_URL=endpoint, AWS_ENDPOINT_URL_S3=None,
                    AWS_ACCESS_KEY_ID=None, AWS_SECRET_ACCESS_KEY=None,
                    AWS_SESSION_TOKEN=None, AWS_REGION=None,
                    AWS_DEFAULT_REGION=None, AWS_PROFILE=None,
                    AWS_SHARED_CREDENTIALS_FILE=os.path.join(d, "none"),
                    AWS_CONFIG_FILE=os.path.join(d, "none"),
                    AWS_EC2_METADATA_DISABLED="true",
                    NETRC=os.path.join(d, "nonetrc"))
        with env(**base):
            with env(**a_env):
                a_reads("s3://models/%s/" % prefix, mnt, cache, secret,
                        *style)
            path = "%s/models/%s/model.safetensors" % (gate.url, prefix)
            virtual = "http://models.localhost:%d/%s/model.safetensors" % (
                gate.port, prefix)
            spellings = [
                (path, {}, ("HTTP 4",)),
                (virtual, {}, ("HTTP 4",)),
                ("s3://models/%s/" % prefix, {}, ()),
                ("s3://models/%s/model.safetensors" % prefix, {},
                 ("HTTP 4",)),
                ("s3://models/%s/model.safetensors" % prefix,
                 {"_OPTS": ",s3_style=virtual"}, ()),
                ("s3://models/%s/" % prefix,
                 {"AWS_ACCESS_KEY_ID": s3server.ACCESS,
                  "AWS_SECRET_ACCESS_KEY": "not-the-secret"},
                 ("SignatureDoesNotMatch",)),
            ]
            matrix([gate], spellings, mnt, cache, secret)
            # offline, no keys or other ones: nothing; A's own keys read
            # the object offline (the control)
            for other in ({}, {"AWS_ACCESS_KEY_ID": s3server.ACCESS,
                               "AWS_SECRET_ACCESS_KEY": "not-the-secret"}):
                with env(**other):
                    r = stfs("mount", "-o", ",".join(
                        ("cache=" + cache, "offline") + tuple(style)),
                        "s3://models/%s/" % prefix, mnt)
                T._mounts.append(mnt)
                assert r.returncode == 3 and "offline" in r.stderr, (
                    other, r)                           # not found
            with env(**a_env):
                a_reads("s3://models/%s/" % prefix, mnt, cache, secret,
                        "offline", *style)
    finally:
        gate.stop()


def test_s3_env_keys(d, mnt):
    """A private object read with keys from the environment."""
    s3_matrix(d, mnt, {"AWS_ACCESS_KEY_ID": s3server.ACCESS,
                       "AWS_SECRET_ACCESS_KEY": s3server.SECRET}, "tenv")


def test_s3_virtual(d, mnt):
    """A private object read virtual-hosted (-o s3_style=virtual): its
    URL, http://models.localhost:PORT/..., as a plain source."""
    s3_matrix(d, mnt, {"AWS_ACCESS_KEY_ID": s3server.ACCESS,
                       "AWS_SECRET_ACCESS_KEY": s3server.SECRET}, "tvirt",
              ("s3_style=virtual",))


def test_s3_file_keys(d, mnt):
    """A private object read with keys from a credentials file (a
    provider of the chain)."""
    f = os.path.join(d, "credentials")
    with open(f, "w") as g:
        g.write("[default]\naws_access_key_id = %s\n"
                "aws_secret_access_key = %s\n" % (s3server.ACCESS,
                                                  s3server.SECRET))
    s3_matrix(d, mnt, {"AWS_SHARED_CREDENTIALS_FILE": f}, "tfile")


# ---- https with a password ------------------------------------------------

def test_https_password(d, mnt):
    """A file behind nginx's basic authentication over https, read by A
    with the password in the URL and by A' with a netrc entry: the URL
    with no password, with a wrong one, and (for the netrc's bytes) with
    no netrc, get nothing, up and unreachable."""
    root = os.path.join(d, "root")
    os.makedirs(os.path.join(root, "private"))
    os.makedirs(os.path.join(root, "pub"))
    data, secret = model(os.path.join(root, "private", "m.safetensors"), 4)
    _, public = model(os.path.join(root, "pub", "m.safetensors"), 5)
    with open(os.path.join(d, "htpasswd"), "w") as f:
        f.write("alice:{PLAIN}s3cret-pw\n")
    ca = make_ca(d)
    cert = make_cert(d, ca)
    os.makedirs(os.path.join(d, "ngx"))
    ngx = Nginx(os.path.join(d, "ngx"), root, tls=cert, extra="""
    location /private/ {
      auth_basic "tenants";
      auth_basic_user_file %s/htpasswd;
    }
""" % d)
    gate = Gate(ngx.port)
    cache = os.path.join(d, "cache")
    netrc = os.path.join(d, "netrc")
    with open(netrc, "w") as f:
        f.write("machine 127.0.0.1 login alice password s3cret-pw\n")
    os.chmod(netrc, 0o600)
    url = "https://127.0.0.1:%d/private/m.safetensors" % gate.port
    try:
        with env(CURL_CA_BUNDLE=ca[0] if isinstance(ca, tuple) else ca,
                 SSL_CERT_FILE=None, NETRC=os.path.join(d, "nonetrc")):
            a_reads(url.replace("https://", "https://alice:s3cret-pw@"),
                    mnt, cache, secret)
            spellings = [
                (url, {}, ("401",)),
                (url.replace("https://", "https://alice:wrong@"),
                 {"_CRED": "1"}, ("401",)),
                (url.replace("https://", "https://bob:s3cret-pw@"),
                 {"_CRED": "1"}, ("401",)),
            ]
            matrix([gate], spellings, mnt, cache, secret)
            # netrc: its bytes are its own too
            cache2 = os.path.join(d, "cache2")
            with env(NETRC=netrc):
                a_reads(url, mnt, cache2, secret)
            matrix([gate], spellings, mnt, cache2, secret)
            # the controls: the same netrc reads them with the origin
            # down; a public file read by one is read by the other then
            pub = url.replace("/private/", "/pub/")
            a_reads(pub, mnt, cache, public)
            gate.set("refused")
            with env(NETRC=netrc):
                a_reads(url, mnt, cache2, secret, FAST)
            a_reads(pub, mnt, cache, public, FAST)
    finally:
        gate.stop()
        ngx.stop()


def run():
    try:
        return T.run_tests([
            test_hub_gated,
            test_s3_env_keys,
            test_s3_virtual,
            test_s3_file_keys,
            test_https_password,
        ])
    finally:
        s3server.stop_shared()


if __name__ == "__main__":
    sys.exit(run())

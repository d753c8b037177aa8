#!/usr/bin/env python3
"""test_mirror_tenants.py: a mirror (-o mirror=, docs/mirror.md) on a node
shared by tenants (issue 47 with issue 49's mirror): what tenant A read
from the mirror of a gated Hub repository, with the Hub's token and the
mirror's own keys, into the node cache never reaches tenant B on the same
cache without them, with the Hub, its CDN and the bucket each up,
refused, silent or closing at once; the listing from the manifest
included.  Real servers: the Hub emulator with nginx as its CDN and the
tests' Swift as the bucket, each behind a gate (test_tenants.Gate).

Tenant B tries: the hf:// source with the mirror and no token nor mirror
keys (the chain's AWS keys wrong), with another token, with the mirror's
key but no secret; the mirror object by its plain URL and as s3:// with
no keys; the hf:// source without the mirror.  A tenant with the
mirror's keys and no token is granted the copy by the mirror (the trust
model says so): the control that the bucket still serves.
"""
import os
import subprocess
import sys

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402
import hubemu  # noqa: E402
import s3server  # noqa: E402
from fixtures import env, slurp, stop_logged  # noqa: E402
from tenantfix import (Gate, HubWorld, a_reads, b_gets_nothing,  # noqa
                       model, STATES)


def stfs(*args):
    return subprocess.run([T.STFS] + list(args), capture_output=True,
                          timeout=300, text=True)


def test_gated_mirror(d, mnt):
    """A gated repo mirrored; A reads it with the token and the mirror's
    keys; B, with neither, gets none of its bytes whatever is down."""
    w = HubWorld(d)
    sw = s3server.shared()
    bgate = Gate(int(sw.endpoint.rsplit(":", 1)[1]))
    cache = os.path.join(d, "cache")
    keys = dict(STFS_MIRROR_AWS_ACCESS_KEY_ID=s3server.ACCESS,
                STFS_MIRROR_AWS_SECRET_ACCESS_KEY=s3server.SECRET)
    base = dict(AWS_ENDPOINT_URL=bgate.url, AWS_ENDPOINT_URL_S3=None,
                AWS_ACCESS_KEY_ID="AKIDWRONG", AWS_SECRET_ACCESS_KEY="wrong",
                AWS_SESSION_TOKEN=None, AWS_REGION=None,
                AWS_DEFAULT_REGION=None, AWS_PROFILE=None,
                AWS_SHARED_CREDENTIALS_FILE=os.path.join(d, "none"),
                AWS_CONFIG_FILE=os.path.join(d, "none"),
                AWS_EC2_METADATA_DISABLED="true",
                STFS_MIRROR_AWS_ACCESS_KEY_ID=None,
                STFS_MIRROR_AWS_SECRET_ACCESS_KEY=None,
                STFS_MIRROR_AWS_SESSION_TOKEN=None)
    try:
        with env(**base):
            data, secret = model(os.path.join(d, "g.safetensors"), 7)
            sha = w.hub.push(w.hub.repo("org/gated", gated=True),
                             {"model.safetensors": data,
                              "config.json": b'{"secret": "cfg-7f3a"}\n'})
            src = "hf://org/gated@" + sha
            with env(HF_TOKEN=hubemu.TOKEN, AWS_ACCESS_KEY_ID=s3server.ACCESS,
                     AWS_SECRET_ACCESS_KEY=s3server.SECRET):
                r = stfs("mirror", "-q", src, "s3://models/gated")
                assert r.returncode == 0, r
            mo = ",mirror=s3://models/gated"
            with env(HF_TOKEN=hubemu.TOKEN, **keys):
                a_reads(src, mnt, cache, secret, mo[1:])
            obj = "%s/models/gated/model.safetensors" % bgate.url
            spellings = [
                (src, {"_OPTS": mo}, ("restricted",)),
                (src, {"_OPTS": mo, "HF_TOKEN": "hf_another_token"},
                 ("restricted",)),
                (src, {"_OPTS": mo, "STFS_MIRROR_AWS_ACCESS_KEY_ID":
                       s3server.ACCESS}, ("restricted",)),
                (src, {}, ("restricted",)),
                (obj, {}, ()),
                ("s3://models/gated/", {"AWS_ACCESS_KEY_ID": None,
                                        "AWS_SECRET_ACCESS_KEY": None},
                 ()),
            ]
            failed = []
            for state in STATES:
                for g in (w.gate, w.cdn, bgate):
                    g.set(state)
                for s, environ, online in spellings:
                    with env(**{k: v for k, v in environ.items()
                                if k[0] != "_"}):
                        try:
                            b_gets_nothing(s, mnt, cache, secret, state,
                                           online if state == "up" else (),
                                           environ.get("_OPTS", ""))
                        except AssertionError as e:
                            failed.append("%s %s %s: %s" % (
                                state, s, sorted(environ), str(e)[:300]))
            for g in (w.gate, w.cdn, bgate):
                g.set("up")
            assert not failed, "\n".join(failed)
            # the control: the mirror's keys and no token read the copy
            # (the mirror grants it: docs/mirror.md, "The trust model")
            w.gate.set("refused")
            w.cdn.set("refused")
            with env(**keys):
                a_reads(src, mnt, cache, secret, mo[1:])
    finally:
        for g in (w.gate, w.cdn, bgate):
            g.set("up")
        bgate.stop()
        w.close()


def test_mirror_secrets(d, mnt):
    """The mirror's keys (STFS_MIRROR_AWS_*), right and wrong: never in the
    daemon's argv, its log, `stfs stats`, the metrics file, nor the cache's
    file names or contents."""
    sw = s3server.shared()
    w = HubWorld(d)
    cache = os.path.join(d, "cache")
    metrics = os.path.join(d, "m.prom")
    wrong = "wrong-mirror-secret-Zq81"
    token = "stfs-mirror-session-tok-9Xa"
    base = dict(AWS_ENDPOINT_URL=sw.endpoint, AWS_ENDPOINT_URL_S3=None,
                AWS_ACCESS_KEY_ID=None, AWS_SECRET_ACCESS_KEY=None,
                AWS_SESSION_TOKEN=None, AWS_REGION=None,
                AWS_DEFAULT_REGION=None, AWS_PROFILE=None,
                AWS_SHARED_CREDENTIALS_FILE=os.path.join(d, "none"),
                AWS_CONFIG_FILE=os.path.join(d, "none"),
                AWS_EC2_METADATA_DISABLED="true")
    try:
        with env(**base):
            data, secret = model(os.path.join(d, "p.safetensors"), 9)
            sha = w.hub.push(w.hub.repo("org/pub"),
                             {"model.safetensors": data})
            src = "hf://org/pub@" + sha
            with env(AWS_ACCESS_KEY_ID=s3server.ACCESS,
                     AWS_SECRET_ACCESS_KEY=s3server.SECRET):
                r = stfs("mirror", "-q", src, "s3://models/sec")
                assert r.returncode == 0, r
            texts = []
            for sec, tok in ((s3server.SECRET, None), (wrong, token)):
                with env(STFS_MIRROR_AWS_ACCESS_KEY_ID=s3server.ACCESS,
                         STFS_MIRROR_AWS_SECRET_ACCESS_KEY=sec,
                         STFS_MIRROR_AWS_SESSION_TOKEN=tok):
                    r = stfs("mount", "-o", "cache=%s,metrics=%s,mirror="
                             "s3://models/sec" % (cache, metrics), src, mnt)
                T._mounts.append(mnt)
                assert r.returncode == 0, r
                try:
                    assert read_w(mnt) == secret
                    pids = subprocess.run(["pgrep", "-f", "stfs.*" + mnt],
                                          capture_output=True, text=True)
                    assert pids.stdout.split(), "no daemon of " + mnt
                    for pid in pids.stdout.split():
                        with open("/proc/%s/cmdline" % pid, "rb") as f:
                            texts.append(f.read().decode("utf-8", "replace"))
                    st = stfs("stats", mnt)
                    texts += [r.stdout, r.stderr, st.stdout, st.stderr,
                              stfs("stats", "--json", mnt).stdout]
                    for _ in range(2):
                        texts.append(xattrs(mnt))
                finally:
                    T.unmount(mnt)
                    assert T.wait_gone(mnt)
                with open(metrics) as f:
                    texts.append(f.read())
            for root, dirs, files in os.walk(cache):
                texts += dirs + files
                for n in files:
                    with open(os.path.join(root, n), "rb") as f:
                        texts.append(f.read().decode("latin-1"))
            all_text = "\n".join(texts)
            for s in (s3server.SECRET, wrong, token):
                assert s not in all_text, s
            assert "mirror" in all_text     # the texts are the right ones
    finally:
        w.close()


def read_w(mnt):
    with open(os.path.join(mnt, "%repo", "model.safetensors"), "rb") as f:
        f.seek(0)
        b = f.read()
    with open(os.path.join(mnt, "w"), "rb") as f:
        w = f.read()
    assert b.endswith(w)
    return w


def xattrs(mnt):
    out = []
    for n in os.listxattr(mnt):
        try:
            out.append(n + "=" + os.getxattr(mnt, n).decode("latin-1"))
        except OSError:
            pass
    return "\n".join(out)


def test_mirror_keys_alone(d):
    """With the mirror's own keys, the s3:// chain is not run for it: a
    provider of the chain set up and failing (a web identity token file
    that is not there) does not keep the mirror from being used, and the
    mirror's manifest is read with its keys."""
    from mirrorfix import Env, mirror, model as hub_model, node, read_all
    with Env(d) as e:
        sha, data = hub_model(d, e.w)
        src = "hf://org/m@" + sha
        mirror(src, "s3://models/alone")
        with env(AWS_ACCESS_KEY_ID=None, AWS_SECRET_ACCESS_KEY=None,
                 AWS_ROLE_ARN="arn:aws:iam::123456789012:role/x",
                 AWS_WEB_IDENTITY_TOKEN_FILE=os.path.join(d, "nosuch"),
                 STFS_MIRROR_AWS_ACCESS_KEY_ID=s3server.ACCESS,
                 STFS_MIRROR_AWS_SECRET_ACCESS_KEY=s3server.SECRET):
            p, mnt, log = node(d, 0, src, "mirror=s3://models/alone")
            read_all(mnt, data)
            stop_logged(p, mnt)
        text = slurp(log)
        assert "web identity" not in text, text
        assert "reading hf://org/m@%s from it" % sha in text, text


def run():
    try:
        return T.run_tests([
            test_gated_mirror,
            test_mirror_secrets,
            test_mirror_keys_alone,
        ])
    finally:
        s3server.stop_shared()


if __name__ == "__main__":
    sys.exit(run())

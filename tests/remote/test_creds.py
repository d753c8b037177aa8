#!/usr/bin/env python3
"""test_creds.py: AWS credentials as clusters hand them out, against
emulators on 127.0.0.1 written here (tests/servers/credemu.py: IMDSv2 with its
token and TTL rules, the container endpoint with its authorization token,
STS AssumeRoleWithWebIdentity) and the tests' S3 server (Swift, whose
middleware tests/servers/swift/s3sts.py accepts only the emulators' temporary
keys, each with its session token, until it expires, and records which
key each request was signed with).

- each provider (web identity from the variables and from a profile,
  credential_process, the container endpoint with a token file and with
  a token, IMDSv2): `stfs inspect` names it and its key id, botocore
  (PyPI, tests/loaders/py-botocore) pointed at the same emulators gets the same
  keys, the S3 server saw stfs sign with them, and a mount through it
  reads every tensor equal to the source;
- the chain's order when several are set up, stfs against botocore;
- hostile or broken answers and settings: refused with a message that
  holds no secret (a redirect, an endpoint outside the allowed hosts, a
  bad answer, a token with a newline, a process that fails or prints too
  much, a rotated-away token), and no IMDSv1 and no forwarded token;
- keys that live 60 s, under a mount: reads at about 0, 90 and 180 s
  succeed, each signed with keys the emulator handed out before the
  previous ones expired; the token file rotated under the mount is the
  one STS sees at the next refresh; STS failing for 30 s gives EIO only
  once the keys held expired (with a message saying so in the log), and
  reads come back when it recovers.
"""
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402
import credemu  # noqa: E402
from fixtures import env, read, slurp, mount_logged, stop_logged  # noqa
from credfix import (W, base, mount_reads_all, no_secret,  # noqa: E402
                     proc_keys, process_script, stfs_inspect, stop_world,
                     used_count, used_since, world, write)

BOTO = os.path.join(TESTS_DIR, "loaders", "py-botocore", ".venv", "bin",
                    "python")
# botocore's credentials for the environment of the moment, as JSON
BOTO_SCRIPT = r"""
import json, botocore.session
c = botocore.session.get_session().get_credentials()
f = c.get_frozen_credentials() if c else None
print(json.dumps(None if c is None else
                 {"method": c.method, "access_key": f.access_key,
                  "secret_key": f.secret_key, "token": f.token}))
"""


def botocore():
    """What botocore gets in the environment of the moment."""
    r = subprocess.run([BOTO, "-c", BOTO_SCRIPT], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def same_as_botocore(method, provider_re, issued_by):
    """stfs and botocore get the same keys here: those the emulator
    issued_by handed out last; stfs names its provider and signed with
    them."""
    b = botocore()
    prov, key, used, r = stfs_inspect()
    assert r.returncode == 0, r.stderr
    no_secret(r.stderr + r.stdout)
    assert b and b["method"] == method, b
    assert re.search(provider_re, prov or ""), (prov, r.stderr)
    last = W["iss"].of(issued_by)[-1]
    assert b["access_key"] == key == last["AccessKeyId"], (b, key)
    assert b["secret_key"] == last["SecretAccessKey"]
    assert b["token"] == last["Token"]
    assert used == {key}, used
    return key


def test_each_provider(d, mnt):
    w = world()
    tok = write(os.path.join(d, "token"), "jwt-1")
    log = os.path.join(d, "log")
    # web identity from the variables (IRSA)
    with env(**base(d, AWS_ROLE_ARN=w["sts"].ROLE,
                    AWS_WEB_IDENTITY_TOKEN_FILE=tok)):
        same_as_botocore("assume-role-with-web-identity",
                         r"^web identity \(AWS_ROLE_ARN", "sts")
        mount_reads_all(mnt, log)
    # ... and from a profile
    conf = write(os.path.join(d, "config"), "[profile irsa]\nrole_arn = %s\n"
                 "web_identity_token_file = %s\n" % (w["sts"].ROLE, tok))
    with env(**base(d, AWS_PROFILE="irsa", AWS_CONFIG_FILE=conf)):
        same_as_botocore("assume-role-with-web-identity",
                         r"^web identity \(profile irsa\)", "sts")
    # credential_process (with an expiry, and one without)
    k = w["iss"].issue("process")
    for expiry in (True, False):
        script = process_script(d, proc_keys(k, expiry))
        conf = write(os.path.join(d, "config"), "[default]\n"
                     "credential_process = %s --flag 'two words'\n" % script)
        with env(**base(d, AWS_CONFIG_FILE=conf)):
            same_as_botocore("custom-process",
                             r"^credential_process \(profile default\)",
                             "process")
            if expiry:
                mount_reads_all(mnt, log)
    # the container endpoint: EKS Pod Identity (a token file), then a
    # token in the variable
    authf = write(os.path.join(d, "auth"), w["cont"].auth)
    full = w["cont"].url + credemu.Container.PATH
    with env(**base(d, AWS_CONTAINER_CREDENTIALS_FULL_URI=full,
                    AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=authf)):
        same_as_botocore("container-role", r"^the container endpoint",
                         "container")
        mount_reads_all(mnt, log)
    full = full.replace("127.0.0.1", "localhost")
    with env(**base(d, AWS_CONTAINER_CREDENTIALS_FULL_URI=full,
                    AWS_CONTAINER_AUTHORIZATION_TOKEN=w["cont"].auth)):
        same_as_botocore("container-role", r"^the container endpoint",
                         "container")
    # IMDSv2
    with env(**base(d, AWS_EC2_METADATA_DISABLED=None,
                    AWS_EC2_METADATA_SERVICE_ENDPOINT=w["imds"].url)):
        same_as_botocore("iam-role", r"^the instance metadata service",
                         "imds")
        mount_reads_all(mnt, log)
    # every token went as an IMDSv2 client sends it: after a PUT with its
    # TTL, and never forwarded
    reqs = w["imds"].requests
    assert all(h.get("x-aws-ec2-metadata-token") for m, p, h, b in reqs
               if m == "GET"), reqs
    assert all(h.get("x-aws-ec2-metadata-token-ttl-seconds") == "21600"
               for m, p, h, b in reqs if m == "PUT"), reqs
    assert not any("x-forwarded-for" in h for m, p, h, b in reqs)
    no_secret(slurp(log))


def static_keys(w, name):
    """A key set of the issuer for static settings (env, files)."""
    return w["iss"].issue(name)


def test_chain_order(d):
    """Several set up at once: the one botocore takes, stfs takes."""
    w = world()
    tok = write(os.path.join(d, "token"), "jwt-1")
    authf = write(os.path.join(d, "auth"), w["cont"].auth)
    envk, credk, confk = (static_keys(w, n) for n in
                          ("env", "credfile", "conffile"))
    pk = w["iss"].issue("process")
    script = process_script(d, proc_keys(pk))
    credf, conff = os.path.join(d, "credentials"), os.path.join(d, "config")

    def files(cred, conf_keys, process):
        write(credf, "[default]\naws_access_key_id = %s\n"
              "aws_secret_access_key = %s\naws_session_token = %s\n"
              % (credk["AccessKeyId"], credk["SecretAccessKey"],
                 credk["Token"]) if cred else "")
        text = "[default]\n"
        if conf_keys:
            text += ("aws_access_key_id = %s\naws_secret_access_key = %s\n"
                     "aws_session_token = %s\n" % (
                         confk["AccessKeyId"], confk["SecretAccessKey"],
                         confk["Token"]))
        if process:
            text += "credential_process = %s\n" % script
        write(conff, text)

    everything = dict(
        AWS_ROLE_ARN=w["sts"].ROLE, AWS_WEB_IDENTITY_TOKEN_FILE=tok,
        AWS_CONTAINER_CREDENTIALS_FULL_URI=w["cont"].url +
        credemu.Container.PATH, AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=authf,
        AWS_EC2_METADATA_DISABLED=None,
        AWS_EC2_METADATA_SERVICE_ENDPOINT=w["imds"].url,
        AWS_SHARED_CREDENTIALS_FILE=credf, AWS_CONFIG_FILE=conff)
    envvars = dict(AWS_ACCESS_KEY_ID=envk["AccessKeyId"],
                   AWS_SECRET_ACCESS_KEY=envk["SecretAccessKey"],
                   AWS_SESSION_TOKEN=envk["Token"])
    # (what is set up, the files, botocore's method, the keys' issuer)
    cases = [
        ("env", (True, True, True), envvars, "env", "env"),
        ("web", (True, True, True), {}, "assume-role-with-web-identity",
         "sts"),
        ("cred", (True, True, True), dict(AWS_ROLE_ARN=None,
                                          AWS_WEB_IDENTITY_TOKEN_FILE=None),
         "shared-credentials-file", "credfile"),
        ("process", (False, True, True), dict(
            AWS_ROLE_ARN=None, AWS_WEB_IDENTITY_TOKEN_FILE=None),
         "custom-process", "process"),
        ("conf", (False, True, False), dict(
            AWS_ROLE_ARN=None, AWS_WEB_IDENTITY_TOKEN_FILE=None),
         "config-file", "conffile"),
        ("container", (False, False, False), dict(
            AWS_ROLE_ARN=None, AWS_WEB_IDENTITY_TOKEN_FILE=None),
         "container-role", "container"),
        ("imds", (False, False, False), dict(
            AWS_ROLE_ARN=None, AWS_WEB_IDENTITY_TOKEN_FILE=None,
            AWS_CONTAINER_CREDENTIALS_FULL_URI=None), "iam-role", "imds"),
    ]
    for name, fl, over, method, issuer in cases:
        files(*fl)
        with env(**base(d, **dict(everything, **over))):
            b = botocore()
            _, key, used, r = stfs_inspect()
            assert r.returncode == 0, (name, r.stderr)
            want = w["iss"].of(issuer)[-1]["AccessKeyId"]
            assert b["method"] == method, (name, b["method"])
            assert b["access_key"] == want, name
            # the S3 server saw stfs sign with that key, and no other
            assert used == {want}, (name, used, want)
            assert key in (None, want), (name, key)


def test_hostile(d, mnt):
    w = world()
    tok = write(os.path.join(d, "token"), "jwt-1")

    def refused(*want, **kw):
        with env(**base(d, **kw)):
            r = subprocess.run([T.STFS, "inspect", "s3://models/m/"],
                               capture_output=True, text=True, timeout=120)
        assert r.returncode == 1, r
        for x in want:
            assert x in r.stderr, (x, r.stderr)
        no_secret(r.stderr)
        return r.stderr

    # an endpoint outside the allowed hosts: refused before any request
    refused("not an https URL, nor http to a loopback",
            AWS_CONTAINER_CREDENTIALS_FULL_URI="http://192.0.2.7/creds")
    # a token the endpoint does not take; a token with a newline
    full = w["cont"].url + credemu.Container.PATH
    refused("HTTP 401", AWS_CONTAINER_CREDENTIALS_FULL_URI=full,
            AWS_CONTAINER_AUTHORIZATION_TOKEN="wrong")
    refused("control character", AWS_CONTAINER_CREDENTIALS_FULL_URI=full,
            AWS_CONTAINER_AUTHORIZATION_TOKEN=w["cont"].auth + "\nX: y")
    # an endpoint that repeats the token in its refusal: not shown
    echo = "echo-me-sekrit-token"
    orig = w["cont"].answer

    def echoing(h, method, body):
        if h.headers.get("Authorization") == echo:
            return 403, [("Content-Type", "application/json")], \
                json.dumps({"error": "denied: " + echo}).encode()
        return orig(h, method, body)
    w["cont"].answer = echoing
    try:
        text = refused("HTTP 403", "denied: (the token sent)",
                       AWS_CONTAINER_CREDENTIALS_FULL_URI=full,
                       AWS_CONTAINER_AUTHORIZATION_TOKEN=echo)
        assert echo not in text
    finally:
        w["cont"].answer = orig
    # a redirect is refused, not followed
    refused("redirect, refused", AWS_CONTAINER_CREDENTIALS_FULL_URI=(
        w["sts"].url.replace("127.0.0.1", "localhost") + "/redirect"),
        AWS_CONTAINER_AUTHORIZATION_TOKEN="x")
    # STS: a token it refuses (its code and message), a role missing, a
    # token file missing, an endpoint that is not STS
    write(tok, "jwt-stolen")
    refused("InvalidIdentityToken", "the token is not valid",
            AWS_ROLE_ARN=w["sts"].ROLE, AWS_WEB_IDENTITY_TOKEN_FILE=tok)
    write(tok, "jwt-1")
    refused("no role", AWS_WEB_IDENTITY_TOKEN_FILE=tok)
    refused("No such file", AWS_ROLE_ARN=w["sts"].ROLE,
            AWS_WEB_IDENTITY_TOKEN_FILE=os.path.join(d, "none"))
    # a token file that is a FIFO (no writer: its open would wait for
    # one forever) or a device: refused at once, for both token files
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    refused("the web identity token file %s: not a regular file" % fifo,
            AWS_ROLE_ARN=w["sts"].ROLE, AWS_WEB_IDENTITY_TOKEN_FILE=fifo)
    refused("not a regular file", AWS_ROLE_ARN=w["sts"].ROLE,
            AWS_WEB_IDENTITY_TOKEN_FILE="/dev/zero")
    refused("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE %s: not a regular file"
            % fifo, AWS_CONTAINER_CREDENTIALS_FULL_URI=full,
            AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=fifo)
    refused("not an AssumeRoleWithWebIdentityResponse",
            AWS_ROLE_ARN=w["sts"].ROLE, AWS_WEB_IDENTITY_TOKEN_FILE=tok,
            AWS_ENDPOINT_URL_STS=w["sts"].url + "/garbage")
    # credential_process: a failure (its stderr quoted), JSON that is not
    # strict (a name twice), the wrong Version, too much output
    k = w["iss"].issue("process")
    bad = [
        ("import sys\nsys.stderr.write('no session\\n')\nsys.exit(3)\n",
         "exited with status 3: no session"),
        ("print('{\"Version\": 1, \"Version\": 1}')\nraise SystemExit\n",
         "a name given twice"),
        ("print(json.dumps(dict(%r, Version=2)))\nraise SystemExit\n"
         % proc_keys(k), "Version is not the number 1"),
        ("print('x' * 200000)\nraise SystemExit\n", "over 64 KiB"),
    ]
    for i, (code, want) in enumerate(bad):
        script = process_script(d, {}, "p%d.py" % i, code)
        conf = write(os.path.join(d, "config"),
                     "[default]\ncredential_process = %s\n" % script)
        refused(want, AWS_CONFIG_FILE=conf)
    # an endpoint that trickles its answer (4 bytes a second, above a
    # stall's 1 byte/s, of a Content-Length of 4,000: 17 minutes): a
    # stall all the same, refused within seconds
    trickle = socket.socket()
    trickle.bind(("127.0.0.1", 0))
    trickle.listen(8)

    def drip():
        while True:
            try:
                c, _ = trickle.accept()
            except OSError:
                return
            try:
                c.settimeout(60)
                got = b""
                while b"\r\n\r\n" not in got:
                    got += c.recv(4096) or b"\r\n\r\n"
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                          b"Content-Length: 4000\r\n\r\n")
                for _ in range(400):
                    c.sendall(b"a")
                    time.sleep(0.25)
            except OSError:
                pass
            c.close()
    threading.Thread(target=drip, daemon=True).start()
    t = time.time()
    refused("the instance metadata service",
            AWS_EC2_METADATA_DISABLED=None,
            AWS_EC2_METADATA_SERVICE_ENDPOINT="http://127.0.0.1:%d" %
            trickle.getsockname()[1])
    assert time.time() - t < 30, time.time() - t
    trickle.close()
    # IMDS: no role there means unsigned requests (refused by this
    # server), with a line saying why; a disabled IMDS is not asked
    n = len(w["imds"].requests)
    refused("AccessDenied", AWS_EC2_METADATA_DISABLED=None,
            AWS_EC2_METADATA_SERVICE_ENDPOINT=w["cont"].url)
    refused("AccessDenied", AWS_EC2_METADATA_SERVICE_ENDPOINT=w["imds"].url)
    assert len(w["imds"].requests) == n


# STS's endpoint for a region (tests/unit/check_creds.c, t_sts_url: stfs's)
STS_URLS = [
    (None, None, "https://sts.amazonaws.com"),
    ("us-east-1", None, "https://sts.us-east-1.amazonaws.com"),
    ("eu-west-1", None, "https://sts.eu-west-1.amazonaws.com"),
    ("eu-west-1", "legacy", "https://sts.amazonaws.com"),
    ("af-south-1", "legacy", "https://sts.af-south-1.amazonaws.com"),
    ("cn-north-1", None, "https://sts.cn-north-1.amazonaws.com.cn"),
]
STS_URL_SCRIPT = r"""
import json, os, sys, botocore.session
out = []
for region, mode, _ in json.loads(sys.argv[1]):
    if mode:
        os.environ["AWS_STS_REGIONAL_ENDPOINTS"] = mode
    else:
        os.environ.pop("AWS_STS_REGIONAL_ENDPOINTS", None)
    c = botocore.session.get_session().create_client(
        "sts", region_name=region, aws_access_key_id="a",
        aws_secret_access_key="b")
    out.append(c.meta.endpoint_url)
print(json.dumps(out))
"""


def test_sts_endpoints(d):
    """The table of STS endpoints stfs's unit test holds is botocore's
    (no request is made: the client is only made)."""
    with env(**base(d, AWS_ENDPOINT_URL_STS=None, AWS_REGION=None)):
        r = subprocess.run([BOTO, "-c", STS_URL_SCRIPT,
                            json.dumps(STS_URLS)], capture_output=True,
                           text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [u for _, _, u in STS_URLS]
    with open(os.path.join(TESTS_DIR, "unit", "check_creds.c")) as f:
        c = f.read()
    for region, mode, url in STS_URLS:
        assert '{ %s, %s, "%s" }' % (
            '"%s"' % region if region else "NULL",
            '"%s"' % mode if mode else "NULL", url) in c, url


def redirect_answer(emu):
    """The STS emulator answers GET /redirect with a 302 (for the
    container provider's redirect test), and POST /garbage/ with a 200
    that is not STS's answer."""
    orig = emu.answer

    def answer(h, method, body):
        if method == "GET" and h.path == "/redirect":
            return 302, [("Location", W["cont"].url +
                          credemu.Container.PATH)], b""
        if method == "POST" and h.path == "/garbage/":
            return 200, [("Content-Type", "text/xml")], \
                b"<AssumeRoleWithWebIdentityResponse><x/>" \
                b"</AssumeRoleWithWebIdentityResponse>"
        return orig(h, method, body)
    emu.answer = answer


def test_refresh(d, mnt):
    """Keys that live 60 s, under one mount, through web identity."""
    w = world()
    life = 60
    sts = credemu.Sts(w["iss"], valid=("jwt-1",), life=life, stable=False,
                      name="sts-short")
    tok = write(os.path.join(d, "token"), "jwt-1")
    # five shards of one tensor each, read last to first: each step
    # reads a file no read before it brought (a prefetch goes on into the
    # next shard, never back), so each read is a request signed then
    blob = [bytes([i + 1]) * (256 << 10) for i in range(5)]
    wm = {}
    for i, b in enumerate(blob):
        name = "model-%05d-of-00005.safetensors" % (i + 1)
        path = T.write_st(os.path.join(d, name), [("t%d" % i, "U8", [len(b)],
                                                   b)])
        with open(path, "rb") as f:
            w["sw"].put("models", "r/" + name, f.read())
        wm["t%d" % i] = name
    w["sw"].put("models", "r/model.safetensors.index.json", json.dumps(
        {"metadata": {}, "weight_map": wm}).encode())
    log = os.path.join(d, "log")
    t0 = time.time()

    def read_now(i, ok=True):
        fp = os.path.join(mnt, "t%d" % i)
        n = used_count()
        try:
            with open(fp, "rb") as f:
                data = f.read()
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError as e:
            assert not ok and e.errno == 5, (i, e, slurp(log)[-2000:])
            return None
        assert ok, "t%d was read at %.0f s; want EIO" % (i, time.time() - t0)
        assert data == blob[i]
        return used_since(n)

    def keys():
        return w["iss"].of("sts-short")

    def wait_for(cond, within, what):
        end = time.time() + within
        while time.time() < end:
            if cond():
                return
            time.sleep(0.5)
        raise AssertionError("%s not within %d s: %s" % (
            what, within, slurp(log)[-3000:]))

    with env(**base(d, AWS_ROLE_ARN=sts.ROLE, AWS_WEB_IDENTITY_TOKEN_FILE=tok,
                    AWS_ENDPOINT_URL_STS=sts.url)):
        p = mount_logged("s3://models/r/", mnt, log, "-o", "nocache")
        try:
            k1 = keys()[-1]
            assert set(read_now(4)) == {k1["AccessKeyId"]}      # ~0 s
            # the token rotates under the mount: STS takes only the new
            sts.valid = {"jwt-2"}
            write(tok, "jwt-2")
            wait_for(lambda: len(keys()) >= 2, life, "a refresh")
            k2 = keys()[1]
            assert k2["time"] < k1["expires"], "refreshed after expiry"
            assert k2["info"]["token"] == "jwt-2"
            wait_for(lambda: len(keys()) >= 3, life, "a second refresh")
            k3 = keys()[2]
            assert k3["time"] < k2["expires"]
            time.sleep(max(0, t0 + 90 - time.time()))
            # ~90 s: k1 and k2 expired; k3 signs
            used = read_now(3)
            assert used and set(used) <= {k3["AccessKeyId"],
                                          (keys()[-1])["AccessKeyId"]}
            assert k1["AccessKeyId"] not in used
            # STS fails for 30 s from just before the next refresh
            k = keys()[-1]
            start = k["expires"] - life / 4 - 3
            time.sleep(max(0, start - time.time()))
            sts.fail_until = time.time() + 30
            n = len(keys())
            assert read_now(2)                  # the old keys still hold
            time.sleep(max(0, k["expires"] + 2 - time.time()))
            assert len(keys()) == n, "refreshed while STS failed"
            read_now(1, ok=False)               # expired: EIO
            text = slurp(log)
            assert "refreshing the credentials from web identity" in text
            assert "expired at" in text and "could not be refreshed" in text
            wait_for(lambda: len(keys()) > n, 45, "a refresh after STS "
                     "recovered")
            kn = keys()[-1]
            # reads come back (after the failure remembered a moment)
            end = time.time() + 20
            while True:
                try:
                    used = read_now(0)
                    break
                except AssertionError:
                    if time.time() > end:
                        raise
                    time.sleep(1)
            assert used and set(used) <= {kn["AccessKeyId"]}
            print("     refreshes at %s s; STS down %.0f-%.0f s; back at "
                  "%.0f s" % ([round(x["time"] - t0) for x in keys()],
                              start - t0, start + 30 - t0, time.time() - t0))
        finally:
            stop_logged(p, mnt)
            sts.stop()
    no_secret(slurp(log))


def test_unmount_refreshing(d, mnt):
    """An unmount while a refresh runs a credential_process that takes
    25 s: the daemon exits at once, the process killed with it."""
    w = world()
    keys = proc_keys(w["iss"].issue("process", life=600))
    keys["Expiration"] = time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                       time.gmtime(time.time() + 8))
    runs = os.path.join(d, "runs")
    # the first run answers at once; a refresh sleeps 25 s first
    script = process_script(d, keys, "slow.py", (
        "import os, time\nagain = os.path.exists(%r)\n"
        "open(%r, 'a').write('x')\nif again:\n    time.sleep(25)\n")
        % (runs, runs))
    conf = write(os.path.join(d, "config"),
                 "[default]\ncredential_process = %s\n" % script)
    blob = os.urandom(4 << 20)
    path = T.write_st(os.path.join(d, "model.safetensors"),
                      [("t", "U8", [len(blob)], blob)])
    with open(path, "rb") as f:
        w["sw"].put("models", "slow/model.safetensors", f.read())
    log = os.path.join(d, "log")
    with env(**base(d, AWS_CONFIG_FILE=conf)):
        p = mount_logged("s3://models/slow/", mnt, log, "-o", "nocache")
        # a request starts the refresher (due 2 s before the expiry)
        with open(os.path.join(mnt, "t"), "rb") as f:
            f.seek(1 << 20)
            assert f.read(4096) == blob[1 << 20:(1 << 20) + 4096]
        end = time.time() + 20
        while len(read(runs)) < 2:
            assert time.time() < end, slurp(log)
            time.sleep(0.1)
        time.sleep(0.5)
        t = time.time()
        stop_logged(p, mnt)
        took = time.time() - t
    assert took < 5, "the daemon exited %.1f s after the unmount" % took
    assert "was still running when stopped; killed" in slurp(log), \
        slurp(log)
    for pid in os.listdir("/proc"):     # the process went with it
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                assert script.encode() not in f.read(), pid
        except OSError:
            pass


def run():
    try:
        # (the redirect test's 302 comes from the STS emulator)
        world()
        redirect_answer(W["sts"])
        return T.run_tests([
            test_each_provider,
            test_chain_order,
            test_sts_endpoints,
            test_hostile,
            test_refresh,
            test_unmount_refreshing,
        ])
    finally:
        stop_world()


if __name__ == "__main__":
    sys.exit(run())

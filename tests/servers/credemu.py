"""credemu.py: the services that hand out AWS credentials, emulated on
127.0.0.1 for tests/remote/test_creds.py, written from AWS's descriptions:

- Imds: IMDSv2.  PUT /latest/api/token needs X-aws-ec2-metadata-token-ttl-
  seconds (1 to 21600, else 400) and is refused (403) when the request
  was forwarded (X-Forwarded-For: a token never leaves the instance's
  first hop); a GET without a valid token is 401 (no IMDSv1); then
  /latest/meta-data/iam/security-credentials/ names the role and
  .../ROLE gives its keys (Code, LastUpdated, Type, AccessKeyId,
  SecretAccessKey, Token, Expiration).
- Container: the ECS / EKS Pod Identity endpoint: GET PATH with the
  Authorization header equal to the token of the moment (else 401), JSON
  with AccessKeyId, SecretAccessKey, Token, Expiration.
- Sts: AssumeRoleWithWebIdentity (the query protocol: a form POST), the
  role and the web identity token checked (InvalidIdentityToken), the
  answer in STS's XML; .fail_until makes it answer 503 until then.

Every key set comes from one Issuer: new keys (ASIA...) each time,
living .life seconds, recorded in .issued (with the provider and what
the request carried) and written to a JSON file that the tests' S3
server reads (tests/servers/swift/s3sts.py): it accepts those keys, with their
session token, until they expire.  An emulator hands out the same keys
again while more than half their life is left (stable, by default), so
that two clients (stfs and botocore) asking one after the other get the
same; Sts(stable=False, life=60) hands out new ones that live 60 s.
"""
import datetime
import http.server
import json
import os
import secrets
import string
import threading
import time
import urllib.parse

ALNUM = string.ascii_uppercase + string.digits


def iso(t):
    return datetime.datetime.fromtimestamp(
        t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Issuer:
    def __init__(self, path, life=3600):
        self.path, self.life = path, life
        self.lock = threading.Lock()
        self.issued = []            # dicts: provider, time, keys, info
        self.keys = {}              # akid -> the S3 server's record
        self.current = {}           # provider -> last keys (stable)
        self._write()

    def _write(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"only_temporary": True, "keys": self.keys}, f)
        os.replace(tmp, self.path)

    def issue(self, provider, life=None, stable=True, **info):
        now = time.time()
        life = life or self.life
        with self.lock:
            cur = self.current.get(provider)
            if stable and cur and cur["expires"] - now > life / 2:
                return cur
            k = {"AccessKeyId": "ASIA" + "".join(
                     secrets.choice(ALNUM) for _ in range(16)),
                 "SecretAccessKey": secrets.token_urlsafe(30),
                 "Token": "IQo" + secrets.token_urlsafe(300),
                 "expires": now + life, "provider": provider}
            k["Expiration"] = iso(k["expires"])
            self.keys[k["AccessKeyId"]] = {
                "secret": k["SecretAccessKey"], "token": k["Token"],
                "expires": k["expires"], "provider": provider}
            self.issued.append(dict(k, time=now, info=info))
            self.current[provider] = k
            self._write()
            return k

    def of(self, provider):
        with self.lock:
            return [i for i in self.issued if i["provider"] == provider]


class _Server:
    """A threading HTTP server on 127.0.0.1 whose handler calls
    self.answer(handler, method) -> (status, headers, body)."""

    def __init__(self):
        emu = self
        self.requests = []
        self.lock = threading.Lock()

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _go(self, method):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                with emu.lock:
                    emu.requests.append((method, self.path, dict(
                        (k.lower(), v) for k, v in self.headers.items()),
                        body))
                st, hdrs, out = emu.answer(self, method, body)
                self.send_response(st)
                for k, v in hdrs:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def do_GET(self):
                self._go("GET")

            def do_PUT(self):
                self._go("PUT")

            def do_POST(self):
                self._go("POST")

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.server.server_address[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       daemon=True)
        self.thread.start()

    def stop(self):
        if self.server:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


class Imds(_Server):
    ROLE = "stfs-node-role"

    def __init__(self, issuer):
        self.issuer, self.tokens = issuer, {}
        super().__init__()

    def answer(self, h, method, body):
        p = h.path
        if method == "PUT" and p == "/latest/api/token":
            if h.headers.get("X-Forwarded-For"):
                return 403, [], b""
            ttl = h.headers.get("X-aws-ec2-metadata-token-ttl-seconds", "")
            if not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
                return 400, [], b""
            tok = "AQAEA" + secrets.token_urlsafe(40)
            with self.lock:
                self.tokens[tok] = time.time() + int(ttl)
            return 200, [("X-aws-ec2-metadata-token-ttl-seconds", ttl)], \
                tok.encode()
        if method != "GET":
            return 405, [], b""
        tok = h.headers.get("X-aws-ec2-metadata-token")
        with self.lock:
            ok = tok in self.tokens and self.tokens[tok] > time.time()
        if not ok:
            return 401, [], b""         # IMDSv2 only
        base = "/latest/meta-data/iam/security-credentials/"
        if p == base:
            return 200, [("Content-Type", "text/plain")], self.ROLE.encode()
        if p == base + self.ROLE:
            k = self.issuer.issue("imds", role=self.ROLE)
            doc = {"Code": "Success", "LastUpdated": iso(time.time()),
                   "Type": "AWS-HMAC", "AccessKeyId": k["AccessKeyId"],
                   "SecretAccessKey": k["SecretAccessKey"],
                   "Token": k["Token"], "Expiration": k["Expiration"]}
            return 200, [("Content-Type", "text/plain")], \
                json.dumps(doc, indent=2).encode()
        return 404, [], b""


class Container(_Server):
    PATH = "/v2/credentials/pod-1234"

    def __init__(self, issuer, auth="pod-identity-token-1"):
        self.issuer, self.auth = issuer, auth
        super().__init__()

    def answer(self, h, method, body):
        if method != "GET" or h.path != self.PATH:
            return 404, [], b""
        if h.headers.get("Authorization") != self.auth:
            return 401, [("Content-Type", "application/json")], \
                b'{"message": "invalid authorization token"}'
        k = self.issuer.issue("container", auth=self.auth)
        doc = {"AccessKeyId": k["AccessKeyId"],
               "SecretAccessKey": k["SecretAccessKey"],
               "Token": k["Token"], "AccountId": "111122223333",
               "Expiration": k["Expiration"]}
        return 200, [("Content-Type", "application/json")], \
            json.dumps(doc).encode()


STS_NS = "https://sts.amazonaws.com/doc/2011-06-15/"


class Sts(_Server):
    ROLE = "arn:aws:iam::111122223333:role/stfs-irsa"

    def __init__(self, issuer, valid=("jwt-1",), life=None, stable=True,
                 name="sts"):
        self.issuer, self.valid = issuer, set(valid)
        self.life, self.stable, self.name = life, stable, name
        self.fail_until = 0.0
        self.tokens_seen = []       # (time, token) of each call
        super().__init__()

    def error(self, st, code, msg):
        body = ('<ErrorResponse xmlns="%s"><Error><Type>Sender</Type>'
                '<Code>%s</Code><Message>%s</Message></Error><RequestId>'
                'c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId>'
                '</ErrorResponse>' % (STS_NS, code, msg)).encode()
        return st, [("Content-Type", "text/xml")], body

    def answer(self, h, method, body):
        if method != "POST" or urllib.parse.urlsplit(h.path).path != "/":
            return 404, [], b""
        f = dict(urllib.parse.parse_qsl(body.decode()))
        tok = f.get("WebIdentityToken")
        with self.lock:
            self.tokens_seen.append((time.time(), tok))
            failing = time.time() < self.fail_until
        if failing:
            return self.error(503, "ServiceUnavailable", "down for a test")
        if f.get("Action") != "AssumeRoleWithWebIdentity" or \
                f.get("Version") != "2011-06-15":
            return self.error(400, "InvalidAction", "not here")
        if f.get("RoleArn") != self.ROLE or not f.get("RoleSessionName"):
            return self.error(403, "AccessDenied", "not this role")
        if tok not in self.valid:
            return self.error(400, "InvalidIdentityToken",
                              "the token is not valid")
        k = self.issuer.issue(self.name, life=self.life, stable=self.stable,
                              token=tok, role=f["RoleArn"])
        out = ('<AssumeRoleWithWebIdentityResponse xmlns="%s">'
               '<AssumeRoleWithWebIdentityResult>'
               '<SubjectFromWebIdentityToken>system:serviceaccount:ml:'
               'loader</SubjectFromWebIdentityToken>'
               '<Audience>sts.amazonaws.com</Audience>'
               '<AssumedRoleUser><Arn>%s/%s</Arn><AssumedRoleId>AROA:%s'
               '</AssumedRoleId></AssumedRoleUser>'
               '<Credentials><SessionToken>%s</SessionToken>'
               '<SecretAccessKey>%s</SecretAccessKey>'
               '<Expiration>%s</Expiration>'
               '<AccessKeyId>%s</AccessKeyId></Credentials>'
               '<Provider>oidc.eks.example</Provider>'
               '</AssumeRoleWithWebIdentityResult>'
               '<ResponseMetadata><RequestId>ad4156e9-bce1-11e2-82e6-'
               '6b6efEXAMPLE</RequestId></ResponseMetadata>'
               '</AssumeRoleWithWebIdentityResponse>'
               % (STS_NS, f["RoleArn"], f["RoleSessionName"],
                  f["RoleSessionName"], k["Token"], k["SecretAccessKey"],
                  k["Expiration"], k["AccessKeyId"])).encode()
        return 200, [("Content-Type", "text/xml")], out

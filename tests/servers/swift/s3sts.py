"""s3sts.py: a WSGI middleware of the tests' own in Swift's proxy, before
s3api (tests/servers/swift/proxy-server.conf), that makes the tests' S3 server
accept temporary credentials as AWS S3 does: keys handed out by the
credential emulators of tests/servers/credemu.py, which write them to
creds_file (JSON: {"only_temporary": bool, "keys": {AKID: {"secret",
"token", "expires"}}}).

A request signed with a key id the file names (SigV4, the Authorization
header) must carry that key's session token in x-amz-security-token,
signed, before the key's expiry, and its signature must be right for the
key's secret (checked here, over the canonical request rebuilt from the
WSGI environment); else 403 with AWS's code (InvalidAccessKeyId,
InvalidToken, ExpiredToken, SignatureDoesNotMatch).  A request that
passes is signed again as tempauth's test:tester (its token header
removed) for s3api, and its key id is appended to used_file with the
method and path, so a test sees which keys stfs used.  With
only_temporary, a GET or HEAD signed with any other key is refused
(AccessDenied): reads go through the emulators' keys alone (objects are
still put with test:tester).  Without the file nothing changes.
"""
import hashlib
import hmac
import json
import re
import time
from urllib.parse import quote, unquote

TESTER, TESTER_SECRET = "test:tester", "tester-7QfZ-s3key"


def _err(start_response, code, msg):
    body = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code>'
            '<Message>%s</Message></Error>' % (code, msg)).encode()
    start_response("403 Forbidden", [("Content-Type", "application/xml"),
                                     ("Content-Length", str(len(body)))])
    return [body]


def _header(env, name):
    if name == "host":
        return env.get("HTTP_HOST", "")
    if name in ("content-type", "content-length"):
        return env.get(name.upper().replace("-", "_"), "")
    return env.get("HTTP_" + name.upper().replace("-", "_"), "")


def _signature(env, names, access_scope, secret, amzdate):
    """The SigV4 signature of the request in env, over the headers names
    (sorted, lower case), for scope DAY/REGION/s3/aws4_request."""
    path = env.get("RAW_PATH_INFO") or quote(env.get("PATH_INFO", ""))
    q = env.get("QUERY_STRING", "")
    pairs = sorted((quote(unquote(k), safe="-_.~"),
                    quote(unquote(v), safe="-_.~"))
                   for k, _, v in (p.partition("=") for p in q.split("&")
                                   if p))
    cq = "&".join("%s=%s" % kv for kv in pairs)
    canon = ["%s:%s" % (n, " ".join(_header(env, n).split()))
             for n in names]
    payload = env.get("HTTP_X_AMZ_CONTENT_SHA256", "UNSIGNED-PAYLOAD")
    creq = "\n".join([env["REQUEST_METHOD"], path, cq] + canon +
                     ["", ";".join(names), payload])
    day, region, service = access_scope
    scope = "%s/%s/%s/aws4_request" % (day, region, service)
    sts = "\n".join(["AWS4-HMAC-SHA256", amzdate, scope,
                     hashlib.sha256(creq.encode()).hexdigest()])
    k = ("AWS4" + secret).encode()
    for part in (day, region, service, "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()


AUTH = re.compile(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/"
                  r"([^/]+)/aws4_request, ?SignedHeaders=([^,]+), ?"
                  r"Signature=([0-9a-f]{64})$")


class S3Sts:
    def __init__(self, app, conf):
        self.app = app
        self.creds_file = conf.get("creds_file")
        self.used_file = conf.get("used_file")

    def _table(self):
        try:
            with open(self.creds_file) as f:
                return json.load(f)
        except (OSError, ValueError, TypeError):
            return None

    def __call__(self, env, start_response):
        table = self._table()
        if table is None:
            return self.app(env, start_response)
        m = AUTH.match(env.get("HTTP_AUTHORIZATION", ""))
        akid = m.group(1) if m else None
        keys = table.get("keys", {})
        if akid not in keys:
            if table.get("only_temporary") and \
                    env.get("REQUEST_METHOD") in ("GET", "HEAD"):
                return _err(start_response, "AccessDenied", "reads take "
                            "the credential emulators' keys only")
            if akid and akid.startswith("ASIA"):
                return _err(start_response, "InvalidAccessKeyId",
                            "no such temporary key")
            return self.app(env, start_response)
        k = keys[akid]
        names = m.group(5).split(";")
        if env.get("HTTP_X_AMZ_SECURITY_TOKEN") != k["token"] or \
                "x-amz-security-token" not in names:
            return _err(start_response, "InvalidToken", "the session token "
                        "is missing, unsigned or not this key's")
        if time.time() >= k["expires"]:
            return _err(start_response, "ExpiredToken", "the provided "
                        "token has expired")
        amzdate = env.get("HTTP_X_AMZ_DATE", "")
        scope = (m.group(2), m.group(3), m.group(4))
        want = _signature(env, names, scope, k["secret"], amzdate)
        if not hmac.compare_digest(want, m.group(6)):
            return _err(start_response, "SignatureDoesNotMatch", "not "
                        "signed with this key's secret")
        # s3api knows tempauth's users only: signed again as one of them
        del env["HTTP_X_AMZ_SECURITY_TOKEN"]
        names = [n for n in names if n != "x-amz-security-token"]
        sig = _signature(env, names, scope, TESTER_SECRET, amzdate)
        env["HTTP_AUTHORIZATION"] = (
            "AWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/aws4_request, "
            "SignedHeaders=%s, Signature=%s" % ((TESTER,) + scope +
                                                (";".join(names), sig)))
        if self.used_file:
            with open(self.used_file, "a") as f:
                f.write("%s %.3f %s %s\n" % (
                    akid, time.time(), env["REQUEST_METHOD"],
                    env.get("PATH_INFO", "")))
        return self.app(env, start_response)


def filter_factory(global_conf, **local_conf):
    conf = dict(global_conf, **local_conf)
    return lambda app: S3Sts(app, conf)


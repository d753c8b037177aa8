"""s3extras.py: a WSGI middleware of the tests' own in Swift's proxy,
before s3api (tests/servers/swift/proxy-server.conf), that gives the tests' S3
server what AWS S3 has and Swift 2.30's s3api does not: flexible
checksums and server-side encryption's ETags.

- Every x-amz-* header must be signed, as AWS has it: a request that
  carries x-amz-checksum-mode without naming it in its SignedHeaders (or
  a presigned URL's X-Amz-SignedHeaders) is refused with 403
  AccessDenied before s3api sees it.  (s3api itself checks the signature
  over the headers that are named, so a signed value that was changed
  fails there.)
- An object PUT with the metadata x-amz-meta-s3x: MODE[,MODE...] is
  answered on GET as such an object of AWS would be:
    sha256     x-amz-checksum-sha256 and -crc64nvme, FULL_OBJECT
    crc64nvme  x-amz-checksum-crc64nvme alone, FULL_OBJECT (AWS's default
               since 2025)
    tamper     those checksums are of other bytes (the object's and "!")
    badb64     x-amz-checksum-sha256 is not base64
    composite  a multipart upload's: x-amz-checksum-sha256 "B64-1" (of
               the part's checksum, not of the bytes), type COMPOSITE,
               and an ETag "HEX-1" (the MD5 of the part's MD5)
    kms        SSE-KMS: x-amz-server-side-encryption: aws:kms, and an
               ETag of 32 hex digits that is not the MD5 of the bytes
    ssec       SSE-C: x-amz-server-side-encryption-customer-algorithm,
               and such an ETag
  Checksums are sent only when the request has x-amz-checksum-mode:
  ENABLED and no Range (S3 returns an object's checksum for the whole
  object only), computed over the real bytes of the answer.  HEAD is
  passed through as s3api answers it.
- An object's ETag is the same in a listing and in a GET's answer, as
  AWS has it: the PUT of a kms, ssec or composite object stores that
  ETag as the one its container lists (Swift's
  X-Object-Sysmeta-Container-Update-Override-Etag), and a GET's If-Match
  is checked here against the ETag the answer gives (412 when it is not
  that), not by Swift against the MD5.
- A request line in absolute form (GET http://HOST:PORT/BUCKET/KEY, as
  the AWS CRT client in the Run:ai Model Streamer sends it) is taken as
  its path, as HTTP/1.1 servers and AWS take it; Swift's own parser
  would answer 500.
"""
import base64
import hashlib
import io
import re
from urllib.parse import parse_qs


def _crc64_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x9a6c9329ac4bc9b5 if c & 1 else c >> 1
        t.append(c)
    return t


TABLE = _crc64_table()


def crc64nvme(data):
    """CRC-64/NVME (reflected 0x9a6c9329ac4bc9b5, all ones in and out)."""
    c = 0xffffffffffffffff
    for b in data:
        c = TABLE[(c ^ b) & 0xff] ^ (c >> 8)
    return c ^ 0xffffffffffffffff


def b64(raw):
    return base64.b64encode(raw).decode()


def checksums(modes, body):
    """The headers of the checksums modes ask for, of body."""
    if "tamper" in modes:
        body = body + b"!"
    h = []
    if "composite" in modes:
        part = hashlib.sha256(body).digest()
        return [("x-amz-checksum-sha256",
                 b64(hashlib.sha256(part).digest()) + "-1"),
                ("x-amz-checksum-type", "COMPOSITE")]
    if "badb64" in modes:
        return [("x-amz-checksum-sha256", "not*base64!"),
                ("x-amz-checksum-type", "FULL_OBJECT")]
    if "sha256" in modes:
        h.append(("x-amz-checksum-sha256",
                  b64(hashlib.sha256(body).digest())))
    if "sha256" in modes or "crc64nvme" in modes:
        h.append(("x-amz-checksum-crc64nvme",
                  b64(crc64nvme(body).to_bytes(8, "big"))))
        h.append(("x-amz-checksum-type", "FULL_OBJECT"))
    return h


def etag_of(modes, body):
    """The ETag AWS would give an object of modes and bytes body (without
    its quotes), or None: its MD5."""
    if "kms" in modes or "ssec" in modes:
        return hashlib.md5(b"encrypted:" + body).hexdigest()
    if "composite" in modes:
        return "%s-1" % hashlib.md5(hashlib.md5(body).digest()).hexdigest()
    return None


def answer(modes, body, headers, checksum_mode, ranged):
    """headers as AWS would send them for an object of modes."""
    out = [(k, v) for k, v in headers if k.lower() != "etag"]
    etag = dict((k.lower(), v) for k, v in headers).get("etag")
    if "kms" in modes or "ssec" in modes:
        etag = '"%s"' % etag_of(modes, body)
        if "kms" in modes:
            out.append(("x-amz-server-side-encryption", "aws:kms"))
            out.append(("x-amz-server-side-encryption-aws-kms-key-id",
                        "arn:aws:kms:us-east-1:111122223333:key/tests"))
        else:
            out.append(("x-amz-server-side-encryption-customer-algorithm",
                        "AES256"))
    elif "composite" in modes:
        etag = '"%s"' % etag_of(modes, body)
    if etag:
        out.append(("ETag", etag))
    if checksum_mode == "ENABLED" and not ranged:
        out += checksums(modes, body)
    return out


def not_signed(env):
    """Does the request carry x-amz-checksum-mode unsigned?"""
    if "HTTP_X_AMZ_CHECKSUM_MODE" not in env:
        return False
    m = re.search(r"SignedHeaders=([^,\s]+)", env.get("HTTP_AUTHORIZATION",
                                                      ""))
    signed = m.group(1) if m else ""
    q = parse_qs(env.get("QUERY_STRING", ""))
    signed += ";" + ";".join(q.get("X-Amz-SignedHeaders", []))
    return "x-amz-checksum-mode" not in signed.lower().split(";")


DENIED = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>'
          b'AccessDenied</Code><Message>There were headers present in the '
          b'request which were not signed</Message><HeadersNotSigned>'
          b'x-amz-checksum-mode</HeadersNotSigned></Error>')


FAILED = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>'
          b'PreconditionFailed</Code><Message>At least one of the '
          b'pre-conditions you specified did not hold</Message>'
          b'<Condition>If-Match</Condition></Error>')


class S3Extras:
    def __init__(self, app):
        self.app = app

    def __call__(self, env, start_response):
        for k in ("PATH_INFO", "RAW_PATH_INFO"):
            m = re.match(r"https?://[^/]+(/.*)\Z", env.get(k, ""), re.S)
            if m:
                env[k] = m.group(1)
        if not_signed(env):
            start_response("403 Forbidden",
                           [("Content-Type", "application/xml"),
                            ("Content-Length", str(len(DENIED)))])
            return [DENIED]
        meta = env.get("HTTP_X_AMZ_META_S3X")
        if env.get("REQUEST_METHOD") == "PUT" and meta:
            # the ETag the container lists: the one GETs will give
            n = int(env.get("CONTENT_LENGTH") or 0)
            body = env["wsgi.input"].read(n)
            env["wsgi.input"] = io.BytesIO(body)
            e = etag_of(set(m.strip() for m in meta.split(",")), body)
            if e:
                env["HTTP_X_OBJECT_SYSMETA_CONTAINER_UPDATE_OVERRIDE_"
                    "ETAG"] = e
        if env.get("REQUEST_METHOD") != "GET":
            return self.app(env, start_response)
        if_match = env.pop("HTTP_IF_MATCH", None)
        got = {}

        def keep(status, headers, exc_info=None):
            got["status"], got["headers"] = status, headers
            return lambda data: None

        it = self.app(env, keep)
        try:
            body = b"".join(it)
        finally:
            if hasattr(it, "close"):
                it.close()
        status, headers = got["status"], got["headers"]
        meta = dict((k.lower(), v) for k, v in headers).get("x-amz-meta-s3x")
        if meta and status.startswith("200"):
            modes = set(m.strip() for m in meta.split(","))
            headers = answer(modes, body, headers,
                             env.get("HTTP_X_AMZ_CHECKSUM_MODE"),
                             "HTTP_RANGE" in env)
        etag = dict((k.lower(), v) for k, v in headers).get("etag")
        if if_match and if_match != "*" and status[:1] == "2" and \
                etag not in [x.strip() for x in if_match.split(",")]:
            start_response("412 Precondition Failed",
                           [("Content-Type", "application/xml"),
                            ("Content-Length", str(len(FAILED)))])
            return [FAILED]
        start_response(status, headers)
        return [body]


def filter_factory(global_conf, **local_conf):
    return S3Extras

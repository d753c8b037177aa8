#!/usr/bin/env python3
"""test_metrics.py: a daemon's counters (-o metrics=PATH, `stfs stats`,
docs/metrics.md) against what real servers started here saw.

- nginx (Debian's) serving a checkpoint: after a cold read the bytes
  fetched equal the body bytes nginx logged and the range requests its
  requests; after a warm read (a new mount, the same cache) the bytes read
  from the cache equal the bytes read, none fetched but the open's;
- a fault server answering 429: the 429s counted equal those it sent, and
  the retries too; one answering 404 once mounted: the reader's errno is
  the one counted, the 404s as 4xx;
- hf:// through the Hub emulator (tests/servers/hubemu.py): resolves equal its
  302s, lists its API answers, every request one it or nginx saw; the
  HF_TOKEN in no output;
- s3:// on the tests' Swift with keys from the container endpoint
  emulator (tests/servers/credemu.py): its calls are the credentials requests
  counted; the keys, session token and authorization token in no output;
- `stfs prefetch`: the bytes asked and cached equal its state's; a cached
  block spoiled on disk is one failed check;
- the file: `promtool check metrics` (Debian's prometheus) finds nothing
  to say; Debian's node exporter, its textfile collector pointed at the
  file's directory on a free loopback port, serves the same values; a
  reader in a loop never sees a part of one while the daemon replaces it;
- no secret of the test's URL (password, query), no URL, host or tensor
  name in the file, the xattr or `stfs stats` (text and --json);
- a source of 10,000 tensors has the same series as one of 1 (the bound
  docs/metrics.md states);
- `stfs stats`: the mount's values, --json, its exit statuses, EPERM for
  another user (allow_other), and -o nometrics.
"""
import errno
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402
import credemu  # noqa: E402
import hubemu  # noqa: E402
import s3server  # noqa: E402
from fixtures import (Nginx, big_file, env, free_port, read,  # noqa: E402
                      stats_json, total, wait_blocks, wait_port, world)
from rawhttp import RawServer, file_range  # noqa: E402

SERIES = 293            # docs/metrics.md: the series of every daemon
NODE_EXPORTER = shutil.which("prometheus-node-exporter") or \
    "/usr/bin/prometheus-node-exporter"


def parse(text):
    """{(name, ((label, value), ...)): float} of exposition text; every
    line must be a comment or a whole series."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$', line)
        assert m, "not a series: %r" % line
        labels = tuple(sorted(re.findall(r'(\w+)="([^"]*)"', m.group(2) or
                                         "")))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def val(s, name, **labels):
    return s[(name, tuple(sorted(labels.items())))]


def slurp(path):
    with open(path) as f:
        return f.read()


def test_nginx_cold_warm(d, mnt):
    data = os.path.join(d, "data")
    os.mkdir(data)
    _, tensors = big_file(data)
    ngx = Nginx(os.path.join(d, "ngx"), data)
    cache, prom = os.path.join(d, "cache"), os.path.join(d, "prom")
    os.mkdir(prom)
    path = os.path.join(prom, "stfs.prom")
    url = ngx.url("big.safetensors")
    try:
        p = T.mount_fg(url, mnt, "-o", "cache=%s,metrics=%s" % (cache, path))
        try:
            for i in range(3):
                assert read(os.path.join(mnt, "layers/%d/w" % i)) == \
                    tensors[i][3]
            wait_blocks(cache, 30)
        finally:
            T.stop_fg(p, mnt)
        s = parse(slurp(path))
        sent = ngx.sent()
        body = sum(n for _, n, _ in sent)
        ranges = sum(1 for _, _, r in sent if r)
        assert val(s, "stfs_fetched_bytes_total", tier="origin") == body, \
            (val(s, "stfs_fetched_bytes_total", tier="origin"), body)
        assert val(s, "stfs_fetched_bytes_total", tier="mirror") == 0
        assert total(s, "stfs_http_requests_total", kind="range") == \
            ranges == len(sent), ({k: v for k, v in s.items() if
                                   k[0].startswith("stfs_http")}, sent)
        assert total(s, "stfs_http_requests_total", kind="range") == \
            s[("stfs_http_requests_total", (("class", "2xx"),
                                            ("kind", "range")))]
        read_all = sum(len(t[3]) for t in tensors)
        got = total(s, "stfs_read_bytes_total")
        assert got >= read_all, (got, read_all)
        assert val(s, "stfs_read_bytes_total", **{"from": "local"}) == 0
        assert val(s, "stfs_cache_used_bytes") > 0
        print("     cold: %d bytes in %d range requests, as nginx logged" %
              (body, ranges))

        # warm: a new mount of the same cache reads layers 1 and 2 (past
        # the first 64 KiB, which the open fetches and holds)
        path2 = os.path.join(prom, "warm.prom")
        n0 = len(ngx.sent())
        p = T.mount_fg(url, mnt, "-o", "cache=%s,metrics=%s" %
                       (cache, path2))
        try:
            n = len(ngx.sent())
            for i in (1, 2):
                assert read(os.path.join(mnt, "layers/%d/w" % i)) == \
                    tensors[i][3]
            assert len(ngx.sent()) == n, "a warm read asked nginx"
        finally:
            T.stop_fg(p, mnt)
        s = parse(slurp(path2))
        warm = len(tensors[1][3]) + len(tensors[2][3])
        assert val(s, "stfs_read_bytes_total", **{"from": "cache"}) == \
            warm, (val(s, "stfs_read_bytes_total", **{"from": "cache"}),
                   warm)
        assert val(s, "stfs_read_bytes_total", **{"from": "fetch"}) == 0
        assert val(s, "stfs_cache_blocks_total", result="miss") == 0
        assert val(s, "stfs_cache_blocks_total", result="hit") >= 20
        sent = ngx.sent()[n0:]
        assert val(s, "stfs_fetched_bytes_total", tier="origin") == \
            sum(x[1] for x in sent) and total(
                s, "stfs_http_requests_total") == len(sent) == n - n0
        print("     warm: %d bytes read, all from the cache" % warm)
    finally:
        ngx.stop()


def test_warm_and_check(d, mnt):
    """`stfs prefetch`: the bytes asked and cached are those its state
    says; a cached block spoiled on disk is one check failure (and
    fetched again)."""
    data = os.path.join(d, "data")
    os.mkdir(data)
    _, tensors = big_file(data)
    ngx = Nginx(os.path.join(d, "ngx"), data)
    cache = os.path.join(d, "cache")
    try:
        p = T.mount_fg(ngx.url("big.safetensors"), mnt, "-o",
                       "cache=" + cache)
        try:
            r = subprocess.run([T.STFS, "prefetch", "-q", mnt],
                               capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, r.stderr
            asked = int(os.getxattr(mnt, "user.stfs.prefetch.bytes_asked"))
            cached = int(os.getxattr(mnt,
                                     "user.stfs.prefetch.bytes_cached"))
            s = stats_json(mnt)
        finally:
            T.stop_fg(p, mnt)
        assert asked == cached > 0
        assert val(s, "stfs_prefetch_asked_bytes_total", by="warm") == \
            asked, (s, asked)
        assert val(s, "stfs_prefetch_cached_bytes_total", by="warm") == \
            cached
        # spoil block 5 (20 MiB in: layer 0's) after its header
        blk = [f for f in (os.path.join(r_, f_) for r_, _, fs in
                           os.walk(cache) for f_ in fs)
               if os.path.basename(f) == "5"]
        assert len(blk) == 1, blk
        with open(blk[0], "r+b") as f:
            f.seek(4096 + 12345)
            b = f.read(1)
            f.seek(4096 + 12345)
            f.write(bytes([b[0] ^ 0xff]))
        path = os.path.join(d, "m.prom")
        p = T.mount_fg(ngx.url("big.safetensors"), mnt, "-o",
                       "cache=%s,metrics=%s" % (cache, path))
        try:
            assert read(os.path.join(mnt, "layers/0/w")) == tensors[0][3]
        finally:
            T.stop_fg(p, mnt)
        s = parse(slurp(path))
        assert val(s, "stfs_verify_failures_total", what="cache_block") == 1
        assert val(s, "stfs_cache_blocks_total", result="hit") > 0
        print("     warm: %d bytes asked and cached; 1 spoiled block, 1 "
              "failed check" % asked)
    finally:
        ngx.stop()


def test_hub_kinds(d, mnt):
    """hf:// through the Hub emulator and nginx behind its /resolve: the
    redirects counted as resolves equal the emulator's 302s, the API
    calls as lists its other answers, the ranges nginx's requests, every
    request one of theirs; the token (HF_TOKEN) in no output."""
    with world(d) as w, env(HF_TOKEN=hubemu.TOKEN):
        tensors = [("layers.%d.w" % i, "U8", [1 << 20], os.urandom(1 << 20))
                   for i in range(3)]
        src = T.write_st(os.path.join(d, "m.safetensors"), tensors)
        w.hub.push(w.hub.repo("org/m"), {"model.safetensors": read(src),
                                         "README.md": b"# model\n"})
        path = os.path.join(d, "m.prom")
        p = T.mount_fg("hf://org/m", mnt, "-o", "metrics=" + path)
        try:
            for i in range(3):
                assert read(os.path.join(mnt, "layers/%d/w" % i)) == \
                    tensors[i][3]
            outs = [os.getxattr(mnt, "user.stfs.metrics").decode()]
        finally:
            T.stop_fg(p, mnt)
        text = slurp(path)
        s = parse(text)
        hub = list(w.hub.log.entries)
        sent = w.ngx.sent()
        resolves = sum(1 for e in hub if "/resolve/" in e["path"] and
                       e["status"] == 302)
        api = sum(1 for e in hub if e["path"].startswith("/api/"))
        assert val(s, "stfs_http_requests_total", kind="resolve",
                   **{"class": "3xx"}) == resolves > 0, (s, hub)
        assert total(s, "stfs_http_requests_total", kind="list") == \
            api > 0, (api, hub)
        assert total(s, "stfs_http_requests_total") == len(hub) + len(sent)
        assert total(s, "stfs_http_requests_total", kind="range") == \
            len(hub) + len(sent) - resolves - api
        assert total(s, "stfs_http_requests_total", kind="credentials") == 0
        for o in outs + [text]:
            assert hubemu.TOKEN not in o and "org/m" not in o
        print("     %d resolves, %d API calls, %d ranges: as the Hub and "
              "nginx saw them" % (resolves, api, total(
                  s, "stfs_http_requests_total", kind="range")))


def test_s3_credentials(d, mnt):
    """s3:// on the tests' Swift with temporary keys from the container
    endpoint emulator (tests/servers/credemu.py): its calls are the credentials
    requests counted, the listing a list; the keys, session token and the
    endpoint's authorization token in no output."""
    sw = s3server.shared()
    t = T.write_st(os.path.join(d, "m.safetensors"),
                   [("w", "U8", [1 << 20], os.urandom(1 << 20))])
    sw.put("models", "metrics/m.safetensors", read(t))
    iss = credemu.Issuer(os.path.join(sw.dir, "sts-creds.json"))
    cont = credemu.Container(iss)
    path = os.path.join(d, "m.prom")
    try:
        with env(AWS_ENDPOINT_URL_S3=sw.endpoint, AWS_ENDPOINT_URL=None,
                 AWS_REGION="us-east-1", AWS_DEFAULT_REGION=None,
                 AWS_ACCESS_KEY_ID=None, AWS_SECRET_ACCESS_KEY=None,
                 AWS_SESSION_TOKEN=None, AWS_PROFILE=None,
                 AWS_ROLE_ARN=None, AWS_WEB_IDENTITY_TOKEN_FILE=None,
                 AWS_CONTAINER_CREDENTIALS_FULL_URI=cont.url +
                 credemu.Container.PATH,
                 AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=None,
                 AWS_CONTAINER_AUTHORIZATION_TOKEN=cont.auth,
                 AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=None,
                 AWS_EC2_METADATA_DISABLED="true",
                 AWS_SHARED_CREDENTIALS_FILE=os.path.join(d, "none"),
                 AWS_CONFIG_FILE=os.path.join(d, "none"),
                 XDG_CACHE_HOME=os.path.join(d, "xdg")):
            p = T.mount_fg("s3://models/metrics/", mnt, "-o",
                           "metrics=" + path)
            try:
                assert read(os.path.join(mnt, "w")) == \
                    read(t)[-(1 << 20):]
                outs = [os.getxattr(mnt, "user.stfs.metrics").decode()]
            finally:
                T.stop_fg(p, mnt)
        text = slurp(path)
        s = parse(text)
        calls = len(cont.requests)
        assert total(s, "stfs_http_requests_total",
                     kind="credentials") == calls > 0, (s, calls)
        assert val(s, "stfs_http_requests_total", kind="credentials",
                   **{"class": "2xx"}) == calls
        assert total(s, "stfs_http_requests_total", kind="list") >= 1
        assert total(s, "stfs_http_requests_total", kind="range") >= 1
        keys = [v for k in iss.issued for v in (k["AccessKeyId"],
                                                k["SecretAccessKey"],
                                                k["Token"])]
        assert keys
        for o in outs + [text]:
            for secret in keys + [cont.auth]:
                assert secret not in o, secret
            assert "models" not in o and "metrics/" not in o
        print("     %d credentials calls counted, as the endpoint saw; "
              "%d secrets in no output" % (calls, len(keys) + 1))
    finally:
        cont.stop()
        s3server.stop_shared()


def test_evicted(d, mnt):
    """A cache of 16 MiB under a 120 MiB read: the bytes evicted are the
    bytes of the block files written (each block nginx sent, and a 4 KiB
    header) less those left, and the small files beside them (heads,
    meta, each counted in 4 KiB as cache_size counts it: under 1 MiB
    here); what is left is under the limit."""
    data = os.path.join(d, "data")
    os.mkdir(data)
    src, tensors = big_file(data)
    ngx = Nginx(os.path.join(d, "ngx"), data)
    cache, path = os.path.join(d, "cache"), os.path.join(d, "m.prom")
    try:
        p = T.mount_fg(ngx.url("big.safetensors"), mnt, "-o",
                       "cache_size=16M,cache=%s,metrics=%s" % (cache, path))
        try:
            for i in range(3):
                assert read(os.path.join(mnt, "layers/%d/w" % i)) == \
                    tensors[i][3]
        finally:
            T.stop_fg(p, mnt)
        # each block fetched is a block file written, of its bytes and a
        # 4 KiB header (a block evicted before its reader came is
        # fetched and written again; one read from its middle comes in
        # two ranges, the second ending where the block does); the
        # open's first 64 KiB are not a block
        size, block = os.path.getsize(src), 4 << 20
        written = 0
        for st, n, rng in ngx.sent():
            first, last = map(int, rng[len("bytes="):].split("-"))
            if rng != "bytes=0-65535":
                written += n + (4096 if (last + 1) % block == 0 or
                                last == size - 1 else 0)
    finally:
        ngx.stop()
    s = parse(slurp(path))
    left = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in
               os.walk(cache) for f in fs if f.isdigit())
    ev = val(s, "stfs_cache_evicted_bytes_total")
    assert written - left > 0, (written, left)
    assert 0 <= ev - (written - left) < 1 << 20, (ev, written, left)
    assert left <= 16 << 20 and val(s, "stfs_cache_limit_bytes") == 16 << 20
    print("     %d bytes evicted of %d written, %d left" % (ev, written,
                                                           left))


def test_429(d, mnt):
    data = os.path.join(d, "data")
    os.mkdir(data)
    _, tensors = big_file(data)
    src = os.path.join(data, "big.safetensors")
    sent = {"429": 0, "other": 0}
    lock = threading.Lock()

    def answer(method, path, headers):
        first, last, size, body = file_range(src, headers)
        with lock:
            if first and sent["429"] < 3:
                sent["429"] += 1
                return "429 Too Many Requests", ["Retry-After: 1"], b""
            sent["other"] += 1
        return "206 Partial Content", ['ETag: "v1"',
                                       "Content-Range: bytes %d-%d/%d" %
                                       (first, last, size)], body

    srv = RawServer(answer)
    path = os.path.join(d, "m.prom")
    p = T.mount_fg(srv.url("big.safetensors"), mnt, "-o",
                   "nocache,retries=5,connections=1,metrics=" + path)
    try:
        assert read(os.path.join(mnt, "layers/1/w")) == tensors[1][3]
    finally:
        T.stop_fg(p, mnt)
    s = parse(slurp(path))
    assert sent["429"] == 3
    assert val(s, "stfs_http_requests_total", kind="range",
               **{"class": "429"}) == sent["429"], \
        ({k: v for k, v in s.items() if k[0].startswith("stfs_http")}, sent)
    # (a prefetch cut at unmount may have had no answer yet: class none)
    none = val(s, "stfs_http_requests_total", kind="range",
               **{"class": "none"})
    assert total(s, "stfs_http_requests_total", kind="range") - none == \
        sent["429"] + sent["other"], (none, sent)
    assert total(s, "stfs_http_retries_total") == sent["429"]
    print("     %d 429s sent, %d counted; %d retries" %
          (sent["429"], val(s, "stfs_http_requests_total", kind="range",
                            **{"class": "429"}),
           total(s, "stfs_http_retries_total")))


def test_read_errors(d, mnt):
    """A server that answers 404 once mounted: the reader's errno is the
    one counted, every failed read counted, the 404s as 4xx."""
    data = os.path.join(d, "data")
    os.mkdir(data)
    _, tensors = big_file(data)
    src = os.path.join(data, "big.safetensors")
    gone = {"on": False, "n": 0}

    def answer(method, path, headers):
        first, last, size, body = file_range(src, headers)
        if gone["on"]:
            gone["n"] += 1
            return "404 Not Found", [], b""
        return "206 Partial Content", ['ETag: "v1"',
                                       "Content-Range: bytes %d-%d/%d" %
                                       (first, last, size)], body

    srv = RawServer(answer)
    path = os.path.join(d, "m.prom")
    p = T.mount_fg(srv.url("big.safetensors"), mnt, "-o",
                   "nocache,metrics=" + path)
    got = None
    try:
        gone["on"] = True
        try:
            read(os.path.join(mnt, "layers/2/w"))
        except OSError as e:
            got = e.errno
    finally:
        T.stop_fg(p, mnt)
    s = parse(slurp(path))
    name = errno.errorcode[got]
    assert got and val(s, "stfs_read_errors_total", errno=name) >= 1, \
        (got, s)
    assert total(s, "stfs_read_errors_total") == \
        val(s, "stfs_read_errors_total", errno=name), \
        ({k: v for k, v in s.items() if k[0] == "stfs_read_errors_total"},
         name)
    # (a request given up on as its reader failed may have had no answer
    # yet, and on a loaded machine one may find the server's one thread
    # busy and be cut before it is read: class none; no 404 is counted
    # twice or as anything else)
    c4 = val(s, "stfs_http_requests_total", kind="range", **{"class": "4xx"})
    assert 1 <= c4 <= gone["n"] <= c4 + val(
        s, "stfs_http_requests_total", kind="range", **{"class": "none"}), \
        ({k: v for k, v in s.items() if k[0].startswith("stfs_http")}, gone)
    print("     %s: %d failed reads counted; %d 404s" % (
        name, val(s, "stfs_read_errors_total", errno=name), gone["n"]))


def local_model(d, n=3):
    return T.write_st(os.path.join(d, "m.safetensors"),
                      [("t.%d" % i, "U8", [4096], bytes([i % 256]) * 4096)
                       for i in range(n)])


def test_promtool_node_exporter(d, mnt):
    src = local_model(d)
    tf = os.path.join(d, "textfile")
    os.mkdir(tf)
    path = os.path.join(tf, "stfs.prom")
    p = T.mount_fg(src, mnt, "-o", "metrics=" + path)
    try:
        for i in range(3):
            read(os.path.join(mnt, "t/%d" % i))
    finally:
        T.stop_fg(p, mnt)
    text = slurp(path)
    r = subprocess.run(["promtool", "check", "metrics"], input=text,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and not r.stdout.strip() and \
        not r.stderr.strip(), (r.returncode, r.stdout, r.stderr)
    mine = parse(text)
    assert val(mine, "stfs_read_bytes_total", **{"from": "local"}) == \
        3 * 4096
    port = free_port()
    ne = subprocess.Popen([NODE_EXPORTER, "--collector.disable-defaults",
                           "--collector.textfile",
                           "--collector.textfile.directory=" + tf,
                           "--web.listen-address=127.0.0.1:%d" % port],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    T._procs.append(ne)
    try:
        assert wait_port(port), "node exporter did not start"
        served = urllib.request.urlopen("http://127.0.0.1:%d/metrics" %
                                        port, timeout=30).read().decode()
    finally:
        ne.terminate()
        ne.wait(timeout=10)
    got = {k: v for k, v in parse(served).items()
           if k[0].startswith("stfs_")}
    assert got == mine, set(got.items()) ^ set(mine.items())
    assert "node_textfile_scrape_error 0" in served
    print("     promtool: clean; node exporter serves the %d series" %
          len(got))


def test_atomic(d, mnt):
    """Readers in a loop while the daemon replaces the file (every 10 s)
    and reads go on: each read is whole (every series, the last line),
    until the file was replaced 3 times."""
    src = local_model(d)
    path = os.path.join(d, "m.prom")
    p = T.mount_fg(src, mnt, "-o", "metrics=" + path)
    seen, reads, bad = set(), 0, []
    stop = threading.Event()

    def reading():
        while not stop.is_set():
            read(os.path.join(mnt, "t/1"))

    th = threading.Thread(target=reading, daemon=True)
    th.start()
    try:
        end = time.time() + 60
        while len(seen) < 4 and time.time() < end:
            with open(path) as f:
                seen.add(os.fstat(f.fileno()).st_ino)
                text = f.read()
            reads += 1
            lines = [x for x in text.splitlines() if not x.startswith("#")]
            if len(lines) != SERIES or not text.endswith("\n") or \
                    not lines[-1].startswith(
                        "stfs_fetch_first_byte_seconds_count "):
                bad.append(text[-200:])
    finally:
        stop.set()
        th.join(30)
        T.stop_fg(p, mnt)
    assert len(seen) >= 4, "replaced %d times in 60 s" % (len(seen) - 1)
    assert not bad, bad[:2]
    assert not [f for f in os.listdir(d) if ".tmp." in f]
    print("     %d reads over %d versions of the file: all whole" %
          (reads, len(seen)))


def test_no_secret(d, mnt):
    data = os.path.join(d, "data")
    os.mkdir(data)
    T.write_st(os.path.join(data, "secretive.safetensors"),
               [("tensor.named.sekrit", "U8", [1024], b"x" * 1024)])
    ngx = Nginx(os.path.join(d, "ngx"), data)
    path = os.path.join(d, "m.prom")
    url = "http://alice:Pw0rdZZ9@127.0.0.1:%d/secretive.safetensors" \
        "?X-Amz-Signature=Sig0123ZZ" % ngx.port
    try:
        p = T.mount_fg(url, mnt, "-o", "nocache,metrics=" + path)
        try:
            read(os.path.join(mnt, "tensor/named/sekrit"))
            outs = [os.getxattr(mnt, "user.stfs.metrics").decode()]
            for args in ((), ("--json",)):
                r = subprocess.run([T.STFS, "stats"] + list(args) + [mnt],
                                   capture_output=True, text=True,
                                   timeout=30)
                assert r.returncode == 0, r.stderr
                outs += [r.stdout, r.stderr]
        finally:
            T.stop_fg(p, mnt)
        outs.append(slurp(path))
        for o in outs:
            for bad in ("Pw0rdZZ9", "alice", "Sig0123ZZ", "secretive",
                        "sekrit", "127.0.0.1", "http:", str(ngx.port)):
                assert bad not in o, (bad, o[:300])
        print("     no password, query, URL, host or name in %d outputs" %
              len(outs))
    finally:
        ngx.stop()


def test_series_bound(d, mnt):
    counts = []
    for n in (1, 10000):
        sub = os.path.join(d, str(n))
        os.mkdir(sub)
        src = local_model(sub, n)
        path = os.path.join(sub, "m.prom")
        p = T.mount_fg(src, mnt, "-o", "metrics=" + path)
        try:
            for i in range(min(n, 50)):
                read(os.path.join(mnt, "t/%d" % i))
        finally:
            T.stop_fg(p, mnt)
        counts.append(len(parse(slurp(path))))
    assert counts == [SERIES, SERIES], counts
    print("     1 tensor: %d series; 10,000 tensors: %d" % tuple(counts))


def test_stats(d, mnt):
    src = local_model(d)
    os.chmod(os.path.dirname(mnt), 0o755)
    p = T.mount_fg(src, mnt, "-o", "allow_other,metrics=" +
                   os.path.join(d, "m.prom"))
    try:
        read(os.path.join(mnt, "t/0"))
        r = subprocess.run([T.STFS, "stats", "--json", mnt],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        j = json.loads(r.stdout)["metrics"]
        assert len(j) == SERIES
        got = [m["value"] for m in j if m["name"] == "stfs_read_bytes_total"
               and m["labels"] == {"from": "local"}]
        assert got == [4096], got
        r = subprocess.run([T.STFS, "stats", mnt], capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0 and re.search(
            r'stfs_read_bytes_total\{from="local"\} +4\.0 KiB', r.stdout), \
            r.stdout
        # another user, whom allow_other lets read: not the counters
        pw = pwd.getpwnam("nobody")
        other = T.stfs_for_others()

        def as_nobody():
            os.setgroups([])
            os.setgid(pw.pw_gid)
            os.setuid(pw.pw_uid)
        r = subprocess.run([other, "stats", mnt], capture_output=True,
                           text=True, timeout=30, preexec_fn=as_nobody)
        assert r.returncode == 1 and "only the user who mounted it" in \
            r.stderr, (r.returncode, r.stderr)
    finally:
        T.stop_fg(p, mnt)
    for args, code, say in (([d], 1, "not an stfs mount"),
                            ([], 2, "usage"), (["--bad", mnt], 2, "usage")):
        r = subprocess.run([T.STFS, "stats"] + args, capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == code and say in r.stderr, (args, r)
    p = T.mount_fg(src, mnt, "-o", "nometrics")
    try:
        r = subprocess.run([T.STFS, "stats", mnt], capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 1 and "nometrics" in r.stderr, r.stderr
    finally:
        T.stop_fg(p, mnt)
    # a file that cannot be written, or both options: refused at mount,
    # nothing mounted
    for o in ("metrics=" + os.path.join(d, "no", "such", "m.prom"),
              "metrics=%s/m2.prom,nometrics" % d):
        r = subprocess.run([T.STFS, "mount", src, mnt, "-o", o],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and "metrics=" in r.stderr and \
            not T.is_mount(mnt), r.stderr


def test_planted_tmp(d, mnt):
    """In a directory others may write, another user plants the daemon's
    temporary file (its name is the daemon's pid) and keeps it open: the
    file published at unmount is still the daemon's own, never one that
    user owns and could rewrite."""
    src = local_model(d)
    pub = os.path.join(d, "pub")
    os.mkdir(pub)
    os.chmod(pub, 0o777)                # no sticky bit: anyone may plant
    path = os.path.join(pub, "m.prom")
    p = T.mount_fg(src, mnt, "-o", "metrics=" + path)
    tmp = os.path.join(pub, ".m.prom.tmp.%d" % p.pid)
    with open(tmp, "w") as f:
        f.write("stfs_forged 1\n")
    os.chown(tmp, 65534, 65534)
    T.stop_fg(p, mnt)
    st = os.stat(path)
    with open(path) as f:
        text = f.read()
    assert st.st_uid == os.getuid(), "the file is uid %d's" % st.st_uid
    assert "stfs_forged" not in text and \
        len([x for x in text.splitlines() if not x.startswith("#")]) == \
        SERIES, text[:300]
    assert not os.path.exists(tmp)


def main():
    home = os.environ["XDG_CACHE_HOME"] = T.tmpdir()
    try:
        return T.run_tests([
            test_nginx_cold_warm,
            test_429,
            test_hub_kinds,
            test_s3_credentials,
            test_read_errors,
            test_warm_and_check,
            test_evicted,
            test_promtool_node_exporter,
            test_no_secret,
            test_series_bound,
            test_stats,
            test_atomic,
            test_planted_tmp,
        ])
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

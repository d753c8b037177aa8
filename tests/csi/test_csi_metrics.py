#!/usr/bin/env python3
"""test_csi_metrics.py: the CSI plugin's /metrics (--metrics-address)
scraped by a real Prometheus (Debian's `prometheus`) that the test starts
on a free loopback port, with real mounts (a node as in test_csi.py:
csifix.Node).  PromQL answers (the Prometheus HTTP API) are compared with
what the test's servers saw.

- test_scrape: an http:// source on nginx (a signed link: a signature in
  its query; nginx's access log in the combined format, each response's
  body bytes): a publish, a cold read, a warm read (a second volume of the
  same source, its own daemon reading the node cache), a refused publish,
  a kill -9 recovery.  The daemons' fetched bytes equal nginx's body
  bytes, their range requests nginx's request count; the warm volume
  reads from the cache the bytes its pod read, its only request its
  header's; the recovery is counted once; the publishes by result and the
  refusal by reason as made; every query of the Grafana dashboard
  (deploy/kubernetes/examples/grafana-dashboard.json) has an answer; the
  signature is not in /metrics; `promtool check metrics` is clean; a
  daemon unpublished past its grace time leaves no series; a restart of
  the plugin keeps the series of the daemon it adopts.
- test_hub_token: a gated hf:// volume (the Hub emulator) with a token:
  the token is nowhere in /metrics.
- test_series_bound: 64 daemons (one local model, 64 readahead= values;
  STFS_CSI_METRICS_DAEMONS=N for another count), then one on a source of
  10,000 tensors (2,000 of them read): the series count stays under the
  bound docs/kubernetes.md states (200 + --max-daemons x 501), and the
  10,000-tensor volume has exactly as many series as a one-tensor one.
"""
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402
from csifix import GO, Node, pod_read  # noqa: E402
from fixtures import Nginx, World, free_port, wait_port  # noqa: E402
import hubemu  # noqa: E402

PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"
# the bound docs/kubernetes.md states: the plugin's own series, and per
# daemon its file's (at most 500) and its info series
PLUGIN_SERIES = 200
SIGNATURE = "sig_csi_metrics_never_shown_5678"
PER_DAEMON = 501


class Prometheus:
    """Prometheus scraping target every 500 ms, its data in d."""

    def __init__(self, d, target):
        self.port = free_port()
        os.makedirs(d, exist_ok=True)
        conf = os.path.join(d, "prometheus.yml")
        with open(conf, "w") as f:
            f.write("global:\n  scrape_interval: 500ms\n"
                    "  scrape_timeout: 500ms\n"
                    "scrape_configs:\n  - job_name: stfs-csi\n"
                    "    static_configs:\n      - targets: ['%s']\n"
                    % target)
        self.log = open(os.path.join(d, "prometheus.log"), "wb")
        self.proc = subprocess.Popen(
            [PROMETHEUS, "--config.file=" + conf,
             "--storage.tsdb.path=" + os.path.join(d, "tsdb"),
             "--web.listen-address=127.0.0.1:%d" % self.port,
             "--web.console.templates=" + d,
             "--web.console.libraries=" + d],
            stdout=self.log, stderr=self.log)
        T._procs.append(self.proc)
        assert wait_port(self.port, timeout=30), "prometheus did not start"
        end = time.time() + 30
        while not self.ready():
            assert time.time() < end and self.proc.poll() is None, \
                "prometheus is not ready"
            time.sleep(0.1)
        while self.query("up") != [1.0]:
            assert time.time() < end, "prometheus scrapes nothing"
            time.sleep(0.1)

    def ready(self):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/-/ready"
                                        % self.port, timeout=5) as r:
                return r.status == 200
        except OSError:
            return False

    def api(self, path, **args):
        url = "http://127.0.0.1:%d/api/v1/%s?%s" % (
            self.port, path, urllib.parse.urlencode(args))
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, q):
        """the values of an instant query, sorted"""
        return sorted(float(x["value"][1])
                      for x in self.api("query", query=q)["result"])

    def one(self, q):
        v = self.query(q)
        assert len(v) == 1, (q, v)
        return v[0]

    def scraped_after(self, t, timeout=20):
        """Wait for a scrape that began after t (a time.time())."""
        end = time.time() + timeout
        while True:
            v = self.query("timestamp(up)")
            if v and v[0] > t:
                return
            assert time.time() < end, "no scrape after %.3f" % t
            time.sleep(0.1)

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()


def metrics_node(d, **kw):
    """A csifix.Node at d (under a test's folder) with --metrics-address
    on a free loopback port."""
    os.chmod(os.path.dirname(os.path.dirname(d)), 0o711)  # nobody gets in
    port = free_port()
    args = ["--allow-hosts=127.0.0.1", "--metrics-address=127.0.0.1:%d"
            % port] + kw.pop("plugin_args", [])
    node = Node(d, plugin_args=args, **kw)
    node.metrics_url = "http://127.0.0.1:%d/metrics" % port
    node.metrics_target = "127.0.0.1:%d" % port
    return node


def plugin_text(node):
    with urllib.request.urlopen(node.metrics_url, timeout=20) as r:
        return r.read().decode()


def written_after(node, key, t, timeout=25):
    """Wait for the daemon key to write its file after t (every 10 s);
    the time it did."""
    p = os.path.join(node.d, "launcher", "metrics", key + ".prom")
    end = time.time() + timeout
    while True:
        try:
            m = os.stat(p).st_mtime
            if m > t:
                return m
        except FileNotFoundError:
            pass
        assert time.time() < end, "%s not written after %.3f" % (p, t)
        time.sleep(0.1)


def key_of(prom, source):
    r = prom.api("query", query='stfs_csi_volume_info{source="%s"}'
                 % source)["result"]
    assert len(r) == 1, r
    return r[0]["metric"]["volume"]


def nginx_seen(log):
    """(body bytes, GET requests, requests) in nginx's combined log."""
    body = gets = n = 0
    with open(log) as f:
        for line in f:
            m = re.search(r'"(\w+) [^"]*" (\d+) (\d+)', line)
            assert m, line
            n += 1
            body += int(m.group(3))
            gets += m.group(1) == "GET"
    return body, gets, n


def promtool_clean(text):
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=text.encode(),
                       capture_output=True, timeout=60)
    out = (r.stdout + r.stderr).decode()
    assert r.returncode == 0 and not out.strip(), out


DASHBOARD = os.path.join(TESTS_DIR, "..",
                         "deploy", "kubernetes", "examples",
                         "grafana-dashboard.json")


def dashboard_answers(prom):
    """Every query of the Grafana dashboard ($volume: all of them) is
    PromQL that Prometheus answers with at least one series."""
    with open(DASHBOARD) as f:
        dash = json.load(f)
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert len(exprs) >= 15
    for e in exprs:
        q = e.replace("$volume", ".*").replace("$__rate_interval", "1m")
        r = prom.api("query", query=q)["result"]
        assert r, "the dashboard's %s: no series" % e
    print("   the dashboard's %d queries all answered" % len(exprs))


def model(d, n=8):
    src = os.path.join(d, "model")
    os.makedirs(src, exist_ok=True)
    os.chmod(src, 0o755)
    T.write_st(os.path.join(src, "model.safetensors"),
               [("layers.%d.w" % i, "F32", [256, 256],
                 os.urandom(256 * 256 * 4)) for i in range(n)])
    os.chmod(os.path.join(src, "model.safetensors"), 0o644)
    return src, ["layers/%d/w" % i for i in range(n)]


def test_scrape(d):
    src, paths = model(d)
    ngx_d = os.path.join(d, "ngx")
    os.makedirs(ngx_d)
    bodies = os.path.join(ngx_d, "bodies.log")
    ngx = Nginx(ngx_d, src, extra="    access_log %s combined;\n" % bodies)
    # a signed link's signature in the query: a credential the info
    # metric must not show (nginx serves the file whatever the query)
    plain = ngx.url("model.safetensors")
    url = plain + "?X-Amz-Signature=" + SIGNATURE
    size = os.path.getsize(os.path.join(src, "model.safetensors"))
    want = sum(256 * 256 * 4 for _ in paths)
    node = metrics_node(os.path.join(d, "node"), grace="1s")
    prom = None
    try:
        prom = Prometheus(os.path.join(d, "prom"), node.metrics_target)
        r = node.publish("pod-a", {"source": url})
        assert r["code"] == "OK", (r, node.log("plugin")[-3000:])
        prom.scraped_after(time.time())
        assert prom.one('stfs_csi_publishes_total{result="ok"}') == 1
        assert prom.one("stfs_csi_daemons") == 1
        assert prom.one("stfs_csi_publish_duration_seconds_count") == 1
        key = key_of(prom, plain)
        # what the daemon asked to open the source (its header)
        opened = nginx_seen(bodies)[2]
        assert opened >= 1
        # the cold read: everything from nginx
        pod_read(node.target("pod-a"), paths)
        t = time.time()
        prom.scraped_after(written_after(node, key, t))
        body, gets, n = nginx_seen(bodies)
        assert body >= want, (body, want)
        v = 'volume="%s"' % key
        assert prom.one("sum(stfs_fetched_bytes_total{%s})" % v) == body
        assert prom.one('stfs_read_bytes_total{%s,from="fetch"}' % v) + \
            prom.one('stfs_read_bytes_total{%s,from="cache"}' % v) == want
        by = {x["metric"]["kind"]: float(x["value"][1]) for x in prom.api(
            "query", query="sum by (kind) (stfs_http_requests_total{%s})"
            % v)["result"]}
        # every request nginx saw is a range request (a GET with Range:
        # the header's at the publish, then the tensors')
        assert by["range"] == gets == n and sum(by.values()) == n, \
            (by, gets, n, opened, open(bodies).read())
        print("   cold: %d bytes fetched in %d range requests (%d at the "
              "publish) = nginx's (file %d bytes)" % (body, n, opened, size))
        # the warm read: another volume of the source (its own daemon),
        # from the node cache: nothing more fetched
        assert node.publish("pod-b", {"source": url,
                                       "options": "readahead=512"},
                            vid="vol-2")["code"] == "OK"
        prom.scraped_after(time.time())
        key2 = [x["metric"]["volume"] for x in prom.api(
            "query", query="stfs_csi_volume_info")["result"]
            if x["metric"]["volume"] != key]
        assert len(key2) == 1, key2
        v2 = 'volume="%s"' % key2[0]
        body2, _, n2 = nginx_seen(bodies)    # its opening of the source
        pod_read(node.target("pod-b"), paths)
        t = time.time()
        prom.scraped_after(written_after(node, key2[0], t))
        assert nginx_seen(bodies)[::2] == (body2, n2)  # the tensors: none
        assert prom.one("sum(stfs_fetched_bytes_total{%s})" % v2) == \
            body2 - body
        # its only requests: the header's, at its publish
        assert prom.one('sum(stfs_http_requests_total{%s,kind="range"})'
                        % v2) == n2 - n
        assert prom.one("sum(stfs_http_requests_total{%s})" % v2) == n2 - n
        assert prom.one('stfs_read_bytes_total{%s,from="cache"}' % v2) \
            == want
        assert prom.one('stfs_cache_blocks_total{%s,result="hit"}' % v2) > 0
        assert prom.one('stfs_cache_blocks_total{%s,result="miss"}' % v2) \
            == 0
        # a refusal, by its reason
        r = node.publish("pod-c", {"source": url, "options": "cache=/x"},
                         vid="vol-3")
        assert r["code"] == "InvalidArgument", r
        # kill -9 of the first daemon: recovered, counted once
        old = [p for p in node.daemons()]
        assert len(old) == 2
        pid = [p for p in old if key.encode() in open(
            "/proc/%d/cmdline" % p, "rb").read()]
        assert len(pid) == 1, pid
        os.kill(pid[0], 9)
        end = time.time() + 20
        while len(node.daemons()) < 2 or set(node.daemons()) == set(old):
            assert time.time() < end, "no recovery"
            time.sleep(0.05)
        while True:     # its targets bound again
            try:
                pod_read(node.target("pod-a"), paths[:1])
                break
            except AssertionError:
                assert time.time() < end, "the pod cannot read again"
                time.sleep(0.1)
        prom.scraped_after(time.time())
        t = time.time()
        assert prom.one("stfs_csi_recoveries_total") == 1
        assert prom.one("stfs_csi_daemons") == 2
        # later scrapes (the mount checks run every 500 ms) say the same
        prom.scraped_after(t + 2)
        assert prom.one("stfs_csi_recoveries_total") == 1
        assert prom.one('stfs_csi_publishes_total{result="ok"}') == 2
        assert prom.one('stfs_csi_publishes_total{result="refused"}') == 1
        assert prom.one('stfs_csi_refusals_total{reason="invalid_request"}') \
            == 1
        assert prom.one("sum(stfs_csi_refusals_total)") == 1
        text = plugin_text(node)
        promtool_clean(text)
        assert SIGNATURE not in text and "X-Amz" not in text
        dashboard_answers(prom)
        # the second volume unpublished: past its grace time its daemon
        # goes, and its series with it
        assert node.unpublish("pod-b", vid="vol-2")["code"] == "OK"
        end = time.time() + 20
        while len(node.daemons()) != 1:
            assert time.time() < end, "the daemon stayed"
            time.sleep(0.05)
        prom.scraped_after(time.time())
        assert prom.query("count({%s})" % v2) == []
        assert prom.query('count({%s})' % v) != []
        assert 'volume="%s"' % key2[0] not in plugin_text(node)
        # a restart of the plugin (an upgrade): the daemon it adopts keeps
        # its file and its series
        node.restart_plugin()
        t = time.time()
        prom.scraped_after(written_after(node, key, t))
        assert prom.one("stfs_csi_daemons") == 1
        assert prom.one('count(stfs_read_bytes_total{%s})' % v) == 3
        assert prom.query("count({%s})" % v2) == []
    finally:
        if prom:
            prom.close()
        node.close()
        ngx.proc.terminate()
        ngx.proc.wait()


def test_hub_token(d):
    os.chmod(os.path.dirname(d), 0o711)     # the daemons (nobody) get in
    with World(d) as w:
        a = open(os.path.join(T.REAL, "jl-nonsharded", "model.safetensors"),
                 "rb").read()
        sha_ = w.hub.push(w.hub.repo("org/gated", gated=True),
                          {"model.safetensors": a})
        src = "hf://org/gated@" + sha_
        with metrics_node(os.path.join(d, "node"),
                          env={"HF_ENDPOINT": w.hub.url}) as node:
            r = node.publish("pod-a", {"source": src},
                             {"HF_TOKEN": hubemu.TOKEN})
            assert r["code"] == "OK", r
            pod_read(node.target("pod-a"), ["%repo/model.safetensors"])
            key = os.listdir(os.path.join(node.d, "launcher", "metrics"))
            written_after(node, key[0].split(".")[0], time.time())
            text = plugin_text(node)
            assert 'source="%s"' % src in text
            assert re.search(r'stfs_read_bytes_total\{from="fetch",volume='
                             r'"\w+"\} [1-9]', text), text
            assert hubemu.TOKEN not in text
            assert "Bearer" not in text
            promtool_clean(text)


def test_series_bound(d):
    src, paths = model(d, n=1)
    many = os.path.join(d, "model", "many.safetensors")
    T.make_many(many, 10000)
    os.chmod(many, 0o644)
    n = int(os.environ.get("STFS_CSI_METRICS_DAEMONS", "64"))
    with metrics_node(os.path.join(d, "node"), grace="60s",
                      local_dir=os.path.join(d, "model"),
                      plugin_args=["--max-daemons=%d" % (n + 1)]) as node:
        t0 = time.time()
        for i in range(n):
            r = node.publish("pod-%d" % i, {
                "source": src, "options": "readahead=%d" % (i + 1)},
                             vid="vol-%d" % i)
            assert r["code"] == "OK", r
        print("   %d daemons published in %.1f s" % (n, time.time() - t0))
        assert len(node.daemons()) == n
        r = node.publish("pod-many", {"source": many},
                         vid="vol-many")
        assert r["code"] == "OK", r
        tgt = node.target("pod-many")
        names = []
        for top, _, files in os.walk(tgt):
            names += [os.path.relpath(os.path.join(top, f), tgt)
                      for f in files if not f.startswith("%")]
        assert len(names) == 10000, len(names)
        pod_read(tgt, names[:2000])
        keys = [k[:-5] for k in os.listdir(os.path.join(
            node.d, "launcher", "metrics"))
                if k.endswith(".prom")]
        t = time.time()
        end = time.time() + 40
        for k in keys:      # every daemon has written once more
            written_after(node, k, t, timeout=max(1, end - time.time()))
        prom = Prometheus(os.path.join(d, "prom"), node.metrics_target)
        try:
            total = prom.one('count({job="stfs-csi"})')
            per = {x["metric"]["volume"]: float(x["value"][1]) for x in
                   prom.api("query", query='count by (volume) '
                            '({job="stfs-csi",volume!=""})')["result"]}
        finally:
            prom.close()
        bound = PLUGIN_SERIES + (n + 1) * PER_DAEMON
        # the target's up, scrape_duration_seconds etc. (5): Prometheus's
        assert total <= bound + 5, (total, bound)
        assert len(per) == n + 1, per
        assert len(set(per.values())) == 1, per   # 10,000 tensors: no more
        print("   %d daemons + one of 10,000 tensors: %d series (bound %d), "
              "%d per volume" % (n, total, bound, list(per.values())[0]))
        text = plugin_text(node)
        promtool_clean(text)
        assert "layers" not in re.sub(r"^#.*$", "", text, flags=re.M)
        for i in range(n):
            node.unpublish("pod-%d" % i, vid="vol-%d" % i)
        node.unpublish("pod-many", vid="vol-many")


def run():
    return T.run_tests([test_scrape, test_hub_token, test_series_bound])


if __name__ == "__main__":
    if os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            print("test_csi_metrics needs root under CI")
            sys.exit(1)
        print("SKIP: the CSI driver mounts: root only")
        sys.exit(77)
    for p in (GO, PROMETHEUS, PROMTOOL):
        if not os.access(p, os.X_OK):
            print("%s is missing: scripts/deps.sh installs it" % p)
            sys.exit(1)
    sys.exit(run())

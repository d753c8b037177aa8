#!/usr/bin/env python3
"""test_mirror.py: `stfs mirror` and -o mirror= (docs/mirror.md) against
real servers: the Hub emulator (tests/servers/hubemu.py) as the origin, its files
served by nginx on another address as the Hub's CDN does, and the tests'
Swift (tests/servers/s3server.py, SigV4 checked) as the cluster's bucket.  What
the origin served is counted from nginx's access log (every range it
answered), what the Hub was asked from the emulator's own record.

- `stfs mirror hf://ORG/NAME@COMMIT s3://models/PREFIX`: every file in
  the bucket equal to the source (a file over 8 MiB by multipart upload),
  the manifest naming the origin, the commit, the block size, each file's
  size, the Hub's checksum (LFS sha256, git blob id), its sha256 and a
  CRC-32C of every block (checked here by this file's own CRC-32C); the
  origin served 1.0x the model's bytes;
- four daemons, each with a cache of its own and -o mirror=, each in a
  network namespace of its own (tests/servers/netns.py: a veth pair to a bridge,
  relays to the servers), read the
  whole repository equal to the source: the origin served nothing more
  and the Hub was asked nothing (no revision, no tree: the listing came
  from the manifest; no resolve); without the mirror the origin serves
  4x; a mirror made with --include, or a mount of a branch, lists at the
  Hub (the manifest does not hold every file, or names no branch);
- a mirror object with one byte flipped on the store's disk (its ETag
  unchanged), truncated, or replaced by another version's bytes: never
  served, the file read from the origin and the log says so;
- the mirror going away under a mount: the reads go on from the origin;
- a mirror of another commit: not used (logged), the mount's commit read;
- `stfs mirror` killed half-way: no manifest; run again it completes,
  fetching from the origin only the files it had not copied;
- a hostile manifest: the mount refuses the mirror with the reason and
  reads the origin;
- an https:// origin (one byte asked with If-Match at mount) and an
  s3:// one (the listing's ETag), each changed since: their copy unused;
- an origin serving other bytes than it lists: nothing mirrored;
- the Hub and its CDN down: a pinned source with a complete mirror mounts
  and reads from the manifest and the bucket alone;
- -o mirror_profile=, or STFS_MIRROR_AWS_* in the environment: the
  mirror read with those keys alone (one without the other: not used).
"""
import glob
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402
import s3server  # noqa: E402
import netns  # noqa: E402
from delayproxy import DelayProxy  # noqa: E402
from fixtures import (env, make_model, slurp,  # noqa: E402
                      stop_logged)
from mirrorfix import (BLOCK, MiB, Env, crc32c, get, manifest,  # noqa: E402
                       mirror, model, node, origin_bytes, read_all, stfs)


# ---- CRC-32C of our own (Castagnoli, reflected 0x82f63b78) --------------


# ---- the world: the Hub, nginx, Swift --------------------------------------


def resolves(w, since=0):
    return [p for p, _ in w.hub.seen[since:] if "/resolve/" in p]


def servers(e):
    """(host, port) of the Hub, its CDN (nginx) and the bucket (Swift)."""
    out = []
    for url in (e.w.hub.url, e.w.ngx.url(), e.sw.endpoint):
        hp = url.split("://", 1)[1].split("/", 1)[0]
        out.append((hp.rsplit(":", 1)[0], int(hp.rsplit(":", 1)[1])))
    return out


# ---- the tests ---------------------------------------------------------------

def test_mirror_copies(d):
    """The bucket holds every file, and the manifest says what it is."""
    with Env(d) as e:
        sha, data = model(d, e.w)
        src = "hf://org/m@" + sha
        j = mirror(src, "s3://models/copies")
        total = sum(len(v) for v in data.values())
        assert j["files_total"] == 4 and j["files_done"] == 4
        assert j["bytes_total"] == total and j["files_skipped"] == 0
        # the origin served each byte once
        assert origin_bytes(e.w, data)[0] == total
        for path, b in data.items():
            st, h, body = get(e.sw, "copies/" + path)
            assert st == 200 and body == b, path
        # a single PUT carries the sha256 in its metadata
        st, h, _ = get(e.sw, "copies/config.json")
        assert h["x-amz-meta-stfs-sha256"] == \
            hashlib.sha256(data["config.json"]).hexdigest()
        m = manifest(e.sw, "copies")
        assert m["format"] == "stfs-mirror" and m["version"] == 1
        assert m["origin"] == "hf://org/m" and m["revision"] == sha
        assert m["block_size"] == BLOCK
        files = {f["path"]: f for f in m["files"]}
        assert set(files) == set(data)
        for path, b in data.items():
            f = files[path]
            assert f["size"] == len(b)
            assert f["sha256"] == hashlib.sha256(b).hexdigest()
            if path.endswith(".safetensors"):
                assert f["origin_sum"] == "sha256:" + f["sha256"]
            else:
                blob = hashlib.sha1(b"blob %d\0" % len(b) + b).hexdigest()
                assert f["origin_sum"] == "sha1-blob:" + blob
            want = "".join("%08x" % crc32c(b[i:i + BLOCK])
                           for i in range(0, len(b), BLOCK))
            assert f["crc32c"] == want, path
            st, h, _ = get(e.sw, "copies/" + path)
            assert f["etag"] == h["ETag"], path
        # the same again: everything is there and verified, nothing read
        _, n = origin_bytes(e.w, data)
        j = mirror(src, "s3://models/copies")
        assert j["files_skipped"] == 4, j
        assert origin_bytes(e.w, data, n)[0] == 0


def test_nodes_read_once(d):
    """Four nodes, each a daemon in a network namespace of its own that
    reaches the servers over its own veth pair, read the model: the
    origin serves it once in all."""
    why = netns.available()
    assert why is None, "four nodes in namespaces need: %s" % why
    with Env(d) as e, netns.Fleet(8, servers(e)) as fl:
        sha, data = model(d, e.w)
        src = "hf://org/m@" + sha
        total = sum(len(v) for v in data.values())
        _, n0 = origin_bytes(e.w, data)
        mirror(src, "s3://models/fleet")
        got, n1 = origin_bytes(e.w, data, n0)
        assert got == total, (got, total)
        seen = len(e.w.hub.seen)
        prom = os.path.join(d, "node0.prom")
        rx = [fl.rx_bytes(i) for i in range(8)]
        nodes = [node(d, i, src, "mirror=s3://models/fleet",
                      *(["metrics=" + prom] if i == 0 else []),
                      wrap=fl.wrap(i))
                 for i in range(4)]
        for p, mnt, log in nodes:
            read_all(mnt, data)
            b = data["model.safetensors"]
            at = 8 + int.from_bytes(b[:8], "little")
            with open(os.path.join(mnt, "w"), "rb") as f:     # a tensor
                assert f.read() == b[at:]
        for p, mnt, log in nodes:
            stop_logged(p, mnt)
            assert "stfs: mirror s3://models/fleet: reading hf://org/m@" \
                in slurp(log), slurp(log)
            assert "read from the origin" not in slurp(log), slurp(log)
        # the nodes took nothing from the origin, and asked the Hub
        # nothing: no revision, no tree (the listing came from the
        # manifest), no resolve of a file
        assert origin_bytes(e.w, data, n1)[0] == 0
        assert resolves(e.w, seen) == []
        assert [p for p, _ in e.w.hub.seen[seen:]] == [], \
            e.w.hub.seen[seen:]
        for p, mnt, log in nodes:
            assert "the listing from its manifest" in slurp(log), slurp(log)
        # each node's bytes came over its own link
        for i in range(4):
            assert fl.rx_bytes(i) - rx[i] >= total, (i, fl.rx_bytes(i))
        # the counters tell the tiers apart: the tensor's bytes came from
        # the mirror, the origin gave the listing only
        tiers = {}
        for line in slurp(prom).splitlines():
            if line.startswith("stfs_fetched_bytes_total{"):
                tiers[line.split('"')[1]] = float(line.split()[-1])
        big = len(data["model.safetensors"])
        assert tiers["mirror"] >= big - 65536, tiers
        # each byte once: a file's first block, checked at open, is not
        # fetched again for the first read of it
        assert tiers["mirror"] <= total, (tiers, total)
        assert tiers["origin"] < big / 4, tiers
        print("     origin: %d bytes for the mirror, 0 for 4 nodes; node 0 "
              "counted %d bytes from the mirror, %d from the origin" % (
                  got, tiers["mirror"], tiers["origin"]))
        # without the mirror: each node reads the origin
        _, n2 = origin_bytes(e.w, data)
        nodes = [node(d, 10 + i, src, wrap=fl.wrap(4 + i))
                 for i in range(4)]
        for p, mnt, log in nodes:
            read_all(mnt, data)
        for p, mnt, log in nodes:
            stop_logged(p, mnt)
        again = origin_bytes(e.w, data, n2)[0]
        assert again >= 4 * total, (again, total)
        for i in range(4, 8):
            assert fl.rx_bytes(i) - rx[i] >= total, (i, fl.rx_bytes(i))
        print("     without it: %.2fx the model's bytes" % (again / total))


def swift_data_file(sw, body):
    """The .data file on Swift's disk that holds body."""
    for p in glob.glob(os.path.join(sw.dir, "devices", "**", "*.data"),
                       recursive=True):
        if os.path.getsize(p) == len(body):
            with open(p, "rb") as f:
                if f.read() == body:
                    return p
    raise AssertionError("no .data file holds the object")


def test_bad_objects(d):
    """A flipped byte, a truncated object, another version's bytes: not
    served; read from the origin, and the log says so."""
    with Env(d) as e:
        sha, data = model(d, e.w)
        src = "hf://org/m@" + sha
        mirror(src, "s3://models/bad")
        small = data["extra/small.safetensors"]
        # rot on the store's disk: same ETag, one byte other
        p = swift_data_file(e.sw, small)
        with open(p, "r+b") as f:
            f.seek(len(small) // 2)
            f.write(bytes([small[len(small) // 2] ^ 0xFF]))
        # truncated, and replaced by another version's bytes (new ETags)
        e.sw.put("models", "bad/config.json", data["config.json"][:-3])
        e.sw.put("models", "bad/model.safetensors",
                 data["model.safetensors"][::-1])
        _, n = origin_bytes(e.w, data)
        pr, mnt, log = node(d, 0, src, "mirror=s3://models/bad")
        read_all(mnt, data)
        stop_logged(pr, mnt)
        text = slurp(log)
        assert "extra/small.safetensors: block 0 fails its check" in text, \
            text
        assert "config.json" in text and "model.safetensors" in text
        assert text.count("read from the origin") >= 3, text
        served, _ = origin_bytes(e.w, data, n)
        # the three files came from the origin; README.md from the mirror
        assert served >= len(small) + len(data["config.json"]) + \
            len(data["model.safetensors"]), served
        assert served < sum(len(v) for v in data.values()) + 2 * BLOCK


def test_mirror_down(d):
    """The mirror goes away under a mount: the reads go on from the
    origin."""
    with Env(d) as e:
        sha, data = model(d, e.w)
        src = "hf://org/m@" + sha
        mirror(src, "s3://models/down")
        port = int(e.sw.endpoint.rsplit(":", 1)[1])
        proxy = DelayProxy(port, 0.0)
        try:
            os.environ["AWS_ENDPOINT_URL"] = proxy.url
            p, mnt, log = node(d, 0, src, "mirror=s3://models/down")
        finally:
            os.environ["AWS_ENDPOINT_URL"] = e.sw.endpoint
            proxy.stop()
        _, n = origin_bytes(e.w, data)
        read_all(mnt, data)
        stop_logged(p, mnt)
        text = slurp(log)
        assert "reading hf://org/m@" in text, text
        assert "reading from the origin" in text, text
        # blocks 1 and 2 of the big file came from the origin
        assert origin_bytes(e.w, data, n)[0] >= \
            len(data["model.safetensors"]) - BLOCK
        # a mirror that cannot be reached at mount: not used, said so
        os.environ["AWS_ENDPOINT_URL"] = proxy.url      # nothing there
        try:
            p, mnt, log = node(d, 1, src, "mirror=s3://models/down")
        finally:
            os.environ["AWS_ENDPOINT_URL"] = e.sw.endpoint
        read_all(mnt, data)
        stop_logged(p, mnt)
        assert "not used: cannot read its manifest" in slurp(log), \
            slurp(log)


def test_other_commit(d):
    """A mirror of another commit, or of other blocks, is not used."""
    with Env(d) as e:
        old, _ = model(d, e.w)
        mirror("hf://org/m@" + old, "s3://models/other")
        new, data = model(d, e.w, extra=b"# v2\n")
        assert new != old
        src = "hf://org/m@" + new
        _, n = origin_bytes(e.w, data)
        p, mnt, log = node(d, 0, src, "mirror=s3://models/other")
        read_all(mnt, data)
        stop_logged(p, mnt)
        assert "not used: it mirrors hf://org/m@%s" % old in slurp(log), \
            slurp(log)
        # the same commit read in other blocks: not used either
        mirror(src, "s3://models/other2")
        p, mnt, log = node(d, 1, src, "mirror=s3://models/other2",
                           "block_size=1M")
        read_all(mnt, data)
        stop_logged(p, mnt)
        assert "with blocks of 4194304 bytes, this mount reads " \
            "hf://org/m@%s with blocks of 1048576" % new in slurp(log), \
            slurp(log)
        assert origin_bytes(e.w, data, n)[0] >= \
            sum(len(v) for v in data.values())


def test_resume(d):
    """Killed half-way, no manifest; run again, it copies the rest only."""
    with Env(d, lifetime=3600, rate="3m") as e:
        files = {}
        for i in range(6):
            b = make_model(os.path.join(d, "s%d" % i), 3 * MiB + 4096 * i)
            with open(b.path, "rb") as f:
                files["s%d.safetensors" % i] = f.read()
        sha = e.w.hub.push(e.w.hub.repo("org/r"),
                           {k: v for k, v in files.items()})
        src = "hf://org/r@" + sha
        total = sum(len(v) for v in files.values())
        p = subprocess.Popen([T.STFS, "mirror", "-q", "--jobs=1", src,
                              "s3://models/resume"],
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        T._procs.append(p)
        end = time.time() + 120
        receipts = []
        while not receipts and time.time() < end:
            st, _, body = e.sw.request(
                "GET", "/models?list-type=2&prefix=resume/.stfs-mirror/"
                "files/")
            receipts = re.findall(rb"<Key>([^<]+)</Key>", body)
            time.sleep(0.05)
        p.send_signal(signal.SIGKILL)
        p.wait()
        assert receipts, "no file was copied in 120 s"
        st, _, _ = get(e.sw, "resume/.stfs-mirror/manifest.json")
        assert st == 404, "a half-done mirror has a manifest"
        done = len(receipts)
        assert done < 6
        _, n = origin_bytes(e.w, files)
        j = mirror(src, "s3://models/resume")
        assert j["files_skipped"] >= done and j["files_done"] == 6, j
        fetched = origin_bytes(e.w, files, n)[0]
        assert fetched <= total - done * 3 * MiB, (fetched, total)
        m = manifest(e.sw, "resume")
        assert len(m["files"]) == 6
        for k, v in files.items():
            assert get(e.sw, "resume/" + k)[2] == v


def test_hostile_manifest(d):
    """A manifest that is not one: the mirror is not used, the reason is
    logged, the origin read."""
    with Env(d) as e:
        sha, data = model(d, e.w)
        src = "hf://org/m@" + sha
        mirror(src, "s3://models/hostile")
        m0 = manifest(e.sw, "hostile")
        m = json.loads(json.dumps(m0))
        m["files"][0]["crc32c"] = "00"          # not one per block
        e.sw.put("models", "hostile/.stfs-mirror/manifest.json",
                 json.dumps(m).encode())
        p, mnt, log = node(d, 0, src, "mirror=s3://models/hostile")
        read_all(mnt, data)
        stop_logged(p, mnt)
        assert "not used: its manifest: " in slurp(log), slurp(log)
        assert "\"crc32c\" is not 8 hex digits for each block" in \
            slurp(log), slurp(log)
        e.sw.put("models", "hostile/.stfs-mirror/manifest.json",
                 b"[" * 100000)
        p, mnt, log = node(d, 1, src, "mirror=s3://models/hostile")
        read_all(mnt, data)
        stop_logged(p, mnt)
        assert "not used: its manifest: not JSON" in slurp(log), slurp(log)
        m = dict(m0, complete="yes")
        e.sw.put("models", "hostile/.stfs-mirror/manifest.json",
                 json.dumps(m).encode())
        p, mnt, log = node(d, 4, src, "mirror=s3://models/hostile")
        read_all(mnt, data)
        stop_logged(p, mnt)
        assert '"complete" is not true or false' in slurp(log), slurp(log)
        # millions of empty arrays (json-c would build each: gigabytes
        # for 64 MiB): refused before it is parsed
        e.sw.put("models", "hostile/.stfs-mirror/manifest.json",
                 b'{"format":"stfs-mirror","files":[' + b"[]," * 2000000 +
                 b"[]]}")
        p, mnt, log = node(d, 3, src, "mirror=s3://models/hostile")
        read_all(mnt, data)
        stop_logged(p, mnt)
        assert "not used: its manifest: over 1600064 JSON values" in \
            slurp(log), slurp(log)
        # a file of 3000 blocks (block sums past a string's 4096 bytes)
        # is read; one the origin does not list is not used (a manifest
        # not "complete": the origin lists, and the node checks the
        # manifest against that listing)
        m = json.loads(json.dumps(m0))
        m["complete"] = False
        m["files"].append(dict(m["files"][0], path="big.bin",
                               size=3000 * BLOCK, crc32c="0" * 24000))
        e.sw.put("models", "hostile/.stfs-mirror/manifest.json",
                 json.dumps(m).encode())
        p, mnt, log = node(d, 2, src, "mirror=s3://models/hostile")
        read_all(mnt, data)
        stop_logged(p, mnt)
        assert "from it (4 of its 5 files)" in slurp(log), slurp(log)
        assert "big.bin: not in the origin's listing" in slurp(log)


def test_https_origin(d):
    """An https:// URL of one file (here nginx's, plain http): mirrored,
    read from the mirror after one byte asked of the origin with
    If-Match; the origin's file changed: the mirror's copy not used."""
    with Env(d) as e:
        sha, data = model(d, e.w)
        rel = "org/m/%s/model.safetensors" % sha
        url = "%s/%s" % (e.w.ngx.url().rstrip("/"), rel)
        b = data["model.safetensors"]
        j = mirror(url, "s3://models/https")
        assert j["files_done"] == 1 and j["bytes_total"] == len(b), j
        m = manifest(e.sw, "https")
        assert m["origin"] == url and m["revision"] == ""
        assert m["files"][0]["origin_etag"], m
        assert get(e.sw, "https/model.safetensors")[2] == b
        n = len(e.w.nginx_log().splitlines())
        p, mnt, log = node(d, 0, url, "mirror=s3://models/https")
        with open(os.path.join(mnt, "w"), "rb") as f:
            assert f.read() == b[8 + int.from_bytes(b[:8], "little"):]
        stop_logged(p, mnt)
        assert "from it (1 of its 1 files)" in slurp(log), slurp(log)
        # what the mirror's keys fetched is in a domain of its own: a
        # mount of the mirror object's plain URL (http:// or s3://) with
        # no keys, offline on the same cache, reads none of it
        murl = e.sw.endpoint.rstrip("/") + "/models/https/model.safetensors"
        with env(AWS_ACCESS_KEY_ID=None, AWS_SECRET_ACCESS_KEY=None,
                 AWS_SESSION_TOKEN=None):
            for i, spelling in enumerate(
                    (murl, "s3://models/https/model.safetensors")):
                mx = os.path.join(d, "plain%d" % i)
                os.makedirs(mx)
                r = subprocess.run(
                    [T.STFS, "mount", "-o", "offline,cache=" +
                     os.path.join(d, "cache0"), spelling, mx],
                    capture_output=True, text=True, timeout=60)
                if r.returncode == 0:
                    T.unmount(mx)
                assert r.returncode != 0, (spelling, r)
        # the origin was asked one byte, its version
        assert [ln.split(" ")[2] for ln in
                e.w.nginx_log().splitlines()[n:]] == ["bytes=0-0"]
        # the origin's file changes (its ETag with it)
        path = os.path.join(e.w.files, rel)
        os.utime(path, (1, 1))
        p, mnt, log = node(d, 1, url, "mirror=s3://models/https")
        with open(os.path.join(mnt, "w"), "rb") as f:
            assert f.read() == b[8 + int.from_bytes(b[:8], "little"):]
        stop_logged(p, mnt)
        assert "the origin's version is not the one mirrored" in \
            slurp(log), slurp(log)


def test_s3_origin(d):
    """An s3:// prefix mirrored into another: read from the mirror; an
    origin object replaced since: that file is not used."""
    with Env(d) as e:
        sha, data = model(d, e.w)
        for k, v in data.items():
            e.sw.put("other", "src/" + k, v)
        src = "s3://other/src/"
        j = mirror(src, "s3://models/froms3")
        assert j["files_done"] == 4, j
        m = manifest(e.sw, "froms3")
        assert m["origin"] == src
        sums = {f["path"]: f["origin_sum"] for f in m["files"]}
        assert sums["README.md"] == "md5:" + hashlib.md5(
            data["README.md"]).hexdigest()
        p, mnt, log = node(d, 0, src, "mirror=s3://models/froms3")
        read_all(mnt, data)
        stop_logged(p, mnt)
        assert "reading s3://other/src/ from it (4 of its 4 files)" in \
            slurp(log), slurp(log)
        e.sw.put("other", "src/config.json", data["config.json"] + b" ")
        data["config.json"] += b" "
        p, mnt, log = node(d, 1, src, "mirror=s3://models/froms3")
        read_all(mnt, data)
        stop_logged(p, mnt)
        assert "config.json: the origin lists another size" in slurp(log)
        assert "(3 of its 4 files)" in slurp(log), slurp(log)


def test_mirror_profile(d):
    """-o mirror_profile=NAME: the mirror read with that profile's keys,
    not the chain's (here the environment's, which the store refuses)."""
    with Env(d) as e:
        sha, data = model(d, e.w)
        src = "hf://org/m@" + sha
        mirror(src, "s3://models/prof")
        creds = os.path.join(d, "credentials")
        with open(creds, "w") as f:
            f.write("[mirror-ro]\naws_access_key_id = %s\n"
                    "aws_secret_access_key = %s\n" % (s3server.ACCESS,
                                                     s3server.SECRET))
        with env(AWS_ACCESS_KEY_ID="AKIDNOTTHEONE",
                 AWS_SECRET_ACCESS_KEY="not-the-secret",
                 AWS_SHARED_CREDENTIALS_FILE=creds):
            logs = []
            for i, o in enumerate(["mirror=s3://models/prof",
                                   "mirror=s3://models/prof,"
                                   "mirror_profile=mirror-ro",
                                   "mirror=s3://models/prof,"
                                   "mirror_profile=nosuch"]):
                p, mnt, log = node(d, i, src, o)
                read_all(mnt, data)
                stop_logged(p, mnt)
                logs.append(slurp(log))
        assert "not used: cannot read its manifest" in logs[0], logs[0]
        assert "reading hf://org/m@%s from it" % sha in logs[1], logs[1]
        assert 'the AWS profile "nosuch"' in logs[2], logs[2]
        assert "not-the-secret" not in "".join(logs)
        assert s3server.SECRET not in "".join(logs)
        # STFS_MIRROR_AWS_*: the mirror's own keys in the environment,
        # read by it alone (the chain's, AWS_*, are refused by the store)
        with env(AWS_ACCESS_KEY_ID="AKIDNOTTHEONE",
                 AWS_SECRET_ACCESS_KEY="not-the-secret",
                 STFS_MIRROR_AWS_ACCESS_KEY_ID=s3server.ACCESS,
                 STFS_MIRROR_AWS_SECRET_ACCESS_KEY=s3server.SECRET):
            p, mnt, log = node(d, 3, src, "mirror=s3://models/prof")
            read_all(mnt, data)
            stop_logged(p, mnt)
            assert "reading hf://org/m@%s from it" % sha in slurp(log), \
                slurp(log)
            with env(STFS_MIRROR_AWS_SECRET_ACCESS_KEY=None):
                p, mnt, log = node(d, 4, src, "mirror=s3://models/prof")
                read_all(mnt, data)
                stop_logged(p, mnt)
            assert "STFS_MIRROR_AWS_ACCESS_KEY_ID is set without " \
                "STFS_MIRROR_AWS_SECRET_ACCESS_KEY" in slurp(log), slurp(log)
            assert s3server.SECRET not in slurp(log)


def test_origin_bytes_wrong(d):
    """The origin serves other bytes than its listing's sha256: not
    mirrored (a multipart upload aborted, no object), no manifest,
    exit 1 naming the file."""
    with Env(d) as e:
        sha, data = model(d, e.w)
        path = os.path.join(e.w.files, "org/m", sha, "model.safetensors")
        with open(path, "r+b") as f:
            f.seek(9 * MiB)
            f.write(b"\xff")
        r = stfs("mirror", "--json", "hf://org/m@" + sha,
                 "s3://models/wrong")
        assert r.returncode == 1, r
        assert json.loads(r.stdout)["state"] == "failed"
        assert "model.safetensors: the bytes read are not those the " \
            "origin published (sha256 " in r.stderr, r.stderr
        assert get(e.sw, "wrong/model.safetensors")[0] == 404
        assert get(e.sw, "wrong/.stfs-mirror/manifest.json")[0] == 404
        # no upload left behind either
        st, _, body = e.sw.request("GET", "/models?uploads")
        assert st == 200 and b"ListMultipartUploadsResult" in body, body
        assert b"wrong/model.safetensors" not in body, body


def test_select(d):
    """--include and --exclude: fnmatch globs on the files' paths, '*'
    across '/'; a selection of nothing is an error."""
    with Env(d) as e:
        sha, data = model(d, e.w)
        src = "hf://org/m@" + sha
        j = mirror(src, "s3://models/sel", "--include=*.safetensors",
                   "--exclude=extra/*")
        assert j["files_total"] == 1, j
        m = manifest(e.sw, "sel")
        assert [f["path"] for f in m["files"]] == ["model.safetensors"]
        assert get(e.sw, "sel/config.json")[0] == 404
        assert get(e.sw, "sel/extra/small.safetensors")[0] == 404
        j = mirror(src, "s3://models/sel2", "--include=*small*")
        assert [f["path"] for f in manifest(e.sw, "sel2")["files"]] == \
            ["extra/small.safetensors"]
        r = stfs("mirror", "--include=nothing*", src, "s3://models/sel3")
        assert r.returncode == 1 and "no file to mirror (--include, " \
            "--exclude)" in r.stderr, r


def test_listing_needs(d):
    """The listing comes from the manifest only for a commit and a
    manifest of every file: a mirror made with --include, or a mount of a
    branch, lists at the Hub's API (and reads the bytes from the mirror
    all the same)."""
    with Env(d) as e:
        sha, data = model(d, e.w)
        src = "hf://org/m@" + sha
        mirror(src, "s3://models/part", "--exclude=README.md")
        assert manifest(e.sw, "part")["complete"] is False
        mirror(src, "s3://models/whole")
        assert manifest(e.sw, "whole")["complete"] is True
        for i, (s, m) in enumerate([(src, "part"),
                                    ("hf://org/m@main", "whole")]):
            seen = len(e.w.hub.seen)
            _, n = origin_bytes(e.w, data)
            p, mnt, log = node(d, i, s, "mirror=s3://models/" + m)
            read_all(mnt, data)
            stop_logged(p, mnt)
            asked = [q for q, _ in e.w.hub.seen[seen:]]
            assert any("/api/models/org/m/tree/" in q for q in asked), asked
            assert "the listing from its manifest" not in slurp(log)
            assert "reading hf://org/m@%s from it" % sha in slurp(log), \
                slurp(log)
            # README.md (left out of "part") came from the origin only
            got = origin_bytes(e.w, data, n)[0]
            assert got == (len(data["README.md"]) if m == "part" else 0), \
                got


def test_hub_down(d):
    """The Hub's API and its CDN gone: a pinned source with a complete
    mirror mounts and reads from the manifest and the bucket alone;
    without the mirror the mount fails."""
    with Env(d) as e:
        sha, data = model(d, e.w)
        src = "hf://org/m@" + sha
        mirror(src, "s3://models/hubdown")
        e.w.hub.stop()
        e.w.ngx.stop()
        p, mnt, log = node(d, 0, src, "mirror=s3://models/hubdown",
                           "retries=0")
        read_all(mnt, data)
        stop_logged(p, mnt)
        assert "the listing from its manifest" in slurp(log), slurp(log)
        r = subprocess.run([T.STFS, "mount", "-o", "retries=0,cache=" +
                            os.path.join(d, "cache1"), src,
                            os.path.join(d, "mnt0")],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode != 0, r


def test_usage(d):
    """Bad arguments: exit 2 or 1 with the reason, nothing written."""
    r = stfs("mirror")
    assert r.returncode == 2 and "usage: stfs mirror" in r.stderr
    r = stfs("mirror", "--jobs=0", "hf://a/b", "s3://models/x")
    assert r.returncode == 2 and "--jobs" in r.stderr
    for o in ("cache=/tmp", "offline", "mirror=s3://models/y",
              "mirror_profile=p", "nosuch=1"):
        r = stfs("mirror", "-o", o, "hf://a/b", "s3://models/x")
        assert r.returncode == 2 and \
            "not an option of stfs mirror" in r.stderr, (o, r)
    r = stfs("mirror", "-o", "retries=x", "hf://a/b", "s3://models/x")
    assert r.returncode == 2 and "retries=x: give 0 to 100" in r.stderr
    r = stfs("mirror", "hf://a/b", "http://example.invalid/x")
    assert r.returncode == 1 and "not s3://BUCKET/PREFIX" in r.stderr, r


def run():
    try:
        return T.run_tests([
            test_mirror_copies,
            test_nodes_read_once,
            test_bad_objects,
            test_mirror_down,
            test_other_commit,
            test_resume,
            test_hostile_manifest,
            test_https_origin,
            test_s3_origin,
            test_origin_bytes_wrong,
            test_mirror_profile,
            test_select,
            test_listing_needs,
            test_hub_down,
            test_usage,
        ])
    finally:
        s3server.stop_shared()


if __name__ == "__main__":
    sys.exit(run())

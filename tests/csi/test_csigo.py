#!/usr/bin/env python3
"""test_csigo.py: the CSI driver's Go module (csi/) checked as Go code:
gofmt has nothing to say, go vet passes, go test passes (the volume
attributes' checks, the manifests under deploy/kubernetes/ decoded
strictly into Kubernetes' types, the metrics' checks of a daemon's file),
and so does go test -race on the driver, the metrics, kubelet's
registration and /healthz, all offline: the modules come from the
cache scripts/deps.sh fills (`go mod download` in csi/), pinned by
csi/go.sum."""
import os
import shutil
import subprocess
import sys
import time

# Go: on PATH, else where go.dev's archive puts it (scripts/deps.sh)
GO = shutil.which("go") or "/usr/local/go/bin/go"
GOFMT = os.path.join(os.path.dirname(GO), "gofmt")
MODULE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                      "..", "csi")


def main():
    if not os.access(GO, os.X_OK):
        print("go is missing: scripts/deps.sh installs it")
        return 1
    env = dict(os.environ, GOFLAGS="-mod=readonly", GOPROXY="off",
               GOTOOLCHAIN="local", CGO_ENABLED="0")
    failed = 0
    steps = (("gofmt", [GOFMT, "-l", "."]),
             ("vet", [GO, "vet", "./..."]),
             ("test", [GO, "test", "-count=1", "./..."]),
             # the packages with goroutines of their own under the race
             # detector (cgo: the C compiler is there for stfs anyway)
             ("race", [GO, "test", "-race", "-count=1",
                       "./internal/metrics/", "./internal/driver/",
                       "./internal/registration/", "./internal/health/"]))
    for name, argv in steps:
        t = time.time()
        e = dict(env, CGO_ENABLED="1") if name == "race" else env
        r = subprocess.run(argv, cwd=MODULE, env=e, capture_output=True,
                           timeout=900)
        out = (r.stdout + r.stderr).decode()
        bad = r.returncode != 0 or (name == "gofmt" and out.strip())
        print("%s %s (%.2fs)" % ("FAIL" if bad else "ok  ", name,
                                 time.time() - t))
        if bad:
            print(out)
            failed += 1
    print("%d passed, %d failed" % (len(steps) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/bin/bash
# run-tests.sh: the whole test suite, as README.md and CI run it.
#  1. release build, installed (so `mount -t fuse.stfs` finds stfs), unit
#     tests (Check) and mount tests (real FUSE mounts), then the installed
#     library, man page, fstab line, Debian and RPM packages;
#  2. the same tests in an AddressSanitizer + UndefinedBehaviorSanitizer
#     build, the daemon's leak check included (LeakSanitizer at exit);
#  3. a short libFuzzer run of each harness;
#  4. the cluster suite (tests/csi/test_cluster.py: the CSI driver under a real
#     kubelet) where the machine allows it (root, /dev/fuse, namespaces,
#     Go, containerd, runc, etcd): its Kubernetes binaries, built once per
#     machine (tests/csi/cluster/build.sh: 26 min measured on a fresh one
#     under load), are built in the background from the start, and the
#     suite waits for them.
# Says how long each stage took (and each test, in meson's lines and as
# "time:" lines), then the stages' times together; ends with one line
# "N passed, N failed" over everything.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh || exit 1
passed=0
failed=0
stages=()

# stage NAME: a stage begins (the one before it ends); stage "": the last ends
stage_name=
stage_t0=$SECONDS
stage() {
	if [ -n "$stage_name" ]; then
		stages+=("$(printf "%-22s %6d s" "$stage_name" \
			$((SECONDS - stage_t0)))")
		echo "=== time: $stage_name $((SECONDS - stage_t0)) s"
	fi
	stage_name=$1
	stage_t0=$SECONDS
}

# Add up test cases, not suites: Check's checks of the unit suite, and
# each test function of a mount test file (from its own closing line); a
# suite that crashed or failed with no such line counts one failure more.
# Each failed case is also remembered (its FAIL line and the error under
# it) and printed again at the end, where a truncated log still shows it.
failures=$(mktemp)
cluster_bg=
cluster_log=$(mktemp)
csi_image=
trap 'rm -f "$failures" "$cluster_log"; rm -rf "$csi_image"
	[ -z "$cluster_bg" ] || kill -- -"$cluster_bg" 2>/dev/null' EXIT

# cluster_why: empty when this machine can run the cluster suite, else why
cluster_why() {
	local c
	[ "$(id -u)" = 0 ] || { echo "not root"; return; }
	[ -c /dev/fuse ] || { echo "no /dev/fuse"; return; }
	for c in go containerd runc ctr etcd etcdctl openssl ip; do
		command -v "$c" >/dev/null || [ -x "/usr/local/go/bin/$c" ] ||
			{ echo "no $c"; return; }
	done
	[ -x /usr/lib/cni/bridge ] || { echo "no CNI plugins"; return; }
	unshare --mount --net --pid --fork --mount-proc true 2>/dev/null ||
		echo "no new mount, network and PID namespaces"
}
why=$(cluster_why)
if [ -z "$why" ]; then
	# the Kubernetes binaries and the images, niced, beside the stages
	# below (in a process group of its own, killed if this script ends
	# first); the cluster stage waits for it
	echo "=== cluster suite: its binaries and images built in the background"
	PATH=$PATH:/usr/local/go/bin setsid -w bash -c \
		'bash tests/csi/cluster/build.sh >/dev/null &&
		 bash tests/csi/cluster/images.sh >/dev/null' \
		>"$cluster_log" 2>&1 </dev/null &
	cluster_bg=$!
fi
count() {   # meson's testlog.json
	local p f
	read -r p f < <(/usr/bin/python3 - "$1" "$failures" <<'PY' || echo "0 1"
import json, re, sys
p = f = 0
why = open(sys.argv[2], "a")
for line in open(sys.argv[1]):
    t = json.loads(line)
    out = t.get("stdout") or ""
    m = re.findall(r"^(\d+) passed, (\d+) failed$", out, re.M)
    c = re.findall(r"Checks: (\d+), Failures: (\d+), Errors: (\d+)", out)
    if m:
        tp, tf = map(int, m[-1])
    elif c:
        n, fl, er = map(int, c[-1])
        tp, tf = n - fl - er, fl + er
    else:
        tp, tf = (1, 0) if t["result"] == "OK" else (0, 1)
    if t["result"] not in ("OK", "SKIP") and tf == 0:
        tf = 1
    if tf:
        lines = (out + (t.get("stderr") or "")).splitlines()
        said = 0
        for i, l in enumerate(lines):
            if l.startswith("FAIL ") or re.match(r"^\S.*:\d+:[EF]:", l):
                errs = [x for x in lines[i + 1:i + 40]
                        if re.match(r"^[A-Za-z]*(Error|Exception)\b", x)]
                print("%s (%s): %s%s" % (t["name"], sys.argv[1], l[:300],
                      (" | " + errs[0][:300]) if errs else ""), file=why)
                said += 1
        if not said:
            print("%s (%s): %s, %s" % (t["name"], sys.argv[1], t["result"],
                  (lines[-1][:300] if lines else "no output")), file=why)
    p += tp
    f += tf
    print("time: %-28s %7.1f s  %d passed, %d failed" % (
        t["name"], t.get("duration") or 0, tp, tf), file=sys.stderr)
print(p, f)
PY
)
	passed=$((passed + p))
	failed=$((failed + f))
}

run_build() {   # name, meson options...
	local dir=$1
	shift
	stage "build $dir"
	echo "=== build $dir $*"
	if ! { [ -d "$dir" ] && meson setup --reconfigure "$dir" "$@" >/dev/null ||
	       meson setup "$dir" "$@" >/dev/null; } ||
	   ! ninja -C "$dir" >/dev/null; then
		echo "build $dir failed"
		failed=$((failed + 1))
		return 1
	fi
}

if run_build build -Dwerror=true; then
	stage "install"
	meson install -C build --quiet >/dev/null && ldconfig ||
		{ echo "install failed"; failed=$((failed + 1)); }
	# the release build is installed: `mount -t fuse.stfs` must use it
	stage "tests"
	STFS_REQUIRE_INSTALLED=1 \
	meson test -C build --print-errorlogs --num-processes 1 ||
		cat build/meson-logs/testlog.txt | tail -80
	count build/meson-logs/testlog.json
	# not in the run above (its setup leaves the suite out): installed
	# files and packages (tests/install/test_install.py), each case counted once
	stage "install tests"
	# the driver's image, built once for its own test (install suite)
	# and the cluster suite (STFS_CSI_IMAGE): minutes each otherwise
	csi_image=$(mktemp -d "${TMPDIR:-/tmp}/stfs-csi-image.XXXXXX")
	if bash scripts/build-csi-image.sh "$csi_image" >"$csi_image.log" 2>&1
	then
		export STFS_CSI_IMAGE=$csi_image
	else
		echo "=== the driver's image did not build (its tests build it" \
			"again):"
		tail -20 "$csi_image.log"
	fi
	rm -f "$csi_image.log"
	echo "=== installed files and packages (meson test --suite install)"
	meson test -C build --suite install --print-errorlogs \
		--num-processes 1 --logbase install ||
		tail -80 build/meson-logs/install.txt
	count build/meson-logs/install.json
fi

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
if run_build build-asan -Db_sanitize=address,undefined -Db_lundef=false \
	-Dc_args=-fno-sanitize-recover=all \
	-Dbuildtype=debug -Dwerror=true; then
	stage "asan tests"
	# all but the creds suite, which waits 3 minutes for 60-s keys to
	# expire: its parsers run under ASan in check_creds and fuzz_creds,
	# its threads under ThreadSanitizer below; and but the go suite
	# (gofmt, vet and go test of csi/: no C in it, run in the release
	# build above)
	meson test -C build-asan --print-errorlogs --num-processes 1 \
		--no-suite creds --no-suite go ||
		tail -80 build-asan/meson-logs/testlog.txt
	count build-asan/meson-logs/testlog.json
fi

# ThreadSanitizer over the threaded remote code: workers, the cache's
# writer, parallel opens, readers sharing blocks, the refresh of
# temporary AWS credentials (creds), the counters (metrics: the writer
# thread, the requests timed).  A report is a failure.
tsan_logs=$PWD/build-tsan/tsan-logs
if run_build build-tsan -Db_sanitize=thread -Dbuildtype=debug \
	-Dwerror=true; then
	stage "tsan tests"
	rm -rf "$tsan_logs" && mkdir -p "$tsan_logs"
	TSAN_OPTIONS="log_path=$tsan_logs/report second_deadlock_stack=1" \
	meson test -C build-tsan --print-errorlogs \
		--num-processes 1 remote prefetch hub s3 creds metrics ||
		tail -80 build-tsan/meson-logs/testlog.txt
	count build-tsan/meson-logs/testlog.json
	if [ -n "$(ls -A "$tsan_logs")" ]; then
		echo "=== ThreadSanitizer reports"
		cat "$tsan_logs"/*
		failed=$((failed + 1))
	fi
fi

if [ -x tests/fuzz/run-fuzz.sh ]; then   # one case per harness
	stage "fuzz (build and run)"
	out=$(bash tests/fuzz/run-fuzz.sh "${STFS_FUZZ_SECONDS:-40}" 2>&1)
	echo "$out"
	# a harness that started and never said how it ended failed too
	n=$(echo "$out" | grep -cE "^fuzz: fuzz_[a-z]+ for [0-9]+ s$")
	p=$(echo "$out" | grep -cE "^fuzz: fuzz_[a-z]+ exit 0$")
	f=$((n - p))
	[ $((p + f)) -gt 0 ] || f=1     # it did not even build
	passed=$((passed + p))
	failed=$((failed + f))
fi

# The cluster suite, last: its background build has had every stage above
# to finish.  Run from the release build (the driver's image is the
# installed tree's .deb, the same for every build type), once.
if [ -n "$cluster_bg" ] && [ -d build ]; then
	stage "cluster tests"
	t0=$SECONDS
	wait "$cluster_bg"
	rc=$?
	cluster_bg=
	echo "=== cluster binaries and images: waited $((SECONDS - t0)) s" \
		"(exit $rc); their build says:"
	grep -E '^(build|images)\.sh: ' "$cluster_log" || tail -20 "$cluster_log"
	PATH=$PATH:/usr/local/go/bin \
	meson test -C build --suite cluster --print-errorlogs \
		--num-processes 1 --logbase cluster ||
		tail -80 build/meson-logs/cluster.txt
	count build/meson-logs/cluster.json
elif [ -n "$why" ]; then
	echo "=== cluster suite not run: $why"
	# CI's machine is one that allows it: there this is a failure
	if [ "${CI:-}" = true ]; then
		echo "cluster (CI): not run: $why" >>"$failures"
		failed=$((failed + 1))
	fi
fi

stage ""
if [ -s "$failures" ]; then
	echo "=== failed cases"
	cat "$failures"
fi
echo "=== stage times"
printf "%s\n" "${stages[@]}"
printf "%-22s %6d s\n" "all" "$SECONDS"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

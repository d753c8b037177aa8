#!/bin/bash
# deps.sh [demo|test|bench]: install (with apt-get) what stfs needs and is
# not installed yet: for `demo`, what building stfs and running the demo
# need; for `test` (the default), everything the full test suite uses as
# well (Check, clang for the fuzzers, numpy, torch and R for the reading
# examples, the packaging tools, nginx and openssl for the remote tests,
# OpenStack Swift and memcached for the S3 tests, Node.js and the Hugging
# Face JavaScript client from tests/loaders/hubjs/package-lock.json for the
# Hub tests, and the GGUF parser @huggingface/gguf from
# tests/loaders/ggufjs/package-lock.json for the GGUF tests; llama.cpp's
# prebuilt CPU binary (node-llama-cpp) from
# tests/loaders/llamajs/package-lock.json for the llama.cpp loader test;
# transformers.js with onnxruntime-node from
# tests/loaders/transformersjs/package-lock.json and python3-onnx, which
# writes its model, for the %repo/ loader tests; squashfuse and
# squashfs-tools for the benchmarks' squashfuse_ll baseline; stress-ng, the
# CPU hog under which the timing-sensitive suites are checked to hold on a
# busy machine (docs/reliability.md); the Python clients from PyPI, one
# virtualenv per tests/loaders/py-*/ folder from its hash-pinned
# requirements.txt, on Debian's python3 with python3-requests, -yaml and
# -packaging: docs/python.md; for `bench`, also tests/loaders/py-bench/ (the
# Run:ai Model Streamer and boto3, for tests/bench/bench_runai.py) and s3fs
# and rclone (for tests/bench/bench_s3_peers.py); runc, which runs the
# Kubernetes driver's image in its test, and for the one-node cluster of the
# `cluster` suite (tests/fixtures/clusterfix.py) containerd, etcd (server
# and etcdctl) and the CNI loopback plugin; Prometheus (promtool) and its
# node exporter, which tests/remote/test_metrics.py runs on the daemon's -o
# metrics= file, and which scrapes the driver's /metrics in
# tests/csi/test_csi_metrics.py; the Go modules of the Kubernetes driver,
# csi/, pinned by csi/go.sum, into Go's module cache with `go mod download`,
# so that its tests build offline: Go itself (>= the version csi/go.mod
# names) must be on PATH or in /usr/local/go, since Debian 12's is too old).
# Quiet when everything is there.
set -euo pipefail
base=(build-essential meson ninja-build pkg-config libfuse3-dev fuse3
      libjson-c-dev libcurl4-openssl-dev libssl-dev libexpat1-dev attr
      python3 python3-numpy)
full=(check clang libclang-rt-14-dev python3-torch r-base-core debhelper
      dpkg-dev fakeroot rpm nginx swift swift-proxy swift-account
      swift-container swift-object memcached openssl ca-certificates
      awscli squashfuse squashfs-tools python3-onnx python3-venv runc
      containerd etcd-server etcd-client containernetworking-plugins
      python3-requests python3-yaml python3-packaging python3-dateutil
      python3-jmespath python3-urllib3 prometheus prometheus-node-exporter
      stress-ng)
case "${1:-test}" in
demo) pkgs=("${base[@]}") ;;
test) pkgs=("${base[@]}" "${full[@]}") ;;
# the peers of tests/bench/bench_s3_peers.py (Mountpoint for Amazon S3 is
# built from its source: scripts/build-mountpoint-s3.sh)
bench) pkgs=("${base[@]}" "${full[@]}" s3fs rclone) ;;
*) echo "usage: deps.sh [demo|test|bench]" >&2; exit 2 ;;
esac
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing+=("$p")
done
# Node.js (the machine's, else Debian's) for the Hub client check
if [ "${1:-test}" != demo ] && ! command -v node >/dev/null; then
	missing+=(nodejs npm)
fi
hubjs() {   # the pinned JavaScript packages, from their lockfiles
	local d m
	[ "${1:-test}" != demo ] || return 0
	for m in hubjs/@huggingface/hub ggufjs/@huggingface/gguf \
		llamajs/node-llama-cpp transformersjs/@huggingface/transformers \
		s3js/@aws-sdk/client-s3; do
		d="$(dirname "$0")/../tests/loaders/${m%%/*}"
		[ -d "$d/node_modules/${m#*/}" ] && continue
		# each dir's .npmrc: no GPU builds; node-llama-cpp never
		# downloads llama.cpp from GitHub, onnxruntime-node never
		# fetches CUDA providers from NuGet
		(cd "$d" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true \
			ONNXRUNTIME_NODE_INSTALL=skip npm ci \
			--no-audit --no-fund --loglevel=error >/dev/null)
	done
}
pyvenvs() {   # the pinned Python packages: a venv per tests/loaders/py-*/
	local req d want
	[ "${1:-test}" != demo ] || return 0
	for req in "$(dirname "$0")"/../tests/loaders/py-*/requirements.txt; do
		[ -f "$req" ] || continue
		d=$(dirname "$req")
		# the benchmarks' packages only when asked for (deps.sh bench)
		[ "${d##*/}" != py-bench ] || [ "${1:-test}" = bench ] || continue
		want=$(sha256sum <"$req")
		[ "$(cat "$d/.venv/.installed" 2>/dev/null)" = "$want" ] && continue
		echo "deps: Python packages of ${d##*/} (pip, hash-pinned)"
		rm -rf "$d/.venv"
		# Debian's python3 with its site packages (numpy, torch) seen
		/usr/bin/python3 -m venv --system-site-packages "$d/.venv" &&
		"$d/.venv/bin/pip" install --quiet --disable-pip-version-check \
			--no-input --require-hashes --no-deps -r "$req" &&
		echo "$want" >"$d/.venv/.installed" || return 1
	done
}
gomods() {   # csi/'s modules, pinned by csi/go.sum, for offline builds
	local mod go want have
	[ "${1:-test}" != demo ] || return 0
	mod="$(dirname "$0")/../csi"
	go=$(command -v go || echo /usr/local/go/bin/go)
	want=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$mod/go.mod")
	if ! have=$("$go" env GOVERSION 2>/dev/null); then
		echo "deps: Go >= $want is needed for csi/ (not found on PATH" \
			"or in /usr/local/go; Debian 12's golang-go is 1.19)" >&2
		return 1
	fi
	if [ "$(printf '%s\n%s\n' "go$want" "$have" | sort -V | head -1)" != \
		"go$want" ]; then
		echo "deps: csi/ needs Go >= $want, $go is $have" >&2
		return 1
	fi
	# quiet and quick when the cache has them all
	(cd "$mod" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly \
		"$go" mod download -x 2>&1 | grep -c '^# get' |
		sed 's/^/deps: Go modules fetched: /' | grep -v ': 0$' || true)
}
if [ ${#missing[@]} -eq 0 ]; then
	hubjs "${1:-test}"
	pyvenvs "${1:-test}"
	gomods "${1:-test}"
	exit
fi
echo "deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# nginx is for the tests, which start their own on loopback: its package
# must not start the system's (policy-rc.d 101: no service starts)
rc_d=/usr/sbin/policy-rc.d
if [ ! -e $rc_d ]; then
	printf '#!/bin/sh\nexit 101\n' | $SUDO tee $rc_d >/dev/null
	$SUDO chmod +x $rc_d
	trap '$SUDO rm -f $rc_d' EXIT
fi
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
hubjs "${1:-test}"
pyvenvs "${1:-test}"
gomods "${1:-test}"

#!/bin/bash
# deps.sh: install (with apt-get) whatever stfs needs to build and test that
# is not installed yet.  Quiet when everything is there.
set -euo pipefail
pkgs=(build-essential meson ninja-build pkg-config libfuse3-dev fuse3
      libjson-c-dev check attr python3 clang libclang-rt-14-dev
      python3-numpy python3-torch r-base-core debhelper dpkg-dev fakeroot
      rpm)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

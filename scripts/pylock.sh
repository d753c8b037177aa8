#!/bin/bash
# pylock.sh tests/loaders/py-NAME: write its requirements.txt, the whole
# closure of its requirements.in pinned with sha256 hashes, for
# scripts/deps.sh (pip install --require-hashes --no-deps into a venv on
# Debian's /usr/bin/python3 with --system-site-packages).  What Debian's
# packages give (numpy, torch, requests, yaml, packaging) is not in the
# lock: pip resolves against them, and numpy and torch are held at
# Debian's versions, so a package that would want newer ones fails here
# rather than pull PyPI's.  Hashes are those of the wheels for this
# machine (CPython 3.11, x86_64 Linux), which CI shares.  A folder may
# also have a requirements-nodeps.in: packages locked without their own
# dependencies (one that asks for a torch newer than Debian's yet runs on
# it); what they need is then named in requirements.in.
set -euo pipefail
d=${1:?usage: pylock.sh tests/loaders/py-NAME}
[ -f "$d/requirements.in" ] || { echo "pylock: no $d/requirements.in" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 -m venv --system-site-packages "$tmp/venv"
/usr/bin/python3 - >"$tmp/debian.txt" <<'PY'
import importlib.metadata as m
for name in ("numpy", "torch"):
    try:
        print(f"{name}=={m.version(name)}")
    except m.PackageNotFoundError:
        pass
PY
"$tmp/venv/bin/pip" install --quiet --disable-pip-version-check --no-input \
	--dry-run --only-binary :all: --report "$tmp/report.json" \
	-c "$tmp/debian.txt" -r "$d/requirements.in"
if [ -f "$d/requirements-nodeps.in" ]; then
	"$tmp/venv/bin/pip" install --quiet --disable-pip-version-check \
		--no-input --dry-run --only-binary :all: --no-deps \
		--ignore-installed --report "$tmp/nodeps.json" \
		-r "$d/requirements-nodeps.in"
else
	echo '{"install": []}' >"$tmp/nodeps.json"
fi
/usr/bin/python3 - "$tmp/report.json" "$d" "$tmp/nodeps.json" \
	>"$d/requirements.txt" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
report["install"] += json.load(open(sys.argv[3]))["install"]
print(f"# Written by scripts/pylock.sh {sys.argv[2]} from requirements.in: "
      "do not edit.")
for item in sorted(report["install"],
                   key=lambda i: i["metadata"]["name"].lower()):
    name = item["metadata"]["name"]
    if name.lower() in ("numpy", "torch"):
        sys.exit(f"pylock: {name} would come from PyPI, not Debian")
    sha = item["download_info"]["archive_info"]["hashes"]["sha256"]
    print(f"{name}=={item['metadata']['version']} \\\n"
          f"    --hash=sha256:{sha}")
PY
echo "pylock: $d/requirements.txt: $(grep -c '^[A-Za-z]' "$d/requirements.txt") packages"

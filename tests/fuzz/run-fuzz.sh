#!/bin/bash
# run-fuzz.sh [SECONDS [HARNESS...]]: build the libFuzzer harnesses with
# meson and clang (ASan + UBSan, in build-fuzz/) and fuzz each for SECONDS
# (default 60) of one core, as many at once as there are cores
# (STFS_FUZZ_JOBS); given names
# (header, index, http, remote, xml, gguf, zip, pickle, cache, prefetch,
# creds, promline, manifest),
# only those:
#   fuzz_header  the header parser and the name mapping, seeded with the
#                header of every file in tests/data/real and examples/;
#   fuzz_index   the index.json reader, seeded with every *.index.json there;
#   fuzz_http    the HTTP response-header parser of remote sources, the
#                checks of answers to range requests, when a redirect's
#                signed target URL expires, S3's checksum headers (and
#                base64, CRC-64/NVME);
#   fuzz_remote  the Hub's revision and tree answers (JSON), source URLs
#                and the secrets in them, the AWS CLI's INI files, hf://
#                revisions, names quoted for a terminal;
#   fuzz_xml     S3's XML (expat): ListObjectsV2 pages and error
#                documents, seeded with real and hostile ones;
#   fuzz_gguf    the GGUF reader and the foreign tensor table, seeded with
#                GGUF files of every value type, plain and quantized
#                tensors, v2 and v3, written by tests/fixtures/ggufw.py;
#   fuzz_zip     the zip reader and the zip checkpoint path, seeded with
#                checkpoints torch writes (when python3-torch is there);
#   fuzz_pickle  the pickle interpreter and the legacy checkpoint path,
#                seeded with torch's pickles and legacy checkpoints;
#   fuzz_cache   the cache's paths from hostile URLs and versions, and its
#                small files (latest, meta), block files and kept answers
#                with hostile contents;
#   fuzz_prefetch the payload of the prefetch ioctl (+GLOB, -GLOB, #ID,
#                all lines), seeded with what `stfs prefetch` sends;
#   fuzz_creds   what the credential services answer: the container
#                endpoint's, IMDS's and a credential_process's JSON, STS's
#                AssumeRoleWithWebIdentity XML, an Expiration, a
#                credential_process line, a container endpoint's URL;
#   fuzz_promline a line of a mount's counters as `stfs stats` reads it
#                (the Prometheus text format), seeded with stfs's lines.
#   fuzz_manifest a mirror's manifest (JSON: `stfs mirror`, -o mirror=),
#                seeded with one stfs writes and hostile ones.
# Inputs in tests/fuzz/regressions/<harness>/ are replayed first; crashes
# are written there too, for review, and become regression inputs.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-60}
shift || true
harnesses=${*:-header index http remote xml gguf zip pickle cache prefetch creds promline manifest}
out=build-fuzz
# meson builds the harnesses (-Dfuzz=true, tests/fuzz/meson.build) with
# clang, ASan and UBSan, against libstfs built room by room as always: the
# layer rule and the json-c poison hold for the code they run
if [ ! -f "$out/build.ninja" ]; then
	CC=clang meson setup "$out" -Dfuzz=true -Dtests=disabled \
		-Db_sanitize=address,undefined -Db_lundef=false \
		-Dc_args=-fno-sanitize-recover=all >/dev/null
fi
targets=()
for h in $harnesses; do
	targets+=("tests/fuzz/fuzz_$h")
done
ninja -C "$out" "${targets[@]}" >/dev/null
mkdir -p "$out"/{corpus,seeds}-{header,index}
python3 - "$out" tests/data/real examples <<'PY'
import os, struct, sys
out, *srcs = sys.argv[1:]
n = m = 0
for src in srcs:
    for root, _, files in os.walk(src):
        for f in sorted(files):
            p = os.path.join(root, f)
            if f.endswith(".index.json"):
                with open(p, "rb") as fh, \
                        open("%s/seeds-index/seed%03d" % (out, m), "wb") as o:
                    o.write(fh.read())
                m += 1
            if not f.endswith(".safetensors"):
                continue
            with open(p, "rb") as fh:
                head = fh.read(8)
                if len(head) < 8:
                    continue
                ln = struct.unpack("<Q", head)[0]
                if ln > 1 << 20:
                    continue
                with open("%s/seeds-header/seed%03d" % (out, n), "wb") as o:
                    o.write(fh.read(ln))
                n += 1
print("fuzz: %d seed headers, %d seed indexes" % (n, m))
PY
rc=0
mkdir -p "$out"/{corpus,seeds}-http
printf 'HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-1048575/2415919632\r\nETag: "6921b5a0-8fffff90"\r\nLast-Modified: Sun, 22 Nov 2026 08:00:00 GMT\r\nRetry-After: 5\r\n' \
	> "$out/seeds-http/seed000"
printf 'HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */0\r\n' \
	> "$out/seeds-http/seed001"
printf 'HTTP/1.1 429 Too Many Requests\r\nRetry-After: Wed, 21 Oct 2026 07:28:00 GMT\r\nContent-Encoding: gzip\r\n' \
	> "$out/seeds-http/seed002"
printf 'HTTP/1.1 302 Found\r\nX-Linked-Etag: "ab12"\r\nX-Linked-Size: 1073741832\r\nX-Repo-Commit: 0123456789abcdef0123456789abcdef01234567\r\nRateLimit: "resolvers";r=0;t=287\r\nRateLimit-Policy: "fixed window";"resolvers";q=3000;w=300\r\n' \
	> "$out/seeds-http/seed003"
printf 'https://b.s3.amazonaws.com/k?X-Amz-Date=20240101T000000Z&X-Amz-Expires=3600&Expires=17&X-Goog-Date=20240101T000000Z&X-Goog-Expires=9' \
	> "$out/seeds-http/seed004"
# ambiguous answers: two Content-Range, a Content-Length that disagrees,
# two ETags, two Last-Modified, a folded field, a space before a colon
printf 'HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-9/100\r\nContent-Range: bytes 10-19/100\r\nETag: "a"\r\n' \
	> "$out/seeds-http/seed005"
printf 'HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-9/100\r\nContent-Length: 9\r\nETag: W/"a"\r\n' \
	> "$out/seeds-http/seed006"
printf 'HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-9/100\r\nETag: "a"\r\nETag: "b"\r\nLast-Modified: Sun, 22 Nov 2026 08:00:00 GMT\r\nLast-Modified: Sun, 22 Nov 2026 08:00:09 GMT\r\n' \
	> "$out/seeds-http/seed007"
printf 'HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-9/100\r\n bytes 10-19/100\r\nETag : "a"\r\nContent-Length: 10\r\nContent-Length: 10\r\n' \
	> "$out/seeds-http/seed008"
# S3's checksums and encryption: full-object, composite, SSE-KMS, SSE-C,
# malformed; and a base64 value alone
printf 'HTTP/1.1 200 OK\r\nETag: "6f5902ac237024bdd0c176cb93063dc4"\r\nx-amz-checksum-sha256: qUiQTy8PR5uPgZdpSzAYSw0u0cHNKh7A+4XSmaGSpEc=\r\nx-amz-checksum-crc64nvme: D3gOhIHSoh8=\r\nx-amz-checksum-type: FULL_OBJECT\r\n' \
	> "$out/seeds-http/seed009"
printf 'HTTP/1.1 200 OK\r\nETag: "0123456789abcdef0123456789abcdef-3"\r\nx-amz-checksum-sha256: qUiQTy8PR5uPgZdpSzAYSw0u0cHNKh7A+4XSmaGSpEc=-3\r\nx-amz-checksum-type: COMPOSITE\r\nx-amz-server-side-encryption: aws:kms\r\n' \
	> "$out/seeds-http/seed010"
printf 'HTTP/1.1 200 OK\r\nETag: "6f5902ac237024bdd0c176cb93063dc4"\r\nx-amz-server-side-encryption-customer-algorithm: AES256\r\nx-amz-checksum-crc64nvme: D3gOhIHSoh9\r\nx-amz-checksum-crc64nvme: D3gOhIHSoh8=\r\n' \
	> "$out/seeds-http/seed011"
printf 'qUiQTy8PR5uPgZdpSzAYSw0u0cHNKh7A+4XSmaGSpEc=' > "$out/seeds-http/seed012"
mkdir -p "$out"/{corpus,seeds}-remote
{ printf '\0'; printf '{"id":"o/n","sha":"0123456789abcdef0123456789abcdef01234567"}'; } \
	> "$out/seeds-remote/seed000"
{ printf '\1'; printf '[{"type":"file","oid":"a","size":3,"path":"u/a","lfs":{"oid":"ff","size":3}},{"type":"directory","path":"u"}]'; } \
	> "$out/seeds-remote/seed001"
{ printf '\2'; printf 'al%%40ce:p%%3Aw@127.0.0.1:8080/d/m.safetensors?X-Amz-Signature=ab&e=1'; } \
	> "$out/seeds-remote/seed002"
{ printf '\3'; printf '[DEFAULT]\nregion = x\n[profile a b]\nAWS_Access_Key_ID : k\n  more\n\n# c\n[default]\nk=v\n'; } \
	> "$out/seeds-remote/seed003"
{ printf '\4'; printf 'refs/pr/1'; } > "$out/seeds-remote/seed004"
{ printf '\1'; printf '[{"type":"file","oid":"\033]0;t\007aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","size":3,"path":"a\302\233b\342\200\256c"},{"type":"file","path":"n","lfs":null,"oid":null}]'; } \
	> "$out/seeds-remote/seed005"
{ printf '\5'; printf 'a\302\233[2J\342\200\256gnp.exe\377\300\257\355\240\200\033]0;\007\343\201\202\360\237\230\200'; } \
	> "$out/seeds-remote/seed006"
# listings (first byte even) as S3 and Swift write them, and hostile ones;
# errors (odd: the output's size)
mkdir -p "$out"/{corpus,seeds}-xml
x=$out/seeds-xml
{ printf '\0'; printf '<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix>m/</Prefix><KeyCount>2</KeyCount><MaxKeys>1000</MaxKeys><Delimiter>/</Delimiter><IsTruncated>true</IsTruncated><Contents><Key>m/a&amp;b &#233;&#x4E2D;.safetensors</Key><LastModified>2026-11-24T10:00:00.000Z</LastModified><ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag><Size>12</Size><Owner><ID>o</ID><DisplayName>o</DisplayName></Owner><StorageClass>STANDARD</StorageClass></Contents><Contents><Key>m/c.safetensors</Key><Size>0</Size></Contents><CommonPrefixes><Prefix>m/sub/</Prefix></CommonPrefixes><NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken></ListBucketResult>'; } > "$x/seed000"
{ printf '\2'; printf '<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key><![CDATA[a<b]]></Key><Size>9999999999999999999</Size><ETag>"e-2"</ETag></Contents></ListBucketResult>'; } > "$x/seed001"
{ printf '\4'; printf '<!DOCTYPE ListBucketResult [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>&b;</Key><Size>1</Size></Contents></ListBucketResult>'; } > "$x/seed002"
{ printf '\6'; printf '<ListBucketResult><IsTruncated>false</IsTruncated><x><x><x><x><x><x><x><x><x><x><x><x><x><x><x></x></x></x></x></x></x></x></x></x></x></x></x></x></x></x></ListBucketResult>'; } > "$x/seed003"
{ printf '\177'; printf "<?xml version='1.0' encoding='UTF-8'?>\n<Error><Code>NoSuchKey</Code><Message>The specified key &lt;k&gt; does not exist.</Message><RequestId>tx1</RequestId>"; } > "$x/seed004"
{ printf '\7'; printf '<Error><Code>SignatureDoesNotMatch</Code><Message>\xc3\xa9\xc3\xa9\xc3\xa9</Message></Error>'; } > "$x/seed005"
mkdir -p "$out"/{corpus,seeds}-cache
export STFS_FUZZ_CACHE=$(mktemp -d /tmp/stfs-fuzz-cache-XXXXXX)
printf '\0https://h/m.safetensors\0"6921b5a0-8fffff90"\0' > "$out/seeds-cache/seed000"
printf '\1https://h/m.safetensors\0Sun, 22 Nov 2026 08:00:00 GMT\0001\nW/"x"\n' > "$out/seeds-cache/seed001"
printf '\3https://h/../../x\0"../../etc"\0../../../../tmp/x' > "$out/seeds-cache/seed002"
# a block file: a byte of its header and one of its bytes flipped; cut
# short; planted whole (all zeros)
printf '\376https://h/m.safetensors\0"e"\0\020\0\001\010\020\004' > "$out/seeds-cache/seed003"
printf '\006https://h/m.safetensors\0"e"\0\050' > "$out/seeds-cache/seed004"
{ printf '\376https://h/m.safetensors\0"e"\0\0'; head -c 4200 /dev/zero; } > "$out/seeds-cache/seed005"
printf '\3https://h/x\0v\00012345\n' > "$out/seeds-cache/seed007"
# a kept answer (a Hub tree page with its next link)
printf '\1https://h/api/models/o/n/tree/x\0\0stfs-kept 1\nstatus 200\nhas-total 0\ntotal 0\nhas-length 1\nlength 2\nsse-c 0\netag "e"\nlink-next https://h/api?cursor=x\n\n[]' > "$out/seeds-cache/seed006"
mkdir -p "$out"/{corpus,seeds}-prefetch
printf '+model-0000[12]-*\n-*.bin\n#7\n' > "$out/seeds-prefetch/seed000"
printf 'all\n\n#4294967296\n+layers/0/*\n' > "$out/seeds-prefetch/seed001"
printf '+\n-\n#\nnot a line\n' > "$out/seeds-prefetch/seed002"
printf '+a\0+b\n' > "$out/seeds-prefetch/seed003"
mkdir -p "$out"/{corpus,seeds}-promline
printf 'stfs_http_requests_total{kind="range",class="429"} 3' > "$out/seeds-promline/seed000"
printf 'stfs_fuse_request_duration_seconds_bucket{op="read",le="+Inf"} 12' > "$out/seeds-promline/seed001"
printf 'stfs_fetch_first_byte_seconds_sum 0.000012318' > "$out/seeds-promline/seed002"
printf '# HELP stfs_x A help line' > "$out/seeds-promline/seed003"
printf 'a{b="c\\",d="e"} +Inf' > "$out/seeds-promline/seed004"
mkdir -p "$out"/{corpus,seeds}-creds
c=$out/seeds-creds
{ printf '\0'; printf '{"Code" : "Success","LastUpdated":"2026-11-27T12:00:00Z","Type":"AWS-HMAC","AccessKeyId":"ASIAIOSFODNN7EXAMPLE","SecretAccessKey":"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY","Token":"IQoJb3JpZ2luX2VjE\\u002b==","Expiration":"2026-11-27T18:00:00Z"}'; } > "$c/seed000"
{ printf '\5'; printf '{"Version": 1, "AccessKeyId": "AKIA1", "SecretAccessKey": "s", "SessionToken": null, "Expiration": "2026-11-27T18:00:00.123+00:00", "n": -1.5e+3, "t": true, "f": false, "u": "\\ud83d\\ude00"}'; } > "$c/seed001"
{ printf '\n'; printf '{"a":"\\ud800","a":{"x":[1]}}'; } > "$c/seed002"
{ printf '\1'; printf '<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleWithWebIdentityResult><SubjectFromWebIdentityToken>sa</SubjectFromWebIdentityToken><Credentials><SessionToken>IQo=</SessionToken><SecretAccessKey>wJal/K7</SecretAccessKey><Expiration>2026-11-27T13:00:00Z</Expiration><AccessKeyId>ASIA2</AccessKeyId></Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>'; } > "$c/seed003"
{ printf '\6'; printf '<ErrorResponse><Error><Type>Sender</Type><Code>InvalidIdentityToken</Code><Message>no</Message></Error></ErrorResponse>'; } > "$c/seed004"
{ printf '\2'; printf '2026-02-30T25:61:61.999999Z'; } > "$c/seed005"
{ printf '\3'; printf "/usr/bin/aws-vault export --format=json 'a b' \"c \\\"d\\\"\" e\\ f"; } > "$c/seed006"
{ printf '\4'; printf 'http://[fd00:ec2::23]:80/v1/credentials'; } > "$c/seed007"
{ printf '\4'; printf 'http://127.0.0.1.evil.example/creds'; } > "$c/seed008"
mkdir -p "$out"/{corpus,seeds}-manifest
x=$out/seeds-manifest
printf '%s' '{"format":"stfs-mirror","version":1,"origin":"hf://org/m","revision":"86fa783c0a4a013e8ee646dbb0cebc86dc343876","block_size":4194304,"created":"2026-11-28T09:00:30Z","files":[{"path":"README.md","size":4,"origin_sum":"sha1-blob:488f2b2e2a60028c340795ea978b5645caf221c3","origin_etag":"\"6b0a982e-4\"","sha256":"f111799c30453e08811543041d130c37b076f90951a52e0f3eaf3f06a012099f","etag":"\"22cc142b4889b49175a07f4048b7722e\"","crc32c":"37661a4c"},{"path":"sub/model.safetensors","size":10485848,"origin_sum":"sha256:f111799c30453e08811543041d130c37b076f90951a52e0f3eaf3f06a012099f","origin_etag":null,"sha256":"f111799c30453e08811543041d130c37b076f90951a52e0f3eaf3f06a012099f","etag":"\"448e54215da4cb415ccc5a053bd65728-2\"","crc32c":"0123456789abcdef01234567"}]}' > "$x/seed000"
printf '%s' '{"format":"stfs-mirror","version":1,"origin":"s3://b/p/","revision":"","block_size":65536,"created":"","files":[]}' > "$x/seed001"
printf '%s' '{"format":"stfs-mirror","version":2,"files":[{"path":"../x","size":-1}]}' > "$x/seed002"
printf '%s' '{"format":"stfs-mirror","version":1,"origin":"o","revision":"r","block_size":65536,"created":"","files":[{"path":"a","size":0,"origin_sum":null,"origin_etag":null,"sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","etag":null,"crc32c":""},{"path":"a","size":0,"origin_sum":null,"origin_etag":null,"sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","etag":null,"crc32c":""}]}' > "$x/seed003"
mkdir -p "$out"/{corpus,seeds}-gguf
/usr/bin/python3 tests/fixtures/gguf_seeds.py "$out/seeds-gguf"
mkdir -p "$out"/{corpus,seeds}-{zip,pickle}
/usr/bin/python3 tests/fuzz/torch_seeds.py "$out/seeds-zip" "$out/seeds-pickle" ||
	echo "fuzz: no torch seeds (python3-torch missing?)"
# each harness for SECONDS of one core, as many at once as there are
# cores (STFS_FUZZ_JOBS), so the stage takes half the time on two; their
# reports are printed in order once all are done
one() {
	local h=$1 r=0
	mkdir -p "tests/fuzz/regressions/$h"
	"$out/tests/fuzz/fuzz_$h" -max_total_time="$secs" -max_len=65536 \
		-print_final_stats=1 -artifact_prefix="tests/fuzz/regressions/$h/" \
		"$out/corpus-$h" "$out/seeds-$h" "tests/fuzz/regressions/$h" \
		>"$out/fuzz_$h.log" 2>&1 || r=$?
	echo "$r" >"$out/fuzz_$h.rc"
}
jobs_at_once=${STFS_FUZZ_JOBS:-$(nproc)}
for h in $harnesses; do
	rm -f "$out/fuzz_$h.rc"
	while [ "$(jobs -rp | wc -l)" -ge "$jobs_at_once" ]; do
		wait -n || true
	done
	echo "fuzz: fuzz_$h for $secs s"
	one "$h" &
done
wait
for h in $harnesses; do
	# the harness's own status, whatever its output: a filter that
	# keeps no line must not end this script (set -e, pipefail)
	r=$(cat "$out/fuzz_$h.rc" 2>/dev/null || echo 1)
	{ grep -E "^(#|stat::|==|SUMMARY|Done|fuzz)" "$out/fuzz_$h.log" |
	  grep -vE "^#[0-9]+\s+(NEW|REDUCE|pulse)" | tail -8; } || true
	echo "fuzz: fuzz_$h exit $r"
	[ "$r" -eq 0 ] || rc=1
done
rm -rf "$STFS_FUZZ_CACHE"
exit "$rc"

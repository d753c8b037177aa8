/*
 * s3sum.c: the small files of an s3:// source (%repo/), fetched whole and
 * checked against the checksum S3 publishes for the object.  Each is one
 * GET of the whole object (no range: S3 returns the object's checksum
 * only for the whole of it) sent with x-amz-checksum-mode: ENABLED,
 * signed as every x-amz-* header must be; the answer's full-object
 * x-amz-checksum-sha256, else -crc64nvme (AWS has stored a CRC64NVME for
 * every new object since 2025), else its ETag when that is a single-part
 * upload's MD5 and the object is not encrypted with SSE-KMS or SSE-C
 * (whose ETags are not MD5s: such a file is served unchecked and says
 * so).  A composite checksum (a multipart upload's, of its parts'
 * checksums, "BASE64-N") is not of the bytes and is never used.  The
 * values are untrusted: one that is not strict base64 of the algorithm's
 * length refuses the file, as bytes that do not match do.  The GET asks
 * for the listing's version (If-Match: its ETag); an answer with another
 * ETag (from a server or proxy that ignores If-Match) is refused too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "format.h"
#include "s3.h"

/* A full-object checksum value (base64 of n bytes) into out->hex: 1 if
 * taken, 0 if composite or absent, -EINVAL if it is not one.  With no
 * x-amz-checksum-type (legacy), a value "B64-N" is a multipart's. */
static int take_sum(const char *name, const char *b64, size_t n,
		    int composite, int legacy, struct stfs_s3_sum *out)
{
	unsigned char d[32];
	size_t len = strlen(b64), got = 0;
	char q[100];

	if (!b64[0] || composite || (legacy && strchr(b64, '-')))
		return 0;               /* none, or a multipart's "B64-N" */
	if (stfs_base64_decode(b64, len, d, sizeof(d), &got) || got != n) {
		snprintf(out->why, sizeof(out->why), "the answer's "
			 "x-amz-checksum-%s is not a base64 %s of %zu bytes "
			 "(%s)", name, name, n, stfs_quote(b64, len, q,
							  sizeof(q)));
		return -EINVAL;
	}
	snprintf(out->kind, sizeof(out->kind), "%s", name);
	for (size_t i = 0; i < n; i++)
		sprintf(out->hex + 2 * i, "%02x", d[i]);
	return 1;
}

int stfs_s3_expected(const struct stfs_http_resp *r, struct stfs_s3_sum *out)
{
	const char *e = r->etag;
	int composite = !strcasecmp(r->sum_type, "COMPOSITE");
	int legacy = !r->sum_type[0];
	char q[40];
	int rc;

	memset(out, 0, sizeof(*out));
	if (!legacy && !composite && strcasecmp(r->sum_type, "FULL_OBJECT")) {
		snprintf(out->why, sizeof(out->why), "the answer's "
			 "x-amz-checksum-type is neither FULL_OBJECT nor "
			 "COMPOSITE (%s)", stfs_quote(r->sum_type,
						     strlen(r->sum_type), q,
						     sizeof(q)));
		return -EINVAL;
	}
	if (r->sum_bad[0]) {
		snprintf(out->why, sizeof(out->why), "the answer's %s is not a "
			 "checksum (empty, sent twice or too long)", r->sum_bad);
		return -EINVAL;
	}
	if ((rc = take_sum("sha256", r->sum_sha256, 32, composite, legacy,
			   out)) ||
	    (rc = take_sum("crc64nvme", r->sum_crc64nvme, 8, composite,
			   legacy, out)))
		return rc < 0 ? rc : 0;
	if (r->sse_c) {
		out->unchecked = "unchecked (SSE-C ETag)";
		return 0;
	}
	if (r->sse[0] && strcmp(r->sse, "AES256") != 0) {
		/* aws:kms, aws:kms:dsse, or one stfs does not know */
		out->unchecked = "unchecked (SSE-KMS ETag)";
		return 0;
	}
	if (strlen(e) == 34 && e[0] == '"' && e[33] == '"' &&
	    strspn(e + 1, "0123456789abcdefABCDEF") == 32) {
		snprintf(out->kind, sizeof(out->kind), "md5");
		for (int i = 0; i < 32; i++)
			out->hex[i] = (char)(e[1 + i] | 0x20);  /* lower */
		out->hex[32] = '\0';
	}
	return 0;
}

/* The hex digest of len bytes at b as kind says: 0, or -EIO. */
static int digest(const char *kind, const char *b, size_t len, char *hex)
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned dl = 0;

	if (!strcmp(kind, "crc64nvme")) {
		sprintf(hex, "%016" PRIx64, stfs_crc64nvme(0, b, len));
		return 0;
	}
	if (!EVP_Digest(b, len, d, &dl, !strcmp(kind, "md5") ? EVP_md5() :
			EVP_sha256(), NULL))
		return -EIO;
	for (unsigned i = 0; i < dl; i++)
		sprintf(hex + 2 * i, "%02x", d[i]);
	return 0;
}

/* 0 when the bytes of f are what r says (*s: how they were checked);
 * else -1 with *why saying why they are refused (NULL: out of memory). */
static int judge(const struct stfs_rfile *f, const char *b, size_t len,
		 const struct stfs_http_resp *r, struct stfs_s3_sum *s,
		 char **why)
{
	char hex[2 * EVP_MAX_MD_SIZE + 1];

	*why = NULL;
	if (f->revision && r->etag[0] && strcmp(r->etag, f->revision)) {
		/* a server (or proxy) that ignores If-Match sent another
		 * version: its own checksums would pass it */
		*why = strdup("changed since it was listed (its ETag is not "
			      "the listing's)");
	} else if (len != f->size) {
		if (asprintf(why, "the listing says %" PRIu64 " bytes, the "
			     "server sent %zu", f->size, len) < 0)
			*why = NULL;
	} else if (r->encoded) {
		if (asprintf(why, "the server sent the bytes encoded "
			     "(Content-Encoding: %s)", r->encoding) < 0)
			*why = NULL;
	} else if (stfs_s3_expected(r, s)) {
		*why = strdup(s->why);
	} else if (s->kind[0] && (digest(s->kind, b, len, hex) ||
				  strcmp(hex, s->hex))) {
		if (asprintf(why, "checksum mismatch: expected %s %s, "
			     "computed %s", s->kind, s->hex, hex) < 0)
			*why = NULL;
	} else {
		return 0;
	}
	return -1;
}

void stfs_s3_fetch_small(const struct stfs_location *loc,
			 struct stfs_rfile *f)
{
	struct stfs_error e = { 0 };
	struct stfs_http_resp r;
	struct stfs_s3_sum s;
	char *esc = stfs_url_escape_path(f->path), *url = NULL, *b = NULL;
	char *sum = NULL;
	size_t len = 0;
	int rc;

	memset(&r, 0, sizeof(r));
	if (!esc || asprintf(&url, "%s/%s", loc->base, esc) < 0)
		url = NULL;
	free(esc);
	/* at most the listed size: a server claiming more is refused
	 * before its bytes (an empty object: one byte more shows it) */
	rc = url ? stfs_http_get(loc->net, url, loc->auth, STFS_REQ_CHECKSUMS |
				 STFS_REQ_KEEP,
				 f->revision, f->size ? (size_t)f->size : 1,
				 &b, &len, &r, &e) : -ENOMEM;
	free(url);
	if (rc && r.status == 412) {
		/* If-Match on the listing's ETag: not the version listed */
		f->fault = strdup("changed since it was listed (its ETag is "
				  "not the listing's)");
		if (!f->fault)
			f->fault = strdup("out of memory");
		return;
	}
	if (rc) {
		stfs_rfile_unfetched(f, rc, &e);
		return;
	}
	if (judge(f, b, len, &r, &s, &f->fault) ||
	    (s.kind[0] && asprintf(&sum, "%s:%s", s.kind, s.hex) < 0)) {
		if (!f->fault)
			f->fault = strdup("out of memory");
		free(b);
		return;
	}
	/* what was checked, for stfs inspect --files */
	free(f->sum);
	f->sum = sum;
	f->unchecked = s.unchecked;
	f->bytes = b;
}

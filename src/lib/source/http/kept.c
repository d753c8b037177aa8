/*
 * kept.c: answers kept for offline mounts.  A whole GET made with
 * STFS_REQ_KEEP (a Hub revision and tree listing, an S3 listing page, an
 * S3 small file) is kept in the cache (cache.c's stfs_cache_put_doc(),
 * checked as a block is) with what the callers read of its headers; with
 * -o offline, stfs_http_get() answers it from there, and makes no
 * request.  So a mount of a pinned source mounts again with no network
 * from stfs's own cache.  An answer is kept in the trust domain of the
 * request's credentials (trust.c): only a mount with the same ones (or,
 * for one fetched with none, a mount with none) is ever answered with it.
 *
 * The encoding: a first line "stfs-kept 1", then one line "NAME VALUE"
 * per field kept (the status, the validators, the next page's link, S3's
 * checksums and encryption, the lengths; a value with a CR or LF is left
 * out), an empty line, and the body.  The cache is hostile input like any
 * other: a field too long or a number that does not parse makes the
 * whole answer a miss.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "engine.h"
#include "metrics.h"
#include "httphdr.h"

#define MAGIC "stfs-kept 1\n"

/* The string fields kept: name, offset, size. */
#define FIELD(n, f) { n, offsetof(struct stfs_http_resp, f), \
		      sizeof(((struct stfs_http_resp *)0)->f) }
static const struct {
	const char *name;
	size_t off, size;
} fields[] = {
	FIELD("etag", etag), FIELD("last-modified", last_modified),
	FIELD("link-next", link_next), FIELD("sha256", sum_sha256),
	FIELD("crc64nvme", sum_crc64nvme), FIELD("crc32", sum_crc32),
	FIELD("crc32c", sum_crc32c), FIELD("sum-type", sum_type),
	FIELD("sum-bad", sum_bad), FIELD("sse", sse),
	FIELD("commit", commit),
};

/* The numbers kept. */
enum { N_STATUS, N_HAS_TOTAL, N_TOTAL, N_HAS_LENGTH, N_LENGTH, N_SSE_C,
       N_COUNT };
static const char *const numbers[N_COUNT] = {
	"status", "has-total", "total", "has-length", "length", "sse-c",
};

static void get_numbers(const struct stfs_http_resp *r, uint64_t *v)
{
	v[N_STATUS] = (uint64_t)r->status;
	v[N_HAS_TOTAL] = (uint64_t)r->has_total;
	v[N_TOTAL] = r->total;
	v[N_HAS_LENGTH] = (uint64_t)r->has_length;
	v[N_LENGTH] = r->length;
	v[N_SSE_C] = (uint64_t)r->sse_c;
}

int stfs_http_kept_encode(const struct stfs_http_resp *r, const char *body,
			  size_t len, char **out, size_t *outlen)
{
	uint64_t v[N_COUNT];
	char *text = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&text, &n);

	if (!f)
		return -ENOMEM;
	fputs(MAGIC, f);
	get_numbers(r, v);
	for (int i = 0; i < N_COUNT; i++)
		fprintf(f, "%s %" PRIu64 "\n", numbers[i], v[i]);
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		const char *s = (const char *)r + fields[i].off;

		if (s[0] && !strpbrk(s, "\r\n"))
			fprintf(f, "%s %s\n", fields[i].name, s);
	}
	fputc('\n', f);
	if (len)
		fwrite(body, 1, len, f);
	if (fclose(f) != 0) {
		free(text);
		return -ENOMEM;
	}
	*out = text;
	*outlen = n;
	return 0;
}

/* One line "NAME VALUE" into r: 0, or -EINVAL. */
static int take_line(const char *line, size_t n, struct stfs_http_resp *r)
{
	const char *sp = memchr(line, ' ', n);
	size_t kl, vl;

	if (!sp)
		return -EINVAL;
	kl = (size_t)(sp - line);
	vl = n - kl - 1;
	for (int i = 0; i < N_COUNT; i++) {
		char num[24], *end;
		unsigned long long x;

		if (strlen(numbers[i]) != kl || memcmp(line, numbers[i], kl))
			continue;
		if (!vl || vl >= sizeof(num))
			return -EINVAL;
		memcpy(num, sp + 1, vl);
		num[vl] = '\0';
		if (strspn(num, "0123456789") != vl)
			return -EINVAL;         /* digits only: no sign, no NUL */
		errno = 0;
		x = strtoull(num, &end, 10);
		if (errno || *end)
			return -EINVAL;
		switch (i) {
		case N_STATUS: r->status = x > 999 ? -1 : (long)x; break;
		case N_HAS_TOTAL: r->has_total = x != 0; break;
		case N_TOTAL: r->total = x; break;
		case N_HAS_LENGTH: r->has_length = x != 0; break;
		case N_LENGTH: r->length = x; break;
		default: r->sse_c = x != 0; break;
		}
		return r->status < 0 ? -EINVAL : 0;
	}
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		char *s = (char *)r + fields[i].off;

		if (strlen(fields[i].name) != kl ||
		    memcmp(line, fields[i].name, kl))
			continue;
		/* as encode() keeps them: no NUL, CR or LF */
		if (vl >= fields[i].size || memchr(sp + 1, '\0', vl) ||
		    memchr(sp + 1, '\r', vl))
			return -EINVAL;
		memcpy(s, sp + 1, vl);
		s[vl] = '\0';
		return 0;
	}
	return 0;                       /* a field of a later stfs */
}

int stfs_http_kept_decode(const char *text, size_t n,
			  struct stfs_http_resp *r, size_t *body_at)
{
	const char *p = text, *end = text + n;

	memset(r, 0, sizeof(*r));
	if (n < strlen(MAGIC) || memcmp(text, MAGIC, strlen(MAGIC)))
		return -EINVAL;
	p += strlen(MAGIC);
	for (;;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));

		if (!nl)
			return -EINVAL;
		if (nl == p) {
			*body_at = (size_t)(nl + 1 - text);
			return 0;
		}
		if (take_line(p, (size_t)(nl - p), r))
			return -EINVAL;
		p = nl + 1;
	}
}

/* The cache key of url's answer for a request with auth and flags: url
 * in their trust domain (trust.c), a new string; NULL (none may be kept:
 * credentials with no tag, or out of memory). */
static char *kept_key(struct stfs_remote *r, const char *url,
		      const struct stfs_auth *auth, unsigned flags)
{
	char *tag, *key;

	if (stfs_http_trust(r, auth, flags, &tag))
		return NULL;
	key = stfs_http_trust_key(tag, url);
	free(tag);
	return key;
}

int stfs_http_kept_get(struct stfs_remote *r, const char *url,
		       const struct stfs_auth *auth, unsigned flags,
		       const char *etag, size_t max, char **body,
		       size_t *len, struct stfs_http_resp *resp,
		       struct stfs_error *err)
{
	struct stfs_http_resp k;
	char *text, why[160], line[900], *key = kept_key(r, url, auth, flags);
	size_t n, at;
	int rc;

	rc = key ? stfs_cache_get_doc(stfs_remote_cache(r), key, &text, &n,
				      why, sizeof(why)) : -ENOENT;
	free(key);
	if (rc == -EBADMSG) {
		stfs_m_verify(r->o.metrics, STFS_VERIFY_KEPT_ANSWER);
		snprintf(line, sizeof(line), "stfs: %s: the answer kept in the "
			 "cache failed its check: %s; not served (offline)",
			 url, why);
		stfs_remote_log(r, line);
		return stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "offline, "
				 "and the cache's copy fails its check: %s",
				 why);
	}
	if (rc)
		return rc == -ENOMEM ? stfs_nomem(err) :
		       stfs_fail(err, -ENOENT, NULL, STFS_NO_OFFSET, "offline, "
				 "and not in the cache");
	if (stfs_http_kept_decode(text, n, &k, &at) ||
	    (etag && strcmp(etag, k.etag))) {
		free(text);
		return stfs_fail(err, -ENOENT, NULL, STFS_NO_OFFSET, "offline, "
				 "and not in the cache");
	}
	if (n - at > max) {
		free(text);
		return stfs_fail(err, -EFBIG, NULL, STFS_NO_OFFSET, "offline: "
				 "the cache's copy is larger than %zu bytes",
				 max);
	}
	memmove(text, text + at, n - at);
	text[n - at] = '\0';
	*body = text;
	*len = n - at;
	if (resp)
		*resp = k;
	return 0;
}

void stfs_http_kept_put(struct stfs_remote *r, const char *url,
			const struct stfs_auth *auth, unsigned flags,
			const struct stfs_http_resp *resp, const char *body,
			size_t len)
{
	char *text, *key;
	size_t n;

	if (!stfs_remote_cache(r) || !(key = kept_key(r, url, auth, flags)))
		return;
	if (!stfs_http_kept_encode(resp, body, len, &text, &n)) {
		(void)stfs_cache_put_doc(stfs_remote_cache(r), key, text, n);
		free(text);
	}
	free(key);
}

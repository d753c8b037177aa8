/*
 * fuzz_http.c: libFuzzer harness for the HTTP response-header parser
 * (httphdr.c).  Servers are untrusted: any header lines, split at '\n',
 * must not crash or read out of bounds, and what is taken from them must
 * be consistent: a range within its object, an ETag, a Last-Modified, a
 * Link's next URL and the Hub's X-Error-*, X-Linked-Etag, X-Repo-Commit
 * and RateLimit that are terminated and free of control bytes, a
 * Retry-After and a RateLimit t of at most an hour.  The answer is then
 * checked as a range request's (stfs_http_answer_check()) against the
 * range and version it claims: an ambiguous answer never passes, one that
 * passes says exactly those bytes, with a Content-Length that agrees; and
 * the conditional header made of its validators is one line.  The input
 * is also a redirect's target URL (resolve.c): when it expires, from its
 * query.  And S3's checksums (s3sum.c): what the answer says an object's
 * bytes must be is one kind with a hex digest of its length, nothing, or
 * a refusal that says why; and the input itself as base64 (text.c),
 * which decodes to no more than it can and only when strictly base64.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format.h"
#include "engine.h"
#include "httphdr.h"
#include "s3.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_text(const char *s, size_t cap)
{
	size_t n = strnlen(s, cap);

	if (n == cap)
		abort();
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			abort();
}

/* What stfs_s3_expected() makes of r is consistent. */
static void check_s3_sum(const struct stfs_http_resp *r)
{
	static const struct {
		const char *kind;
		size_t hexlen;
	} kinds[] = { { "", 0 }, { "sha256", 64 }, { "crc64nvme", 16 },
		      { "md5", 32 } };
	struct stfs_s3_sum s;
	size_t i;

	if (stfs_s3_expected(r, &s)) {
		check_text(s.why, sizeof(s.why));
		if (!s.why[0] || s.kind[0])
			abort();
		return;
	}
	for (i = 0; i < sizeof(kinds) / sizeof(*kinds); i++)
		if (!strcmp(s.kind, kinds[i].kind))
			break;
	if (i == sizeof(kinds) / sizeof(*kinds) ||
	    strnlen(s.hex, sizeof(s.hex)) != kinds[i].hexlen ||
	    strspn(s.hex, "0123456789abcdef") != kinds[i].hexlen ||
	    (s.unchecked && s.kind[0]))
		abort();
}

/* data as base64: decoded only if strictly so, into no more room. */
static void check_base64(const uint8_t *data, size_t size)
{
	unsigned char out[48];
	size_t n = 0;
	int rc = stfs_base64_decode((const char *)data, size, out,
				    sizeof(out), &n);

	if ((rc == 0 && (size % 4 || n > sizeof(out) || n > size / 4 * 3)) ||
	    (rc && n) || (rc && rc != -EINVAL && rc != -ENOSPC))
		abort();
	(void)stfs_crc64nvme(0, data, size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct stfs_http_resp r;
	const char *p = (const char *)data, *end = p + size;
	char *url = malloc(size + 1);
	time_t when;

	if (!url)
		return 0;
	check_base64(data, size);
	memcpy(url, data, size);
	url[size] = '\0';              /* up to its first NUL, as a URL is */
	(void)stfs_url_expiry(url, &when);
	free(url);
	memset(&r, 0, sizeof(r));
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *e = nl ? nl + 1 : end;
		/* a copy of exactly the line, so reads past it are caught */
		char *line = malloc((size_t)(e - p) + 1);

		if (!line)
			return 0;
		memcpy(line, p, (size_t)(e - p));
		stfs_http_header_line(line, (size_t)(e - p), &r);
		free(line);
		if (r.has_range && (r.range_last < r.range_first ||
				    r.range_last >= r.total || !r.has_total))
			abort();
		check_text(r.etag, sizeof(r.etag));
		check_text(r.last_modified, sizeof(r.last_modified));
		check_text(r.link_next, sizeof(r.link_next));
		check_text(r.error_code, sizeof(r.error_code));
		check_text(r.error_message, sizeof(r.error_message));
		check_text(r.encoding, sizeof(r.encoding));
		if (r.encoding[0] && !r.encoded)
			abort();
		check_text(r.linked_etag, sizeof(r.linked_etag));
		check_text(r.commit, sizeof(r.commit));
		check_text(r.ratelimit, sizeof(r.ratelimit));
		check_text(r.location, sizeof(r.location));
		if (r.retry_after_s > 3600 || r.ratelimit_t > 3600)
			abort();
		check_text(r.sum_sha256, sizeof(r.sum_sha256));
		check_text(r.sum_crc64nvme, sizeof(r.sum_crc64nvme));
		check_text(r.sum_crc32, sizeof(r.sum_crc32));
		check_text(r.sum_crc32c, sizeof(r.sum_crc32c));
		check_text(r.sum_type, sizeof(r.sum_type));
		check_text(r.sum_bad, sizeof(r.sum_bad));
		check_text(r.sse, sizeof(r.sse));
		check_s3_sum(&r);
		p = e;
	}
	if (r.has_range) {
		struct stfs_http_want w = { r.range_first,
			r.range_last - r.range_first + 1, r.total, r.etag,
			r.last_modified };
		char why[600], cond[400];
		int rc = stfs_http_answer_check(&r, &w, why, sizeof(why));

		if (rc == 0 && (r.ambiguous || r.encoded ||
				(r.has_length && r.length != w.len)))
			abort();
		if (rc != 0 && !r.ambiguous && !r.encoded &&
		    (!r.has_length || r.length == w.len))
			abort();
		check_text(why, sizeof(why));
		if (stfs_http_condition(r.etag, r.last_modified, cond,
					sizeof(cond)))
			check_text(cond, sizeof(cond));
	}
	return 0;
}

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
 * query.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "remote.h"
#include "httphdr.h"

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct stfs_http_resp r;
	const char *p = (const char *)data, *end = p + size;
	char *url = malloc(size + 1);
	time_t when;

	if (!url)
		return 0;
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

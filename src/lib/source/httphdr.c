/*
 * httphdr.c: the parts of an HTTP response stfs relies on, parsed from
 * header lines a server sent: Content-Range (which bytes, of how large an
 * object), ETag and Last-Modified (which version), Retry-After (how long
 * to wait: seconds, or an HTTP date), Link's rel="next" (the next page of
 * a listing), the Hugging Face Hub's X-Error-Code and X-Error-Message (why
 * a request was refused), and Content-Encoding (stfs asks for none, so a
 * coded body is refused rather than served as the object's bytes); the
 * Hub's X-Linked-Etag, X-Linked-Size and X-Repo-Commit (which object a
 * /resolve redirect points to), RateLimit (its t: how long to wait) and
 * Location (where a redirect points; made absolute by httpc.c).
 * Servers are untrusted: every number is checked for overflow and every
 * field for its exact syntax; what does not parse is ignored, and the
 * caller then refuses the response.
 */
#include <ctype.h>
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "source.h"

static int digits(const char **p, const char *end, uint64_t *out)
{
	uint64_t v = 0;
	const char *s = *p;

	if (s == end || !isdigit((unsigned char)*s))
		return -1;
	while (s < end && isdigit((unsigned char)*s)) {
		unsigned d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
		s++;
	}
	*p = s;
	*out = v;
	return 0;
}

static const char *skip_ws(const char *s, const char *end)
{
	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	return s;
}

/* "bytes FIRST-LAST/TOTAL" or "bytes * /TOTAL" (no space). */
static void content_range(const char *s, const char *end,
			  struct stfs_http_resp *r)
{
	uint64_t a = 0, b = 0, total;
	int star = 0;

	if (end - s < 6 || strncasecmp(s, "bytes", 5) != 0 || s[5] != ' ')
		return;
	s = skip_ws(s + 6, end);
	if (s < end && *s == '*') {
		star = 1;
		s++;
	} else if (digits(&s, end, &a) || s == end || *s++ != '-' ||
		   digits(&s, end, &b) || b < a) {
		return;
	}
	if (s == end || *s++ != '/' || digits(&s, end, &total) ||
	    skip_ws(s, end) != end)
		return;
	if (!star && b >= total)
		return;
	r->has_range = !star;
	r->range_first = a;
	r->range_last = b;
	r->total = total;
	r->has_total = 1;
}

static void copy_value(char *out, size_t outsz, const char *s,
		       const char *end)
{
	size_t n = (size_t)(end - s);

	if (n >= outsz || n == 0) {     /* too long to be ours: none */
		out[0] = '\0';
		return;
	}
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) {
			out[0] = '\0';
			return;
		}
	memcpy(out, s, n);
	out[n] = '\0';
}

/* Link: <URL>; rel="next" (among other links, separated by commas). */
static void link_next(const char *s, const char *end,
		      struct stfs_http_resp *r)
{
	while (s < end) {
		const char *lt = memchr(s, '<', (size_t)(end - s)), *gt, *p;

		if (!lt || !(gt = memchr(lt, '>', (size_t)(end - lt))))
			return;
		/* the link's parameters: up to the next comma */
		for (p = gt + 1; p < end && *p != ','; p++) {
			if (end - p >= 10 && strncasecmp(p, "rel=\"next\"", 10)
			    == 0) {
				copy_value(r->link_next, sizeof(r->link_next),
					   lt + 1, gt);
				return;
			}
		}
		s = p;
	}
}

/* RateLimit's t parameter: the seconds until the quota is back
 * ("NAME";r=R;t=T, items of a structured-field list; at most 3600), or 0.
 * Only a ";t=" that follows a parameter separator counts. */
static unsigned ratelimit_t(const char *s, const char *end)
{
	for (const char *p = s; p + 3 <= end; p++) {
		uint64_t t;
		const char *q = skip_ws(p + 1, end);

		if (*p != ';' || end - q < 2 || (q[0] != 't' && q[0] != 'T') ||
		    q[1] != '=')
			continue;
		q += 2;
		if (digits(&q, end, &t) || (q < end && *q != ';' && *q != ',' &&
					    *q != ' '))
			continue;
		return t > 3600 ? 3600 : (unsigned)t;
	}
	return 0;
}

/* Retry-After as an HTTP date: the seconds until then (1 if it has passed
 * or does not parse, "a while"; at most 3600). */
static unsigned retry_date(const char *s, const char *end)
{
	char buf[64];
	time_t when, now = time(NULL);

	if ((size_t)(end - s) >= sizeof(buf))
		return 1;
	memcpy(buf, s, (size_t)(end - s));
	buf[end - s] = '\0';
	when = curl_getdate(buf, NULL);
	if (when <= now)
		return 1;
	return when - now > 3600 ? 3600 : (unsigned)(when - now);
}

void stfs_http_header_line(const char *line, size_t len,
			   struct stfs_http_resp *r)
{
	const char *end = line + len, *colon, *v;
	size_t nlen;

	while (end > line && (end[-1] == '\n' || end[-1] == '\r' ||
			      end[-1] == ' ' || end[-1] == '\t'))
		end--;
	if (len >= 5 && strncmp(line, "HTTP/", 5) == 0) {
		/* a new response (after a redirect or 100): start again */
		memset(r, 0, sizeof(*r));
		return;
	}
	if (!(colon = memchr(line, ':', (size_t)(end - line))))
		return;
	nlen = (size_t)(colon - line);
	v = skip_ws(colon + 1, end);
	if (nlen == 13 && strncasecmp(line, "content-range", 13) == 0) {
		content_range(v, end, r);
	} else if (nlen == 4 && strncasecmp(line, "etag", 4) == 0) {
		copy_value(r->etag, sizeof(r->etag), v, end);
	} else if (nlen == 13 && strncasecmp(line, "last-modified", 13) == 0) {
		copy_value(r->last_modified, sizeof(r->last_modified), v, end);
	} else if (nlen == 4 && strncasecmp(line, "link", 4) == 0) {
		link_next(v, end, r);
	} else if (nlen == 12 && strncasecmp(line, "x-error-code", 12) == 0) {
		copy_value(r->error_code, sizeof(r->error_code), v, end);
	} else if (nlen == 15 && strncasecmp(line, "x-error-message", 15)
		   == 0) {
		copy_value(r->error_message, sizeof(r->error_message), v,
			   end);
	} else if (nlen == 16 &&
		   strncasecmp(line, "content-encoding", 16) == 0) {
		/* never asked for: any coding but identity (or an empty
		 * value) means the body is not the object's bytes */
		if (v < end && !((size_t)(end - v) == 8 &&
				 strncasecmp(v, "identity", 8) == 0)) {
			r->encoded = 1;
			copy_value(r->encoding, sizeof(r->encoding), v, end);
		}
	} else if (nlen == 13 && strncasecmp(line, "x-linked-etag", 13) == 0) {
		copy_value(r->linked_etag, sizeof(r->linked_etag), v, end);
	} else if (nlen == 13 && strncasecmp(line, "x-linked-size", 13) == 0) {
		const char *p = v;

		r->has_linked_size = !digits(&p, end, &r->linked_size) &&
				     p == end;
	} else if (nlen == 13 && strncasecmp(line, "x-repo-commit", 13) == 0) {
		copy_value(r->commit, sizeof(r->commit), v, end);
	} else if (nlen == 8 && strncasecmp(line, "location", 8) == 0) {
		copy_value(r->location, sizeof(r->location), v, end);
	} else if (nlen == 9 && strncasecmp(line, "ratelimit", 9) == 0) {
		copy_value(r->ratelimit, sizeof(r->ratelimit), v, end);
		r->ratelimit_t = ratelimit_t(v, end);
	} else if (nlen == 11 && strncasecmp(line, "retry-after", 11) == 0) {
		uint64_t secs;
		const char *p = v;

		if (!digits(&p, end, &secs) && p == end)
			r->retry_after_s = secs > 3600 ? 3600 : (unsigned)secs;
		else if (p != end)
			r->retry_after_s = retry_date(v, end);
	}
}

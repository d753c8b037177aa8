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
 * Location (where a redirect points; made absolute by httpc.c); S3's
 * x-amz-checksum-* (a full-object or composite checksum, in base64) and
 * x-amz-server-side-encryption* (whose ETags are not MD5s).
 * Servers are untrusted: every number is checked for overflow and every
 * field for its exact syntax; what does not parse is ignored, and the
 * caller then refuses the response.  An answer that says two things of
 * what stfs relies on (two Content-Range headers, two different ETags,
 * Last-Modified or Content-Length values, such a field folded over two
 * lines or written "ETag :") is ambiguous, and refused whole: a proxy or
 * another client could read it otherwise than stfs does.
 *
 * Then the checks made of every answer to a range request
 * (stfs_http_answer_check()): the bytes asked for, of the object's size,
 * a Content-Length that agrees, and the version seen at open: each
 * validator then (ETag, Last-Modified) comes again, unchanged; a range
 * request is made conditional on it (stfs_http_condition()).
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "http/http.h"
#include "httphdr.h"

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

/* The fields of ours whose repeats, folds and spacing are ambiguous. */
enum {
	F_RANGE = 1, F_ETAG = 2, F_LM = 4, F_LENGTH = 8,
};

static const struct {
	const char *name;
	unsigned f;
} fields[] = {
	{ "content-range", F_RANGE },
	{ "etag", F_ETAG },
	{ "last-modified", F_LM },
	{ "content-length", F_LENGTH },
};

static unsigned field_of(const char *name, size_t n)
{
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if (strlen(fields[i].name) == n &&
		    strncasecmp(name, fields[i].name, n) == 0)
			return fields[i].f;
	return 0;
}

static const char *field_name(unsigned f)
{
	return f == F_RANGE ? "Content-Range" : f == F_ETAG ? "ETag" :
	       f == F_LM ? "Last-Modified" : "Content-Length";
}

/* Mark r ambiguous, because of "<pre><field name><post>". */
static void ambiguous(struct stfs_http_resp *r, const char *pre, unsigned f,
		      const char *post)
{
	if (!r->ambiguous)
		snprintf(r->ambiguity, sizeof(r->ambiguity), "%s%s%s", pre,
			 field_name(f), post);
	r->ambiguous = 1;
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
	if (!star && b - a == UINT64_MAX)
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

/* A field whose value decides which bytes these are: taken once, a repeat
 * that says another thing (or any repeat of Content-Range) is ambiguous.
 * 1 if the line was one of them. */
static int mine(const char *line, size_t nlen, const char *v,
		const char *end, struct stfs_http_resp *r)
{
	unsigned f = field_of(line, nlen);
	struct stfs_http_resp o;
	uint64_t n = 0;
	const char *p = v;

	if (!f)
		return 0;
	r->last_field = (int)f;
	if (f == F_RANGE) {
		if (r->seen & F_RANGE)
			ambiguous(r, "two ", f, " headers");
		content_range(v, end, r);
	} else if (f == F_ETAG) {
		copy_value(o.etag, sizeof(o.etag), v, end);
		if ((r->seen & F_ETAG) && strcmp(o.etag, r->etag) != 0)
			ambiguous(r, "two different ", f, " headers");
		memcpy(r->etag, o.etag, sizeof(r->etag));
	} else if (f == F_LM) {
		copy_value(o.last_modified, sizeof(o.last_modified), v, end);
		if ((r->seen & F_LM) &&
		    strcmp(o.last_modified, r->last_modified) != 0)
			ambiguous(r, "two different ", f, " headers");
		memcpy(r->last_modified, o.last_modified,
		       sizeof(r->last_modified));
	} else {
		if (digits(&p, end, &n) || p != end)
			ambiguous(r, "a ", f, " that is not a number");
		else if ((r->seen & F_LENGTH) && n != r->length)
			ambiguous(r, "two different ", f, " headers");
		r->has_length = 1;
		r->length = n;
	}
	r->seen |= f;
	return 1;
}

/* S3's x-amz-checksum-ALGO, -type and x-amz-server-side-encryption*
 * (the name is nlen bytes at line, the value [v, end)): 1 if it was
 * one.  A checksum sent empty, twice or longer than any (64 bytes) is
 * kept as bad: the answer is then refused, not served unchecked. */
static int amz_field(const char *line, size_t nlen, const char *v,
		     const char *end, struct stfs_http_resp *r)
{
	static const char *const algo[] = { "sha256", "crc64nvme", "crc32",
					    "crc32c", "type" };
	char *const into[] = { r->sum_sha256, r->sum_crc64nvme, r->sum_crc32,
			       r->sum_crc32c, r->sum_type };
	const size_t cap[] = { sizeof(r->sum_sha256), sizeof(r->sum_crc64nvme),
			       sizeof(r->sum_crc32), sizeof(r->sum_crc32c),
			       sizeof(r->sum_type) };

	if (nlen == 28 && !strncasecmp(line, "x-amz-server-side-encryption",
				       28)) {
		copy_value(r->sse, sizeof(r->sse), v, end);
		if (!r->sse[0])
			snprintf(r->sse, sizeof(r->sse), "?");
		return 1;
	}
	if (nlen == 47 && !strncasecmp(line, "x-amz-server-side-encryption-"
				       "customer-algorithm", 47)) {
		r->sse_c = 1;
		return 1;
	}
	if (nlen < 16 || strncasecmp(line, "x-amz-checksum-", 15))
		return 0;
	for (size_t i = 0; i < sizeof(algo) / sizeof(*algo); i++) {
		char o[64];

		if (nlen - 15 != strlen(algo[i]) ||
		    strncasecmp(line + 15, algo[i], nlen - 15))
			continue;
		copy_value(o, cap[i], v, end);
		if (!o[0] || (into[i][0] && strcmp(o, into[i])))
			snprintf(r->sum_bad, sizeof(r->sum_bad),
				 "x-amz-checksum-%s", algo[i]);
		else
			memcpy(into[i], o, strlen(o) + 1);
		return 1;
	}
	return 0;
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
	if (line < end && (*line == ' ' || *line == '\t')) {
		/* obs-fold: the line goes on the field before */
		if (r->last_field)
			ambiguous(r, "a ", (unsigned)r->last_field,
				  " folded over two lines");
		return;
	}
	r->last_field = 0;
	if (!(colon = memchr(line, ':', (size_t)(end - line))))
		return;
	nlen = (size_t)(colon - line);
	v = skip_ws(colon + 1, end);
	if (nlen && (line[nlen - 1] == ' ' || line[nlen - 1] == '\t')) {
		const char *n = line + nlen;
		unsigned f;

		while (n > line && (n[-1] == ' ' || n[-1] == '\t'))
			n--;
		if ((f = field_of(line, (size_t)(n - line))))
			ambiguous(r, "a space before the colon of ", f, "");
		return;
	}
	if (mine(line, nlen, v, end, r) || amz_field(line, nlen, v, end, r))
		return;
	if (nlen == 4 && strncasecmp(line, "link", 4) == 0) {
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

/* ---- what an answer must be ------------------------------------------------ */

int stfs_http_strong_etag(const char *etag)
{
	return etag && etag[0] && strncmp(etag, "W/", 2) != 0;
}

int stfs_http_condition(const char *etag, const char *last_modified,
			char *out, size_t outsz)
{
	int n = 0;

	if (stfs_http_strong_etag(etag) && etag[0] == '"')
		n = snprintf(out, outsz, "If-Match: %s", etag);
	else if (last_modified && last_modified[0])
		n = snprintf(out, outsz, "If-Unmodified-Since: %s",
			     last_modified);
	if (n <= 0 || (size_t)n >= outsz) {
		if (outsz)
			out[0] = '\0';
		return 0;
	}
	return 1;
}

/* Is the answer of the version that had etag and last_modified (each ""
 * or NULL if it had none)?  Every validator seen then must come again,
 * unchanged: 0, or -ESTALE with why. */
static int stfs_http_same_version(const struct stfs_http_resp *r,
				  const char *etag,
				  const char *last_modified, char *why, size_t whysz)
{
	static const char *const name[2] = { "ETag", "Last-Modified" };
	const char *was[2] = { etag, last_modified };
	const char *now[2] = { r->etag, r->last_modified };

	if (whysz)
		why[0] = '\0';

	for (int i = 0; i < 2; i++) {
		if (!was[i] || !was[i][0])
			continue;
		if (!now[i][0]) {
			snprintf(why, whysz, "the object changed (the answer "
				 "has no %s; it was %s)", name[i], was[i]);
			return -ESTALE;
		}
		if (strcmp(now[i], was[i]) != 0) {
			snprintf(why, whysz, "the object changed (%s %s, was "
				 "%s)", name[i], now[i], was[i]);
			return -ESTALE;
		}
	}
	return 0;
}

int stfs_http_answer_check(const struct stfs_http_resp *r,
			   const struct stfs_http_want *w, char *why,
			   size_t whysz)
{
	uint64_t last = w->off + w->len - 1;
	int opening = w->total == UINT64_MAX;

	if (whysz)
		why[0] = '\0';
	if (r->ambiguous) {
		snprintf(why, whysz, "an ambiguous answer (%s) for bytes "
			 "%" PRIu64 "-%" PRIu64, r->ambiguity, w->off, last);
		return -EIO;
	}
	if (r->encoded) {
		snprintf(why, whysz, "the server sent the bytes encoded "
			 "(Content-Encoding: %s), which stfs never asks for",
			 r->encoding[0] ? r->encoding : "?");
		return -EIO;
	}
	if (!w->len || !r->has_range) {
		snprintf(why, whysz, "the server answered without a "
			 "Content-Range for bytes %" PRIu64 "-%" PRIu64,
			 w->off, last);
		return -EIO;
	}
	if (!opening && r->total != w->total) {
		snprintf(why, whysz, "the object changed (%" PRIu64 " bytes, "
			 "was %" PRIu64 ")", r->total, w->total);
		return -ESTALE;
	}
	if (r->range_first != w->off ||
	    !(r->range_last == last ||
	      (opening && r->range_last < last &&
	       r->range_last + 1 == r->total))) {
		snprintf(why, whysz, "the server answered bytes %" PRIu64 "-%"
			 PRIu64 " for bytes %" PRIu64 "-%" PRIu64,
			 r->range_first, r->range_last, w->off, last);
		return -EIO;
	}
	if (r->has_length &&
	    r->length != r->range_last - r->range_first + 1) {
		snprintf(why, whysz, "the server answered bytes %" PRIu64 "-%"
			 PRIu64 " with a Content-Length of %" PRIu64,
			 r->range_first, r->range_last, r->length);
		return -EIO;
	}
	return stfs_http_same_version(r, w->etag, w->last_modified, why,
				      whysz);
}

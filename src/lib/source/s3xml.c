/*
 * s3xml.c: the two XML documents stfs reads from S3: a ListObjectsV2 page
 * (each object's key and size, whether more pages follow and the token
 * for the next) and an error (its Code and Message).  Servers are
 * untrusted: the scanner only looks for the few elements it needs within
 * the bounds it was given, decodes the five named entities and numeric
 * references (to UTF-8, refusing NUL and surrogates), and refuses text
 * it cannot decode rather than guess.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source.h"

/* The text of the first <tag ...>...</tag> in [s, end) (the start tag
 * may have attributes): its bounds, or 0. */
static int element(const char *s, const char *end, const char *tag,
		   const char **t0, const char **t1)
{
	char open[64], close[64];
	size_t lo, lc;
	const char *p = s, *q;

	lo = (size_t)snprintf(open, sizeof(open), "<%s", tag);
	lc = (size_t)snprintf(close, sizeof(close), "</%s>", tag);
	for (;;) {
		if (!(p = memmem(p, (size_t)(end - p), open, lo)))
			return 0;
		p += lo;
		if (p < end && (*p == '>' || *p == ' ' || *p == '\t' ||
				*p == '\n' || *p == '\r'))
			break;          /* not a longer name */
	}
	if (!(p = memchr(p, '>', (size_t)(end - p))))
		return 0;
	p++;
	if (p[-2] == '/') {             /* <tag/>: empty */
		*t0 = *t1 = p;
		return 1;
	}
	if (!(q = memmem(p, (size_t)(end - p), close, lc)))
		return 0;
	*t0 = p;
	*t1 = q;
	return 1;
}

static size_t utf8_put(char *o, unsigned long c)
{
	if (c < 0x80) {
		o[0] = (char)c;
		return 1;
	} else if (c < 0x800) {
		o[0] = (char)(0xc0 | (c >> 6));
		o[1] = (char)(0x80 | (c & 0x3f));
		return 2;
	} else if (c < 0x10000) {
		o[0] = (char)(0xe0 | (c >> 12));
		o[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		o[2] = (char)(0x80 | (c & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | (c >> 18));
	o[1] = (char)(0x80 | ((c >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((c >> 6) & 0x3f));
	o[3] = (char)(0x80 | (c & 0x3f));
	return 4;
}

/* Text [s, end) decoded into a new string (never longer than the text):
 * NULL on a bad reference, a NUL, or no memory. */
static char *decode(const char *s, const char *end)
{
	static const struct { const char *name; char c; } named[] = {
		{ "amp;", '&' }, { "lt;", '<' }, { "gt;", '>' },
		{ "quot;", '"' }, { "apos;", '\'' },
	};
	char *out = malloc((size_t)(end - s) + 1), *o = out;

	if (!out)
		return NULL;
	while (s < end) {
		size_t k;

		if (*s == '\0')
			goto bad;
		if (*s != '&') {
			*o++ = *s++;
			continue;
		}
		s++;
		for (k = 0; k < sizeof(named) / sizeof(named[0]); k++) {
			size_t l = strlen(named[k].name);
			if ((size_t)(end - s) >= l &&
			    memcmp(s, named[k].name, l) == 0) {
				*o++ = named[k].c;
				s += l;
				break;
			}
		}
		if (k < sizeof(named) / sizeof(named[0]))
			continue;
		if (s < end && *s == '#') {
			unsigned long c = 0;
			int hex = ++s < end && (*s == 'x' || *s == 'X'), n = 0;

			s += hex;
			for (; s < end && *s != ';' && n < 8; s++, n++) {
				int d = *s >= '0' && *s <= '9' ? *s - '0' :
					hex && *s >= 'a' && *s <= 'f' ?
					*s - 'a' + 10 :
					hex && *s >= 'A' && *s <= 'F' ?
					*s - 'A' + 10 : -1;
				if (d < 0)
					goto bad;
				c = c * (hex ? 16 : 10) + (unsigned long)d;
			}
			/* "&#;" and 8 digits or more are refused; so are NUL,
			 * surrogates and what is past U+10FFFF */
			if (!n || s == end || *s != ';' || c == 0 ||
			    c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
				goto bad;
			s++;
			/* the reference is at least 4 bytes: room enough */
			o += utf8_put(o, c);
			continue;
		}
		goto bad;
	}
	*o = '\0';
	return out;
bad:
	free(out);
	return NULL;
}

int stfs_s3_error_parse(const char *xml, size_t len, char *out,
			size_t outsz)
{
	const char *end = xml + len, *e0, *c0, *c1, *m0, *m1;
	char *code, *msg = NULL;

	if (!outsz)
		return -EINVAL;
	out[0] = '\0';
	/* only the start of a long error may be at hand: no </Error> */
	if (!(e0 = memmem(xml, len, "<Error", 6)) ||
	    !element(e0, end, "Code", &c0, &c1) || !(code = decode(c0, c1)))
		return -EINVAL;
	if (element(e0, end, "Message", &m0, &m1))
		msg = decode(m0, m1);
	snprintf(out, outsz, "%s%s%s", code, msg && *msg ? ": " : "",
		 msg ? msg : "");
	/* a line of text: no control characters from the server */
	for (char *p = out; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = ' ';
	free(code);
	free(msg);
	return 0;
}

static int digits(const char *s, const char *end, uint64_t *v)
{
	*v = 0;
	if (s == end || end - s > 19)
		return -1;
	for (; s < end; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		*v = *v * 10 + (uint64_t)(*s - '0');
	}
	return 0;
}

int stfs_s3_list_parse(const char *xml, size_t len,
		       int (*object)(void *arg, const char *key,
				     uint64_t size),
		       void *arg, int *truncated, char **next_token)
{
	const char *end = xml + len, *r0, *r1, *p, *t0, *t1;
	int rc;

	*truncated = 0;
	*next_token = NULL;
	if (!element(xml, end, "ListBucketResult", &r0, &r1))
		return -EINVAL;
	for (p = r0; element(p, r1, "Contents", &t0, &t1); p = t1) {
		const char *k0, *k1, *s0, *s1;
		uint64_t size;
		char *key;

		if (!element(t0, t1, "Key", &k0, &k1) ||
		    !element(t0, t1, "Size", &s0, &s1) ||
		    digits(s0, s1, &size))
			return -EINVAL;
		if (!(key = decode(k0, k1)))
			return -EINVAL;
		rc = object(arg, key, size);
		free(key);
		if (rc)
			return rc;
	}
	/* text never holds a raw '<', so the first one is the element */
	if (!element(r0, r1, "IsTruncated", &t0, &t1))
		return -EINVAL;
	*truncated = t1 - t0 == 4 && memcmp(t0, "true", 4) == 0;
	if (*truncated) {
		if (!element(r0, r1, "NextContinuationToken", &t0, &t1) ||
		    t0 == t1 || !(*next_token = decode(t0, t1)))
			return -EINVAL;
	}
	return 0;
}

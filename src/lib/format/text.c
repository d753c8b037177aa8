/*
 * text.c: turning untrusted bytes into safe text, for error messages and
 * listings: quoting of names (no control byte ever reaches a terminal),
 * a server's own words made one plain line (stfs_text_clean),
 * shape formatting, and the error-filling helper the parser uses; and two
 * helpers over byte strings for the layers above: an order (names sorted
 * as bytes) and a 64-bit FNV-1a hash (shortened long file names in the
 * tree, cache file names in source/cache.c); strict base64 (S3's
 * checksums, source/s3/s3sum.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stfs/stfs.h"
#include "format.h"

/* The code point of the well-formed UTF-8 sequence at s (at most len
 * bytes) and its length, or 0 if none starts there (a byte of no
 * sequence, a truncated, overlong or surrogate one). */
static size_t utf8_at(const unsigned char *s, size_t len, uint32_t *cp)
{
	size_t n = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : 2;

	if (n > len || !stfs_utf8_valid((const char *)s, n, NULL))
		return 0;
	*cp = n == 2 ? (uint32_t)(s[0] & 0x1f) << 6 | (s[1] & 0x3f) :
	      n == 3 ? (uint32_t)(s[0] & 0x0f) << 12 |
		       (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f) :
		       (uint32_t)(s[0] & 0x07) << 18 |
		       (uint32_t)(s[1] & 0x3f) << 12 |
		       (uint32_t)(s[2] & 0x3f) << 6 | (s[3] & 0x3f);
	return n;
}

/* A code point a terminal acts on or shows as something else: the C1
 * controls (U+0080..U+009F: CSI is U+009B) and the bidirectional
 * controls that reorder what follows (U+061C, U+200E, U+200F,
 * U+202A..U+202E, U+2066..U+2069). */
static int cp_hidden(uint32_t c)
{
	return (c >= 0x80 && c <= 0x9f) || c == 0x61c || c == 0x200e ||
	       c == 0x200f || (c >= 0x202a && c <= 0x202e) ||
	       (c >= 0x2066 && c <= 0x2069);
}

char *stfs_quote(const char *s, size_t len, char *out, size_t outsz)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	if (outsz == 0)
		return out;
	for (size_t i = 0; i < len;) {
		const unsigned char *u = (const unsigned char *)s + i;
		unsigned char c = *u;
		uint32_t cp = 0;
		size_t take = 1, n = 0;
		char buf[8];

		if (c >= 0x80 && !(take = utf8_at(u, len - i, &cp)))
			take = 1;       /* a byte of no UTF-8 sequence */
		if (c < 0x20 || c == 0x7f || (c >= 0x80 && take == 1)) {
			n = (size_t)snprintf(buf, sizeof(buf), "\\x%c%c",
					     hex[c >> 4], hex[c & 15]);
		} else if (c >= 0x80 && cp_hidden(cp)) {
			n = (size_t)snprintf(buf, sizeof(buf), "\\u%04x",
					     (unsigned)cp);
		} else if (c == '"' || c == '\\') {
			buf[n++] = '\\';
			buf[n++] = (char)c;
		} else {
			memcpy(buf, u, take);
			n = take;
		}
		/* keep room for "..." and the terminator (a sequence is
		 * copied whole or not at all) */
		if (o + n + 4 > outsz) {
			if (o + 4 <= outsz) {
				memcpy(out + o, "...", 3);
				o += 3;
			}
			break;
		}
		memcpy(out + o, buf, n);
		o += n;
		i += take;
	}
	out[o] = '\0';
	return out;
}

void stfs_text_clean(char *s)
{
	unsigned char *u = (unsigned char *)s;
	size_t n = strlen(s), o = 0;

	for (size_t i = 0; i < n;) {
		uint32_t cp = 0;
		size_t take = u[i] < 0x80 ? 1 : utf8_at(u + i, n - i, &cp);

		if (!take) {
			u[o++] = '?';   /* a byte of no UTF-8 sequence */
			i++;
		} else if (u[i] < 0x20 || u[i] == 0x7f ||
			   (u[i] >= 0x80 && cp_hidden(cp))) {
			u[o++] = ' ';
			i += take;
		} else {
			memmove(u + o, u + i, take);
			o += take;
			i += take;
		}
	}
	u[o] = '\0';
}

size_t stfs_shape_str(const struct stfs_tensor *t, char *out, size_t outsz)
{
	size_t need = 0;
	char num[24];

#define PUT(str, n)                                                     \
	do {                                                            \
		if (need + (n) < outsz)                                 \
			memcpy(out + need, (str), (n));                 \
		need += (n);                                            \
	} while (0)

	PUT("[", 1);
	for (size_t i = 0; i < t->rank; i++) {
		int n = snprintf(num, sizeof(num), "%s%" PRIu64,
				 i ? "," : "", t->shape[i]);
		PUT(num, (size_t)n);
	}
	PUT("]", 1);
#undef PUT
	if (outsz)
		out[need < outsz ? need : outsz - 1] = '\0';
	return need;
}

int stfs_fail(struct stfs_error *err, int code, const char *rule,
	      uint64_t offset, const char *fmt, ...)
{
	va_list ap;
	size_t n;

	if (!err)
		return code;
	err->code = code;
	err->rule = rule;
	err->offset = offset;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	n = strlen(err->msg);
	if (rule && n + 4 < sizeof(err->msg))
		snprintf(err->msg + n, sizeof(err->msg) - n, " (%s)", rule);
	return code;
}

int stfs_bytes_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	if (c)
		return c;
	return alen < blen ? -1 : alen > blen;
}

uint64_t stfs_hash64(const char *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

int stfs_fail_sys(struct stfs_error *err, int code, const char *what)
{
	return stfs_fail(err, code, NULL, STFS_NO_OFFSET, "%s: %s", what,
			 strerror(-code));
}

int stfs_nomem(struct stfs_error *err)
{
	return stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET, "out of memory");
}

int stfs_ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), k = strlen(tail);

	return n >= k && memcmp(s + n - k, tail, k) == 0;
}

const char *stfs_env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

/* The value of base64 digit c, or -1. */
static int b64_digit(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

int stfs_base64_decode(const char *s, size_t n, unsigned char *out,
		       size_t outsz, size_t *outlen)
{
	size_t len = 0;

	*outlen = 0;
	if (n % 4)
		return -EINVAL;
	for (size_t i = 0; i < n; i += 4) {
		int d[4], pad = 0;
		uint32_t v = 0;

		for (int k = 0; k < 4; k++) {
			if (s[i + k] == '=' && i + 4 == n && k >= 2) {
				d[k] = 0;
				pad++;
				continue;
			}
			if (pad || (d[k] = b64_digit((unsigned char)s[i + k])) < 0)
				return -EINVAL;     /* '=' then a digit */
		}
		v = (uint32_t)d[0] << 18 | (uint32_t)d[1] << 12 |
		    (uint32_t)d[2] << 6 | (uint32_t)d[3];
		if ((pad == 1 && (v & 0xff)) || (pad == 2 && (v & 0xffff)))
			return -EINVAL;             /* pad bits not zero */
		if (len + 3 - (size_t)pad > outsz)
			return -ENOSPC;
		out[len++] = (unsigned char)(v >> 16);
		if (pad < 2)
			out[len++] = (unsigned char)(v >> 8);
		if (pad < 1)
			out[len++] = (unsigned char)v;
	}
	*outlen = len;
	return 0;
}

/*
 * json.c: the JSON lexer of the safetensors header parser (header.c):
 * strings unescaped into the parser's arena, numbers and literals checked
 * and skipped, any value skipped with the nesting limit.  It accepts
 * exactly RFC 8259 as serde_json reads it (RULES.md R5, R8): no raw
 * control byte in a string, surrogate escapes paired, numbers finite.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stfs/stfs.h"
#include "format.h"
#include "parse.h"

int stfs_jp_syntax(struct parser *P, const char *what)
{
	if (P->pos >= P->len)
		return stfs_fail(P->err, -EINVAL, R5, stfs_jp_at(P),
				 "header byte %" PRIu64 ": unexpected end of "
				 "header, expected %s", stfs_jp_at(P), what);
	return stfs_fail(P->err, -EINVAL, R5, stfs_jp_at(P),
			 "header byte %" PRIu64 ": expected %s", stfs_jp_at(P), what);
}

int stfs_jp_expect(struct parser *P, char c, const char *what)
{
	stfs_jp_skip_ws(P);
	if (stfs_jp_peek(P) != (unsigned char)c)
		return stfs_jp_syntax(P, what);
	P->pos++;
	return 0;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int read_u4(struct parser *P, unsigned *out)
{
	unsigned v = 0;

	if (P->len - P->pos < 4)
		return stfs_jp_syntax(P, "4 hex digits after \\u");
	for (int i = 0; i < 4; i++) {
		int h = hexval((unsigned char)P->buf[P->pos + i]);
		if (h < 0)
			return stfs_jp_syntax(P, "4 hex digits after \\u");
		v = v * 16 + (unsigned)h;
	}
	P->pos += 4;
	*out = v;
	return 0;
}

/* A \\u escape (P->pos just past the 'u'), with the low half of a
 * surrogate pair, written as UTF-8 at *o. */
static int unescape_u(struct parser *P, char **o)
{
	unsigned cp, lo;
	int rc;

	if ((rc = read_u4(P, &cp)))
		return rc;
	if (cp >= 0xdc00 && cp <= 0xdfff)
		return stfs_fail(P->err, -EINVAL, R5, stfs_jp_at(P),
				 "header byte %" PRIu64 ": lone "
				 "low surrogate escape", stfs_jp_at(P));
	if (cp >= 0xd800 && cp <= 0xdbff) {
		if (P->len - P->pos < 2 ||
		    P->buf[P->pos] != '\\' ||
		    P->buf[P->pos + 1] != 'u')
			return stfs_fail(P->err, -EINVAL, R5,
					 stfs_jp_at(P), "header byte %"
					 PRIu64 ": lone high "
					 "surrogate escape",
					 stfs_jp_at(P));
		P->pos += 2;
		if ((rc = read_u4(P, &lo)))
			return rc;
		if (lo < 0xdc00 || lo > 0xdfff)
			return stfs_fail(P->err, -EINVAL, R5,
					 stfs_jp_at(P), "header byte %"
					 PRIu64 ": unpaired "
					 "surrogate escape",
					 stfs_jp_at(P));
		cp = 0x10000 + ((cp - 0xd800) << 10) +
		     (lo - 0xdc00);
	}
	if (cp < 0x80) {
		*(*o)++ = (char)cp;
	} else if (cp < 0x800) {
		*(*o)++ = (char)(0xc0 | (cp >> 6));
		*(*o)++ = (char)(0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		*(*o)++ = (char)(0xe0 | (cp >> 12));
		*(*o)++ = (char)(0x80 | ((cp >> 6) & 0x3f));
		*(*o)++ = (char)(0x80 | (cp & 0x3f));
	} else {
		*(*o)++ = (char)(0xf0 | (cp >> 18));
		*(*o)++ = (char)(0x80 | ((cp >> 12) & 0x3f));
		*(*o)++ = (char)(0x80 | ((cp >> 6) & 0x3f));
		*(*o)++ = (char)(0x80 | (cp & 0x3f));
	}
	return 0;
}

/*
 * Parse the string at P->pos (which must be '"'), unescaped and
 * NUL-terminated in the arena.  The caller may give the bytes back with
 * P->used = mark when it does not keep them.
 */
int stfs_jp_string(struct parser *P, const char **s, size_t *slen)
{
	char *o;
	size_t start;
	int rc;

	stfs_jp_skip_ws(P);
	if (stfs_jp_peek(P) != '"')
		return stfs_jp_syntax(P, "a string");
	start = stfs_jp_at(P);
	P->pos++;
	o = P->arena + P->used;
	for (;;) {
		unsigned char c;

		if (P->pos >= P->len)
			return stfs_fail(P->err, -EINVAL, R5, start,
					 "header byte %" PRIu64 ": string "
					 "never ends", (uint64_t)start);
		c = (unsigned char)P->buf[P->pos];
		if (c == '"') {
			P->pos++;
			break;
		}
		if (c < 0x20)
			return stfs_fail(P->err, -EINVAL, R5, stfs_jp_at(P),
					 "header byte %" PRIu64 ": raw control "
					 "byte 0x%02x in a string", stfs_jp_at(P), c);
		if (c != '\\') {
			*o++ = (char)c;
			P->pos++;
			continue;
		}
		P->pos++;
		if (P->pos >= P->len)
			return stfs_jp_syntax(P, "an escape");
		c = (unsigned char)P->buf[P->pos++];
		switch (c) {
		case '"': *o++ = '"'; break;
		case '\\': *o++ = '\\'; break;
		case '/': *o++ = '/'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u':
			if ((rc = unescape_u(P, &o)))
				return rc;
			break;
		default:
			P->pos--;
			return stfs_jp_syntax(P, "a valid escape");
		}
	}
	*o = '\0';
	*s = P->arena + P->used;
	*slen = (size_t)(o - *s);
	P->used += *slen + 1;
	return 0;
}

/* Any JSON number: syntax, then a finite double as serde_json requires. */
int stfs_jp_number(struct parser *P)
{
	size_t s = P->pos;
	char small[64], *tmp = small;
	double d;

	if (stfs_jp_peek(P) == '-')
		P->pos++;
	if (stfs_jp_peek(P) == '0') {
		P->pos++;
	} else if (stfs_jp_peek(P) >= '1' && stfs_jp_peek(P) <= '9') {
		while (stfs_jp_peek(P) >= '0' && stfs_jp_peek(P) <= '9')
			P->pos++;
	} else {
		return stfs_jp_syntax(P, "a digit");
	}
	if (stfs_jp_peek(P) == '.') {
		P->pos++;
		if (!(stfs_jp_peek(P) >= '0' && stfs_jp_peek(P) <= '9'))
			return stfs_jp_syntax(P, "a digit after '.'");
		while (stfs_jp_peek(P) >= '0' && stfs_jp_peek(P) <= '9')
			P->pos++;
	}
	if (stfs_jp_peek(P) == 'e' || stfs_jp_peek(P) == 'E') {
		P->pos++;
		if (stfs_jp_peek(P) == '+' || stfs_jp_peek(P) == '-')
			P->pos++;
		if (!(stfs_jp_peek(P) >= '0' && stfs_jp_peek(P) <= '9'))
			return stfs_jp_syntax(P, "a digit in the exponent");
		while (stfs_jp_peek(P) >= '0' && stfs_jp_peek(P) <= '9')
			P->pos++;
	}
	if (P->pos - s >= sizeof(small)) {
		tmp = malloc(P->pos - s + 1);
		if (!tmp)
			return -ENOMEM;
	}
	memcpy(tmp, P->buf + s, P->pos - s);
	tmp[P->pos - s] = '\0';
	d = strtod(tmp, NULL);
	if (tmp != small)
		free(tmp);
	if (isinf(d))
		return stfs_fail(P->err, -EINVAL, R5, P->base + s,
				 "header byte %" PRIu64 ": number out of "
				 "range", P->base + s);
	return 0;
}

int stfs_jp_literal(struct parser *P, const char *lit)
{
	size_t n = strlen(lit);

	if (P->len - P->pos < n || memcmp(P->buf + P->pos, lit, n) != 0)
		return stfs_jp_syntax(P, "a JSON value");
	P->pos += n;
	return 0;
}

int stfs_jp_enter(struct parser *P, int depth)
{
	if (depth > STFS_JSON_DEPTH_MAX)
		return stfs_fail(P->err, -EINVAL, R8, stfs_jp_at(P),
				 "header byte %" PRIu64 ": JSON nested deeper "
				 "than %d levels", stfs_jp_at(P), STFS_JSON_DEPTH_MAX);
	return 0;
}

/* Check and skip any value; depth is the depth a container here gets. */
int stfs_jp_skip_value(struct parser *P, int depth)
{
	size_t mark = P->used;
	const char *s;
	size_t n;
	int rc;

	stfs_jp_skip_ws(P);
	switch (stfs_jp_peek(P)) {
	case '"':
		rc = stfs_jp_string(P, &s, &n);
		P->used = mark;
		return rc;
	case '{':
		if ((rc = stfs_jp_enter(P, depth)))
			return rc;
		P->pos++;
		stfs_jp_skip_ws(P);
		if (stfs_jp_peek(P) == '}') {
			P->pos++;
			return 0;
		}
		for (;;) {
			if ((rc = stfs_jp_string(P, &s, &n)))
				return rc;
			P->used = mark;
			if ((rc = stfs_jp_expect(P, ':', "':'")))
				return rc;
			if ((rc = stfs_jp_skip_value(P, depth + 1)))
				return rc;
			stfs_jp_skip_ws(P);
			if (stfs_jp_peek(P) == ',') {
				P->pos++;
				continue;
			}
			return stfs_jp_expect(P, '}', "',' or '}'");
		}
	case '[':
		if ((rc = stfs_jp_enter(P, depth)))
			return rc;
		P->pos++;
		stfs_jp_skip_ws(P);
		if (stfs_jp_peek(P) == ']') {
			P->pos++;
			return 0;
		}
		for (;;) {
			if ((rc = stfs_jp_skip_value(P, depth + 1)))
				return rc;
			stfs_jp_skip_ws(P);
			if (stfs_jp_peek(P) == ',') {
				P->pos++;
				continue;
			}
			return stfs_jp_expect(P, ']', "',' or ']'");
		}
	case 't':
		return stfs_jp_literal(P, "true");
	case 'f':
		return stfs_jp_literal(P, "false");
	case 'n':
		return stfs_jp_literal(P, "null");
	default:
		if (stfs_jp_peek(P) == '-' || (stfs_jp_peek(P) >= '0' && stfs_jp_peek(P) <= '9'))
			return stfs_jp_number(P);
		return stfs_jp_syntax(P, "a JSON value");
	}
}

/*
 * credjson.c: the JSON documents that hand out AWS credentials, read
 * strictly: the answer of the container credentials endpoint (ECS, EKS Pod
 * Identity), of the instance metadata service (IMDS) for a role, and what
 * a credential_process prints.  Each is one flat JSON object whose values
 * are strings, numbers, true, false or null.  Its senders are untrusted,
 * so the reader is small and bounded (RFC 8259's grammar and nothing
 * more): at most 64 KiB, 32 members, a name of 63 bytes, a value of 16 KiB;
 * a name given twice, a nested object or array, text after the object, a
 * control character, invalid UTF-8, a lone surrogate or \u0000 are errors.
 * Then the keys themselves are checked (stfs_credjson_keys()): printable
 * ASCII of bounded length, as they go into headers and the signature, and
 * an Expiration in ISO 8601 UTC (stfs_creds_time()).  Fuzzed by
 * tests/fuzz/fuzz_creds.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format.h"
#include "s3.h"

#define DOC_MAX (64u << 10)

struct lex {
	const char *s, *end;
	const char *why;
};

static void ws(struct lex *l)
{
	while (l->s < l->end && strchr(" \t\r\n", *l->s) && *l->s)
		l->s++;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' :
	       c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	       c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int hex4(struct lex *l, unsigned *v)
{
	*v = 0;
	if (l->end - l->s < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		int h = hexval(l->s[i]);

		if (h < 0)
			return -1;
		*v = *v * 16 + (unsigned)h;
	}
	l->s += 4;
	return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | cp >> 12);
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | cp >> 18);
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* A string at l->s (its opening quote), decoded into a new *out of at
 * most max bytes: 0, -EINVAL (l->why), -ENOMEM. */
static int string(struct lex *l, size_t max, char **out)
{
	char *o = malloc(max + 1);
	size_t n = 0, bad;

	*out = NULL;
	if (!o)
		return -ENOMEM;
	l->s++;
	for (;;) {
		unsigned char c;

		if (l->s >= l->end) {
			l->why = "a string does not end";
			goto bad;
		}
		c = (unsigned char)*l->s++;
		if (c == '"')
			break;
		if (c < 0x20) {
			l->why = "a control character in a string";
			goto bad;
		}
		if (n + 4 > max) {
			l->why = "a string too long";
			goto bad;
		}
		if (c != '\\') {
			o[n++] = (char)c;
			continue;
		}
		if (l->s >= l->end) {
			l->why = "a string does not end";
			goto bad;
		}
		c = (unsigned char)*l->s++;
		if (c == 'u') {
			unsigned cp, lo;

			if (hex4(l, &cp))
				goto badesc;
			if (cp >= 0xdc00 && cp <= 0xdfff)
				goto badesc;
			if (cp >= 0xd800 && cp <= 0xdbff) {
				if (l->end - l->s < 6 || l->s[0] != '\\' ||
				    l->s[1] != 'u')
					goto badesc;
				l->s += 2;
				if (hex4(l, &lo) || lo < 0xdc00 || lo > 0xdfff)
					goto badesc;
				cp = 0x10000 + ((cp - 0xd800) << 10) +
				     (lo - 0xdc00);
			}
			if (!cp) {
				l->why = "\\u0000 in a string";
				goto bad;
			}
			n += put_utf8(o + n, cp);
			continue;
		}
		switch (c) {
		case '"': case '\\': case '/': o[n++] = (char)c; break;
		case 'b': o[n++] = '\b'; break;
		case 'f': o[n++] = '\f'; break;
		case 'n': o[n++] = '\n'; break;
		case 'r': o[n++] = '\r'; break;
		case 't': o[n++] = '\t'; break;
		default: goto badesc;
		}
	}
	o[n] = '\0';
	if (!stfs_utf8_valid(o, n, &bad)) {
		l->why = "a string is not UTF-8";
		goto bad;
	}
	*out = o;
	return 0;
badesc:
	l->why = "a bad escape in a string";
bad:
	explicit_bzero(o, max + 1);
	free(o);
	return -EINVAL;
}

/* A number as RFC 8259 writes one, kept as its text. */
static int number(struct lex *l, char **out)
{
	const char *b = l->s;

	if (l->s < l->end && *l->s == '-')
		l->s++;
	if (l->s >= l->end || *l->s < '0' || *l->s > '9')
		goto bad;
	if (*l->s == '0')
		l->s++;
	else
		while (l->s < l->end && *l->s >= '0' && *l->s <= '9')
			l->s++;
	if (l->s < l->end && *l->s == '.') {
		l->s++;
		if (l->s >= l->end || *l->s < '0' || *l->s > '9')
			goto bad;
		while (l->s < l->end && *l->s >= '0' && *l->s <= '9')
			l->s++;
	}
	if (l->s < l->end && (*l->s == 'e' || *l->s == 'E')) {
		l->s++;
		if (l->s < l->end && (*l->s == '+' || *l->s == '-'))
			l->s++;
		if (l->s >= l->end || *l->s < '0' || *l->s > '9')
			goto bad;
		while (l->s < l->end && *l->s >= '0' && *l->s <= '9')
			l->s++;
	}
	if (l->s - b > 64)
		goto bad;
	*out = strndup(b, (size_t)(l->s - b));
	return *out ? 0 : -ENOMEM;
bad:
	l->why = "a bad number";
	return -EINVAL;
}

static int word(struct lex *l, const char *w)
{
	size_t n = strlen(w);

	if ((size_t)(l->end - l->s) < n || memcmp(l->s, w, n))
		return -1;
	l->s += n;
	return 0;
}

static int value(struct lex *l, struct stfs_json_kv *kv)
{
	if (l->s >= l->end) {
		l->why = "a value is missing";
		return -EINVAL;
	}
	switch (*l->s) {
	case '"':
		kv->type = 's';
		return string(l, STFS_CREDJSON_VALUE_MAX, &kv->value);
	case '{': case '[':
		l->why = "a nested object or array (the document is flat)";
		return -EINVAL;
	case 't': case 'f': case 'n':
		kv->type = *l->s == 'n' ? 'z' : *l->s;
		if (word(l, *l->s == 't' ? "true" : *l->s == 'f' ? "false" :
			 "null")) {
			l->why = "a bad word";
			return -EINVAL;
		}
		return 0;
	default:
		kv->type = '0';         /* a number */
		return number(l, &kv->value);
	}
}

int stfs_credjson_parse(const char *text, size_t len, struct stfs_credjson *j,
			const char **why)
{
	struct lex l = { text, text + len, NULL };
	int rc = -EINVAL;

	memset(j, 0, sizeof(*j));
	*why = NULL;
	if (len > DOC_MAX) {
		*why = "over 64 KiB";
		return -EINVAL;
	}
	ws(&l);
	if (l.s >= l.end || *l.s != '{') {
		*why = "not a JSON object";
		return -EINVAL;
	}
	l.s++;
	ws(&l);
	if (l.s < l.end && *l.s == '}') {
		l.s++;
		goto end;
	}
	for (;;) {
		struct stfs_json_kv *kv;
		char *name;

		ws(&l);
		if (l.s >= l.end || *l.s != '"') {
			l.why = "a member's name is not a string";
			goto fail;
		}
		if (j->n == STFS_CREDJSON_MEMBERS) {
			l.why = "over 32 members";
			goto fail;
		}
		if ((rc = string(&l, STFS_CREDJSON_NAME_MAX, &name)))
			goto fail;
		for (size_t i = 0; i < j->n; i++)
			if (!strcmp(j->kv[i].name, name)) {
				free(name);
				l.why = "a name given twice";
				rc = -EINVAL;
				goto fail;
			}
		kv = &j->kv[j->n++];
		kv->name = name;
		ws(&l);
		if (l.s >= l.end || *l.s != ':') {
			l.why = "no ':' after a name";
			rc = -EINVAL;
			goto fail;
		}
		l.s++;
		ws(&l);
		if ((rc = value(&l, kv)))
			goto fail;
		ws(&l);
		if (l.s < l.end && *l.s == ',') {
			l.s++;
			continue;
		}
		if (l.s < l.end && *l.s == '}') {
			l.s++;
			break;
		}
		l.why = "no ',' or '}' after a value";
		rc = -EINVAL;
		goto fail;
	}
end:
	ws(&l);
	if (l.s != l.end) {
		*why = "text after the object";
		stfs_credjson_free(j);
		return -EINVAL;
	}
	return 0;
fail:
	*why = rc == -ENOMEM ? "out of memory" : l.why;
	stfs_credjson_free(j);
	return rc ? rc : -EINVAL;
}

const char *stfs_credjson_str(const struct stfs_credjson *j, const char *name)
{
	for (size_t i = 0; i < j->n; i++)
		if (!strcmp(j->kv[i].name, name))
			return j->kv[i].type == 's' ? j->kv[i].value : NULL;
	return NULL;
}

int stfs_credjson_has(const struct stfs_credjson *j, const char *name)
{
	for (size_t i = 0; i < j->n; i++)
		if (!strcmp(j->kv[i].name, name))
			return j->kv[i].type;
	return 0;
}

void stfs_credjson_free(struct stfs_credjson *j)
{
	for (size_t i = 0; i < j->n; i++) {
		if (j->kv[i].value)
			explicit_bzero(j->kv[i].value, strlen(j->kv[i].value));
		free(j->kv[i].value);
		free(j->kv[i].name);
	}
	memset(j, 0, sizeof(*j));
}

/* ---- the keys' form ------------------------------------------------------ */

/* s: 1 to max bytes of printable ASCII, with no space (and, for a key id,
 * letters and digits only). */
static int key_ok(const char *s, size_t max, int alnum)
{
	size_t n = s ? strlen(s) : 0;

	if (!n || n > max)
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c <= 0x20 || c >= 0x7f)
			return 0;
		if (alnum && !((c >= 'A' && c <= 'Z') ||
			       (c >= 'a' && c <= 'z') ||
			       (c >= '0' && c <= '9')))
			return 0;
	}
	return 1;
}

int stfs_creds_keys_check(const char *access, const char *secret,
			  const char *token, const char **why)
{
	if (!key_ok(access, STFS_KEY_ID_MAX, 1))
		*why = "the access key id is not 1 to 128 letters and digits";
	else if (!key_ok(secret, STFS_SECRET_MAX, 0))
		*why = "the secret key is not 1 to 256 printable characters";
	else if (token && !key_ok(token, STFS_TOKEN_MAX, 0))
		*why = "the session token is not 1 to 16384 printable "
		       "characters";
	else
		return 0;
	return -EINVAL;
}

static int digits(const char *s, int n, int *v)
{
	*v = 0;
	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		*v = *v * 10 + (s[i] - '0');
	}
	return 0;
}

int stfs_creds_time(const char *s, time_t *out)
{
	struct tm tm = { 0 };
	int y, mo, d, h, mi, se;
	size_t n = s ? strlen(s) : 0;
	const char *z;
	time_t t;

	/* YYYY-MM-DDTHH:MM:SS, then .fraction, then Z or +00:00 */
	if (n < 20 || n > 40 || s[4] != '-' || s[7] != '-' ||
	    (s[10] != 'T' && s[10] != 't') || s[13] != ':' || s[16] != ':' ||
	    digits(s, 4, &y) || digits(s + 5, 2, &mo) || digits(s + 8, 2, &d) ||
	    digits(s + 11, 2, &h) || digits(s + 14, 2, &mi) ||
	    digits(s + 17, 2, &se))
		return -EINVAL;
	z = s + 19;
	if (*z == '.') {
		z++;
		if (*z < '0' || *z > '9')
			return -EINVAL;
		while (*z >= '0' && *z <= '9')
			z++;
	}
	if (strcmp(z, "Z") && strcmp(z, "z") && strcmp(z, "+00:00"))
		return -EINVAL;
	if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > 31 ||
	    h > 23 || mi > 59 || se > 60)
		return -EINVAL;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = se;
	t = timegm(&tm);
	if (t == (time_t)-1 || tm.tm_mday != d)     /* Feb 30: normalised */
		return -EINVAL;
	*out = t;
	return 0;
}

int stfs_credjson_keys(const struct stfs_credjson *j, const char *token_name,
		       int need_expiry, struct stfs_creds_keys *k,
		       const char **why)
{
	const char *a = stfs_credjson_str(j, "AccessKeyId");
	const char *s = stfs_credjson_str(j, "SecretAccessKey");
	const char *t = stfs_credjson_str(j, token_name);
	const char *e = stfs_credjson_str(j, "Expiration");
	int te = stfs_credjson_has(j, token_name);

	memset(k, 0, sizeof(*k));
	if (!a || !s) {
		*why = "no AccessKeyId or no SecretAccessKey (strings)";
		return -EINVAL;
	}
	if ((te && te != 's' && te != 'z') || (need_expiry && !t)) {
		*why = need_expiry ? "no session token (a string)" :
		       "the session token is not a string";
		return -EINVAL;
	}
	if (stfs_creds_keys_check(a, s, t, why))
		return -EINVAL;
	if (stfs_credjson_has(j, "Expiration") && !e) {
		*why = "Expiration is not a string";
		return -EINVAL;
	}
	if ((need_expiry && !e) ||
	    (e && stfs_creds_time(e, &k->expires))) {
		*why = "no Expiration in ISO 8601 UTC (YYYY-MM-DDTHH:MM:SSZ)";
		return -EINVAL;
	}
	if (!(k->access = strdup(a)) || !(k->secret = strdup(s)) ||
	    (t && !(k->token = strdup(t)))) {
		stfs_creds_keys_drop(k);
		*why = "out of memory";
		return -ENOMEM;
	}
	return 0;
}

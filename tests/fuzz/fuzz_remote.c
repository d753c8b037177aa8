/*
 * fuzz_remote.c: libFuzzer harness for what remote services answer, all
 * untrusted: the Hub's revision and tree answers (hubjson.c); and a source URL
 * as a user may give it (locate.c), whose secrets must never show; the
 * AWS CLI's credential and config files (ini.c); a revision of
 * hf://ORG/NAME@REV (gitref.c), which must never climb out of refs/.
 * (S3's XML is fuzz_xml.c's.)  The first byte picks the parser; the rest
 * is the document.  Nothing may crash or read out of bounds, and what is
 * taken must be sane: a commit 40 hex digits, an oid 40 or 64 lower-case
 * hex digits or "" (malformed), a
 * URL shown with no user, password or query, INI keys lower-case and
 * distinct, a revision accepted with no "..", '%' or control byte; and
 * stfs_quote() of a name (text.c), whose output is well-formed UTF-8
 * with no C0, C1 or bidirectional control, and its key for Unicode twins
 * (unorm.c).
 */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "engine.h"
#include "hub.h"
#include "s3.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int on_file(void *arg, const char *path, const char *etag,
		   uint64_t size)
{
	(void)size;
	*(size_t *)arg += strlen(path) + (etag ? strlen(etag) : 0);
	/* an oid is 40 or 64 lower-case hex digits, or "" (malformed) */
	if (etag && strlen(etag) != 0 && strlen(etag) != 40 &&
	    strlen(etag) != 64)
		abort();
	for (const char *c = etag; c && *c; c++)
		if (!strchr("0123456789abcdef", *c))
			abort();
	return 0;
}

/* "http://" + doc: what is shown of it holds no secret, and locating it
 * (no network for http://) shows the same. */
static void url(const char *doc, size_t len)
{
	struct stfs_location *loc;
	struct stfs_error err;
	char *u, *shown, *host;

	if (memchr(doc, '\0', len) || !(u = malloc(len + 8)))
		return;
	memcpy(u, "http://", 7);
	memcpy(u + 7, doc, len);
	u[len + 7] = '\0';
	if (!(shown = stfs_source_shown(u))) {
		free(u);
		return;
	}
	host = shown + 7;
	if (strchr(shown, '?') ||
	    memchr(host, '@', strcspn(host, "/#")))
		abort();
	if (stfs_locate(u, NULL, &loc, &err) == 0) {
		if (strcmp(loc->arg, shown) != 0)
			abort();
		stfs_location_free(loc);
	}
	free(shown);
	free(u);
}

/* An INI file: what parses has lower-case keys that are not empty and
 * not repeated, and trimmed values. */
static void ini(const char *doc, size_t len)
{
	struct stfs_ini f;
	const char *why;
	size_t line;

	if (stfs_ini_parse(doc, len, &f, &line, &why) != 0) {
		if (!why || !line)
			abort();
		return;
	}
	for (size_t i = 0; i < f.n; i++)
		for (size_t k = 0; k < f.s[i].n; k++) {
			const char *key = f.s[i].kv[k].key;
			const char *v = f.s[i].kv[k].value;
			size_t vl = strlen(v);

			/* (a value whose first line is empty starts with
			 * its newline, as configparser joins it) */
			if (!*key || (vl && (v[0] == ' ' || v[0] == '\t' ||
					     isspace((unsigned char)v[vl - 1]))))
				abort();
			for (const char *c = key; *c; c++)
				if (isupper((unsigned char)*c))
					abort();
			for (size_t j = 0; j < k; j++)
				if (!strcmp(f.s[i].kv[j].key, key))
					abort();
		}
	stfs_ini_free(&f);
}

/* A revision: one accepted never names a path out of refs/. */
static void rev(const char *doc, size_t len)
{
	char *r;
	const char *why;

	if (memchr(doc, '\0', len) || !(r = strndup(doc, len)))
		return;         /* an argument has no NUL in it */
	if (stfs_hub_rev_ok(r, &why)) {
		if (strstr(r, "..") || r[0] == '/' || strchr(r, '%') ||
		    strchr(r, '\\'))
			abort();
		for (const char *c = r; *c; c++)
			if ((unsigned char)*c <= 0x20 || *c == 0x7f)
				abort();
	} else if (!why) {
		abort();
	}
	free(r);
}

static void check_plain(const char *s, size_t n);

/* A name as a server gives it, quoted for a terminal: well-formed
 * UTF-8 with no C0 or C1 control, no bidirectional control and no DEL,
 * within the room given; and its key for twins (unorm.c): made, its own
 * key (NFD and lower case are idempotent), well-formed UTF-8 when the
 * name is; and stfs_text_clean() of it (text.c, a server's reason for
 * an error), plain as the quoted name is. */
static void quote(const char *doc, size_t len)
{
	char out[96], *k, *k2;
	size_t n;

	if (!(k = stfs_name_key(doc, len)))
		return;
	if (!(k2 = stfs_name_key(k, strlen(k))) ||
	    (!memchr(doc, '\0', len) && strcmp(k, k2)) ||
	    (stfs_utf8_valid(doc, len, NULL) &&
	     !stfs_utf8_valid(k, strlen(k), NULL)))
		abort();
	free(k);
	free(k2);

	stfs_quote(doc, len, out, sizeof(out));
	n = strlen(out);
	if (n >= sizeof(out) || !stfs_utf8_valid(out, n, NULL))
		abort();
	check_plain(out, n);
	/* a server's own words, cleaned in place: the same guarantees */
	if ((k = strndup(doc, len))) {
		stfs_text_clean(k);
		if (!stfs_utf8_valid(k, strlen(k), NULL))
			abort();
		check_plain(k, strlen(k));
		free(k);
	}
}

/* No C0 or C1 control, no bidirectional control and no DEL in s. */
static void check_plain(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;

	for (size_t i = 0; i < n; i++) {
		if (u[i] < 0x20 || u[i] == 0x7f ||
		    (u[i] == 0xc2 && u[i + 1] >= 0x80 && u[i + 1] <= 0x9f) ||
		    (u[i] == 0xd8 && u[i + 1] == 0x9c) ||
		    (u[i] == 0xe2 && u[i + 1] == 0x80 &&
		     (u[i + 2] == 0x8e || u[i + 2] == 0x8f ||
		      (u[i + 2] >= 0xaa && u[i + 2] <= 0xae))) ||
		    (u[i] == 0xe2 && u[i + 1] == 0x81 &&
		     u[i + 2] >= 0xa6 && u[i + 2] <= 0xa9))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *doc, sha[41];
	size_t n = 0;

	if (size < 1)
		return 0;
	/* exactly the document, no NUL after it: reads past it are caught */
	if (!(doc = malloc(size - 1 ? size - 1 : 1)))
		return 0;
	memcpy(doc, data + 1, size - 1);
	switch (data[0] % 6) {
	case 0:
		if (stfs_hub_parse_sha(doc, size - 1, sha) == 0 &&
		    (strlen(sha) != 40 || strspn(sha, "0123456789abcdef") != 40))
			abort();
		break;
	case 1:
		(void)stfs_hub_parse_tree(doc, size - 1, on_file, &n);
		break;
	case 3:
		ini(doc, size - 1);
		break;
	case 4:
		rev(doc, size - 1);
		break;
	case 5:
		quote(doc, size - 1);
		break;
	default:                /* 2 */
		url(doc, size - 1);
		break;
	}
	free(doc);
	return 0;
}

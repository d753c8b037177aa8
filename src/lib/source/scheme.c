/*
 * scheme.c: which kind of source a SOURCE argument (or an endpoint from
 * the environment) names, by its URL scheme: http, https, hf or s3.
 * Schemes are case-insensitive (RFC 3986, 3.1), so HTTP://HOST/... is a
 * URL like http://HOST/... and never a local path; the locator writes the
 * scheme in lower case once, and everything after it compares lower case.
 * And a path made part of a URL, each component escaped.
 */
#include <ctype.h>
#include <curl/curl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "format.h"
#include "scheme.h"

static const struct {
	const char *prefix;
	size_t len;
	enum stfs_scheme scheme;
} schemes[] = {
	{ "http://", 7, STFS_SCHEME_HTTP },
	{ "https://", 8, STFS_SCHEME_HTTPS },
	{ "hf://", 5, STFS_SCHEME_HF },
	{ "s3://", 5, STFS_SCHEME_S3 },
};

enum stfs_scheme stfs_url_scheme(const char *arg)
{
	for (size_t i = 0; arg && i < sizeof(schemes) / sizeof(*schemes); i++)
		if (strncasecmp(arg, schemes[i].prefix, schemes[i].len) == 0)
			return schemes[i].scheme;
	return STFS_SCHEME_NONE;
}

void stfs_url_lower_scheme(char *url)
{
	if (stfs_url_scheme(url) == STFS_SCHEME_NONE)
		return;
	for (; *url && *url != ':'; url++)
		*url = (char)tolower((unsigned char)*url);
}

int stfs_source_is_remote(const char *source)
{
	return stfs_url_scheme(source) != STFS_SCHEME_NONE;
}

/* path with each component URL-escaped and its slashes kept (for the
 * Hub's and any base URL's files); a new string, or NULL. */
char *stfs_url_escape_path(const char *path)
{
	size_t cap = strlen(path) * 3 + 1;
	char *out = malloc(cap), *o = out;
	const char *c = path;

	if (!out)
		return NULL;
	*o = '\0';
	while (*c) {
		size_t n = strcspn(c, "/");
		char *e = curl_easy_escape(NULL, c, (int)n);

		if (!e) {
			free(out);
			return NULL;
		}
		o += sprintf(o, "%s%s", o == out ? "" : "/", e);
		curl_free(e);
		c += n;
		if (*c)
			c++;
	}
	return out;
}

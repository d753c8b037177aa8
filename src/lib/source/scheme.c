/*
 * scheme.c: which kind of source a SOURCE argument (or an endpoint from
 * the environment) names, by its URL scheme: http, https, hf or s3.
 * Schemes are case-insensitive (RFC 3986, 3.1), so HTTP://HOST/... is a
 * URL like http://HOST/... and never a local path; the locator writes the
 * scheme in lower case once, and everything after it compares lower case.
 */
#include <ctype.h>
#include <stddef.h>
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

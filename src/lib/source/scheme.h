/*
 * scheme.h: URLs and schemes as the source layer reads them (scheme.c):
 * which scheme a SOURCE argument names, in any case, and a path escaped
 * for a URL.  The bottom of src/lib/source: it uses no other room.
 */
#ifndef STFS_SCHEME_H
#define STFS_SCHEME_H

enum stfs_scheme {
	STFS_SCHEME_NONE,       /* not a URL stfs reads: a local path */
	STFS_SCHEME_HTTP,
	STFS_SCHEME_HTTPS,
	STFS_SCHEME_HF,
	STFS_SCHEME_S3,
};
enum stfs_scheme stfs_url_scheme(const char *arg);
/* Write url's scheme (if it is one of the above) in lower case. */
void stfs_url_lower_scheme(char *url);
/* path with each component URL-escaped, its slashes kept (repo.c): a new
 * string, or NULL. */
char *stfs_url_escape_path(const char *path);

#endif

/*
 * auth.h: what a remote source's requests carry (struct stfs_auth: a
 * bearer token, a user and password, AWS keys or refreshing credentials)
 * and S3's error documents as the HTTP client words them.  Offered by
 * s3/ (sigv4.c, creds.c, s3xml.c) to every room that makes requests:
 * the HTTP client signs with it, the locators make one per location.
 */
#ifndef STFS_AUTH_H
#define STFS_AUTH_H

#include <stdatomic.h>
#include <stddef.h>
#include <time.h>

/* What a remote source's requests carry, shared by the sources of one
 * location (reference counted): a bearer token (the Hugging Face Hub) or
 * a user and password (from an http(s) URL), both sent by libcurl to the
 * URL's own host only, never on to the host of a redirect; or AWS keys,
 * with which every request is signed (and redirects are not followed). */
struct stfs_auth {
	atomic_uint refs;
	char *bearer;
	char *user, *password;          /* HTTP basic authentication */
	char *query;                    /* added to every request's URL (a
					 * presigned URL's signature) */
	int sign;                       /* access_key and secret_key set */
	char *access_key, *secret_key, *token, *region;
	char *ca_file;                  /* CA certificates for its hosts, or
					 * NULL: those of the environment */
	struct stfs_creds *creds;       /* temporary keys, refreshed (s3/
					 * creds.c), used instead of those
					 * above; or NULL */
};

struct stfs_auth *stfs_auth_new(const char *bearer, const char *access_key,
				const char *secret_key, const char *token,
				const char *region);
struct stfs_auth *stfs_auth_ref(struct stfs_auth *a);
void stfs_auth_unref(struct stfs_auth *a);
struct curl_slist;
/* Append to list the headers that sign a GET of url now (x-amz-date,
 * x-amz-content-sha256, x-amz-security-token, with STFS_REQ_CHECKSUMS in
 * flags x-amz-checksum-mode, Authorization), with a's keys or, with
 * a->creds, the current ones of those; *ok is 0 if that failed, why (if
 * not NULL) saying why (the credentials expired and could not be
 * refreshed).  Returns the list. */
struct curl_slist *stfs_auth_headers(const struct stfs_auth *a,
				     const char *url, unsigned flags,
				     struct curl_slist *list, int *ok,
				     char *why, size_t whysz);
/* The refreshing credentials of a (s3/creds.c): stop their thread before
 * the process forks (it starts again at the next request), or free them
 * (the last reference to a). */
void stfs_auth_park(struct stfs_auth *a);
void stfs_creds_park(struct stfs_creds *c);
void stfs_creds_free(struct stfs_creds *c);
/* The current keys of c, copies (free with stfs_creds_keys_drop()): 0, or
 * -EKEYEXPIRED with why saying since when and why no refresh worked. */
struct stfs_creds_keys {
	char *access, *secret, *token;  /* token: NULL if none */
	time_t expires;                 /* 0: they do not expire */
};
int stfs_creds_now(struct stfs_creds *c, struct stfs_creds_keys *k,
		   char *why, size_t whysz);
/* Free k's copies, the secret and the token overwritten first. */
void stfs_creds_keys_drop(struct stfs_creds_keys *k);

/* An S3 error document's "Code: Message" into out (s3xml.c), for the
 * client's messages, cut to fit and control characters made spaces: 0,
 * -EINVAL when xml is not one, -ENOSPC when not one character fits.  Only
 * the start of the document may be at hand: a Code complete before the
 * cut is enough. */
int stfs_s3_error_parse(const char *xml, size_t len, char *out,
			size_t outsz);

#endif

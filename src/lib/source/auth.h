/*
 * auth.h: what a remote source's requests carry (struct stfs_auth: a
 * bearer token, a user and password, AWS keys or refreshing credentials)
 * and AWS Signature Version 4, which signs them (http/sigv4.c).  Part of
 * the HTTP room: the client signs with it, the locators make one per
 * location; s3/ gives an auth its refreshing credentials with their
 * functions (struct stfs_creds_ops), which http/ calls through them.
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
	const struct stfs_creds_ops *creds_ops; /* with creds: theirs */
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
/* Append to *l the headers that sign a request of method on url now with
 * a's keys (or its refreshing credentials' current ones): x-amz-date,
 * x-amz-content-sha256 (payload: the hex SHA-256 of the body),
 * x-amz-security-token, the x-amz-* header lines hdrs ("name: value",
 * lower-case names; signed, and appended), Authorization.  query is the
 * canonical query (sorted, escaped), or NULL: url's own.  0, or
 * -EKEYEXPIRED (why says why), -EINVAL (too many headers, one not a
 * header line), -ENOMEM; *l then holds what was appended so far. */
int stfs_auth_sign(const struct stfs_auth *a, const char *method,
		   const char *url, const char *query, const char *payload,
		   const char *const *hdrs, size_t nhdrs,
		   struct curl_slist **l, char *why, size_t whysz);
/* The refreshing credentials of a: stop their thread before the process
 * forks (it starts again at the next request). */
void stfs_auth_park(struct stfs_auth *a);
/* Keys of a moment, copies (struct stfs_creds_ops' now). */
struct stfs_creds_keys {
	char *access, *secret, *token;  /* token: NULL if none */
	time_t expires;                 /* 0: they do not expire */
};
/* Free k's copies, the secret and the token overwritten first. */
void stfs_creds_keys_drop(struct stfs_creds_keys *k);
/* What struct stfs_auth does with its refreshing credentials, given with
 * them (s3/creds.c's stfs_creds_ops()), so that the HTTP room that signs
 * requests calls nothing of s3/: their current keys (0, or -EKEYEXPIRED
 * with why saying since when and why no refresh worked), their thread
 * stopped before a fork, and their end (the last reference to a). */
struct stfs_creds_ops {
	int (*now)(struct stfs_creds *c, struct stfs_creds_keys *k,
		   char *why, size_t whysz);
	void (*park)(struct stfs_creds *c);
	void (*free)(struct stfs_creds *c);
};

/* ---- signing (http/sigv4.c, with libcrypto's SHA-256 and HMAC) ---------- */

#define STFS_SIGV4_MAX_HEADERS 8

struct stfs_sigv4_hdr {
	const char *name;       /* lowercase */
	const char *value;      /* trimmed */
};

/* One request to sign.  path and query are in their canonical form
 * already (each byte but A-Za-z0-9-._~ percent-encoded, the query's
 * parameters sorted); host and x-amz-date are signed with headers. */
struct stfs_sigv4_req {
	const char *method, *host, *path, *query;
	const struct stfs_sigv4_hdr *headers;
	size_t nheaders;
	const char *payload_hash;       /* hex SHA-256 of the body */
	const char *amzdate;            /* YYYYMMDDTHHMMSSZ */
	const char *access_key, *secret_key, *region, *service;
};

/* The Authorization header's value for r into auth: 0, or -EINVAL when
 * it does not fit (or too many headers), -ENOMEM. */
int stfs_sigv4_sign(const struct stfs_sigv4_req *r, char *auth,
		    size_t authsz);

#endif

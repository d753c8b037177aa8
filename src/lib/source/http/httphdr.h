/*
 * httphdr.h: the HTTP room's own parsing and checking of answers
 * (httphdr.c), for the client (httpc.c, client.c) and the HTTP source
 * (http.c): header lines into a struct stfs_http_resp, the one check of
 * an answer to a range request, and the condition a range request
 * carries.
 */
#ifndef STFS_HTTPHDR_H
#define STFS_HTTPHDR_H

#include <stddef.h>
#include <stdint.h>

#include "http/http.h"

/* What an answer to a range request must be: bytes [off, off + len) of an
 * object of total bytes (UINT64_MAX while opening: then an answer that
 * ends at the object's end is short but fine), of the version seen at
 * open (etag and last_modified: "" or NULL when it had none). */
struct stfs_http_want {
	uint64_t off, len, total;
	const char *etag, *last_modified;
};

/* Take one header line (with or without its CRLF) into r.  A status line
 * ("HTTP/...") starts a new response.  Never fails: what does not parse
 * is left out. */
void stfs_http_header_line(const char *line, size_t len,
			   struct stfs_http_resp *r);
/* Do the headers r of a 206 promise exactly what w wants?  0; -EIO for
 * other bytes, a body coded or an ambiguous answer; -ESTALE for another
 * version (another size, a validator changed or gone).  why says which. */
int stfs_http_answer_check(const struct stfs_http_resp *r,
			   const struct stfs_http_want *w, char *why,
			   size_t whysz);
/* ---- answers kept for offline mounts (kept.c) ---- */

/* r's fields that callers read, and len bytes of body, encoded into *out
 * (malloc'd): 0, or -ENOMEM. */
int stfs_http_kept_encode(const struct stfs_http_resp *r, const char *body,
			  size_t len, char **out, size_t *outlen);
/* n bytes of text (an encoding as above, from the cache: hostile) into r
 * and the offset of its body: 0, or -EINVAL. */
int stfs_http_kept_decode(const char *text, size_t n,
			  struct stfs_http_resp *r, size_t *body_at);
/* The answer kept for url, offline (with etag, it must be that
 * version's), in the trust domain of auth and flags (trust.c: one kept
 * for a request with other credentials, or none, is not this one's): as
 * stfs_http_get() gives one; -ENOENT (not kept), -EIO (it fails its
 * check: logged), -EFBIG (more than max). */
int stfs_http_kept_get(struct stfs_remote *r, const char *url,
		       const struct stfs_auth *auth, unsigned flags,
		       const char *etag, size_t max, char **body,
		       size_t *len, struct stfs_http_resp *resp,
		       struct stfs_error *err);
/* Keep the answer resp, body for url (when there is a cache), in the
 * trust domain of auth and flags. */
void stfs_http_kept_put(struct stfs_remote *r, const char *url,
			const struct stfs_auth *auth, unsigned flags,
			const struct stfs_http_resp *resp, const char *body,
			size_t len);

/* A strong ETag: any but a weak one (W/"..."), which does not promise the
 * same bytes. */
int stfs_http_strong_etag(const char *etag);
/* The header that makes a range request conditional on the version with
 * etag and last_modified: If-Match for a strong, quoted ETag, else
 * If-Unmodified-Since for a Last-Modified; into out (without CRLF):
 * 1, or 0 when there is neither (out is "") or it does not fit. */
int stfs_http_condition(const char *etag, const char *last_modified,
			char *out, size_t outsz);

#endif

/*
 * httphdr.h: the HTTP room's own parsing and checking of answers
 * (httphdr.c), for the client (httpc.c) and the HTTP source (http.c):
 * header lines into a struct stfs_http_resp, the one check of an answer
 * to a range request, and the condition a range request carries.
 */
#ifndef STFS_HTTPHDR_H
#define STFS_HTTPHDR_H

#include <stddef.h>
#include <stdint.h>

#include "remote.h"

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

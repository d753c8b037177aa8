/*
 * s3io.c: the signed S3 requests that `stfs mirror` writes a bucket with
 * (PUT, HEAD, GET, DELETE, and the POSTs of a multipart upload): each
 * signed with AWS Signature Version 4 (http/sigv4.c) over its method,
 * path, query, x-amz-* headers and the SHA-256 of its body, with the
 * keys of the s3:// credential chain (static or refreshed ones), retried
 * on a connection failure or a 5xx.  The mount's reads go through the
 * block engine; these are the writer's alone, one request at a time on
 * the calling thread.
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "format.h"
#include "auth.h"
#include "scheme.h"
#include "mirror/mirror.h"

struct call {
	struct stfs_s3ans *a;
	size_t max;
	int over;
	const char *up;         /* the body to send */
	size_t up_len, up_at;
};

static size_t on_body(char *p, size_t sz, size_t n, void *arg)
{
	struct call *c = arg;
	size_t len = sz * n;
	char *nb;

	if (c->a->len + len > c->max) {
		c->over = 1;
		return len;     /* kept no further; the status still counts */
	}
	if (!(nb = realloc(c->a->body, c->a->len + len + 1)))
		return 0;
	memcpy(nb + c->a->len, p, len);
	c->a->body = nb;
	c->a->len += len;
	nb[c->a->len] = '\0';
	return len;
}

static size_t on_send(char *p, size_t sz, size_t n, void *arg)
{
	struct call *c = arg;
	size_t len = sz * n, left = c->up_len - c->up_at;

	if (len > left)
		len = left;
	memcpy(p, c->up + c->up_at, len);
	c->up_at += len;
	return len;
}

/* The value of header line p (of n bytes) named name, into out. */
static int header(const char *p, size_t n, const char *name, char *out,
		  size_t outsz)
{
	size_t k = strlen(name), v;

	if (n <= k || strncasecmp(p, name, k) || p[k] != ':')
		return 0;
	p += k + 1;
	n -= k + 1;
	while (n && (*p == ' ' || *p == '\t'))
		p++, n--;
	while (n && (p[n - 1] == '\r' || p[n - 1] == '\n' || p[n - 1] == ' '))
		n--;
	v = n < outsz - 1 ? n : outsz - 1;
	memcpy(out, p, v);
	out[v] = '\0';
	return 1;
}

static size_t on_header(char *p, size_t sz, size_t n, void *arg)
{
	struct call *c = arg;
	size_t len = sz * n;
	char num[32];

	if (len > 5 && !strncmp(p, "HTTP/", 5)) {  /* a new answer */
		c->a->etag[0] = c->a->meta_sha256[0] = '\0';
		c->a->has_length = 0;
	}
	header(p, len, "etag", c->a->etag, sizeof(c->a->etag));
	header(p, len, "x-amz-meta-stfs-sha256", c->a->meta_sha256,
	       sizeof(c->a->meta_sha256));
	if (header(p, len, "content-length", num, sizeof(num)) &&
	    strspn(num, "0123456789") == strlen(num) && *num) {
		c->a->length = strtoull(num, NULL, 10);
		c->a->has_length = 1;
	}
	return len;
}

static void hexs(const unsigned char *p, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", p[i]);
}

/* The headers that sign the request and its x-amz-* headers hdrs,
 * appended to *l (http/sigv4.c): 0 or -errno. */
static int sign(const struct stfs_s3io *io, const char *method,
		const char *url, const char *query, const char *const *hdrs,
		size_t nhdrs, const char *payload, struct curl_slist **l,
		struct stfs_error *err)
{
	char why[256] = "";
	int rc = stfs_auth_sign(io->auth, method, url, query, payload, hdrs,
				nhdrs, l, why, sizeof(why));

	if (rc == -EKEYEXPIRED)
		return stfs_fail(err, rc, NULL, STFS_NO_OFFSET, "%s", why);
	if (rc)
		return stfs_fail(err, rc, NULL, STFS_NO_OFFSET, "cannot sign "
				 "the request");
	return 0;
}

/* One attempt: 0 (any status) or -errno with err. */
static int attempt(const struct stfs_s3io *io, const char *method,
		   const char *url, const char *query,
		   const char *const *hdrs, size_t nhdrs, const void *body,
		   size_t blen, const char *payload, size_t max,
		   struct stfs_s3ans *a, struct stfs_error *err)
{
	CURL *h = curl_easy_init();
	struct curl_slist *l = NULL;
	struct call c = { .a = a, .max = max, .up = body, .up_len = blen };
	char cerr[CURL_ERROR_SIZE] = "", *full = NULL;
	CURLcode cc;
	int rc;

	stfs_s3ans_free(a);
	if (!h)
		return stfs_nomem(err);
	if ((rc = sign(io, method, url, query, hdrs, nhdrs, payload, &l, err)))
		goto out;
	l = curl_slist_append(l, "Expect:");
	if (asprintf(&full, "%s%s%s", url, *query ? "?" : "", query) < 0) {
		rc = stfs_nomem(err);
		goto out;
	}
	curl_easy_setopt(h, CURLOPT_URL, full);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, l);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)io->connect_timeout_ms);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME,
			 (long)(io->stall_timeout_ms + 999) / 1000);
	if (io->auth->ca_file)
		curl_easy_setopt(h, CURLOPT_CAINFO, io->auth->ca_file);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &c);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &c);
	if (!strcmp(method, "HEAD")) {
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	} else if (!strcmp(method, "PUT")) {
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, on_send);
		curl_easy_setopt(h, CURLOPT_READDATA, &c);
		curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE,
				 (curl_off_t)blen);
	} else if (!strcmp(method, "POST")) {
		curl_easy_setopt(h, CURLOPT_POST, 1L);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)blen);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, blen ? body : "");
	} else if (strcmp(method, "GET")) {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	}
	cc = curl_easy_perform(h);
	if (cc != CURLE_OK) {
		rc = stfs_fail(err, cc == CURLE_COULDNT_CONNECT ?
			       -ECONNREFUSED : -EIO, NULL, STFS_NO_OFFSET,
			       "%s %s: %s", method, url,
			       *cerr ? cerr : curl_easy_strerror(cc));
		goto out;
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->status);
	if (c.over && a->status / 100 == 2)
		rc = stfs_fail(err, -EFBIG, NULL, STFS_NO_OFFSET, "%s %s: the "
			       "answer is over %zu bytes", method, url, max);
out:
	if (full)
		free(full);
	curl_slist_free_all(l);
	curl_easy_cleanup(h);
	return rc;
}

int stfs_s3io_call(const struct stfs_s3io *io, const char *method,
		   const char *key, const char *query,
		   const char *const *hdrs, size_t nhdrs, const void *body,
		   size_t blen, size_t max, struct stfs_s3ans *a,
		   struct stfs_error *err)
{
	unsigned char d[32];
	char payload[65], *esc = stfs_url_escape_path(key), *url = NULL;
	int rc = 0;

	stfs_s3ans_free(a);     /* a previous answer in it, if any */
	if (!esc || asprintf(&url, "%s%s", io->base, esc) < 0) {
		free(esc);
		return stfs_nomem(err);
	}
	free(esc);
	if (!EVP_Digest(body ? body : "", blen, d, NULL, EVP_sha256(), NULL)) {
		free(url);
		return stfs_nomem(err);
	}
	hexs(d, 32, payload);
	for (unsigned i = 0; i <= io->retries; i++) {
		if (i)
			usleep((useconds_t)(200000u << (i < 5 ? i : 5)));
		rc = attempt(io, method, url, query, hdrs, nhdrs, body, blen,
			     payload, max, a, err);
		if (rc == -ENOMEM || rc == -EKEYEXPIRED || rc == -EFBIG ||
		    (!rc && a->status < 500))
			break;
	}
	free(url);
	return rc;
}

void stfs_s3ans_free(struct stfs_s3ans *a)
{
	free(a->body);
	memset(a, 0, sizeof(*a));
}

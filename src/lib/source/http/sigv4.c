/*
 * sigv4.c: AWS Signature Version 4 for S3 requests, and the credentials a
 * remote source's requests carry (struct stfs_auth: a Hub token, or AWS
 * keys).  The signer is a pure function of the request, the keys and the
 * time, so it is checked against AWS's published examples; the source
 * calls stfs_auth_headers() for every attempt of every request, which
 * signs with the keys of that moment when they are temporary ones that
 * s3/creds.c refreshes (or fails, saying why, once they expired), asked
 * through the functions it gives with them (struct stfs_creds_ops).
 *
 * libcurl's own CURLOPT_AWS_SIGV4 is not used: the libcurl of Debian 12
 * does not send x-amz-content-sha256, which S3 requires, and its
 * canonical form of paths and queries has varied between versions.
 * SHA-256 and HMAC-SHA256 are OpenSSL's (libcrypto, which Debian's
 * libcurl links already).
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth.h"
#include "http/http.h"

/* The SHA-256 of no bytes: a GET has no payload. */
#define EMPTY_SHA256 \
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static int cmp_hdr(const void *a, const void *b)
{
	return strcmp(((const struct stfs_sigv4_hdr *)a)->name,
		      ((const struct stfs_sigv4_hdr *)b)->name);
}

static void hex(const uint8_t *p, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * n] = '\0';
}

/* The hex SHA-256 of the canonical request, hashed as it is written (its
 * n headers h sorted, their names joined by ';' into signed_names). */
static int canonical_hash(const struct stfs_sigv4_req *r,
			  const struct stfs_sigv4_hdr *h, size_t n,
			  const char *signed_names, char out[65])
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	uint8_t sum[32];
	int ok = c && EVP_DigestInit_ex(c, EVP_sha256(), NULL);

#define PUT(s) (ok = ok && EVP_DigestUpdate(c, (s), strlen(s)))
	PUT(r->method); PUT("\n");
	PUT(r->path); PUT("\n");
	PUT(r->query); PUT("\n");
	for (size_t i = 0; i < n; i++) {
		PUT(h[i].name); PUT(":"); PUT(h[i].value); PUT("\n");
	}
	PUT("\n");
	PUT(signed_names); PUT("\n");
	PUT(r->payload_hash);
#undef PUT
	ok = ok && EVP_DigestFinal_ex(c, sum, NULL);
	EVP_MD_CTX_free(c);
	if (!ok)
		return -ENOMEM;
	hex(sum, 32, out);
	return 0;
}

/* out = HMAC-SHA256(key, msg); out may not be key. */
static int hmac(const void *key, size_t klen, const char *msg, size_t mlen,
		uint8_t out[32])
{
	unsigned int n = 32;

	return HMAC(EVP_sha256(), key, (int)klen, (const uint8_t *)msg, mlen,
		    out, &n) && n == 32 ? 0 : -ENOMEM;
}

/* The signature of sts: the key derived from the secret through the day,
 * the region, the service and "aws4_request", applied to sts. */
static int signature(const struct stfs_sigv4_req *r, const char *day,
		     const char *sts, char out[65])
{
	uint8_t k[32], k2[32];
	char *key0 = NULL;
	int rc;

	if (asprintf(&key0, "AWS4%s", r->secret_key) < 0)
		return -ENOMEM;
	rc = hmac(key0, strlen(key0), day, 8, k);
	OPENSSL_cleanse(key0, strlen(key0));
	free(key0);
	if (rc || (rc = hmac(k, 32, r->region, strlen(r->region), k2)) ||
	    (rc = hmac(k2, 32, r->service, strlen(r->service), k)) ||
	    (rc = hmac(k, 32, "aws4_request", 12, k2)) ||
	    (rc = hmac(k2, 32, sts, strlen(sts), k)))
		goto out;
	hex(k, 32, out);
out:
	OPENSSL_cleanse(k, sizeof(k));
	OPENSSL_cleanse(k2, sizeof(k2));
	return rc;
}

int stfs_sigv4_sign(const struct stfs_sigv4_req *r, char *auth,
		    size_t authsz)
{
	struct stfs_sigv4_hdr h[STFS_SIGV4_MAX_HEADERS + 2];
	char day[9], creq[65], sig[65], scope[256], *sts = NULL;
	char signed_names[512] = "";
	size_t n = 0;
	int len, rc;

	if (r->nheaders > STFS_SIGV4_MAX_HEADERS || strlen(r->amzdate) != 16)
		return -EINVAL;
	h[n++] = (struct stfs_sigv4_hdr){ "host", r->host };
	h[n++] = (struct stfs_sigv4_hdr){ "x-amz-date", r->amzdate };
	for (size_t i = 0; i < r->nheaders; i++)
		h[n++] = r->headers[i];
	qsort(h, n, sizeof(*h), cmp_hdr);
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(signed_names);

		if (snprintf(signed_names + l, sizeof(signed_names) - l,
			     "%s%s", i ? ";" : "", h[i].name) >=
		    (int)(sizeof(signed_names) - l))
			return -EINVAL;
	}
	if ((rc = canonical_hash(r, h, n, signed_names, creq)))
		return rc;

	memcpy(day, r->amzdate, 8);
	day[8] = '\0';
	if (snprintf(scope, sizeof(scope), "%s/%s/%s/aws4_request", day,
		     r->region, r->service) >= (int)sizeof(scope))
		return -EINVAL;
	if (asprintf(&sts, "AWS4-HMAC-SHA256\n%s\n%s\n%s", r->amzdate, scope,
		     creq) < 0)
		return -ENOMEM;
	rc = signature(r, day, sts, sig);
	free(sts);
	if (rc)
		return rc;
	len = snprintf(auth, authsz, "AWS4-HMAC-SHA256 Credential=%s/%s, "
		       "SignedHeaders=%s, Signature=%s", r->access_key, scope,
		       signed_names, sig);
	return len < 0 || (size_t)len >= authsz ? -EINVAL : 0;
}

/* ---- the credentials of a source --------------------------------------- */

void stfs_creds_keys_drop(struct stfs_creds_keys *k)
{
	if (k->secret)
		explicit_bzero(k->secret, strlen(k->secret));
	if (k->token)
		explicit_bzero(k->token, strlen(k->token));
	free(k->access);
	free(k->secret);
	free(k->token);
	memset(k, 0, sizeof(*k));
}

struct stfs_auth *stfs_auth_new(const char *bearer, const char *access_key,
				const char *secret_key, const char *token,
				const char *region)
{
	struct stfs_auth *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	atomic_init(&a->refs, 1);
	if ((bearer && !(a->bearer = strdup(bearer))) ||
	    (access_key && !(a->access_key = strdup(access_key))) ||
	    (secret_key && !(a->secret_key = strdup(secret_key))) ||
	    (token && *token && !(a->token = strdup(token))) ||
	    !(a->region = strdup(region ? region : "us-east-1"))) {
		atomic_store(&a->refs, 1);
		stfs_auth_unref(a);
		return NULL;
	}
	a->sign = access_key && secret_key;
	return a;
}

struct stfs_auth *stfs_auth_ref(struct stfs_auth *a)
{
	if (a)
		atomic_fetch_add(&a->refs, 1);
	return a;
}

void stfs_auth_unref(struct stfs_auth *a)
{
	if (!a || atomic_fetch_sub(&a->refs, 1) != 1)
		return;
	if (a->bearer)
		memset(a->bearer, 0, strlen(a->bearer));
	if (a->secret_key)
		memset(a->secret_key, 0, strlen(a->secret_key));
	if (a->password)
		memset(a->password, 0, strlen(a->password));
	if (a->query)
		memset(a->query, 0, strlen(a->query));
	free(a->bearer);
	free(a->user);
	free(a->password);
	free(a->query);
	free(a->access_key);
	free(a->secret_key);
	free(a->token);
	free(a->region);
	free(a->ca_file);
	if (a->creds)
		a->creds_ops->free(a->creds);
	free(a);
}

void stfs_auth_park(struct stfs_auth *a)
{
	if (a && a->creds)
		a->creds_ops->park(a->creds);
}

/* The keys of now into k: a's own, or (a->creds) the current ones of its
 * refreshing credentials (copies: dropped by the caller).  0, or
 * -EKEYEXPIRED with why. */
static int keys_now(const struct stfs_auth *a, struct stfs_creds_keys *k,
		    char *why, size_t whysz)
{
	char tmp[8];

	if (!a->creds) {
		k->access = a->access_key;
		k->secret = a->secret_key;
		k->token = a->token;
		return 0;
	}
	if (a->creds_ops->now(a->creds, k, why ? why : tmp,
			      why ? whysz : sizeof(tmp)))
		return -EKEYEXPIRED;
	return 0;
}

/* Append line to *l, its copy wiped: 0 or -ENOMEM. */
static int add_line(struct curl_slist **l, const char *name,
		    const char *value)
{
	struct curl_slist *nl = NULL;
	char *line;

	if (asprintf(&line, "%s: %s", name, value) < 0)
		return -ENOMEM;
	nl = curl_slist_append(*l, line);
	OPENSSL_cleanse(line, strlen(line));
	free(line);
	if (!nl)
		return -ENOMEM;
	*l = nl;
	return 0;
}

/* The x-amz-* header lines "name: value" of hdrs into hs[*n] (their names
 * copied into names[]): 0, or -EINVAL (not a header line, too many). */
static int extra_headers(const char *const *hdrs, size_t nhdrs,
			 struct stfs_sigv4_hdr *hs, char names[][64],
			 size_t *n)
{
	for (size_t i = 0; i < nhdrs; i++) {
		const char *colon = strchr(hdrs[i], ':');
		size_t nl = colon ? (size_t)(colon - hdrs[i]) : 0;

		if (!colon || nl >= 64 || *n == STFS_SIGV4_MAX_HEADERS)
			return -EINVAL;
		memcpy(names[*n], hdrs[i], nl);
		names[*n][nl] = '\0';
		hs[*n] = (struct stfs_sigv4_hdr){ names[*n], colon + 1 +
						  strspn(colon + 1, " ") };
		(*n)++;
	}
	return 0;
}

int stfs_auth_sign(const struct stfs_auth *a, const char *method,
		   const char *url, const char *query, const char *payload,
		   const char *const *hdrs, size_t nhdrs,
		   struct curl_slist **l, char *why, size_t whysz)
{
	struct stfs_creds_keys k = { 0 };
	CURLU *u = curl_url();
	char *host = NULL, *port = NULL, *path = NULL, *uq = NULL;
	char hostport[300], amzdate[17], auth[1024];
	char names[STFS_SIGV4_MAX_HEADERS][64];
	struct stfs_sigv4_hdr hs[STFS_SIGV4_MAX_HEADERS];
	struct stfs_sigv4_req r;
	time_t now = time(NULL);
	struct tm tm;
	size_t n = 0;
	int rc;

	if ((rc = keys_now(a, &k, why, whysz)))
		goto out;
	rc = -ENOMEM;
	if (!u || curl_url_set(u, CURLUPART_URL, url, 0) ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) ||
	    curl_url_get(u, CURLUPART_PATH, &path, 0))
		goto out;
	if (curl_url_get(u, CURLUPART_PORT, &port, 0))
		port = NULL;
	if (!query && curl_url_get(u, CURLUPART_QUERY, &uq, 0))
		uq = NULL;
	snprintf(hostport, sizeof(hostport), "%s%s%s", host, port ? ":" : "",
		 port ? port : "");
	gmtime_r(&now, &tm);
	strftime(amzdate, sizeof(amzdate), "%Y%m%dT%H%M%SZ", &tm);
	hs[n++] = (struct stfs_sigv4_hdr){ "x-amz-content-sha256", payload };
	if (k.token)
		hs[n++] = (struct stfs_sigv4_hdr){ "x-amz-security-token",
						   k.token };
	/* the x-amz-* headers the caller sends: AWS wants all signed */
	if ((rc = extra_headers(hdrs, nhdrs, hs, names, &n)))
		goto out;
	r = (struct stfs_sigv4_req){
		.method = method, .host = hostport, .path = path,
		.query = query ? query : uq ? uq : "", .headers = hs,
		.nheaders = n, .payload_hash = payload, .amzdate = amzdate,
		.access_key = k.access, .secret_key = k.secret,
		.region = a->region, .service = "s3",
	};
	if ((rc = stfs_sigv4_sign(&r, auth, sizeof(auth))) ||
	    (rc = add_line(l, "x-amz-date", amzdate)) ||
	    (rc = add_line(l, "x-amz-content-sha256", payload)) ||
	    (k.token && (rc = add_line(l, "x-amz-security-token", k.token))))
		goto out;
	for (size_t i = 0; i < nhdrs; i++) {
		struct curl_slist *nl = curl_slist_append(*l, hdrs[i]);

		if (!nl) {
			rc = -ENOMEM;
			goto out;
		}
		*l = nl;
	}
	rc = add_line(l, "Authorization", auth);
out:
	curl_free(host);
	curl_free(port);
	curl_free(path);
	curl_free(uq);
	curl_url_cleanup(u);
	OPENSSL_cleanse(auth, sizeof(auth));
	if (a->creds)
		stfs_creds_keys_drop(&k);
	return rc;
}

struct curl_slist *stfs_auth_headers(const struct stfs_auth *a,
				     const char *url, unsigned flags,
				     struct curl_slist *list, int *ok,
				     char *why, size_t whysz)
{
	static const char *const checksums[] = {
		"x-amz-checksum-mode: ENABLED" };

	*ok = !stfs_auth_sign(a, "GET", url, NULL, EMPTY_SHA256, checksums,
			      flags & STFS_REQ_CHECKSUMS ? 1 : 0, &list, why,
			      whysz);
	return list;
}

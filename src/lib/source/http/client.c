/*
 * client.c: the HTTP client object (struct stfs_http_client, http.h) and
 * its synchronous requests: the environment's trust and credentials read
 * once at init (CURL_CA_BUNDLE or SSL_CERT_FILE, SSL_CERT_DIR, NETRC), the
 * pool of idle easy handles with their connections, stfs_http_get() (an
 * API answer, kept for offline mounts when asked) and stfs_http_call() (a
 * call of a credential service).  Each request itself, its checks and
 * retries, is httpc.c's.
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "engine.h"
#include "http/http.h"
#include "httphdr.h"

/* A copy of the environment variable name, NULL when unset or empty: 0,
 * or -ENOMEM. */
static int env_copy(const char *name, char **out)
{
	const char *v = stfs_env(name);

	*out = v ? strdup(v) : NULL;
	return v && !*out ? -ENOMEM : 0;
}

int stfs_httpc_init(struct stfs_http_client *c,
		    const struct stfs_remote_opts *o,
		    struct stfs_remote_counters *count)
{
	c->ca_file = c->ca_dir = c->netrc = NULL;
	if (env_copy(stfs_env("CURL_CA_BUNDLE") ? "CURL_CA_BUNDLE" :
		     "SSL_CERT_FILE", &c->ca_file) ||
	    env_copy("SSL_CERT_DIR", &c->ca_dir) ||
	    env_copy("NETRC", &c->netrc)) {
		free(c->ca_file);
		free(c->ca_dir);
		return -ENOMEM;
	}
	c->o = o;
	c->count = count;
	c->nidle = 0;
	pthread_mutex_init(&c->idle_mu, NULL);
	atomic_init(&c->jitter, (unsigned)time(NULL) ^ (unsigned)getpid() ^
		    (unsigned)(uintptr_t)c);
	stfs_transfers_init(&c->transfers);
	return 0;
}

CURL *stfs_httpc_handle(struct stfs_http_client *c)
{
	CURL *h = NULL;

	pthread_mutex_lock(&c->idle_mu);
	if (c->nidle)
		h = c->idle[--c->nidle];
	pthread_mutex_unlock(&c->idle_mu);
	return h ? h : curl_easy_init();
}

void stfs_httpc_release(struct stfs_http_client *c, CURL *h)
{
	pthread_mutex_lock(&c->idle_mu);
	if (h && c->nidle < STFS_IDLE_MAX) {
		c->idle[c->nidle++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&c->idle_mu);
	curl_easy_cleanup(h);
}

void stfs_httpc_fini(struct stfs_http_client *c)
{
	stfs_transfers_fini(&c->transfers);
	while (c->nidle)
		curl_easy_cleanup(c->idle[--c->nidle]);
	pthread_mutex_destroy(&c->idle_mu);
	free(c->ca_file);
	free(c->ca_dir);
	free(c->netrc);
}

int stfs_http_get(struct stfs_remote *r, const char *url,
		  const struct stfs_auth *auth, unsigned flags,
		  const char *etag, size_t max, char **body, size_t *len,
		  struct stfs_http_resp *resp, struct stfs_error *err)
{
	struct stfs_request q = { .url = url, .etag = etag, .auth = auth,
				  .len = max, .want_total = UINT64_MAX,
				  .whole = 1, .flags = flags };
	CURL *h;
	int rc;

	struct stfs_http_resp mine;

	*body = NULL;
	*len = 0;
	/* offline: not one request; what was kept, if it was */
	if (r->o.offline)
		return flags & STFS_REQ_KEEP ?
		       stfs_http_kept_get(r, url, auth, flags, etag, max,
					  body, len, resp, err) :
		       stfs_fail(err, -ENOENT, NULL, STFS_NO_OFFSET, "offline");
	if (!(h = stfs_httpc_handle(r->http)))
		return stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET,
				 "out of memory");
	if (!resp)
		resp = &mine;
	rc = stfs_httpc_fetch(r->http, h, &q, NULL, body, len, resp, err);
	stfs_httpc_release(r->http, h);
	if (!rc && (flags & STFS_REQ_KEEP) && resp->status == 200)
		stfs_http_kept_put(r, url, auth, flags, resp, *body, *len);
	return rc;
}

int stfs_http_call(struct stfs_http_client *c, const char *method,
		   const char *url, const char *const *headers,
		   size_t nheaders, const char *post, size_t post_len,
		   unsigned flags, size_t max, char **body, size_t *len,
		   struct stfs_error *err)
{
	struct stfs_request q = { .url = url, .len = max,
				  .want_total = UINT64_MAX, .whole = 1,
				  .flags = flags | STFS_REQ_NOFOLLOW |
					   STFS_REQ_NONETRC };
	struct stfs_http_extra ex = { .method = method, .headers = headers,
				      .nheaders = nheaders, .post = post,
				      .post_len = post_len };
	struct stfs_http_resp *r = malloc(sizeof(*r));
	CURL *h;
	int rc;

	*body = NULL;
	*len = 0;
	if (!r || !(h = stfs_httpc_handle(c))) {
		free(r);
		return stfs_nomem(err);
	}
	rc = stfs_httpc_fetch_ex(c, h, &q, &ex, NULL, body, len, r, err);
	stfs_httpc_release(c, h);
	if (rc == STFS_HTTP_REDIRECT)
		rc = stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "HTTP %ld: a "
			       "redirect, refused (a credential service is "
			       "asked at its own address only)", r->status);
	free(r);
	return rc;
}

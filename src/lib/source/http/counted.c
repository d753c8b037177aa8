/*
 * counted.c: each attempt of an HTTP request counted into its client's
 * owner's counters (metrics.h): what it was for (a range of an object,
 * a request to a URL answered with a redirect, a HEAD, a listing or other call of
 * a service's API, a credential service's call), its answer's status
 * class, the body bytes it got, and for a range its time to first byte.
 */
#include <string.h>

#include "engine.h"
#include "metrics.h"
#include "http/http.h"

/* One attempt of q, answered status with got bytes, into the owner's
 * counters (metrics.h), by what it was for. */
void stfs_httpc_counted(struct stfs_http_client *c, CURL *h,
			const struct stfs_request *q, const char *method,
			long status, size_t got, unsigned attempt)
{
	curl_off_t first_us = 0;
	enum stfs_m_kind kind =
		c->o->credentials ? STFS_KIND_CREDENTIALS :
		/* the object's own URL: a resolve if it redirects, else
		 * the range it asked for */
		(q->flags & STFS_REQ_RESOLVE) && status >= 300 &&
		status < 400 ? STFS_KIND_RESOLVE :
		method && !strcmp(method, "HEAD") ? STFS_KIND_HEAD :
		q->whole ? STFS_KIND_LIST : STFS_KIND_RANGE;

	if (!c->o->metrics)
		return;
	if (kind == STFS_KIND_RANGE &&
	    curl_easy_getinfo(h, CURLINFO_STARTTRANSFER_TIME_T, &first_us) !=
	    CURLE_OK)
		first_us = 0;
	stfs_m_request(c->o->metrics, kind, q->flags & STFS_REQ_MIRROR ?
		       STFS_TIER_MIRROR : STFS_TIER_ORIGIN, status, got,
		       (uint64_t)first_us * 1000, attempt > 0);
}


/*
 * resolve.c: redirects followed once per object, not once per request.
 *
 * A URL that redirects (the Hub's /resolve/SHA/FILE to its CDN, a short
 * link to a presigned URL) is asked once: the redirect's target is kept
 * and every range request goes straight to it, while it is valid.  A
 * target that says when it expires (X-Amz-Date + X-Amz-Expires,
 * X-Goog-Date + X-Goog-Expires, Expires=) is resolved again shortly
 * before (a fifth of its lifetime, at most 60 s, ahead); one that does not
 * after STFS_TARGET_DEFAULT_S.  A target that refuses a request (403,
 * 404, 410: it expired, or was revoked) is resolved again once and the
 * request retried, unseen by the reader; two targets refused in a row
 * make reads fail (EACCES) for QUIET_MS without asking again.  Threads
 * that find the target stale wait for the one resolving (or keep using
 * the old target while it is still valid), so an expiry costs one
 * request to the URL, whatever the number of connections.
 *
 * The Hub's headers on the redirect (X-Linked-Etag, X-Linked-Size,
 * X-Repo-Commit) are the object's identity: a later resolve that names
 * another object makes the object changed (ESTALE, EIO to readers); the
 * target's own answers are checked as any (size, ETag).  Credentials
 * (the Hub's token, a user and password, a presigned query) go to the
 * URL's own origin (scheme, host and port) only, never to a target
 * elsewhere; TLS trust settings go everywhere.
 *
 * A 429 while resolving is waited out as the server says (Retry-After,
 * else RateLimit's t; at most 30 s a wait, at most `retries` waits for a
 * read) and logged once with its numbers.  Once a read has spent those
 * waits, reads that need a new target fail at once until the time the
 * server gave has passed; then one request is tried.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "format.h"
#include "engine.h"
#include "http/http.h"

enum { RV_UNKNOWN, RV_DIRECT, RV_TARGET, RV_CHANGED };

#define MAX_HOPS 5
#define WAIT_MAX_S 30
#define QUIET_MS 5000                   /* after two targets refused */
#define LIFETIME_MAX (10ll * 365 * 86400)

/* ---- what a URL says ---------------------------------------------------- */

/* The value of query parameter name (any case) of url: 0, or -1. */
static int param(const char *url, const char *name, const char **v,
		 size_t *vlen)
{
	const char *q = strchr(url, '?'), *end, *p;
	size_t n = strlen(name);

	if (!q)
		return -1;
	end = q + 1 + strcspn(q + 1, "#");
	for (p = q + 1; p < end;) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		const char *e = amp ? amp : end;

		if ((size_t)(e - p) > n && p[n] == '=' &&
		    strncasecmp(p, name, n) == 0) {
			*v = p + n + 1;
			*vlen = (size_t)(e - *v);
			return 0;
		}
		p = amp ? amp + 1 : end;
	}
	return -1;
}

/* A number of at most 12 digits, nothing else: 0, or -1. */
static int number(const char *v, size_t len, long long *out)
{
	long long x = 0;

	if (!len || len > 12)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (!isdigit((unsigned char)v[i]))
			return -1;
		x = x * 10 + (v[i] - '0');
	}
	*out = x;
	return 0;
}

/* YYYYMMDDTHHMMSSZ (SigV4's dates) as a Unix time: 0, or -1. */
static int basic_date(const char *v, size_t len, long long *out)
{
	struct tm tm = { 0 };
	long long f[6];
	static const unsigned at[6] = { 0, 4, 6, 9, 11, 13 },
			      width[6] = { 4, 2, 2, 2, 2, 2 };
	time_t t;

	if (len != 16 || v[8] != 'T' || v[15] != 'Z')
		return -1;
	for (unsigned i = 0; i < 6; i++)
		if (number(v + at[i], width[i], &f[i]))
			return -1;
	if (f[0] < 1970 || f[1] < 1 || f[1] > 12 || f[2] < 1 || f[2] > 31 ||
	    f[3] > 23 || f[4] > 59 || f[5] > 60)
		return -1;
	tm.tm_year = (int)f[0] - 1900;
	tm.tm_mon = (int)f[1] - 1;
	tm.tm_mday = (int)f[2];
	tm.tm_hour = (int)f[3];
	tm.tm_min = (int)f[4];
	tm.tm_sec = (int)f[5];
	if ((t = timegm(&tm)) == (time_t)-1)
		return -1;
	*out = (long long)t;
	return 0;
}

/* DATE + EXPIRES, both parameters of url: 0, or -1. */
static int dated(const char *url, const char *date, const char *expires,
		 long long *when)
{
	const char *v;
	size_t n;
	long long d, e;

	if (param(url, date, &v, &n) || basic_date(v, n, &d) ||
	    param(url, expires, &v, &n) || number(v, n, &e) ||
	    e > LIFETIME_MAX)
		return -1;
	*when = d + e;
	return 0;
}

int stfs_url_expiry(const char *url, time_t *when)
{
	const char *v;
	size_t n;
	long long t;

	if (dated(url, "X-Amz-Date", "X-Amz-Expires", &t) &&
	    dated(url, "X-Goog-Date", "X-Goog-Expires", &t) &&
	    (param(url, "Expires", &v, &n) || number(v, n, &t)))
		return -ENOENT;
	*when = (time_t)t;
	return 0;
}

/* The origin of an http(s) URL: scheme, host (any case) and port (the
 * scheme's default if none). */
struct origin {
	int https;
	const char *host;
	size_t hlen;
	long port;
};

static int origin_of(const char *url, struct origin *o)
{
	const char *a, *end, *at, *colon = NULL;
	long long port;

	if (!strncasecmp(url, "https://", 8))
		o->https = 1;
	else if (!strncasecmp(url, "http://", 7))
		o->https = 0;
	else
		return -1;
	a = url + (o->https ? 8 : 7);
	end = a + strcspn(a, "/?#");
	if ((at = memrchr(a, '@', (size_t)(end - a))))
		a = at + 1;
	if (a < end && *a == '[') {             /* [IPv6] */
		const char *rb = memchr(a, ']', (size_t)(end - a));

		if (!rb)
			return -1;
		if (rb + 1 < end)
			colon = rb + 1;
	} else {
		colon = memchr(a, ':', (size_t)(end - a));
	}
	o->host = a;
	o->hlen = (size_t)((colon ? colon : end) - a);
	o->port = o->https ? 443 : 80;
	if (colon) {
		if (*colon != ':' ||
		    number(colon + 1, (size_t)(end - colon - 1), &port) ||
		    port > 65535)
			return -1;
		o->port = (long)port;
	}
	return o->hlen ? 0 : -1;
}

static int same_origin(const char *a, const char *b)
{
	struct origin x, y;

	return !origin_of(a, &x) && !origin_of(b, &y) && x.https == y.https &&
	       x.port == y.port && x.hlen == y.hlen &&
	       strncasecmp(x.host, y.host, x.hlen) == 0;
}

/* ---- the resolver --------------------------------------------------------- */

void stfs_resolver_init(struct stfs_resolver *rv)
{
	memset(rv, 0, sizeof(*rv));
	atomic_init(&rv->worked_gen, 0);
	pthread_mutex_init(&rv->mu, NULL);
	pthread_cond_init(&rv->cv, NULL);
}

void stfs_resolver_fini(struct stfs_resolver *rv)
{
	if (rv->target)
		memset(rv->target, 0, strlen(rv->target));
	free(rv->target);
	stfs_auth_unref(rv->tauth);
	pthread_cond_destroy(&rv->cv);
	pthread_mutex_destroy(&rv->mu);
}

static int64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Where one request goes: url (a copy of the target) with auth, or o's
 * own URL (url NULL); resolve: this thread asks o's URL for a target. */
struct target {
	char *url;
	struct stfs_auth *auth;
	unsigned gen;
	int resolve;
};

static void release(struct target *t)
{
	if (t->url)
		memset(t->url, 0, strlen(t->url));
	free(t->url);
	stfs_auth_unref(t->auth);
	*t = (struct target){ 0 };
}

/* Under rv->mu: t gets the current target (0, or -ENOMEM). */
static int current(struct stfs_resolver *rv, struct target *t)
{
	if (!(t->url = strdup(rv->target)))
		return -ENOMEM;
	t->auth = stfs_auth_ref(rv->tauth);
	t->gen = rv->gen;
	return 0;
}

/* Where the next request for o goes (see struct target); waits while
 * another thread resolves and the old target is no use. */
static int take(struct stfs_object *o, const struct stfs_request *q,
		struct target *t, struct stfs_error *err)
{
	struct stfs_resolver *rv = o->rv;
	int rc = 0;

	pthread_mutex_lock(&rv->mu);
	for (;;) {
		int64_t now = now_ms();
		struct timespec until;

		if (rv->state == RV_CHANGED) {
			rc = stfs_fail(err, -ESTALE, NULL, STFS_NO_OFFSET,
				       "the object changed: its URL now "
				       "redirects to another object");
			break;
		}
		if (rv->state == RV_DIRECT)
			break;
		if (rv->state == RV_TARGET && (now < rv->refresh_at ||
					       (rv->resolving &&
						now < rv->valid_until))) {
			rc = current(rv, t) ? stfs_fail(err, -ENOMEM, NULL,
				STFS_NO_OFFSET, "out of memory") : 0;
			break;
		}
		if (!rv->resolving && now < rv->quiet_until) {
			rc = stfs_fail(err, rv->quiet_code, NULL,
				       STFS_NO_OFFSET, "%s; not asking again "
				       "for %lld s", rv->quiet_code == -EIO ?
				       "rate-limited (HTTP 429)" : "the "
				       "targets its URL redirects to refuse "
				       "it", (long long)((rv->quiet_until -
							  now + 999) / 1000));
			break;
		}
		if (!rv->resolving) {
			rv->resolving = 1;
			t->resolve = 1;
			break;
		}
		if (q->cancel && atomic_load(q->cancel)) {
			rc = stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET,
				       "closed while reading");
			break;
		}
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 1;
		pthread_cond_timedwait(&rv->cv, &rv->mu, &until);
	}
	pthread_mutex_unlock(&rv->mu);
	return rc;
}

/* The target t used was refused: resolve again (once per target).  A
 * target refused before it ever answered, right after another refused,
 * is the second in a row: no more resolves for QUIET_MS. */
static void stale(struct stfs_resolver *rv, const struct target *t)
{
	pthread_mutex_lock(&rv->mu);
	if (rv->gen == t->gen && rv->state == RV_TARGET &&
	    rv->refused_gen != t->gen) {
		rv->refresh_at = rv->valid_until = 0;
		if (rv->refused_gen && rv->refused_gen == t->gen - 1 &&
		    atomic_load(&rv->worked_gen) != t->gen) {
			rv->quiet_until = now_ms() + QUIET_MS;
			rv->quiet_code = -EACCES;
		}
		rv->refused_gen = t->gen;
	}
	pthread_mutex_unlock(&rv->mu);
}

/* What requests to a target carry (*out, NULL for nothing): the TLS
 * trust of a; its token, user and password only on a's own origin
 * (same); never a's query (a presigned URL's, for a's URL alone).  0, or
 * -ENOMEM. */
static int creds_for(const struct stfs_auth *a, int same,
		     struct stfs_auth **out)
{
	struct stfs_auth *n;

	*out = NULL;
	if (!a || (!a->ca_file && (!same || (!a->bearer && !a->user))))
		return 0;
	if (!(n = stfs_auth_new(same ? a->bearer : NULL, NULL, NULL, NULL,
				NULL)) ||
	    (a->ca_file && !(n->ca_file = strdup(a->ca_file))) ||
	    (same && a->user && !(n->user = strdup(a->user))) ||
	    (same && a->password && !(n->password = strdup(a->password)))) {
		stfs_auth_unref(n);
		return -ENOMEM;
	}
	*out = n;
	return 0;
}

/* Under rv->mu: a new target (the redirect of o's URL, or a hop after
 * it): its credentials and when it expires.  0, or -ENOMEM. */
static int set_target(struct stfs_object *o, const char *url)
{
	struct stfs_resolver *rv = o->rv;
	struct stfs_auth *a = NULL;
	char *copy = strdup(url);
	int64_t now = now_ms(), life;
	time_t exp;

	if (!copy || creds_for(o->auth, same_origin(o->url, url), &a)) {
		free(copy);
		return -ENOMEM;
	}
	if (rv->target)
		memset(rv->target, 0, strlen(rv->target));
	free(rv->target);
	stfs_auth_unref(rv->tauth);
	rv->target = copy;
	rv->tauth = a;
	rv->gen++;
	rv->state = RV_TARGET;
	/* an expiry already past (a clock apart from the server's) is
	 * no guide: the target's own refusal will tell */
	if (stfs_url_expiry(url, &exp) == 0 && (int64_t)exp * 1000 > now) {
		life = (int64_t)exp * 1000 - now;
		rv->valid_until = (int64_t)exp * 1000;
		rv->refresh_at = rv->valid_until -
				 (life / 5 < 60000 ? life / 5 : 60000);
	} else {
		rv->refresh_at = rv->valid_until =
			now + STFS_TARGET_DEFAULT_S * 1000ll;
	}
	return 0;
}

/* Under rv->mu: the redirect r is of the object the first one was of
 * (the Hub's headers, when it sends them): 0, or -ESTALE (err says). */
static int same_object(struct stfs_object *o, const struct stfs_http_resp *r,
		       struct stfs_error *err)
{
	struct stfs_resolver *rv = o->rv;

	if (!rv->gen || (!rv->linked_etag[0] && !rv->commit[0] &&
			 !rv->has_linked_size)) {   /* the first: the identity */
		memcpy(rv->linked_etag, r->linked_etag,
		       sizeof(rv->linked_etag));
		memcpy(rv->commit, r->commit, sizeof(rv->commit));
		rv->has_linked_size = r->has_linked_size;
		rv->linked_size = r->linked_size;
		return 0;
	}
	if (strcmp(rv->linked_etag, r->linked_etag) != 0 ||
	    strcmp(rv->commit, r->commit) != 0 ||
	    rv->has_linked_size != r->has_linked_size ||
	    rv->linked_size != r->linked_size) {
		rv->state = RV_CHANGED;
		return stfs_fail(err, -ESTALE, NULL, STFS_NO_OFFSET, "the "
				 "object changed: its URL now redirects to "
				 "another object (X-Linked-Etag %s, size %llu;"
				 " was %s, size %llu)",
				 r->linked_etag[0] ? r->linked_etag : "none",
				 (unsigned long long)r->linked_size,
				 rv->linked_etag[0] ? rv->linked_etag : "none",
				 (unsigned long long)rv->linked_size);
	}
	return 0;
}

/* A 429 answered r while resolving: log it once an episode, and wait as
 * the server says if this read may still (1), or give up (0). */
static int rate_limited(struct stfs_object *o, const struct stfs_request *q,
			const struct stfs_http_resp *r, unsigned *waits)
{
	struct stfs_resolver *rv = o->rv;
	unsigned s = r->retry_after_s ? r->retry_after_s :
		     r->ratelimit_t ? r->ratelimit_t : 1;
	unsigned retries = o->r->o.retries;
	int first, may;
	char line[768];

	if (s > WAIT_MAX_S)
		s = WAIT_MAX_S;
	o->r->count.rate_limited++;
	pthread_mutex_lock(&rv->mu);
	first = !rv->logged;
	rv->logged = 1;
	may = !rv->limited && *waits < retries;
	if (!may) {
		rv->limited = 1;
		rv->quiet_until = now_ms() + s * 1000ll;
		rv->quiet_code = -EIO;
	}
	pthread_mutex_unlock(&rv->mu);
	if (first) {
		char said[sizeof(r->ratelimit)];

		/* (the server's header, made plain text) */
		snprintf(said, sizeof(said), "%s", r->ratelimit[0] ?
			 r->ratelimit : "none");
		stfs_text_clean(said);
		snprintf(line, sizeof(line), "stfs: %s: rate-limited (HTTP "
			 "429, RateLimit: %s, Retry-After: %u): waiting %u s, "
			 "at most %u times (%u s) for a read", o->url, said,
			 r->retry_after_s, s, retries, retries * s);
		stfs_remote_log(o->r, line);
	}
	if (!may || stfs_nap(s * 1000u, q->cancel))
		return 0;
	++*waits;
	return 1;
}

/* Ask o's URL itself (this thread resolves): q as is, redirects not
 * followed.  A redirect sets the target (t gets it); a direct answer is
 * the request's (t->url stays NULL, and o's URL is read from now on). */
static int resolve(struct stfs_object *o, CURL *h,
		   const struct stfs_request *q, char *buf, size_t *got,
		   struct stfs_http_resp *r, struct target *t,
		   struct stfs_error *err)
{
	struct stfs_resolver *rv = o->rv;
	struct stfs_request q2 = *q;
	unsigned waits = 0;
	int rc;

	q2.url = o->url;
	q2.auth = o->auth;
	q2.flags |= STFS_REQ_NOFOLLOW | STFS_REQ_NO429 | STFS_REQ_RESOLVE;
	do {
		o->r->count.resolves++;
		r->status = 0;
		rc = stfs_httpc_fetch(o->r->http, h, &q2, buf, NULL, got, r,
				      err);
	} while (rc < 0 && r->status == 429 &&
		 rate_limited(o, q, r, &waits));
	if (rc < 0 && r->status == 429)
		rc = stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "rate-limited "
			       "(HTTP 429) after %u waits; not asking again "
			       "for %u s", waits, r->retry_after_s ?
			       r->retry_after_s : r->ratelimit_t);
	pthread_mutex_lock(&rv->mu);
	rv->resolving = 0;
	if (rc == STFS_HTTP_REDIRECT) {
		rc = (same_object(o, r, err) ? -ESTALE :
		      set_target(o, r->location) ? -ENOMEM :
		      current(rv, t) ? -ENOMEM : 0);
		if (rc == -ENOMEM)
			stfs_fail(err, rc, NULL, STFS_NO_OFFSET,
				  "out of memory");
	} else if (rc == 0) {
		rv->state = RV_DIRECT;
	}
	if (rc == 0)
		rv->limited = rv->logged = 0;
	pthread_cond_broadcast(&rv->cv);
	pthread_mutex_unlock(&rv->mu);
	return rc;
}

/* The request to t (or to o's URL, if direct) redirected on, to url:
 * that is the target now.  Counted as a resolve when o's URL did it. */
static int hop(struct stfs_object *o, const struct target *t,
	       const char *url)
{
	struct stfs_resolver *rv = o->rv;
	int rc = 0;

	pthread_mutex_lock(&rv->mu);
	if (!t->url)
		o->r->count.resolves++;
	if ((!t->url && rv->state == RV_DIRECT) ||
	    (t->url && rv->gen == t->gen && rv->state == RV_TARGET))
		rc = set_target(o, url);
	pthread_cond_broadcast(&rv->cv);
	pthread_mutex_unlock(&rv->mu);
	return rc;
}

int stfs_object_fetch(struct stfs_object *o, CURL *h,
		      const struct stfs_request *q, char *buf, size_t *got,
		      struct stfs_http_resp *resp, struct stfs_error *err)
{
	struct stfs_http_resp *r;
	unsigned hops = 0, refused = 0;
	int rc;

	if (!o->rv)             /* a signed source: no redirect to follow */
		return stfs_httpc_fetch(o->r->http, h, q, buf, NULL, got,
					resp, err);
	if (!(r = resp ? resp : malloc(sizeof(*r))))
		return stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET,
				 "out of memory");
	for (;;) {
		struct target t = { 0 };
		struct stfs_request q2 = *q;

		if ((rc = take(o, q, &t, err)))
			break;
		if (t.resolve && ((rc = resolve(o, h, q, buf, got, r, &t,
						err)) || !t.url))
			break;          /* failed, or answered directly */
		q2.url = t.url ? t.url : o->url;
		q2.auth = t.url ? t.auth : o->auth;
		q2.flags |= STFS_REQ_NOFOLLOW;
		rc = stfs_httpc_fetch(o->r->http, h, &q2, buf, NULL, got, r,
				      err);
		if (rc == STFS_HTTP_REDIRECT) {
			rc = ++hops > MAX_HOPS ?
			     stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "more "
				       "than %d redirects", MAX_HOPS) :
			     hop(o, &t, r->location) ?
			     stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET,
				       "out of memory") : 1;
		} else if (t.url && (rc == -EACCES || rc == -ENOENT)) {
			/* expired, revoked: a new target, once */
			stale(o->rv, &t);
			rc = refused++ ? rc : 1;
		} else if (t.url && !rc &&
			   atomic_load(&o->rv->worked_gen) != t.gen) {
			atomic_store(&o->rv->worked_gen, t.gen);
		}
		release(&t);
		if (rc != 1)
			break;
	}
	if (r != resp)
		free(r);
	return rc;
}

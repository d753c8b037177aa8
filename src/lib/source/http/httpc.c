/*
 * httpc.c: the HTTP client of the remote layer: one request (a range of
 * an object, or a whole API answer) with its timeouts, its checks and its
 * retries, written once for every source (plain URLs, the Hub, S3).
 *
 * A range is asked for with If-Match on the strong ETag seen at open
 * (else If-Unmodified-Since on its Last-Modified), and its answer must be
 * a 206 for exactly those bytes of an object of that size and version,
 * every validator seen at open come again unchanged (check_range(), which
 * also lets a reader be answered from the first bytes before the rest
 * have come): a server that ignores ranges, an object that changed, an
 * ambiguous answer, a short or overlong body is an error, never bytes of
 * two versions mixed.  A body that ends early, even cleanly (no
 * Content-Length and the connection closed, or a last chunk), is a cut
 * transfer and retried.
 *
 * Failures that may pass (no connection, a stall, 5xx, 429) are retried
 * with backoff and jitter, honouring Retry-After; then the request fails.
 * 401/403: EACCES, 404/410: ENOENT, no origin: ENETUNREACH.  Connect and stall
 * timeouts bound every attempt (a stall: under min_speed for the stall
 * timeout, so a trickle too), so a request ends in bounded time: at most
 * (retries + 1) x (connect + stall timeout + length / min_speed) plus the
 * backoffs; a reader's request is not retried past its reader's bound
 * (stfs_request's deadline: retries x 30 s from when the read came, so
 * a read that waited in the queue behind others' backoffs waits no
 * longer in all): the last wait is shortened, by half at most, so that
 * the retry (taken to last as long as the attempt before it) ends by
 * then; else the request fails now.  Credentials are never sent to another host on a redirect
 * (libcurl's default, kept), TLS is verified (libcurl's default; trust()
 * reads the usual CA variables), and the usual proxy variables apply
 * (libcurl reads them), except with public_net.  The bytes move on the transfer threads
 * (transfer.c); synchronous requests (opening, headers, API calls) take
 * a handle from a small pool of idle ones, kept with their connections.
 * stfs_http_call() is the one other kind of request: a call of a
 * credential service (STS, IMDS, the container endpoint) with its method,
 * header lines and body, its answer bounded, a redirect refused and no
 * credential of netrc sent.  The client object, its idle handles and
 * those synchronous requests (stfs_http_get(), stfs_http_call()) are
 * client.c's.
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "format.h"
#include "engine.h"
#include "http/http.h"
#include "httphdr.h"

/* libcurl's error buffer, large enough for why a request could not be
 * signed (the credentials expired, and why no refresh worked) */
#define ERRBUF_SIZE (CURL_ERROR_SIZE > 1024 ? CURL_ERROR_SIZE : 1024)

/* One attempt of a request, as its bytes come. */
struct xfer {
	const struct stfs_http_client *c;
	CURL *h;
	struct stfs_transfers *t;
	const struct stfs_request *q;
	const struct stfs_http_extra *ex;   /* or NULL */
	char *buf;
	size_t len, got;
	int whole;                  /* a whole body (200), buf grown to len */
	int overflow;
	int not_partial;            /* a body that is not a 206's: dropped */
	int unsigned_;              /* not sent: it could not be signed */
	struct stfs_net_check net;  /* public_net: why a connection was not */
	char why[4096];             /* the start of an error's body */
	size_t why_len;
	struct stfs_http_resp r;
};

static const char *reason(long status)
{
	switch (status) {
	case 400: return " (Bad Request)";
	case 401: return " (Unauthorized)";
	case 403: return " (Forbidden)";
	case 404: return " (Not Found)";
	case 410: return " (Gone)";
	case 416: return " (Range Not Satisfiable)";
	case 429: return " (Too Many Requests)";
	case 500: return " (Internal Server Error)";
	case 502: return " (Bad Gateway)";
	case 503: return " (Service Unavailable)";
	case 504: return " (Gateway Timeout)";
	default: return "";
	}
}

/*
 * Does a 206 answer r fit request q?  With final, got bytes came and
 * must be exactly the range asked; without, the headers alone must
 * promise it (so that its first bytes may be used before the rest).
 * The headers are checked once, by stfs_http_answer_check() (httphdr.c):
 * the range, the size, an unambiguous answer, the version seen at open.
 * While opening (want_total unknown) a short answer at the object's end
 * is fine, but only once it is complete.  0, or -EIO (another range, an
 * ambiguous answer), -ESTALE (another version) with err filled.
 */
static int check_range(const struct stfs_request *q,
		       const struct stfs_http_resp *r, size_t got, int final,
		       struct stfs_error *err)
{
	const struct stfs_http_want w = { q->off, q->len, q->want_total,
					  q->etag, q->last_modified };
	char why[600];
	int rc;

	if (!final && q->want_total == UINT64_MAX)
		return -EIO;            /* not before its end, while opening */
	if ((rc = stfs_http_answer_check(r, &w, why, sizeof(why))))
		return stfs_fail(err, rc, NULL, STFS_NO_OFFSET, "%s", why);
	if (final && got != r->range_last - r->range_first + 1)
		return stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "the server "
				 "answered bytes %" PRIu64 "-%" PRIu64 " (%zu "
				 "received) for bytes %" PRIu64 "-%" PRIu64,
				 r->range_first, r->range_last, got, q->off,
				 q->off + q->len - 1);
	return 0;
}

/* The answer so far promises exactly the range asked for, of the object
 * and version seen at open: its bytes may be used before the end. */
static int answer_ok(const struct xfer *x)
{
	long status = 0;

	curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
	return status == 206 && !x->q->whole && !x->r.encoded &&
	       check_range(x->q, &x->r, 0, 0, NULL) == 0;
}

/* Tell the request's progress that bytes up to got have come, and wake
 * its fetching thread when someone waits for them (a retry starts over,
 * and is told only past the bytes told before). */
static void told(struct xfer *x)
{
	struct stfs_progress *pr = x->q->progress;

	if (x->got <= atomic_load(&pr->good))
		return;
	atomic_store(&pr->good, x->got);
	if (x->got >= atomic_load(&pr->want)) {
		atomic_store(&pr->want, SIZE_MAX);
		stfs_transfer_wake(x->t, x->h);
	}
}

static size_t on_data(char *p, size_t sz, size_t n, void *ud)
{
	struct xfer *x = ud;
	size_t k = sz * n;
	long status = 0;

	curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
	if (status >= 400) {
		/* an error page: keep its start, it may say why */
		size_t room = sizeof(x->why) - 1 - x->why_len;

		memcpy(x->why + x->why_len, p, k < room ? k : room);
		x->why_len += k < room ? k : room;
		x->why[x->why_len] = '\0';
		if (k < room)
			return k;
		x->not_partial = 1;
		return 0;
	}
	if (status != (x->whole ? 200 : 206)) {
		/* a whole object for a range: stop now */
		x->not_partial = 1;
		return 0;
	}
	if (k > x->len - x->got) {
		x->overflow = 1;
		return 0;               /* more than asked for: stop */
	}
	if (x->whole) {
		char *nb = realloc(x->buf, x->got + k + 1);

		if (!nb) {
			x->overflow = 1;
			return 0;
		}
		x->buf = nb;
	}
	if (x->q->progress) {
		/* readers may be copying [0, good) of the buffer: an answer
		 * (a retry's) is checked before its first byte is kept, and
		 * never writes over those again */
		size_t g = atomic_load(&x->q->progress->good), skip;

		if (!answer_ok(x)) {
			x->not_partial = 1;
			return 0;
		}
		skip = x->got < g ? (g - x->got < k ? g - x->got : k) : 0;
		memcpy(x->buf + x->got + skip, p + skip, k - skip);
	} else {
		memcpy(x->buf + x->got, p, k);
	}
	x->got += k;
	/* counted as they come: conc.c reads the throughput from it */
	x->c->count->bytes += k;
	if (x->q->early &&
	    !atomic_load_explicit(&x->q->early->ready, memory_order_relaxed) &&
	    x->got >= x->q->early->at + x->q->early->len && answer_ok(x)) {
		/* bytes before got are written for good: the fetching
		 * thread answers its reader from them (answer_now()) */
		atomic_store_explicit(&x->q->early->ready, 1,
				      memory_order_release);
		stfs_transfer_wake(x->t, x->h);
	}
	if (x->q->progress)
		told(x);
	return k;
}

/* On the fetching thread, once on_data() found its reader's bytes in. */
static void answer_now(void *arg)
{
	struct xfer *x = arg;
	struct stfs_early *e = x->q->early;

	if (e && !e->done &&
	    atomic_load_explicit(&e->ready, memory_order_acquire)) {
		e->done = 1;
		e->fn(e->arg, x->buf + e->at);
	}
	if (x->q->progress)
		x->q->progress->fn(x->q->progress->arg);
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
	stfs_http_header_line(p, sz * n, &((struct xfer *)ud)->r);
	return sz * n;
}

/* libcurl's progress callback: non-zero aborts the transfer. */
static int on_progress(void *ud, curl_off_t dt, curl_off_t dn,
		       curl_off_t ut, curl_off_t un)
{
	const atomic_int *cancel = ud;

	(void)dt, (void)dn, (void)ut, (void)un;
	return cancel && atomic_load(cancel);
}

/* Why the server refused a request, from what it said: the Hub's
 * X-Error-Message, an S3 error document, or a JSON {"error": ...}. */
static void why(const struct xfer *x, char *out, size_t outsz)
{
	json_object *j, *e;

	out[0] = '\0';
	if (x->r.error_message[0]) {
		snprintf(out, outsz, "%s", x->r.error_message);
	} else if ((!x->c->error_text ||
		    x->c->error_text(x->why, x->why_len, out, outsz)) &&
		   (j = json_tokener_parse(x->why))) {
		if (json_object_is_type(j, json_type_object) &&
		    json_object_object_get_ex(j, "error", &e) &&
		    json_object_is_type(e, json_type_string))
			snprintf(out, outsz, "%s", json_object_get_string(e));
		json_object_put(j);
	}
	/* one plain line: no control of any kind reaches a terminal */
	stfs_text_clean(out);
}

/* The CA certificates that TLS peers are verified against: the source's
 * own (AWS_CA_BUNDLE for S3, REQUESTS_CA_BUNDLE for the Hub), else
 * CURL_CA_BUNDLE or SSL_CERT_FILE and SSL_CERT_DIR as the curl tool and
 * OpenSSL read them, else libcurl's built-in bundle.  libcurl itself
 * reads none of these variables. */
static void trust(CURL *h, const struct stfs_http_client *c,
		  const struct stfs_auth *a)
{
	const char *file = c->ca_file, *dir = c->ca_dir;

	if (a && a->ca_file) {
		file = a->ca_file;
		dir = NULL;
	}
	if (file && *file)
		curl_easy_setopt(h, CURLOPT_CAINFO, file);
	if (dir && *dir)
		curl_easy_setopt(h, CURLOPT_CAPATH, dir);
}

/* What the request carries: If-Match, a signature, credentials, and its
 * URL (with a presigned URL's query).  The headers, or NULL with
 * errbuf set when that failed (*fail). */
static struct curl_slist *request_auth(CURL *h,
				       const struct stfs_http_client *c,
				       const struct stfs_request *q,
				       const struct stfs_http_extra *ex,
				       char *errbuf, int *fail)
{
	const struct stfs_auth *a = q->auth;
	struct curl_slist *hdrs = NULL;
	char cond[300], *full;
	int ok = 1;

	*fail = 0;
	if (stfs_http_condition(q->etag, q->last_modified, cond,
				sizeof(cond)))
		hdrs = curl_slist_append(NULL, cond);
	if (a && a->sign)
		hdrs = stfs_auth_headers(a, q->url, q->flags, hdrs, &ok,
					 errbuf, ERRBUF_SIZE);
	else if (q->flags & STFS_REQ_CHECKSUMS)
		hdrs = curl_slist_append(hdrs, "x-amz-checksum-mode: ENABLED");
	if (!ok) {
		if (!errbuf[0])
			snprintf(errbuf, CURL_ERROR_SIZE, "cannot sign the "
				 "request");
		goto fail;
	}
	for (size_t i = 0; ex && i < ex->nheaders; i++) {
		struct curl_slist *nl = curl_slist_append(hdrs, ex->headers[i]);

		if (!nl) {
			snprintf(errbuf, CURL_ERROR_SIZE, "out of memory");
			goto fail;
		}
		hdrs = nl;
	}
	if (a && a->user) {
		/* like the bearer token: for this URL's host alone */
		curl_easy_setopt(h, CURLOPT_USERNAME, a->user);
		curl_easy_setopt(h, CURLOPT_PASSWORD,
				 a->password ? a->password : "");
	} else if ((!a || (!a->bearer && !a->sign)) &&
		   !(q->flags & STFS_REQ_NONETRC)) {
		/* no credentials of its own: those of ~/.netrc (or $NETRC)
		 * for the host asked, as curl -n, wget and Python do */
		curl_easy_setopt(h, CURLOPT_NETRC, (long)CURL_NETRC_OPTIONAL);
		if (c->netrc)
			curl_easy_setopt(h, CURLOPT_NETRC_FILE, c->netrc);
	}
	if (a && a->bearer) {
		/* libcurl sends it to this URL's host only, never on to
		 * the host a redirect points to */
		curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
		curl_easy_setopt(h, CURLOPT_XOAUTH2_BEARER, a->bearer);
	}
	trust(h, c, a);
	if (a && a->query) {
		if (asprintf(&full, "%s?%s", q->url, a->query) < 0) {
			snprintf(errbuf, CURL_ERROR_SIZE, "out of memory");
			goto fail;
		}
		curl_easy_setopt(h, CURLOPT_URL, full);   /* copied */
		memset(full, 0, strlen(full));
		free(full);
	} else {
		curl_easy_setopt(h, CURLOPT_URL, q->url);
	}
	return hdrs;
fail:
	curl_slist_free_all(hdrs);
	*fail = 1;
	return NULL;
}

/* A redirect's Location (loc, in place) made absolute against url, the
 * URL asked; "" when it is not an http(s) URL then, or too long. */
static void absolute(const char *url, char *loc, size_t locsz)
{
	CURLU *u = curl_url();
	char *out = NULL;

	if (u && loc[0] &&
	    curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
	    curl_url_set(u, CURLUPART_URL, loc, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_URL, &out, 0) == CURLUE_OK &&
	    stfs_is_url(out) && strlen(out) < locsz)
		strcpy(loc, out);
	else
		loc[0] = '\0';
	curl_free(out);
	curl_url_cleanup(u);
}

static CURLcode perform(struct stfs_http_client *c, CURL *h, struct xfer *x,
			long *status, char *errbuf)
{
	const struct stfs_request *q = x->q;
	const struct stfs_remote_opts *o = c->o;
	struct curl_slist *hdrs;
	char range[64];
	CURLcode rc;
	int fail;

	curl_easy_reset(h);
	if (!q->whole) {
		snprintf(range, sizeof(range), "%" PRIu64 "-%" PRIu64, q->off,
			 q->off + q->len - 1);
		curl_easy_setopt(h, CURLOPT_RANGE, range);
	}
	errbuf[0] = '\0';
	hdrs = request_auth(h, c, q, x->ex, errbuf, &fail);
	if (fail) {
		x->unsigned_ = 1;
		return CURLE_OUT_OF_MEMORY;
	}
	if (x->ex && x->ex->method && strcmp(x->ex->method, "GET"))
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, x->ex->method);
	if (x->ex && x->ex->post) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE,
				 (long)x->ex->post_len);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, x->ex->post);
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)o->connect_timeout_ms);
	/* a stall: under min_speed (at least 1 byte/s) on average for the
	 * stall timeout, so a trickle ends as surely as a silence does */
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT,
			 (long)(o->min_speed ? (o->min_speed < LONG_MAX ?
						o->min_speed : LONG_MAX) : 1));
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME,
			 (long)((o->stall_timeout_ms + 999) / 1000));
	/* a signed request is for its host alone; resolve.c follows
	 * redirects itself (NOFOLLOW) */
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION,
			 (q->auth && q->auth->sign) ||
			 (q->flags & STFS_REQ_NOFOLLOW) ? 0L : 1L);
	curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	/* public_net: each address checked as it is connected to (the
	 * host's, a redirect's, every retry's: netpolicy.c) */
	x->net.p = &c->o->net;
	x->net.why[0] = '\0';
	curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION,
			 c->o->net.on ? stfs_net_opensocket : NULL);
	curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA,
			 c->o->net.on ? (void *)&x->net : NULL);
	/* and straight to it: a proxy would connect on to any address it
	 * is asked for, past the check ("": no proxy variable applies) */
	curl_easy_setopt(h, CURLOPT_PROXY, c->o->net.on ? "" : NULL);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "stfs/" STFS_VERSION);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, (void *)q->cancel);
	errbuf[0] = '\0';
	rc = stfs_transfer(&c->transfers, h, answer_now, x);
	*status = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	x->r.status = *status;
	if (*status >= 300 && *status < 400)
		absolute(q->url, x->r.location, sizeof(x->r.location));
	else
		x->r.location[0] = '\0';
	curl_slist_free_all(hdrs);
	return rc;
}

int stfs_nap(unsigned ms, const atomic_int *cancel)
{
	/* by the clock: steps that each sleep a little long (a busy
	 * machine) do not add up past ms */
	uint64_t end = stfs_now_ms() + ms, now;

	while ((now = stfs_now_ms()) < end) {
		uint64_t step = end - now < 100 ? end - now : 100;
		struct timespec t = { 0, (long)step * 1000000L };

		if (cancel && atomic_load(cancel))
			return -1;
		while (nanosleep(&t, &t) < 0 && errno == EINTR)
			;
	}
	return 0;
}

/* Backoff before attempt k (1, 2, ...): 200 ms doubling, at most 5 s,
 * +-50% jitter; a Retry-After (at most 30 s) instead when given. */
static unsigned backoff_ms(struct stfs_http_client *c, unsigned k,
			   unsigned retry_after_s)
{
	unsigned base = 200u << (k > 5 ? 5 : k - 1), x;

	if (retry_after_s)
		return (retry_after_s > STFS_BACKOFF_MAX_S ? STFS_BACKOFF_MAX_S :
			retry_after_s) * 1000u;
	if (base > 5000)
		base = 5000;
	/* a step of a Weyl sequence, mixed (xorshift-multiply) */
	x = atomic_fetch_add(&c->jitter, 0x9e3779b9u);
	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	return base / 2 + x % (base + 1);
}

/* What an attempt's outcome means: 0 (done: the answer is in x), or the
 * error (err filled) and whether it may pass (*again). */
static int judge(const struct xfer *x, CURLcode rc, long status,
		 const char *errbuf, int *again, struct stfs_error *err)
{
	const struct stfs_request *q = x->q;
	char because[600];
	int code;

	*again = 0;
	if (x->unsigned_)               /* the credentials expired */
		return stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "%s",
				 errbuf);
	if (rc == CURLE_WRITE_ERROR && x->not_partial)
		rc = CURLE_OK;          /* judged by its status below */
	if (rc == CURLE_WRITE_ERROR && x->overflow)
		return stfs_fail(err, q->whole ? -EFBIG : -EIO, NULL,
				 STFS_NO_OFFSET, "the server sent more than "
				 "the %zu bytes asked for", x->len);
	if (rc != CURLE_OK && x->net.why[0])    /* public_net: not again */
		return stfs_fail(err, -EPERM, NULL, STFS_NO_OFFSET, "%s",
				 x->net.why);
	if (rc != CURLE_OK) {
		*again = rc != CURLE_UNSUPPORTED_PROTOCOL &&
			 rc != CURLE_URL_MALFORMAT &&
			 rc != CURLE_TOO_MANY_REDIRECTS &&
			 rc != CURLE_OUT_OF_MEMORY &&
			 rc != CURLE_PEER_FAILED_VERIFICATION;
		return stfs_fail(err, rc == CURLE_COULDNT_RESOLVE_HOST ?
				 -EHOSTUNREACH : *again ? -ENETUNREACH : -EIO,
				 NULL, STFS_NO_OFFSET, "%s", errbuf[0] ?
				 errbuf : curl_easy_strerror(rc));
	}
	if ((status == 200 || status == 206) && x->r.encoded)
		return stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "the server "
				 "sent the bytes encoded (Content-Encoding: "
				 "%s), which stfs never asks for",
				 x->r.encoding[0] ? x->r.encoding : "?");
	if (q->whole && status == 200 && x->r.ambiguous)
		return stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "an "
				 "ambiguous answer (%s)", x->r.ambiguity);
	if (q->whole && status == 200)
		return 0;
	if (!q->whole && status == 206) {
		code = check_range(q, &x->r, x->got, 1, err);
		/* the answer promised the range, and its body ended early
		 * but cleanly (no Content-Length and the connection closed,
		 * or chunked with its last chunk): a cut transfer, retried as
		 * a reset one is (curl tells a cut with a Content-Length) */
		if (code == -EIO && x->r.has_range && !x->r.ambiguous &&
		    x->r.range_first == q->off &&
		    x->got < x->r.range_last - x->r.range_first + 1 &&
		    check_range(q, &x->r, 0, 0, NULL) == 0) {
			*again = 1;
			return stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET,
					 "the transfer was cut: %zu of the %"
					 PRIu64 " bytes of bytes %" PRIu64
					 "-%" PRIu64 " came", x->got,
					 x->r.range_last - x->r.range_first +
					 1, x->r.range_first,
					 x->r.range_last);
		}
		return code;
	}
	if (status == 200 || (q->whole && status == 206))
		return stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "the server "
				 "ignores range requests (200 for a range)");
	if (status == 416 && q->want_total == UINT64_MAX && x->r.has_total &&
	    x->r.total == 0 && !x->r.ambiguous)
		return 0;               /* an empty object */
	if (status == 412)
		return stfs_fail(err, -ESTALE, NULL, STFS_NO_OFFSET, "the "
				 "object changed since it was opened (412)");
	if (status >= 300 && status < 400)
		return stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "HTTP %ld: a "
				 "redirect, not followed%s", status,
				 q->auth && q->auth->sign ? " (a signed "
				 "request is for its host only; is the region "
				 "or the addressing style right?)" : "");
	code = status == 401 || status == 403 ? -EACCES :
	       status == 404 || status == 410 ? -ENOENT : -EIO;
	*again = status == 429 || status >= 500;
	why(x, because, sizeof(because));
	return stfs_fail(err, code, NULL, STFS_NO_OFFSET, "HTTP %ld%s%s%s",
			 status, reason(status), because[0] ? ": " : "",
			 because);
}

int stfs_httpc_fetch(struct stfs_http_client *c, CURL *h,
		     const struct stfs_request *q, char *buf, char **body,
		     size_t *got, struct stfs_http_resp *resp,
		     struct stfs_error *err)
{
	return stfs_httpc_fetch_ex(c, h, q, NULL, buf, body, got, resp, err);
}

int stfs_httpc_fetch_ex(struct stfs_http_client *c, CURL *h,
			const struct stfs_request *q,
			const struct stfs_http_extra *ex, char *buf,
			char **body, size_t *got, struct stfs_http_resp *resp,
			struct stfs_error *err)
{
	char errbuf[ERRBUF_SIZE];
	unsigned retry_after = 0, wait = 0;
	uint64_t t0 = 0;

	for (unsigned k = 0;; k++) {
		struct xfer x = { .c = c, .h = h, .t = &c->transfers, .q = q,
				  .ex = ex, .buf = q->whole ? NULL : buf,
				  .len = q->len,
				  .whole = q->whole };
		long status = 0;
		CURLcode rc;
		int again, code;

		if (k) {
			(void)stfs_nap(wait, q->cancel);
			c->count->retries++;
		}
		if (q->cancel && atomic_load(q->cancel))
			return stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET,
					 "closed while reading");
		c->count->requests++;
		t0 = q->deadline_ms ? stfs_now_ms() : 0;
		rc = perform(c, h, &x, &status, errbuf);
		stfs_httpc_counted(c, h, q, ex ? ex->method : NULL, status, x.got,
				   k);
		retry_after = x.r.retry_after_s ? x.r.retry_after_s :
			      status == 429 ? x.r.ratelimit_t : 0;
		if (resp)
			*resp = x.r;
		if ((q->flags & STFS_REQ_NOFOLLOW) && x.r.location[0] &&
		    (rc == CURLE_OK || (rc == CURLE_WRITE_ERROR &&
					x.not_partial))) {
			if (q->whole)
				free(x.buf);
			return STFS_HTTP_REDIRECT;
		}
		if (!(code = judge(&x, rc, status, errbuf, &again, err))) {
			if (q->whole && status == 200) {
				if (!x.buf && !(x.buf = malloc(1)))
					return stfs_nomem(err); /* (empty) */
				x.buf[x.got] = '\0';
				*body = x.buf;
			} else if (q->whole) {
				free(x.buf);    /* an empty object's 416 */
			}
			*got = x.got;
			return 0;
		}
		if (q->whole)
			free(x.buf);
		if (status == 429 && (q->flags & STFS_REQ_NO429))
			again = 0;
		if (!again || k >= c->o->retries ||
		    (q->flags & STFS_REQ_ONCE))
			return code;
		/* a reader's bound (retries x 30 s from when it asked, as it
		 * measures it: a read queued behind others' backoffs has
		 * spent some of it) is not waited past */
		wait = backoff_ms(c, k + 1, retry_after);
		if (q->deadline_ms && (wait = stfs_backoff_within(
					 q->deadline_ms, t0, wait)) == 0) {
			if (err) {
				size_t n = strlen(err->msg);

				snprintf(err->msg + n, sizeof(err->msg) - n,
					 " (not retried: its reader has waited "
					 "for %u s, its bound)",
					 c->o->retries * STFS_BACKOFF_MAX_S);
			}
			return code;
		}
	}
}

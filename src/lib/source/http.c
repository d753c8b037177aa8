/*
 * http.c: the byte source of an object behind an http:// or https:// URL,
 * read with range requests (libcurl).
 *
 * Opening fetches the first 64 KiB (enough for the headers of most shards;
 * a longer header takes a second request), which gives the object's size
 * (Content-Range) and version
 * (ETag, else Last-Modified), and keeps it: the header is then read from
 * memory.  Every later read asks for exactly its range, with If-Match on
 * the ETag seen at open, and checks that the answer is a 206 for those
 * bytes of an object of that size and version: a server that ignores
 * ranges, an object that changed, a short or overlong body is an error,
 * never bytes of two versions mixed.
 *
 * Failures that may pass (no connection, a stall, 5xx, 429) are retried
 * with exponential backoff and jitter, honouring Retry-After; then the
 * read fails with EIO.  401/403 are EACCES (at open, 404/410 are
 * ENOENT; after it, an object gone is EIO).  Connect and
 * stall timeouts bound every attempt (a stall: under min_speed for the
 * stall timeout, so a trickle too), so a read ends in bounded time: at
 * most (retries + 1) x (connect + stall timeout + length / min_speed)
 * plus the backoffs.
 *
 * Asynchronous reads go to a pool of worker threads, each with one
 * request (a libcurl easy handle) on the wire at a time, started on first
 * use so that they belong to the daemon after it has gone to the
 * background.  Every transfer's bytes move on two transfer threads,
 * through libcurl's multi interface and its caches of live connections
 * (transfer.c); a worker waits for its own, answers its reader as soon as
 * the reader's bytes are in, then decides what comes next (a retry, the
 * start of a block, the cache).  The request loop never
 * waits for the network.  Synchronous requests (opening, headers, API
 * calls) take a handle from a small pool of idle ones, so several shards
 * can be opened at once.  Credentials are never
 * sent to another host on a redirect (libcurl's default, kept), TLS is
 * verified (libcurl's default; trust() reads the usual CA variables), and
 * the usual proxy variables apply (libcurl reads them).
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "format.h"
#include "source.h"
#include "transfer.h"

#define STFS_HTTP_FIRST (64u << 10)
/* blocks ahead: 32 MiB of them, at least 2 */
#define PREFETCH_BLOCKS (STFS_CACHE_BLOCK >= (16u << 20) ? 2u : \
			 (unsigned)((32u << 20) / STFS_CACHE_BLOCK))

static _Atomic uint64_t n_requests, n_retries, n_bytes, n_hits, n_failed;

void stfs_remote_stats(struct stfs_remote_stats *out)
{
	out->requests = n_requests;
	out->retries = n_retries;
	out->bytes = n_bytes;
	out->cache_hits = n_hits;
	out->failed = n_failed;
}

static struct stfs_http_opts cfg = {
	.connect_timeout_ms = 10000,
	.stall_timeout_ms = 30000,
	.retries = 3,
	.connections = 8,
};

/* bytes/s a transfer must average over the stall timeout */
static uint64_t min_speed = 16384;

void stfs_http_set_min_speed(uint64_t bytes_per_s)
{
	min_speed = bytes_per_s;
}

int stfs_http_set_block_size(uint64_t bytes)
{
	if (bytes < (64u << 10) || bytes > (64u << 20) ||
	    (bytes & (bytes - 1)))
		return -EINVAL;
	stfs_cache_block = (size_t)bytes;
	return 0;
}

void stfs_http_set_opts(const struct stfs_http_opts *o)
{
	cfg = *o;
	if (!cfg.connections)
		cfg.connections = 1;
}

int stfs_is_url(const char *arg)
{
	enum stfs_scheme k = stfs_url_scheme(arg);

	return k == STFS_SCHEME_HTTP || k == STFS_SCHEME_HTTPS;
}

char *stfs_source_shown(const char *source)
{
	const char *host, *end, *at;
	char *out;

	if (!stfs_is_url(source))
		return strdup(source);
	host = strstr(source, "://") + 3;
	end = host + strcspn(host, "/?#");
	at = memrchr(host, '@', (size_t)(end - host));
	if (!at)
		at = host - 1;
	/* less the user and password, and the query */
	if (asprintf(&out, "%.*s%.*s", (int)(host - source), source,
		     (int)strcspn(at + 1, "?"), at + 1) < 0)
		return NULL;
	return out;
}

#define FD_SLOTS 16

struct http_src {
	struct stfs_source base;
	char *url;
	struct stfs_auth *auth;     /* its credentials, or NULL */
	char etag[256];
	char last_modified[256];
	char *head;                 /* the first block */
	size_t head_len;
	char version[256];          /* ETag, else Last-Modified */
	struct stfs_cache_obj cobj; /* its blocks on disk, if cached */
	unsigned inflight;          /* asynchronous reads not done */
	pthread_cond_t idle;
	atomic_int closing;         /* abort its transfers and retries */
	uint64_t next_off;          /* where the last read ended */
	unsigned streak;            /* reads in a row that went on from it */
	uint64_t pf_next;           /* the next block to prefetch */
	/* cached blocks kept open for reading: block b in slot b % FD_SLOTS
	 * (fd -1: none); fd_lock is held to read with one, and to change */
	pthread_rwlock_t fd_lock;
	int fd[FD_SLOTS];
	uint64_t fd_block[FD_SLOTS];
};

/* ---- one request --------------------------------------------------------- */

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

/* A reader to answer as soon as its bytes [at, at + len) of the range
 * have come, before the rest of the range (a block) has: fn(arg) once. */
struct early {
	size_t at, len;
	void (*fn)(void *arg, const char *bytes);
	void *arg;
	int ready;                  /* the bytes have come (transfer thread) */
	int done;                   /* fn was called (the fetching thread) */
};

/* One request: a range of an object (or its whole body, q->whole). */
struct request {
	const char *url;
	const char *etag;           /* sent in If-Match, checked in answers */
	const struct stfs_auth *auth;
	uint64_t off;
	size_t len;                 /* whole: the most bytes taken */
	uint64_t want_total;        /* the object's size, or UINT64_MAX */
	int whole;
	const atomic_int *cancel;   /* set: abort */
	struct early *early;        /* or NULL */
};

struct xfer {
	CURL *h;
	const struct request *q;
	char *buf;
	size_t len, got;
	int whole;                  /* a whole body (200), buf grown to len */
	int overflow;
	int not_partial;            /* a body that is not a 206's: dropped */
	char why[4096];             /* the start of an error's body */
	size_t why_len;
	struct stfs_http_resp r;
};

static int answer_ok(const struct xfer *x);

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
	memcpy(x->buf + x->got, p, k);
	x->got += k;
	if (x->q && x->q->early && !x->q->early->ready &&
	    x->got >= x->q->early->at + x->q->early->len && answer_ok(x)) {
		/* bytes before got are written for good: the fetching
		 * thread answers its reader from them (answer_now()) */
		x->q->early->ready = 1;
		stfs_transfer_wake(x->h);
	}
	return k;
}

/* On the fetching thread, once on_data() found its reader's bytes in. */
static void answer_now(void *arg)
{
	struct xfer *x = arg;
	struct early *e = x->q->early;

	if (e && e->ready && !e->done) {
		e->done = 1;
		e->fn(e->arg, x->buf + e->at);
	}
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
	stfs_http_header_line(p, sz * n, &((struct xfer *)ud)->r);
	return sz * n;
}

/* Why the server refused a request, from what it said: the Hub's
 * X-Error-Message, an S3 error document, or a JSON {"error": ...}. */
static void why(const struct xfer *x, char *out, size_t outsz)
{
	json_object *j, *e;

	out[0] = '\0';
	if (x->r.error_message[0]) {
		snprintf(out, outsz, "%s", x->r.error_message);
		return;
	}
	if (stfs_s3_error_parse(x->why, x->why_len, out, outsz) == 0)
		return;
	if ((j = json_tokener_parse(x->why))) {
		if (json_object_is_type(j, json_type_object) &&
		    json_object_object_get_ex(j, "error", &e) &&
		    json_object_is_type(e, json_type_string))
			snprintf(out, outsz, "%s", json_object_get_string(e));
		json_object_put(j);
	}
	for (char *p = out; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = ' ';
}

/* The first ETag is a strong one we can send in If-Match. */
static int strong(const char *etag)
{
	return etag[0] == '"';
}

/* libcurl's progress callback: non-zero aborts the transfer. */
static int on_progress(void *ud, curl_off_t dt, curl_off_t dn,
		       curl_off_t ut, curl_off_t un)
{
	const atomic_int *cancel = ud;

	return cancel && atomic_load(cancel);
}

/* The answer's headers promise exactly the range asked for, of the object
 * and version seen at open: its bytes may be used before the end. */
static int answer_ok(const struct xfer *x)
{
	const struct request *q = x->q;
	const struct stfs_http_resp *r = &x->r;
	long status = 0;

	curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
	return status == 206 && !q->whole && q->want_total != UINT64_MAX &&
	       !r->encoded && r->has_range && r->range_first == q->off &&
	       r->range_last == q->off + q->len - 1 &&
	       r->total == q->want_total &&
	       (!q->etag || !q->etag[0] || !r->etag[0] ||
		strcmp(q->etag, r->etag) == 0);
}

/* The CA certificates that TLS peers are verified against: the source's
 * own (AWS_CA_BUNDLE for S3, REQUESTS_CA_BUNDLE for the Hub), else
 * CURL_CA_BUNDLE or SSL_CERT_FILE and SSL_CERT_DIR as the curl tool and
 * OpenSSL read them, else libcurl's built-in bundle.  libcurl itself
 * reads none of these variables. */
static void trust(CURL *h, const struct stfs_auth *a)
{
	const char *file = getenv("CURL_CA_BUNDLE"), *dir;

	if (!file || !*file)
		file = getenv("SSL_CERT_FILE");
	dir = getenv("SSL_CERT_DIR");
	if (a && a->ca_file) {
		file = a->ca_file;
		dir = NULL;
	}
	if (file && *file)
		curl_easy_setopt(h, CURLOPT_CAINFO, file);
	if (dir && *dir)
		curl_easy_setopt(h, CURLOPT_CAPATH, dir);
}

static CURLcode perform(CURL *h, const struct request *q, struct xfer *x,
			long *status, char *errbuf)
{
	struct curl_slist *hdrs = NULL;
	char range[64], cond[300], *full;
	const struct stfs_auth *a = q->auth;
	CURLcode rc;
	int ok = 1;

	curl_easy_reset(h);
	if (!q->whole) {
		snprintf(range, sizeof(range), "%" PRIu64 "-%" PRIu64, q->off,
			 q->off + q->len - 1);
		curl_easy_setopt(h, CURLOPT_RANGE, range);
	}
	if (q->etag && strong(q->etag)) {
		snprintf(cond, sizeof(cond), "If-Match: %s", q->etag);
		hdrs = curl_slist_append(NULL, cond);
	}
	if (a && a->sign)
		hdrs = stfs_auth_headers(a, q->url, hdrs, &ok);
	if (!ok) {
		curl_slist_free_all(hdrs);
		snprintf(errbuf, CURL_ERROR_SIZE, "cannot sign the request");
		return CURLE_OUT_OF_MEMORY;
	}
	if (a && a->user) {
		/* like the bearer token: for this URL's host alone */
		curl_easy_setopt(h, CURLOPT_USERNAME, a->user);
		curl_easy_setopt(h, CURLOPT_PASSWORD,
				 a->password ? a->password : "");
	} else if (!a || (!a->bearer && !a->sign)) {
		/* no credentials of its own: those of ~/.netrc (or $NETRC)
		 * for the host asked, as curl -n, wget and Python do */
		const char *netrc = getenv("NETRC");

		curl_easy_setopt(h, CURLOPT_NETRC, (long)CURL_NETRC_OPTIONAL);
		if (netrc && *netrc)
			curl_easy_setopt(h, CURLOPT_NETRC_FILE, netrc);
	}
	if (a && a->bearer) {
		/* libcurl sends it to this URL's host only, never on to
		 * the host a redirect points to */
		curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
		curl_easy_setopt(h, CURLOPT_XOAUTH2_BEARER, a->bearer);
	}
	trust(h, a);
	if (a && a->query) {
		if (asprintf(&full, "%s?%s", q->url, a->query) < 0) {
			curl_slist_free_all(hdrs);
			snprintf(errbuf, CURL_ERROR_SIZE, "out of memory");
			return CURLE_OUT_OF_MEMORY;
		}
		curl_easy_setopt(h, CURLOPT_URL, full);   /* copied */
		memset(full, 0, strlen(full));
		free(full);
	} else {
		curl_easy_setopt(h, CURLOPT_URL, q->url);
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)cfg.connect_timeout_ms);
	/* a stall: under min_speed (at least 1 byte/s) on average for the
	 * stall timeout, so a trickle ends as surely as a silence does */
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT,
			 (long)(min_speed ? (min_speed < LONG_MAX ? min_speed :
					     LONG_MAX) : 1));
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME,
			 (long)((cfg.stall_timeout_ms + 999) / 1000));
	/* a signed request is for its host alone */
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, a && a->sign ? 0L : 1L);
	curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_USERAGENT, "stfs/" STFS_VERSION);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, (void *)q->cancel);
	errbuf[0] = '\0';
	rc = stfs_transfer(h, answer_now, x);
	*status = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	curl_slist_free_all(hdrs);
	return rc;
}

static void sleep_ms(unsigned ms)
{
	struct timespec t = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&t, &t) < 0 && errno == EINTR)
		;
}

/* Backoff before attempt k (1, 2, ...): 200 ms doubling, at most 5 s,
 * +-50% jitter; a Retry-After (at most 30 s) instead when given. */
static unsigned backoff_ms(unsigned k, unsigned retry_after_s)
{
	unsigned base = 200u << (k > 5 ? 5 : k - 1);

	if (retry_after_s)
		return (retry_after_s > 30 ? 30 : retry_after_s) * 1000u;
	if (base > 5000)
		base = 5000;
	return base / 2 + (unsigned)(rand() % (int)(base + 1));
}

/*
 * Do request q, with retries: bytes [q->off, q->off + q->len) into buf,
 * *got of them; or with q->whole, the body into a new *body (NUL
 * terminated, at most q->len bytes).  q->want_total is the object's size
 * (UINT64_MAX while opening: then a short answer at the end of the object
 * is fine, and *resp tells the size and version).  0, or -errno with err
 * filled (the server's reason, when it gave one).
 */
static int fetch(CURL *h, const struct request *q, char *buf, char **body,
		 size_t *got, struct stfs_http_resp *resp,
		 struct stfs_error *err)
{
	char errbuf[CURL_ERROR_SIZE];
	unsigned retry_after = 0;
	uint64_t off = q->off;
	size_t len = q->len;

	for (unsigned k = 0;; k++) {
		struct xfer x = { .h = h, .q = q, .buf = q->whole ? NULL : buf,
				  .len = len, .whole = q->whole };
		long status;
		CURLcode rc;
		int again = 0, code = -EIO;
		char because[600];

		if (k) {
			sleep_ms(backoff_ms(k, retry_after));
			n_retries++;
		}
		if (q->cancel && atomic_load(q->cancel))
			return stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET,
					 "closed while reading");
		n_requests++;
		rc = perform(h, q, &x, &status, errbuf);
		n_bytes += x.got;
		retry_after = x.r.retry_after_s;
		if (rc == CURLE_WRITE_ERROR && x.not_partial)
			rc = CURLE_OK;          /* judged by its status below */
		if (rc == CURLE_WRITE_ERROR && x.overflow) {
			stfs_fail(err, q->whole ? -EFBIG : -EIO, NULL,
				  STFS_NO_OFFSET, "the server sent more than "
				  "the %zu bytes asked for", len);
		} else if (rc != CURLE_OK) {
			again = rc != CURLE_UNSUPPORTED_PROTOCOL &&
				rc != CURLE_URL_MALFORMAT &&
				rc != CURLE_TOO_MANY_REDIRECTS &&
				rc != CURLE_OUT_OF_MEMORY &&
				rc != CURLE_PEER_FAILED_VERIFICATION;
			code = rc == CURLE_COULDNT_RESOLVE_HOST ?
			       -EHOSTUNREACH : -ENETUNREACH;
			stfs_fail(err, code, NULL, STFS_NO_OFFSET, "%s",
				  errbuf[0] ? errbuf : curl_easy_strerror(rc));
		} else if ((status == 200 || status == 206) && x.r.encoded) {
			stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "the server "
				  "sent the bytes encoded (Content-Encoding: "
				  "%s), which stfs never asks for",
				  x.r.encoding[0] ? x.r.encoding : "?");
		} else if (q->whole && status == 200) {
			x.buf[x.got] = '\0';
			*body = x.buf;
			*got = x.got;
			if (resp)
				*resp = x.r;
			return 0;
		} else if (!q->whole && status == 206) {
			const struct stfs_http_resp *r = &x.r;
			uint64_t last = off + x.got - 1, want = q->want_total;

			if (!r->has_range || r->range_first != off ||
			    !x.got || r->range_last != last ||
			    (want != UINT64_MAX &&
			     (r->total != want || x.got != len)) ||
			    (want == UINT64_MAX && x.got != len &&
			     last + 1 != r->total)) {
				stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET,
					  "the server answered bytes %" PRIu64
					  "-%" PRIu64 " (%zu received) for "
					  "bytes %" PRIu64 "-%" PRIu64,
					  r->range_first, r->range_last, x.got,
					  off, off + len - 1);
			} else if (q->etag && q->etag[0] && r->etag[0] &&
				   strcmp(q->etag, r->etag) != 0) {
				stfs_fail(err, -ESTALE, NULL, STFS_NO_OFFSET,
					  "the object changed (ETag %s, was %s)",
					  r->etag, q->etag);
				code = -ESTALE;
			} else {
				*got = x.got;
				if (resp)
					*resp = x.r;
				return 0;
			}
		} else if (status == 200 || (q->whole && status == 206)) {
			stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "the server "
				  "ignores range requests (200 for a range)");
		} else if (status == 416 && q->want_total == UINT64_MAX &&
			   x.r.has_total && x.r.total == 0) {
			*got = 0;                       /* an empty object */
			if (resp)
				*resp = x.r;
			return 0;
		} else if (status == 412) {
			stfs_fail(err, -ESTALE, NULL, STFS_NO_OFFSET, "the "
				  "object changed since it was opened (412)");
			code = -ESTALE;
		} else if (status >= 300 && status < 400) {
			stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "HTTP %ld: "
				  "a redirect, not followed%s", status,
				  q->auth && q->auth->sign ?
				  " (a signed request is for its host only; "
				  "is the region or the addressing style "
				  "right?)" : "");
		} else {
			code = status == 401 || status == 403 ? -EACCES :
			       status == 404 || status == 410 ? -ENOENT : -EIO;
			again = status == 429 || status >= 500;
			why(&x, because, sizeof(because));
			stfs_fail(err, code, NULL, STFS_NO_OFFSET, "HTTP %ld%s%s%s",
				  status, reason(status), because[0] ? ": " : "",
				  because);
		}
		if (q->whole)
			free(x.buf);
		if (!again || k >= cfg.retries)
			return err ? err->code : code;
	}
}

/* ---- the shared handle and the workers ---------------------------------- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER;
/* Handles for synchronous requests (opening, headers, API calls), kept
 * with their connections for the next: several opens may run at once. */
#define IDLE_MAX 16
static pthread_mutex_t idle_mu = PTHREAD_MUTEX_INITIALIZER;
static CURL *idle[IDLE_MAX];
static unsigned nidle;

static CURL *handle_get(void)
{
	CURL *h = NULL;

	pthread_mutex_lock(&idle_mu);
	if (nidle)
		h = idle[--nidle];
	pthread_mutex_unlock(&idle_mu);
	return h ? h : curl_easy_init();
}

static void handle_put(CURL *h)
{
	pthread_mutex_lock(&idle_mu);
	if (h && nidle < IDLE_MAX) {
		idle[nidle++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&idle_mu);
	curl_easy_cleanup(h);
}

static void handles_free(void)
{
	pthread_mutex_lock(&idle_mu);
	while (nidle)
		curl_easy_cleanup(idle[--nidle]);
	pthread_mutex_unlock(&idle_mu);
}
static unsigned nsources;           /* open http sources */

struct job {
	struct http_src *s;
	void *buf;
	size_t len;
	uint64_t off;
	stfs_source_done done;      /* NULL: a prefetch of block off */
	void *arg;
	struct job *next;
};

/* Reads someone waits for come first; prefetches after, at most
 * 2 x connections of them queued (so at most connections blocks of
 * memory in flight for them). */
static struct job *queue, **queue_tail = &queue;
static struct job *pf_queue, **pf_tail = &pf_queue;
static unsigned n_pf_queued;
static pthread_t *workers;
static unsigned nworkers;
static int stopping;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void global_init(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	srand((unsigned)time(NULL) ^ (unsigned)getpid());
}

static void log_failure(const struct http_src *s, uint64_t off, size_t len,
			const struct stfs_error *e)
{
	char line[768];

	snprintf(line, sizeof(line), "stfs: %s: bytes %" PRIu64 "-%" PRIu64
		 ": %s", s->url, off, off + len - 1, e->msg);
	stfs_log(line);
}

/* Blocks being fetched, so that readers of one block wait for one fetch
 * (the kernel's readahead asks for several parts of a block at once).  A
 * fetched block stays listed, its bytes in memory, until it is in the
 * cache: the reader that fetched it is answered first, and readers of the
 * block meanwhile copy from memory.  Without a cache, a prefetched block
 * is held instead, until its bytes have all been read (the kernel's page
 * cache has them then) or HOLD_MAX newer ones push it out. */
struct inflight {
	const struct http_src *s;
	uint64_t block;
	int done, rc;               /* set when fetched (or failed) */
	size_t ready_from;          /* data[ready_from, len) came already */
	char *data;                 /* the block, till it is in the cache */
	size_t len;
	unsigned waiters;           /* readers copying from it */
	int held;                   /* no cache: kept for its readers */
	size_t consumed;            /* bytes of it read, if held */
	struct inflight *next;      /* newer blocks */
	struct inflight *later;     /* this thread's blocks still to write */
};

#define HOLD_MAX (2 * PREFETCH_BLOCKS)

static pthread_mutex_t fl_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fl_cv = PTHREAD_COND_INITIALIZER;
static struct inflight *fl;
static unsigned nheld;              /* under fl_mu */
static __thread struct inflight *to_write;

static struct inflight **fl_find(const struct http_src *s, uint64_t b)
{
	struct inflight **p = &fl;

	while (*p && ((*p)->s != s || (*p)->block != b))
		p = &(*p)->next;
	return p;
}

static void fl_drop(struct inflight *me);

/* Let go of a held block (under fl_mu); whoever clears held frees it. */
static void unhold(struct inflight *me)
{
	me->held = 0;
	nheld--;
	fl_drop(me);
}

/* Hold fetched block me for its readers (under fl_mu), unless they have
 * read it all already, letting go of the oldest held block past
 * HOLD_MAX. */
static void hold(struct inflight *me)
{
	if (me->consumed >= me->len) {
		fl_drop(me);
		return;
	}
	me->held = 1;
	if (++nheld <= HOLD_MAX)
		return;
	for (struct inflight *o = fl; o; o = o->next)
		if (o->held && o != me) {
			unhold(o);
			return;
		}
}

/* Copy [off, off + len) of block other, listed, when its fetch has
 * brought those bytes (under fl_mu, which it drops while copying): its
 * fetch's result.  A held block whose bytes have all been read goes (the
 * bytes are counted once each only if readers do not overlap, so a block
 * may go early: a reader then fetches its bytes itself). */
static int copy_listed(struct inflight *other, size_t off, void *buf,
		       size_t len)
{
	int rc;

	other->waiters++;
	while (!other->done && off < other->ready_from)
		pthread_cond_wait(&fl_cv, &fl_mu);
	rc = other->done ? other->rc : 0;
	pthread_mutex_unlock(&fl_mu);
	if (!rc && len)
		memcpy(buf, other->data + off, len);
	pthread_mutex_lock(&fl_mu);
	if (--other->waiters == 0)
		pthread_cond_broadcast(&fl_cv);
	if (!rc && (other->consumed += len) >= other->len && other->held)
		unhold(other);
	return rc;
}

/* Block buffers, kept for the next fetch: a fresh 4 MiB allocation is a
 * fresh mapping, and touching its pages for the first time costs more
 * than the copy into them (on some hypervisors, much more). */
static char *spare[16];
static unsigned nspare;             /* under fl_mu */

static char *block_buf(void)
{
	char *b = NULL;

	pthread_mutex_lock(&fl_mu);
	if (nspare)
		b = spare[--nspare];
	pthread_mutex_unlock(&fl_mu);
	return b ? b : malloc(STFS_CACHE_BLOCK);
}

/* Unlist me and free it once no reader copies from it (under fl_mu). */
static void fl_drop(struct inflight *me)
{
	struct inflight **p = &fl;

	while (*p && *p != me)
		p = &(*p)->next;
	if (*p)
		*p = me->next;
	while (me->waiters)
		pthread_cond_wait(&fl_cv, &fl_mu);
	if (me->data && nspare < cfg.connections && nspare < 16)
		spare[nspare++] = me->data;
	else
		free(me->data);
	free(me);
}

/* Blocks waiting for the writer thread (under mu): a worker hands its
 * blocks over and goes on fetching, so that a connection never waits for
 * the disk; past 2 x connections of them, it writes them itself. */
static struct inflight *wq, **wq_tail = &wq;
static unsigned nwq;
static pthread_cond_t wq_cv = PTHREAD_COND_INITIALIZER;
static pthread_t writer_th;
static int writer_on;

/* Write block me to the cache, then unlist and free it. */
static void write_block(struct inflight *me)
{
	(void)stfs_cache_put(&me->s->cobj, me->block, me->data, me->len);
	pthread_mutex_lock(&fl_mu);
	fl_drop(me);
	pthread_mutex_unlock(&fl_mu);
}

static void *writer(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	for (;;) {
		struct inflight *me;
		struct http_src *s;

		while (!wq && !stopping)
			pthread_cond_wait(&wq_cv, &mu);
		if (!(me = wq))
			break;
		if (!(wq = me->later))
			wq_tail = &wq;
		nwq--;
		s = (struct http_src *)me->s;
		pthread_mutex_unlock(&mu);
		write_block(me);
		pthread_mutex_lock(&mu);
		if (--s->inflight == 0)
			pthread_cond_broadcast(&s->idle);
	}
	pthread_mutex_unlock(&mu);
	return NULL;
}

/* The blocks this thread fetched go to the cache, after their readers
 * have been answered: to the writer thread, or written here. */
static void write_behind(void)
{
	while (to_write) {
		struct inflight *me = to_write;

		to_write = me->later;
		pthread_mutex_lock(&mu);
		if (writer_on && !stopping && nwq < 2 * cfg.connections) {
			((struct http_src *)me->s)->inflight++;
			me->later = NULL;
			*wq_tail = me;
			wq_tail = &me->later;
			nwq++;
			pthread_cond_signal(&wq_cv);
			pthread_mutex_unlock(&mu);
			continue;
		}
		pthread_mutex_unlock(&mu);
		write_block(me);
	}
}

/* A reader's block is fetched from the TAIL_FIRST-aligned piece its read
 * starts in, when that is not the block's start (see block_read()). */
#define TAIL_FIRST (64u << 10)

/* Bytes [off, off + len) of block b of s's cached object: from the cache,
 * from a fetch of it under way, else fetched whole (and written to the
 * cache by write_behind()).  With early, a fetch answers the reader
 * through it as soon as those bytes have come (early->done: buf is then
 * the reader's no more, and untouched). */
static int block_read(CURL *h, struct http_src *s, uint64_t b, size_t off,
		      void *buf, size_t len, struct early *early)
{
	uint64_t start = b * STFS_CACHE_BLOCK;
	size_t blen = s->base.info.size - start < STFS_CACHE_BLOCK ?
		      (size_t)(s->base.info.size - start) : STFS_CACHE_BLOCK;
	struct inflight *me, **p;
	struct stfs_error e = { 0 };
	size_t got;
	int rc;

	for (;;) {
		if (stfs_cache_read(&s->cobj, b, blen, off, buf, len) == 0) {
			n_hits++;
			return 0;
		}
		if (stfs_cache_offline()) {
			snprintf(e.msg, sizeof(e.msg), "not in the cache, and "
				 "offline");
			log_failure(s, start + off, len, &e);
			return -EIO;
		}
		pthread_mutex_lock(&fl_mu);
		if (!*(p = fl_find(s, b))) {
			break;                  /* ours to fetch, under fl_mu */
		} else {
			/* wait for that fetch (or the part of it with our
			 * bytes); its failure is ours too */
			rc = copy_listed(*p, off, buf, len);
			pthread_mutex_unlock(&fl_mu);
			return rc;
		}
	}
	if (!(me = calloc(1, sizeof(*me)))) {
		pthread_mutex_unlock(&fl_mu);
		return -ENOMEM;
	}
	*me = (struct inflight){ .s = s, .block = b, .len = blen,
				 .ready_from = SIZE_MAX };
	*p = me;
	pthread_mutex_unlock(&fl_mu);

	rc = -ENOMEM;
	if ((me->data = block_buf())) {
		/* A reader waiting in the middle of the block: fetch from
		 * its page to the end first, so that it waits for its own
		 * bytes and not for the block's earlier ones, then the
		 * start.  The block is complete only after both. */
		size_t cut = early ? off & ~(size_t)(TAIL_FIRST - 1) : 0;
		struct request q = { s->url, s->etag, s->auth, start + cut,
				     blen - cut, s->base.info.size, 0,
				     &s->closing, early };

		if (early) {
			early->at = off - cut;
			early->len = len;
		}
		rc = fetch(h, &q, me->data + cut, NULL, &got, NULL, &e);
		if (!rc && cut) {
			/* readers of the tail need not wait for the start */
			pthread_mutex_lock(&fl_mu);
			me->ready_from = cut;
			pthread_cond_broadcast(&fl_cv);
			pthread_mutex_unlock(&fl_mu);
			q.off = start;
			q.len = cut;
			q.early = NULL;
			rc = fetch(h, &q, me->data, NULL, &got, NULL, &e);
		}
		if (!rc && len && !(early && early->done))
			memcpy(buf, me->data + off, len);
		else if (rc)
			log_failure(s, q.off, q.len, &e);
	}
	rc = rc == -EACCES || rc == -ENOMEM ? rc :
	     rc ? -EIO : 0;
	pthread_mutex_lock(&fl_mu);
	me->rc = rc;
	me->done = 1;
	pthread_cond_broadcast(&fl_cv);
	if (rc) {
		fl_drop(me);
	} else if (!s->cobj.valid) {
		hold(me);               /* no cache: a prefetch, for readers */
	} else {
		me->later = to_write;
		to_write = me;
	}
	pthread_mutex_unlock(&fl_mu);
	return rc;
}

/* No cache: bytes [off, off + len) of s from the blocks prefetched into
 * memory where they are (or on their way), the rest fetched exactly, each
 * run of missing bytes in one request. */
static int read_uncached(CURL *h, struct http_src *s, char *buf, size_t len,
			 uint64_t off)
{
	struct stfs_error e = { 0 };
	struct request q = { s->url, s->etag, s->auth, 0, 0,
			     s->base.info.size, 0, &s->closing, NULL };
	char *run = buf;
	size_t got;
	int rc;

	q.off = off;
	for (;;) {
		uint64_t b = off / STFS_CACHE_BLOCK;
		size_t in = (size_t)(off % STFS_CACHE_BLOCK);
		size_t n = STFS_CACHE_BLOCK - in < len ?
			   STFS_CACHE_BLOCK - in : len;
		struct inflight **p;

		rc = -ENOENT;
		if (len) {
			pthread_mutex_lock(&fl_mu);
			if (*(p = fl_find(s, b)))
				rc = copy_listed(*p, in, buf, n);
			pthread_mutex_unlock(&fl_mu);
			if (rc && rc != -ENOENT)
				return rc == -EACCES ? rc : -EIO;
		}
		if (rc && len) {
			q.len += n;             /* missing: joins the run */
		} else if (q.len) {             /* a run ends: fetch it */
			if ((rc = fetch(h, &q, run, NULL, &got, NULL, &e))) {
				log_failure(s, q.off, q.len, &e);
				return rc == -EACCES ? rc : -EIO;
			}
			q.len = 0;
		}
		if (!len)
			return 0;
		buf += n;
		off += n;
		len -= n;
		if (!q.len) {
			run = buf;
			q.off = off;
		}
	}
}

/* Bytes [off, off + len) of s (within its size) from the first block, the
 * cache, memory or the network, with handle h; early, if given, for a
 * read within one block (see block_read()). */
static int read_with(CURL *h, struct http_src *s, void *buf, size_t len,
		     uint64_t off, struct early *early)
{
	int rc;

	if (off + len <= s->head_len) {
		memcpy(buf, s->head + off, len);
		return 0;
	}
	if (s->cobj.valid) {
		/* early answers are for a read within one block */
		if (off / STFS_CACHE_BLOCK != (off + len - 1) / STFS_CACHE_BLOCK)
			early = NULL;
		while (len) {
			uint64_t b = off / STFS_CACHE_BLOCK;
			size_t in = (size_t)(off % STFS_CACHE_BLOCK);
			size_t n = STFS_CACHE_BLOCK - in < len ?
				   STFS_CACHE_BLOCK - in : len;

			if ((rc = block_read(h, s, b, in, buf, n, early)))
				return rc;
			buf = (char *)buf + n;
			off += n;
			len -= n;
		}
		return 0;
	}
	if (stfs_cache_offline())
		return -EIO;
	return read_uncached(h, s, buf, len, off);
}

/* Bring block b of s into the cache (or memory), for a reader to come. */
static void prefetch_block(CURL *h, struct http_src *s, uint64_t b)
{
	char none;

	(void)block_read(h, s, b, 0, &none, 0, NULL);
}

/* A read job's bytes have come, before the rest of their block. */
static void answer_early(void *arg, const char *bytes)
{
	struct job *j = arg;

	memcpy(j->buf, bytes, j->len);
	j->done(j->arg, 0);
}

static void *worker(void *arg)
{
	CURL *h = curl_easy_init();

	(void)arg;
	pthread_mutex_lock(&mu);
	for (;;) {
		struct job *j;
		int rc;

		while (!queue && !pf_queue && !stopping)
			pthread_cond_wait(&work, &mu);
		if (queue) {
			j = queue;
			if (!(queue = j->next))
				queue_tail = &queue;
		} else if (pf_queue && !stopping) {
			j = pf_queue;
			if (!(pf_queue = j->next))
				pf_tail = &pf_queue;
			n_pf_queued--;
		} else {
			break;
		}
		pthread_mutex_unlock(&mu);
		if (!j->done) {
			if (h)
				prefetch_block(h, j->s, j->off);
		} else {
			struct early ea = { .fn = answer_early, .arg = j };

			rc = h ? read_with(h, j->s, j->buf, j->len, j->off,
					   &ea) : -ENOMEM;
			if (!ea.done) {         /* else answered already */
				if (rc)
					n_failed++;
				j->done(j->arg, rc);
			}
		}
		write_behind();
		pthread_mutex_lock(&mu);
		if (--j->s->inflight == 0)
			pthread_cond_broadcast(&j->s->idle);
		free(j);
	}
	pthread_mutex_unlock(&mu);
	curl_easy_cleanup(h);
	return NULL;
}

/* Start the workers (under mu); 0, or -errno if none could start. */
static int start_workers(void)
{
	if (nworkers)
		return 0;
	workers = calloc(cfg.connections, sizeof(*workers));
	if (!workers)
		return -ENOMEM;
	stopping = 0;
	for (unsigned i = 0; i < cfg.connections; i++)
		if (pthread_create(&workers[nworkers], NULL, worker, NULL) == 0)
			nworkers++;
	if (nworkers && !writer_on)
		writer_on = pthread_create(&writer_th, NULL, writer, NULL) == 0;
	return nworkers ? 0 : -EAGAIN;
}

/* The last source is closing: stop and join the workers (not under mu). */
static void stop_workers(void)
{
	pthread_t *w;
	unsigned n;

	pthread_mutex_lock(&mu);
	stopping = 1;
	while (pf_queue) {              /* not worth fetching now */
		struct job *j = pf_queue;
		pf_queue = j->next;
		if (--j->s->inflight == 0)
			pthread_cond_broadcast(&j->s->idle);
		free(j);
	}
	pf_tail = &pf_queue;
	n_pf_queued = 0;
	pthread_cond_broadcast(&work);
	w = workers;
	n = nworkers;
	workers = NULL;
	nworkers = 0;
	pthread_mutex_unlock(&mu);
	for (unsigned i = 0; i < n; i++)
		pthread_join(w[i], NULL);
	free(w);
	pthread_mutex_lock(&mu);
	n = writer_on;
	writer_on = 0;
	pthread_cond_broadcast(&wq_cv);
	pthread_mutex_unlock(&mu);
	if (n)                          /* it writes what is queued, and ends */
		pthread_join(writer_th, NULL);
}

/* ---- the source ------------------------------------------------------- */

static int http_read(struct stfs_source *src, void *buf, size_t len,
		     uint64_t off)
{
	struct http_src *s = (struct http_src *)src;
	int rc;

	if (off + len <= s->head_len) {
		memcpy(buf, s->head + off, len);
		return 0;
	}
	CURL *h = handle_get();

	rc = h ? read_with(h, s, buf, len, off, NULL) : -ENOMEM;
	handle_put(h);
	write_behind();
	return rc;
}

/* Bytes [off, off + len) of s wholly from cached blocks, through the open
 * ones: 0, or -ENOENT if a block is missing (buf then holds garbage). */
static int cached_read(struct http_src *s, void *buf, size_t len,
		       uint64_t off)
{
	while (len) {
		uint64_t b = off / STFS_CACHE_BLOCK;
		uint64_t start = b * STFS_CACHE_BLOCK;
		size_t in = (size_t)(off - start);
		size_t blen = s->base.info.size - start < STFS_CACHE_BLOCK ?
			      (size_t)(s->base.info.size - start) :
			      STFS_CACHE_BLOCK;
		size_t n = blen - in < len ? blen - in : len;
		unsigned k = (unsigned)(b % FD_SLOTS);
		int rc = -ENOENT, fd, old;

		pthread_rwlock_rdlock(&s->fd_lock);
		if (s->fd[k] >= 0 && s->fd_block[k] == b)
			rc = stfs_cache_pread(s->fd[k], buf, n, in);
		pthread_rwlock_unlock(&s->fd_lock);
		if (rc) {
			if ((fd = stfs_cache_open_block(&s->cobj, b, blen)) < 0)
				return -ENOENT;
			rc = stfs_cache_pread(fd, buf, n, in);
			pthread_rwlock_wrlock(&s->fd_lock);
			old = s->fd[k];
			s->fd[k] = fd;
			s->fd_block[k] = b;
			pthread_rwlock_unlock(&s->fd_lock);
			if (old >= 0)
				close(old);
			if (rc)
				return rc;
		}
		buf = (char *)buf + n;
		off += n;
		len -= n;
	}
	return 0;
}

/* Queue prefetches of the blocks of [from, to) not queued yet (under mu). */
static void prefetch(struct http_src *s, uint64_t from, uint64_t to)
{
	uint64_t nblocks = (s->base.info.size + STFS_CACHE_BLOCK - 1) /
			   STFS_CACHE_BLOCK;
	uint64_t b0 = from / STFS_CACHE_BLOCK, b1, b;

	if (stfs_cache_offline() || from >= to)
		return;
	b1 = (to + STFS_CACHE_BLOCK - 1) / STFS_CACHE_BLOCK;
	if (b1 > nblocks)
		b1 = nblocks;
	if (b1 > b0 + PREFETCH_BLOCKS)
		b1 = b0 + PREFETCH_BLOCKS;
	/* a window that jumped (another place, another tensor) restarts */
	if (s->pf_next < b0 || s->pf_next > b1 + PREFETCH_BLOCKS)
		s->pf_next = b0;
	for (b = s->pf_next > b0 ? s->pf_next : b0;
	     b < b1 && n_pf_queued < 2 * cfg.connections; b++) {
		struct job *j = malloc(sizeof(*j));

		if (!j || start_workers()) {
			free(j);
			break;
		}
		*j = (struct job){ s, NULL, 0, b, NULL, NULL, NULL };
		s->inflight++;
		*pf_tail = j;
		pf_tail = &j->next;
		n_pf_queued++;
		pthread_cond_signal(&work);
	}
	s->pf_next = b;
}

/*
 * What a read says of the reads to come (under mu): the start of a tensor
 * will most likely be followed by the rest of it, so the blocks ahead
 * within it are fetched; a reader going on where its last read ended is
 * reading in file order, so the blocks ahead are fetched, into the next
 * tensors; a read anywhere else (a random reader) fetches nothing more.
 */
static void plan_prefetch(struct http_src *s, uint64_t off, size_t len,
			  const struct stfs_extent *ext)
{
	uint64_t end = off + len, window = (uint64_t)PREFETCH_BLOCKS *
					   STFS_CACHE_BLOCK, slack = 1u << 20;
	/* the kernel's readahead may send its requests (1 MiB each) a
	 * little out of order */
	int seq = s->next_off && off + slack >= s->next_off &&
		  off <= s->next_off + slack;

	s->streak = seq ? s->streak + 1 : 0;
	if (end > s->next_off || !seq)
		s->next_off = end;
	if (ext && off == ext->off && ext->end > end)
		prefetch(s, end, ext->end < end + window ? ext->end :
			 end + window);
	else if (seq && s->streak >= 2)
		prefetch(s, end, end + window);
}

static void http_read_async(struct stfs_source *src, void *buf, size_t len,
			    uint64_t off, const struct stfs_extent *ext,
			    stfs_source_done done, void *arg)
{
	struct http_src *s = (struct http_src *)src;
	struct job *j;
	int rc;

	if (off + len <= s->head_len) {
		memcpy(buf, s->head + off, len);
		done(arg, 0);
		return;
	}
	/* blocks in the cache are read here, as a local file would be: a
	 * hand-over to a worker costs more than the read */
	if (s->cobj.valid && cached_read(s, buf, len, off) == 0) {
		n_hits++;
		pthread_mutex_lock(&mu);
		plan_prefetch(s, off, len, ext);
		pthread_mutex_unlock(&mu);
		done(arg, 0);
		return;
	}
	if (!(j = malloc(sizeof(*j)))) {
		done(arg, -ENOMEM);
		return;
	}
	*j = (struct job){ s, buf, len, off, done, arg, NULL };
	pthread_mutex_lock(&mu);
	if ((rc = start_workers())) {
		pthread_mutex_unlock(&mu);
		free(j);
		done(arg, rc);
		return;
	}
	s->inflight++;
	*queue_tail = j;
	queue_tail = &j->next;
	pthread_cond_signal(&work);
	plan_prefetch(s, off, len, ext);
	pthread_mutex_unlock(&mu);
}

static void http_close(struct stfs_source *src)
{
	struct http_src *s = (struct http_src *)src;
	int last;

	atomic_store(&s->closing, 1);   /* transfers of s end now */
	pthread_mutex_lock(&mu);
	for (struct job **p = &pf_queue; *p;) {  /* its prefetches: none */
		struct job *j = *p;

		if (j->s != s) {
			p = &j->next;
			continue;
		}
		*p = j->next;
		s->inflight--;
		n_pf_queued--;
		free(j);
	}
	pf_tail = &pf_queue;
	while (*pf_tail)
		pf_tail = &(*pf_tail)->next;
	while (s->inflight)             /* reads still on the wire */
		pthread_cond_wait(&s->idle, &mu);
	last = --nsources == 0;
	pthread_mutex_unlock(&mu);
	pthread_mutex_lock(&fl_mu);     /* its blocks held in memory */
	for (;;) {
		struct inflight *o = fl;

		while (o && !(o->s == s && o->held))
			o = o->next;
		if (!o)
			break;
		unhold(o);
	}
	pthread_mutex_unlock(&fl_mu);
	if (last) {
		stop_workers();
		handles_free();
		stfs_transfer_stop();
		pthread_mutex_lock(&fl_mu);
		while (nspare)
			free(spare[--nspare]);
		pthread_mutex_unlock(&fl_mu);
	}
	pthread_cond_destroy(&s->idle);
	for (unsigned k = 0; k < FD_SLOTS; k++)
		if (s->fd[k] >= 0)
			close(s->fd[k]);
	pthread_rwlock_destroy(&s->fd_lock);
	stfs_auth_unref(s->auth);
	free(s->head);
	free(s->url);
	free(s->base.name);
	free(s);
}

/* Open s from the cache alone: its latest version's size and head. */
static int open_cached(struct http_src *s, struct stfs_error *err)
{
	if (stfs_cache_latest(s->url, &s->cobj, s->version,
			      sizeof(s->version)))
		return stfs_fail(err, -ENOENT, NULL, STFS_NO_OFFSET, "not in "
				 "the cache (offline)");
	s->base.info.size = s->cobj.size;
	s->head_len = s->cobj.size < STFS_HTTP_FIRST ? (size_t)s->cobj.size :
		      STFS_HTTP_FIRST;
	if (stfs_cache_read(&s->cobj, STFS_CACHE_HEAD, s->head_len, 0,
			    s->head, s->head_len)) {
		s->cobj.valid = 0;
		return stfs_fail(err, -ENOENT, NULL, STFS_NO_OFFSET, "not in "
				 "the cache (offline)");
	}
	if (s->version[0] == '"' || !strncmp(s->version, "W/\"", 3))
		snprintf(s->etag, sizeof(s->etag), "%s", s->version);
	else
		snprintf(s->last_modified, sizeof(s->last_modified), "%s",
			 s->version);
	return 0;
}

static const struct stfs_source_ops http_ops = {
	.close = http_close,
	.read = http_read,
	.read_async = http_read_async,
};

int stfs_source_open_http(const char *url, struct stfs_auth *auth,
			  struct stfs_source **out, struct stfs_error *err)
{
	struct stfs_http_resp r;
	struct http_src *s;
	int rc;

	*out = NULL;
	pthread_once(&init_once, global_init);
	s = calloc(1, sizeof(*s));
	if (!s || !(s->url = strdup(url)) || !(s->base.name = strdup(url)) ||
	    !(s->head = malloc(STFS_HTTP_FIRST))) {
		if (s) {
			free(s->url);
			free(s->base.name);
		}
		free(s);
		return stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET,
				 "out of memory");
	}
	pthread_cond_init(&s->idle, NULL);
	pthread_rwlock_init(&s->fd_lock, NULL);
	for (unsigned k = 0; k < FD_SLOTS; k++)
		s->fd[k] = -1;
	s->base.ops = &http_ops;
	s->auth = stfs_auth_ref(auth);
	pthread_mutex_lock(&mu);
	nsources++;
	pthread_mutex_unlock(&mu);
	if (stfs_cache_offline()) {
		rc = open_cached(s, err);
	} else {
		CURL *h = handle_get();
		struct request q = { url, NULL, auth, 0, STFS_HTTP_FIRST,
				     UINT64_MAX, 0, NULL, NULL };

		rc = h ? fetch(h, &q, s->head, NULL, &s->head_len, &r, err) :
				   stfs_fail(err, -ENOMEM, NULL,
					     STFS_NO_OFFSET, "out of memory");
		handle_put(h);
		if (!rc && !r.has_total)
			rc = stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "the "
				       "server did not say the object's size "
				       "(no Content-Range)");
		if (rc == -ENETUNREACH || rc == -EHOSTUNREACH) {
			/* no server: what the cache has, if it has it */
			struct stfs_error e2 = { 0 };
			char line[768];

			if (open_cached(s, &e2) == 0) {
				snprintf(line, sizeof(line), "stfs: %s: %s; "
					 "reading what the cache holds", url,
					 err ? err->msg : "no connection");
				stfs_log(line);
				rc = 0;
			}
		} else if (!rc) {
			s->base.info.size = r.total;
			memcpy(s->etag, r.etag, sizeof(s->etag));
			memcpy(s->last_modified, r.last_modified,
			       sizeof(r.last_modified));
			snprintf(s->version, sizeof(s->version), "%s",
				 s->etag[0] ? s->etag : s->last_modified);
			if (stfs_cache_object(url, s->version, r.total,
					      &s->cobj) == 0)
				(void)stfs_cache_put(&s->cobj, STFS_CACHE_HEAD,
						     s->head, s->head_len);
		}
	}
	if (rc) {
		http_close(&s->base);
		return rc;
	}
	s->base.info.etag = s->etag[0] ? s->etag : NULL;
	s->base.info.url = s->url;
	if (s->last_modified[0]) {
		time_t t = curl_getdate(s->last_modified, NULL);
		if (t > 0)
			s->base.info.mtime_sec = t;
	}
	*out = &s->base;
	return 0;
}

int stfs_http_get(const char *url, const struct stfs_auth *auth, size_t max,
		  char **body, size_t *len, struct stfs_http_resp *resp,
		  struct stfs_error *err)
{
	struct request q = { url, NULL, auth, 0, max, UINT64_MAX, 1, NULL,
			     NULL };
	CURL *h;
	int rc;

	*body = NULL;
	*len = 0;
	pthread_once(&init_once, global_init);
	if (!(h = handle_get()))
		return stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET,
				 "out of memory");
	rc = fetch(h, &q, NULL, body, len, resp, err);
	handle_put(h);
	return rc;
}

/*
 * http.h: what the HTTP room (http/) offers the rooms above it: the HTTP
 * source of one object behind a URL (http.c), whole GETs and credential
 * calls (httpc.c), an HTTP answer (httphdr.c), the pages of a listing
 * (pages.c), the transfer threads (transfer.c), redirects resolved once
 * (resolve.c), the plain URL's locate function (locurl.c) and the block
 * engine's fetch interface over HTTP (fetch.c); what requests carry is
 * auth.h (sigv4.c).  http/ uses the block engine (blocks/blocks.h) for
 * an object's bytes; the engine never calls http/.
 */
#ifndef STFS_HTTP_H
#define STFS_HTTP_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "source.h"
#include "auth.h"
#include "blocks/blocks.h"

struct stfs_remote;
struct stfs_remote_opts;
struct stfs_remote_counters;
struct stfs_http_resp;

/* ---- URLs (http.c) ------------------------------------------------------ */

/* Is arg an http:// or https:// URL (the scheme in any case)? */
int stfs_is_url(const char *arg);

/* The locator of a plain http(s) URL (locurl.c), a service of the
 * locator (struct stfs_service, locate.h): loc->arg is set. */
int stfs_locate_url(struct stfs_location *loc, struct stfs_error *err);

/* ---- the HTTP source and whole GETs (http.c, httpc.c) ------------------- */

/* A byte source for the object at url, of r: fetches its first block,
 * which gives its size and version (ETag, Last-Modified): 0, or -errno
 * with err saying why (HTTP status, connection error, a server that
 * ignores ranges).  domain: a Hub file's trust domain ("ORIGIN REPO",
 * hub.c), within which its blocks are keyed by the content its answer
 * names; NULL (any other URL): keyed by url and version. */
int stfs_source_open_http(struct stfs_remote *r, const char *url,
			  struct stfs_auth *auth, const char *domain,
			  struct stfs_source **out, struct stfs_error *err);
/* GET url whole (an API call, a listing or a small file, 200 expected)
 * with auth (or NULL), flags (STFS_REQ_*) and, if etag is strong, If-Match
 * on it, with the same timeouts and retries as reads: 0 with *body (NUL
 * terminated, malloc'd; at most max bytes, else -EFBIG), *len and *resp;
 * or -errno with err saying why (the server's own reason if it gave one). */
int stfs_http_get(struct stfs_remote *r, const char *url,
		  const struct stfs_auth *auth, unsigned flags,
		  const char *etag, size_t max, char **body, size_t *len,
		  struct stfs_http_resp *resp, struct stfs_error *err);

/* ---- trust domains (trust.c) -------------------------------------------- */

/* The trust tag of what a request with a (and flags, STFS_REQ_*) fetches,
 * by the credential it carries: *tag NULL when it carries none (public),
 * else a new "trust:CLASS:HEX" (blocks/trustkey.c): 0, or -errno (a
 * credential, and no tag for it: nothing it fetches may be cached or read
 * from the cache). */
int stfs_http_trust(struct stfs_remote *r, const struct stfs_auth *a,
		    unsigned flags, char **tag);
/* The cache key of key (a URL, a content key) in the trust domain tag
 * (NULL: public, key itself): a new string, or NULL. */
char *stfs_http_trust_key(const char *tag, const char *key);

/* ---- an HTTP answer (httphdr.c), as the client and the locators see it -- */

/* What stfs takes from a response's header lines. */
struct stfs_http_resp {
	int has_range;          /* Content-Range: bytes FIRST-LAST/TOTAL */
	int has_total;          /* ... or bytes * /TOTAL */
	uint64_t range_first, range_last, total;
	char etag[256];         /* "" if none (or unusable) */
	char last_modified[64];
	unsigned retry_after_s; /* 0 if none */
	char link_next[2048];   /* Link: <URL>; rel="next", or "" */
	char error_code[128];   /* X-Error-Code (the Hub), or "" */
	char error_message[512]; /* X-Error-Message (the Hub), or "" */
	int encoded;            /* a Content-Encoding other than identity */
	char encoding[64];      /* its name, or "" if too long to keep */
	/* the Hub's identity of the object a /resolve redirects to */
	char linked_etag[256];  /* X-Linked-Etag, or "" */
	int has_linked_size;
	uint64_t linked_size;   /* X-Linked-Size */
	char commit[64];        /* X-Repo-Commit, or "" */
	/* RateLimit: "NAME";r=REMAINING;t=SECONDS (IETF draft, the Hub's) */
	char ratelimit[160];    /* the value as sent, or "" */
	unsigned ratelimit_t;   /* its t (at most 3600), 0 if none */
	char location[8192];    /* a redirect's target: Location as sent;
				 * httpc.c makes it absolute (or "") */
	long status;            /* the answer's HTTP status (httpc.c) */
	int has_length;         /* Content-Length: length */
	uint64_t length;
	/* S3's x-amz-checksum-{sha256,crc64nvme,crc32,crc32c} and -type, as
	 * sent ("" if none); sum_bad names one empty, too long to be one or
	 * sent twice; sse: x-amz-server-side-encryption; sse_c: its
	 * -customer-algorithm came (SSE-C) */
	char sum_sha256[64], sum_crc64nvme[64], sum_crc32[64], sum_crc32c[64];
	char sum_type[16], sum_bad[40], sse[32];
	int sse_c;
	/* An answer that says two things (two Content-Range headers, two
	 * different ETags, Last-Modified or Content-Length values, a field of
	 * ours folded over two lines or with a space before its colon): it
	 * is refused whatever else it says.  ambiguity says why. */
	int ambiguous;
	char ambiguity[80];
	unsigned seen;          /* the fields of ours seen (parser state) */
	int last_field;         /* the last field's, for a folded line */
};


/* ---- the pages of a listing (pages.c) ------------------------------------ */

/* A listing stops after this many pages (the Hub's are 1,000 files long,
 * S3's 1,000 keys), or at the first page seen before. */
#define STFS_PAGES_MAX 10000
/* What one listing may hold, all its pages together: files (and other
 * entries), and bytes of answers. */
#define STFS_LIST_ENTRIES_MAX 1000000
#define STFS_LIST_BYTES_MAX (256u << 20)

struct stfs_pages {
	uint8_t (*seen)[32];    /* SHA-256 of each page's URL or token */
	size_t n, cap;
	size_t entries;         /* entries of the pages so far */
	uint64_t bytes;         /* bytes of their answers */
	int64_t deadline_ms;    /* CLOCK_MONOTONIC; 0: none */
};

/* Remember the page named by key (its URL, its continuation token): 0,
 * -ELOOP if it was seen before, -EFBIG past STFS_PAGES_MAX, -ETIME past
 * the listing's deadline (timeout_ms from its first page; 0: none),
 * -ENOMEM. */
int stfs_pages_add(struct stfs_pages *p, const char *key,
		   unsigned timeout_ms);
/* A page's answer of bytes with entries in it, counted: 0, or -E2BIG
 * past STFS_LIST_BYTES_MAX bytes or -EMLINK past STFS_LIST_ENTRIES_MAX
 * entries, all pages together. */
int stfs_pages_took(struct stfs_pages *p, size_t entries, size_t bytes);
/* Why stfs_pages_add()/_took() refused (rc), of what ("the Hub's file
 * list"; a loop: page N, again, key), into err: -EIO (-ENOMEM as it
 * is). */
int stfs_pages_fail(const struct stfs_pages *p, int rc, const char *what,
		    const char *again, const char *key, unsigned timeout_ms,
		    struct stfs_error *err);
void stfs_pages_free(struct stfs_pages *p);


/* ---- the transfer threads (transfer.c) --------------------------------- */

#define STFS_TRANSFER_LOOPS 2

struct stfs_transfer_loop {
	CURLM *multi;
	pthread_t thread;
	struct stfs_transfer_wait *to_add;
	struct stfs_transfers *t;
};

struct stfs_transfers {
	pthread_mutex_t mu;
	struct stfs_transfer_loop loops[STFS_TRANSFER_LOOPS];
	pid_t pid;                      /* the process the threads run in */
	int running, stopping;
	unsigned busy;                  /* transfers handed over */
	unsigned turn;
};

void stfs_transfers_init(struct stfs_transfers *t);
/* Stop the threads once their transfers are done (they start again on
 * the next transfer); with idle_only, only if none runs. */
void stfs_transfers_stop(struct stfs_transfers *t, int idle_only);
void stfs_transfers_fini(struct stfs_transfers *t);
/* Run the transfer h is set up for, as curl_easy_perform() would, its
 * callbacks called on a transfer thread; wait for it and return its
 * result.  Meanwhile, each stfs_transfer_wake() for h has hook(arg) (if
 * not NULL) called on this, the caller's, thread.  Any number of threads
 * may call this at once. */
CURLcode stfs_transfer(struct stfs_transfers *t, CURL *h,
		       void (*hook)(void *arg), void *arg);
/* From a callback of h's transfer: have its caller run its hook. */
void stfs_transfer_wake(struct stfs_transfers *t, CURL *h);

/* ---- the HTTP client (httpc.c: a request; client.c: the object) ---------- */

/* A redirect is an answer (stfs_httpc_fetch() returns STFS_HTTP_REDIRECT,
 * the target in resp->location), not followed by libcurl. */
#define STFS_REQ_NOFOLLOW 1u
/* A 429 is not retried here: the caller waits (resolve.c). */
#define STFS_REQ_NO429 2u
/* S3's checksums asked for: x-amz-checksum-mode: ENABLED (signed) */
#define STFS_REQ_CHECKSUMS 4u
/* stfs_http_get(): the answer kept in the cache (http/kept.c), and
 * answered from there offline, with no request */
#define STFS_REQ_KEEP 8u
/* One attempt, no retry (stfs_http_call(): IMDS, which may not be there) */
#define STFS_REQ_ONCE 16u
/* No credentials of ~/.netrc (credential services: stfs_http_call()) */
#define STFS_REQ_NONETRC 32u
/* A request to the object's own URL, which redirects (counted apart) */
#define STFS_REQ_RESOLVE 64u
/* Bytes of a mirror (-o mirror=), not of the origin (counted apart) */
#define STFS_REQ_MIRROR 128u
#define STFS_HTTP_REDIRECT 1

#define STFS_IDLE_MAX 16

struct stfs_http_client {
	const struct stfs_remote_opts *o;
	struct stfs_transfers transfers;
	pthread_mutex_t idle_mu;
	CURL *idle[STFS_IDLE_MAX];      /* handles for synchronous requests */
	unsigned nidle;
	atomic_uint jitter;             /* the backoff's random state */
	struct stfs_remote_counters *count;
	/* an error document's reason in words, into out (0; else the
	 * answer is not one: S3's, stfs_s3_error_parse(), given by the
	 * client's owner, remote.c or s3/creds.c), or NULL */
	int (*error_text)(const char *doc, size_t len, char *out,
			  size_t outsz);
	/* the environment's trust and credentials, read once at init:
	 * CURL_CA_BUNDLE (else SSL_CERT_FILE), SSL_CERT_DIR, NETRC; or NULL */
	char *ca_file, *ca_dir, *netrc;
};

/* 0, or -ENOMEM (then nothing to finish). */
int stfs_httpc_init(struct stfs_http_client *c,
		    const struct stfs_remote_opts *o,
		    struct stfs_remote_counters *count);
void stfs_httpc_fini(struct stfs_http_client *c);
/* Sleep ms, in steps of at most 100 ms, unless cancel is set (a
 * Retry-After of 30 s does not hold up an unmount): 0, or -1 if it was. */
int stfs_nap(unsigned ms, const atomic_int *cancel);
/* An easy handle for a synchronous request, and back when done. */
CURL *stfs_httpc_handle(struct stfs_http_client *c);
void stfs_httpc_release(struct stfs_http_client *c, CURL *h);
/*
 * Do request q with handle h, with retries: bytes [q->off, q->off +
 * q->len) into buf, *got of them; or with q->whole, the body into a new
 * *body (NUL terminated, at most q->len bytes).  q->want_total is the
 * object's size (UINT64_MAX while opening: then a short answer at the end
 * of the object is fine, and *resp tells the size and version).  0, or
 * -errno with err filled (the server's reason, when it gave one); with
 * STFS_REQ_NOFOLLOW, STFS_HTTP_REDIRECT for a redirect.  *resp (if
 * given) is filled by every attempt that got an answer, failed or not.
 */
int stfs_httpc_fetch(struct stfs_http_client *c, CURL *h,
		     const struct stfs_request *q, char *buf, char **body,
		     size_t *got, struct stfs_http_resp *resp,
		     struct stfs_error *err);
/* What a request of the client's own carries beyond the engine's struct
 * stfs_request (stfs_http_call(): another method, header lines, a
 * body). */
struct stfs_http_extra {
	const char *method;         /* NULL: GET */
	const char *const *headers; /* "Name: value" lines, or NULL */
	size_t nheaders;
	const char *post;           /* the body of a POST or PUT, or NULL */
	size_t post_len;
};
/* stfs_httpc_fetch() of q carrying ex too (NULL: nothing more). */
int stfs_httpc_fetch_ex(struct stfs_http_client *c, CURL *h,
			const struct stfs_request *q,
			const struct stfs_http_extra *ex, char *buf,
			char **body, size_t *got, struct stfs_http_resp *resp,
			struct stfs_error *err);

/* One attempt of q (with method, or NULL: GET) with h, answered status
 * (0: none) with got body bytes (attempt 0: the first), counted into the
 * client's owner's counters, if any (counted.c). */
void stfs_httpc_counted(struct stfs_http_client *c, CURL *h,
			const struct stfs_request *q, const char *method,
			long status, size_t got, unsigned attempt);

/* One call of a credential service (s3/: STS, IMDS, the container
 * endpoint): method ("GET", "PUT" or "POST") on url with header lines and
 * a body, the answer's body (200 only, at most max bytes) into *body (NUL
 * terminated, malloc'd) and *len.  A redirect is refused, ~/.netrc is not
 * read, flags adds STFS_REQ_ONCE.  0, or -errno with err saying why (the
 * header lines, which may hold a secret, never in it). */
int stfs_http_call(struct stfs_http_client *c, const char *method,
		   const char *url, const char *const *headers,
		   size_t nheaders, const char *post, size_t post_len,
		   unsigned flags, size_t max, char **body, size_t *len,
		   struct stfs_error *err);

/* ---- redirects resolved once (resolve.c) ------------------------------- */

/* Where the requests for an object's URL go: the target its redirect
 * points to, while valid.  All under mu. */
struct stfs_resolver {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int state;                  /* RV_* of resolve.c */
	int resolving;              /* a thread asks the URL now */
	char *target;               /* the redirect's target, or NULL */
	struct stfs_auth *tauth;    /* what requests to target carry */
	unsigned gen;               /* which target: +1 each resolve */
	/* wall-clock times in ms (the URLs' expiries are) */
	int64_t refresh_at;         /* resolve again from then on */
	int64_t valid_until;        /* the target is used until then */
	int64_t quiet_until;        /* no resolve before then: */
	int quiet_code;             /* what a read gets meanwhile */
	int limited;                /* a 429 episode: its waits spent */
	int logged;                 /* this episode's 429 was logged */
	unsigned refused_gen;       /* the last target refused (403...) */
	atomic_uint worked_gen;     /* the last target that answered */
	/* the identity the first resolve gave (the Hub's headers) */
	char linked_etag[256], commit[64];
	int has_linked_size;
	uint64_t linked_size;
};

struct stfs_object;

void stfs_resolver_init(struct stfs_resolver *rv);
void stfs_resolver_fini(struct stfs_resolver *rv);
/* When the signed URL url expires, from its query: X-Amz-Date with
 * X-Amz-Expires (S3, SigV4), X-Goog-Date with X-Goog-Expires (GCS), or
 * Expires (CloudFront, S3 SigV2, nginx's secure_link; any case), a Unix
 * time.  0 with *when, or -ENOENT when it does not say. */
int stfs_url_expiry(const char *url, time_t *when);
/* Do request q (whose url is o's) as stfs_httpc_fetch() does, but to
 * the target o's URL redirects to, resolved once and reused: resolved
 * again shortly before it expires (its query says when, else after
 * STFS_TARGET_DEFAULT_S), and once more when the target refuses (403,
 * 410, 404).  Credentials go to o's URL's own origin only.  A 429 while
 * resolving is waited out as the server says (at most 30 s a wait,
 * o->r->o.retries waits), logged once.  A resolve that finds another
 * object (the Hub's X-Linked-Etag, X-Linked-Size or X-Repo-Commit) is
 * -ESTALE. */
int stfs_object_fetch(struct stfs_object *o, CURL *h,
		      const struct stfs_request *q, char *buf, size_t *got,
		      struct stfs_http_resp *resp, struct stfs_error *err);
#define STFS_TARGET_DEFAULT_S 600

/* The block engine's fetch interface, by HTTP (fetch.c): remote.c gives
 * it to the engine as struct stfs_remote's fetch. */
const struct stfs_fetch_ops *stfs_http_fetch_ops(void);

/* ---- public_net: which addresses a connection may go to (netpolicy.c) -- */

/* One attempt's check: the policy, and why a connection was refused. */
struct stfs_net_check {
	const struct stfs_net_policy *p;
	char why[160];
};

struct sockaddr;
/* Add CIDR (an address, IPv4 or IPv6, with /BITS or alone) to p's
 * exceptions: 0, -EINVAL, or -E2BIG past STFS_NET_ALLOW_MAX. */
int stfs_net_allow(struct stfs_net_policy *p, const char *cidr);
/* NULL if p lets a connection go to sa, else what sa is ("a loopback"),
 * with the address in shown. */
const char *stfs_net_refused(const struct stfs_net_policy *p,
			     const struct sockaddr *sa, char *shown,
			     size_t shownsz);
/* libcurl's CURLOPT_OPENSOCKETFUNCTION with a struct stfs_net_check: the
 * socket, or CURL_SOCKET_BAD with why set. */
curl_socket_t stfs_net_opensocket(void *clientp, curlsocktype purpose,
				  struct curl_sockaddr *address);

#endif

/*
 * remote.h: what the rooms of the source layer share (never installed,
 * and for src/lib/source alone): URLs and schemes, the remote object that
 * every http(s)://, hf:// and s3:// source of a model belongs to, an HTTP
 * answer, what requests carry, listings' pages, the services' locators,
 * and the interfaces between the files of the remote layer:
 *
 *   remote.c           the options (parsed from key=value text), the object
 *   http/http.c        the source of one object behind a URL (it names an
 *                      object; hub/ and s3/ find the URLs)
 *   http/httpc.c       the HTTP client: one request, its checks, retries
 *   http/resolve.c     redirects followed once per object: the target
 *                      reused while valid, resolved again before it expires
 *   http/transfer.c    the threads that move every request's bytes
 *   blocks/blocks.c    the block engine: blocks in flight, reads of an
 *                      object's bytes by block
 *   blocks/writeback.c the write-behind: fetched blocks to the cache, by
 *                      the writer threads, flushed in batches
 *   blocks/lookup.c    what is known before a fetch: the cached blocks
 *                      (kept open) and the fetches that failed a moment ago
 *   blocks/pool.c      the worker threads, their queues, the prefetch policy
 *   blocks/cache.c     the cache store on disk
 *   blocks/cachedir.c  the cache directory: usable, private, walked without
 *                      following a link
 *
 * What one room keeps to itself is in its own header: http/httphdr.h,
 * hub/hub.h, s3/s3.h.
 *
 * Everything here is state of one struct stfs_remote, made when a model
 * is opened and freed with it: two models in one process can have two
 * configurations, and nothing is shared but libcurl's own global state.
 */
#ifndef STFS_REMOTE_H
#define STFS_REMOTE_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "source.h"
#include "cache.h"

struct stfs_http_resp;

/* ---- URLs and schemes (scheme.c; stfs_is_url in httpc.c) ---------------- */

/* Is arg an http:// or https:// URL (the scheme in any case)? */
int stfs_is_url(const char *arg);

/* The scheme of a SOURCE argument or endpoint, in any case (scheme.c). */
enum stfs_scheme {
	STFS_SCHEME_NONE,       /* not a URL stfs reads: a local path */
	STFS_SCHEME_HTTP,
	STFS_SCHEME_HTTPS,
	STFS_SCHEME_HF,
	STFS_SCHEME_S3,
};
enum stfs_scheme stfs_url_scheme(const char *arg);
/* Write url's scheme (if it is one of the above) in lower case. */
void stfs_url_lower_scheme(char *url);
/* path with each component URL-escaped, its slashes kept (repo.c): a new
 * string, or NULL. */
char *stfs_url_escape_path(const char *path);

/* ---- the remote object, seen by the rooms (remote.c, http.c, httpc.c) ---- */

/* -o offline: no network, the cache only. */
int stfs_remote_offline(const struct stfs_remote *r);
enum stfs_s3_style stfs_remote_s3_style(const struct stfs_remote *r);
/* list_timeout=, in ms (a listing's pages, all of them) */
unsigned stfs_remote_list_timeout_ms(const struct stfs_remote *r);

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

/* ---- what requests carry (sigv4.c) ------------------------------------- */

/* What a remote source's requests carry, shared by the sources of one
 * location (reference counted): a bearer token (the Hugging Face Hub) or
 * a user and password (from an http(s) URL), both sent by libcurl to the
 * URL's own host only, never on to the host of a redirect; or AWS keys,
 * with which every request is signed (and redirects are not followed). */
struct stfs_auth {
	atomic_uint refs;
	char *bearer;
	char *user, *password;          /* HTTP basic authentication */
	char *query;                    /* added to every request's URL (a
					 * presigned URL's signature) */
	int sign;                       /* access_key and secret_key set */
	char *access_key, *secret_key, *token, *region;
	char *ca_file;                  /* CA certificates for its hosts, or
					 * NULL: those of the environment */
	struct stfs_creds *creds;       /* temporary keys, refreshed (s3/
					 * creds.c), used instead of those
					 * above; or NULL */
};

struct stfs_auth *stfs_auth_new(const char *bearer, const char *access_key,
				const char *secret_key, const char *token,
				const char *region);
struct stfs_auth *stfs_auth_ref(struct stfs_auth *a);
void stfs_auth_unref(struct stfs_auth *a);
struct curl_slist;
/* Append to list the headers that sign a GET of url now (x-amz-date,
 * x-amz-content-sha256, x-amz-security-token, with STFS_REQ_CHECKSUMS in
 * flags x-amz-checksum-mode, Authorization), with a's keys or, with
 * a->creds, the current ones of those; *ok is 0 if that failed, why (if
 * not NULL) saying why (the credentials expired and could not be
 * refreshed).  Returns the list. */
struct curl_slist *stfs_auth_headers(const struct stfs_auth *a,
				     const char *url, unsigned flags,
				     struct curl_slist *list, int *ok,
				     char *why, size_t whysz);
/* The refreshing credentials of a (s3/creds.c): stop their thread before
 * the process forks (it starts again at the next request), or free them
 * (the last reference to a). */
void stfs_auth_park(struct stfs_auth *a);
void stfs_creds_park(struct stfs_creds *c);
void stfs_creds_free(struct stfs_creds *c);
/* The current keys of c, copies (free with stfs_creds_keys_drop()): 0, or
 * -EKEYEXPIRED with why saying since when and why no refresh worked. */
struct stfs_creds_keys {
	char *access, *secret, *token;  /* token: NULL if none */
	time_t expires;                 /* 0: they do not expire */
};
int stfs_creds_now(struct stfs_creds *c, struct stfs_creds_keys *k,
		   char *why, size_t whysz);
/* Free k's copies, the secret and the token overwritten first. */
void stfs_creds_keys_drop(struct stfs_creds_keys *k);

/* An S3 error document's "Code: Message" into out (s3xml.c), for the
 * client's messages, cut to fit and control characters made spaces: 0,
 * -EINVAL when xml is not one, -ENOSPC when not one character fits.  Only
 * the start of the document may be at hand: a Code complete before the
 * cut is enough. */
int stfs_s3_error_parse(const char *xml, size_t len, char *out,
			size_t outsz);
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

/* ---- the locators of services (locate.c, hub/, s3/) --------------------- */

/* The same, but one *.safetensors file is a file, not a set of shards
 * (a repo or a prefix with its model.safetensors). */
int stfs_location_pick_one(struct stfs_location *loc, char **all, size_t n,
			   const char *where, struct stfs_error *err);
/* The locators of hf:// (hub.c) and s3:// (s3.c): loc->arg is set. */
int stfs_locate_hf(struct stfs_location *loc, struct stfs_error *err);
int stfs_locate_s3(struct stfs_location *loc, struct stfs_error *err);
/* Fetch the small file f of an s3:// loc whole and check it (s3sum.c):
 * f->bytes, or f->fault; f->sum and f->unchecked say what was checked. */
void stfs_s3_fetch_small(const struct stfs_location *loc,
			 struct stfs_rfile *f);
/* f could not be fetched (rc, e: why): its fault says so (repo.c). */
void stfs_rfile_unfetched(struct stfs_rfile *f, int rc,
			  const struct stfs_error *e);
/* ---- the options (remote.c) ------------------------------------------- */

/* ---- which addresses a connection may go to (netpolicy.c) -------------- */

#define STFS_NET_ALLOW_MAX 16

/* -o public_net and its -o allow_net=CIDR exceptions (IPv4 as
 * ::ffff:a.b.c.d/96+N). */
struct stfs_net_policy {
	int on;                         /* public_net given */
	unsigned n;
	struct {
		unsigned char a[16];
		unsigned bits;
	} nets[STFS_NET_ALLOW_MAX];
};

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

struct stfs_remote_opts {
	unsigned connect_timeout_ms;    /* per attempt */
	unsigned stall_timeout_ms;      /* under min_speed for this long */
	unsigned list_timeout_ms;       /* a whole listing, its pages */
	unsigned retries;               /* after the first attempt */
	unsigned connections;           /* parallel requests, >= 1 */
	uint64_t min_speed;             /* bytes/s; 0: only no byte at all */
	size_t block;                   /* bytes per block, a power of two */
	char *cache_dir;                /* absolute, or NULL: no cache */
	uint64_t cache_max;             /* bytes of blocks at most */
	int cache_given, nocache, offline;
	int unvalidated;                /* objects with no validator opened
					 * (uncached) rather than refused */
	enum stfs_s3_style s3_style;
	struct stfs_net_policy net;     /* public_net, allow_net= */
	void (*log)(void *ctx, const char *line);
	void *log_ctx;
	void (*progress)(void *ctx, const struct stfs_open_progress *p);
	void *progress_ctx;
};

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

/* ---- the HTTP client (httpc.c) ------------------------------------------- */

/* A reader to answer as soon as its bytes [at, at + len) of the range
 * have come, before the rest of the range (a block) has: fn(arg) once. */
struct stfs_early {
	size_t at, len;
	void (*fn)(void *arg, const char *bytes);
	void *arg;
	int ready;                  /* the bytes have come (transfer thread) */
	int done;                   /* fn was called (the fetching thread) */
};

/* How far a range's bytes have come (blocks.c): when good reaches want,
 * want goes to SIZE_MAX and the fetching thread runs fn(arg). */
struct stfs_progress {
	atomic_size_t good;         /* bytes from the start that came, good */
	atomic_size_t want;         /* wake the fetching thread at this */
	void (*fn)(void *arg);
	void *arg;
};

/* One request: a range of an object (or its whole body, whole). */
struct stfs_request {
	const char *url;
	const char *etag;           /* the version seen at open: sent in */
	const char *last_modified;  /* If-Match or If-Unmodified-Since, and
				     * checked in answers */
	const struct stfs_auth *auth;
	uint64_t off;
	size_t len;                 /* whole: the most bytes taken */
	uint64_t want_total;        /* the object's size, or UINT64_MAX */
	int whole;
	const atomic_int *cancel;   /* set: abort */
	struct stfs_early *early;   /* or NULL */
	struct stfs_progress *progress; /* or NULL */
	unsigned flags;             /* STFS_REQ_* */
	uint64_t deadline_ms;       /* no backoff past it (monotonic ms:
				     * its reader's bound), or 0 */
	/* stfs_http_call(): another method, header lines, a body */
	const char *method;         /* NULL: GET */
	const char *const *headers; /* "Name: value" lines, or NULL */
	size_t nheaders;
	const char *post;           /* the body of a POST or PUT, or NULL */
	size_t post_len;
};

/* The longest backoff before a retry: a Retry-After is capped to it, and
 * a reader waits at most retries x that for a read that fails. */
#define STFS_BACKOFF_MAX_S 30
/* CLOCK_MONOTONIC in milliseconds (httpc.c). */
uint64_t stfs_now_ms(void);

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
#define STFS_HTTP_REDIRECT 1

/* What the remote did (stfs_remote_stats()). */
struct stfs_remote_counters {
	_Atomic uint64_t requests, retries, bytes, hits, failed;
	_Atomic uint64_t resolves, rate_limited;
};

#define STFS_IDLE_MAX 16

struct stfs_http_client {
	const struct stfs_remote_opts *o;
	struct stfs_transfers transfers;
	pthread_mutex_t idle_mu;
	CURL *idle[STFS_IDLE_MAX];      /* handles for synchronous requests */
	unsigned nidle;
	atomic_uint jitter;             /* the backoff's random state */
	struct stfs_remote_counters *count;
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

/* ---- the block engine (blocks.c) and its workers (pool.c) ---------------- */

#define STFS_FAIL_SLOTS 16
#define STFS_FD_SLOTS 16

/* A fetch of bytes [off, end) that failed with rc, remembered until
 * until_ms (monotonic). */
struct stfs_failure {
	uint64_t off, end, until_ms;
	int rc;
};

/* One remote object as the block engine sees it (embedded in a source). */
struct stfs_object {
	struct stfs_remote *r;
	const char *url;
	const char *etag;           /* the version seen at open, checked */
	const char *last_modified;  /* in every answer ("" if none) */
	const struct stfs_auth *auth;
	struct stfs_resolver *rv;   /* its redirect, or NULL: url itself */
	uint64_t size;
	struct stfs_cache_obj cobj; /* its blocks on disk, if cached */
	atomic_int closing;         /* abort its transfers and retries */
	/* under the pool's mu: */
	unsigned inflight;          /* asynchronous reads not done */
	pthread_cond_t idle;
	uint64_t next_off;          /* where the last read ended */
	unsigned streak;            /* reads in a row that went on from it */
	uint64_t pf_next;           /* the next block to prefetch */
	struct stfs_object *next;   /* read after this one, or NULL */
	/* under the blocks' mu: the fetches that failed last (a ring: a
	 * reader's block and the prefetches beside it fail together) */
	struct stfs_failure failed[STFS_FAIL_SLOTS];
	unsigned nfailed;           /* the next slot to use */
	/* cached blocks kept open for reading, their headers checked
	 * (lookup.c): block b in slot b % STFS_FD_SLOTS (fd -1: none);
	 * fd_lock is held to read with one, and to change */
	pthread_rwlock_t fd_lock;
	struct stfs_cache_blk slot[STFS_FD_SLOTS];
};

struct stfs_inflight;

/* What one fetching thread carries: its handle, and its blocks fetched
 * but not yet in the cache (written after its reader is answered). */
struct stfs_fetcher {
	CURL *h;
	struct stfs_inflight *to_write;
	uint64_t deadline_ms;   /* its reader's bound (stfs_request), or 0 */
};

#define STFS_SPARE_MAX 16

struct stfs_blocks {
	pthread_mutex_t mu;             /* the blocks in flight */
	pthread_cond_t cv;
	struct stfs_inflight *list;
	unsigned nheld;
	char *spare[STFS_SPARE_MAX];    /* block buffers for the next fetch */
	unsigned nspare;
};

struct stfs_job;

/* Cache writer threads (writeback.c): a batch's write waits for its
 * flush to the disk, and another writer writes meanwhile. */
#define STFS_WRITERS 4

struct stfs_pool {
	pthread_mutex_t mu;
	pthread_cond_t work;
	struct stfs_job *queue, **queue_tail;   /* reads someone waits for */
	struct stfs_job *pf_queue, **pf_tail;   /* then prefetches */
	unsigned n_pf_queued;
	struct stfs_job *warm_queue, **warm_tail; /* then a warm's blocks */
	pthread_t *workers;
	unsigned nworkers;
	pid_t pid;                      /* the process the threads run in */
	int stopping;
	/* blocks for the writer threads (writeback.c) */
	struct stfs_inflight *wq, **wq_tail;
	unsigned nwq;
	pthread_cond_t wq_cv;
	unsigned writing;               /* blocks the writer writes now */
	pthread_cond_t written;         /* the writer has nothing to do */
	pthread_t writer_th[STFS_WRITERS];
	unsigned writer_on;             /* writer threads running */
};

/* blocks ahead a prefetch brings: 32 MiB of them, at least 2 */
unsigned stfs_prefetch_blocks(const struct stfs_remote *r);
/* The length of block b of o. */
size_t stfs_block_len(const struct stfs_object *o, uint64_t b);

void stfs_blocks_init(struct stfs_blocks *b);
void stfs_blocks_fini(struct stfs_blocks *b);
/* Bytes [off, off + len) of o (within its size) from the cache, memory
 * or the network; early, if given, for a read within one block. */
int stfs_blocks_read(struct stfs_fetcher *f, struct stfs_object *o,
		     void *buf, size_t len, uint64_t off,
		     struct stfs_early *early);
/* Bytes [off, off + len) of o, within one block, when that block is on
 * the wire or held in memory: the reader is answered by done(arg, rc) as
 * soon as they have come, here or on the fetching thread, and waits on no
 * thread meanwhile: 0.  -ENOENT: the block is not listed (read it). */
int stfs_blocks_attach(struct stfs_object *o, void *buf, size_t len,
		       uint64_t off, stfs_source_done done, void *arg);
/* The cache and the failures of a moment ago, asked about bytes [off,
 * off + len) of o (len 0: is the block at off cached whole) (lookup.c):
 * 0 (buf filled from the cache), the -errno of a fetch of them that
 * failed a moment ago (the kernel's retry of a read that failed is
 * answered with it at once, not after another Retry-After), or -ENOENT
 * (to be fetched). */
int stfs_blocks_lookup(struct stfs_object *o, void *buf, size_t len,
		       uint64_t off);
/* The fetch of [off, end) of o failed with rc (under the blocks' mu). */
void stfs_blocks_failed(struct stfs_object *o, uint64_t off, uint64_t end,
			int rc);
/* o's descriptors of cached blocks: none open yet; all closed. */
void stfs_lookup_init(struct stfs_object *o);
void stfs_lookup_fini(struct stfs_object *o);
/* Bring block b of o into the cache (or memory), for a reader to come. */
void stfs_blocks_prefetch(struct stfs_fetcher *f, struct stfs_object *o,
			  uint64_t b);
/* Bring block b of o into the cache (a warm; written behind, as a
 * read's): 0, or -errno (-EOPNOTSUPP: no cache). */
int stfs_blocks_warm(struct stfs_fetcher *f, struct stfs_object *o,
		     uint64_t b);
/* The cache's view of block me (to write it): its pages kept if no
 * reader has had its bytes. */
void stfs_inflight_item(struct stfs_inflight *me, struct stfs_cache_item *it);
/* Block me is written to the cache (rc 0: unlisted, freed), or could not
 * be (rc: held in memory for its readers, as without a cache). */
void stfs_blocks_written(struct stfs_remote *r, struct stfs_inflight *me,
			 int rc);
struct stfs_object *stfs_inflight_object(const struct stfs_inflight *me);
struct stfs_inflight **stfs_inflight_later(struct stfs_inflight *me);
/* o is closing: let go of its blocks held in memory. */
void stfs_blocks_forget(struct stfs_blocks *b, const struct stfs_object *o);

void stfs_pool_init(struct stfs_pool *p);
void stfs_pool_fini(struct stfs_pool *p);
/* Stop and join the workers and the writer (it writes what is queued). */
void stfs_pool_stop(struct stfs_remote *r);
/* Queue a read of [off, off + len) of o into buf for a worker, done
 * called when it is in (maybe before this returns), and plan prefetches;
 * ext as in stfs_source_ops.read_async. */
void stfs_pool_read(struct stfs_object *o, void *buf, size_t len,
		    uint64_t off, const struct stfs_extent *ext,
		    stfs_source_done done, void *arg);
/* next is read after o (stfs_source_ops.follow), or NULL. */
void stfs_pool_follow(struct stfs_object *o, struct stfs_object *next);
/* A read served without a worker (a cache hit): plan prefetches. */
void stfs_pool_hit(struct stfs_object *o, uint64_t off, size_t len,
		   const struct stfs_extent *ext);
/* One asynchronous job of o (a read, prefetch, warm or block queued for
 * the writers) is over (under the pool's mu). */
void stfs_pool_job_over(struct stfs_object *o);
/* o is closing: drop its prefetches and wait for its reads. */
void stfs_pool_drain(struct stfs_object *o);
/* Drop o's warm blocks not started yet (each answered -ECANCELED). */
void stfs_pool_unwarm(struct stfs_object *o);
/* Bring block b of o into the cache for a warm (`stfs prefetch`), after
 * every read and prefetch queued: done(arg, 0) once it is fetched and
 * written, or handed to the writers (stfs_writeback_flush()); or -errno. */
void stfs_pool_warm(struct stfs_object *o, uint64_t b, stfs_source_done done,
		    void *arg);

/* ---- write-behind (writeback.c) ------------------------------------------ */

/* The blocks f fetched go to the cache, after their readers have been
 * answered: to the writer threads, or written here, together. */
void stfs_writeback(struct stfs_fetcher *f);
/* Start the writer threads (under the pool's mu, with the workers). */
void stfs_writeback_start(struct stfs_remote *r);
/* Stop and join them once they have written what is queued. */
void stfs_writeback_stop(struct stfs_remote *r);
/* The cache could not take a block of len bytes (0: an object's entry)
 * for rc: logged, the first time only. */
void stfs_writeback_failed(struct stfs_remote *r, size_t len, int rc);
/* Wait until the writers have written every block handed to them. */
void stfs_writeback_flush(struct stfs_remote *r);

/* ---- the remote object (remote.c) ---------------------------------------- */

struct stfs_remote {
	struct stfs_remote_opts o;
	pthread_mutex_t progress_mu;    /* one progress report at a time */
	struct stfs_cache cache;        /* used when o.cache_dir is set */
	struct stfs_remote_counters count;
	struct stfs_http_client http;
	struct stfs_blocks blocks;
	struct stfs_pool pool;
};

/* A line for the remote's log (a read that failed, and why). */
void stfs_remote_log(const struct stfs_remote *r, const char *line);
/* The cache, or NULL when there is none. */
struct stfs_cache *stfs_remote_cache(struct stfs_remote *r);

#endif

/*
 * http.c: the byte source of one object behind an http:// or https://
 * URL (plain, or one that hub.c or s3.c found), of a model's remote layer
 * (engine.h): what names the object, its size and version, and its reads.
 *
 * Opening fetches the first 64 KiB (enough for the headers of most shards;
 * a longer header takes a second request), which gives the object's size
 * (Content-Range) and version (a strong ETag, else Last-Modified), and
 * keeps it: the header is then read from memory.  Every later read goes
 * to the block engine (blocks.c), which asks for it on that version's
 * condition and checks each answer against that size and every validator
 * seen at open (httpc.c, httphdr.c).  An object with neither validator is
 * refused at open unless the options allow it (unvalidated); it is then
 * never cached.  At open, 404/410 are ENOENT; after it, an object
 * gone is EIO.  Offline, or with no server to answer, a source opens from
 * what the cache holds.
 *
 * Asynchronous reads whose blocks are in the cache are served here, on
 * the caller's thread (stfs_blocks_lookup(), lookup.c); the others go to
 * the workers (pool.c).  Synchronous reads run on the caller's thread
 * with a handle of the client's pool.
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format.h"
#include "engine.h"
#include "metrics.h"
#include "scheme.h"
#include "sourceops.h"
#include "http/http.h"
#include "httphdr.h"

#define STFS_HTTP_FIRST (64u << 10)

struct http_src {
	struct stfs_source base;
	struct stfs_object obj;     /* what the block engine reads */
	char *url;
	char *domain;               /* a Hub file's trust domain, or NULL */
	struct stfs_auth *auth;     /* its credentials, or NULL */
	char *trust;                /* their trust tag (trust.c), or NULL:
				 * public */
	int untrusted;              /* credentials with no tag: the cache
				 * is neither read nor written */
	struct stfs_resolver rv;    /* where its redirect points */
	char etag[256];
	char last_modified[256];
	char *head;                 /* the first block */
	size_t head_len;
	char version[256];          /* ETag, else Last-Modified */
};

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


static int http_read(struct stfs_source *src, void *buf, size_t len,
		     uint64_t off)
{
	struct http_src *s = (struct http_src *)src;
	struct stfs_http_client *c = s->obj.r->http;
	struct stfs_fetcher f = { NULL, NULL, 0 };
	int rc;

	if (off + len <= s->head_len) {
		memcpy(buf, s->head + off, len);
		return 0;
	}
	f.h = stfs_httpc_handle(c);
	rc = f.h ? stfs_blocks_read(&f, &s->obj, buf, len, off, NULL) :
		   -ENOMEM;
	stfs_httpc_release(c, f.h);
	stfs_writeback(&f);
	return rc;
}

static void http_read_async(struct stfs_source *src, void *buf, size_t len,
			    uint64_t off, const struct stfs_extent *ext,
			    stfs_source_done done, void *arg)
{
	struct http_src *s = (struct http_src *)src;
	int rc;

	if (off + len <= s->head_len) {
		stfs_m_read(s->obj.r->o.metrics, STFS_FROM_FETCH, len);
		memcpy(buf, s->head + off, len);
		done(arg, 0);
		return;
	}
	/* blocks held in memory for their readers (blocks.c: those the
	 * cache took past its page cache) are copied from there */
	if (stfs_pool_held(&s->obj, buf, len, off, ext, done, arg) == 0) {
		stfs_m_read(s->obj.r->o.metrics, STFS_FROM_FETCH, len);
		return;
	}
	/* blocks in the cache are read here, as a local file would be: a
	 * hand-over to a worker costs more than the read; and the kernel's
	 * retry of a read that just failed fails at once, not after a
	 * worker is free (they may all wait for a Retry-After) */
	rc = stfs_blocks_lookup(&s->obj, buf, len, off);
	stfs_m_read(s->obj.r->o.metrics, rc ? STFS_FROM_FETCH : STFS_FROM_CACHE,
		    rc == 0 || rc == -ENOENT ? len : 0);
	if (rc == 0)
		stfs_pool_hit(&s->obj, off, len, ext);
	if (rc != -ENOENT) {
		done(arg, rc);
		return;
	}
	stfs_pool_read(&s->obj, buf, len, off, ext, done, arg);
}

static void http_close(struct stfs_source *src)
{
	struct http_src *s = (struct http_src *)src;

	atomic_store(&s->obj.closing, 1);   /* transfers of s end now */
	stfs_pool_drain(&s->obj);
	stfs_blocks_forget(&s->obj.r->blocks, &s->obj);
	stfs_object_fini(&s->obj);
	stfs_resolver_fini(&s->rv);
	stfs_auth_unref(s->auth);
	free(s->trust);
	free(s->head);
	free(s->url);
	free(s->domain);
	free(s->base.name);
	free(s);
}

static int http_warm_info(const struct stfs_source *src,
			  struct stfs_warm_info *wi)
{
	const struct http_src *s = (const struct http_src *)src;
	const struct stfs_remote *r = s->obj.r;

	if (!s->obj.cobj.valid)
		return -ENOSPC;
	*wi = (struct stfs_warm_info){ .block = r->o.block,
				       .connections = r->o.connections,
				       .cache_max = r->o.cache_max,
				       .remote = r };
	return 0;
}

static void http_warm(struct stfs_source *src, uint64_t b,
		      stfs_source_done done, void *arg)
{
	struct http_src *s = (struct http_src *)src;

	stfs_pool_warm(&s->obj, b, done, arg);
}

static void http_warm_flush(struct stfs_source *src)
{
	stfs_writeback_flush(((struct http_src *)src)->obj.r);
}

static void http_warm_cancel(struct stfs_source *src)
{
	stfs_pool_unwarm(&((struct http_src *)src)->obj);
}

static const struct stfs_source_ops http_ops;

/* Only another object of the same remote layer is followed into. */
static void http_follow(struct stfs_source *src, struct stfs_source *next)
{
	struct http_src *s = (struct http_src *)src;
	struct http_src *n = (struct http_src *)next;

	stfs_pool_follow(&s->obj, next && next->ops == &http_ops &&
			 n->obj.r == s->obj.r ? &n->obj : NULL);
}

static const struct stfs_source_ops http_ops = {
	.close = http_close,
	.read = http_read,
	.read_async = http_read_async,
	.warm_info = http_warm_info,
	.warm = http_warm,
	.warm_flush = http_warm_flush,
	.warm_cancel = http_warm_cancel,
	.follow = http_follow,
};

/* The cache of s: none when its credentials have no trust tag. */
static struct stfs_cache *cache_of(const struct http_src *s)
{
	return s->untrusted ? NULL : stfs_remote_cache(s->obj.r);
}

/* The cache key of name (s's URL, its content key) within s's trust
 * domain: a new string, or NULL. */
static char *trusted(const struct http_src *s, const char *name)
{
	return stfs_http_trust_key(s->trust, name);
}

/* Is key (a kept alias's) one of s's trust domain? */
static int in_domain(const struct http_src *s, const char *key)
{
	if (!s->trust)
		return strncmp(key, "trust:", 6) != 0;
	return !strncmp(key, s->trust, strlen(s->trust)) &&
	       key[strlen(s->trust)] == ' ';
}

/* The kept answer naming what s's blocks are keyed by: "alias URL", in
 * s's trust domain. */
static char *alias_of(const struct http_src *s)
{
	char *a, *k;

	if (asprintf(&a, "stfs-alias %s", s->url) < 0)
		return NULL;
	k = trusted(s, a);
	free(a);
	return k;
}

/* The content key of s from the answer r at open (*key, malloc'd; NULL if
 * none) and its version (into ver): the Hub names a file's content (an
 * answer with X-Repo-Commit, itself or its redirect's): an LFS file by the
 * sha256 of its bytes (X-Linked-Etag), a small one by its git blob id (its
 * ETag), so its blocks are the same whatever commit holds it.  The key
 * names the trust domain too (the endpoint's origin and the repo, which
 * hub.c gave): a tensor read is never checked against the sha256 (only a
 * whole read is, verify.c), so another repo or endpoint that names the
 * same content, and serves other bytes, must never share its blocks.  A
 * source with no domain (not a Hub file) has no content key.  The key is
 * in s's trust domain (trust.c): content fetched with a token is never
 * shared with a mount without it. */
static void content_key(const struct http_src *s,
			const struct stfs_http_resp *r, char **key,
			char *ver, size_t versz)
{
	const char *e = s->rv.linked_etag[0] ? s->rv.linked_etag :
			r->linked_etag[0] ? r->linked_etag : r->etag;
	char *k = NULL;
	size_t n;

	*key = NULL;
	ver[0] = '\0';
	if (!s->domain || (!s->rv.commit[0] && !r->commit[0]))
		return;
	if (*e == '"')
		e++;
	n = strspn(e, "0123456789abcdef");
	if ((n != 64 && n != 40) ||
	    (e[n] != '\0' && (e[n] != '"' || e[n + 1])))
		return;
	snprintf(ver, versz, "%s:%.*s", n == 64 ? "sha256" : "git-blob",
		 (int)n, e);
	if (asprintf(&k, "content:%s %s", s->domain, ver) < 0 ||
	    !(*key = trusted(s, k)))
		ver[0] = '\0';
	free(k);
}

/* Open s from the cache alone: its latest version's size and head (its
 * blocks under its URL, or under the content key a kept alias names). */
static int open_cached(struct http_src *s, struct stfs_error *err)
{
	struct stfs_cache *c = cache_of(s);
	char *alias = alias_of(s), *key = trusted(s, s->url), *text = NULL;
	char why[160], *nl;
	size_t n;
	int rc = -ENOENT;

	/* the alias names a content key of the same trust domain (it was
	 * written in it, and holds the whole key, tag and all) */
	if (c && alias && !stfs_cache_get_doc(c, alias, &text, &n, why,
					      sizeof(why)) &&
	    (nl = strchr(text, '\n')) && strlen(nl + 1) < sizeof(s->version) &&
	    in_domain(s, text)) {
		*nl = '\0';
		if (!(rc = stfs_cache_latest(c, text, &s->obj.cobj, s->version,
					     sizeof(s->version))))
			snprintf(s->version, sizeof(s->version), "%s", nl + 1);
	}
	free(alias);
	free(text);
	if (rc)
		rc = c && key ? stfs_cache_latest(c, key, &s->obj.cobj,
						  s->version,
						  sizeof(s->version)) : -ENOENT;
	free(key);
	if (rc)
		return stfs_fail(err, -ENOENT, NULL, STFS_NO_OFFSET, "not in "
				 "the cache (offline)");
	s->obj.size = s->obj.cobj.size;
	s->head_len = s->obj.size < STFS_HTTP_FIRST ? (size_t)s->obj.size :
		      STFS_HTTP_FIRST;
	if (stfs_cache_read(&s->obj.cobj, STFS_CACHE_HEAD, s->head_len, 0,
			    s->head, s->head_len)) {
		s->obj.cobj.valid = 0;
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

/* The version of s, from the answer r at open: its validators, which every
 * later answer must repeat, and what the cache keys it by (a strong ETag,
 * else Last-Modified).  An object with neither is refused unless the
 * options allow it (unvalidated), and then never cached (version ""):
 * 0, or -EIO. */
static int take_version(struct http_src *s, const struct stfs_http_resp *r,
			struct stfs_error *err)
{
	memcpy(s->etag, r->etag, sizeof(s->etag));
	memcpy(s->last_modified, r->last_modified, sizeof(r->last_modified));
	s->version[0] = '\0';
	if (stfs_http_strong_etag(s->etag))
		snprintf(s->version, sizeof(s->version), "%s", s->etag);
	else if (s->last_modified[0])
		snprintf(s->version, sizeof(s->version), "%s",
			 s->last_modified);
	else if (!s->obj.r->o.unvalidated)
		return stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "the server "
				 "sends neither a strong ETag nor "
				 "Last-Modified%s%s%s, so a change of the "
				 "object while mounted could not be detected "
				 "(-o unvalidated reads it anyway, uncached)",
				 s->etag[0] ? " (only the weak ETag " : "",
				 s->etag, s->etag[0] ? ")" : "");
	return 0;
}

/* The origin of s cannot be reached (rc: the transport's error, in err):
 * s opens from the cache only what this mount could have read online,
 * which its keys ensure (the blocks of its own trust domain: fetched with
 * its credentials, or public ones with none); else rc, the reason
 * saying so: 0, or rc. */
static int open_unreachable(struct http_src *s, int rc,
			    struct stfs_error *err)
{
	struct stfs_error e2 = { 0 };
	char line[900];

	if (open_cached(s, &e2) == 0) {
		snprintf(line, sizeof(line), "stfs: %s: %s; reading what the "
			 "cache holds (fetched %s)", s->url,
			 err ? err->msg : "no connection",
			 s->trust ? "with these credentials" :
			 "with no credential");
		stfs_remote_log(s->obj.r, line);
		return 0;
	}
	if (err && stfs_remote_cache(s->obj.r)) {
		snprintf(line, sizeof(line), "%s; and the cache %s", err->msg,
			 s->untrusted ? "is not read (these credentials could "
			 "not be keyed in it)" : s->trust ? "holds no copy "
			 "fetched with these credentials (one fetched with "
			 "others, or none, is never served to them)" :
			 "holds no copy fetched without credentials (one "
			 "fetched with credentials is served only to a mount "
			 "with the same ones)");
		stfs_fail(err, rc, NULL, STFS_NO_OFFSET, "%s", line);
	}
	return rc;
}

/* s opened from the mirror (-o mirror=, mirror/tier.c), its head in:
 * its size, and its blocks cached under the mirror object's URL and ETag,
 * within s's trust domain (the origin's credentials: a mount without them
 * never names these blocks, not even by the mirror object's plain URL).
 * A block read at the origin after all goes with If-Match on the origin's
 * ETag at copy (not for a Hub file: its URL names a commit). */
static int open_mirrored(struct http_src *s, const struct stfs_tier_open *t,
			 struct stfs_error *err)
{
	struct stfs_remote *r = s->obj.r;
	struct stfs_cache *c = cache_of(s);
	char *key = trusted(s, t->key);
	int rc;

	if (!key)
		return stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET,
				 "out of memory");
	s->obj.size = t->size;
	if (t->origin_etag && !s->domain &&
	    stfs_http_strong_etag(t->origin_etag))
		snprintf(s->etag, sizeof(s->etag), "%s", t->origin_etag);
	snprintf(s->version, sizeof(s->version), "%s", t->version);
	rc = stfs_cache_object(c, key, t->version, t->size, &s->obj.cobj,
			       err);
	free(key);
	if (rc && rc != -EPERM)
		stfs_writeback_failed(r, 0, rc);        /* held */
	if (rc == 0)
		(void)stfs_cache_put(c, &s->obj.cobj, STFS_CACHE_HEAD, s->head,
				     s->head_len);
	return rc == -EPERM ? rc : 0;
}

/* Open s from the network: its first block, size and version.  With no
 * server to answer, what the cache holds of s's trust domain. */
static int open_remote(struct http_src *s, struct stfs_error *err)
{
	struct stfs_remote *r = s->obj.r;
	struct stfs_request q = { .url = s->url, .auth = s->auth,
				  .len = STFS_HTTP_FIRST,
				  .want_total = UINT64_MAX };
	struct stfs_cache *c = cache_of(s);
	struct stfs_http_resp resp;
	struct stfs_tier_open t;
	CURL *h;
	int rc;

	if (r->mirror_open && r->mirror_open(r, s->url, &s->obj, s->head,
					     &s->head_len, STFS_HTTP_FIRST,
					     &t) == 0)
		return open_mirrored(s, &t, err);
	h = stfs_httpc_handle(r->http);
	rc = h ? stfs_object_fetch(&s->obj, h, &q, s->head, &s->head_len,
				   &resp, err) :
		 stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET, "out of memory");
	stfs_httpc_release(r->http, h);
	if (!rc && !resp.has_total)
		rc = stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "the server "
			       "did not say the object's size (no "
			       "Content-Range)");
	if (rc == -ENETUNREACH || rc == -EHOSTUNREACH) {
		rc = open_unreachable(s, rc, err);
	} else if (!rc && !(rc = take_version(s, &resp, err))) {
		char *key, ver[80], *alias, *text, *own = trusted(s, s->url);

		s->obj.size = resp.total;
		content_key(s, &resp, &key, ver, sizeof(ver));
		/* keyed by content: its blocks under the key (versioned by the
		 * content, whatever ETag the server's copy has), and an alias
		 * for offline opens of this URL; both in s's trust domain */
		rc = !own ? -ENOMEM : !key || !s->version[0] ?
		     stfs_cache_object(c, own, s->version, resp.total,
				       &s->obj.cobj, err) :
		     stfs_cache_object(c, key, ver, resp.total, &s->obj.cobj,
				       err);
		free(own);
		if (!rc && key && s->version[0] && (alias = alias_of(s))) {
			if (asprintf(&text, "%s\n%s", key, s->version) >= 0) {
				(void)stfs_cache_put_doc(c, alias, text,
							 strlen(text));
				free(text);
			}
			free(alias);
		}
		free(key);
		if (rc && rc != -EPERM && s->version[0])
			stfs_writeback_failed(r, 0, rc);        /* held */
		if (rc == 0)
			(void)stfs_cache_put(c, &s->obj.cobj, STFS_CACHE_HEAD,
					     s->head, s->head_len);
		rc = rc == -EPERM ? rc : 0;     /* a cache not private */
	}
	return rc;
}

/* A source of r for url, not open yet: NULL when out of memory. */
static struct http_src *http_new(struct stfs_remote *r, const char *url,
				 struct stfs_auth *auth, const char *domain)
{
	struct http_src *s = calloc(1, sizeof(*s));

	if (!s || !(s->url = strdup(url)) || !(s->base.name = strdup(url)) ||
	    !(s->head = malloc(STFS_HTTP_FIRST)) ||
	    (domain && !(s->domain = strdup(domain)))) {
		if (s) {
			free(s->url);
			free(s->base.name);
			free(s->head);
		}
		free(s);
		return NULL;
	}
	stfs_object_init(&s->obj);
	s->base.ops = &http_ops;
	s->auth = stfs_auth_ref(auth);
	s->obj.r = r;
	s->obj.url = s->url;
	s->obj.etag = s->etag;
	s->obj.last_modified = s->last_modified;
	s->obj.auth = s->auth;
	stfs_resolver_init(&s->rv);
	/* a signed request is for its host alone: never redirected */
	s->obj.rv = auth && auth->sign ? NULL : &s->rv;
	return s;
}

int stfs_source_open_http(struct stfs_remote *r, const char *url,
			  struct stfs_auth *auth, const char *domain,
			  struct stfs_source **out, struct stfs_error *err)
{
	struct http_src *s;
	int rc;

	*out = NULL;
	if (!(s = http_new(r, url, auth, domain)))
		return stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET,
				 "out of memory");
	/* the cache, made and checked when a remote source first opens
	 * (a local mount never touches it): one not private fails here */
	if (!(rc = stfs_cache_ready(stfs_remote_cache(r), err))) {
		/* the trust domain its bytes are kept in (trust.c) */
		s->untrusted = stfs_http_trust(r, auth, 0, &s->trust) != 0;
		rc = r->o.offline ? open_cached(s, err) : open_remote(s, err);
	}
	if (rc) {
		http_close(&s->base);
		return rc;
	}
	s->base.info.size = s->obj.size;
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

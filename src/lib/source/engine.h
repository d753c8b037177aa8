/*
 * engine.h: the engine's object, struct stfs_remote (made and freed by
 * remote.c), that ties the rooms of the source layer together (never
 * installed, and for src/lib/source alone): the options (parsed by
 * remote.c), the counters, and struct stfs_remote, which holds the cache,
 * the block engine and its pool, the HTTP client and the engine's fetch
 * interface.  Each room declares what it offers in its own header:
 *
 *   scheme.h           URLs and schemes (scheme.c)
 *   rlist.h            a repository's file list (rlist.c; most in source.h)
 *   locate.h           the locator's helpers and its services (locate.c)
 *   blocks/blocks.h    the block engine, its pool, write-back, lookup and
 *                      its fetch interface (struct stfs_fetch_ops)
 *   cache.h            the cache store on disk (blocks/cache.c, cachedir.c)
 *   http/http.h        the HTTP client, source, answers, pages, resolver
 *   auth.h             what requests carry (http/sigv4.c)
 *   hub/service.h, s3/service.h: the services' functions, for services.c
 *   http/httphdr.h, hub/hub.h, s3/s3.h: what one room keeps to itself
 *
 * Which room may use which: docs/design.md, tests/unit/test_layers.py.
 *
 * Everything here is state of one struct stfs_remote, made when a model
 * is opened and freed with it: two models in one process can have two
 * configurations, and nothing is shared but libcurl's own global state.
 */
#ifndef STFS_ENGINE_H
#define STFS_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "source.h"
#include "cache.h"
#include "blocks/blocks.h"

struct stfs_http_client;

/* ---- the options (remote.c) ------------------------------------------- */

/* ---- which addresses a connection may go to (http/netpolicy.c checks
 * them: http/http.h) --------------------------------------------------- */

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
	struct stfs_metrics *metrics;   /* the owner's, or NULL (metrics.h) */
	int credentials;                /* a credential service's client */
	char *mirror;                   /* -o mirror=s3://BUCKET/PREFIX, or
					 * NULL (mirror/tier.c) */
	char *mirror_profile;           /* -o mirror_profile=: its keys */
};

/* What the remote did (stfs_remote_stats()). */
struct stfs_remote_counters {
	_Atomic uint64_t requests, retries, bytes, hits, failed;
	_Atomic uint64_t resolves, rate_limited;
};

/* ---- the remote object (remote.c) ---------------------------------------- */

struct stfs_mirror;
struct stfs_location;

/* An object opened from the mirror (struct stfs_remote's mirror_open). */
struct stfs_tier_open {
	uint64_t size;
	const char *key, *version;      /* what the cache keys it by */
	const char *origin_etag;        /* the origin's at copy, or NULL */
};

struct stfs_remote {
	struct stfs_remote_opts o;
	pthread_mutex_t progress_mu;    /* one progress report at a time */
	struct stfs_cache cache;        /* used when o.cache_dir is set */
	struct stfs_remote_counters count;
	struct stfs_http_client *http;  /* the HTTP client (http/httpc.c) */
	struct stfs_blocks blocks;
	struct stfs_pool pool;
	const struct stfs_fetch_ops *fetch;    /* the engine's (http/fetch.c) */
	/* -o mirror= (mirror/tier.c sets them once the manifest matched; a
	 * room below calls them through these): o opened from the mirror,
	 * its first head_max bytes into head (0), or -ENOENT: open it at
	 * url; the mirror's end */
	struct stfs_mirror *mirror;
	int (*mirror_open)(struct stfs_remote *r, const char *url,
			   struct stfs_object *o, char *head,
			   size_t *head_len, size_t head_max,
			   struct stfs_tier_open *out);
	void (*mirror_free)(struct stfs_mirror *m);
	/* -o mirror= before the source is located (set by mirror/tier.c;
	 * hub/ lists through it): the files of loc's origin at commit from
	 * the mirror's manifest, each given to file() (its path, the hex of
	 * its published checksum, an LFS sha256 or a blob id, or NULL; its
	 * size), if the manifest names that origin, commit and the mount's
	 * block size: 1 listed, 0 not (the origin lists), or -ENOMEM */
	int (*mirror_list)(struct stfs_remote *r,
			   const struct stfs_location *loc,
			   const char *commit,
			   int (*file)(void *arg, const char *path,
				       const char *sum, uint64_t size),
			   void *arg);
};

/* The remote object's own fields as the rooms read them: inline, so that
 * a room that reads them calls nothing of remote.c (which makes the
 * rooms, and so is above them all). */

/* A line for the remote's log (a read that failed, and why). */
static inline void stfs_remote_log(const struct stfs_remote *r,
				   const char *line)
{
	if (r->o.log)
		r->o.log(r->o.log_ctx, line);
}

/* The cache, or NULL when there is none. */
static inline struct stfs_cache *stfs_remote_cache(struct stfs_remote *r)
{
	return r->o.cache_dir ? &r->cache : NULL;
}

/* -o offline: no network, the cache only. */
static inline int stfs_remote_offline(const struct stfs_remote *r)
{
	return r->o.offline;
}

static inline enum stfs_s3_style
stfs_remote_s3_style(const struct stfs_remote *r)
{
	return r->o.s3_style;
}

/* list_timeout=, in ms (a listing's pages, all of them) */
static inline unsigned
stfs_remote_list_timeout_ms(const struct stfs_remote *r)
{
	return r ? r->o.list_timeout_ms : 0;
}

#endif

/*
 * remote.c: the remote layer of one model as one object: its options,
 * parsed from the `-o KEY=VALUE` text that `stfs mount` and `stfs
 * inspect` pass on, and the object made from them (struct stfs_remote,
 * engine.h) that owns the transfer threads, the workers, the blocks in
 * flight, the cache writer, the cache store and the statistics.
 *
 * The object starts no thread: its threads start on first use, so that
 * they belong to the daemon after it has gone to the background, and
 * stfs_remote_park() stops the transfer threads once the model is open
 * (the daemon forks after that).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format.h"
#include "engine.h"
#include "http/http.h"
#include "s3/service.h"
#include "metrics.h"

/* ---- options ------------------------------------------------------------- */

static void defaults(struct stfs_remote_opts *o)
{
	*o = (struct stfs_remote_opts){
		.connect_timeout_ms = 10000,
		.stall_timeout_ms = 30000,
		.list_timeout_ms = 300000,
		.retries = 3,
		.connections = 0,       /* as many as pay (conc.c) */
		.min_speed = 16384,
		.block = 4u << 20,
		.cache_max = 10ULL << 30,
	};
}

struct stfs_remote_opts *stfs_remote_opts_new(void)
{
	struct stfs_remote_opts *o = malloc(sizeof(*o));
	const char *base;
	int rc = 0;

	if (!o)
		return NULL;
	defaults(o);
	if ((base = getenv("XDG_CACHE_HOME")) && *base == '/')
		rc = asprintf(&o->cache_dir, "%s/stfs", base);
	else if ((base = getenv("HOME")) && *base == '/')
		rc = asprintf(&o->cache_dir, "%s/.cache/stfs", base);
	if (rc < 0) {
		free(o);
		return NULL;
	}
	return o;
}

void stfs_remote_opts_free(struct stfs_remote_opts *o)
{
	if (!o)
		return;
	free(o->cache_dir);
	free(o->mirror);
	free(o->mirror_profile);
	free(o);
}

void stfs_remote_opts_log(struct stfs_remote_opts *o,
			  void (*fn)(void *ctx, const char *line), void *ctx)
{
	o->log = fn;
	o->log_ctx = ctx;
}

void stfs_remote_opts_progress(struct stfs_remote_opts *o,
			       void (*fn)(void *ctx,
					  const struct stfs_open_progress *p),
			       void *ctx)
{
	o->progress = fn;
	o->progress_ctx = ctx;
}

void stfs_remote_progress(struct stfs_remote *r, size_t done, size_t total)
{
	struct stfs_open_progress p = { done, total, 0 };

	if (!r || !r->o.progress)
		return;
	p.bytes = atomic_load(&r->count.bytes);
	pthread_mutex_lock(&r->progress_mu);
	if (r->o.progress)
		r->o.progress(r->o.progress_ctx, &p);
	pthread_mutex_unlock(&r->progress_mu);
}

void stfs_remote_progress_end(struct stfs_remote *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->progress_mu);
	r->o.progress = NULL;
	pthread_mutex_unlock(&r->progress_mu);
}

/* "10G", "512M", "4096": bytes, or 0 if it is not a size. */
static uint64_t parse_size(const char *t)
{
	char *end;
	unsigned long long v;
	int shift = 0;

	if (!t || !*t || strspn(t, "0123456789") == 0)
		return 0;
	errno = 0;
	v = strtoull(t, &end, 10);
	switch (*end) {
	case 'K': case 'k': shift = 10; end++; break;
	case 'M': case 'm': shift = 20; end++; break;
	case 'G': case 'g': shift = 30; end++; break;
	case 'T': case 't': shift = 40; end++; break;
	}
	if (errno || *end || !v || v > (UINT64_MAX >> shift))
		return 0;
	return (uint64_t)v << shift;
}

/* A number of only decimal digits from lo to hi: 0, or -EINVAL. */
static int number(const char *text, unsigned long lo, unsigned long hi,
		  unsigned long *out)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(text, &end, 10);
	if (!*text || strspn(text, "0123456789") != strlen(text) || errno ||
	    *end || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

/* The number options: seconds, counts. */
static const struct {
	const char *key;
	unsigned long lo, hi;
	const char *want;
	size_t field;           /* offset of an unsigned in the options */
	unsigned scale;
} numbers[] = {
	{ "connect_timeout", 1, 3600, "1 to 3600 (seconds)",
	  offsetof(struct stfs_remote_opts, connect_timeout_ms), 1000 },
	{ "stall_timeout", 1, 3600, "1 to 3600 (seconds)",
	  offsetof(struct stfs_remote_opts, stall_timeout_ms), 1000 },
	{ "list_timeout", 1, 86400, "1 to 86400 (seconds)",
	  offsetof(struct stfs_remote_opts, list_timeout_ms), 1000 },
	{ "retries", 0, 100, "0 to 100",
	  offsetof(struct stfs_remote_opts, retries), 1 },
	{ "connections", 0, 256, "0 (as many as pay) to 256",
	  offsetof(struct stfs_remote_opts, connections), 1 },
};

static int bad(char *why, size_t whysz, const char *opt, const char *want)
{
	snprintf(why, whysz, "%s: give %s", opt, want);
	return -EINVAL;
}

/* cache=DIR: made absolute now (the daemon runs in /). */
static int set_cache(struct stfs_remote_opts *o, const char *opt,
		     const char *dir, char *why, size_t whysz)
{
	char *abs = NULL, *cwd;

	if (!*dir)      /* not the working directory */
		return bad(why, whysz, opt, "a directory (or nocache)");
	if (dir[0] == '/') {
		abs = strdup(dir);
	} else if ((cwd = getcwd(NULL, 0))) {
		if (asprintf(&abs, "%s/%s", cwd, dir) < 0)
			abs = NULL;
		free(cwd);
	}
	if (!abs) {
		snprintf(why, whysz, "%s: %s", opt, strerror(ENOMEM));
		return -ENOMEM;
	}
	if (strlen(abs) > STFS_CACHE_DIR_MAX) {
		snprintf(why, whysz, "%s: %s", opt, strerror(ENAMETOOLONG));
		free(abs);
		return -ENAMETOOLONG;
	}
	free(o->cache_dir);
	o->cache_dir = abs;
	o->cache_given = 1;
	return 0;
}

/* The options that take a size or a word. */
static int set_other(struct stfs_remote_opts *o, const char *opt,
		     const char *key, size_t klen, const char *v, char *why,
		     size_t whysz)
{
#define IS(k) (klen == strlen(k) && strncmp(key, k, klen) == 0)
	uint64_t n;

	if (IS("block_size") && v) {
		n = parse_size(v);
		if (n < (64u << 10) || n > (64u << 20) || (n & (n - 1)))
			return bad(why, whysz, opt, "a power of two from 64K "
				   "to 64M, such as 1M");
		o->block = (size_t)n;
	} else if (IS("min_speed") && v) {
		n = strcmp(v, "0") ? parse_size(v) : 0;
		if (strcmp(v, "0") && (!n || n > (1u << 30)))
			return bad(why, whysz, opt, "bytes per second up to "
				   "1G, such as 16K, or 0");
		o->min_speed = n;
	} else if (IS("cache_size") && v) {
		if (!(n = parse_size(v)))
			return bad(why, whysz, opt, "a size such as 10G, 512M "
				   "or 1048576");
		o->cache_max = n;
	} else if (IS("cache") && v) {
		return set_cache(o, opt, v, why, whysz);
	} else if (IS("s3_style") && v) {
		if (strcmp(v, "path") && strcmp(v, "virtual"))
			return bad(why, whysz, opt, "path or virtual");
		o->s3_style = v[0] == 'p' ? STFS_S3_PATH : STFS_S3_VIRTUAL;
	} else if (IS("mirror") && v) {
		if (strncmp(v, "s3://", 5) || strlen(v) < 6 || v[5] == '/')
			return bad(why, whysz, opt, "s3://BUCKET/PREFIX");
		free(o->mirror);
		if (!(o->mirror = strdup(v)))
			return -ENOMEM;
	} else if (IS("mirror_profile") && v) {
		if (!*v || strlen(v) > 128 || strpbrk(v, "[]\n\r"))
			return bad(why, whysz, opt, "an AWS profile's name");
		free(o->mirror_profile);
		if (!(o->mirror_profile = strdup(v)))
			return -ENOMEM;
	} else if (IS("nocache") && !v) {
		o->nocache = 1;
	} else if (IS("offline") && !v) {
		o->offline = 1;
	} else if (IS("unvalidated") && !v) {
		o->unvalidated = 1;
	} else if (IS("public_net") && !v) {
		o->net.on = 1;
	} else if (IS("allow_net") && v) {
		int rc = stfs_net_allow(&o->net, v);

		if (rc == -E2BIG)
			return bad(why, whysz, opt, "at most 16 of them");
		if (rc)
			return bad(why, whysz, opt, "an address or a CIDR "
				   "(127.0.0.1, 10.0.0.0/8, fd00::/8)");
	} else {
		return 1;
	}
	return 0;
#undef IS
}

int stfs_remote_opts_set(struct stfs_remote_opts *o, const char *opt,
			 char *why, size_t whysz)
{
	const char *eq = strchr(opt, '=');
	size_t klen = eq ? (size_t)(eq - opt) : strlen(opt);
	unsigned long v;

	why[0] = '\0';
	for (size_t i = 0; i < sizeof(numbers) / sizeof(numbers[0]); i++) {
		if (!eq || klen != strlen(numbers[i].key) ||
		    strncmp(opt, numbers[i].key, klen))
			continue;
		if (number(eq + 1, numbers[i].lo, numbers[i].hi, &v))
			return bad(why, whysz, opt, numbers[i].want);
		*(unsigned *)(void *)((char *)o + numbers[i].field) =
			(unsigned)v * numbers[i].scale;
		return 0;
	}
	return set_other(o, opt, opt, klen, eq ? eq + 1 : NULL, why, whysz);
}

int stfs_remote_opts_check(const struct stfs_remote_opts *o, char *why,
			   size_t whysz)
{
	why[0] = '\0';
	if (o->nocache && (o->offline || o->cache_given)) {
		snprintf(why, whysz, "nocache goes with neither cache= nor "
			 "offline");
		return -EINVAL;
	}
	if (!o->nocache && o->cache_dir &&
	    strlen(o->cache_dir) > STFS_CACHE_DIR_MAX) {
		snprintf(why, whysz, "cache=%s: %s", o->cache_dir,
			 strerror(ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
	return 0;
}

/* ---- the object ---------------------------------------------------------- */

int stfs_remote_new(const struct stfs_remote_opts *opts,
		    struct stfs_remote **out, struct stfs_error *err)
{
	struct stfs_remote *r = calloc(1, sizeof(*r));
	int rc, auto_conns;

	*out = NULL;
	if (!r)
		return stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET,
				 "out of memory");
	if (opts) {
		r->o = *opts;
		r->o.cache_dir = NULL;
		r->o.mirror_profile = NULL;
		if ((opts->mirror && !(r->o.mirror = strdup(opts->mirror))) ||
		    (opts->mirror_profile && !(r->o.mirror_profile =
					       strdup(opts->mirror_profile)))) {
			free(r->o.mirror);
			free(r->o.mirror_profile);
			free(r);
			return stfs_nomem(err);
		}
		if (!opts->nocache && opts->cache_dir &&
		    !(r->o.cache_dir = strdup(opts->cache_dir))) {
			free(r->o.mirror);
			free(r->o.mirror_profile);
			free(r);
			return stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET,
					 "out of memory");
		}
	} else {
		defaults(&r->o);
	}
	/* connections=0: up to STFS_CONC_CAP, as many as pay */
	auto_conns = !r->o.connections;
	if (auto_conns)
		r->o.connections = STFS_CONC_CAP;
	if (r->o.cache_dir && (rc = stfs_cache_init(&r->cache, r->o.cache_dir,
						   r->o.cache_max,
						   r->o.block,
						   r->o.offline))) {
		free(r->o.cache_dir);
		free(r->o.mirror);
		free(r->o.mirror_profile);
		free(r);
		return stfs_fail(err, rc, NULL, STFS_NO_OFFSET, "cache: %s",
				 strerror(-rc));
	}
	r->cache.metrics = r->o.metrics;
	if (!(r->http = calloc(1, sizeof(*r->http))) ||
	    stfs_httpc_init(r->http, &r->o, &r->count)) {
		free(r->http);
		if (r->o.cache_dir)
			stfs_cache_fini(&r->cache);
		free(r->o.cache_dir);
		free(r->o.mirror);
		free(r->o.mirror_profile);
		free(r);
		return stfs_nomem(err);
	}
	r->http->error_text = stfs_s3_error_parse;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	pthread_mutex_init(&r->progress_mu, NULL);
	stfs_blocks_init(&r->blocks);
	stfs_pool_init(&r->pool);
	stfs_conc_init(r, auto_conns);
	r->fetch = stfs_http_fetch_ops();
	*out = r;
	return 0;
}

void stfs_remote_park(struct stfs_remote *r)
{
	if (r)
		stfs_transfers_stop(&r->http->transfers, 1);
}

void stfs_remote_free(struct stfs_remote *r)
{
	if (!r)
		return;
	stfs_pool_stop(r);
	if (r->mirror)
		r->mirror_free(r->mirror);
	stfs_httpc_fini(r->http);
	free(r->http);
	stfs_blocks_fini(&r->blocks);
	stfs_pool_fini(&r->pool);
	pthread_mutex_destroy(&r->progress_mu);
	if (r->o.cache_dir)
		stfs_cache_fini(&r->cache);
	free(r->o.cache_dir);
	free(r->o.mirror);
	free(r->o.mirror_profile);
	free(r);
	curl_global_cleanup();
}

size_t stfs_remote_block_size(const struct stfs_remote *r)
{
	return r ? r->o.block : 0;
}

void stfs_remote_stats(const struct stfs_remote *r,
		       struct stfs_remote_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!r)
		return;
	out->requests = atomic_load(&r->count.requests);
	out->retries = atomic_load(&r->count.retries);
	out->bytes = atomic_load(&r->count.bytes);
	out->cache_hits = atomic_load(&r->count.hits);
	out->failed = atomic_load(&r->count.failed);
	out->resolves = atomic_load(&r->count.resolves);
	out->rate_limited = atomic_load(&r->count.rate_limited);
}

/* ---- the owner's counters (metrics.h) -------------------------------------- */

void stfs_remote_opts_metrics(struct stfs_remote_opts *o,
			      struct stfs_metrics *m)
{
	o->metrics = m;
}

struct stfs_metrics *stfs_remote_metrics(const struct stfs_remote *r)
{
	return r ? r->o.metrics : NULL;
}

void stfs_metrics_sample(struct stfs_metrics *m, const struct stfs_remote *r)
{
	struct stfs_cache *c;

	if (!m || !r || !r->o.cache_dir)
		return;
	c = (struct stfs_cache *)&r->cache;
	pthread_mutex_lock(&c->mu);
	atomic_store(&m->cache_used, c->used);
	atomic_store(&m->cache_limit, c->max_bytes);
	pthread_mutex_unlock(&c->mu);
}

/*
 * metrics.c: the counters of a mount (metrics.h) made, counted into
 * where a hook needs more than an add (an HTTP answer, a FUSE request's
 * time), and written as text in the Prometheus exposition format 0.0.4
 * (docs/metrics.md): every series of the fixed label sets, always, so a
 * mount has the same series from its first write to its last, however
 * large its source.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metrics.h"

/* the buckets' upper bounds, in ns, and as written (seconds) */
static const uint64_t bucket_ns[STFS_M_BUCKETS] = {
	100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000,
	25000000, 50000000, 100000000, 250000000, 500000000, 1000000000,
	2500000000ULL, 5000000000ULL, 10000000000ULL,
};
static const char *const bucket_le[STFS_M_BUCKETS] = {
	"0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01",
	"0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10",
};

static const char *const from_name[STFS_FROM_N] = { "cache", "fetch",
						     "local" };
static const char *const tier_name[STFS_TIER_N] = { "origin", "mirror" };
static const char *const kind_name[STFS_KIND_N] = {
	"range", "resolve", "head", "list", "credentials" };
static const char *const class_name[STFS_CLASS_N] = {
	"2xx", "3xx", "4xx", "429", "5xx", "none" };
static const char *const verify_name[STFS_VERIFY_N] = {
	"cache_block", "file_digest", "kept_answer" };
static const char *const pf_name[STFS_PF_N] = { "warm", "readahead" };
static const char *const errno_name[STFS_ERR_N] = {
	"EIO", "ESTALE", "EACCES", "ENOENT", "ENOMEM", "EFAULT",
	"EHOSTUNREACH", "ENETUNREACH", "ETIMEDOUT", "ECANCELED", "EINTR",
	"other" };
static const int errno_value[STFS_ERR_OTHER] = {
	EIO, ESTALE, EACCES, ENOENT, ENOMEM, EFAULT, EHOSTUNREACH,
	ENETUNREACH, ETIMEDOUT, ECANCELED, EINTR };
static const char *const op_name[STFS_FUSE_OP_N] = {
	"lookup", "getattr", "open", "read", "release", "readdir",
	"getxattr", "listxattr", "statfs", "ioctl", "other" };

struct stfs_metrics *stfs_metrics_new(void)
{
	return calloc(1, sizeof(struct stfs_metrics));
}

void stfs_metrics_free(struct stfs_metrics *m)
{
	free(m);
}

static void hist_add(struct stfs_m_hist *h, uint64_t ns)
{
	unsigned b = 0;

	while (b < STFS_M_BUCKETS && ns > bucket_ns[b])
		b++;
	stfs_m_add(&h->n[b], 1);
	stfs_m_add(&h->sum_ns, ns);
}

void stfs_m_request(struct stfs_metrics *m, enum stfs_m_kind kind,
		    enum stfs_m_tier tier, long status, uint64_t got,
		    uint64_t first_ns, int retry)
{
	enum stfs_m_class c;

	if (!m)
		return;
	c = status == 429 ? STFS_CLASS_429 :
	    status >= 200 && status < 300 ? STFS_CLASS_2XX :
	    status >= 300 && status < 400 ? STFS_CLASS_3XX :
	    status >= 400 && status < 500 ? STFS_CLASS_4XX :
	    status >= 500 && status < 600 ? STFS_CLASS_5XX : STFS_CLASS_NONE;
	stfs_m_add(&m->requests[kind][c], 1);
	if (retry)
		stfs_m_add(&m->retries[kind], 1);
	if (got)
		stfs_m_add(&m->fetched_bytes[tier], got);
	if (first_ns && kind == STFS_KIND_RANGE && c == STFS_CLASS_2XX)
		hist_add(&m->first_byte, first_ns);
}

void stfs_metrics_fuse(struct stfs_metrics *m, enum stfs_fuse_op op,
		       uint64_t ns, int err)
{
	unsigned e = 0;

	if (!m || (unsigned)op >= STFS_FUSE_OP_N)
		return;
	hist_add(&m->fuse[op], ns);
	if (op != STFS_FUSE_READ || err <= 0)
		return;
	while (e < STFS_ERR_OTHER && errno_value[e] != err)
		e++;
	stfs_m_add(&m->read_errors[e], 1);
}

/* ---- the text ------------------------------------------------------------ */

struct out {
	char *b;
	size_t len, cap;
	int fail;
};

static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = o->fail ? 0 : vsnprintf(o->b + o->len, o->cap - o->len,
					    fmt, ap);
		va_end(ap);
		if (o->fail || n < 0) {
			o->fail = 1;
			return;
		}
		if ((size_t)n < o->cap - o->len) {
			o->len += (size_t)n;
			return;
		}
		char *nb = realloc(o->b, o->cap * 2 + (size_t)n);
		if (!nb) {
			o->fail = 1;
			return;
		}
		o->b = nb;
		o->cap = o->cap * 2 + (size_t)n;
	}
}

static uint64_t get(const _Atomic uint64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

static void head(struct out *o, const char *name, const char *type,
		 const char *help)
{
	put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A counter or gauge with one label of n values. */
static void family(struct out *o, const char *name, const char *type,
		   const char *help, const char *label,
		   const char *const *values, const _Atomic uint64_t *c,
		   unsigned n)
{
	head(o, name, type, help);
	for (unsigned i = 0; i < n; i++)
		put(o, "%s{%s=\"%s\"} %" PRIu64 "\n", name, label, values[i],
		    get(&c[i]));
}

static void single(struct out *o, const char *name, const char *type,
		   const char *help, uint64_t v)
{
	head(o, name, type, help);
	put(o, "%s %" PRIu64 "\n", name, v);
}

/* One histogram's series; label "" for none. */
static void hist(struct out *o, const char *name, const char *label,
		 const struct stfs_m_hist *h)
{
	uint64_t cum = 0, sum = get(&h->sum_ns);
	const char *sep = *label ? "," : "";

	for (unsigned b = 0; b <= STFS_M_BUCKETS; b++) {
		cum += get(&h->n[b]);
		put(o, "%s_bucket{%s%sle=\"%s\"} %" PRIu64 "\n", name, label,
		    sep, b < STFS_M_BUCKETS ? bucket_le[b] : "+Inf", cum);
	}
	put(o, "%s_sum%s%s%s %" PRIu64 ".%09" PRIu64 "\n", name,
	    *label ? "{" : "", label, *label ? "}" : "", sum / 1000000000,
	    sum % 1000000000);
	put(o, "%s_count%s%s%s %" PRIu64 "\n", name, *label ? "{" : "",
	    label, *label ? "}" : "", cum);
}

/* The resident memory of this process, in bytes (0 if unknown). */
static uint64_t resident(void)
{
	unsigned long long size = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "re");
	long page = sysconf(_SC_PAGESIZE);

	if (!f)
		return 0;
	if (fscanf(f, "%llu %llu", &size, &res) != 2)
		res = 0;
	fclose(f);
	return (uint64_t)res * (uint64_t)(page > 0 ? page : 4096);
}

static void requests(struct out *o, const struct stfs_metrics *m)
{
	const char *name = "stfs_http_requests_total";

	head(o, name, "counter", "HTTP requests made (each retry one), by "
	     "what they were for and their answer's status class (429 "
	     "apart; none: no answer)");
	for (unsigned k = 0; k < STFS_KIND_N; k++)
		for (unsigned c = 0; c < STFS_CLASS_N; c++)
			put(o, "%s{kind=\"%s\",class=\"%s\"} %" PRIu64 "\n",
			    name, kind_name[k], class_name[c],
			    get(&m->requests[k][c]));
	family(o, "stfs_http_retries_total", "counter", "HTTP requests "
	       "that were retries of one that failed, by what they were for",
	       "kind", kind_name, m->retries, STFS_KIND_N);
}

char *stfs_metrics_text(const struct stfs_metrics *m, size_t *len)
{
	struct out o = { .cap = 32768 };
	char lab[32];

	if (!m || !(o.b = malloc(o.cap)))
		return NULL;
	family(&o, "stfs_read_bytes_total", "counter", "Bytes of the "
	       "sources read, by where they came from: cache (the block "
	       "cache on disk), fetch (handed to a fetch: the network, or "
	       "blocks in memory), local (a local file)", "from", from_name,
	       m->read_bytes, STFS_FROM_N);
	family(&o, "stfs_fetched_bytes_total", "counter", "Body bytes "
	       "received over HTTP, by tier (origin: the source's server; "
	       "mirror: a -o mirror= bucket)", "tier", tier_name, m->fetched_bytes,
	       STFS_TIER_N);
	head(&o, "stfs_cache_blocks_total", "counter", "Lookups of a block "
	     "in the cache for a read, by result");
	put(&o, "stfs_cache_blocks_total{result=\"hit\"} %" PRIu64 "\n"
	    "stfs_cache_blocks_total{result=\"miss\"} %" PRIu64 "\n",
	    get(&m->block_hits), get(&m->block_misses));
	requests(&o, m);
	family(&o, "stfs_read_errors_total", "counter", "FUSE reads answered "
	       "with an error, by errno", "errno", errno_name, m->read_errors,
	       STFS_ERR_N);
	family(&o, "stfs_verify_failures_total", "counter", "Checks that "
	       "failed, by what was checked", "what", verify_name,
	       m->verify_failures, STFS_VERIFY_N);
	family(&o, "stfs_prefetch_asked_bytes_total", "counter", "Bytes of "
	       "blocks asked for ahead of reads, by who asked (warm: stfs "
	       "prefetch, -o prefetch=; readahead: the engine)", "by",
	       pf_name, m->pf_asked, STFS_PF_N);
	family(&o, "stfs_prefetch_cached_bytes_total", "counter", "Bytes "
	       "of blocks asked for ahead of reads that reached the cache, by "
	       "who asked", "by", pf_name, m->pf_cached, STFS_PF_N);
	single(&o, "stfs_cache_used_bytes", "gauge", "Bytes of blocks in the "
	       "cache directory (every daemon's that shares it)",
	       get(&m->cache_used));
	single(&o, "stfs_cache_limit_bytes", "gauge", "The cache's size "
	       "limit (cache_size=)", get(&m->cache_limit));
	single(&o, "stfs_cache_evicted_bytes_total", "counter", "Bytes of "
	       "blocks this daemon evicted from the cache",
	       get(&m->evicted_bytes));
	single(&o, "stfs_resident_memory_bytes", "gauge", "The daemon's "
	       "resident memory", resident());
	head(&o, "stfs_fuse_request_duration_seconds", "histogram", "Time "
	     "from a FUSE request's arrival to its answer, by operation");
	for (unsigned op = 0; op < STFS_FUSE_OP_N; op++) {
		snprintf(lab, sizeof(lab), "op=\"%s\"", op_name[op]);
		hist(&o, "stfs_fuse_request_duration_seconds", lab,
		     &m->fuse[op]);
	}
	head(&o, "stfs_fetch_first_byte_seconds", "histogram", "Time from a "
	     "range request's start to its first byte, answers 2xx");
	hist(&o, "stfs_fetch_first_byte_seconds", "", &m->first_byte);
	if (o.fail) {
		free(o.b);
		return NULL;
	}
	*len = o.len;
	return o.b;
}

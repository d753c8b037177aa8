/*
 * metrics.h: the counters of one mount (struct stfs_metrics, never
 * installed; stfs.h has the public, opaque handle), and the one-line
 * hooks the rooms call where a thing happens: a read served from the
 * cache or handed to a fetch, an HTTP request's answer, a cache block
 * looked up, a check that failed, bytes evicted.  The object is made by
 * its owner (the daemon: stfs_metrics_new()) and handed to the remote
 * layer through its options, so every hook takes a pointer that may be
 * NULL (nothing is counted: `stfs inspect`, -o nometrics).
 *
 * Counting is a relaxed atomic add on a counter of the object: no lock,
 * no allocation.  Every label comes from a fixed small set here (an enum
 * and its names in metrics.c), so the number of series is fixed: nothing
 * a tenant chooses, no path, tensor name or URL is ever a label.  The
 * text (Prometheus exposition format) is made by metrics.c.
 */
#ifndef STFS_METRICS_H
#define STFS_METRICS_H

#include <stdatomic.h>
#include <stdint.h>

#include "stfs/metrics.h"

/* where the bytes of a read came from */
enum stfs_m_from { STFS_FROM_CACHE, STFS_FROM_FETCH, STFS_FROM_LOCAL,
		   STFS_FROM_N };
/* where fetched bytes came from (mirror: none yet) */
enum stfs_m_tier { STFS_TIER_ORIGIN, STFS_TIER_MIRROR, STFS_TIER_N };
/* what an HTTP request was for */
enum stfs_m_kind { STFS_KIND_RANGE, STFS_KIND_RESOLVE, STFS_KIND_HEAD,
		   STFS_KIND_LIST, STFS_KIND_CREDENTIALS, STFS_KIND_N };
/* its answer's status class, 429 apart; none: no answer at all */
enum stfs_m_class { STFS_CLASS_2XX, STFS_CLASS_3XX, STFS_CLASS_4XX,
		    STFS_CLASS_429, STFS_CLASS_5XX, STFS_CLASS_NONE,
		    STFS_CLASS_N };
/* what failed a check */
enum stfs_m_verify { STFS_VERIFY_CACHE_BLOCK, STFS_VERIFY_FILE_DIGEST,
		     STFS_VERIFY_KEPT_ANSWER, STFS_VERIFY_N };
/* who asked for blocks ahead of a read */
enum stfs_m_pf { STFS_PF_WARM, STFS_PF_READAHEAD, STFS_PF_N };
/* a read's errno, of a fixed set (other: the rest) */
enum stfs_m_errno { STFS_ERR_EIO, STFS_ERR_ESTALE, STFS_ERR_EACCES,
		    STFS_ERR_ENOENT, STFS_ERR_ENOMEM, STFS_ERR_EFAULT,
		    STFS_ERR_EHOSTUNREACH, STFS_ERR_ENETUNREACH,
		    STFS_ERR_ETIMEDOUT, STFS_ERR_ECANCELED, STFS_ERR_EINTR,
		    STFS_ERR_OTHER, STFS_ERR_N };

/* A histogram's buckets: upper bounds in ns, fixed (metrics.c). */
#define STFS_M_BUCKETS 16
struct stfs_m_hist {
	_Atomic uint64_t n[STFS_M_BUCKETS + 1];    /* the last: +Inf */
	_Atomic uint64_t sum_ns;
};

struct stfs_metrics {
	_Atomic uint64_t read_bytes[STFS_FROM_N];
	_Atomic uint64_t fetched_bytes[STFS_TIER_N];
	_Atomic uint64_t block_hits, block_misses;
	_Atomic uint64_t requests[STFS_KIND_N][STFS_CLASS_N];
	_Atomic uint64_t retries[STFS_KIND_N];
	_Atomic uint64_t read_errors[STFS_ERR_N];
	_Atomic uint64_t verify_failures[STFS_VERIFY_N];
	_Atomic uint64_t pf_asked[STFS_PF_N], pf_cached[STFS_PF_N];
	_Atomic uint64_t evicted_bytes;
	/* the cache's, as last seen (kept for the text after unmount) */
	_Atomic uint64_t cache_used, cache_limit;
	struct stfs_m_hist fuse[STFS_FUSE_OP_N];
	struct stfs_m_hist first_byte;
};

static inline void stfs_m_add(_Atomic uint64_t *c, uint64_t n)
{
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* n bytes of a read came from where */
static inline void stfs_m_read(struct stfs_metrics *m, enum stfs_m_from from,
			       uint64_t n)
{
	if (m)
		stfs_m_add(&m->read_bytes[from], n);
}

/* a cache block looked up for a read: hit (1) or missed (0) */
static inline void stfs_m_block(struct stfs_metrics *m, int hit)
{
	if (m)
		stfs_m_add(hit ? &m->block_hits : &m->block_misses, 1);
}

/* a check failed */
static inline void stfs_m_verify(struct stfs_metrics *m,
				 enum stfs_m_verify what)
{
	if (m)
		stfs_m_add(&m->verify_failures[what], 1);
}

/* n bytes of blocks asked for ahead of a read (by who), or cached */
static inline void stfs_m_prefetch(struct stfs_metrics *m, enum stfs_m_pf by,
				   int cached, uint64_t n)
{
	if (m)
		stfs_m_add(cached ? &m->pf_cached[by] : &m->pf_asked[by], n);
}

/* n bytes of blocks evicted from the cache */
static inline void stfs_m_evicted(struct stfs_metrics *m, uint64_t n)
{
	if (m)
		stfs_m_add(&m->evicted_bytes, n);
}

/* One HTTP request of kind answered status (0: none), got body bytes
 * from tier, its first byte after first_ns (0: not known); retry: it was
 * one (metrics.c). */
void stfs_m_request(struct stfs_metrics *m, enum stfs_m_kind kind,
		    enum stfs_m_tier tier, long status, uint64_t got,
		    uint64_t first_ns, int retry);
/* The remote's counters (r may be NULL: none). */
struct stfs_remote;
struct stfs_metrics *stfs_remote_metrics(const struct stfs_remote *r);

#endif

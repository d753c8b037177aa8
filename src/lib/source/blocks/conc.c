/*
 * conc.c: how many of the engine's workers fetch at once, when
 * connections=0 (the default since issue 52): as many as raise the
 * throughput (docs/remote-cache.md).
 *
 * The pool starts STFS_CONC_CAP workers and lets STFS_CONC_START of them
 * fetch.  Every period (STFS_CONC_PERIOD_MS at least, and as long as it
 * takes as many fetches to end as there are workers) it looks at
 * the bytes fetched (counted as they arrive) and the retries made since
 * (the remote's counters).  A retry (a 429, a 503, a connection that
 * failed or stalled) halves the number, down to STFS_CONC_MIN; a period
 * in which more was asked than was fetched (a job waited for a worker,
 * or every worker was busy at three quarters of the fetches' ends) and
 * whose throughput beat the best seen by 5% adds a half (at least
 * one), up to the cap, as TCP's slow start would (a quarter, over
 * periods of twice the workers' fetches, took 224 fetches, 896 MiB, to
 * go from 8 to 32: a 1 GiB file was over before); one that did not,
 * after a rise, takes the rise
 * back and holds for STFS_CONC_HOLD periods before it tries again.  So a
 * link that gives each connection a share (S3's 25 MB/s or so) gets as
 * many as pay, and one that the machine's CPU or the server's caps stays
 * near where it started.  The prefetch window and the queues that follow
 * the number of connections follow this one (stfs_pool_width()), so that
 * a reader of one tensor is not charged a window of 32 blocks before the
 * link has shown it pays: it starts at 32 MiB, as with connections=8.
 * With connections=N (N > 0), N workers fetch at once, always.  The
 * prefetch window, in blocks, follows the workers (stfs_prefetch_blocks()).
 */
#include <stdatomic.h>

#include "format.h"
#include "engine.h"
#include "blocks/blocks.h"

void stfs_conc_init(struct stfs_remote *r, int on)
{
	struct stfs_conc *c = &r->pool.conc;

	*c = (struct stfs_conc){ .on = on };
	atomic_store(&c->limit, on ? STFS_CONC_START : r->o.connections);
}

unsigned stfs_pool_width(const struct stfs_remote *r)
{
	return r->pool.conc.on ? atomic_load(&r->pool.conc.limit) :
				 r->o.connections;
}

int stfs_conc_may(struct stfs_pool *p)
{
	struct stfs_conc *c = &p->conc;

	if (!c->on || c->busy < atomic_load(&c->limit))
		return 1;
	c->starved = 1;                 /* a job waits for a worker */
	return 0;
}

/* The number of workers for the period that ended, from its bytes per
 * second (rate) and whether it saw a retry. */
static unsigned next_limit(struct stfs_conc *c, unsigned limit,
			   unsigned cap, double rate, int retried)
{
	unsigned step;

	if (retried) {                  /* the server or the link says no */
		c->rise = 0;
		c->best = 0;
		c->hold = STFS_CONC_HOLD;
		return limit / 2 > STFS_CONC_MIN ? limit / 2 : STFS_CONC_MIN;
	}
	if (c->hold) {
		c->hold--;
		return limit;
	}
	if (!c->starved)
		return limit;           /* asked for no more than it had */
	if (c->rise && rate < c->best * 1.05) {
		/* the last rise did not pay: back, and wait before trying */
		limit -= c->rise;
		c->rise = 0;
		c->hold = STFS_CONC_HOLD;
		return limit;
	}
	if (rate > c->best)
		c->best = rate;
	step = limit / 2 ? limit / 2 : 1;
	if (limit + step > cap)
		step = cap - limit;
	c->rise = step;
	return limit + step;
}

int stfs_conc_after(struct stfs_remote *r, uint64_t now_ms)
{
	struct stfs_conc *c = &r->pool.conc;
	uint64_t bytes, retries, ms;
	unsigned limit, next;

	if (!c->on)
		return 0;
	bytes = atomic_load(&r->count.bytes);
	retries = atomic_load(&r->count.retries);
	if (!c->t0_ms) {
		c->t0_ms = now_ms;
		c->bytes0 = bytes;
		c->retries0 = retries;
		return 0;
	}
	ms = now_ms - c->t0_ms;
	limit = atomic_load(&c->limit);
	if (c->busy + 1 >= limit)
		c->full++;              /* every worker was fetching */
	/* a period long enough to mean something: as many fetches ended
	 * as there are workers (bytes are counted as they arrive, so each
	 * fetch on the wire counts its part) */
	if (++c->jobs < limit || ms < STFS_CONC_PERIOD_MS)
		return 0;
	/* more was asked than fetched: a job waited for a worker, or every
	 * worker was busy through most of the period (a reader in order
	 * whose window is as wide as the workers) */
	if (c->full * 4 >= c->jobs * 3)
		c->starved = 1;
	next = next_limit(c, limit, r->o.connections,
			  (double)(bytes - c->bytes0) * 1000.0 / (double)ms,
			  retries != c->retries0);
	atomic_store(&c->limit, next);
	c->starved = 0;
	c->jobs = 0;
	c->full = 0;
	c->t0_ms = now_ms;
	c->bytes0 = bytes;
	c->retries0 = retries;
	return next > limit;
}

/* The prefetch window, in blocks: 32 MiB (2 blocks of 16 MiB or more),
 * or one block a connection when connections= asks for more, as long as
 * that stays within 256 MiB: each connection then has a block of the
 * reader's to fetch. */
unsigned stfs_prefetch_blocks(const struct stfs_remote *r)
{
	unsigned base = r->o.block >= (16u << 20) ? 2u :
			(unsigned)((32u << 20) / r->o.block);
	unsigned most = (unsigned)((256u << 20) / r->o.block);
	unsigned width = stfs_pool_width(r);
	unsigned want = width < most ? width : most;

	return want > base ? want : base;
}

/*
 * writeback.c: the write-behind of the block engine: blocks fetched for
 * a reader go to the cache after the reader has been answered, by the
 * cache writer threads (STFS_WRITERS of them), so that a connection goes
 * on to its next fetch and never waits for the disk.
 *
 * A fetching thread lists the blocks it fetched (struct stfs_fetcher's
 * to_write) and hands them over here once its job is answered
 * (stfs_writeback()).  At most 2 x connections blocks wait for the
 * writers; past that the fetching thread writes its own.  A writer takes
 * up to WRITE_BATCH blocks queued at once and writes them together
 * (stfs_cache_put_batch(): all written, all flushed, then all renamed),
 * so that the disk is waited for once per batch rather than once per
 * block.  Until a block is in the cache it stays listed in memory
 * (blocks.c), and its readers copy it from there (after, too, while they
 * have not read all of it: it went to the disk past the page cache,
 * cachedir.c); one the cache cannot
 * take (a full disk, a cache_size under one block) stays there for its
 * readers as without a cache, and the first such failure is logged.
 * The queue is under the
 * pool's lock (pool.c), because a block queued counts as work of its
 * object, which stfs_pool_drain() waits for.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format.h"
#include "engine.h"
#include "blocks/blocks.h"

/* Blocks one writer takes at once (16 MiB of 4 MiB blocks): several
 * writers still overlap, one flushing while another writes. */
#define WRITE_BATCH 4

void stfs_writeback_failed(struct stfs_remote *r, size_t len, int rc)
{
	struct stfs_cache *c = stfs_remote_cache(r);
	char line[1400];

	if (!c || !stfs_cache_failed_once(c))
		return;
	if (rc == -ENOENT && len)
		snprintf(line, sizeof(line), "stfs: cache=%s: a block of %zu "
			 "bytes (and its header) is larger than cache_size=%"
			 PRIu64 ": blocks are held in memory for their readers "
			 "instead, as with nocache (logged once)", c->dir, len,
			 c->max_bytes);
	else
		snprintf(line, sizeof(line), "stfs: cache=%s: %s could not be "
			 "written (%s): blocks that cannot be are held in "
			 "memory for their readers instead, as with nocache "
			 "(logged once)", c->dir, len ? "a block" :
			 "an object's entry", strerror(-rc));
	stfs_remote_log(r, line);
}

/* Write n blocks to the cache together, then unlist and free them (or,
 * those the cache could not take, hold them for their readers). */
static void write_blocks(struct stfs_remote *r, struct stfs_inflight **me,
			 size_t n)
{
	struct stfs_cache_item it[STFS_CACHE_BATCH];

	if (n > STFS_CACHE_BATCH) {
		write_blocks(r, me + STFS_CACHE_BATCH, n - STFS_CACHE_BATCH);
		n = STFS_CACHE_BATCH;
	}
	for (size_t i = 0; i < n; i++)
		stfs_inflight_item(me[i], &it[i]);
	stfs_cache_put_batch(stfs_remote_cache(r), it, n);
	for (size_t i = 0; i < n; i++) {
		if (it[i].rc)
			stfs_writeback_failed(r, it[i].len, it[i].rc);
		stfs_blocks_written(r, me[i], it[i].rc);
	}
}

/* Take up to WRITE_BATCH queued blocks into me (under mu): how many. */
static size_t take(struct stfs_pool *p, struct stfs_inflight **me,
		   struct stfs_object **obj)
{
	size_t n = 0;

	while (p->wq && n < WRITE_BATCH) {
		me[n] = p->wq;
		obj[n] = stfs_inflight_object(me[n]);
		if (!(p->wq = *stfs_inflight_later(me[n])))
			p->wq_tail = &p->wq;
		p->nwq--;
		n++;
	}
	p->writing += n;
	return n;
}

static void *writer(void *arg)
{
	struct stfs_remote *r = arg;
	struct stfs_pool *p = &r->pool;
	struct stfs_inflight *me[WRITE_BATCH];
	struct stfs_object *obj[WRITE_BATCH];

	pthread_mutex_lock(&p->mu);
	for (;;) {
		size_t n;

		while (!p->wq && !p->stopping)
			pthread_cond_wait(&p->wq_cv, &p->mu);
		if (!(n = take(p, me, obj)))
			break;
		pthread_mutex_unlock(&p->mu);
		write_blocks(r, me, n);
		pthread_mutex_lock(&p->mu);
		for (size_t i = 0; i < n; i++)  /* me[i] is gone: its object */
			stfs_pool_job_over(obj[i]);
		if ((p->writing -= (unsigned)n) == 0 && !p->wq)
			pthread_cond_broadcast(&p->written);
	}
	pthread_cond_broadcast(&p->written);
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

void stfs_writeback_start(struct stfs_remote *r)
{
	struct stfs_pool *p = &r->pool;

	for (unsigned i = 0; i < STFS_WRITERS; i++)
		if (p->writer_on == i &&
		    pthread_create(&p->writer_th[i], NULL, writer, r) == 0)
			p->writer_on++;
}

void stfs_writeback_stop(struct stfs_remote *r)
{
	struct stfs_pool *p = &r->pool;
	unsigned n;

	pthread_mutex_lock(&p->mu);
	n = p->pid == getpid() ? p->writer_on : 0;
	p->writer_on = 0;
	pthread_cond_broadcast(&p->wq_cv);
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < n; i++)   /* they write what is queued, */
		pthread_join(p->writer_th[i], NULL);   /* and end */
}

void stfs_writeback_flush(struct stfs_remote *r)
{
	struct stfs_pool *p = &r->pool;

	pthread_mutex_lock(&p->mu);
	while ((p->wq || p->writing) && p->writer_on)
		pthread_cond_wait(&p->written, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

/* Queue block me for the writers: 0, or -1 (the queue is full, or there
 * are no writers: the caller writes it). */
static int give(struct stfs_remote *r, struct stfs_inflight *me)
{
	struct stfs_pool *p = &r->pool;

	pthread_mutex_lock(&p->mu);
	if (!p->writer_on || p->stopping || p->nwq >= 2 * stfs_pool_width(r)) {
		pthread_mutex_unlock(&p->mu);
		return -1;
	}
	stfs_inflight_object(me)->plan.inflight++;
	*stfs_inflight_later(me) = NULL;
	*p->wq_tail = me;
	p->wq_tail = stfs_inflight_later(me);
	p->nwq++;
	pthread_cond_signal(&p->wq_cv);
	pthread_mutex_unlock(&p->mu);
	return 0;
}

void stfs_writeback(struct stfs_fetcher *f)
{
	struct stfs_inflight *mine[STFS_CACHE_BATCH];
	struct stfs_remote *r = NULL;
	size_t n = 0;

	while (f->to_write) {
		struct stfs_inflight *me = f->to_write;

		f->to_write = *stfs_inflight_later(me);
		r = stfs_inflight_object(me)->r;
		if (give(r, me) == 0)
			continue;
		/* written here, together (all of one remote: a fetcher's) */
		mine[n++] = me;
		if (n == STFS_CACHE_BATCH) {
			write_blocks(r, mine, n);
			n = 0;
		}
	}
	if (n)
		write_blocks(r, mine, n);
}

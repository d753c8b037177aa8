/*
 * lookup.c: what is known of an object's bytes before they are fetched:
 * the blocks the cache holds, and the fetches that failed a moment ago
 * (and the object's making, and its blocks' sizes: stfs_object_init(),
 * stfs_block_len()).  stfs_blocks_lookup() is the one place that asks
 * both, for a read on its caller's thread (http.c, before a hand-over to
 * a worker) and for each block a worker is to read (blocks.c).
 *
 * Cached blocks are read through descriptors kept open (the last
 * STFS_FD_SLOTS blocks read of each object), as a local file would be: a
 * hand-over to a worker, or an open per read, costs more than the read.
 * A block evicted while open stays readable.  Every read is checked
 * (blockfile.c: its header when the block is opened, the checksums of the
 * pieces it reads each time): a block that fails is never served.  It is
 * logged, closed and removed from the cache; the read is then a miss,
 * fetched again, or EIO offline.
 *
 * The failures are a ring of the last STFS_FAIL_SLOTS fetches that
 * failed, each remembered FAIL_MEMORY_MS: the kernel answers a failed
 * buffered read by asking again for its first page at once, which would
 * otherwise wait as long again (a 429 with Retry-After: 30 s twice).
 * Beside them, the clock of a reader's bound: the backoff a retry may
 * take and still end by it (stfs_backoff_within(), for the HTTP client).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "engine.h"
#include "metrics.h"
#include "blocks/blocks.h"

#define FAIL_MEMORY_MS 500

size_t stfs_block_len(const struct stfs_object *o, uint64_t b)
{
	uint64_t start = b * o->r->o.block;

	return o->size - start < o->r->o.block ? (size_t)(o->size - start) :
	       o->r->o.block;
}

void stfs_object_init(struct stfs_object *o)
{
	stfs_pool_plan_init(o);
	stfs_lookup_init(o);
}

void stfs_object_fini(struct stfs_object *o)
{
	stfs_pool_plan_fini(o);
	stfs_lookup_fini(o);
}

void stfs_lookup_init(struct stfs_object *o)
{
	o->failures = (struct stfs_obj_failures){ .next = 0 };
	pthread_rwlock_init(&o->fds.lock, NULL);
	for (unsigned k = 0; k < STFS_FD_SLOTS; k++)
		o->fds.slot[k] = (struct stfs_cache_blk){ .fd = -1 };
}

void stfs_lookup_fini(struct stfs_object *o)
{
	for (unsigned k = 0; k < STFS_FD_SLOTS; k++)
		stfs_blockfile_close(&o->fds.slot[k]);
	pthread_rwlock_destroy(&o->fds.lock);
}

/* Block b of o failed its check (why): logged, and dropped from its slot
 * and the cache (when online). */
static void failed_check(struct stfs_object *o, uint64_t b,
			 const struct stfs_cache_blk *bad, const char *why)
{
	unsigned k = (unsigned)(b % STFS_FD_SLOTS);
	struct stfs_cache_blk old = { .fd = -1 };
	char line[768];
	int offline = o->r->o.offline;

	snprintf(line, sizeof(line), "stfs: %s: block %" PRIu64 " (bytes %"
		 PRIu64 "-%" PRIu64 ") in the cache failed its check: %s; %s",
		 o->url, b, b * o->r->o.block,
		 b * o->r->o.block + stfs_block_len(o, b) - 1, why, offline ?
		 "not served (offline: EIO)" : "removed, and fetched again");
	stfs_remote_log(o->r, line);
	stfs_m_verify(o->r->o.metrics, STFS_VERIFY_CACHE_BLOCK);
	pthread_rwlock_wrlock(&o->fds.lock);
	if (o->fds.slot[k].fd >= 0 && o->fds.slot[k].ino == bad->ino &&
	    o->fds.slot[k].dev == bad->dev) {
		old = o->fds.slot[k];
		o->fds.slot[k] = (struct stfs_cache_blk){ .fd = -1 };
	}
	pthread_rwlock_unlock(&o->fds.lock);
	stfs_blockfile_close(&old);
	stfs_cache_drop_block(&o->cobj, bad, b);
}

/* Bytes [in, in + n) of block b of o from the cache, through its open
 * descriptor (opened and kept if it is not), checked: 0, -ENOENT (not
 * there), or -EBADMSG (there, but it failed its check: logged, and
 * dropped). */
static int cached_block(struct stfs_object *o, uint64_t b, size_t in,
			void *buf, size_t n)
{
	size_t blen = stfs_block_len(o, b);
	unsigned k = (unsigned)(b % STFS_FD_SLOTS);
	struct stfs_cache_blk blk, old;
	char why[160];
	int rc = -ENOENT;

	if (in > blen || n > blen - in)
		return -ENOENT;
	pthread_rwlock_rdlock(&o->fds.lock);
	if (o->fds.slot[k].fd >= 0 && o->fds.slot[k].block == b) {
		rc = stfs_blockfile_pread(&o->fds.slot[k], buf, n, in, why,
					  sizeof(why));
		blk = o->fds.slot[k];   /* its identity, if it failed */
	}
	pthread_rwlock_unlock(&o->fds.lock);
	if (rc == -EBADMSG) {
		failed_check(o, b, &blk, why);
		return rc;
	}
	if (rc != -ENOENT)
		return rc ? -ENOENT : 0;        /* (no memory: a miss) */
	if ((rc = stfs_cache_open_block(&o->cobj, b, blen, &blk, why,
					sizeof(why)))) {
		if (rc == -EBADMSG)
			failed_check(o, b, &blk, why);
		return rc == -EBADMSG ? rc : -ENOENT;
	}
	if ((rc = stfs_blockfile_pread(&blk, buf, n, in, why, sizeof(why)))) {
		if (rc == -EBADMSG)
			failed_check(o, b, &blk, why);
		stfs_blockfile_close(&blk);
		return rc == -EBADMSG ? rc : -ENOENT;
	}
	pthread_rwlock_wrlock(&o->fds.lock);
	old = o->fds.slot[k];
	o->fds.slot[k] = blk;
	pthread_rwlock_unlock(&o->fds.lock);
	stfs_blockfile_close(&old);
	return 0;
}

/* Bytes [off, off + len) of o wholly from cached blocks (len 0: the
 * block at off is there, its header checked): 0, -ENOENT (buf then holds
 * garbage), or -EBADMSG (a block failed its check). */
static int cached(struct stfs_object *o, void *buf, size_t len,
		  uint64_t off)
{
	size_t block = o->r->o.block;

	do {
		uint64_t b = off / block;
		size_t in = (size_t)(off - b * block);
		size_t blen = stfs_block_len(o, b);
		size_t n = blen - in < len ? blen - in : len;

		int rc = cached_block(o, b, in, buf, n);

		if (len)
			stfs_m_block(o->r->o.metrics, rc == 0);
		if (rc)
			return rc;
		buf = (char *)buf + n;
		off += n;
		len -= n;
	} while (len);
	return 0;
}

void stfs_blocks_failed(struct stfs_object *s, uint64_t off, uint64_t end,
			int rc)
{
	unsigned k;

	if (rc == -ENOMEM || atomic_load(&s->closing))
		return;
	k = s->failures.next++ % STFS_FAIL_SLOTS;
	s->failures.ring[k] = (struct stfs_failure){ off, end,
					      stfs_now_ms() + FAIL_MEMORY_MS, rc };
}

/* The failure of a fetch of bytes [off, off + len) of o that ended a
 * moment ago, or 0. */
static int recent_failure(struct stfs_object *o, uint64_t off, size_t len)
{
	struct stfs_blocks *bl = &o->r->blocks;
	uint64_t now = stfs_now_ms();
	int rc = 0;

	pthread_mutex_lock(&bl->mu);
	for (unsigned k = 0; k < STFS_FAIL_SLOTS && !rc; k++)
		if (now < o->failures.ring[k].until_ms && off < o->failures.ring[k].end &&
		    off + len > o->failures.ring[k].off)
			rc = o->failures.ring[k].rc;
	pthread_mutex_unlock(&bl->mu);
	return rc;
}

int stfs_blocks_lookup(struct stfs_object *o, void *buf, size_t len,
		       uint64_t off)
{
	int rc = o->cobj.valid ? cached(o, buf, len, off) : -ENOENT;

	if (rc == 0) {
		o->r->count.hits++;
		return 0;
	}
	/* a block that failed its check: fetched again, but not offline */
	if (rc == -EBADMSG && o->r->o.offline)
		return -EIO;
	rc = recent_failure(o, off, len ? len : 1);
	return rc ? rc : -ENOENT;
}

int stfs_blocks_failing(struct stfs_object *o)
{
	return recent_failure(o, 0, SIZE_MAX);
}

uint64_t stfs_now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

unsigned stfs_backoff_within(uint64_t deadline_ms, uint64_t t0, unsigned wait)
{
	uint64_t now = stfs_now_ms(), took = now - t0;

	if (now + took + wait <= deadline_ms)
		return wait;
	if (!wait || deadline_ms < now + took + wait / 2)
		return 0;
	return (unsigned)(deadline_ms - now - took);
}

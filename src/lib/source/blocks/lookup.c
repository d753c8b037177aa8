/*
 * lookup.c: what is known of an object's bytes before they are fetched:
 * the blocks the cache holds, and the fetches that failed a moment ago.
 * stfs_blocks_lookup() is the one place that asks both, for a read on
 * its caller's thread (http.c, before a hand-over to a worker) and for
 * each block a worker is to read (blocks.c).
 *
 * Cached blocks are read through descriptors kept open (the last
 * STFS_FD_SLOTS blocks read of each object), as a local file would be: a
 * hand-over to a worker, or an open per read, costs more than the read.
 * A block evicted while open stays readable.
 *
 * The failures are a ring of the last STFS_FAIL_SLOTS fetches that
 * failed, each remembered FAIL_MEMORY_MS: the kernel answers a failed
 * buffered read by asking again for its first page at once, which would
 * otherwise wait as long again (a 429 with Retry-After: 30 s twice).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "remote.h"

#define FAIL_MEMORY_MS 500

void stfs_lookup_init(struct stfs_object *o)
{
	pthread_rwlock_init(&o->fd_lock, NULL);
	for (unsigned k = 0; k < STFS_FD_SLOTS; k++)
		o->fd[k] = -1;
}

void stfs_lookup_fini(struct stfs_object *o)
{
	for (unsigned k = 0; k < STFS_FD_SLOTS; k++)
		if (o->fd[k] >= 0)
			close(o->fd[k]);
	pthread_rwlock_destroy(&o->fd_lock);
}

/* Bytes [in, in + n) of block b of o from the cache, through its open
 * descriptor (opened and kept if it is not): 0, or -ENOENT. */
static int cached_block(struct stfs_object *o, uint64_t b, size_t in,
			void *buf, size_t n)
{
	size_t blen = stfs_block_len(o, b);
	unsigned k = (unsigned)(b % STFS_FD_SLOTS);
	int rc = -ENOENT, fd, old;

	if (in > blen || n > blen - in)
		return -ENOENT;
	pthread_rwlock_rdlock(&o->fd_lock);
	if (o->fd[k] >= 0 && o->fd_block[k] == b)
		rc = stfs_cache_pread(o->fd[k], buf, n, in);
	pthread_rwlock_unlock(&o->fd_lock);
	if (!rc)
		return 0;
	if ((fd = stfs_cache_open_block(&o->cobj, b, blen)) < 0)
		return -ENOENT;
	rc = stfs_cache_pread(fd, buf, n, in);
	pthread_rwlock_wrlock(&o->fd_lock);
	old = o->fd[k];
	o->fd[k] = fd;
	o->fd_block[k] = b;
	pthread_rwlock_unlock(&o->fd_lock);
	if (old >= 0)
		close(old);
	return rc;
}

/* Bytes [off, off + len) of o wholly from cached blocks (len 0: the
 * block at off is there, whole): 0, or -ENOENT (buf then holds
 * garbage). */
static int cached(struct stfs_object *o, void *buf, size_t len,
		  uint64_t off)
{
	size_t block = o->r->o.block;

	do {
		uint64_t b = off / block;
		size_t in = (size_t)(off - b * block);
		size_t blen = stfs_block_len(o, b);
		size_t n = blen - in < len ? blen - in : len;

		if (cached_block(o, b, in, buf, n))
			return -ENOENT;
		buf = (char *)buf + n;
		off += n;
		len -= n;
	} while (len);
	return 0;
}

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

void stfs_blocks_failed(struct stfs_object *s, uint64_t off, uint64_t end,
			int rc)
{
	unsigned k;

	if (rc == -ENOMEM || atomic_load(&s->closing))
		return;
	k = s->nfailed++ % STFS_FAIL_SLOTS;
	s->failed[k] = (struct stfs_failure){ off, end,
					      now_ms() + FAIL_MEMORY_MS, rc };
}

/* The failure of a fetch of bytes [off, off + len) of o that ended a
 * moment ago, or 0. */
static int recent_failure(struct stfs_object *o, uint64_t off, size_t len)
{
	struct stfs_blocks *bl = &o->r->blocks;
	uint64_t now = now_ms();
	int rc = 0;

	pthread_mutex_lock(&bl->mu);
	for (unsigned k = 0; k < STFS_FAIL_SLOTS && !rc; k++)
		if (now < o->failed[k].until_ms && off < o->failed[k].end &&
		    off + len > o->failed[k].off)
			rc = o->failed[k].rc;
	pthread_mutex_unlock(&bl->mu);
	return rc;
}

int stfs_blocks_lookup(struct stfs_object *o, void *buf, size_t len,
		       uint64_t off)
{
	int rc;

	if (o->cobj.valid && cached(o, buf, len, off) == 0) {
		o->r->count.hits++;
		return 0;
	}
	rc = recent_failure(o, off, len ? len : 1);
	return rc ? rc : -ENOENT;
}

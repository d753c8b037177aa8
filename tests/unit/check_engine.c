/*
 * check_engine.c: the block engine (src/lib/source/blocks/) driven through
 * an in-memory struct stfs_fetch_ops, with no server and no HTTP: the
 * "server" is a byte pattern that a fake fetch copies out in chunks, the
 * way the HTTP client hands bytes up (progress after each chunk, a
 * reader's early answer once its bytes are in), with a latency, a failure
 * at an offset, or a body that ends short, and it counts and records every
 * request.  So the engine's rules are checked in seconds:
 *
 *   - every byte read is the object's, in blocks fetched once each (the
 *     cache, the blocks in flight and prefetch share one fetch);
 *   - readers of one block during a slow fetch wait for that one fetch;
 *   - a fetch that fails (at an offset, or a body that ends short) serves
 *     no byte it did not get, caches nothing, and its failure is answered
 *     at once to the read that follows, with no new request;
 *   - a block read back from the cache is checked before it is served: a
 *     block file changed on the disk is fetched again, never served;
 *   - each part of an object the engine keeps does its job: a failure is
 *     forgotten after a moment (then fetched again), a cached block is
 *     read through the descriptor kept open (an evicted one still), and
 *     an object closing waits for every read of it queued or on the wire;
 *   - a prefetched block in the cache is held in memory for its reader
 *     until it has been read whole (a read across two held blocks from
 *     both), then read from its file.
 *
 * Its own program (check-engine, the unit suite), so that it shares no
 * file with the other Check suites.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "engine.h"
#include "blocks/blocks.h"

#define BLOCK (64u << 10)
#define NBLOCKS 10
#define SIZE ((uint64_t)NBLOCKS * BLOCK + 1234)   /* a short last block */
#define CHUNK (16u << 10)       /* what the fake hands up at a time */
#define MAXREQ 512

/* The byte of the object at offset i. */
static unsigned char pat(uint64_t i)
{
	return (unsigned char)((i * 2654435761u) >> 13 ^ i);
}

/* One object behind the fake fetch; o first, so that the fetch finds its
 * fake from the object it is given. */
struct fake {
	struct stfs_object o;
	struct stfs_remote *r;
	char dir[64];           /* the cache's directory, or "" */
	pthread_mutex_t mu;
	unsigned nreq;
	struct { uint64_t off; size_t len; } req[MAXREQ];
	unsigned latency_ms;    /* before the first byte of each answer */
	uint64_t fail_at;       /* a request holding this offset fails */
	int fail_bytes;         /* ... after its bytes before it (a body
				 * that ends short), else at once */
	atomic_int handles;
};

static void *handle_new(void)
{
	return malloc(1);
}

static void handle_free(void *h)
{
	free(h);
}

static void nap_ms(unsigned ms)
{
	struct timespec t = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&t, &t) && errno == EINTR)
		;
}

/* Tell the request's progress that bytes up to got have come, and answer
 * an early reader whose bytes are in: what the HTTP client's transfer
 * thread and the fetching thread do between them. */
static void hand_up(const struct stfs_request *q, char *buf, size_t got)
{
	struct stfs_early *e = q->early;

	if (e && !e->ready && got >= e->at + e->len) {
		e->ready = 1;
		e->done = 1;
		e->fn(e->arg, buf + e->at);
	}
	if (q->progress && got > atomic_load(&q->progress->good)) {
		atomic_store(&q->progress->good, got);
		if (got >= atomic_load(&q->progress->want)) {
			atomic_store(&q->progress->want, SIZE_MAX);
			q->progress->fn(q->progress->arg);
		}
	}
}

static int fetch(struct stfs_object *o, void *h,
		 const struct stfs_request *q, char *buf, size_t *got,
		 struct stfs_error *err)
{
	struct fake *f = (struct fake *)o;
	uint64_t end = q->off + q->len;
	size_t stop = q->len;
	int fail = 0;

	ck_assert_ptr_nonnull(h);
	ck_assert_uint_le(end, SIZE);
	pthread_mutex_lock(&f->mu);
	ck_assert_uint_lt(f->nreq, MAXREQ);
	f->req[f->nreq].off = q->off;
	f->req[f->nreq].len = q->len;
	f->nreq++;
	if (f->fail_at >= q->off && f->fail_at < end) {
		fail = 1;
		stop = f->fail_bytes ? (size_t)(f->fail_at - q->off) : 0;
	}
	pthread_mutex_unlock(&f->mu);
	if (f->latency_ms)
		nap_ms(f->latency_ms);
	*got = 0;
	while (*got < stop) {
		size_t n = stop - *got < CHUNK ? stop - *got : CHUNK;

		if (q->cancel && atomic_load(q->cancel))
			return stfs_fail(err, -ECANCELED, NULL, STFS_NO_OFFSET,
					 "cancelled");
		for (size_t i = 0; i < n; i++)
			buf[*got + i] = (char)pat(q->off + *got + i);
		*got += n;
		hand_up(q, buf, *got);
	}
	if (fail)
		return stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "%s at byte "
				 "%llu", f->fail_bytes ? "the body ended" :
				 "HTTP 500", (unsigned long long)f->fail_at);
	return 0;
}

static const struct stfs_fetch_ops fake_ops = {
	.handle_new = handle_new,
	.handle_free = handle_free,
	.fetch = fetch,
};

/* A remote object of SIZE bytes in blocks of BLOCK, fetched by the fake,
 * with a cache of its own (cached) or none. */
static struct fake *fake_new(int cached)
{
	struct fake *f = calloc(1, sizeof(*f));
	struct stfs_remote_opts *o = stfs_remote_opts_new();
	struct stfs_error err = { 0 };
	char why[256], opt[128];

	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(o);
	ck_assert_int_eq(stfs_remote_opts_set(o, "block_size=64K", why,
					      sizeof(why)), 0);
	ck_assert_int_eq(stfs_remote_opts_set(o, "connections=4", why,
					      sizeof(why)), 0);
	if (cached) {
		strcpy(f->dir, "/tmp/stfs-check-engine-XXXXXX");
		ck_assert_ptr_nonnull(mkdtemp(f->dir));
		snprintf(opt, sizeof(opt), "cache=%s/c", f->dir);
	} else {
		snprintf(opt, sizeof(opt), "nocache");
	}
	ck_assert_int_eq(stfs_remote_opts_set(o, opt, why, sizeof(why)), 0);
	ck_assert_int_eq(stfs_remote_new(o, &f->r, &err), 0);
	stfs_remote_opts_free(o);
	f->r->fetch = &fake_ops;        /* the engine's only way out */
	pthread_mutex_init(&f->mu, NULL);
	f->fail_at = UINT64_MAX;
	stfs_object_init(&f->o);
	f->o.r = f->r;
	f->o.url = "mem://engine/model.safetensors";
	f->o.etag = "\"e1\"";
	f->o.last_modified = "";
	f->o.size = SIZE;
	if (cached) {
		ck_assert_int_eq(stfs_cache_ready(stfs_remote_cache(f->r),
						  &err), 0);
		ck_assert_int_eq(stfs_cache_object(stfs_remote_cache(f->r),
						   f->o.url, f->o.etag, SIZE,
						   &f->o.cobj, &err), 0);
	}
	return f;
}

static int rm_one(const char *p, const struct stat *st, int type,
		  struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	return remove(p);
}

static void fake_free(struct fake *f)
{
	atomic_store(&f->o.closing, 1);
	stfs_pool_drain(&f->o);
	stfs_blocks_forget(&f->r->blocks, &f->o);
	stfs_object_fini(&f->o);
	stfs_remote_free(f->r);
	pthread_mutex_destroy(&f->mu);
	if (f->dir[0])
		nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
}

static unsigned requests(struct fake *f)
{
	unsigned n;

	pthread_mutex_lock(&f->mu);
	n = f->nreq;
	pthread_mutex_unlock(&f->mu);
	return n;
}

/* Bytes [off, off + len) read on this thread, as a synchronous source
 * read does; their blocks then go to the cache (written behind). */
static int rd(struct fake *f, void *buf, size_t len, uint64_t off)
{
	struct stfs_fetcher x = { .h = handle_new() };
	int rc = stfs_blocks_read(&x, &f->o, buf, len, off, NULL);

	stfs_writeback(&x);
	handle_free(x.h);
	return rc;
}

static void assert_bytes(const unsigned char *buf, size_t len, uint64_t off)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != pat(off + i))
			ck_abort_msg("byte %llu is %u, not %u",
				     (unsigned long long)(off + i), buf[i],
				     pat(off + i));
}

/* Every request is one whole block, aligned, and none is asked twice. */
static void assert_blocks_once(struct fake *f)
{
	int seen[NBLOCKS + 1] = { 0 };

	pthread_mutex_lock(&f->mu);
	for (unsigned i = 0; i < f->nreq; i++) {
		uint64_t b = f->req[i].off / BLOCK;

		ck_assert_uint_eq(f->req[i].off % BLOCK, 0);
		ck_assert_uint_eq(f->req[i].len, stfs_block_len(&f->o, b));
		ck_assert_msg(!seen[b]++, "block %llu fetched twice",
			      (unsigned long long)b);
	}
	pthread_mutex_unlock(&f->mu);
}

/* Read in pieces that straddle blocks: the object's bytes, each block
 * fetched once; read again: all from the cache, no request. */
START_TEST(t_engine_bytes_once)
{
	struct fake *f = fake_new(1);
	unsigned char *buf = malloc(SIZE);
	size_t step[] = { 4096, 100000, 1, 65536, 300000 };
	uint64_t off = 0;

	ck_assert_ptr_nonnull(buf);
	f->latency_ms = 2;
	for (unsigned i = 0; off < SIZE; i++) {
		size_t n = step[i % 5];

		if (n > SIZE - off)
			n = (size_t)(SIZE - off);
		ck_assert_int_eq(rd(f, buf + off, n, off), 0);
		off += n;
	}
	assert_bytes(buf, SIZE, 0);
	ck_assert_uint_eq(requests(f), NBLOCKS + 1);
	assert_blocks_once(f);
	stfs_writeback_flush(f->r);
	memset(buf, 0, SIZE);
	ck_assert_int_eq(rd(f, buf, SIZE, 0), 0);
	assert_bytes(buf, SIZE, 0);
	ck_assert_uint_eq(requests(f), NBLOCKS + 1);
	free(buf);
	fake_free(f);
}
END_TEST

struct reader {
	struct fake *f;
	uint64_t off;
	size_t len;
	unsigned char buf[8192];
	int rc;
};

static void *read_thread(void *arg)
{
	struct reader *r = arg;

	r->rc = rd(r->f, r->buf, r->len, r->off);
	return NULL;
}

/* Eight readers of one block while its fetch is slow (200 ms before its
 * first byte): one request, and each reader its own bytes. */
START_TEST(t_engine_latency_one_fetch)
{
	for (int cached = 0; cached < 2; cached++) {
		struct fake *f = fake_new(cached);
		struct reader r[8];
		pthread_t t[8];

		f->latency_ms = 200;
		for (int i = 0; i < 8; i++) {
			r[i] = (struct reader){ .f = f, .len = 4096,
				.off = 5 * BLOCK + (uint64_t)i * 7000 };
			ck_assert_int_eq(pthread_create(&t[i], NULL,
							read_thread, &r[i]),
					 0);
		}
		for (int i = 0; i < 8; i++) {
			pthread_join(t[i], NULL);
			ck_assert_int_eq(r[i].rc, 0);
			assert_bytes(r[i].buf, r[i].len, r[i].off);
		}
		/* without a cache the first reader fetches its bytes exactly
		 * and the others theirs: what counts is that none waits for
		 * a fetch twice, and with a cache that there is one */
		if (cached)
			ck_assert_uint_eq(requests(f), 1);
		else
			ck_assert_uint_le(requests(f), 8);
		fake_free(f);
	}
}
END_TEST

/* A block whose fetch fails at an offset (HTTP 500, or a body that ends
 * there): the read is EIO and gets no byte; the read right after it is
 * EIO at once, with no request; nothing of it is cached; the blocks
 * around it read as they should. */
START_TEST(t_engine_failure_at)
{
	for (int mode = 0; mode < 4; mode++) {
		int cached = mode & 1, bytes = mode >> 1;
		struct fake *f = fake_new(cached);
		unsigned char buf[3 * BLOCK], none[4096];
		unsigned n;

		f->fail_at = 3 * BLOCK + 40000;
		f->fail_bytes = bytes;
		memset(buf, 0xee, sizeof(buf));
		ck_assert_int_eq(rd(f, buf, 4096, 3 * BLOCK + 38000), -EIO);
		/* with a cache the block is fetched whole into memory, and
		 * a reader's buffer gets nothing of a block that failed */
		for (size_t i = 0; cached && i < 4096; i++)
			ck_assert_uint_eq(buf[i], 0xee);
		ck_assert_uint_eq(n = requests(f), 1);
		ck_assert_int_eq(rd(f, buf, 4096, 3 * BLOCK + 38000), -EIO);
		ck_assert_uint_eq(requests(f), n);
		/* with a cache, a read of bytes before the failure in the
		 * same block fails with it (the block is one fetch) while
		 * it is remembered */
		if (cached) {
			ck_assert_int_eq(rd(f, buf, 4096, 3 * BLOCK), -EIO);
			ck_assert_uint_eq(requests(f), n);
		}
		stfs_writeback_flush(f->r);
		if (cached)
			ck_assert_int_eq(stfs_cache_read(&f->o.cobj, 3, BLOCK,
							 0, none, 1),
					 -ENOENT);
		ck_assert_int_eq(rd(f, buf, BLOCK, 2 * BLOCK), 0);
		assert_bytes(buf, BLOCK, 2 * BLOCK);
		ck_assert_int_eq(rd(f, buf, BLOCK, 4 * BLOCK), 0);
		assert_bytes(buf, BLOCK, 4 * BLOCK);
		fake_free(f);
	}
}
END_TEST

struct waiter {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done, rc;
};

static void on_done(void *arg, int rc)
{
	struct waiter *w = arg;

	pthread_mutex_lock(&w->mu);
	w->done = 1;
	w->rc = rc;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

/* Bytes [off, off + len) through the pool, as the kernel's reads come:
 * the engine's workers fetch, prefetch the blocks ahead, and answer. */
static int rd_async(struct fake *f, void *buf, size_t len, uint64_t off,
		    const struct stfs_extent *ext)
{
	struct waiter w = { .mu = PTHREAD_MUTEX_INITIALIZER,
			    .cv = PTHREAD_COND_INITIALIZER };
	int rc = stfs_blocks_lookup(&f->o, buf, len, off);

	if (rc != -ENOENT)
		return rc;
	stfs_pool_read(&f->o, buf, len, off, ext, on_done, &w);
	pthread_mutex_lock(&w.mu);
	while (!w.done)
		pthread_cond_wait(&w.cv, &w.mu);
	pthread_mutex_unlock(&w.mu);
	return w.rc;
}

/* A reader in order through the pool (a tensor of the whole object):
 * the workers' fetches and prefetches together ask for each block once,
 * and every byte is right. */
START_TEST(t_engine_async_in_order)
{
	struct fake *f = fake_new(1);
	struct stfs_extent ext = { 0, SIZE, 0 };
	unsigned char *buf = malloc(SIZE);

	ck_assert_ptr_nonnull(buf);
	f->latency_ms = 5;
	for (uint64_t off = 0; off < SIZE; off += 32768) {
		size_t n = SIZE - off < 32768 ? (size_t)(SIZE - off) : 32768;

		ck_assert_int_eq(rd_async(f, buf + off, n, off, &ext), 0);
	}
	assert_bytes(buf, SIZE, 0);
	stfs_writeback_flush(f->r);
	assert_blocks_once(f);
	ck_assert_uint_eq(requests(f), NBLOCKS + 1);
	free(buf);
	fake_free(f);
}
END_TEST

/* A block file changed on the disk after it was cached: the next read is
 * checked before anything is served, the block fetched again, and the
 * bytes are the object's. */
START_TEST(t_engine_cache_checked)
{
	struct fake *f = fake_new(1);
	unsigned char buf[BLOCK], bad = 0;
	char path[256];
	int fd;

	ck_assert_int_eq(rd(f, buf, BLOCK, 2 * BLOCK), 0);
	stfs_writeback_flush(f->r);
	ck_assert_uint_eq(requests(f), 1);
	ck_assert_int_eq(rd(f, buf, BLOCK, 2 * BLOCK), 0);
	ck_assert_uint_eq(requests(f), 1);      /* from the cache */
	snprintf(path, sizeof(path), "%s/c/%s/2", f->dir, f->o.cobj.dir);
	ck_assert_int_ge(fd = open(path, O_RDWR), 0);
	ck_assert_int_eq(pread(fd, &bad, 1, STFS_BLOCK_HDR + 1000), 1);
	bad ^= 0x40;
	ck_assert_int_eq(pwrite(fd, &bad, 1, STFS_BLOCK_HDR + 1000), 1);
	close(fd);
	memset(buf, 0, sizeof(buf));
	ck_assert_int_eq(rd(f, buf, BLOCK, 2 * BLOCK), 0);
	assert_bytes(buf, BLOCK, 2 * BLOCK);
	ck_assert_uint_eq(requests(f), 2);      /* fetched again */
	fake_free(f);
}
END_TEST

/* The failure of a fetch is remembered a moment only (the object's
 * failures, lookup.c): once the engine forgets it (waited for, no fixed
 * time), the server mended answers the next read, with one request. */
START_TEST(t_engine_failure_forgotten)
{
	for (int cached = 0; cached < 2; cached++) {
		struct fake *f = fake_new(cached);
		unsigned char buf[4096];
		unsigned n;

		f->fail_at = 3 * BLOCK + 100;
		ck_assert_int_eq(rd(f, buf, 4096, 3 * BLOCK), -EIO);
		ck_assert_int_eq(stfs_blocks_failing(&f->o), -EIO);
		pthread_mutex_lock(&f->mu);
		f->fail_at = UINT64_MAX;
		pthread_mutex_unlock(&f->mu);
		for (int i = 0; stfs_blocks_failing(&f->o) && i < 1000; i++)
			nap_ms(10);
		ck_assert_int_eq(stfs_blocks_failing(&f->o), 0);
		n = requests(f);
		ck_assert_int_eq(rd(f, buf, 4096, 3 * BLOCK), 0);
		assert_bytes(buf, 4096, 3 * BLOCK);
		ck_assert_uint_eq(requests(f), n + 1);
		fake_free(f);
	}
}
END_TEST

/* A cached block is read through the descriptor the object keeps open
 * (its fds, lookup.c): a block file removed from the cache after it was
 * opened (an eviction) is still read, checked, with no request. */
START_TEST(t_engine_kept_open)
{
	struct fake *f = fake_new(1);
	unsigned char buf[BLOCK];
	char path[256];

	ck_assert_int_eq(rd(f, buf, BLOCK, 2 * BLOCK), 0);
	stfs_writeback_flush(f->r);
	ck_assert_int_eq(rd(f, buf, 4096, 2 * BLOCK), 0);       /* opened */
	snprintf(path, sizeof(path), "%s/c/%s/2", f->dir, f->o.cobj.dir);
	ck_assert_int_eq(unlink(path), 0);
	memset(buf, 0, sizeof(buf));
	ck_assert_int_eq(rd(f, buf, BLOCK, 2 * BLOCK), 0);
	assert_bytes(buf, BLOCK, 2 * BLOCK);
	ck_assert_uint_eq(requests(f), 1);
	fake_free(f);
}
END_TEST

/* A prefetched block, once written to the cache (past the page cache),
 * is held in memory until its reader has read all of it: reads come from
 * memory (stfs_pool_held()) even with the block file gone, no new fetch;
 * then it is let go, and the block is read from its file. */
START_TEST(t_engine_held)
{
	struct fake *f = fake_new(1);
	struct stfs_fetcher x = { .h = handle_new() };
	unsigned char buf[BLOCK];
	char path[256];
	struct waiter w[2] = {
		{ .mu = PTHREAD_MUTEX_INITIALIZER,
		  .cv = PTHREAD_COND_INITIALIZER },
		{ .mu = PTHREAD_MUTEX_INITIALIZER,
		  .cv = PTHREAD_COND_INITIALIZER } };
	struct stat st;

	stfs_blocks_prefetch(&x, &f->o, 3);
	stfs_writeback(&x);
	handle_free(x.h);
	stfs_writeback_flush(f->r);
	ck_assert_uint_eq(requests(f), 1);
	snprintf(path, sizeof(path), "%s/c/%s/3", f->dir, f->o.cobj.dir);
	ck_assert_int_eq(stat(path, &st), 0);           /* in the cache */
	ck_assert_int_eq(rename(path, "/tmp/stfs-check-engine-held"), 0);
	memset(buf, 0, sizeof(buf));
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(stfs_pool_held(&f->o, buf + i * BLOCK / 2,
						BLOCK / 2, 3 * BLOCK +
						i * BLOCK / 2, NULL, on_done,
						&w[i]), 0);
		pthread_mutex_lock(&w[i].mu);
		while (!w[i].done)
			pthread_cond_wait(&w[i].cv, &w[i].mu);
		pthread_mutex_unlock(&w[i].mu);
		ck_assert_int_eq(w[i].rc, 0);
	}
	assert_bytes(buf, BLOCK, 3 * BLOCK);
	ck_assert_uint_eq(requests(f), 1);
	/* all read: let go; the file again */
	ck_assert_int_eq(stfs_pool_held(&f->o, buf, 4096, 3 * BLOCK, NULL,
					on_done, &w[0]), -ENOENT);
	ck_assert_int_eq(rename("/tmp/stfs-check-engine-held", path), 0);
	memset(buf, 0, sizeof(buf));
	ck_assert_int_eq(rd(f, buf, BLOCK, 3 * BLOCK), 0);
	assert_bytes(buf, BLOCK, 3 * BLOCK);
	ck_assert_uint_eq(requests(f), 1);
	/* a read across two held blocks (a tensor's file seldom starts on a
	 * block) is copied from both, their files gone: on an object of its
	 * own, whose first read is no reader's going on (which would have
	 * the blocks after it prefetched, and counted) */
	fake_free(f);
	f = fake_new(1);
	x.h = handle_new();
	stfs_blocks_prefetch(&x, &f->o, 5);
	stfs_blocks_prefetch(&x, &f->o, 6);
	stfs_writeback(&x);
	handle_free(x.h);
	stfs_writeback_flush(f->r);
	ck_assert_uint_eq(requests(f), 2);
	for (int b = 5; b <= 6; b++) {
		snprintf(path, sizeof(path), "%s/c/%s/%d", f->dir,
			 f->o.cobj.dir, b);
		ck_assert_int_eq(unlink(path), 0);
	}
	memset(buf, 0, sizeof(buf));
	w[1].done = 0;
	ck_assert_int_eq(stfs_pool_held(&f->o, buf, BLOCK, 5 * BLOCK +
					BLOCK / 2, NULL, on_done, &w[1]), 0);
	ck_assert_int_eq(w[1].done, 1);
	ck_assert_int_eq(w[1].rc, 0);
	assert_bytes(buf, BLOCK, 5 * BLOCK + BLOCK / 2);
	ck_assert_uint_eq(requests(f), 2);
	fake_free(f);
}
END_TEST

struct tally {
	pthread_mutex_t mu;
	unsigned done;
};

static void on_tally(void *arg, int rc)
{
	struct tally *t = arg;

	(void)rc;
	pthread_mutex_lock(&t->mu);
	t->done++;
	pthread_mutex_unlock(&t->mu);
}

/* An object closing while its reads are queued and on the wire (its
 * plan, pool.c): stfs_pool_drain() returns only once every one of them
 * was answered, so that nothing answers into a source that is gone. */
START_TEST(t_engine_drain_waits)
{
	enum { K = 6 };
	struct fake *f = fake_new(1);
	struct tally t = { .mu = PTHREAD_MUTEX_INITIALIZER };
	static unsigned char buf[K][4096];
	unsigned done;

	f->latency_ms = 200;
	for (unsigned i = 0; i < K; i++)
		stfs_pool_read(&f->o, buf[i], sizeof(buf[i]),
			       (uint64_t)i * BLOCK, NULL, on_tally, &t);
	atomic_store(&f->o.closing, 1);
	stfs_pool_drain(&f->o);
	pthread_mutex_lock(&t.mu);
	done = t.done;
	pthread_mutex_unlock(&t.mu);
	ck_assert_uint_eq(done, K);
	fake_free(f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("engine");
	TCase *tc = tcase_create("engine");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, t_engine_bytes_once);
	tcase_add_test(tc, t_engine_latency_one_fetch);
	tcase_add_test(tc, t_engine_failure_at);
	tcase_add_test(tc, t_engine_async_in_order);
	tcase_add_test(tc, t_engine_cache_checked);
	tcase_add_test(tc, t_engine_failure_forgotten);
	tcase_add_test(tc, t_engine_kept_open);
	tcase_add_test(tc, t_engine_held);
	tcase_add_test(tc, t_engine_drain_waits);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

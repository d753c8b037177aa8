/*
 * blocks.c: the block engine of the remote layer: an object's bytes read
 * by block, from the cache store (cache.c), from a fetch already under
 * way, or fetched whole (httpc.c) and then written to the cache behind
 * the reader's back; without a cache, prefetched blocks held in memory
 * for their readers and the rest fetched exactly.
 *
 * Blocks being fetched are listed, so that readers of one block wait for
 * one fetch (the kernel's readahead asks for several parts of a block at
 * once).  A fetched block stays listed, its bytes in memory, until it is
 * in the cache: the reader that fetched it is answered first (even before
 * the rest of the block has come: struct stfs_early), and readers of the
 * block meanwhile copy from memory.  A reader of a block on the wire
 * waits for its own bytes, not the whole block: the fetch tells how far
 * its bytes have come (struct stfs_progress) and answers each reader as
 * its bytes arrive; a reader that came through the pool waits on no
 * thread at all (stfs_blocks_attach()), so that every worker keeps its
 * connection busy.  Without a cache, a prefetched block
 * is held instead, until its bytes have all been read (the kernel's page
 * cache has them then) or twice the prefetch window of newer ones push
 * it out.  So is a block the cache could not take (a full disk, a
 * cache_size under one block): it is read from memory as it would be
 * without a cache, not fetched again.  Which blocks are prefetched, and
 * on which threads, is pool.c's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "engine.h"
#include "blocks/blocks.h"
#include "metrics.h"

/* A reader waiting for its bytes [at, at + len) of a block on the wire:
 * answered by done(arg, rc) on the fetching thread, or, without done (a
 * reader waiting on its own thread), told by ready. */
struct stfs_waiter {
	size_t at, len;
	void *buf;
	stfs_source_done done;
	void *arg;
	int ready;
	struct stfs_waiter *next;
};

struct stfs_inflight {
	struct stfs_object *s;
	uint64_t block;
	int done, rc;               /* set when fetched (or failed) */
	size_t cut;                 /* data[cut, len) is fetched first, */
	int head;                   /* then data[0, cut) (head set) */
	struct stfs_progress pr;    /* of the request on the wire */
	struct stfs_waiter *readers; /* waiting for their bytes */
	char *data;                 /* the block, till it is in the cache */
	size_t len;
	unsigned waiters;           /* readers copying from it */
	int held;                   /* kept for its readers (no cache, a
				     * block the cache could not take, or
				     * one it took past the page cache
				     * before they read it all) */
	size_t consumed;            /* bytes of it read, if held */
	int past;                   /* to be held once written past the
				     * page cache (stfs_inflight_item()) */
	int warm;                   /* fetched by a warm (stfs prefetch):
				     * its reader comes after it, from the
				     * page cache */
	struct stfs_inflight *next; /* newer blocks */
	struct stfs_inflight *later; /* a thread's blocks still to write */
};

/* A reader's block is fetched from the TAIL_FIRST-aligned piece its read
 * starts in, when that is not the block's start (see fetch_block()). */
#define TAIL_FIRST (64u << 10)

struct stfs_object *stfs_inflight_object(const struct stfs_inflight *me)
{
	return me->s;
}

struct stfs_inflight **stfs_inflight_later(struct stfs_inflight *me)
{
	return &me->later;
}

void stfs_blocks_init(struct stfs_blocks *b)
{
	*b = (struct stfs_blocks){ .nheld = 0 };
	pthread_mutex_init(&b->mu, NULL);
	pthread_cond_init(&b->cv, NULL);
}

void stfs_blocks_fini(struct stfs_blocks *b)
{
	while (b->nspare)
		free(b->spare[--b->nspare]);
	pthread_mutex_destroy(&b->mu);
	pthread_cond_destroy(&b->cv);
}

static void log_failure(const struct stfs_object *o, uint64_t off,
			size_t len, const struct stfs_error *e)
{
	char line[768];

	snprintf(line, sizeof(line), "stfs: %s: bytes %" PRIu64 "-%" PRIu64
		 ": %s", o->url, off, off + len - 1, e->msg);
	stfs_remote_log(o->r, line);
}

static struct stfs_inflight **find(struct stfs_blocks *bl,
				   const struct stfs_object *s, uint64_t b)
{
	struct stfs_inflight **p = &bl->list;

	while (*p && ((*p)->s != s || (*p)->block != b))
		p = &(*p)->next;
	return p;
}

/* Unlist me and free it once no reader copies from it (under mu); its
 * buffer is kept for the next fetch: a fresh 4 MiB allocation is a fresh
 * mapping, and touching its pages for the first time costs more than the
 * copy into them (on some hypervisors, much more). */
static void drop(struct stfs_remote *r, struct stfs_inflight *me)
{
	struct stfs_blocks *bl = &r->blocks;
	struct stfs_inflight **p = &bl->list;

	while (*p && *p != me)
		p = &(*p)->next;
	if (*p)
		*p = me->next;
	while (me->waiters)
		pthread_cond_wait(&bl->cv, &bl->mu);
	if (me->data && bl->nspare < r->o.connections &&
	    bl->nspare < STFS_SPARE_MAX)
		bl->spare[bl->nspare++] = me->data;
	else
		free(me->data);
	free(me);
}

static char *block_buf(struct stfs_remote *r)
{
	char *b = NULL;

	pthread_mutex_lock(&r->blocks.mu);
	if (r->blocks.nspare)
		b = r->blocks.spare[--r->blocks.nspare];
	pthread_mutex_unlock(&r->blocks.mu);
	/* page aligned: the cache writes it with O_DIRECT (cachedir.c) */
	if (!b) {
		void *m;

		b = posix_memalign(&m, 4096, r->o.block) ? NULL : m;
	}
	return b;
}

/* Let go of a held block (under mu); whoever clears held frees it. */
static void unhold(struct stfs_remote *r, struct stfs_inflight *me)
{
	me->held = 0;
	r->blocks.nheld--;
	drop(r, me);
}

/* Hold fetched block me for its readers (under mu), unless they have
 * read it all already, letting go of the oldest held block past twice
 * the prefetch window. */
static void hold(struct stfs_remote *r, struct stfs_inflight *me)
{
	if (me->consumed >= me->len) {
		drop(r, me);
		return;
	}
	me->held = 1;
	if (++r->blocks.nheld <= 2 * stfs_prefetch_blocks(r))
		return;
	for (struct stfs_inflight *o = r->blocks.list; o; o = o->next)
		if (o->held && o != me) {
			unhold(r, o);
			return;
		}
}

/* Have bytes [at, end) of block me come, good (under mu)? */
static int bytes_in(struct stfs_inflight *me, size_t at, size_t end)
{
	size_t good = atomic_load(&me->pr.good);

	if (me->done && !me->rc)
		return 1;
	if (!me->head)
		return at >= me->cut && end <= me->cut + good;
	return at >= me->cut || end <= good || good >= me->cut;
}

/* What the request on the wire must have brought for [at, end) to have
 * come: SIZE_MAX if another request brings them. */
static size_t need(const struct stfs_inflight *me, size_t at, size_t end)
{
	if (!me->head)
		return at >= me->cut ? end - me->cut : SIZE_MAX;
	return end < me->cut ? end : me->cut;
}

/* Answer readers w (a list) from block me (under mu, which it drops
 * while copying). */
static void answer(struct stfs_remote *r, struct stfs_inflight *me,
		   struct stfs_waiter *w)
{
	struct stfs_waiter *ready = NULL;
	size_t copied = 0;

	for (struct stfs_waiter *n; w; w = n) {
		n = w->next;
		w->ready = bytes_in(me, w->at, w->at + w->len) ? 1 : -1;
		w->next = ready;
		ready = w;
		me->waiters++;
	}
	pthread_mutex_unlock(&r->blocks.mu);
	for (struct stfs_waiter *n; (w = ready); ready = n) {
		int rc = w->ready > 0 ? 0 : me->rc ? me->rc : -EIO;

		n = w->next;
		if (!rc) {
			memcpy(w->buf, me->data + w->at, w->len);
			copied += w->len;
		}
		w->done(w->arg, rc);
		free(w);
		pthread_mutex_lock(&r->blocks.mu);
		if (--me->waiters == 0)
			pthread_cond_broadcast(&r->blocks.cv);
		pthread_mutex_unlock(&r->blocks.mu);
	}
	pthread_mutex_lock(&r->blocks.mu);
	if ((me->consumed += copied) >= me->len && me->held)
		unhold(r, me);
}

/* Answer, or wake, the readers of me whose bytes have come, and have the
 * transfer wake this thread when the first of the others' have (under
 * mu, which it may drop). */
static void answer_arrived(struct stfs_remote *r, struct stfs_inflight *me)
{
	struct stfs_waiter *ready = NULL, **p;
	size_t want;
	int woke = 0;

	do {
		want = SIZE_MAX;
		for (p = &me->readers; *p;) {
			struct stfs_waiter *w = *p;
			size_t n;

			if (!me->done && !bytes_in(me, w->at, w->at + w->len)) {
				if ((n = need(me, w->at, w->at + w->len)) < want)
					want = n;
				p = &w->next;
				continue;
			}
			*p = w->next;
			if (w->done) {
				w->next = ready;
				ready = w;
			} else {
				w->ready = 1;
				woke = 1;
			}
		}
		atomic_store(&me->pr.want, want);
		/* bytes that came meanwhile woke no one */
	} while (want != SIZE_MAX && atomic_load(&me->pr.good) >= want);
	if (woke)
		pthread_cond_broadcast(&r->blocks.cv);
	if (ready)
		answer(r, me, ready);
}

/* On the fetching thread: the request on the wire brought someone's
 * bytes. */
static void on_progress(void *arg)
{
	struct stfs_inflight *me = arg;
	struct stfs_remote *r = me->s->r;

	pthread_mutex_lock(&r->blocks.mu);
	answer_arrived(r, me);
	pthread_mutex_unlock(&r->blocks.mu);
}

/* List w as a reader of me, on the wire (under mu); 0, or 1 if its bytes
 * came meanwhile (not listed then). */
static int wait_for(struct stfs_inflight *me, struct stfs_waiter *w)
{
	size_t n = need(me, w->at, w->at + w->len);

	w->next = me->readers;
	me->readers = w;
	if (n < atomic_load(&me->pr.want))
		atomic_store(&me->pr.want, n);
	if (!bytes_in(me, w->at, w->at + w->len))
		return 0;
	me->readers = w->next;
	return 1;
}

/* Copy [off, off + len) of block other, listed, when its fetch has
 * brought those bytes (under mu, which it drops while waiting and
 * copying): its fetch's result.  A held block whose bytes have all been
 * read goes (the bytes are counted once each only if readers do not
 * overlap, so a block may go early: a reader then fetches its bytes
 * itself). */
static int copy_listed(struct stfs_remote *r, struct stfs_inflight *other,
		       size_t off, void *buf, size_t len)
{
	struct stfs_blocks *bl = &r->blocks;
	struct stfs_waiter w = { .at = off, .len = len };
	int rc;

	other->waiters++;
	if (!other->done && !bytes_in(other, off, off + len) &&
	    !wait_for(other, &w))
		while (!w.ready)
			pthread_cond_wait(&bl->cv, &bl->mu);
	rc = bytes_in(other, off, off + len) ? 0 : other->rc;
	pthread_mutex_unlock(&bl->mu);
	if (!rc && len)
		memcpy(buf, other->data + off, len);
	pthread_mutex_lock(&bl->mu);
	if (--other->waiters == 0)
		pthread_cond_broadcast(&bl->cv);
	if (!rc && (other->consumed += len) >= other->len && other->held)
		unhold(r, other);
	return rc;
}

int stfs_blocks_attach(struct stfs_object *s, void *buf, size_t len,
		       uint64_t off, stfs_source_done done, void *arg)
{
	struct stfs_remote *r = s->r;
	struct stfs_blocks *bl = &r->blocks;
	uint64_t b = off / r->o.block;
	size_t in = (size_t)(off % r->o.block);
	struct stfs_inflight **p;
	struct stfs_waiter *w;
	int rc;

	if (!len || in + len > r->o.block)
		return -ENOENT;         /* one block's bytes only */
	pthread_mutex_lock(&bl->mu);
	if (!*(p = find(bl, s, b))) {
		pthread_mutex_unlock(&bl->mu);
		return -ENOENT;
	}
	if (!(*p)->done && !bytes_in(*p, in, in + len)) {
		/* (no memory: a worker waits for it instead, not the caller) */
		if (!(w = malloc(sizeof(*w)))) {
			pthread_mutex_unlock(&bl->mu);
			return -ENOENT;
		}
		*w = (struct stfs_waiter){ .at = in, .len = len, .buf = buf,
					   .done = done, .arg = arg };
		if (!wait_for(*p, w)) {
			pthread_mutex_unlock(&bl->mu);
			return 0;       /* answered by the fetch */
		}
		free(w);
	}
	rc = copy_listed(r, *p, in, buf, len);
	pthread_mutex_unlock(&bl->mu);
	done(arg, rc == -EACCES ? rc : rc ? -EIO : 0);
	return 0;
}

int stfs_blocks_copy_held(struct stfs_object *s, void *buf, size_t len,
			  uint64_t off)
{
	struct stfs_remote *r = s->r;
	struct stfs_blocks *bl = &r->blocks;
	uint64_t first = off / r->o.block, last = (off + len - 1) / r->o.block;
	int rc = 0;

	if (!len || last - first > 1)
		return -ENOENT;
	pthread_mutex_lock(&bl->mu);
	/* both whole in memory, or neither read from here */
	for (uint64_t b = first; b <= last && !rc; b++) {
		struct stfs_inflight *me = *find(bl, s, b);

		if (!me || !me->done || me->rc)
			rc = -ENOENT;
	}
	for (uint64_t b = first; b <= last && !rc; b++) {
		uint64_t at = b == first ? off - b * r->o.block : 0;
		uint64_t end = b == last ? off + len - b * r->o.block :
				r->o.block;
		char *to = (char *)buf + (b * r->o.block + at - off);

		/* (copy_listed() drops mu while it copies: found again) */
		struct stfs_inflight **p = find(bl, s, b);

		rc = *p && (*p)->done && !(*p)->rc ?
		     copy_listed(r, *p, (size_t)at, to, (size_t)(end - at)) :
		     -ENOENT;
	}
	pthread_mutex_unlock(&bl->mu);
	return rc ? -ENOENT : 0;
}

void stfs_inflight_item(struct stfs_inflight *me, struct stfs_cache_item *it)
{
	struct stfs_remote *r = me->s->r;
	struct stfs_blocks *bl = &r->blocks;
	int keep;

	/* a warm's block no reader has had: through the page cache, its
	 * pages kept for the reader to come; one read whole: past it; one
	 * its readers have not read all of: past it and held for them, or,
	 * if as many are held as may be (whose oldest, which a reader in
	 * order reads next, would go), through it and its pages kept, as
	 * before blocks were held */
	pthread_mutex_lock(&bl->mu);
	me->past = !me->warm && me->consumed < me->len &&
		   atomic_load(&bl->nheld) < 2 * stfs_prefetch_blocks(r);
	keep = me->consumed < me->len && !me->past;
	pthread_mutex_unlock(&bl->mu);
	*it = (struct stfs_cache_item){ .o = &me->s->cobj, .block = me->block,
					.buf = me->data, .len = me->len,
					.keep_pages = keep };
}

void stfs_blocks_written(struct stfs_remote *r, struct stfs_inflight *me,
			 int rc)
{
	pthread_mutex_lock(&r->blocks.mu);
	/* held for its readers, as without a cache: one the cache could not
	 * take (a full disk, a cache_size under a block: the kernel's next
	 * readahead would fetch it again), or one that went past the page
	 * cache before they read all of it (not read from the disk then) */
	if ((rc || (me->past && me->consumed < me->len)) &&
	    !atomic_load(&me->s->closing))
		hold(r, me);
	else
		drop(r, me);
	pthread_mutex_unlock(&r->blocks.mu);
}

/* Fetch block me (listed by us) into me->data: reader's bytes [off, off
 * + len) first, answered through early if given.  0 or -errno. */
static int fetch_block(struct stfs_fetcher *f, struct stfs_inflight *me,
		       size_t off, size_t len, struct stfs_early *early)
{
	struct stfs_object *s = me->s;
	struct stfs_remote *r = s->r;
	uint64_t start = me->block * r->o.block;
	size_t cut = me->cut, got;
	struct stfs_request q = {
		.url = s->url, .etag = s->etag,
		.last_modified = s->last_modified, .auth = s->auth,
		.off = start + cut, .len = me->len - cut, .want_total = s->size,
		.cancel = &s->closing, .early = early, .progress = &me->pr,
		.deadline_ms = f->deadline_ms };
	struct stfs_error e = { 0 };
	int rc;

	if (early) {
		early->at = off - cut;
		early->len = len;
	}
	rc = r->fetch->fetch(s, f->h, &q, me->data + cut, &got, &e);
	if (!rc && cut) {
		/* readers of the tail need not wait for the start */
		pthread_mutex_lock(&r->blocks.mu);
		me->head = 1;
		atomic_store(&me->pr.good, 0);
		answer_arrived(r, me);
		pthread_mutex_unlock(&r->blocks.mu);
		q.off = start;
		q.len = cut;
		q.early = NULL;
		rc = r->fetch->fetch(s, f->h, &q, me->data, &got, &e);
	}
	if (rc)
		log_failure(s, q.off, q.len, &e);
	return rc;
}

/* Bytes [off, off + len) of block b of s's cached object: from the cache,
 * (or its failure of a moment ago: stfs_blocks_lookup(), lookup.c),
 * from a fetch of it under way, else fetched whole (and written to the
 * cache by stfs_writeback(), writeback.c).  With early, a fetch answers the
 * reader through it as soon as those bytes have come (early->done: buf
 * is then the reader's no more, and untouched). */
static int block_read(struct stfs_fetcher *f, struct stfs_object *s,
		      uint64_t b, size_t off, void *buf, size_t len,
		      struct stfs_early *early, int warm)
{
	struct stfs_remote *r = s->r;
	struct stfs_blocks *bl = &r->blocks;
	size_t blen = stfs_block_len(s, b);
	struct stfs_inflight *me, **p;
	int rc;

	if ((rc = stfs_blocks_lookup(s, buf, len, b * r->o.block + off)) !=
	    -ENOENT)
		return rc;              /* cached, or failed a moment ago */
	if (r->o.offline) {
		struct stfs_error e = { 0 };

		snprintf(e.msg, sizeof(e.msg), "not in the cache, and offline");
		log_failure(s, b * r->o.block + off, len, &e);
		return -EIO;
	}
	pthread_mutex_lock(&bl->mu);
	if (*(p = find(bl, s, b))) {
		/* wait for that fetch (or the part of it with our bytes);
		 * its failure is ours too */
		rc = copy_listed(r, *p, off, buf, len);
		pthread_mutex_unlock(&bl->mu);
		return rc;
	}
	if (!(me = calloc(1, sizeof(*me)))) {
		pthread_mutex_unlock(&bl->mu);
		return -ENOMEM;
	}
	me->s = s;
	me->block = b;
	me->len = blen;
	me->warm = warm;
	/* A reader waiting in the middle of the block: fetch from its page
	 * to the end first, so that it waits for its own bytes and not for
	 * the block's earlier ones, then the start.  The block is complete
	 * only after both. */
	me->cut = early ? off & ~(size_t)(TAIL_FIRST - 1) : 0;
	atomic_init(&me->pr.good, 0);
	atomic_init(&me->pr.want, SIZE_MAX);
	me->pr.fn = on_progress;
	me->pr.arg = me;
	*p = me;
	pthread_mutex_unlock(&bl->mu);

	rc = -ENOMEM;
	if ((me->data = block_buf(r)) &&
	    !(rc = fetch_block(f, me, off, len, early)) && len &&
	    !(early && early->done))
		memcpy(buf, me->data + off, len);
	rc = rc == -EACCES || rc == -ENOMEM ? rc : rc ? -EIO : 0;
	pthread_mutex_lock(&bl->mu);
	if (rc)
		stfs_blocks_failed(s, b * r->o.block, b * r->o.block + blen,
				   rc);
	me->rc = rc;
	me->done = 1;
	pthread_cond_broadcast(&bl->cv);
	answer_arrived(r, me);
	if (rc) {
		drop(r, me);
	} else if (!s->cobj.valid) {
		hold(r, me);            /* no cache: a prefetch, for readers */
	} else {
		me->consumed += len;    /* its own reader's bytes */
		me->later = f->to_write;
		f->to_write = me;
	}
	pthread_mutex_unlock(&bl->mu);
	return rc;
}

/* No cache: bytes [off, off + len) of s from the blocks prefetched into
 * memory where they are (or on their way), the rest fetched exactly, each
 * run of missing bytes in one request. */
static int read_uncached(struct stfs_fetcher *f, struct stfs_object *s,
			 char *buf, size_t len, uint64_t off)
{
	struct stfs_remote *r = s->r;
	size_t block = r->o.block, got;
	struct stfs_error e = { 0 };
	struct stfs_request q = {
		.url = s->url, .etag = s->etag,
		.last_modified = s->last_modified, .auth = s->auth,
		.off = off, .want_total = s->size, .cancel = &s->closing,
		.deadline_ms = f->deadline_ms };
	char *run = buf;
	int rc;

	for (;;) {
		uint64_t b = off / block;
		size_t in = (size_t)(off % block);
		size_t n = block - in < len ? block - in : len;
		struct stfs_inflight **p;

		rc = -ENOENT;
		if (len) {
			pthread_mutex_lock(&r->blocks.mu);
			if (*(p = find(&r->blocks, s, b)))
				rc = copy_listed(r, *p, in, buf, n);
			pthread_mutex_unlock(&r->blocks.mu);
			if (rc && rc != -ENOENT)
				return rc == -EACCES ? rc : -EIO;
		}
		if (rc && len) {
			q.len += n;             /* missing: joins the run */
		} else if (q.len) {             /* a run ends: fetch it */
			if ((rc = r->fetch->fetch(s, f->h, &q, run, &got,
						  &e))) {
				log_failure(s, q.off, q.len, &e);
				rc = rc == -EACCES ? rc : -EIO;
				pthread_mutex_lock(&r->blocks.mu);
				stfs_blocks_failed(s, q.off, q.off + q.len,
						   rc);
				pthread_mutex_unlock(&r->blocks.mu);
				return rc;
			}
			q.len = 0;
		}
		if (!len)
			return 0;
		buf += n;
		off += n;
		len -= n;
		if (!q.len) {
			run = buf;
			q.off = off;
		}
	}
}

int stfs_blocks_read(struct stfs_fetcher *f, struct stfs_object *s,
		     void *buf, size_t len, uint64_t off,
		     struct stfs_early *early)
{
	size_t block = s->r->o.block;
	int rc;

	if (!s->cobj.valid) {
		if ((rc = stfs_blocks_lookup(s, buf, len, off)) != -ENOENT)
			return rc;      /* failed a moment ago */
		return s->r->o.offline ? -EIO :
		       read_uncached(f, s, buf, len, off);
	}
	/* early answers are for a read within one block */
	if (off / block != (off + len - 1) / block)
		early = NULL;
	while (len) {
		uint64_t b = off / block;
		size_t in = (size_t)(off % block);
		size_t n = block - in < len ? block - in : len;

		if ((rc = block_read(f, s, b, in, buf, n, early, 0)))
			return rc;
		buf = (char *)buf + n;
		off += n;
		len -= n;
	}
	return 0;
}

void stfs_blocks_prefetch(struct stfs_fetcher *f, struct stfs_object *o,
			  uint64_t b)
{
	char none;

	if (block_read(f, o, b, 0, &none, 0, NULL, 0) == 0)
		stfs_m_prefetch(o->r->o.metrics, STFS_PF_READAHEAD, 1,
				stfs_block_len(o, b));
}

int stfs_blocks_warm(struct stfs_fetcher *f, struct stfs_object *o,
		     uint64_t b)
{
	char none;

	if (!o->cobj.valid)
		return -EOPNOTSUPP;
	return block_read(f, o, b, 0, &none, 0, NULL, 1);
}

void stfs_blocks_forget(struct stfs_blocks *bl, const struct stfs_object *o)
{
	pthread_mutex_lock(&bl->mu);
	for (;;) {
		struct stfs_inflight *p = bl->list;

		while (p && !(p->s == o && p->held))
			p = p->next;
		if (!p)
			break;
		unhold(o->r, p);
	}
	pthread_mutex_unlock(&bl->mu);
}

/*
 * pool.c: the threads of the block engine and what they are given: a
 * pool of workers (connections= of them), each with one request on the
 * wire at a time, and the prefetch policy that queues blocks ahead of a
 * reader.
 *
 * Reads someone waits for come first; prefetches after, at most 2 x
 * connections of them queued (so at most connections blocks of memory in
 * flight for them); the blocks of a warm (`stfs prefetch`) last, queued
 * by its thread no more than connections at a time, so that a program's
 * read waits for one block at most.  A worker answers its reader itself,
 * as soon as the reader's bytes are in (blocks.c), then hands the block
 * to the write-behind (writeback.c, whose writer threads start and stop
 * with the workers) and takes the next job: a connection never waits for
 * the disk.  A read whose block is on the wire already takes no worker:
 * that block's fetch answers it (stfs_blocks_attach()), so a worker never
 * waits for another's connection.  The threads start on first use, so
 * that they belong to the daemon after it has gone to the background;
 * the request loop never waits for the network.  A read's fetch is
 * retried within its reader's bound, counted from when the read came
 * (httpc.c): reads queued behind workers sitting out a Retry-After do not
 * wait a bound each in turn, and one whose bound went by in the queue
 * while the server refused fails when a worker takes it, asking nothing.
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
#include "metrics.h"

struct stfs_job {
	struct stfs_object *s;
	void *buf;
	size_t len;
	uint64_t off;
	stfs_source_done done;      /* NULL: a prefetch of block off */
	void *arg;
	int warm;                   /* a warm's block off: done once written */
	int rc;                     /* a warm's result */
	uint64_t asked_ms;          /* when the read came (monotonic) */
	struct stfs_job *next;
};

void stfs_pool_init(struct stfs_pool *p)
{
	*p = (struct stfs_pool){ .queue_tail = &p->queue,
				 .pf_tail = &p->pf_queue,
				 .warm_tail = &p->warm_queue,
				 .wq_tail = &p->wq };
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->wq_cv, NULL);
	pthread_cond_init(&p->written, NULL);
}

void stfs_pool_fini(struct stfs_pool *p)
{
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->wq_cv);
	pthread_cond_destroy(&p->written);
}

void stfs_pool_job_over(struct stfs_object *s)
{
	if (--s->plan.inflight == 0)
		pthread_cond_broadcast(&s->plan.idle);
}

/* A read job's bytes have come, before the rest of their block. */
static void answer_early(void *arg, const char *bytes)
{
	struct stfs_job *j = arg;

	memcpy(j->buf, bytes, j->len);
	j->done(j->arg, 0);
}

/* The next job (under mu), or NULL when stopping. */
static struct stfs_job *next_job(struct stfs_pool *p)
{
	struct stfs_job *j = NULL;

	while ((!p->queue && !p->pf_queue && !p->warm_queue &&
		!p->stopping) || (!p->stopping && !stfs_conc_may(p)))
		pthread_cond_wait(&p->work, &p->mu);
	if (p->queue) {
		j = p->queue;
		if (!(p->queue = j->next))
			p->queue_tail = &p->queue;
	} else if (p->pf_queue && !p->stopping) {
		j = p->pf_queue;
		if (!(p->pf_queue = j->next))
			p->pf_tail = &p->pf_queue;
		p->n_pf_queued--;
	} else if (p->warm_queue && !p->stopping) {
		j = p->warm_queue;
		if (!(p->warm_queue = j->next))
			p->warm_tail = &p->warm_queue;
	}
	return j;
}

static void run_job(struct stfs_fetcher *f, struct stfs_job *j)
{
	struct stfs_remote *r = j->s->r;
	struct stfs_early ea = { .fn = answer_early, .arg = j };
	int rc;

	/* a reader's fetch retries no longer than its bound, counted from
	 * when it asked, with half a second for the kernel's and its reply
	 * (a prefetch's or a warm's: as many as it may) */
	f->deadline_ms = j->done && !j->warm ? j->asked_ms + 500 +
			 (uint64_t)r->o.retries * STFS_BACKOFF_MAX_S * 1000 : 0;
	if (j->warm) {         /* answered once written: worker() */
		j->rc = f->h ? stfs_blocks_warm(f, j->s, j->off) : -ENOMEM;
		if (j->rc)
			r->count.failed++;
		else
			stfs_m_prefetch(r->o.metrics, STFS_PF_WARM, 1,
					stfs_block_len(j->s, j->off));
		return;
	}
	if (!j->done) {
		if (f->h)
			stfs_blocks_prefetch(f, j->s, j->off);
		/* it came from the network (it is to be written to the
		 * cache): a reader hitting it is fed by the network */
		if (f->to_write) {
			pthread_mutex_lock(&r->pool.mu);
			if (j->s->plan.pf_fed <= j->off)
				j->s->plan.pf_fed = j->off + 1;
			pthread_mutex_unlock(&r->pool.mu);
		}
		return;
	}
	/* its block went on the wire since it was queued: no need to wait
	 * for it here */
	if (stfs_blocks_attach(j->s, j->buf, j->len, j->off, j->done,
			       j->arg) == 0)
		return;
	/* its bound went by while it waited for a worker, and the server
	 * refused a moment ago (the workers sat out its Retry-After): it
	 * fails now, asking nothing (one behind slow transfers is asked) */
	if (stfs_now_ms() >= f->deadline_ms &&
	    (rc = stfs_blocks_failing(j->s))) {
		char line[600];

		snprintf(line, sizeof(line), "stfs: %s: bytes %" PRIu64 "-%"
			 PRIu64 ": not asked for: its reader has waited for "
			 "%u s, its bound, for a connection", j->s->url,
			 j->off, j->off + j->len - 1,
			 r->o.retries * STFS_BACKOFF_MAX_S);
		stfs_remote_log(r, line);
		r->count.failed++;
		j->done(j->arg, rc);
		return;
	}
	rc = f->h ? stfs_blocks_read(f, j->s, j->buf, j->len, j->off, &ea) :
		    -ENOMEM;
	if (!ea.done) {                 /* else answered already */
		if (rc)
			r->count.failed++;
		j->done(j->arg, rc);
	}
}

static void *worker(void *arg)
{
	struct stfs_remote *r = arg;
	struct stfs_pool *p = &r->pool;
	struct stfs_fetcher f = { .h = r->fetch->handle_new(),
				   .deadline_ms = 0 };
	struct stfs_job *j;

	pthread_mutex_lock(&p->mu);
	while ((j = next_job(p))) {
		p->conc.busy++;
		pthread_mutex_unlock(&p->mu);
		run_job(&f, j);
		stfs_writeback(&f);
		if (j->warm)
			j->done(j->arg, j->rc);
		pthread_mutex_lock(&p->mu);
		p->conc.busy--;
		if (stfs_conc_after(r, stfs_now_ms()))
			pthread_cond_broadcast(&p->work);
		stfs_pool_job_over(j->s);
		free(j);
	}
	pthread_mutex_unlock(&p->mu);
	r->fetch->handle_free(f.h);
	return NULL;
}

/* Start the workers (under mu); 0, or -errno if none could start.  In a
 * child forked while they ran, they are the parent's: new ones start. */
static int start_workers(struct stfs_remote *r)
{
	struct stfs_pool *p = &r->pool;

	if (p->nworkers && p->pid == getpid())
		return 0;
	if (p->nworkers) {
		free(p->workers);
		p->nworkers = 0;
		p->writer_on = 0;
	}
	p->pid = getpid();
	p->workers = calloc(r->o.connections, sizeof(*p->workers));
	if (!p->workers)
		return -ENOMEM;
	p->stopping = 0;
	for (unsigned i = 0; i < r->o.connections; i++)
		if (pthread_create(&p->workers[p->nworkers], NULL, worker,
				   r) == 0)
			p->nworkers++;
	if (p->nworkers)
		stfs_writeback_start(r);
	return p->nworkers ? 0 : -EAGAIN;
}

/* Drop the queued warm blocks of s (NULL: all), each answered -ECANCELED
 * (under mu). */
static void drop_warms(struct stfs_pool *p, struct stfs_object *s)
{
	for (struct stfs_job **q = &p->warm_queue; *q;) {
		struct stfs_job *j = *q;

		if (s && j->s != s) {
			q = &j->next;
			continue;
		}
		*q = j->next;
		j->done(j->arg, -ECANCELED);
		stfs_pool_job_over(j->s);
		free(j);
	}
	p->warm_tail = &p->warm_queue;
	while (*p->warm_tail)
		p->warm_tail = &(*p->warm_tail)->next;
}

void stfs_pool_stop(struct stfs_remote *r)
{
	struct stfs_pool *p = &r->pool;
	pthread_t *w;
	unsigned n;

	pthread_mutex_lock(&p->mu);
	p->stopping = 1;
	while (p->pf_queue) {           /* not worth fetching now */
		struct stfs_job *j = p->pf_queue;

		p->pf_queue = j->next;
		stfs_pool_job_over(j->s);
		free(j);
	}
	p->pf_tail = &p->pf_queue;
	p->n_pf_queued = 0;
	drop_warms(p, NULL);
	pthread_cond_broadcast(&p->work);
	w = p->workers;
	n = p->pid == getpid() ? p->nworkers : 0;
	p->workers = NULL;
	p->nworkers = 0;
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < n; i++)
		pthread_join(w[i], NULL);
	free(w);
	stfs_writeback_stop(r);
}

/* Queue prefetches of the blocks of [from, to) not queued yet for stream
 * st of s (under mu); with cross, a window past s's end goes on into the
 * object read after it. */
static void prefetch(struct stfs_object *s, struct stfs_stream *st,
		     uint64_t from, uint64_t to, int cross)
{
	struct stfs_remote *r = s->r;
	struct stfs_pool *p = &r->pool;
	uint64_t block = r->o.block, ahead = stfs_prefetch_blocks(r);
	uint64_t nblocks = (s->size + block - 1) / block;
	uint64_t b0 = from / block, b1, b;
	struct stfs_object *n = s->plan.next;

	if (r->o.offline || from >= to)
		return;
	b1 = (to + block - 1) / block;
	if (b1 > nblocks)
		b1 = nblocks;
	if (b1 > b0 + ahead)
		b1 = b0 + ahead;
	/* a window that jumped (another place, another tensor) restarts */
	if (st->pf_next < b0 || st->pf_next > b1 + ahead)
		st->pf_next = b0;
	for (b = st->pf_next > b0 ? st->pf_next : b0;
	     b < b1 && p->n_pf_queued < 2 * stfs_pool_width(r); b++) {
		struct stfs_job *j = malloc(sizeof(*j));

		if (!j || start_workers(r)) {
			free(j);
			break;
		}
		*j = (struct stfs_job){ .s = s, .off = b };
		s->plan.inflight++;
		*p->pf_tail = j;
		p->pf_tail = &j->next;
		p->n_pf_queued++;
		stfs_m_prefetch(r->o.metrics, STFS_PF_READAHEAD, 0,
				stfs_block_len(s, b));
		pthread_cond_signal(&p->work);
	}
	st->pf_next = b;
	/* one object on, and only one no reader has started on (its own
	 * readers' windows are theirs): into its first stream, which the
	 * first reader there takes over */
	if (!cross || b != nblocks || to <= s->size || !n || !s->size ||
	    n->plan.streams[0].pf_next > ahead)
		return;
	for (unsigned i = 0; i < STFS_STREAMS; i++)
		if (n->plan.streams[i].next_off)
			return;
	prefetch(n, &n->plan.streams[0], 0, to - s->size, 0);
}

/* Queue prefetches of the blocks of [from, to) not queued yet for stream
 * st of s going down, the highest first (under mu). */
static void prefetch_back(struct stfs_object *s, struct stfs_stream *st,
			  uint64_t from, uint64_t to)
{
	struct stfs_remote *r = s->r;
	struct stfs_pool *p = &r->pool;
	uint64_t block = r->o.block, ahead = stfs_prefetch_blocks(r);
	uint64_t b0 = from / block, b1 = (to + block - 1) / block, b;

	if (r->o.offline || from >= to)
		return;
	if (b0 + ahead < b1)
		b0 = b1 - ahead;
	/* a window that jumped restarts */
	if (!st->pf_low || st->pf_low > b1 || st->pf_low + ahead < b0)
		st->pf_low = b1;
	for (b = st->pf_low; b > b0 && p->n_pf_queued <
	     2 * stfs_pool_width(r); b--) {
		struct stfs_job *j = malloc(sizeof(*j));

		if (!j || start_workers(r)) {
			free(j);
			break;
		}
		*j = (struct stfs_job){ .s = s, .off = b - 1 };
		s->plan.inflight++;
		*p->pf_tail = j;
		p->pf_tail = &j->next;
		p->n_pf_queued++;
		pthread_cond_signal(&p->work);
	}
	st->pf_low = b;
}

/* The stream of s a read at off goes on (*seq set), or the one it starts
 * (under mu): a free one first (the first keeps what was fetched ahead
 * into the object before a reader came), else the least recently used
 * of those not yet in order (a random reader churns those only), else the
 * least recently used. */
static struct stfs_stream *stream_of(struct stfs_object *s, uint64_t off,
				     uint64_t end, uint64_t slack, int *seq)
{
	struct stfs_stream *st = NULL, *loose = NULL, *old = NULL;

	for (unsigned i = 0; i < STFS_STREAMS; i++) {
		struct stfs_stream *t = &s->plan.streams[i];

		/* the kernel's readahead may send its requests (1 MiB
		 * each) a little out of order */
		if (t->next_off && !t->back && off + slack >= t->next_off &&
		    off <= t->next_off + slack) {
			*seq = 1;
			t->used = ++s->plan.tick;
			return t;
		}
		/* going down: this read ends where that one began */
		if (t->next_off && off < t->last_off &&
		    end + slack >= t->last_off && end <= t->last_off + slack) {
			*seq = t->back ? 1 : 2;
			t->used = ++s->plan.tick;
			return t;
		}
		if (!t->next_off && !st)
			st = t;
		if (t->streak < 2 && (!loose || t->used < loose->used))
			loose = t;
		if (!old || t->used < old->used)
			old = t;
	}
	*seq = 0;
	if (!st) {
		st = loose ? loose : old;
		st->pf_next = 0;        /* another reader's window */
	}
	st->streak = 0;
	st->back = 0;
	st->pf_low = 0;
	st->across = 0;
	st->home_off = st->home_end = 0;
	st->first_off = off;
	st->used = ++s->plan.tick;
	return st;
}

/* Where the window of stream st of s, whose read ends at end, may go to
 * (under mu): end + window, or, for a reader not yet seen going on past
 * the tensor it began in (its home extent, a piece of a file read whole:
 * %repo/'s shard), that tensor's end and an eighth of what it read in order (so
 * that a reader of a whole tensor has the next one's start on the way,
 * a block for 32 MiB).  The kernel's readahead runs a MiB or two past a
 * reader, into the next tensor: one block past the home's end is the
 * evidence of a reader going on. */
static uint64_t window_end(struct stfs_object *s, struct stfs_stream *st,
			   const struct stfs_extent *ext, uint64_t end,
			   uint64_t window)
{
	uint64_t limit;

	if (ext && ext->piece && !st->home_end) {
		st->home_off = ext->off;
		st->home_end = ext->end;
	}
	if (!st->across && st->home_end &&
	    end >= st->home_end + s->r->o.block)
		st->across = 1;
	limit = st->home_end + (end > st->first_off ?
				 (end - st->first_off) / 8 : 0);
	if (st->across || !st->home_end ||
	    (!st->home_off && st->home_end >= s->size) ||
	    limit >= end + window)
		return end + window;
	return limit > end ? limit : end;
}

/* Stream st of s goes down tensor ext and its window has reached the
 * tensor's start (lo): if a stream went down the tensor just before this
 * one (a loader copying every tensor out of a mapping, each from its end
 * down, in file order), the tensors after this one are fetched ahead, as
 * a reader in order would have them, so that the next copy finds its
 * blocks on the way; a copy of one tensor alone is no evidence (under
 * mu). */
static void back_on(struct stfs_object *s, struct stfs_stream *st,
		    const struct stfs_extent *ext, uint64_t lo,
		    uint64_t window, int cold)
{
	if (!ext || lo > ext->off || ext->end >= s->size)
		return;
	for (unsigned i = 0; i < STFS_STREAMS && !st->across; i++)
		if (&s->plan.streams[i] != st && s->plan.streams[i].back &&
		    s->plan.streams[i].home_end == ext->off)
			st->across = 1;
	if (st->across)
		prefetch(s, st, ext->end, ext->end + window, cold);
}

/*
 * What a read says of the reads to come (under mu): the start of a tensor
 * will most likely be followed by the rest of it, so the blocks ahead
 * within it are fetched; a reader going on where one of its last reads
 * ended is reading in file order, so the blocks ahead are fetched, into
 * the next tensors; a read anywhere else (a random reader) fetches
 * nothing more.  Readers are told apart by where they go on (a few
 * streams per object, stream_of()).  A reader the network feeds (cold:
 * its read goes to the network, or hits a block a read's prefetch brought
 * from it, as when the prefetch is ahead of a slow reader) going on to
 * the object's end has the next object's start fetched too (the next
 * shard: loaders read them in order); one fed from a cache filled before
 * (a warm, an earlier mount)
 * may be reading its share alone, and is fast enough without.  Until a
 * reader of a file read whole (%repo/'s shard, whose extents are its
 * tensors: the kernel's readahead crosses their ends) goes on a block
 * past the end of the tensor it began in (cat, a loader copying every
 * tensor), its window stops at that tensor's end (window_end()): a reader
 * of one tensor is not charged for its neighbours.  A tensor's own file
 * ends where it does: a read at its start is its reader's.
 */
static void plan_prefetch(struct stfs_object *s, uint64_t off, size_t len,
			  const struct stfs_extent *ext, int cold)
{
	uint64_t end = off + len, window = (uint64_t)stfs_prefetch_blocks(s->r) *
					   s->r->o.block, slack = 1u << 20, to;
	int seq;
	struct stfs_stream *st = stream_of(s, off, end, slack, &seq);

	if (seq == 2) {                 /* it turns out to go down */
		st->back = 1;
		st->streak = 0;
	}
	if (seq)
		st->streak++;
	st->last_off = off;
	if (st->back) {                 /* the window below it */
		uint64_t lo = ext && ext->off < off ? ext->off : 0;

		if (ext) {
			st->home_off = ext->off;
			st->home_end = ext->end;
		}
		if (off - lo > window)
			lo = off - window;
		st->next_off = end;
		if (st->streak >= 2) {
			prefetch_back(s, st, lo, off);
			back_on(s, st, ext, lo, window, cold);
		}
		return;
	}
	if (end > st->next_off || !seq)
		st->next_off = end;
	/* two streams that meet are one reader (the kernel's readahead out
	 * of order started a second): one, with the window of both, so that
	 * the blocks ahead are not queued twice */
	for (unsigned i = 0; i < STFS_STREAMS; i++) {
		struct stfs_stream *t = &s->plan.streams[i];

		if (t == st || !t->next_off || t->back ||
		    t->next_off + slack < st->next_off ||
		    t->next_off > st->next_off + slack)
			continue;
		if (t->pf_next > st->pf_next)
			st->pf_next = t->pf_next;
		if (t->streak > st->streak)
			st->streak = t->streak;
		st->across |= t->across;
		*t = (struct stfs_stream){ .used = 0 };
	}
	to = window_end(s, st, ext, end, window);
	if (ext && off == ext->off && ext->end > end)
		prefetch(s, st, end, ext->end < to ? ext->end : to, cold);
	else if (seq && st->streak >= 2)
		prefetch(s, st, end, to, cold);
}

void stfs_pool_follow(struct stfs_object *s, struct stfs_object *next)
{
	pthread_mutex_lock(&s->r->pool.mu);
	s->plan.next = next;
	pthread_mutex_unlock(&s->r->pool.mu);
}

static void hit(struct stfs_object *s, uint64_t off, size_t len,
		const struct stfs_extent *ext, int cold)
{
	pthread_mutex_lock(&s->r->pool.mu);
	if (off / s->r->o.block < s->plan.pf_fed)
		cold = 1;
	plan_prefetch(s, off, len, ext, cold);
	pthread_mutex_unlock(&s->r->pool.mu);
}

void stfs_pool_hit(struct stfs_object *s, uint64_t off, size_t len,
		   const struct stfs_extent *ext)
{
	hit(s, off, len, ext, 0);
}

/* Queue a copy of job t of s: a read (after the reads queued, its
 * prefetches planned) or a warm's block (after everything); if it cannot
 * be, t->done says why. */
static void enqueue(struct stfs_object *s, const struct stfs_job *t,
		    const struct stfs_extent *ext)
{
	struct stfs_pool *p = &s->r->pool;
	struct stfs_job *j;
	int rc;

	if (!(j = malloc(sizeof(*j)))) {
		t->done(t->arg, -ENOMEM);
		return;
	}
	*j = *t;
	pthread_mutex_lock(&p->mu);
	if ((rc = start_workers(s->r))) {
		pthread_mutex_unlock(&p->mu);
		free(j);
		t->done(t->arg, rc);
		return;
	}
	s->plan.inflight++;
	if (j->warm) {
		*p->warm_tail = j;
		p->warm_tail = &j->next;
	} else {
		*p->queue_tail = j;
		p->queue_tail = &j->next;
		plan_prefetch(s, j->off, j->len, ext, 1);
	}
	pthread_cond_signal(&p->work);
	pthread_mutex_unlock(&p->mu);
}

int stfs_pool_held(struct stfs_object *s, void *buf, size_t len,
		   uint64_t off, const struct stfs_extent *ext,
		   stfs_source_done done, void *arg)
{
	if (!atomic_load(&s->r->blocks.nheld))
		return -ENOENT;
	/* a read across two blocks (a tensor's file seldom starts on a
	 * block) copies from both, if both are here */
	if (stfs_blocks_attach(s, buf, len, off, done, arg)) {
		if (stfs_blocks_copy_held(s, buf, len, off))
			return -ENOENT;
		done(arg, 0);
	}
	hit(s, off, len, ext, 1);
	return 0;
}

void stfs_pool_read(struct stfs_object *s, void *buf, size_t len,
		    uint64_t off, const struct stfs_extent *ext,
		    stfs_source_done done, void *arg)
{
	struct stfs_job t = { .s = s, .buf = buf, .len = len, .off = off,
			      .done = done, .arg = arg,
			      .asked_ms = stfs_now_ms() };

	/* bytes on the wire already (the kernel's readahead, a prefetch):
	 * answered by their fetch, no worker taken */
	if (stfs_blocks_attach(s, buf, len, off, done, arg) == 0) {
		hit(s, off, len, ext, 1);
		return;
	}
	enqueue(s, &t, ext);
}

void stfs_pool_plan_init(struct stfs_object *s)
{
	s->plan = (struct stfs_obj_plan){ .inflight = 0 };
	pthread_cond_init(&s->plan.idle, NULL);
}

void stfs_pool_plan_fini(struct stfs_object *s)
{
	pthread_cond_destroy(&s->plan.idle);
}

void stfs_pool_drain(struct stfs_object *s)
{
	struct stfs_pool *p = &s->r->pool;

	pthread_mutex_lock(&p->mu);
	for (struct stfs_job **q = &p->pf_queue; *q;) {  /* its prefetches */
		struct stfs_job *j = *q;

		if (j->s != s) {
			q = &j->next;
			continue;
		}
		*q = j->next;
		s->plan.inflight--;
		p->n_pf_queued--;
		free(j);
	}
	p->pf_tail = &p->pf_queue;
	while (*p->pf_tail)
		p->pf_tail = &(*p->pf_tail)->next;
	drop_warms(p, s);
	while (s->plan.inflight)        /* reads still on the wire */
		pthread_cond_wait(&s->plan.idle, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

void stfs_pool_warm(struct stfs_object *s, uint64_t b, stfs_source_done done,
		    void *arg)
{
	struct stfs_job t = { .s = s, .off = b, .done = done, .arg = arg,
			      .warm = 1 };

	stfs_m_prefetch(s->r->o.metrics, STFS_PF_WARM, 0, stfs_block_len(s, b));
	enqueue(s, &t, NULL);
}

void stfs_pool_unwarm(struct stfs_object *s)
{
	pthread_mutex_lock(&s->r->pool.mu);
	drop_warms(&s->r->pool, s);
	pthread_mutex_unlock(&s->r->pool.mu);
}

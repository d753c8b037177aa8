/*
 * serve.c: the request loop of a mounted stfs.
 *
 * The main thread always serves.  While one stream of reads comes at a
 * time (cat, dd, a loader walking tensors in turn) it serves alone: two
 * threads taking turns on one stream cost it 20-30% on a small machine.
 * When streams interleave (parallel readers of several files, or of one
 * file at different places), up to threads - 1 helpers join in, each
 * receiving and serving requests of its own as libfuse's multi-threaded
 * loop does, and they park again once the interleaving has stopped for
 * PARALLEL_HOLD_NS.  With threads=1 this is libfuse's single-threaded
 * loop.
 *
 * stfs_serve_init() answers the kernel's INIT before stfs goes to the
 * background, so a session that libfuse or the kernel refuses (say, a
 * max_read= they disagree on) is an error of `stfs mount`, not a mount
 * that vanishes a moment after it "succeeded".
 *
 * Helpers block every signal, so SIGTERM and SIGINT interrupt the main
 * thread's read() and end its loop.  Helpers are then cancelled, which
 * they allow only while waiting for a request, and joined.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "fs.h"

#define RECENT 8                             /* streams remembered */
#define NEAR (16u << 20)                     /* bytes: same stream */
#define INTERLEAVE_NS (50 * 1000000LL)       /* a stream read again within */
#define PARALLEL_HOLD_NS (200 * 1000000LL)   /* helpers stay this long */

struct stfs_pool {
	struct fuse_session *se;
	pthread_mutex_t mu;
	pthread_cond_t cv;          /* parallel reads began, or stop */
	int stop;
	int64_t parallel_until;     /* helpers serve until then */
	struct {                    /* the read streams seen lately */
		uint64_t node;      /* file */
		uint64_t next;      /* where its reads have got to */
		int64_t ns;         /* when it was last read */
	} recent[RECENT];
	unsigned last;              /* recent[] slot of the last READ */
	struct fuse_buf *bufs;      /* one per helper */
};

static int64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
	return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/*
 * Note a request about to be served.  A READ belongs to a stream when it
 * is of the same file and within NEAR bytes of where that stream's reads
 * have got to (the kernel's readahead keeps several requests in flight,
 * and threads may see them out of order).  A READ that goes on with a
 * stream read lately, but not by the last READ, means two streams
 * interleave: parallel readers, of different files or of one file at
 * different places.  One file read after another, or one file from start
 * to end, never looks like that.  Parallel mode wakes the parked helpers.
 */
static void note(struct stfs_pool *p, const struct fuse_buf *b)
{
	const struct fuse_in_header *in = b->mem;
	const struct fuse_read_in *rd = (const void *)(in + 1);
	uint64_t end;
	int64_t t;
	unsigned i, slot = 0;

	if (b->size < sizeof(*in) + sizeof(*rd) || in->opcode != FUSE_READ)
		return;
	end = rd->offset + rd->size;
	t = now_ns();
	pthread_mutex_lock(&p->mu);
	for (i = 0; i < RECENT; i++) {
		uint64_t next = p->recent[i].next;

		if (p->recent[i].node == in->nodeid &&
		    rd->offset + NEAR >= next && rd->offset <= next + NEAR)
			break;
		if (p->recent[i].ns < p->recent[slot].ns)
			slot = i;       /* the oldest, to reuse */
	}
	if (i < RECENT) {
		if (i != p->last && t - p->recent[i].ns < INTERLEAVE_NS) {
			if (t >= p->parallel_until)     /* wake the helpers */
				pthread_cond_broadcast(&p->cv);
			p->parallel_until = t + PARALLEL_HOLD_NS;
		}
		slot = i;
		if (end > p->recent[slot].next)
			p->recent[slot].next = end;
	} else {
		p->recent[slot].node = in->nodeid;
		p->recent[slot].next = end;
	}
	p->recent[slot].ns = t;
	p->last = slot;
	pthread_mutex_unlock(&p->mu);
}

/* Receive one request into b, cancellable only meanwhile. */
static int receive(struct fuse_session *se, struct fuse_buf *b)
{
	int res;

	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
	res = fuse_session_receive_buf(se, b);
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	return res;
}

struct helper_arg {
	struct stfs_pool *p;
	struct fuse_buf *buf;
};

static void *helper(void *arg)
{
	struct stfs_pool *p = ((struct helper_arg *)arg)->p;
	struct fuse_buf *b = ((struct helper_arg *)arg)->buf;
	int res;

	free(arg);
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	for (;;) {
		pthread_mutex_lock(&p->mu);
		while (!p->stop && now_ns() >= p->parallel_until)
			pthread_cond_wait(&p->cv, &p->mu);
		res = p->stop;
		pthread_mutex_unlock(&p->mu);
		if (res)
			break;
		res = receive(p->se, b);
		if (res == -EINTR)
			continue;
		if (res <= 0)
			break;
		note(p, b);
		fuse_session_process_buf(p->se, b);
	}
	return NULL;
}

/* How the device's last read ended: 0 for an end of the connection
 * (ENODEV: unmounted; ECONNABORTED: the kernel ended it, which it does
 * now and then after a lazy unmount whose last file closes while the
 * daemon reads: test_lazy_unmount_repeated), else res.  libfuse has
 * printed "reading device" for the second on stderr. */
static int end_of(int res)
{
	return res == -ENODEV || res == -ECONNABORTED ? 0 : res;
}

/* The main thread's loop; n helpers are running. */
static int main_loop(struct stfs_pool *p, unsigned n)
{
	struct fuse_buf b = { .mem = NULL };
	int res = 0;

	while (!fuse_session_exited(p->se)) {
		res = fuse_session_receive_buf(p->se, &b);
		if (res == -EINTR)
			continue;
		if (res <= 0)
			break;
		if (n)
			note(p, &b);
		fuse_session_process_buf(p->se, &b);
	}
	free(b.mem);
	return res > 0 ? 0 : end_of(res);
}

int stfs_serve_init(struct fuse_session *se, const int *initialized)
{
	struct fuse_buf b = { .mem = NULL };
	int res = 0;

	while (!*initialized && !fuse_session_exited(se)) {
		res = fuse_session_receive_buf(se, &b);
		if (res == -EINTR)
			continue;
		if (res <= 0)
			break;
		fuse_session_process_buf(se, &b);
	}
	free(b.mem);
	if (*initialized && !fuse_session_exited(se))
		return 0;
	return res < 0 ? res : -EPROTO;
}

int stfs_serve(struct fuse_session *se, unsigned threads)
{
	struct stfs_pool p = { .se = se };
	pthread_t *tids;
	sigset_t all, old;
	unsigned i, n = 0;
	int res;

	if (threads <= 1)
		return end_of(fuse_session_loop(se)) < 0 ? -1 : 0;
	tids = calloc(threads - 1, sizeof(*tids));
	p.bufs = calloc(threads - 1, sizeof(*p.bufs));
	if (!tids || !p.bufs) {
		free(tids);
		free(p.bufs);
		return -1;
	}
	pthread_mutex_init(&p.mu, NULL);
	pthread_cond_init(&p.cv, NULL);
	/* helpers inherit a mask that blocks every signal */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (; n < threads - 1; n++) {
		struct helper_arg *a = malloc(sizeof(*a));

		if (!a)
			break;
		a->p = &p;
		a->buf = &p.bufs[n];
		if (pthread_create(&tids[n], NULL, helper, a) != 0) {
			free(a);
			break;          /* serve with the helpers there are */
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	res = main_loop(&p, n);
	pthread_mutex_lock(&p.mu);
	p.stop = 1;
	pthread_cond_broadcast(&p.cv);
	pthread_mutex_unlock(&p.mu);
	for (i = 0; i < n; i++) {
		pthread_cancel(tids[i]);    /* only acts in receive() */
		pthread_join(tids[i], NULL);
		free(p.bufs[i].mem);
	}
	pthread_cond_destroy(&p.cv);
	pthread_mutex_destroy(&p.mu);
	free(p.bufs);
	free(tids);
	return res < 0 ? -1 : 0;
}

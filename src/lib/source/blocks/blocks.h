/*
 * blocks.h: the block engine (blocks/): an object's bytes read by block
 * through the cache (blocks.c, lookup.c), the worker threads and the
 * prefetch policy (pool.c), the write-behind to the cache (writeback.c),
 * and its fetch interface (struct stfs_fetch_ops, which http/fetch.c
 * fills in) with the requests the engine makes of it (struct
 * stfs_request, which the HTTP client carries out; what only the client's
 * own calls carry, a method, header lines and a body, is http/http.h's
 * struct stfs_http_extra).  The cache store itself is cache.h.
 * blocks/ knows no HTTP: it uses only source.h, cache.h and engine.h.
 */
#ifndef STFS_BLOCKS_H
#define STFS_BLOCKS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "source.h"
#include "cache.h"

struct stfs_remote;
struct stfs_auth;
struct stfs_resolver;
struct stfs_object;

/* ---- the requests the engine makes (the fetch interface) ---------------- */

/* A reader to answer as soon as its bytes [at, at + len) of the range
 * have come, before the rest of the range (a block) has: fn(arg) once. */
struct stfs_early {
	size_t at, len;
	void (*fn)(void *arg, const char *bytes);
	void *arg;
	atomic_int ready;           /* the bytes have come (the transfer
				     * thread sets it; a progress wake of
				     * the fetching thread may read it) */
	int done;                   /* fn was called (the fetching thread) */
};

/* How far a range's bytes have come (blocks.c): when good reaches want,
 * want goes to SIZE_MAX and the fetching thread runs fn(arg). */
struct stfs_progress {
	atomic_size_t good;         /* bytes from the start that came, good */
	atomic_size_t want;         /* wake the fetching thread at this */
	void (*fn)(void *arg);
	void *arg;
};

/* One request: a range of an object (or its whole body, whole). */
struct stfs_request {
	const char *url;
	const char *etag;           /* the version seen at open: sent in */
	const char *last_modified;  /* If-Match or If-Unmodified-Since, and
				     * checked in answers */
	const struct stfs_auth *auth;
	uint64_t off;
	size_t len;                 /* whole: the most bytes taken */
	uint64_t want_total;        /* the object's size, or UINT64_MAX */
	int whole;
	const atomic_int *cancel;   /* set: abort */
	struct stfs_early *early;   /* or NULL */
	struct stfs_progress *progress; /* or NULL */
	unsigned flags;             /* STFS_REQ_* */
	uint64_t deadline_ms;       /* no backoff past it (monotonic ms:
				     * its reader's bound), or 0 */
};

/* The longest backoff before a retry: a Retry-After is capped to it, and
 * a reader waits at most retries x that for a read that fails. */
#define STFS_BACKOFF_MAX_S 30
/* CLOCK_MONOTONIC in milliseconds (lookup.c). */
uint64_t stfs_now_ms(void);
/* The backoff before a retry of a reader's request whose last attempt
 * began at t0, so that the retry, taken to last as long, ends by its
 * deadline_ms: wait, or less (half of it at least), or 0 (no retry)
 * (lookup.c). */
unsigned stfs_backoff_within(uint64_t deadline_ms, uint64_t t0,
			     unsigned wait);

/* The engine's fetch interface: how blocks/ gets an object's bytes from
 * where they live, without knowing that it is HTTP.  Its owner (remote.c)
 * gives it one (struct stfs_remote's fetch), filled in by http/fetch.c;
 * blocks/ calls no function of http/. */
struct stfs_fetch_ops {
	/* A handle for one fetching thread (a worker of pool.c), and its
	 * end: NULL if none could be made. */
	void *(*handle_new)(void);
	void (*handle_free)(void *h);
	/* Do request q (bytes [q->off, q->off + q->len) of o) with handle h:
	 * the bytes into buf, *got of them; 0, or -errno with err saying
	 * why. */
	int (*fetch)(struct stfs_object *o, void *h,
		     const struct stfs_request *q, char *buf, size_t *got,
		     struct stfs_error *err);
};

#define STFS_FAIL_SLOTS 16
#define STFS_FD_SLOTS 16

/* A fetch of bytes [off, end) that failed with rc, remembered until
 * until_ms (monotonic). */
struct stfs_failure {
	uint64_t off, end, until_ms;
	int rc;
};

/* A reader of an object going on in order, as its reads show it (pool.c):
 * a few are kept per object, as the kernel keeps readahead per open file,
 * so that two readers interleaving in one shard (two ranks, a loader's
 * threads) each keep their window ahead. */
#define STFS_STREAMS 4
struct stfs_stream {
	uint64_t next_off;          /* where its last read ended; 0: none */
	unsigned streak;            /* its reads in a row that went on */
	uint64_t pf_next;           /* the next block to prefetch for it */
	uint64_t used;              /* the object's tick at its last read */
	uint64_t last_off;          /* where its last read began */
	int back;                   /* going down: each read ends where the
				     * one before began (a copy glibc makes
				     * from the end, out of a mapping) */
	uint64_t pf_low;            /* going down: the lowest block queued */
	uint64_t home_off, home_end; /* the extent (tensor) it began in */
	uint64_t first_off;         /* where it began */
	int across;                 /* it went on a block past that one's
				     * end: its window may cross tensors */
};

/* ---- one remote object: each part its owner's, under its owner's lock -- */

/* An object's reads as the pool plans them (pool.c; writeback.c counts
 * a block queued for the writers): all under the pool's mu. */
struct stfs_obj_plan {
	unsigned inflight;          /* asynchronous reads not done */
	pthread_cond_t idle;        /* inflight went to 0 */
	struct stfs_stream streams[STFS_STREAMS];  /* its readers in order */
	uint64_t tick;              /* reads planned, to age the streams */
	uint64_t pf_fed;            /* blocks below it a prefetch of a
				     * read's brought from the network */
	struct stfs_object *next;   /* read after this one, or NULL */
};

/* The fetches of an object that failed last (lookup.c): a ring, since a
 * reader's block and the prefetches beside it fail together.  Under the
 * blocks' mu (struct stfs_blocks), which the fetches that fail hold. */
struct stfs_obj_failures {
	struct stfs_failure ring[STFS_FAIL_SLOTS];
	unsigned next;              /* the next slot to use */
};

/* An object's cached blocks kept open for reading, their headers checked
 * (lookup.c): block b in slot b % STFS_FD_SLOTS (fd -1: none); lock is
 * held to read with one, and to change one. */
struct stfs_obj_fds {
	pthread_rwlock_t lock;
	struct stfs_cache_blk slot[STFS_FD_SLOTS];
};

/* One remote object as the block engine sees it (embedded in a source).
 * What it is, its opener sets (http/http.c; mirror/tier.c its tier)
 * before the engine sees it, and nothing changes after; its cache entry
 * is the cache's (cache.h); the rest is the engine's, made by
 * stfs_object_init() and each part kept by its owner. */
struct stfs_object {
	struct stfs_remote *r;
	const char *url;
	const char *etag;           /* the version seen at open, checked */
	const char *last_modified;  /* in every answer ("" if none) */
	const struct stfs_auth *auth;
	struct stfs_resolver *rv;   /* its redirect, or NULL: url itself */
	const void *tier;           /* its copy in the mirror, or NULL */
	uint64_t size;
	struct stfs_cache_obj cobj; /* its blocks on disk, if cached */
	atomic_int closing;         /* set by its opener at close: abort
				     * its transfers and retries */
	struct stfs_obj_plan plan;          /* pool.c's, the pool's mu */
	struct stfs_obj_failures failures;  /* lookup.c's, the blocks' mu */
	struct stfs_obj_fds fds;            /* lookup.c's, fds.lock */
};

/* The engine's parts of o (plan, failures, fds), empty, before o is
 * read; and their end, once o is closing and drained (stfs_pool_drain())
 * (blocks.c: each by its owner, below). */
void stfs_object_init(struct stfs_object *o);
void stfs_object_fini(struct stfs_object *o);
/* o's failures and descriptors of cached blocks: none yet; all closed
 * (lookup.c). */
void stfs_lookup_init(struct stfs_object *o);
void stfs_lookup_fini(struct stfs_object *o);
/* o's plan: no read, no reader yet; its end (pool.c). */
void stfs_pool_plan_init(struct stfs_object *o);
void stfs_pool_plan_fini(struct stfs_object *o);

struct stfs_inflight;

/* What one fetching thread carries: its handle, and its blocks fetched
 * but not yet in the cache (written after its reader is answered). */
struct stfs_fetcher {
	void *h;                /* the fetch interface's handle */
	struct stfs_inflight *to_write;
	uint64_t deadline_ms;   /* its reader's bound (stfs_request), or 0 */
};

#define STFS_SPARE_MAX 16

struct stfs_blocks {
	pthread_mutex_t mu;             /* the blocks in flight */
	pthread_cond_t cv;
	struct stfs_inflight *list;
	atomic_uint nheld;              /* held for their readers (changed
					 * under mu; read without it) */
	char *spare[STFS_SPARE_MAX];    /* block buffers for the next fetch */
	unsigned nspare;
};

struct stfs_job;

/* Cache writer threads (writeback.c): a batch's write waits for its
 * flush to the disk, and another writer writes meanwhile. */
#define STFS_WRITERS 4

/* How many workers fetch at once with connections=0 (conc.c):
 * from STFS_CONC_START, up to the cap (o.connections, STFS_CONC_CAP
 * then), as the throughput rises. */
#define STFS_CONC_CAP 32
#define STFS_CONC_START 8
#define STFS_CONC_MIN 2
#define STFS_CONC_PERIOD_MS 300
#define STFS_CONC_HOLD 4
struct stfs_conc {
	int on;                         /* 0: connections= fixes it */
	_Atomic unsigned limit;         /* workers that may fetch now */
	unsigned busy;                  /* workers fetching (under mu) */
	int starved;                    /* a job waited for a worker */
	unsigned jobs;                  /* jobs ended this period */
	unsigned full;                  /* of them, with every worker busy */
	uint64_t t0_ms, bytes0, retries0;       /* this period's start */
	double best;                    /* bytes/s, the best period */
	unsigned rise;                  /* the last period's rise */
	unsigned hold;                  /* periods to wait before a rise */
};

struct stfs_pool {
	pthread_mutex_t mu;
	pthread_cond_t work;
	struct stfs_job *queue, **queue_tail;   /* reads someone waits for */
	struct stfs_job *pf_queue, **pf_tail;   /* then prefetches */
	unsigned n_pf_queued;
	struct stfs_job *warm_queue, **warm_tail; /* then a warm's blocks */
	pthread_t *workers;
	unsigned nworkers;
	pid_t pid;                      /* the process the threads run in */
	int stopping;
	/* blocks for the writer threads (writeback.c) */
	struct stfs_inflight *wq, **wq_tail;
	unsigned nwq;
	pthread_cond_t wq_cv;
	unsigned writing;               /* blocks the writer writes now */
	pthread_cond_t written;         /* the writer has nothing to do */
	pthread_t writer_th[STFS_WRITERS];
	unsigned writer_on;             /* writer threads running */
	struct stfs_conc conc;          /* under mu but its limit */
};

/* conc.c: the workers of r fetch as many at once as pay when on (else
 * o.connections). */
void stfs_conc_init(struct stfs_remote *r, int on);
/* How many fetch at once now: what the prefetch window and the queues
 * follow. */
unsigned stfs_pool_width(const struct stfs_remote *r);
/* May a worker take a job now (under mu)?  If not, the period is marked
 * as one that asked for more. */
int stfs_conc_may(struct stfs_pool *p);
/* A job ended (under mu): the number for the next period, once this one
 * is over; 1 if it grew (wake the workers). */
int stfs_conc_after(struct stfs_remote *r, uint64_t now_ms);

/* blocks ahead a prefetch brings: 32 MiB of them, at least 2 */
unsigned stfs_prefetch_blocks(const struct stfs_remote *r);
/* The length of block b of o. */
size_t stfs_block_len(const struct stfs_object *o, uint64_t b);

void stfs_blocks_init(struct stfs_blocks *b);
void stfs_blocks_fini(struct stfs_blocks *b);
/* Bytes [off, off + len) of o (within its size) from the cache, memory
 * or the network; early, if given, for a read within one block. */
int stfs_blocks_read(struct stfs_fetcher *f, struct stfs_object *o,
		     void *buf, size_t len, uint64_t off,
		     struct stfs_early *early);
/* Bytes [off, off + len) of o, within one block, when that block is on
 * the wire or held in memory: the reader is answered by done(arg, rc) as
 * soon as they have come, here or on the fetching thread, and waits on no
 * thread meanwhile: 0.  -ENOENT: the block is not listed (read it). */
int stfs_blocks_attach(struct stfs_object *o, void *buf, size_t len,
		       uint64_t off, stfs_source_done done, void *arg);
/* The cache and the failures of a moment ago, asked about bytes [off,
 * off + len) of o (len 0: is the block at off cached whole) (lookup.c):
 * 0 (buf filled from the cache), the -errno of a fetch of them that
 * failed a moment ago (the kernel's retry of a read that failed is
 * answered with it at once, not after another Retry-After), or -ENOENT
 * (to be fetched). */
int stfs_blocks_lookup(struct stfs_object *o, void *buf, size_t len,
		       uint64_t off);
/* The -errno of any fetch of o that failed a moment ago, or 0. */
int stfs_blocks_failing(struct stfs_object *o);
/* The fetch of [off, end) of o failed with rc (under the blocks' mu). */
void stfs_blocks_failed(struct stfs_object *o, uint64_t off, uint64_t end,
			int rc);
/* Bring block b of o into the cache (or memory), for a reader to come. */
void stfs_blocks_prefetch(struct stfs_fetcher *f, struct stfs_object *o,
			  uint64_t b);
/* Bring block b of o into the cache (a warm; written behind, as a
 * read's): 0, or -errno (-EOPNOTSUPP: no cache). */
int stfs_blocks_warm(struct stfs_fetcher *f, struct stfs_object *o,
		     uint64_t b);
/* The cache's view of block me (to write it): its pages kept if no
 * reader has had its bytes. */
void stfs_inflight_item(struct stfs_inflight *me, struct stfs_cache_item *it);
/* Block me is written to the cache (rc 0: unlisted, freed), or could not
 * be (rc: held in memory for its readers, as without a cache). */
void stfs_blocks_written(struct stfs_remote *r, struct stfs_inflight *me,
			 int rc);
struct stfs_object *stfs_inflight_object(const struct stfs_inflight *me);
struct stfs_inflight **stfs_inflight_later(struct stfs_inflight *me);
/* Bytes [off, off + len) of o, in one block or across two, copied from
 * blocks fetched whole and still in memory (held for their readers, or
 * on their way to the cache): 0, or -ENOENT (read them elsewhere). */
int stfs_blocks_copy_held(struct stfs_object *o, void *buf, size_t len,
			  uint64_t off);
/* o is closing: let go of its blocks held in memory. */
void stfs_blocks_forget(struct stfs_blocks *b, const struct stfs_object *o);

void stfs_pool_init(struct stfs_pool *p);
void stfs_pool_fini(struct stfs_pool *p);
/* Stop and join the workers and the writer (it writes what is queued). */
void stfs_pool_stop(struct stfs_remote *r);
/* Queue a read of [off, off + len) of o into buf for a worker, done
 * called when it is in (maybe before this returns), and plan prefetches;
 * ext as in stfs_source_ops.read_async. */
void stfs_pool_read(struct stfs_object *o, void *buf, size_t len,
		    uint64_t off, const struct stfs_extent *ext,
		    stfs_source_done done, void *arg);
/* next is read after o (stfs_source_ops.follow), or NULL. */
void stfs_pool_follow(struct stfs_object *o, struct stfs_object *next);
/* A read of blocks held in memory (fetched, and in the cache past its
 * page cache, or not in it: blocks.c's hold()) answered from there, done
 * called, prefetches planned: 0; or -ENOENT (none held: read the cache,
 * then stfs_pool_read()). */
int stfs_pool_held(struct stfs_object *o, void *buf, size_t len,
		   uint64_t off, const struct stfs_extent *ext,
		   stfs_source_done done, void *arg);
/* A read served without a worker (a cache hit): plan prefetches. */
void stfs_pool_hit(struct stfs_object *o, uint64_t off, size_t len,
		   const struct stfs_extent *ext);
/* One asynchronous job of o (a read, prefetch, warm or block queued for
 * the writers) is over (under the pool's mu). */
void stfs_pool_job_over(struct stfs_object *o);
/* o is closing: drop its prefetches and wait for its reads. */
void stfs_pool_drain(struct stfs_object *o);
/* Drop o's warm blocks not started yet (each answered -ECANCELED). */
void stfs_pool_unwarm(struct stfs_object *o);
/* Bring block b of o into the cache for a warm (`stfs prefetch`), after
 * every read and prefetch queued: done(arg, 0) once it is fetched and
 * written, or handed to the writers (stfs_writeback_flush()); or -errno. */
void stfs_pool_warm(struct stfs_object *o, uint64_t b, stfs_source_done done,
		    void *arg);

/* ---- write-behind (writeback.c) ------------------------------------------ */

/* The blocks f fetched go to the cache, after their readers have been
 * answered: to the writer threads, or written here, together. */
void stfs_writeback(struct stfs_fetcher *f);
/* Start the writer threads (under the pool's mu, with the workers). */
void stfs_writeback_start(struct stfs_remote *r);
/* Stop and join them once they have written what is queued. */
void stfs_writeback_stop(struct stfs_remote *r);
/* The cache could not take a block of len bytes (0: an object's entry)
 * for rc: logged, the first time only. */
void stfs_writeback_failed(struct stfs_remote *r, size_t len, int rc);
/* Wait until the writers have written every block handed to them. */
void stfs_writeback_flush(struct stfs_remote *r);


#endif

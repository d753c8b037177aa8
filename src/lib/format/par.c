/*
 * par.c: the one parallel loop of the library: n jobs run by a few
 * threads, each taking the next job as it finishes one (the remote
 * shards a mount opens, the small files of a repository it fetches).
 */
#include <pthread.h>
#include <stdlib.h>

#include "format.h"

/* A worker's stack: its jobs open a source or fetch a file, whose bytes
 * move on the transfer threads (http/transfer.c), and parse a header, all
 * with small frames.  The default (8 MiB) costs a thread's creation and
 * exit more page-table work than the job: 128 threads took 300 ms to
 * start and end on a 2-core VM, 90 ms with 1 MiB stacks. */
#define STACK (1u << 20)

struct par {
	void (*fn)(void *ctx, size_t i);
	void *ctx;
	size_t n, next;
	pthread_mutex_t mu;
};

static void *worker(void *arg)
{
	struct par *p = arg;

	for (;;) {
		size_t i;

		pthread_mutex_lock(&p->mu);
		i = p->next++;
		pthread_mutex_unlock(&p->mu);
		if (i >= p->n)
			return NULL;
		p->fn(p->ctx, i);
	}
}

void stfs_parallel_for(size_t n, unsigned width,
		       void (*fn)(void *ctx, size_t i), void *ctx)
{
	struct par p = { fn, ctx, n, 0, PTHREAD_MUTEX_INITIALIZER };
	size_t want = width > STFS_PARALLEL_MAX ? STFS_PARALLEL_MAX : width;
	pthread_attr_t attr;
	pthread_t *th;
	size_t nth = 0;

	if (want > n)
		want = n;
	/* the caller is one of the workers: want - 1 more */
	th = want > 1 ? calloc(want - 1, sizeof(*th)) : NULL;
	if (th && pthread_attr_init(&attr) == 0) {
		(void)pthread_attr_setstacksize(&attr, STACK);
		while (nth + 1 < want &&
		       pthread_create(&th[nth], &attr, worker, &p) == 0)
			nth++;
		pthread_attr_destroy(&attr);
	}
	worker(&p);
	for (size_t i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	free(th);
	pthread_mutex_destroy(&p.mu);
}

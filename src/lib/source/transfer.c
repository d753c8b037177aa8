/*
 * transfer.c: the threads that move every HTTP transfer's bytes, through
 * libcurl's multi interface.
 *
 * A caller prepares an easy handle as for curl_easy_perform() and hands it
 * to stfs_transfer(), which waits for it: the handle is added to a multi
 * handle, and that multi's thread runs it with the others in one poll
 * loop, calling the handle's callbacks on that thread.  So the number of
 * requests on the wire is what the callers make (a worker per connection,
 * and opens), while a fixed few threads do the sockets, each multi handle
 * keeping its live connections for the next request.  Each request gets
 * its own connection (no HTTP/2 multiplexing), so `connections=` means
 * connections.
 *
 * The threads start on first use, and are stopped before a fork() when
 * they have nothing to do: the daemon goes to the background after the
 * headers were read, and forks as a process with one thread, as it did
 * before there were these.  (A fork while transfers run, for a helper
 * that execs, leaves them behind in the parent.)  Either way the child
 * starts its own when it next needs them.  If they cannot start, a
 * transfer runs on its caller's thread (curl_easy_perform()).
 *
 * The callbacks should be quick: the other transfers of a thread wait
 * while one runs.  A callback with slow work for its caller (answering a
 * reader whose bytes have come) calls stfs_transfer_wake(), and the
 * caller's hook does the work on the caller's thread while the transfer
 * goes on.
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>

#include "transfer.h"

struct pending {
	CURL *h;
	CURLcode rc;
	int done;
	int woken;                      /* stfs_transfer_wake() was called */
	int here;                       /* run on the caller's thread */
	void (*hook)(void *arg);
	void *arg;
	pthread_cond_t cv;
	struct pending *next;
};

/* Transfer threads, each with its multi handle; requests go to them in
 * turn.  One thread could move a loopback server's bytes alone, but on
 * two cores it read 0.8x what threads of one request each read; two
 * threads read as much (docs/performance.md). */
#define LOOPS 2

struct loop {
	CURLM *multi;
	pthread_t thread;
	struct pending *to_add;
	CURLM *left_behind;             /* the parent's, in a child */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static struct loop loops[LOOPS];
static int running, stopping;
static unsigned busy;                   /* transfers handed over */
static unsigned turn;

static void finish(struct pending *p, CURLcode rc)
{
	pthread_mutex_lock(&mu);
	p->rc = rc;
	p->done = 1;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&mu);
}

static void *loop_run(void *arg)
{
	struct loop *l = arg;
	unsigned active = 0;

	for (;;) {
		struct pending *p;
		CURLMsg *msg;
		int still, left;

		pthread_mutex_lock(&mu);
		p = l->to_add;
		l->to_add = NULL;
		if (!p && !active && stopping) {
			pthread_mutex_unlock(&mu);
			break;
		}
		pthread_mutex_unlock(&mu);
		for (struct pending *next; p; p = next) {
			next = p->next;
			curl_easy_setopt(p->h, CURLOPT_PRIVATE, p);
			if (curl_multi_add_handle(l->multi, p->h) == CURLM_OK)
				active++;
			else
				finish(p, CURLE_OUT_OF_MEMORY);
		}
		curl_multi_perform(l->multi, &still);
		while ((msg = curl_multi_info_read(l->multi, &left))) {
			char *priv = NULL;
			CURLcode rc = msg->data.result;

			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE,
					  &priv);
			curl_multi_remove_handle(l->multi, msg->easy_handle);
			active--;
			finish((struct pending *)(void *)priv, rc);
		}
		curl_multi_poll(l->multi, NULL, 0, 1000, NULL);
	}
	return NULL;
}

/* End the first n threads once their transfers are done, and free their
 * multi handles: called and returns under mu, which it lets go meanwhile
 * (stopping is set, so no transfer is handed to them). */
static void end_loops(unsigned n)
{
	stopping = 1;
	for (unsigned i = 0; i < n; i++)
		curl_multi_wakeup(loops[i].multi);
	pthread_mutex_unlock(&mu);
	for (unsigned i = 0; i < n; i++)
		pthread_join(loops[i].thread, NULL);
	pthread_mutex_lock(&mu);
	for (unsigned i = 0; i < n; i++) {
		curl_multi_cleanup(loops[i].multi);
		loops[i].multi = NULL;
	}
	running = stopping = 0;
}

static void stop(void)
{
	pthread_mutex_lock(&mu);
	if (running)
		end_loops(LOOPS);
	pthread_mutex_unlock(&mu);
}

/* fork(): idle threads are stopped first, and mu is held across it, so
 * the child's is in a known state.  The child has no transfer thread;
 * multi handles left running in the parent may be in the middle of a call
 * there, so the child leaves them alone (and keeps them reachable). */
static void before_fork(void)
{
	int idle;

	pthread_mutex_lock(&mu);
	idle = running && !busy;
	pthread_mutex_unlock(&mu);
	if (idle)
		stop();
	pthread_mutex_lock(&mu);
}

static void after_fork_parent(void)
{
	pthread_mutex_unlock(&mu);
}

static void after_fork_child(void)
{
	for (unsigned i = 0; i < LOOPS; i++) {
		if (running)
			loops[i].left_behind = loops[i].multi;
		loops[i].multi = NULL;
		loops[i].to_add = NULL;
	}
	running = stopping = 0;
	busy = 0;
	pthread_mutex_unlock(&mu);
}

static void register_atfork(void)
{
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

/* Start the threads (under mu): 0, or -1 if not all could start. */
static int start(void)
{
	unsigned n = 0;

	if (running)
		return 0;
	for (unsigned i = 0; i < LOOPS; i++) {
		struct loop *l = &loops[i];

		if (!(l->multi = curl_multi_init()))
			break;
		curl_multi_setopt(l->multi, CURLMOPT_PIPELINING,
				  (long)CURLPIPE_NOTHING);
		/* keep as many live connections as connections= allows */
		curl_multi_setopt(l->multi, CURLMOPT_MAXCONNECTS, 256L);
		if (pthread_create(&l->thread, NULL, loop_run, l) != 0) {
			curl_multi_cleanup(l->multi);
			l->multi = NULL;
			break;
		}
		n++;
	}
	if (n == LOOPS) {
		running = 1;
		return 0;
	}
	end_loops(n);                   /* all or none */
	return -1;
}

CURLcode stfs_transfer(CURL *h, void (*hook)(void *arg), void *arg)
{
	struct pending p = { .h = h, .hook = hook, .arg = arg };
	struct loop *l;

	pthread_once(&atfork_once, register_atfork);
	pthread_mutex_lock(&mu);
	if (stopping || start() < 0) {
		pthread_mutex_unlock(&mu);
		p.here = 1;
		curl_easy_setopt(h, CURLOPT_PRIVATE, &p);
		return curl_easy_perform(h);
	}
	pthread_cond_init(&p.cv, NULL);
	l = &loops[turn++ % LOOPS];
	p.next = l->to_add;
	l->to_add = &p;
	busy++;
	curl_multi_wakeup(l->multi);
	while (!p.done || p.woken) {
		if (p.woken) {
			p.woken = 0;
			pthread_mutex_unlock(&mu);
			if (hook)
				hook(arg);
			pthread_mutex_lock(&mu);
			continue;
		}
		pthread_cond_wait(&p.cv, &mu);
	}
	busy--;
	pthread_mutex_unlock(&mu);
	pthread_cond_destroy(&p.cv);
	return p.rc;
}

void stfs_transfer_wake(CURL *h)
{
	char *priv = NULL;
	struct pending *p;

	curl_easy_getinfo(h, CURLINFO_PRIVATE, &priv);
	if (!(p = (struct pending *)(void *)priv))
		return;
	if (p->here) {
		if (p->hook)
			p->hook(p->arg);
		return;
	}
	pthread_mutex_lock(&mu);
	p->woken = 1;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&mu);
}

void stfs_transfer_stop(void)
{
	stop();
}

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
 * The threads belong to one remote object (engine.h) and start on first
 * use.  Once a model is open they are stopped (stfs_remote_park()): the
 * daemon goes to the background after the headers were read, and forks
 * as a process with one thread.  A child forked while they run (a helper
 * that execs) sees that its process is another and leaves the parent's
 * multi handles alone, starting its own when it next needs them.  If
 * they cannot start, a transfer runs on its caller's thread
 * (curl_easy_perform()).
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
#include <unistd.h>

#include "http/http.h"

/* One transfer handed to a thread, and its caller waiting for it. */
struct stfs_transfer_wait {
	CURL *h;
	CURLcode rc;
	int done;
	int woken;                      /* stfs_transfer_wake() was called */
	int here;                       /* run on the caller's thread */
	void (*hook)(void *arg);
	void *arg;
	pthread_cond_t cv;
	struct stfs_transfer_wait *next;
};

/* Transfer threads, each with its multi handle; requests go to them in
 * turn.  One thread could move a loopback server's bytes alone, but on
 * two cores it read 0.8x what threads of one request each read; two
 * threads read as much (docs/performance.md): STFS_TRANSFER_LOOPS. */

void stfs_transfers_init(struct stfs_transfers *t)
{
	*t = (struct stfs_transfers){ .pid = 0 };
	pthread_mutex_init(&t->mu, NULL);
	for (unsigned i = 0; i < STFS_TRANSFER_LOOPS; i++)
		t->loops[i].t = t;
}

static void finish(struct stfs_transfers *t, struct stfs_transfer_wait *p,
		   CURLcode rc)
{
	pthread_mutex_lock(&t->mu);
	p->rc = rc;
	p->done = 1;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&t->mu);
}

static void *loop_run(void *arg)
{
	struct stfs_transfer_loop *l = arg;
	struct stfs_transfers *t = l->t;
	unsigned active = 0;

	for (;;) {
		struct stfs_transfer_wait *p;
		CURLMsg *msg;
		int still, left;

		pthread_mutex_lock(&t->mu);
		p = l->to_add;
		l->to_add = NULL;
		if (!p && !active && t->stopping) {
			pthread_mutex_unlock(&t->mu);
			break;
		}
		pthread_mutex_unlock(&t->mu);
		for (struct stfs_transfer_wait *next; p; p = next) {
			next = p->next;
			curl_easy_setopt(p->h, CURLOPT_PRIVATE, p);
			if (curl_multi_add_handle(l->multi, p->h) == CURLM_OK)
				active++;
			else
				finish(t, p, CURLE_OUT_OF_MEMORY);
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
			finish(t, (struct stfs_transfer_wait *)(void *)priv,
			       rc);
		}
		curl_multi_poll(l->multi, NULL, 0, 1000, NULL);
	}
	return NULL;
}

/* End the first n threads once their transfers are done, and free their
 * multi handles: called and returns under mu, which it lets go meanwhile
 * (stopping is set, so no transfer is handed to them). */
static void end_loops(struct stfs_transfers *t, unsigned n)
{
	t->stopping = 1;
	for (unsigned i = 0; i < n; i++)
		curl_multi_wakeup(t->loops[i].multi);
	pthread_mutex_unlock(&t->mu);
	for (unsigned i = 0; i < n; i++)
		pthread_join(t->loops[i].thread, NULL);
	pthread_mutex_lock(&t->mu);
	for (unsigned i = 0; i < n; i++) {
		curl_multi_cleanup(t->loops[i].multi);
		t->loops[i].multi = NULL;
	}
	t->running = t->stopping = 0;
}

/* In a child forked while the threads ran: they are the parent's, and
 * their multi handles may be in the middle of a call there, so they are
 * left alone (under mu). */
static void forked(struct stfs_transfers *t)
{
	if (t->pid == getpid())
		return;
	for (unsigned i = 0; i < STFS_TRANSFER_LOOPS; i++) {
		t->loops[i].multi = NULL;
		t->loops[i].to_add = NULL;
	}
	t->running = t->stopping = 0;
	t->busy = 0;
	t->pid = getpid();
}

void stfs_transfers_stop(struct stfs_transfers *t, int idle_only)
{
	pthread_mutex_lock(&t->mu);
	forked(t);
	if (t->running && (!idle_only || !t->busy))
		end_loops(t, STFS_TRANSFER_LOOPS);
	pthread_mutex_unlock(&t->mu);
}

void stfs_transfers_fini(struct stfs_transfers *t)
{
	stfs_transfers_stop(t, 0);
	pthread_mutex_destroy(&t->mu);
}

/* Start the threads (under mu): 0, or -1 if not all could start. */
static int start(struct stfs_transfers *t)
{
	unsigned n = 0;

	forked(t);
	if (t->running)
		return 0;
	for (unsigned i = 0; i < STFS_TRANSFER_LOOPS; i++) {
		struct stfs_transfer_loop *l = &t->loops[i];

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
	if (n == STFS_TRANSFER_LOOPS) {
		t->running = 1;
		return 0;
	}
	end_loops(t, n);                /* all or none */
	return -1;
}

CURLcode stfs_transfer(struct stfs_transfers *t, CURL *h,
		       void (*hook)(void *arg), void *arg)
{
	struct stfs_transfer_wait p = { .h = h, .hook = hook, .arg = arg };
	struct stfs_transfer_loop *l;

	pthread_mutex_lock(&t->mu);
	if (t->stopping || start(t) < 0) {
		pthread_mutex_unlock(&t->mu);
		p.here = 1;
		curl_easy_setopt(h, CURLOPT_PRIVATE, &p);
		return curl_easy_perform(h);
	}
	pthread_cond_init(&p.cv, NULL);
	l = &t->loops[t->turn++ % STFS_TRANSFER_LOOPS];
	p.next = l->to_add;
	l->to_add = &p;
	t->busy++;
	curl_multi_wakeup(l->multi);
	while (!p.done || p.woken) {
		if (p.woken) {
			p.woken = 0;
			pthread_mutex_unlock(&t->mu);
			if (hook)
				hook(arg);
			pthread_mutex_lock(&t->mu);
			continue;
		}
		pthread_cond_wait(&p.cv, &t->mu);
	}
	t->busy--;
	pthread_mutex_unlock(&t->mu);
	pthread_cond_destroy(&p.cv);
	return p.rc;
}

void stfs_transfer_wake(struct stfs_transfers *t, CURL *h)
{
	char *priv = NULL;
	struct stfs_transfer_wait *p;

	curl_easy_getinfo(h, CURLINFO_PRIVATE, &priv);
	if (!(p = (struct stfs_transfer_wait *)(void *)priv))
		return;
	if (p->here) {
		if (p->hook)
			p->hook(p->arg);
		return;
	}
	pthread_mutex_lock(&t->mu);
	p->woken = 1;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&t->mu);
}

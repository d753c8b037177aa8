/*
 * progress.c: the line `stfs mount` shows on a terminal while a remote
 * source is listed and its headers are read: headers read of those to
 * read, bytes received, the rate and the time so far.  It appears only
 * once the opening has taken a second (a quick mount shows nothing), is
 * redrawn a few times a second by a thread of its own from the opening's
 * last report (so the clock moves while one long header arrives), and is
 * erased when the opening ends.  Off a terminal, nothing.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "progress.h"

#define SHOW_AFTER_MS 1000
#define REDRAW_MS 200

static uint64_t ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)(t.tv_sec - t0->tv_sec) * 1000 +
	       (uint64_t)((t.tv_nsec - t0->tv_nsec) / 1000000);
}

void stfs_human_size(uint64_t b, char *out, size_t n)
{
	const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)b;
	int i = 0;

	while (v >= 1024 && i < 4) {
		v /= 1024;
		i++;
	}
	snprintf(out, n, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}

/* Called by the opening (one call at a time): keep its report. */
static void report(void *ctx, const struct stfs_open_progress *p)
{
	struct stfs_open_line *l = ctx;

	pthread_mutex_lock(&l->mu);
	l->last = *p;
	l->reported = 1;
	pthread_mutex_unlock(&l->mu);
}

/* Draw the line (l->mu held). */
static void draw(struct stfs_open_line *l, uint64_t ms)
{
	char got[32], rate[32];
	double s = ms / 1000.0;

	stfs_human_size(l->last.bytes, got, sizeof(got));
	stfs_human_size(s > 0 ? (uint64_t)(l->last.bytes / s) : 0, rate,
			sizeof(rate));
	if (!l->reported || !l->last.files_total)
		fprintf(l->out, "\rstfs: listing the source, %.0f s\033[K", s);
	else
		fprintf(l->out, "\rstfs: reading headers: %zu of %zu files, "
			"%s, %s/s, %.0f s\033[K", l->last.files_done,
			l->last.files_total, got, rate, s);
	fflush(l->out);
	l->shown = 1;
}

static void *ticker(void *arg)
{
	struct stfs_open_line *l = arg;
	struct timespec until;

	pthread_mutex_lock(&l->mu);
	while (!l->stop) {
		uint64_t ms = ms_since(&l->t0);

		if (ms >= SHOW_AFTER_MS)
			draw(l, ms);
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_nsec += (ms < SHOW_AFTER_MS ? SHOW_AFTER_MS - ms
						     : REDRAW_MS) * 1000000;
		until.tv_sec += until.tv_nsec / 1000000000;
		until.tv_nsec %= 1000000000;
		while (!l->stop &&
		       pthread_cond_timedwait(&l->cv, &l->mu, &until) !=
		       ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

void stfs_open_line_start(struct stfs_open_line *l,
			  struct stfs_remote_opts *o, FILE *out)
{
	pthread_condattr_t ca;

	memset(l, 0, sizeof(*l));
	l->out = out;
	if (!isatty(fileno(out)))
		return;
	clock_gettime(CLOCK_MONOTONIC, &l->t0);
	pthread_mutex_init(&l->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&l->cv, &ca);
	pthread_condattr_destroy(&ca);
	stfs_remote_opts_progress(o, report, l);
	if (pthread_create(&l->th, NULL, ticker, l) == 0) {
		l->running = 1;
		return;
	}
	stfs_remote_opts_progress(o, NULL, NULL);
	pthread_cond_destroy(&l->cv);
	pthread_mutex_destroy(&l->mu);
}

void stfs_open_line_stop(struct stfs_open_line *l,
			 struct stfs_remote_opts *o)
{
	if (!l->running)
		return;
	stfs_remote_opts_progress(o, NULL, NULL);
	pthread_mutex_lock(&l->mu);
	l->stop = 1;
	pthread_cond_signal(&l->cv);
	pthread_mutex_unlock(&l->mu);
	pthread_join(l->th, NULL);
	if (l->shown) {
		fputs("\r\033[K", l->out);
		fflush(l->out);
	}
	pthread_cond_destroy(&l->cv);
	pthread_mutex_destroy(&l->mu);
	l->running = 0;
}

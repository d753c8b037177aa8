/*
 * progress.h: the line `stfs mount` shows on a terminal while a remote
 * source is opened (progress.c), and sizes as people read them.
 */
#ifndef STFS_PROGRESS_H
#define STFS_PROGRESS_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "stfs/stfs.h"

/* The line of one opening; the caller owns it (on its stack will do). */
struct stfs_open_line {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t th;
	int running, stop, shown;
	struct stfs_open_progress last; /* the opening's last report */
	int reported;
	struct timespec t0;             /* CLOCK_MONOTONIC */
	FILE *out;
};

/* Show the progress of the opening with options o on out, if out is a
 * terminal: from a second after now, redrawn a few times a second.
 * Nothing happens (and stop is still to be called) when out is not one. */
void stfs_open_line_start(struct stfs_open_line *l,
			  struct stfs_remote_opts *o, FILE *out);
/* The opening is over (o no longer reports): erase the line if shown. */
void stfs_open_line_stop(struct stfs_open_line *l,
			 struct stfs_remote_opts *o);

/* b bytes as "512 B", "1.5 MiB", ... into out. */
void stfs_human_size(uint64_t b, char *out, size_t n);

#endif

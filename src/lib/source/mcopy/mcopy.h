/*
 * mcopy.h: one `stfs mirror` run as its file copies see it (mirror.c
 * owns it, mcopy.c copies one file of it).
 */
#ifndef STFS_MCOPY_H
#define STFS_MCOPY_H

#include <pthread.h>
#include <stdint.h>

#include "stfs/mirror.h"

#include "source.h"
#include "mirror/mirror.h"

struct stfs_mjob {
	const struct stfs_location *loc;        /* the origin */
	const struct stfs_s3io *io;             /* the mirror */
	const char *origin, *revision, *created;
	size_t block;
	int listed;             /* the origin listed its files' sizes */
	pthread_mutex_t mu;     /* the status and the next file */
	struct stfs_mirror_status st;
	uint64_t start_ms;
	void (*progress)(void *ctx, const struct stfs_mirror_status *st);
	void *ctx;
};

/* bytes of a file are in (skipped: found there already, verified). */
void stfs_mjob_progress(struct stfs_mjob *j, uint64_t bytes, int skipped);
/* A file's bytes, known once it is open (an origin with no listing). */
void stfs_mjob_total(struct stfs_mjob *j, uint64_t bytes);
/* Copy the origin's file rf into the mirror (or find it there): *f its
 * manifest entry.  0, or -errno with err naming the file. */
int stfs_mirror_copy(struct stfs_mjob *j, const struct stfs_rfile *rf,
		     struct stfs_mfile *f, struct stfs_error *err);

#endif

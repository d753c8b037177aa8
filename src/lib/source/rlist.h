/*
 * rlist.h: what rlist.c offers the rooms besides the repository list's
 * own functions (which source.h declares, for the model layer too): the
 * fault of a small file that could not be fetched.
 */
#ifndef STFS_RLIST_H
#define STFS_RLIST_H

#include "source.h"

/* f could not be fetched (rc, e: why): its fault says so (rlist.c). */
void stfs_rfile_unfetched(struct stfs_rfile *f, int rc,
			  const struct stfs_error *e);

#endif

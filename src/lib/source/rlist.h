/*
 * rlist.h: what rlist.c offers the rooms of the source layer besides what
 * source.h declares for the model layer too (the list, a file added, a
 * path's check): which files are small, a directory walked into a list, a
 * list freed, a list's index by path, and the fault of a small file that
 * could not be fetched.
 */
#ifndef STFS_RLIST_H
#define STFS_RLIST_H

#include "source.h"

/* Files of at most this many bytes that are not weights are fetched whole
 * at mount and verified (docs/remote.md). */
#define STFS_REPO_SMALL_MAX (1u << 20)
/* Is a file called path (of size bytes) small: fetched whole at mount? */
int stfs_repo_is_small(const char *path, uint64_t size);
/* Every regular file under dir (symlinks followed only while they stay
 * under root, which may be wider than dir: the Hugging Face cache's
 * blobs): 0 or -errno. */
int stfs_rlist_walk(struct stfs_rlist *l, const char *dir, const char *root,
		    struct stfs_error *err);
void stfs_rlist_free(struct stfs_rlist *l);
/* l's files sorted by path, as *ix (l->n pointers into l, malloc'd; NULL
 * when l is empty), for stfs_rlist_find(): 0 or -ENOMEM. */
int stfs_rlist_index(const struct stfs_rlist *l,
		     const struct stfs_rfile ***ix);
/* The file at path in ix (n of them: stfs_rlist_index()), or NULL; of a
 * path listed twice, the last one listed. */
const struct stfs_rfile *stfs_rlist_find(const struct stfs_rfile **ix,
					 size_t n, const char *path);

/* f could not be fetched (rc, e: why): its fault says so (rlist.c). */
void stfs_rfile_unfetched(struct stfs_rfile *f, int rc,
			  const struct stfs_error *e);

#endif

/*
 * stfs/metrics.h: the counters of a mount, as libstfs offers them (a
 * header of its own beside stfs.h): an object its owner makes and frees,
 * that the remote layer of a model counts into when its options name it,
 * and its text in the Prometheus exposition format (docs/metrics.md says
 * what each metric answers).
 */
#ifndef STFS_METRICS_PUBLIC_H
#define STFS_METRICS_PUBLIC_H

#include <stddef.h>
#include <stdint.h>

#include "stfs/stfs.h"

#pragma GCC visibility push(default)

struct stfs_metrics;

/* The FUSE requests whose time is measured, by operation (other: the
 * rest). */
enum stfs_fuse_op {
	STFS_FUSE_LOOKUP, STFS_FUSE_GETATTR, STFS_FUSE_OPEN, STFS_FUSE_READ,
	STFS_FUSE_RELEASE, STFS_FUSE_READDIR, STFS_FUSE_GETXATTR,
	STFS_FUSE_LISTXATTR, STFS_FUSE_STATFS, STFS_FUSE_IOCTL,
	STFS_FUSE_OTHER, STFS_FUSE_OP_N
};

/* A new object, every counter 0; NULL when out of memory. */
struct stfs_metrics *stfs_metrics_new(void);
void stfs_metrics_free(struct stfs_metrics *m);
/* The remote layer of a model opened with o counts into m (NULL: it
 * counts nothing); m must outlive the model. */
void stfs_remote_opts_metrics(struct stfs_remote_opts *o,
			      struct stfs_metrics *m);
/* A FUSE request of operation op took ns; a read answered with an error
 * (err: a positive errno, or 0) is counted by its errno. */
void stfs_metrics_fuse(struct stfs_metrics *m, enum stfs_fuse_op op,
		       uint64_t ns, int err);
/* Take the gauges of r now (its cache's use and limit); r may be NULL,
 * then those last taken stay. */
void stfs_metrics_sample(struct stfs_metrics *m,
			 const struct stfs_remote *r);
/* The text of m (Prometheus text format 0.0.4, # HELP and # TYPE lines),
 * malloc'd and NUL terminated, *len bytes; NULL when out of memory. */
char *stfs_metrics_text(const struct stfs_metrics *m, size_t *len);

#pragma GCC visibility pop

#endif

/*
 * fs.h: the FUSE filesystem over a model (fs.c) and its settings.
 */
#ifndef STFS_FS_H
#define STFS_FS_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <sys/types.h>

#include "stfs/stfs.h"

/* Per-mount state, reached through fuse_req_userdata(). */
struct stfs_fs {
	struct stfs_model *model;
	uid_t uid;
	gid_t gid;
	mode_t umask;
	double timeout;           /* attr and entry cache, seconds */
	unsigned readahead_kb;    /* what to ask of the kernel at INIT */
	unsigned max_read;        /* the max_read= option, or 0 */
	int initialized;          /* INIT has reached .init */
	struct timespec mtime;    /* the source's */
	fuse_ino_t header_ino;    /* the reserved header file */
	uint64_t total_bytes;     /* of all tensors, for statfs */
	/* root xattrs: __metadata__ entries under escaped names, sorted */
	struct stfs_fs_meta *meta;
	size_t nmeta;
};

struct stfs_fs_meta {
	char *xname;              /* "user.safetensors.metadata.<key>" */
	const struct stfs_meta *m;
};

extern const struct fuse_lowlevel_ops stfs_ll_ops;

/* views.c: reply to a read of [off, off + size) of view v (not RAW) of
 * tensor t, whose bytes are at src in the map; size is within the view. */
void stfs_view_read(fuse_req_t req, const struct stfs_tensor *t,
		    enum stfs_view v, const unsigned char *src, uint64_t off,
		    size_t size);

/* Fill the derived fields of fs from fs->model: 0 or -ENOMEM. */
int stfs_fs_init(struct stfs_fs *fs);
void stfs_fs_destroy(struct stfs_fs *fs);

#endif

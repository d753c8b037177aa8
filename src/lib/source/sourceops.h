/*
 * sourceops.h: what a kind of byte source implements (struct
 * stfs_source_ops: local/local.c, http/http.c), which source.c calls on
 * behalf of the layers above; they see only source.h.
 */
#ifndef STFS_SOURCEOPS_H
#define STFS_SOURCEOPS_H

#include <stdint.h>

#include "source.h"

struct stfs_source_ops {
	void (*close)(struct stfs_source *s);
	/* Read exactly len bytes at off (within the size): 0 or -errno. */
	int (*read)(struct stfs_source *s, void *buf, size_t len,
		    uint64_t off);
	/* Start such a read and call done exactly once, now or later, from
	 * any thread.  NULL: read() then done(), before returning.  The read
	 * is part of the extent *ext (a tensor's bytes), a hint for what
	 * may be read next, or NULL. */
	void (*read_async)(struct stfs_source *s, void *buf, size_t len,
			   uint64_t off, const struct stfs_extent *ext,
			   stfs_source_done done, void *arg);
	/* The bytes [off, off + len) were served (copied to a reader or
	 * handed to the kernel): leave none of their pages in the page
	 * cache, where the mount's own file pages hold them now.  NULL:
	 * nothing to drop. */
	void (*drop)(struct stfs_source *s, uint64_t off, uint64_t len);
	/* A warm (`stfs prefetch`): what it needs to know, and block b
	 * brought into the cache (done called once).  NULL: a local file,
	 * nothing to warm. */
	int (*warm_info)(const struct stfs_source *s,
			 struct stfs_warm_info *wi);
	void (*warm)(struct stfs_source *s, uint64_t b,
		     stfs_source_done done, void *arg);
	/* wait until the blocks warmed are written; drop those queued */
	void (*warm_flush)(struct stfs_source *s);
	void (*warm_cancel)(struct stfs_source *s);
	/* next is read after s, from its start (a model's next shard): a
	 * reader going on to s's end may have next's first blocks fetched
	 * ahead of it; next NULL: no more.  NULL: nothing to do. */
	void (*follow)(struct stfs_source *s, struct stfs_source *next);
};

#endif

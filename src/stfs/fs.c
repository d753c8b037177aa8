/*
 * fs.c: the FUSE low-level operations of stfs.
 *
 * Inode numbers.  The tree (libstfs tree.c) is immutable while mounted, so
 * inode = tree node + 1 (the root is node 0, FUSE_ROOT_ID), and the
 * reserved header file is the one inode past the last node.  Nothing is
 * ever freed before unmount, so lookup counts need no bookkeeping and
 * forget is a no-op.  Numbers are stable across mounts of the same source
 * because the tree depends only on the set of names.
 *
 * Reads.  A tensor's bytes are replied straight out of the read-only map
 * of its shard (fuse_reply_buf writes from that memory to /dev/fuse): no
 * copy in userspace, and no page is touched before someone reads it.  If
 * the source shrinks while mounted, the kernel's copy from the mapping
 * fails with EFAULT and the reader gets EIO; the daemon never touches the
 * lost pages itself, so it cannot die of SIGBUS.  Files are opened with
 * keep_cache, since their bytes never change, and never with direct_io,
 * so mmap works.
 *
 * Views (.npy, .f32) are served by views.c.
 *
 * Everything that would write fails with EROFS (the mount is also "ro",
 * so the kernel usually answers before we are asked).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>

#include "fs.h"

#define XATTR_PREFIX "user.safetensors."
#define META_PREFIX XATTR_PREFIX "metadata."
#define LIST_MAX 65536     /* the kernel's XATTR_LIST_MAX */

static struct stfs_fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static const struct stfs_tree *tree_of(const struct stfs_fs *fs)
{
	return &fs->model->tree;
}

/* The node of an inode, or -1 for the header file, or -2 if unknown. */
static int64_t node_of(const struct stfs_fs *fs, fuse_ino_t ino)
{
	if (ino == fs->header_ino)
		return -1;
	if (ino < FUSE_ROOT_ID || ino - 1 >= tree_of(fs)->nnodes)
		return -2;
	return (int64_t)(ino - 1);
}

static const struct stfs_entry *entry_of(const struct stfs_fs *fs,
					 int64_t node)
{
	const struct stfs_node *n;

	if (node < 0)
		return NULL;
	n = &tree_of(fs)->nodes[node];
	return n->entry == STFS_NODE_DIR ? NULL : &fs->model->entries[n->entry];
}

/* ---- views ------------------------------------------------------------ */

static enum stfs_view view_of(const struct stfs_fs *fs, int64_t node)
{
	return (enum stfs_view)tree_of(fs)->nodes[node].view;
}

static uint64_t view_size(const struct stfs_fs *fs, int64_t node,
			  uint64_t *data_start)
{
	return stfs_view_size(entry_of(fs, node)->t, view_of(fs, node),
			      data_start);
}

static void fill_attr(const struct stfs_fs *fs, fuse_ino_t ino, int64_t node,
		      struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_atim = st->st_mtim = st->st_ctim = fs->mtime;
	st->st_blksize = 65536;
	if (node >= 0 && tree_of(fs)->nodes[node].entry == STFS_NODE_DIR) {
		st->st_mode = S_IFDIR | (0555 & ~fs->umask);
		st->st_nlink = 2 + tree_of(fs)->nodes[node].subdirs;
		return;
	}
	st->st_mode = S_IFREG | (0444 & ~fs->umask);
	st->st_nlink = 1;
	if (node < 0) {
		st->st_size = (off_t)fs->model->index_len;
	} else {
		st->st_size = (off_t)view_size(fs, node, NULL);
	}
	st->st_blocks = (st->st_size + 511) / 512;
}

static void stfs_ll_lookup(fuse_req_t req, fuse_ino_t parent,
			   const char *name)
{
	struct stfs_fs *fs = fs_of(req);
	struct fuse_entry_param e;
	int64_t dir = node_of(fs, parent), node;

	memset(&e, 0, sizeof(e));
	e.attr_timeout = fs->timeout;
	e.entry_timeout = fs->timeout;
	if (dir < 0) {
		fuse_reply_err(req, dir == -1 ? ENOTDIR : ENOENT);
		return;
	}
	if (parent == FUSE_ROOT_ID && strcmp(name, STFS_HEADER_FILE) == 0) {
		e.ino = fs->header_ino;
		fill_attr(fs, e.ino, -1, &e.attr);
		fuse_reply_entry(req, &e);
		return;
	}
	node = stfs_tree_lookup(tree_of(fs), (uint32_t)dir, name,
				strlen(name));
	if (node == -ENOENT) {
		/* ino 0: a cached negative entry */
		fuse_reply_entry(req, &e);
		return;
	}
	if (node < 0) {
		fuse_reply_err(req, (int)-node);
		return;
	}
	e.ino = (fuse_ino_t)node + 1;
	fill_attr(fs, e.ino, node, &e.attr);
	fuse_reply_entry(req, &e);
}

static void stfs_ll_getattr(fuse_req_t req, fuse_ino_t ino,
			    struct fuse_file_info *fi)
{
	struct stfs_fs *fs = fs_of(req);
	int64_t node = node_of(fs, ino);
	struct stat st;

	if (node == -2) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fill_attr(fs, ino, node, &st);
	fuse_reply_attr(req, &st, fs->timeout);
}

static void stfs_ll_opendir(fuse_req_t req, fuse_ino_t ino,
			    struct fuse_file_info *fi)
{
	struct stfs_fs *fs = fs_of(req);
	int64_t node = node_of(fs, ino);

	if (node == -2) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (node == -1 || entry_of(fs, node)) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

static void stfs_ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
			    off_t off, struct fuse_file_info *fi)
{
	struct stfs_fs *fs = fs_of(req);
	const struct stfs_tree *t = tree_of(fs);
	int64_t node = node_of(fs, ino);
	const struct stfs_node *d;
	size_t used = 0, total;
	char *buf;

	if (node < 0) {
		fuse_reply_err(req, node == -1 ? ENOTDIR : ENOENT);
		return;
	}
	d = &t->nodes[node];
	/* ".", "..", the children, and the header file in the root */
	total = 2 + (size_t)d->count + (node == 0);
	buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (size_t i = off < 0 ? 0 : (size_t)off; i < total; i++) {
		struct stat st = { 0 };
		const char *name;
		size_t n;

		if (i == 0) {
			name = ".";
			st.st_ino = ino;
			st.st_mode = S_IFDIR;
		} else if (i == 1) {
			name = "..";
			st.st_ino = (fuse_ino_t)d->parent + 1;
			st.st_mode = S_IFDIR;
		} else if (i - 2 < d->count) {
			uint32_t c = t->children[d->first + i - 2];
			name = t->nodes[c].name;
			st.st_ino = (fuse_ino_t)c + 1;
			st.st_mode = t->nodes[c].entry == STFS_NODE_DIR ?
				     S_IFDIR : S_IFREG;
		} else {
			name = STFS_HEADER_FILE;
			st.st_ino = fs->header_ino;
			st.st_mode = S_IFREG;
		}
		n = fuse_add_direntry(req, buf + used, size - used, name, &st,
				      (off_t)i + 1);
		if (n > size - used)
			break;
		used += n;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void stfs_ll_open(fuse_req_t req, fuse_ino_t ino,
			 struct fuse_file_info *fi)
{
	struct stfs_fs *fs = fs_of(req);
	int64_t node = node_of(fs, ino);

	if (node == -2) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (node >= 0 && !entry_of(fs, node)) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY ||
	    (fi->flags & (O_TRUNC | O_CREAT))) {
		fuse_reply_err(req, EROFS);
		return;
	}
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

static void stfs_ll_read(fuse_req_t req, fuse_ino_t ino, size_t size,
			 off_t off, struct fuse_file_info *fi)
{
	struct stfs_fs *fs = fs_of(req);
	int64_t node = node_of(fs, ino);
	const struct stfs_entry *e = NULL;
	const char *base;
	uint64_t len;

	if (node == -2) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (node == -1) {
		base = fs->model->index;
		len = fs->model->index_len;
	} else {
		e = entry_of(fs, node);
		if (!e) {
			fuse_reply_err(req, EISDIR);
			return;
		}
		base = (const char *)fs->model->files[e->file]->map +
		       stfs_entry_file_offset(fs->model, e);
		len = view_size(fs, node, NULL);
	}
	if (off < 0 || (uint64_t)off >= len) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > len - (uint64_t)off)
		size = (size_t)(len - (uint64_t)off);
	if (e && view_of(fs, node) != STFS_VIEW_RAW) {
		stfs_view_read(req, e->t, view_of(fs, node),
			       (const unsigned char *)base, (uint64_t)off,
			       size);
		return;
	}
	/* A failure here (EFAULT for a truncated source) has already
	 * ended the request with EIO in the kernel. */
	fuse_reply_buf(req, base + off, size);
}

/* ---- extended attributes -------------------------------------------- */

enum { X_DTYPE, X_SHAPE, X_OFFSETS, X_FILE_OFFSET, X_NAME, X_FILE, X_VIEW,
       X_SOURCE_DTYPE, X_DATA_START, X_COUNT };

static const char *const xnames[X_COUNT] = {
	XATTR_PREFIX "dtype",       XATTR_PREFIX "shape",
	XATTR_PREFIX "data_offsets", XATTR_PREFIX "file_offset",
	XATTR_PREFIX "name",        XATTR_PREFIX "file",
	XATTR_PREFIX "view",        XATTR_PREFIX "source_dtype",
	XATTR_PREFIX "data_start",
};

/* The xattrs a file node has, in listing order, into out; their count.
 * Offsets describe the tensor's own bytes, so views do not have them. */
static int xattrs_of(const struct stfs_fs *fs, int64_t node, int *out)
{
	int k = 0, raw = view_of(fs, node) == STFS_VIEW_RAW;

	out[k++] = X_DTYPE;
	out[k++] = X_SHAPE;
	if (raw) {
		out[k++] = X_OFFSETS;
		out[k++] = X_FILE_OFFSET;
	}
	out[k++] = X_NAME;
	if (fs->model->sharded)
		out[k++] = X_FILE;
	if (!raw) {
		out[k++] = X_VIEW;
		out[k++] = X_SOURCE_DTYPE;
		out[k++] = X_DATA_START;
	}
	return k;
}

/* Reply to a getxattr/listxattr with value v of len bytes. */
static void reply_value(fuse_req_t req, const char *v, size_t len,
			size_t size)
{
	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, v, len);
}

static int cmp_meta_name(const void *key, const void *elem)
{
	return strcmp(key, ((const struct stfs_fs_meta *)elem)->xname);
}

static void tensor_xattr(fuse_req_t req, const struct stfs_fs *fs,
			 int64_t node, int which, size_t size)
{
	const struct stfs_entry *e = entry_of(fs, node);
	const struct stfs_tensor *t = e->t;
	enum stfs_view v = view_of(fs, node);
	const char *dt = stfs_dtype_name(stfs_view_dtype(t, v));
	char small[64], *big = NULL;
	uint64_t start;
	size_t n;

	switch (which) {
	case X_DTYPE:
		reply_value(req, dt, strlen(dt), size);
		return;
	case X_SOURCE_DTYPE:
		dt = stfs_dtype_name(t->dtype);
		reply_value(req, dt, strlen(dt), size);
		return;
	case X_VIEW:
		dt = stfs_view_suffix(v) + 1;     /* "npy", "f32", "f32.npy" */
		reply_value(req, dt, strlen(dt), size);
		return;
	case X_DATA_START:
		view_size(fs, node, &start);
		n = (size_t)snprintf(small, sizeof(small), "%" PRIu64, start);
		reply_value(req, small, n, size);
		return;
	case X_SHAPE:
		n = stfs_shape_str(t, small, sizeof(small));
		if (n >= sizeof(small)) {
			big = malloc(n + 1);
			if (!big) {
				fuse_reply_err(req, ENOMEM);
				return;
			}
			stfs_shape_str(t, big, n + 1);
		}
		reply_value(req, big ? big : small, n, size);
		free(big);
		return;
	case X_OFFSETS:
		n = (size_t)snprintf(small, sizeof(small),
				     "[%" PRIu64 ",%" PRIu64 "]", t->begin,
				     t->end);
		reply_value(req, small, n, size);
		return;
	case X_FILE_OFFSET:
		n = (size_t)snprintf(small, sizeof(small), "%" PRIu64,
				     stfs_entry_file_offset(fs->model, e));
		reply_value(req, small, n, size);
		return;
	case X_NAME:
		reply_value(req, t->name, t->name_len, size);
		return;
	case X_FILE:
		reply_value(req, fs->model->file_names[e->file],
			    strlen(fs->model->file_names[e->file]), size);
		return;
	}
}

static void stfs_ll_getxattr(fuse_req_t req, fuse_ino_t ino,
			     const char *name, size_t size)
{
	struct stfs_fs *fs = fs_of(req);
	int64_t node = node_of(fs, ino);
	const struct stfs_entry *e = entry_of(fs, node);

	if (node == -2) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (e) {
		int xs[X_COUNT], nx = xattrs_of(fs, node, xs);

		for (int i = 0; i < nx; i++) {
			if (strcmp(name, xnames[xs[i]]) == 0) {
				tensor_xattr(req, fs, node, xs[i], size);
				return;
			}
		}
	} else if (node == 0) {
		const struct stfs_fs_meta *m;

		m = bsearch(name, fs->meta, fs->nmeta, sizeof(*fs->meta),
			    cmp_meta_name);
		if (m) {
			reply_value(req, m->m->value, m->m->value_len, size);
			return;
		}
	}
	fuse_reply_err(req, ENODATA);
}

static void stfs_ll_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct stfs_fs *fs = fs_of(req);
	int64_t node = node_of(fs, ino);
	char *buf = NULL;
	size_t len = 0;

	if (node == -2) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (entry_of(fs, node)) {
		int xs[X_COUNT], nx = xattrs_of(fs, node, xs);
		char list[512];

		for (int i = 0; i < nx; i++) {
			size_t n = strlen(xnames[xs[i]]) + 1;
			memcpy(list + len, xnames[xs[i]], n);
			len += n;
		}
		reply_value(req, list, len, size);
		return;
	}
	if (node == 0 && fs->nmeta) {
		buf = malloc(LIST_MAX);
		if (!buf) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		/* Past the kernel's list limit the rest is left out:
		 * the header file holds everything. */
		for (size_t i = 0; i < fs->nmeta; i++) {
			size_t n = strlen(fs->meta[i].xname) + 1;
			if (len + n > LIST_MAX)
				break;
			memcpy(buf + len, fs->meta[i].xname, n);
			len += n;
		}
	}
	reply_value(req, buf, len, size);
	free(buf);
}

static void stfs_ll_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct stfs_fs *fs = fs_of(req);
	struct statvfs sv;

	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = 4096;
	sv.f_frsize = 512;
	sv.f_blocks = (fs->total_bytes + 511) / 512;
	sv.f_files = tree_of(fs)->nnodes + 1;
	sv.f_namemax = STFS_NAME_MAX;
	sv.f_flag = ST_RDONLY;
	fuse_reply_statfs(req, &sv);
}

/* ---- everything that writes ------------------------------------------ */

static void stfs_ll_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *a,
			    int to_set, struct fuse_file_info *fi)
{
	fuse_reply_err(req, EROFS);
}

static void stfs_ll_mknod(fuse_req_t req, fuse_ino_t parent,
			  const char *name, mode_t mode, dev_t rdev)
{
	fuse_reply_err(req, EROFS);
}

static void stfs_ll_mkdir(fuse_req_t req, fuse_ino_t parent,
			  const char *name, mode_t mode)
{
	fuse_reply_err(req, EROFS);
}

static void stfs_ll_unlink(fuse_req_t req, fuse_ino_t parent,
			   const char *name)
{
	fuse_reply_err(req, EROFS);
}

static void stfs_ll_symlink(fuse_req_t req, const char *link,
			    fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, EROFS);
}

static void stfs_ll_rename(fuse_req_t req, fuse_ino_t parent,
			   const char *name, fuse_ino_t newparent,
			   const char *newname, unsigned int flags)
{
	fuse_reply_err(req, EROFS);
}

static void stfs_ll_link(fuse_req_t req, fuse_ino_t ino,
			 fuse_ino_t newparent, const char *newname)
{
	fuse_reply_err(req, EROFS);
}

static void stfs_ll_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
			  size_t size, off_t off, struct fuse_file_info *fi)
{
	fuse_reply_err(req, EROFS);
}

static void stfs_ll_setxattr(fuse_req_t req, fuse_ino_t ino,
			     const char *name, const char *value,
			     size_t size, int flags)
{
	fuse_reply_err(req, EROFS);
}

static void stfs_ll_removexattr(fuse_req_t req, fuse_ino_t ino,
				const char *name)
{
	fuse_reply_err(req, EROFS);
}

static void stfs_ll_create(fuse_req_t req, fuse_ino_t parent,
			   const char *name, mode_t mode,
			   struct fuse_file_info *fi)
{
	fuse_reply_err(req, EROFS);
}

static void stfs_ll_fallocate(fuse_req_t req, fuse_ino_t ino, int mode,
			      off_t offset, off_t length,
			      struct fuse_file_info *fi)
{
	fuse_reply_err(req, EROFS);
}

/*
 * INIT.  The kernel's read requests are as large as the mount's readahead.
 * At INIT the kernel lowers the mount's read_ahead_kb to what we answer
 * here if that is smaller, but never raises it; main.c raises it after
 * INIT (root only).  The answer here says what we want all the same.
 */
static void stfs_ll_init(void *userdata, struct fuse_conn_info *conn)
{
	struct stfs_fs *fs = userdata;

	if (fs->readahead_kb)
		conn->max_readahead = fs->readahead_kb * 1024;
	/* libfuse ends the session unless this equals the max_read= it was
	 * given (0 when none was) */
	conn->max_read = fs->max_read;
	fs->initialized = 1;
}

const struct fuse_lowlevel_ops stfs_ll_ops = {
	.init = stfs_ll_init,
	.lookup = stfs_ll_lookup,
	.getattr = stfs_ll_getattr,
	.opendir = stfs_ll_opendir,
	.readdir = stfs_ll_readdir,
	.open = stfs_ll_open,
	.read = stfs_ll_read,
	.getxattr = stfs_ll_getxattr,
	.listxattr = stfs_ll_listxattr,
	.statfs = stfs_ll_statfs,
	.setattr = stfs_ll_setattr,
	.mknod = stfs_ll_mknod,
	.mkdir = stfs_ll_mkdir,
	.unlink = stfs_ll_unlink,
	.rmdir = stfs_ll_unlink,
	.symlink = stfs_ll_symlink,
	.rename = stfs_ll_rename,
	.link = stfs_ll_link,
	.write = stfs_ll_write,
	.setxattr = stfs_ll_setxattr,
	.removexattr = stfs_ll_removexattr,
	.create = stfs_ll_create,
	.fallocate = stfs_ll_fallocate,
};

/* ---- setup ----------------------------------------------------------- */

static int cmp_fs_meta(const void *a, const void *b)
{
	return strcmp(((const struct stfs_fs_meta *)a)->xname,
		      ((const struct stfs_fs_meta *)b)->xname);
}

/* Is (key, value) in h's metadata?  (sorted by key, so a search) */
static int has_meta(const struct stfs_header *h, const struct stfs_meta *m)
{
	size_t lo = 0, hi = stfs_header_meta_count(h);

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct stfs_meta *x = stfs_header_meta(h, mid);
		int c = memcmp(x->key, m->key, x->key_len < m->key_len ?
			       x->key_len : m->key_len);
		if (!c)
			c = x->key_len < m->key_len ? -1 :
			    x->key_len > m->key_len;
		if (!c)
			return x->value_len == m->value_len &&
			       memcmp(x->value, m->value, m->value_len) == 0;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

/*
 * The root's xattrs: each __metadata__ entry of the source.  For shards,
 * the entries that every shard carries with the same value.
 */
int stfs_fs_init(struct stfs_fs *fs)
{
	const struct stfs_model *m = fs->model;
	const struct stfs_header *h0;

	fs->header_ino = (fuse_ino_t)m->tree.nnodes + 1;
	for (size_t i = 0; i < m->nentries; i++)
		fs->total_bytes += m->entries[i].t->end - m->entries[i].t->begin;
	if (m->nfiles == 0)
		return 0;
	for (size_t i = 0; i < m->nfiles; i++) {
		const struct stfs_file *f = m->files[i];

		if (i == 0 || f->mtime_sec > fs->mtime.tv_sec ||
		    (f->mtime_sec == fs->mtime.tv_sec &&
		     f->mtime_nsec > fs->mtime.tv_nsec)) {
			fs->mtime.tv_sec = (time_t)f->mtime_sec;
			fs->mtime.tv_nsec = f->mtime_nsec;
		}
	}
	h0 = m->files[0]->header;
	fs->meta = calloc(stfs_header_meta_count(h0) + 1, sizeof(*fs->meta));
	if (!fs->meta)
		return -ENOMEM;
	for (size_t k = 0; k < stfs_header_meta_count(h0); k++) {
		const struct stfs_meta *e = stfs_header_meta(h0, k);
		char esc[STFS_NAME_MAX + 1];
		size_t i;

		for (i = 1; i < m->nfiles; i++)
			if (!has_meta(m->files[i]->header, e))
				break;
		if (i < m->nfiles)
			continue;
		stfs_name_component(e->key, e->key_len, 0, esc);
		if (asprintf(&fs->meta[fs->nmeta].xname, "%s%s", META_PREFIX,
			     esc) < 0)
			return -ENOMEM;
		fs->meta[fs->nmeta++].m = e;
	}
	qsort(fs->meta, fs->nmeta, sizeof(*fs->meta), cmp_fs_meta);
	return 0;
}

void stfs_fs_destroy(struct stfs_fs *fs)
{
	for (size_t i = 0; i < fs->nmeta; i++)
		free(fs->meta[i].xname);
	free(fs->meta);
	fs->meta = NULL;
	fs->nmeta = 0;
}

/*
 * fs.c: the FUSE low-level operations of stfs.
 *
 * Inode numbers.  The model's tree is immutable while mounted, so inode =
 * node + 1 (the root is node 0, FUSE_ROOT_ID); the header file is a node
 * like any other.  Nothing is ever freed before unmount, so lookup counts
 * need no bookkeeping and forget is a no-op.  Numbers are stable across
 * mounts of the same source because the tree depends only on the set of
 * names.  Every operation on an inode starts with node_of(), which replies
 * ENOENT for an unknown one.
 *
 * Reads.  Opening a file takes its content from the model (a list of
 * segments) into fi->fh; a read hands the content's iovecs to the kernel
 * when they are ready (stfs_content_read), maybe later and from another
 * thread for a slow source.  A tensor of a local file is a pointer into
 * the source's map, so its bytes are never copied in userspace, and a
 * source truncated while mounted gives EIO, never SIGBUS (the kernel's
 * copy from the map fails with EFAULT).  Files are opened with
 * keep_cache, since their bytes never change, and never with direct_io,
 * so mmap works.  What a file holds (a tensor, a view, a header) is the
 * model's business: a new kind of file changes nothing here.
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
#include <sys/uio.h>
#include <sys/xattr.h>
#include <pthread.h>

#include "fs.h"

#define XATTR_PREFIX "user.safetensors."
#define META_PREFIX XATTR_PREFIX "metadata."
#define LIST_MAX 65536     /* the kernel's XATTR_LIST_MAX */

static struct stfs_fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* The node of ino into *ni: 1, or 0 after replying ENOENT. */
static int node_of(fuse_req_t req, fuse_ino_t ino, struct stfs_node_info *ni)
{
	struct stfs_fs *fs = fs_of(req);

	if (ino < FUSE_ROOT_ID || ino - 1 > UINT32_MAX ||
	    stfs_model_node(fs->model, (uint32_t)(ino - 1), ni) != 0) {
		fuse_reply_err(req, ENOENT);
		return 0;
	}
	return 1;
}

/* The attributes of ino: 0, or -errno (a virtual file's size needs its
 * header, which may not fit in memory). */
static int fill_attr(const struct stfs_fs *fs, fuse_ino_t ino,
		     const struct stfs_node_info *ni, struct stat *st)
{
	uint64_t size = 0;
	int rc;

	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_atim = st->st_mtim = st->st_ctim = fs->mtime;
	st->st_blksize = 65536;
	if (ni->kind == STFS_NODE_KIND_DIR) {
		st->st_mode = S_IFDIR | (0555 & ~fs->umask);
		st->st_nlink = 2 + ni->subdirs;
		return 0;
	}
	if ((rc = stfs_model_node_size(fs->model, (uint32_t)(ino - 1), &size)))
		return rc;
	st->st_mode = S_IFREG | (0444 & ~fs->umask);
	st->st_nlink = 1;
	st->st_size = (off_t)size;
	st->st_blocks = (st->st_size + 511) / 512;
	return 0;
}

static void stfs_ll_lookup(fuse_req_t req, fuse_ino_t parent,
			   const char *name)
{
	struct stfs_fs *fs = fs_of(req);
	struct fuse_entry_param e;
	struct stfs_node_info ni;
	int64_t node;
	int rc;

	if (!node_of(req, parent, &ni))
		return;
	memset(&e, 0, sizeof(e));
	e.attr_timeout = fs->timeout;
	e.entry_timeout = fs->timeout;
	node = stfs_model_lookup(fs->model, (uint32_t)(parent - 1), name,
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
	stfs_model_node(fs->model, (uint32_t)node, &ni);
	if ((rc = fill_attr(fs, e.ino, &ni, &e.attr)))
		fuse_reply_err(req, -rc);
	else
		fuse_reply_entry(req, &e);
}

static void stfs_ll_getattr(fuse_req_t req, fuse_ino_t ino,
			    struct fuse_file_info *fi)
{
	struct stfs_node_info ni;
	struct stat st;
	int rc;

	if (!node_of(req, ino, &ni))
		return;
	if ((rc = fill_attr(fs_of(req), ino, &ni, &st)))
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, fs_of(req)->timeout);
}

static void stfs_ll_opendir(fuse_req_t req, fuse_ino_t ino,
			    struct fuse_file_info *fi)
{
	struct stfs_node_info ni;

	if (!node_of(req, ino, &ni))
		return;
	if (ni.kind != STFS_NODE_KIND_DIR) {
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
	struct stfs_node_info d;
	size_t used = 0, total;
	char *buf;

	if (!node_of(req, ino, &d))
		return;
	if (d.kind != STFS_NODE_KIND_DIR) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	/* ".", "..", then the children */
	total = 2 + (size_t)d.children;
	buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (size_t i = off < 0 ? 0 : (size_t)off; i < total; i++) {
		struct stat st = { 0 };
		struct stfs_node_info c;
		const char *name;
		size_t n;

		if (i < 2) {
			name = i ? ".." : ".";
			st.st_ino = i ? (fuse_ino_t)d.parent + 1 : ino;
			st.st_mode = S_IFDIR;
		} else {
			int64_t k = stfs_model_child(fs->model,
						     (uint32_t)(ino - 1),
						     (uint32_t)(i - 2));
			stfs_model_node(fs->model, (uint32_t)k, &c);
			name = c.name;
			st.st_ino = (fuse_ino_t)k + 1;
			st.st_mode = c.kind == STFS_NODE_KIND_DIR ? S_IFDIR :
				     S_IFREG;
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

/*
 * Open files.  A handle holds a file's content from open to release; the
 * handles are listed, so that those still open when the session ends (no
 * RELEASE comes after an unmount) are freed too.
 */
struct stfs_fs_handle {
	struct stfs_content *content;
	struct stfs_fs_handle *prev, *next;
};

static struct stfs_fs_handle *handle_new(struct stfs_fs *fs,
					 struct stfs_content *c)
{
	struct stfs_fs_handle *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->content = c;
	pthread_mutex_lock(&fs->handles_mu);
	h->next = fs->handles;
	if (h->next)
		h->next->prev = h;
	fs->handles = h;
	pthread_mutex_unlock(&fs->handles_mu);
	return h;
}

static void handle_free(struct stfs_fs *fs, struct stfs_fs_handle *h)
{
	pthread_mutex_lock(&fs->handles_mu);
	if (h->prev)
		h->prev->next = h->next;
	else
		fs->handles = h->next;
	if (h->next)
		h->next->prev = h->prev;
	pthread_mutex_unlock(&fs->handles_mu);
	stfs_content_free(h->content);
	free(h);
}

/* A file that cannot be opened for a reason of its own: say why in the
 * log (the reader sees only the errno). */
static void log_refusal(const struct stfs_fs *fs, uint32_t node, int rc)
{
	char why[512], *path = stfs_model_node_path(fs->model, node);

	stfs_model_node_error(fs->model, node, rc, why, sizeof(why));
	fuse_log(FUSE_LOG_ERR, "stfs: %s: %s: %s\n",
		 stfs_model_source(fs->model), path ? path : "?", why);
	free(path);
}

static void stfs_ll_open(fuse_req_t req, fuse_ino_t ino,
			 struct fuse_file_info *fi)
{
	struct stfs_content *c = NULL;
	struct stfs_fs_handle *h = NULL;
	struct stfs_node_info ni;
	int rc;

	if (!node_of(req, ino, &ni))
		return;
	if (ni.kind == STFS_NODE_KIND_DIR) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY ||
	    (fi->flags & (O_TRUNC | O_CREAT))) {
		fuse_reply_err(req, EROFS);
		return;
	}
	rc = stfs_model_content(fs_of(req)->model, (uint32_t)(ino - 1), &c);
	if (rc == -EFBIG)
		log_refusal(fs_of(req), (uint32_t)(ino - 1), rc);
	if (rc || !(h = handle_new(fs_of(req), c))) {
		stfs_content_free(c);
		fuse_reply_err(req, rc ? -rc : ENOMEM);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)h;
	fi->keep_cache = 1;
	if (fuse_reply_open(req, fi) != 0)
		handle_free(fs_of(req), h);  /* interrupted: no release */
}

static void stfs_ll_release(fuse_req_t req, fuse_ino_t ino,
			    struct fuse_file_info *fi)
{
	handle_free(fs_of(req), (struct stfs_fs_handle *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

/* The content's bytes are ready: hand them to the kernel.  A failure here
 * (EFAULT for a truncated source) has already ended the request with EIO
 * in the kernel. */
static void read_done(void *arg, const struct iovec *iov, int n, int err)
{
	fuse_req_t req = arg;

	if (err)
		fuse_reply_err(req, -err);
	else if (n == 0)
		fuse_reply_buf(req, NULL, 0);
	else if (n == 1)
		fuse_reply_buf(req, iov[0].iov_base, iov[0].iov_len);
	else
		fuse_reply_iov(req, iov, n);
}

static void stfs_ll_read(fuse_req_t req, fuse_ino_t ino, size_t size,
			 off_t off, struct fuse_file_info *fi)
{
	const struct stfs_content *c =
		((struct stfs_fs_handle *)(uintptr_t)fi->fh)->content;

	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	stfs_content_read(c, (uint64_t)off, size, read_done, req);
}

/* ---- extended attributes -------------------------------------------- */

enum { X_DTYPE, X_SHAPE, X_OFFSETS, X_FILE_OFFSET, X_NAME, X_FILE, X_URL,
       X_ETAG, X_REPO, X_REVISION, X_VIEW, X_SOURCE_DTYPE, X_DATA_START,
       X_FORMAT, X_GGUF_TYPE, X_PYTORCH_TYPE, X_COUNT };

static const char *const xnames[X_COUNT] = {
	XATTR_PREFIX "dtype",       XATTR_PREFIX "shape",
	XATTR_PREFIX "data_offsets", XATTR_PREFIX "file_offset",
	XATTR_PREFIX "name",        XATTR_PREFIX "file",
	XATTR_PREFIX "url",         XATTR_PREFIX "etag",
	XATTR_PREFIX "repo",        XATTR_PREFIX "revision",
	XATTR_PREFIX "view",        XATTR_PREFIX "source_dtype",
	XATTR_PREFIX "data_start",
	/* tensors of other formats (docs/formats.md) */
	"user.stfs.format",         "user.gguf.type",
	"user.pytorch.type",
};

static const struct stfs_source *source_of(const struct stfs_fs *fs,
					    const struct stfs_node_info *ni)
{
	return stfs_file_source(stfs_model_file(fs->model,
		stfs_model_tensor_file(fs->model, ni->tensor)));
}

/* The URL of the object a tensor is in, or NULL for a local file. */
static const char *url_of(const struct stfs_fs *fs,
			  const struct stfs_node_info *ni)
{
	struct stfs_source_info si;

	stfs_source_info(source_of(fs, ni), &si);
	return si.url;
}

/* What the service says of a tensor's file (X_ETAG, X_REPO,
 * X_REVISION): the Hub's ETag, else the server's; or NULL. */
static const char *origin_of(const struct stfs_fs *fs,
			     const struct stfs_node_info *ni, int which)
{
	const struct stfs_source *s = source_of(fs, ni);
	struct stfs_source_info si;
	const char *v;

	switch (which) {
	case X_REPO:
		return stfs_source_origin(s, STFS_ORIGIN_REPO);
	case X_REVISION:
		return stfs_source_origin(s, STFS_ORIGIN_REVISION);
	default:
		if ((v = stfs_source_origin(s, STFS_ORIGIN_ETAG)) && *v)
			return v;
		stfs_source_info(s, &si);
		return si.url ? si.etag : NULL;
	}
}

/* The xattrs a tensor node has, in listing order, into out; their count.
 * Offsets describe the tensor's own bytes, so views do not have them. */
static int xattrs_of(const struct stfs_fs *fs, const struct stfs_node_info *ni,
		     int *out)
{
	int k = 0, raw = ni->view == STFS_VIEW_RAW;
	const struct stfs_tensor *t = stfs_model_tensor(fs->model, ni->tensor);
	const struct stfs_foreign *f = t->foreign;

	if (stfs_view_dtype(t, ni->view) != STFS_DTYPE_NONE)
		out[k++] = X_DTYPE;
	out[k++] = X_SHAPE;
	if (raw) {
		out[k++] = X_OFFSETS;
		out[k++] = X_FILE_OFFSET;
	}
	out[k++] = X_NAME;
	if (stfs_model_sharded(fs->model))
		out[k++] = X_FILE;
	if (url_of(fs, ni))
		out[k++] = X_URL;
	for (int x = X_ETAG; x <= X_REVISION; x++)
		if (origin_of(fs, ni, x))
			out[k++] = x;
	if (!raw) {
		out[k++] = X_VIEW;
		if (t->dtype != STFS_DTYPE_NONE)
			out[k++] = X_SOURCE_DTYPE;
		out[k++] = X_DATA_START;
	}
	if (f) {
		out[k++] = X_FORMAT;
		if (f->type && !strcmp(f->format, "gguf"))
			out[k++] = X_GGUF_TYPE;
		if (f->type && !strcmp(f->format, "pytorch"))
			out[k++] = X_PYTORCH_TYPE;
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
			 const struct stfs_node_info *ni, int which,
			 size_t size)
{
	const struct stfs_model *m = fs->model;
	const struct stfs_tensor *t = stfs_model_tensor(m, ni->tensor);
	enum stfs_view v = ni->view;
	const char *dt = stfs_dtype_name(stfs_view_dtype(t, v)), *file;
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
	case X_FORMAT:
		reply_value(req, t->foreign->format,
			    strlen(t->foreign->format), size);
		return;
	case X_GGUF_TYPE:
	case X_PYTORCH_TYPE:
		reply_value(req, t->foreign->type, strlen(t->foreign->type),
			    size);
		return;
	case X_DATA_START:
		stfs_view_size(t, v, &start);
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
				     stfs_model_tensor_offset(m, ni->tensor));
		reply_value(req, small, n, size);
		return;
	case X_NAME:
		reply_value(req, t->name, t->name_len, size);
		return;
	case X_FILE:
		file = stfs_model_file_name(m, stfs_model_tensor_file(m,
								ni->tensor));
		reply_value(req, file, strlen(file), size);
		return;
	case X_URL:
		file = url_of(fs, ni);
		reply_value(req, file, strlen(file), size);
		return;
	case X_ETAG:
	case X_REPO:
	case X_REVISION:
		file = origin_of(fs, ni, which);
		reply_value(req, file, strlen(file), size);
		return;
	}
}

static void stfs_ll_getxattr(fuse_req_t req, fuse_ino_t ino,
			     const char *name, size_t size)
{
	struct stfs_fs *fs = fs_of(req);
	struct stfs_node_info ni;

	if (!node_of(req, ino, &ni))
		return;
	if (ni.kind == STFS_NODE_KIND_TENSOR) {
		int xs[X_COUNT], nx = xattrs_of(fs, &ni, xs);

		for (int i = 0; i < nx; i++) {
			if (strcmp(name, xnames[xs[i]]) == 0) {
				tensor_xattr(req, fs, &ni, xs[i], size);
				return;
			}
		}
	} else if (ino == FUSE_ROOT_ID) {
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
	struct stfs_node_info ni;
	char *buf = NULL;
	size_t len = 0;

	if (!node_of(req, ino, &ni))
		return;
	if (ni.kind == STFS_NODE_KIND_TENSOR) {
		int xs[X_COUNT], nx = xattrs_of(fs, &ni, xs);
		char list[512];

		for (int i = 0; i < nx; i++) {
			size_t n = strlen(xnames[xs[i]]) + 1;
			memcpy(list + len, xnames[xs[i]], n);
			len += n;
		}
		reply_value(req, list, len, size);
		return;
	}
	if (ino == FUSE_ROOT_ID && fs->nmeta) {
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
	sv.f_files = stfs_model_node_count(fs->model);
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
	.release = stfs_ll_release,
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

/*
 * The mount's times (the newest source's), its size for statfs, and the
 * root's xattrs: each shared __metadata__ entry, under its key escaped as
 * a path component.
 */
int stfs_fs_init(struct stfs_fs *fs)
{
	const struct stfs_model *m = fs->model;
	size_t nmeta = stfs_model_meta_count(m);

	for (size_t i = 0; i < stfs_model_tensor_count(m); i++) {
		const struct stfs_tensor *t = stfs_model_tensor(m, i);
		fs->total_bytes += t->end - t->begin;
	}
	for (size_t i = 0; i < stfs_model_file_count(m); i++) {
		struct stfs_source_info si;

		stfs_source_info(stfs_file_source(stfs_model_file(m, i)), &si);
		if (i == 0 || si.mtime_sec > fs->mtime.tv_sec ||
		    (si.mtime_sec == fs->mtime.tv_sec &&
		     si.mtime_nsec > fs->mtime.tv_nsec)) {
			fs->mtime.tv_sec = (time_t)si.mtime_sec;
			fs->mtime.tv_nsec = si.mtime_nsec;
		}
	}
	fs->meta = calloc(nmeta + 1, sizeof(*fs->meta));
	if (!fs->meta)
		return -ENOMEM;
	for (size_t k = 0; k < nmeta; k++) {
		const struct stfs_meta *e = stfs_model_meta(m, k);
		char esc[STFS_NAME_MAX + 1];

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
	while (fs->handles)
		handle_free(fs, fs->handles);
	for (size_t i = 0; i < fs->nmeta; i++)
		free(fs->meta[i].xname);
	free(fs->meta);
	fs->meta = NULL;
	fs->nmeta = 0;
}

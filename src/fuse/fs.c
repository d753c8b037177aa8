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
 * so mmap works and re-reads never reach the daemon; the content drops
 * the source's pages once served, so the bytes are cached once (see
 * docs/design.md).  What a file holds (a tensor, a view, a header) is the
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
#include <pthread.h>

#include "fs.h"


struct stfs_fs *stfs_fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* The node of ino into *ni: 1, or 0 after replying ENOENT. */
int stfs_fs_node(fuse_req_t req, fuse_ino_t ino, struct stfs_node_info *ni)
{
	struct stfs_fs *fs = stfs_fs_of(req);

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
	/* a remote file's reads are best made in blocks */
	st->st_blksize = fs->blksize;
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
	struct stfs_fs *fs = stfs_fs_of(req);
	struct fuse_entry_param e;
	struct stfs_node_info ni;
	int64_t node;
	int rc;

	if (!stfs_fs_node(req, parent, &ni))
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

	if (!stfs_fs_node(req, ino, &ni))
		return;
	if ((rc = fill_attr(stfs_fs_of(req), ino, &ni, &st)))
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, stfs_fs_of(req)->timeout);
}

static void stfs_ll_opendir(fuse_req_t req, fuse_ino_t ino,
			    struct fuse_file_info *fi)
{
	struct stfs_node_info ni;

	if (!stfs_fs_node(req, ino, &ni))
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
	struct stfs_fs *fs = stfs_fs_of(req);
	struct stfs_node_info d;
	size_t used = 0, total;
	char *buf;

	if (!stfs_fs_node(req, ino, &d))
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
	struct stfs_verify *verify;     /* a whole read checked, or NULL */
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
	stfs_verify_free(h->verify);
	free(h);
}

/* A file that cannot be opened for a reason of its own: say why in the
 * log (the reader sees only the errno). */
static void log_refusal(const struct stfs_fs *fs, uint32_t node, int rc)
{
	char why[512], q[600], *path = stfs_model_node_path(fs->model, node);

	stfs_model_node_error(fs->model, node, rc, why, sizeof(why));
	fuse_log(FUSE_LOG_ERR, "stfs: %s: %s: %s\n",
		 stfs_model_source(fs->model), path ? stfs_quote(path,
		 strlen(path), q, sizeof(q)) : "?", why);
	free(path);
}

static void stfs_ll_open(fuse_req_t req, fuse_ino_t ino,
			 struct fuse_file_info *fi)
{
	struct stfs_content *c = NULL;
	struct stfs_fs_handle *h = NULL;
	struct stfs_node_info ni;
	int rc;

	if (!stfs_fs_node(req, ino, &ni))
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
	rc = stfs_model_content(stfs_fs_of(req)->model, (uint32_t)(ino - 1), &c);
	if (rc == -EFBIG || rc == -EIO)
		log_refusal(stfs_fs_of(req), (uint32_t)(ino - 1), rc);
	if (rc || !(h = handle_new(stfs_fs_of(req), c))) {
		stfs_content_free(c);
		fuse_reply_err(req, rc ? -rc : ENOMEM);
		return;
	}
	/* a %repo/ file with a published sha256: checked when read whole */
	h->verify = stfs_verify_new(stfs_fs_of(req)->model, (uint32_t)(ino - 1));
	fi->fh = (uint64_t)(uintptr_t)h;
	fi->keep_cache = 1;
	if (fuse_reply_open(req, fi) != 0)
		handle_free(stfs_fs_of(req), h);  /* interrupted: no release */
}

static void stfs_ll_release(fuse_req_t req, fuse_ino_t ino,
			    struct fuse_file_info *fi)
{
	handle_free(stfs_fs_of(req), (struct stfs_fs_handle *)(uintptr_t)fi->fh);
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

/* A read of a file checked as it is read whole (stfs_verify_feed). */
struct vread {
	fuse_req_t req;
	struct stfs_fs_handle *h;
	uint32_t node;
	uint64_t off;
};

static void read_verify_done(void *arg, const struct iovec *iov, int n,
			     int err)
{
	struct vread *r = arg;
	struct stfs_fs *fs = stfs_fs_of(r->req);
	char why[512], q[600], *path;

	if (!err && stfs_verify_feed(r->h->verify, r->off, iov, n, why,
				     sizeof(why))) {
		path = why[0] ? stfs_model_node_path(fs->model, r->node) :
				NULL;
		if (why[0])
			fuse_log(FUSE_LOG_ERR, "stfs: %s: %s: %s\n",
				 stfs_model_source(fs->model), path ?
				 stfs_quote(path, strlen(path), q, sizeof(q)) :
				 "?", why);
		free(path);
		err = -EIO;
	}
	read_done(r->req, iov, n, err);
	free(r);
}

static void stfs_ll_read(fuse_req_t req, fuse_ino_t ino, size_t size,
			 off_t off, struct fuse_file_info *fi)
{
	struct stfs_fs_handle *h = (struct stfs_fs_handle *)(uintptr_t)fi->fh;
	struct vread *r;

	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (!h->verify) {
		stfs_content_read(h->content, (uint64_t)off, size, read_done,
				  req);
		return;
	}
	if (!(r = malloc(sizeof(*r)))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	*r = (struct vread){ req, h, (uint32_t)(ino - 1), (uint64_t)off };
	stfs_content_read(h->content, (uint64_t)off, size, read_verify_done,
			  r);
}

static void stfs_ll_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct stfs_fs *fs = stfs_fs_of(req);
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
	/* the kernel's asynchronous reads (readahead, O_DIRECT) in the
	 * daemon at once: its default, 12, held the 13th reader in the
	 * kernel, unseen, while 12 sat out a Retry-After, and a read's bound
	 * (retries x 30 s, counted from when it reaches the daemon) ended
	 * 30 s late; the congestion threshold (when readahead holds back)
	 * stays the kernel's */
	conn->max_background = STFS_FS_MAX_BACKGROUND;
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
	.getxattr = stfs_xattr_get,
	.listxattr = stfs_xattr_list,
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
	.ioctl = stfs_prefetch_ioctl,
};

/* ---- setup ----------------------------------------------------------- */

/*
 * The mount's times (the newest source's), its size for statfs, its
 * files' st_blksize (a remote source's block size), and the root's
 * xattrs (xattr.c).
 */
int stfs_fs_init(struct stfs_fs *fs)
{
	const struct stfs_model *m = fs->model;
	size_t block = stfs_model_block_size(m);

	fs->blksize = block ? (blksize_t)block : 65536;

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
	return stfs_xattr_init(fs);
}

void stfs_fs_destroy(struct stfs_fs *fs)
{
	/* the model is closed before the handles (mount.c: its reads in
	 * flight point into their contents): their whole-read checks let go
	 * of it first (an open file with bytes held at unmount wrote into
	 * the freed model, found by ASan in test_hub_lfs_whole) */
	for (struct stfs_fs_handle *h = fs->handles; h && !fs->model;
	     h = h->next)
		stfs_verify_detach(h->verify);
	while (fs->handles)
		handle_free(fs, fs->handles);
	stfs_xattr_destroy(fs);
	stfs_fsmetrics_free(fs);
}

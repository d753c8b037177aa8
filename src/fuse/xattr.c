/*
 * xattr.c: the extended attributes of a mount: each tensor file's
 * (user.safetensors.dtype, shape, offsets, name, where its bytes come
 * from, its view and foreign format), the root's, one per shared
 * __metadata__ entry, the state of its warm (user.stfs.prefetch.*,
 * prefetch.c; read by name, not listed), and user.stfs.revision of %repo/
 * and its files.  Listing and reading them never touches a source.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "fs.h"

#define XATTR_PREFIX "user.safetensors."
#define META_PREFIX XATTR_PREFIX "metadata."
#define LIST_MAX 65536     /* the kernel's XATTR_LIST_MAX */
#define REVISION "user.stfs.revision"   /* %repo/ and its files */

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

void stfs_xattr_get(fuse_req_t req, fuse_ino_t ino,
			     const char *name, size_t size)
{
	struct stfs_fs *fs = stfs_fs_of(req);
	struct stfs_node_info ni;
	const char *rev;

	if (!stfs_fs_node(req, ino, &ni))
		return;
	rev = stfs_model_node_revision(fs->model, (uint32_t)(ino - 1));
	if (rev && strcmp(name, REVISION) == 0) {
		reply_value(req, rev, strlen(rev), size);
		return;
	}
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
		char pf[2048];
		int n;

		if (m) {
			reply_value(req, m->m->value, m->m->value_len, size);
			return;
		}
		if (stfs_fsmetrics_xattr(req, fs, name, size))
			return;
		if ((n = stfs_prefetch_value(fs, name, pf, sizeof(pf))) >= 0) {
			reply_value(req, pf, (size_t)n, size);
			return;
		}
	}
	fuse_reply_err(req, ENODATA);
}

void stfs_xattr_list(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct stfs_fs *fs = stfs_fs_of(req);
	struct stfs_node_info ni;
	char *buf = NULL;
	size_t len = 0;

	if (!stfs_fs_node(req, ino, &ni))
		return;
	if (stfs_model_node_revision(fs->model, (uint32_t)(ino - 1))) {
		reply_value(req, REVISION, sizeof(REVISION), size);
		return;
	}
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

static int cmp_fs_meta(const void *a, const void *b)
{
	return strcmp(((const struct stfs_fs_meta *)a)->xname,
		      ((const struct stfs_fs_meta *)b)->xname);
}

/*
 * The root's xattrs: each shared __metadata__ entry, under its key escaped
 * as a path component, sorted for bsearch.  0 or -ENOMEM.
 */
int stfs_xattr_init(struct stfs_fs *fs)
{
	const struct stfs_model *m = fs->model;
	size_t nmeta = stfs_model_meta_count(m);

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

void stfs_xattr_destroy(struct stfs_fs *fs)
{
	for (size_t i = 0; i < fs->nmeta; i++)
		free(fs->meta[i].xname);
	free(fs->meta);
	fs->meta = NULL;
	fs->nmeta = 0;
}

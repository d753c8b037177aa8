/*
 * rlist.c: the list of every file of a source's repository (the model
 * layer's %repo/ shows them), as the locators fill it: a local directory
 * walked here, the Hub's tree and S3's listing in their rooms; the rules
 * a path must keep to be shown, which files are small (fetched whole at
 * mount), and a small file's fault when it could not be fetched.  It
 * uses no other room: the locator and the services all fill it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format.h"
#include "source.h"
#include "rlist.h"

#define WALK_DEPTH 64

int stfs_rlist_push(struct stfs_rlist *l, const char *path, uint64_t size,
		    const char *sum, const char *left_out)
{
	struct stfs_rfile *f;

	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		if (!(f = realloc(l->f, cap * sizeof(*f))))
			return -ENOMEM;
		l->f = f;
		l->cap = cap;
	}
	f = &l->f[l->n];
	memset(f, 0, sizeof(*f));
	f->size = size;
	f->left_out = left_out;
	if (!(f->path = strdup(path)) || (sum && !(f->sum = strdup(sum)))) {
		free(f->path);
		return -ENOMEM;
	}
	l->n++;
	return 0;
}

void stfs_rlist_free(struct stfs_rlist *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->f[i].path);
		free(l->f[i].sum);
		free(l->f[i].revision);
		free(l->f[i].bytes);
		free(l->f[i].fault);
	}
	free(l->f);
	memset(l, 0, sizeof(*l));
}

/* By path, then by place in the list (a path listed twice: the last
 * one last). */
static int by_path(const void *a, const void *b)
{
	const struct stfs_rfile *x = *(const struct stfs_rfile *const *)a;
	const struct stfs_rfile *y = *(const struct stfs_rfile *const *)b;
	int c = strcmp(x->path, y->path);

	return c ? c : (x > y) - (x < y);
}

int stfs_rlist_index(const struct stfs_rlist *l,
		     const struct stfs_rfile ***ix)
{
	const struct stfs_rfile **v;

	*ix = NULL;
	if (!l->n)
		return 0;
	if (!(v = malloc(l->n * sizeof(*v))))
		return -ENOMEM;
	for (size_t i = 0; i < l->n; i++)
		v[i] = &l->f[i];
	qsort(v, l->n, sizeof(*v), by_path);
	*ix = v;
	return 0;
}

const struct stfs_rfile *stfs_rlist_find(const struct stfs_rfile **ix,
					 size_t n, const char *path)
{
	size_t lo = 0, hi = n;

	/* the first entry past path's: the last of path's is before it */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(ix[mid]->path, path) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && !strcmp(ix[lo - 1]->path, path) ? ix[lo - 1] : NULL;
}

const char *stfs_repo_path_bad(const char *path)
{
	const char *c = path;

	if (!*path)
		return "an empty name";
	if (strlen(path) > STFS_REPO_PATH_MAX)
		return "a path over 4096 bytes";
	for (;;) {
		size_t n = strcspn(c, "/");

		if (!n)
			return "an empty component (or a leading '/')";
		if (n > STFS_NAME_MAX)
			return "a name over 255 bytes";
		if ((n == 1 && c[0] == '.') ||
		    (n == 2 && c[0] == '.' && c[1] == '.'))
			return "a component \".\" or \"..\"";
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)c[i] < 0x20 || c[i] == 0x7f)
				return "a control byte in a name";
		if (!c[n])
			return NULL;
		c += n + 1;
	}
}

/* Weight formats: never small, whatever their size. */
static const char *const weights[] = {
	".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".ggml",
	".onnx", ".onnx_data", "_data", ".h5", ".msgpack", ".npz", ".npy",
	".pb", ".tflite", ".ot", ".mlmodel", ".pkl", ".joblib", ".keras",
	".tar", ".zip", ".gz", ".zst", ".pte",
};

int stfs_repo_is_small(const char *path, uint64_t size)
{
	if (size > STFS_REPO_SMALL_MAX)
		return 0;
	for (size_t i = 0; i < sizeof(weights) / sizeof(*weights); i++)
		if (stfs_ends_with(path, weights[i]))
			return 0;
	return 1;
}

/* ---- a local directory ---------------------------------------------------- */

static int is_under(const char *p, const char *root)
{
	size_t n = strlen(root);

	return !strncmp(p, root, n) && (p[n] == '/' || !p[n] ||
					(n && root[n - 1] == '/'));
}

/* One entry of a walk: rel is its path in the repository. */
static int walk_one(struct stfs_rlist *l, const char *full, const char *rel,
		    const char *root, int depth, struct stfs_error *err);

static int walk_dir(struct stfs_rlist *l, const char *dir, const char *rel,
		    const char *root, int depth, struct stfs_error *err)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int rc = 0;

	if (!d)
		return stfs_fail(err, -errno, NULL, STFS_NO_OFFSET,
				 "cannot open directory %s: %s", dir,
				 strerror(errno));
	while (!rc && (de = readdir(d))) {
		char *full = NULL, *r = NULL;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (asprintf(&full, "%s/%s", dir, de->d_name) < 0 ||
		    asprintf(&r, "%s%s%s", rel, *rel ? "/" : "",
			     de->d_name) < 0) {
			free(full);
			closedir(d);
			return -ENOMEM;
		}
		rc = walk_one(l, full, r, root, depth, err);
		free(full);
		free(r);
	}
	closedir(d);
	return rc;
}

static int walk_one(struct stfs_rlist *l, const char *full, const char *rel,
		    const char *root, int depth, struct stfs_error *err)
{
	struct stat st;
	char *real;
	int rc;

	if (lstat(full, &st) != 0)
		return stfs_rlist_push(l, rel, 0, NULL, "cannot be read");
	if (S_ISDIR(st.st_mode))
		return depth >= WALK_DEPTH ?
		       stfs_rlist_push(l, rel, 0, NULL, "folders nested over "
				       "64 deep") :
		       walk_dir(l, full, rel, root, depth + 1, err);
	if (S_ISLNK(st.st_mode)) {
		if (!(real = realpath(full, NULL)) || !is_under(real, root) ||
		    stat(real, &st) != 0 || !S_ISREG(st.st_mode)) {
			free(real);
			return stfs_rlist_push(l, rel, 0, NULL, "a symbolic link "
					       "that leaves the directory (or "
					       "is not to a regular file)");
		}
		free(real);
	}
	if (!S_ISREG(st.st_mode))
		return stfs_rlist_push(l, rel, 0, NULL, "not a regular file");
	if ((rc = stfs_rlist_push(l, rel, (uint64_t)st.st_size, NULL,
				  stfs_repo_path_bad(rel))))
		return rc;
	if (asprintf(&l->f[l->n - 1].revision, "%" PRId64 ".%09ld",
		     (int64_t)st.st_mtim.tv_sec, st.st_mtim.tv_nsec) < 0) {
		l->f[l->n - 1].revision = NULL;
		return -ENOMEM;
	}
	return 0;
}

int stfs_rlist_walk(struct stfs_rlist *l, const char *dir, const char *root,
		    struct stfs_error *err)
{
	char *rdir = realpath(dir, NULL), *rroot = realpath(root, NULL);
	int rc;

	if (!rdir || !rroot) {
		rc = stfs_fail(err, -errno, NULL, STFS_NO_OFFSET, "%s: %s",
			       dir, strerror(errno));
	} else {
		rc = walk_dir(l, rdir, "", rroot, 0, err);
		if (rc == -ENOMEM)
			rc = stfs_fail(err, rc, NULL, STFS_NO_OFFSET,
				       "out of memory");
	}
	free(rdir);
	free(rroot);
	l->listed = 1;
	return rc;
}

void stfs_rfile_unfetched(struct stfs_rfile *f, int rc,
			  const struct stfs_error *e)
{
	if (asprintf(&f->fault, "cannot be fetched: %s", e->msg[0] ? e->msg :
		     rc == -EFBIG ? "the server has more bytes than listed" :
		     strerror(-rc)) < 0)
		f->fault = NULL;
}

/*
 * repo.c: %repo/, the source's repository as frameworks open it: every
 * file the locator listed (a local directory's regular files, every file
 * of a Hub commit, every object under an S3 prefix; else the model's own
 * files) under its own path, with its folders, its size from the listing,
 * read-only.  A file the model opened as a shard is read through that
 * very source (one map, one cached block, one fetch); a small file of a
 * remote source is served from the bytes fetched and verified at mount;
 * any other is opened when first opened and kept until unmount.
 *
 * Paths that cannot be shown (a component "..", a control byte, a name
 * over 255 bytes, over 4096 in all), two that differ only in ASCII case
 * or Unicode normalization (NFC and NFD "café", format/unorm.c),
 * a path that is both a file and a folder, and with -o repo one under
 * %tensors (the tensors' folder at the root) are left out with a
 * warning; `stfs inspect --files` says why.
 *
 * Nodes: k = 0 is %repo/ itself, then its folders and files in path
 * order (preorder), each folder's children sorted by name.  This file
 * builds them at mount; repo_nodes.c serves them.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format.h"
#include "content.h"
#include "model.h"
#include "repo.h"

#define ROUNDS 8


/* Paths in component order: '/' before every other byte, so that a
 * folder's files come right after it and siblings sort by name. */
static int cmp_path(const char *a, const char *b)
{
	for (;; a++, b++) {
		unsigned char x = *a == '/' ? 1 : (unsigned char)*a;
		unsigned char y = *b == '/' ? 1 : (unsigned char)*b;

		if (x != y || !x)
			return (x > y) - (x < y);
	}
}

struct sorter {
	const struct stfs_rlist *l;
	size_t *idx;
	size_t n;
};

static int cmp_idx(const void *x, const void *y, void *arg)
{
	const struct stfs_rlist *l = arg;

	return cmp_path(l->f[*(const size_t *)x].path,
			l->f[*(const size_t *)y].path);
}

static int add_node(struct stfs_repo *r, uint32_t parent, int64_t file,
		    const char *name, size_t len)
{
	struct rnode *n;

	if (r->n == r->cap) {
		uint32_t cap = r->cap ? 2 * r->cap : 64;
		if (!(n = realloc(r->nodes, cap * sizeof(*n))))
			return -ENOMEM;
		r->nodes = n;
		r->cap = cap;
	}
	n = &r->nodes[r->n];
	memset(n, 0, sizeof(*n));
	n->parent = parent;
	n->file = file;
	n->name_len = (uint16_t)len;
	if (!(n->name = strndup(name, len)))
		return -ENOMEM;
	r->n++;
	return 0;
}

static void drop_nodes(struct stfs_repo *r)
{
	for (uint32_t i = 0; i < r->n; i++)
		free(r->nodes[i].name);
	free(r->children);
	r->children = NULL;
	r->n = 0;
}

/* The last child made under dir, or 0 (none). */
static uint32_t last_child(const struct stfs_repo *r, uint32_t dir)
{
	for (uint32_t i = r->n; i-- > dir + 1;)
		if (r->nodes[i].parent == dir)
			return i;
	return 0;
}

/* Place file j (path p) under the folders it names: 0, 1 if it clashes
 * with a file or folder placed before (left out), or -ENOMEM. */
static int place(struct stfs_repo *r, uint32_t *stack, size_t *depth,
		 size_t j, const char *p)
{
	size_t d = 1;                   /* stack[0]: %repo/ */
	const char *c = p;

	for (;;) {
		size_t len = strcspn(c, "/");
		uint32_t top = stack[d - 1], last;

		if (d < *depth && r->nodes[stack[d]].name_len == len &&
		    !memcmp(r->nodes[stack[d]].name, c, len) && c[len]) {
			d++;
			c += len + 1;
			continue;
		}
		*depth = d;             /* leave the folders we are past */
		last = last_child(r, top);
		if (last && r->nodes[last].name_len == len &&
		    !memcmp(r->nodes[last].name, c, len))
			return 1;       /* a file and a folder, or twice */
		if (!c[len])
			return add_node(r, top, (int64_t)j, c, len);
		if (add_node(r, top, -1, c, len))
			return -ENOMEM;
		stack[(*depth)++] = r->n - 1;
		d = *depth;
		c += len + 1;
	}
}

/* Children arrays from the parents (preorder keeps each sorted). */
static int link_children(struct stfs_repo *r)
{
	uint32_t *fill;

	if (!(r->children = calloc(r->n + 1, sizeof(*r->children))) ||
	    !(fill = calloc(r->n + 1, sizeof(*fill))))
		return -ENOMEM;
	for (uint32_t i = 1; i < r->n; i++) {
		r->nodes[r->nodes[i].parent].count++;
		if (r->nodes[i].file < 0)
			r->nodes[r->nodes[i].parent].subdirs++;
	}
	for (uint32_t i = 0, at = 0; i < r->n; i++) {
		r->nodes[i].first = at;
		at += r->nodes[i].count;
	}
	for (uint32_t i = 1; i < r->n; i++) {
		struct rnode *p = &r->nodes[r->nodes[i].parent];
		r->children[p->first + fill[r->nodes[i].parent]++] = i;
	}
	free(fill);
	return 0;
}

/* Leave out every file at or under node k's path. */
static void leave_out(struct stfs_repo *r, struct stfs_rlist *l, uint32_t k,
		      const char *why)
{
	if (r->nodes[k].file >= 0) {
		l->f[r->nodes[k].file].left_out = why;
		return;
	}
	for (uint32_t i = 0; i < r->nodes[k].count; i++)
		leave_out(r, l, r->children[r->nodes[k].first + i], why);
}

static int cmp_key(const void *x, const void *y, void *arg)
{
	char **keys = arg;
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
	int c = strcmp(keys[a], keys[b]);

	return c ? c : (a > b) - (a < b);
}

/* Two children of a folder whose names are one name to a file system
 * that folds ASCII case or normalizes Unicode (equal but for ASCII case,
 * or canonically equivalent: NFC and NFD "café"): the later is left out.
 * 1 if one was, 0 if none, -ENOMEM. */
static int case_clash(struct stfs_repo *r, struct stfs_rlist *l)
{
	uint32_t *tmp = malloc((r->n + 1) * sizeof(*tmp));
	char **keys = calloc(r->n + 1, sizeof(*keys));
	int found = 0;

	for (uint32_t i = 1; tmp && keys && i < r->n; i++)
		if (!(keys[i] = stfs_name_key(r->nodes[i].name,
					      r->nodes[i].name_len)))
			found = -ENOMEM;
	if (!tmp || !keys)
		found = -ENOMEM;
	for (uint32_t d = 0; !found && d < r->n; d++) {
		const struct rnode *dn = &r->nodes[d];

		if (dn->file >= 0 || dn->count < 2)
			continue;
		memcpy(tmp, r->children + dn->first, dn->count * sizeof(*tmp));
		qsort_r(tmp, dn->count, sizeof(*tmp), cmp_key, keys);
		for (uint32_t a = 1; a < dn->count; a++) {
			if (strcmp(keys[tmp[a - 1]], keys[tmp[a]]))
				continue;
			leave_out(r, l, tmp[a], !strcasecmp(
				  r->nodes[tmp[a - 1]].name,
				  r->nodes[tmp[a]].name) ? "its path differs "
				  "from another's only in case" : "its path "
				  "is another's under Unicode normalization "
				  "(NFC and NFD) or case");
			found = 1;
		}
	}
	for (uint32_t i = 0; keys && i < r->n; i++)
		free(keys[i]);
	free(keys);
	free(tmp);
	return found;
}

/* One round: the tree of the files not left out.  0, 1 if a clash left
 * some out (build again), -ENOMEM. */
static int build_round(struct stfs_repo *r, struct stfs_rlist *l,
		       const size_t *idx)
{
	uint32_t stack[STFS_REPO_PATH_MAX / 2 + 2];
	size_t depth = 1;
	int again = 0, rc;

	drop_nodes(r);
	if (add_node(r, 0, -1, STFS_REPO_DIR, strlen(STFS_REPO_DIR)))
		return -ENOMEM;
	stack[0] = 0;
	for (size_t i = 0; i < l->n; i++) {
		struct stfs_rfile *f = &l->f[idx[i]];

		if (f->left_out)
			continue;
		if ((rc = place(r, stack, &depth, idx[i], f->path)) < 0)
			return rc;
		if (rc) {
			f->left_out = "its path is also a folder's (or "
				      "listed twice)";
			again = 1;
		}
	}
	if (link_children(r) || (rc = case_clash(r, l)) < 0)
		return -ENOMEM;
	return rc || again;
}

/* Keep the files the globs select; a glob that selects none is an
 * error. */
static int select_files(struct stfs_rlist *l, const struct stfs_model_opts *o,
			struct stfs_error *err)
{
	char q[160];

	for (size_t g = 0; g < o->nfiles; g++) {
		int hit = 0;
		for (size_t i = 0; i < l->n; i++)
			hit |= fnmatch(o->files[g], l->f[i].path, 0) == 0;
		if (!hit)
			return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
					 "files=%s matches no file of the "
					 "repository", stfs_quote(o->files[g],
					 strlen(o->files[g]), q, sizeof(q)));
	}
	for (size_t i = 0; o->nfiles && i < l->n; i++) {
		size_t g = 0;
		while (g < o->nfiles && fnmatch(o->files[g], l->f[i].path, 0))
			g++;
		if (g == o->nfiles && !l->f[i].left_out)
			l->f[i].left_out = "not selected by files=";
	}
	return 0;
}

/* Without a listing, the model's own files are the repository. */
static int own_files(struct stfs_model *m, struct stfs_rlist *l)
{
	for (size_t i = 0; i < m->nfiles; i++) {
		struct stfs_source_info si;
		const char *ver;
		int rc;

		stfs_source_info(m->files[i]->src, &si);
		if ((rc = stfs_rlist_push(l, m->file_names[i], si.size, NULL,
					  stfs_repo_path_bad(
					  m->file_names[i]))))
			return rc;
		ver = si.url ? si.etag : NULL;
		if (ver && *ver && !(l->f[l->n - 1].revision = strdup(ver)))
			return -ENOMEM;
		if ((!ver || !*ver) && asprintf(&l->f[l->n - 1].revision,
			"%" PRId64 ".%09ld", si.mtime_sec, si.mtime_nsec) < 0) {
			l->f[l->n - 1].revision = NULL;
			return -ENOMEM;
		}
	}
	return 0;
}

/* The shards the model opened serve their paths (the same source). */
static void share_sources(struct stfs_model *m, struct stfs_repo *r,
			  const size_t *idx)
{
	struct stfs_rlist *l = &m->loc->files;

	for (size_t i = 0; i < m->nfiles; i++) {
		size_t lo = 0, hi = l->n;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			int c = cmp_path(l->f[idx[mid]].path,
					 m->file_names[i]);
			if (!c) {
				r->srcs[idx[mid]].src = m->files[i]->src;
				r->srcs[idx[mid]].shard = i + 1;
				break;
			}
			if (c < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
	}
}

static int warn_left_out(const struct stfs_model_opts *o,
			 const struct stfs_rlist *l)
{
	for (size_t i = 0; o->warn && i < l->n; i++) {
		char line[600], q[300];
		const char *why = l->f[i].left_out;

		if (!why || !strcmp(why, "not selected by files="))
			continue;
		snprintf(line, sizeof(line), "%%repo/: %s is left out: %s",
			 stfs_quote(l->f[i].path, strlen(l->f[i].path), q,
				    sizeof(q)), why);
		o->warn(o->ctx, line);
	}
	return 0;
}

/* %repo/'s revision: the commit, else the directory's mtime, else (a
 * remote listing) a hash of the listing. */
static int dir_revision(const struct stfs_model *m, struct stfs_repo *r)
{
	struct stat st;
	int n;

	if (m->loc->revision)
		return (r->revision = strdup(m->loc->revision)) ? 0 : -ENOMEM;
	if (m->loc->http || m->loc->remote) {
		/* no commit: the listing's own, a hash of every path and
		 * its ETag, which changes when any file does */
		const struct stfs_rlist *l = &m->loc->files;
		uint64_t h = 1469598103934665603ull;

		for (size_t i = 0; i < l->n; i++) {
			const char *v = l->f[i].revision ? l->f[i].revision : "";
			h = h * 1099511628211ull ^
			    stfs_hash64(l->f[i].path, strlen(l->f[i].path));
			h = h * 1099511628211ull ^ stfs_hash64(v, strlen(v));
		}
		n = asprintf(&r->revision, "listing-%016" PRIx64, h);
		if (n < 0)
			r->revision = NULL;
		return n < 0 ? -ENOMEM : 0;
	}
	if (stat(m->loc->canonical, &st))
		return 0;
	n = asprintf(&r->revision, "%" PRId64 ".%09ld",
		     (int64_t)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	if (n < 0)
		r->revision = NULL;
	return n < 0 ? -ENOMEM : 0;
}

int stfs_repo_build(struct stfs_model *m, const struct stfs_model_opts *o,
		    struct stfs_error *err)
{
	struct stfs_rlist *l = &m->loc->files;
	uint64_t base = (uint64_t)m->tree.nnodes * (STFS_VIRTUAL_KIND_COUNT + 1);
	struct stfs_repo *r;
	size_t *idx = NULL;
	int rc = 0, round = 0;

	if (!l->listed && (rc = own_files(m, l)))
		return stfs_fail(err, rc, NULL, STFS_NO_OFFSET, "out of memory");
	if ((rc = select_files(l, o, err)))
		return rc;
	/* -o repo: the root's %tensors/ is the tensors', not a file's */
	for (size_t i = 0; (m->flags & STFS_TREE_REPO) && i < l->n; i++) {
		size_t n = strlen(STFS_TENSORS_DIR);

		if (!l->f[i].left_out &&
		    !strncmp(l->f[i].path, STFS_TENSORS_DIR, n) &&
		    (!l->f[i].path[n] || l->f[i].path[n] == '/'))
			l->f[i].left_out = "its name is the tensors' folder "
					   "(-o repo shows them as "
					   STFS_TENSORS_DIR "/)";
	}
	if (base + l->n * 2 + 2 >= UINT32_MAX)
		return stfs_fail(err, -EOVERFLOW, NULL, STFS_NO_OFFSET,
				 "too many files in the repository (%zu)", l->n);
	if (!(r = m->repo = calloc(1, sizeof(*r))) ||
	    !(r->srcs = calloc(l->n + 1, sizeof(*r->srcs))) ||
	    !(idx = calloc(l->n + 1, sizeof(*idx))))
		return stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET,
				 "out of memory");
	pthread_mutex_init(&r->mu, NULL);
	r->nsrcs = l->n;
	r->base = (uint32_t)base;
	for (size_t i = 0; i < l->n; i++)
		idx[i] = i;
	qsort_r(idx, l->n, sizeof(*idx), cmp_idx, l);
	share_sources(m, r, idx);
	while ((rc = build_round(r, l, idx)) == 1 && ++round < ROUNDS)
		;
	free(idx);
	if (rc < 0)
		return stfs_fail(err, rc, NULL, STFS_NO_OFFSET, "out of memory");
	if (rc)
		return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET, "the "
				 "repository's paths clash past %d rounds",
				 ROUNDS);
	warn_left_out(o, l);
	if (m->loc->note && o->warn) {
		char line[700];

		snprintf(line, sizeof(line), "%.500s (%%repo/ shows every "
			 "file)", m->loc->note);
		o->warn(o->ctx, line);
	}
	for (size_t i = 0; i < l->n; i++) {
		struct stfs_source_info si;

		if (!r->srcs[i].src)
			continue;
		stfs_source_info(r->srcs[i].src, &si);
		if (si.size != l->f[i].size &&
		    asprintf(&r->srcs[i].fault, "the listing says %" PRIu64
			     " bytes, the object has %" PRIu64,
			     l->f[i].size, si.size) < 0)
			r->srcs[i].fault = NULL;
	}
	if ((rc = dir_revision(m, r)))
		return stfs_fail(err, rc, NULL, STFS_NO_OFFSET, "out of memory");
	return stfs_repo_fetch_small(m->loc, o->warn, o->ctx);
}

void stfs_repo_free(struct stfs_repo *r)
{
	if (!r)
		return;
	drop_nodes(r);
	free(r->nodes);
	for (size_t i = 0; r->srcs && i < r->nsrcs; i++) {
		if (r->srcs[i].own)
			stfs_source_close(r->srcs[i].src);
		free(r->srcs[i].fault);
	}
	free(r->srcs);
	free(r->revision);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

/*
 * repo_nodes.c: %repo/ served: the nodes repo.c built (their names,
 * children, lookups, paths and revisions), the content of a file (the
 * bytes verified at mount, or a range of its source, opened at its first
 * open and kept until unmount), the reason a file cannot be read, and the
 * listing of `stfs inspect --files`.
 *
 * A safetensors shard the model opened from a remote source is one range
 * per piece of it: its header, then its tensors (a run of tensors under
 * PIECE_MIN bytes together), so that each read tells the block engine
 * the tensor it is in (its extent, stfs_source_read_async()): a reader of
 * one tensor is not charged a window ahead into its neighbours before it
 * has gone on into one (blocks/pool.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "content.h"
#include "model.h"
#include "repo.h"

/* ---- the nodes ------------------------------------------------------------ */

uint32_t stfs_repo_base(const struct stfs_model *m)
{
	return m->repo ? m->repo->base : UINT32_MAX;
}

uint32_t stfs_repo_count(const struct stfs_model *m)
{
	return m->repo ? m->repo->n : 0;
}

void stfs_repo_node(const struct stfs_model *m, uint32_t k,
		    struct stfs_node_info *out)
{
	const struct rnode *n = &m->repo->nodes[k];

	memset(out, 0, sizeof(*out));
	out->parent = n->parent;
	out->name = n->name;
	out->name_len = n->name_len;
	if (n->file < 0) {
		out->kind = STFS_NODE_KIND_DIR;
		out->children = n->count;
		out->subdirs = n->subdirs;
	} else {
		out->kind = STFS_NODE_KIND_REPO;
		out->size = m->loc->files.f[n->file].size;
	}
}

int64_t stfs_repo_child(const struct stfs_model *m, uint32_t k, uint32_t i)
{
	const struct rnode *n = &m->repo->nodes[k];

	if (n->file >= 0 || i >= n->count)
		return -ENOENT;
	return m->repo->children[n->first + i];
}

int64_t stfs_repo_lookup(const struct stfs_model *m, uint32_t k,
			 const char *name, size_t len)
{
	const struct stfs_repo *r = m->repo;
	const struct rnode *n = &r->nodes[k];
	size_t lo = 0, hi = n->count;

	if (n->file >= 0)
		return -ENOTDIR;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct rnode *c = &r->nodes[r->children[n->first + mid]];
		int d = memcmp(c->name, name, c->name_len < len ? c->name_len :
			       len);

		if (!d)
			d = (c->name_len > len) - (c->name_len < len);
		if (!d)
			return r->children[n->first + mid];
		if (d < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -ENOENT;
}

char *stfs_repo_path(const struct stfs_model *m, uint32_t k)
{
	const struct rnode *n = &m->repo->nodes[k];
	char *p, *q;

	if (!k)
		return strdup("");
	if (n->file >= 0)
		return strdup(m->loc->files.f[n->file].path);
	p = stfs_repo_path(m, n->parent);
	if (!p || asprintf(&q, "%s%s%s", p, *p ? "/" : "", n->name) < 0)
		q = NULL;
	free(p);
	return q;
}

int64_t stfs_repo_file(const struct stfs_model *m, uint32_t k)
{
	return k < m->repo->n ? m->repo->nodes[k].file : -1;
}

const char *stfs_repo_revision(const struct stfs_model *m, uint32_t k)
{
	const struct rnode *n = &m->repo->nodes[k];

	if (m->repo->revision && (k == 0 || m->loc->revision))
		return m->repo->revision;
	if (n->file < 0)
		return NULL;
	return m->loc->files.f[n->file].revision;
}

/* The source of file j, opened now if it was not (kept until unmount):
 * 0, or -EIO with its fault recorded.  The open (a request, for a remote
 * file) runs outside the lock, so one slow server holds up no other
 * file; of two threads that opened it at once, the first to install its
 * source wins and the other closes its own. */
static int source_of(const struct stfs_model *m, int64_t j,
		     struct stfs_source **out)
{
	struct stfs_repo *r = m->repo;
	struct rsrc *s = &r->srcs[j];
	const struct stfs_rfile *f = &m->loc->files.f[j];
	struct stfs_error e = { 0 };
	struct stfs_source_info si;
	struct stfs_source *src = NULL;
	char *fault = NULL;
	int rc, done;

	pthread_mutex_lock(&r->mu);
	done = s->src || s->fault;
	pthread_mutex_unlock(&r->mu);
	if (!done) {
		rc = stfs_location_open_path(m->loc, f->path, &src, &e);
		if (rc && asprintf(&fault, "cannot be opened: %s",
				   e.msg[0] ? e.msg : strerror(-rc)) < 0)
			fault = NULL;
		if (!rc) {
			stfs_source_info(src, &si);
			if (si.size != f->size &&
			    asprintf(&fault, "the listing says %" PRIu64
				     " bytes, the object has %" PRIu64,
				     f->size, si.size) < 0)
				fault = NULL;
		}
		pthread_mutex_lock(&r->mu);
		if (!s->src && !s->fault) {
			s->src = src;
			s->own = !rc;
			s->fault = fault;
			src = NULL;
			fault = NULL;
		}
		pthread_mutex_unlock(&r->mu);
		if (src)
			stfs_source_close(src);
		free(fault);
	}
	pthread_mutex_lock(&r->mu);
	*out = s->fault ? NULL : s->src;
	pthread_mutex_unlock(&r->mu);
	return *out ? 0 : -EIO;
}

#define PIECE_MIN (1u << 20)

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The [0, size) of shard f (a remote safetensors file) as its pieces. */
static int add_pieces(struct stfs_content *c, struct stfs_source *src,
		      const struct stfs_file *f, uint64_t size)
{
	const struct stfs_header *h = f->header;
	uint64_t *at, last = f->data_start;
	size_t n = 0;
	int rc = 0;

	if (!(at = malloc((h->count + 1) * sizeof(*at))))
		return -ENOMEM;
	for (size_t i = 0; i < h->count; i++)
		if (h->tensors[i].begin < size - f->data_start)
			at[n++] = f->data_start + h->tensors[i].begin;
	qsort(at, n, sizeof(*at), cmp_u64);
	at[n++] = size;
	rc = stfs_content_add_piece(c, src, 0, last);
	for (size_t i = 0; i < n && !rc; i++)
		if (at[i] == size || at[i] - last >= PIECE_MIN) {
			if (at[i] > last)
				rc = stfs_content_add_piece(c, src, last,
							    at[i] - last);
			last = at[i];
		}
	free(at);
	return rc;
}

int stfs_repo_content(const struct stfs_model *m, uint32_t k,
		      struct stfs_content **out)
{
	const struct rnode *n = &m->repo->nodes[k];
	const struct stfs_rfile *f;
	struct stfs_source *src;
	struct stfs_content *c;
	const struct stfs_file *sf;
	size_t shard;
	int rc = 0;

	*out = NULL;
	if (n->file < 0)
		return -EISDIR;
	f = &m->loc->files.f[n->file];
	if (f->fault)
		return -EIO;
	if (!f->bytes && f->size && (rc = source_of(m, n->file, &src)))
		return rc;
	if (!(c = stfs_content_new()))
		return -ENOMEM;
	if (f->bytes)
		rc = stfs_content_add_shared(c, f->bytes, f->size, NULL,
					     NULL);
	else if (f->size && (shard = m->repo->srcs[n->file].shard) &&
		 !stfs_source_map(src) &&
		 (sf = m->files[shard - 1])->header && !sf->header->format &&
		 sf->data_start && sf->data_start <= f->size)
		rc = add_pieces(c, src, sf, f->size);
	else if (f->size)
		rc = stfs_content_add_range(c, src, 0, f->size);
	if (rc) {
		stfs_content_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void stfs_repo_error(const struct stfs_model *m, uint32_t k, int code,
		     char *out, size_t outsz)
{
	const struct rnode *n = &m->repo->nodes[k];
	const char *why = NULL;

	if (n->file >= 0) {
		why = m->loc->files.f[n->file].fault;
		if (!why) {
			pthread_mutex_lock(&m->repo->mu);
			why = m->repo->srcs[n->file].fault;
			pthread_mutex_unlock(&m->repo->mu);
		}
	}
	snprintf(out, outsz, "%s", why ? why : strerror(code < 0 ? -code :
							 code));
}

/* ---- the listing, for `stfs inspect --files` ------------------------------ */

size_t stfs_model_repo_count(const struct stfs_model *m)
{
	return m->repo ? m->loc->files.n : 0;
}

int stfs_model_repo_info(const struct stfs_model *m, size_t i,
			 struct stfs_repo_info *out)
{
	const struct stfs_rfile *f;

	if (i >= stfs_model_repo_count(m))
		return -ENOENT;
	f = &m->loc->files.f[i];
	memset(out, 0, sizeof(*out));
	out->path = f->path;
	out->size = f->size;
	out->verify = f->sum ? f->sum : f->unchecked;
	out->small = f->small;
	out->left_out = f->left_out;
	out->fault = f->fault ? f->fault : m->repo->srcs[i].fault;
	return 0;
}

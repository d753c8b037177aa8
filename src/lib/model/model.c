/*
 * model.c: what a mount shows, independent of FUSE and of where the bytes
 * come from.
 *
 * A model is one or more validated safetensors files (shards) found by the
 * locator, the list of all their tensors ("entries", sorted by name), the
 * tree those names make (tree.c) with the reserved header file at its
 * root, and for every file of the tree its content: a list of segments
 * (content layer).  The header file of a single file is its header bytes,
 * a range of the file (under a selection: those tensors' entries); shards
 * get a generated merged index (index_json.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "content.h"
#include "metrics.h"
#include "model.h"

#define QMAX 160

static int cmp_entry(const void *x, const void *y)
{
	const struct stfs_entry *a = x, *b = y;
	int c = stfs_bytes_cmp(a->t->name, a->t->name_len, b->t->name,
			       b->t->name_len);

	if (c)
		return c;
	return a->file < b->file ? -1 : a->file > b->file;
}

/* Open and validate the file called name (its header, with the size). */
static int open_one(struct stfs_model *m, const char *name,
		    struct stfs_file **f, struct stfs_error *err)
{
	struct stfs_source *src;
	char msg[sizeof(err->msg)], q[QMAX];
	int rc;

	*f = NULL;
	rc = stfs_location_open(m->loc, name, &src, err);
	if (!rc)
		rc = stfs_file_open_source(src, f, err);
	if (rc && err && m->sharded) {
		memcpy(msg, err->msg, sizeof(msg));
		snprintf(err->msg, sizeof(err->msg), "shard %s: %.300s",
			 stfs_quote(name, strlen(name), q, QMAX), msg);
	}
	return rc;
}

/* Add the open file f, called name, to m (closing it on failure). */
static int append(struct stfs_model *m, const char *name, struct stfs_file *f,
		  struct stfs_error *err)
{
	struct stfs_file **files;
	char **names;

	files = realloc(m->files, (m->nfiles + 1) * sizeof(*files));
	if (files)
		m->files = files;
	names = files ? realloc(m->file_names,
				(m->nfiles + 1) * sizeof(*names)) : NULL;
	if (names)
		m->file_names = names;
	if (!files || !names || !(names[m->nfiles] = strdup(name))) {
		stfs_file_close(f);
		return stfs_nomem(err);
	}
	files[m->nfiles++] = f;
	return 0;
}

/* Open file `name` of the location and add it to the model; errors name
 * the shard when the model is sharded. */
static int stfs_model_add_file(struct stfs_model *m, const char *name,
			       struct stfs_error *err)
{
	struct stfs_file *f;
	int rc = open_one(m, name, &f, err);

	return rc ? rc : append(m, name, f, err);
}

/* Remote shards are opened OPENERS at a time: each open is a round trip
 * or two (the first 64 KiB, then the rest of a long header), so a set of
 * hundreds of shards mounts in a few round trips' time, not hundreds. */
#define OPENERS 16

struct slot {
	struct stfs_file *f;
	int rc;
	struct stfs_error err;
};

struct openers {
	struct stfs_model *m;
	const char *const *names;
	size_t n, done;                 /* opened so far, for the progress */
	struct slot *slots;
	pthread_mutex_t mu;
};

static void open_nth(void *ctx, size_t i)
{
	struct openers *o = ctx;

	memset(&o->slots[i].err, 0, sizeof(o->slots[i].err));
	o->slots[i].rc = open_one(o->m, o->names[i], &o->slots[i].f,
				  &o->slots[i].err);
	pthread_mutex_lock(&o->mu);
	i = ++o->done;
	pthread_mutex_unlock(&o->mu);
	stfs_remote_progress(o->m->remote, i, o->n);
}

int stfs_model_add_files(struct stfs_model *m, const char *const *names,
			 size_t n,
			 struct stfs_error *err)
{
	struct openers o = { m, names, n, 0, NULL, PTHREAD_MUTEX_INITIALIZER };
	size_t i;
	int rc = 0;

	stfs_remote_progress(m->remote, 0, n);
	if (n < 2 || !(m->loc->http || m->loc->remote) ||
	    !(o.slots = calloc(n, sizeof(*o.slots)))) {
		for (i = 0; !rc && i < n; i++) {
			rc = stfs_model_add_file(m, names[i], err);
			stfs_remote_progress(m->remote, i + 1, n);
		}
		return rc;
	}
	stfs_parallel_for(n, OPENERS, open_nth, &o);
	/* in order: the first failure is the one reported, as if opened one
	 * after another */
	for (i = 0; i < n; i++) {
		if (!rc && o.slots[i].rc) {
			rc = o.slots[i].rc;
			if (err)
				*err = o.slots[i].err;
		} else if (!rc) {
			rc = append(m, names[i], o.slots[i].f, err);
		} else {
			stfs_file_close(o.slots[i].f);
		}
	}
	free(o.slots);
	/* loaders read shards in order: a reader going on to one's end
	 * has the next one's start fetched ahead of it */
	for (i = 0; !rc && i + 1 < m->nfiles; i++)
		stfs_source_follow(m->files[i]->src, m->files[i + 1]->src);
	return rc;
}

/* Make every tensor of every file an entry, sorted by name. */
static int stfs_model_collect(struct stfs_model *m, struct stfs_error *err)
{
	size_t n = 0;

	for (size_t i = 0; i < m->nfiles; i++)
		n += stfs_header_count(m->files[i]->header);
	if (n >= (1u << 31))
		return stfs_fail(err, -EOVERFLOW, NULL, STFS_NO_OFFSET,
				 "too many tensors (%zu)", n);
	m->entries = calloc(n ? n : 1, sizeof(*m->entries));
	if (!m->entries)
		return stfs_nomem(err);
	/* in name order within each file: one file needs no sort */
	for (size_t i = 0; i < m->nfiles; i++) {
		const struct stfs_header *h = m->files[i]->header;
		for (size_t k = 0; k < stfs_header_count(h); k++) {
			m->entries[m->nentries].t =
				stfs_header_tensor_by_name(h, k);
			m->entries[m->nentries++].file = (uint32_t)i;
		}
	}
	if (m->nfiles > 1)
		stfs_model_sort(m);
	return 0;
}

void stfs_model_sort(struct stfs_model *m)
{
	for (size_t i = 1; i < m->nentries; i++) {
		if (cmp_entry(&m->entries[i - 1], &m->entries[i]) > 0) {
			qsort(m->entries, m->nentries, sizeof(*m->entries),
			      cmp_entry);
			return;
		}
	}
}

/* Refuse a name found in two files (entries sorted by name). */
static int stfs_model_unique(const struct stfs_model *m, struct stfs_error *err)
{
	for (size_t i = 1; i < m->nentries; i++) {
		const struct stfs_entry *a = &m->entries[i - 1];
		const struct stfs_entry *b = &m->entries[i];
		char q[QMAX], fa[QMAX], fb[QMAX];
		const char *na = m->file_names[a->file];
		const char *nb = m->file_names[b->file];

		if (stfs_bytes_cmp(a->t->name, a->t->name_len, b->t->name,
				   b->t->name_len) == 0)
			return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
					 "tensor \"%s\" is in two shards: %s "
					 "and %s",
					 stfs_quote(a->t->name, a->t->name_len,
						    q, QMAX),
					 stfs_quote(na, strlen(na), fa, QMAX),
					 stfs_quote(nb, strlen(nb), fb, QMAX));
	}
	return 0;
}

/* The tree over the entries, the header file, and each entry's views. */
static int build_tree(struct stfs_model *m, unsigned flags,
		      struct stfs_error *err)
{
	const char *view_suffixes[STFS_TREE_SUFFIX_MAX] = { NULL };
	struct stfs_name *names;
	struct stfs_tree *t = &m->tree;
	int rc;

	/* the views' suffixes (content/npy.c); raw files have none */
	_Static_assert(STFS_VIEW_COUNT <= STFS_TREE_SUFFIX_MAX, "views");
	for (int v = 1; v < STFS_VIEW_COUNT; v++)
		view_suffixes[v] = stfs_view_suffix((enum stfs_view)v);

	names = calloc(m->nentries + 1, sizeof(*names));
	if (!names)
		return stfs_nomem(err);
	for (size_t i = 0; i < m->nentries; i++) {
		names[i].s = m->entries[i].t->name;
		names[i].len = m->entries[i].t->name_len;
		names[i].extras = stfs_tensor_views(m->entries[i].t, flags);
	}
	names[m->nentries].s = STFS_HEADER_FILE;
	names[m->nentries].len = strlen(STFS_HEADER_FILE);
	names[m->nentries].literal = 1;
	rc = stfs_tree_build(t, names, m->nentries + 1, flags, view_suffixes,
			     err);
	free(names);
	if (rc || !(flags & (STFS_TREE_NPY | STFS_TREE_F32)))
		return rc;
	m->first_view = malloc((m->nentries + 1) * sizeof(*m->first_view));
	if (!m->first_view)
		return stfs_nomem(err);
	memset(m->first_view, 0xff, (m->nentries + 1) * sizeof(uint32_t));
	for (uint32_t k = 0; k < t->nnodes; k++)
		if (t->nodes[k].extra &&
		    m->first_view[t->nodes[k].entry] == UINT32_MAX)
			m->first_view[t->nodes[k].entry] = k;
	return 0;
}

/* Is (key, value) in h's metadata?  (sorted by key, so a search) */
static int has_meta(const struct stfs_header *h, const struct stfs_meta *m)
{
	size_t lo = 0, hi = stfs_header_meta_count(h);

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct stfs_meta *x = stfs_header_meta(h, mid);
		int c = stfs_bytes_cmp(x->key, x->key_len, m->key, m->key_len);

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

/* The __metadata__ entries every file carries with the same value. */
static int shared_meta(struct stfs_model *m, struct stfs_error *err)
{
	const struct stfs_header *h0;

	if (m->nfiles == 0)
		return 0;
	h0 = m->files[0]->header;
	m->meta = calloc(stfs_header_meta_count(h0) + 1, sizeof(*m->meta));
	if (!m->meta)
		return stfs_nomem(err);
	for (size_t k = 0; k < stfs_header_meta_count(h0); k++) {
		const struct stfs_meta *e = stfs_header_meta(h0, k);
		size_t i = 1;

		while (i < m->nfiles && has_meta(m->files[i]->header, e))
			i++;
		if (i == m->nfiles)
			m->meta[m->nmeta++] = e;
	}
	return 0;
}

/* Keep the entries the include and exclude patterns select.  A pattern
 * that selects nothing is most likely a typo: an error. */
static int select_entries(struct stfs_model *m,
			  const struct stfs_model_opts *o,
			  struct stfs_error *err)
{
	size_t npat = o->ninclude + o->nexclude, k = 0;
	char *hits, *name = NULL;
	int rc = 0;

	if (!npat)
		return 0;
	m->selected = 1;
	if (!(hits = calloc(npat, 1)))
		return stfs_nomem(err);
	for (size_t i = 0; i < m->nentries; i++) {
		const struct stfs_tensor *t = m->entries[i].t;
		int keep = o->ninclude == 0;
		char *p = realloc(name, t->name_len + 1);

		if (!p) {
			rc = stfs_nomem(err);
			goto out;
		}
		name = p;
		memcpy(name, t->name, t->name_len);   /* fnmatch stops at NUL */
		name[t->name_len] = '\0';
		for (size_t j = 0; j < o->ninclude; j++)
			if (fnmatch(o->include[j], name, 0) == 0)
				keep = hits[j] = 1;
		for (size_t j = 0; j < o->nexclude; j++)
			if (fnmatch(o->exclude[j], name, 0) == 0) {
				hits[o->ninclude + j] = 1;
				keep = 0;
			}
		if (keep)
			m->entries[k++] = m->entries[i];
	}
	m->nentries = k;
	for (size_t j = 0; j < npat; j++) {
		char q[QMAX];
		const char *pat = j < o->ninclude ? o->include[j] :
				  o->exclude[j - o->ninclude];

		if (!hits[j]) {
			rc = stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
				       "%s=%s matches no tensor",
				       j < o->ninclude ? "include" : "exclude",
				       stfs_quote(pat, strlen(pat), q, QMAX));
			goto out;
		}
	}
out:
	free(name);
	free(hits);
	return rc;
}

int stfs_model_open(const char *source, unsigned flags,
		    void (*warn)(void *ctx, const char *text), void *ctx,
		    struct stfs_model **out, struct stfs_error *err)
{
	struct stfs_model_opts o = { .flags = flags, .warn = warn,
				     .ctx = ctx };

	return stfs_model_open_opts(source, &o, out, err);
}

int stfs_model_open_opts(const char *source, const struct stfs_model_opts *o,
			 struct stfs_model **out, struct stfs_error *err)
{
	unsigned flags = o->flags;
	struct stfs_model *m;
	int rc;

	*out = NULL;
	if (err)
		memset(err, 0, sizeof(*err));
	if (!(m = calloc(1, sizeof(*m))))
		return stfs_nomem(err);
	m->flags = flags;
	pthread_mutex_init(&m->vmu, NULL);
	if ((rc = stfs_remote_new(o->remote, &m->remote, err)) ||
	    (rc = stfs_locate(source, m->remote, &m->loc, err)))
		goto fail;
	m->sharded = m->loc->kind != STFS_LOC_FILE;
	switch (m->loc->kind) {
	case STFS_LOC_FILE:
		if (!(rc = stfs_model_add_files(m, (const char *const *)
						&m->loc->name, 1, err)))
			rc = stfs_model_collect(m, err);
		break;
	case STFS_LOC_DIR:
		rc = stfs_model_add_files(m, (const char *const *)
					  m->loc->names, m->loc->nnames, err);
		if (!rc && !(rc = stfs_model_collect(m, err)))
			rc = stfs_model_unique(m, err);
		break;
	case STFS_LOC_INDEX:
		rc = stfs_shards_open_index(m, o->warn, o->ctx, err);
		break;
	}
	if (rc || (rc = select_entries(m, o, err)) ||
	    (rc = build_tree(m, flags, err)) || (rc = shared_meta(m, err)) ||
	    (rc = stfs_repo_build(m, o, err)))
		goto fail;
	if (m->sharded && (rc = stfs_model_index_json(m, m->index_meta,
						     m->index_meta_len, err)))
		goto fail;
	/* (a foreign file's header file is its whole generated document) */
	if (!m->sharded && o->ninclude + o->nexclude && !m->files[0]->doc &&
	    (rc = stfs_model_header_selected(m, err)))
		goto fail;
	/* open: its requests are done, and the daemon forks next */
	stfs_remote_progress_end(m->remote);
	stfs_remote_park(m->remote);
	stfs_location_park(m->loc);
	for (size_t i = 0; i < m->nfiles; i++)  /* (reads of a map) */
		m->files[i]->src->metrics = stfs_remote_metrics(m->remote);
	*out = m;
	return 0;
fail:
	stfs_model_close(m);
	return rc;
}

void stfs_model_close(struct stfs_model *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->nfiles; i++)
		stfs_source_follow(m->files[i]->src, NULL);
	for (size_t i = 0; i < m->nfiles; i++) {
		stfs_file_close(m->files[i]);
		free(m->file_names[i]);
	}
	free(m->files);
	free(m->file_names);
	free(m->entries);
	stfs_tree_free(&m->tree);
	free(m->first_view);
	free(m->index);
	free(m->meta);
	stfs_virtual_free(m);
	pthread_mutex_destroy(&m->vmu);
	free(m->index_meta);
	for (size_t i = 0; i < m->nimeta; i++) {
		free((char *)m->imeta[i].key);
		free((char *)m->imeta[i].value);
	}
	free(m->imeta);
	stfs_repo_free(m->repo);
	stfs_location_free(m->loc);
	/* after its sources, which belong to it */
	stfs_remote_free(m->remote);
	free(m);
}

const struct stfs_remote *stfs_model_remote(const struct stfs_model *m)
{
	return m->remote;
}

size_t stfs_model_block_size(const struct stfs_model *m)
{
	return m->loc->http || m->loc->remote ?
	       stfs_remote_block_size(m->remote) : 0;
}

/* ---- accessors ---------------------------------------------------------- */

const char *stfs_model_source(const struct stfs_model *m)
{
	return m->loc->arg;
}

const char *stfs_model_canonical(const struct stfs_model *m)
{
	return m->loc->canonical;
}

int stfs_model_sharded(const struct stfs_model *m)
{
	return m->sharded;
}

size_t stfs_model_file_count(const struct stfs_model *m)
{
	return m->nfiles;
}

const struct stfs_file *stfs_model_file(const struct stfs_model *m,
					size_t i)
{
	return i < m->nfiles ? m->files[i] : NULL;
}

const char *stfs_model_file_name(const struct stfs_model *m, size_t i)
{
	return i < m->nfiles ? m->file_names[i] : NULL;
}

size_t stfs_model_tensor_count(const struct stfs_model *m)
{
	return m->nentries;
}

const struct stfs_tensor *stfs_model_tensor(const struct stfs_model *m,
					    size_t i)
{
	return i < m->nentries ? m->entries[i].t : NULL;
}

size_t stfs_model_tensor_file(const struct stfs_model *m, size_t i)
{
	return m->entries[i].file;
}

uint64_t stfs_model_tensor_offset(const struct stfs_model *m, size_t i)
{
	const struct stfs_entry *e = &m->entries[i];

	return m->files[e->file]->data_start + e->t->begin;
}

char *stfs_model_tensor_path(const struct stfs_model *m, size_t i)
{
	return stfs_tree_path(&m->tree, m->tree.entry_node[i]);
}

size_t stfs_model_meta_count(const struct stfs_model *m)
{
	return m->nmeta;
}

const struct stfs_meta *stfs_model_meta(const struct stfs_model *m,
					size_t i)
{
	return i < m->nmeta ? m->meta[i] : NULL;
}

/*
 * shards.c: a sharded checkpoint with an index (*.index.json) as one
 * model.
 *
 * The index's weight_map is authoritative: every tensor it names must be
 * in the shard it names, every shard it names must exist, and a shard name
 * must be a plain file name beside the index (no '/', no "..").  Tensors
 * present in shards but absent from the map are hidden, with one warning.
 * Every shard is validated exactly as a single file; errors name the
 * shard.  (Shards with no index are merged by model.c.)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "index.h"
#include "model.h"

#define INDEX_MAX (1024ULL * 1024 * 1024)
#define QMAX 160

struct found {
	const struct stfs_tensor *t;
	uint32_t file;
	int used;
};

static int cmp_found(const void *x, const void *y)
{
	const struct found *a = x, *b = y;

	if (a->file != b->file)
		return a->file < b->file ? -1 : 1;
	return stfs_bytes_cmp(a->t->name, a->t->name_len, b->t->name,
			      b->t->name_len);
}

static struct found *find_tensor(struct found *all, size_t n, uint32_t file,
				 const char *name, size_t len)
{
	struct stfs_tensor key_t = { .name = name, .name_len = len };
	struct found key = { .t = &key_t, .file = file };

	return bsearch(&key, all, n, sizeof(*all), cmp_found);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Shards were added in sorted order, so their names can be searched. */
static int shard_index(const struct stfs_model *m, const char *name)
{
	char **p = bsearch(&name, m->file_names, m->nfiles,
			   sizeof(*m->file_names), cmp_str);

	return p ? (int)(p - m->file_names) : -1;
}

/* Read and parse the index file. */
static int read_index(struct stfs_model *m, struct stfs_index *ix,
		      struct stfs_error *err)
{
	struct stfs_source *src;
	char *text;
	size_t len;
	int rc;

	if ((rc = stfs_location_open(m->loc, m->loc->name, &src, err))) {
		char msg[sizeof(err->msg)];
		if (err) {
			memcpy(msg, err->msg, sizeof(msg));
			snprintf(err->msg, sizeof(err->msg), "the index: "
				 "%.400s", msg);
		}
		return rc;
	}
	rc = stfs_source_slurp(src, INDEX_MAX, &text, &len);
	stfs_source_close(src);
	if (rc == -EFBIG)
		return stfs_fail(err, rc, NULL, STFS_NO_OFFSET,
				 "the index is over 1 GiB");
	if (rc)
		return stfs_fail(err, rc, NULL, STFS_NO_OFFSET,
				 "cannot read the index: %s", strerror(-rc));
	rc = stfs_index_parse(text, len, ix, err);
	free(text);
	return rc;
}

static void warn_hidden(const struct stfs_model *m, const struct found *all,
			size_t total, void (*warn)(void *, const char *),
			void *ctx)
{
	size_t hidden = 0, first = 0;
	char text[512], q[QMAX], qf[QMAX];
	const char *file;

	for (size_t i = total; i-- > 0;)
		if (!all[i].used) {
			hidden++;
			first = i;
		}
	if (!hidden || !warn)
		return;
	file = m->file_names[all[first].file];
	snprintf(text, sizeof(text),
		 "%zu tensor%s in the shards %s not in the index's "
		 "weight_map and %s hidden (first: \"%s\" in %s)",
		 hidden, hidden == 1 ? "" : "s", hidden == 1 ? "is" : "are",
		 hidden == 1 ? "is" : "are",
		 stfs_quote(all[first].t->name, all[first].t->name_len, q,
			    QMAX), stfs_quote(file, strlen(file), qf, QMAX));
	warn(ctx, text);
}

/* The index's "metadata", taken from it: as JSON for the merged index,
 * and its entries as strings for virtual files. */
static void keep_index_meta(struct stfs_model *m, struct stfs_index *ix)
{
	m->index_meta = ix->meta_json;
	m->index_meta_len = ix->meta_json_len;
	m->imeta = ix->meta;
	m->nimeta = ix->nmeta;
	ix->meta_json = NULL;
	ix->meta_json_len = 0;
	ix->meta = NULL;
	ix->nmeta = 0;
}

int stfs_shards_open_index(struct stfs_model *m,
			   void (*warn)(void *, const char *), void *ctx,
			   struct stfs_error *err)
{
	struct stfs_index ix;
	struct found *all = NULL;
	size_t total = 0;
	char q[QMAX], q2[QMAX];
	int rc;

	if ((rc = read_index(m, &ix, err)))
		return rc;
	/* The distinct shards, sorted, each checked before any is opened. */
	if ((rc = stfs_model_add_files(m, ix.shards, ix.nshards, err)))
		goto out;

	/* Every tensor of every shard, in (shard, name) order. */
	for (size_t i = 0; i < m->nfiles; i++)
		total += stfs_header_count(m->files[i]->header);
	all = calloc(total ? total : 1, sizeof(*all));
	m->entries = calloc(ix.nentries + 1, sizeof(*m->entries));
	if (!all || !m->entries) {
		rc = stfs_nomem(err);
		goto out;
	}
	total = 0;
	for (size_t i = 0; i < m->nfiles; i++) {
		const struct stfs_header *h = m->files[i]->header;
		for (size_t k = 0; k < stfs_header_count(h); k++) {
			all[total].t = stfs_header_tensor_by_name(h, k);
			all[total++].file = (uint32_t)i;
		}
	}
	for (size_t i = 0; i < ix.nentries; i++) {
		const char *name = ix.entries[i].name, *s = ix.entries[i].shard;
		int fi = shard_index(m, s);
		struct found *f = find_tensor(all, total, (uint32_t)fi, name,
					      strlen(name));

		if (!f) {
			rc = stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
				       "tensor \"%s\" is not in shard %s, "
				       "where the index puts it",
				       stfs_quote(name, strlen(name), q, QMAX),
				       stfs_quote(s, strlen(s), q2, QMAX));
			goto out;
		}
		f->used = 1;
		m->entries[m->nentries].t = f->t;
		m->entries[m->nentries++].file = (uint32_t)fi;
	}
	warn_hidden(m, all, total, warn, ctx);
	stfs_model_sort(m);
	keep_index_meta(m, &ix);
out:
	free(all);
	stfs_index_free(&ix);
	return rc;
}

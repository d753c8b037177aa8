/*
 * describe.c: a model as one JSON document, the output of `stfs inspect
 * --json` (schema: docs/inspect-json.md): the source, each file with its
 * header length and __metadata__, each tensor with its path in the mount,
 * offsets and views, and totals per dtype.
 */
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "model.h"

struct totals {
	uint64_t tensors, params, bytes;
};

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

static void totals(struct stfs_jw *w, const struct totals *t)
{
	stfs_jw_key(w, "tensors", 7);
	stfs_jw_u64(w, t->tensors);
	stfs_jw_key(w, "parameters", 10);
	stfs_jw_u64(w, t->params);
	stfs_jw_key(w, "bytes", 5);
	stfs_jw_u64(w, t->bytes);
}

static void path(struct stfs_jw *w, const struct stfs_model *m,
		 uint32_t node)
{
	char *p = stfs_tree_path(&m->tree, node);

	if (!p)
		w->failed = 1;
	else
		stfs_jw_cstr(w, p);
	free(p);
}

static void views(struct stfs_jw *w, const struct stfs_model *m, size_t i)
{
	uint32_t vn[STFS_VIEW_COUNT];
	size_t n = stfs_model_tensor_views(m, i, vn);
	const struct stfs_tensor *t = m->entries[i].t;

	stfs_jw_key(w, "views", 5);
	stfs_jw_begin(w, '[');
	for (size_t k = 0; k < n; k++) {
		enum stfs_view v = (enum stfs_view)m->tree.nodes[vn[k]].extra;
		uint64_t start, size = stfs_view_size(t, v, &start);

		stfs_jw_begin(w, '{');
		stfs_jw_key(w, "view", 4);
		stfs_jw_cstr(w, stfs_view_suffix(v) + 1);
		stfs_jw_key(w, "path", 4);
		path(w, m, vn[k]);
		stfs_jw_key(w, "dtype", 5);
		stfs_jw_cstr(w, stfs_dtype_name(stfs_view_dtype(t, v)));
		stfs_jw_key(w, "bytes", 5);
		stfs_jw_u64(w, size);
		stfs_jw_key(w, "data_start", 10);
		stfs_jw_u64(w, start);
		stfs_jw_end(w, '}');
	}
	stfs_jw_end(w, ']');
}

/* A file of another format: its key-values and what was left out. */
static void foreign_file(struct stfs_jw *w, const struct stfs_header *h)
{
	stfs_jw_key(w, "key_values", 10);
	stfs_jw_begin(w, '{');
	for (size_t k = 0; k < stfs_header_kv_count(h); k++) {
		const struct stfs_meta *e = stfs_header_kv(h, k);
		stfs_jw_key(w, e->key, e->key_len);
		stfs_jw_raw(w, e->value, e->value_len);
	}
	stfs_jw_end(w, '}');
	stfs_jw_key(w, "skipped", 7);
	stfs_jw_begin(w, '[');
	for (size_t k = 0; k < stfs_header_skipped_count(h); k++)
		stfs_jw_cstr(w, stfs_header_skipped(h, k));
	stfs_jw_end(w, ']');
}

/* A tensor of another format: its own type, a view's strides, and why
 * %model.safetensors leaves it out. */
static void foreign_tensor(struct stfs_jw *w, const struct stfs_tensor *t)
{
	stfs_jw_key(w, "type", 4);
	stfs_jw_cstr(w, stfs_tensor_type(t));
	if (t->foreign->strides) {
		stfs_jw_key(w, "strides", 7);
		stfs_jw_u64s(w, t->foreign->strides, t->rank);
	}
	if (!stfs_virtual_represents(t, STFS_VIRTUAL_KIND_FULL)) {
		stfs_jw_key(w, "left_out", 8);
		stfs_jw_cstr(w, stfs_model_left_out_why(t));
	}
}

/* The "files" array: each file's size, header, format and metadata. */
static void files(struct stfs_jw *w, const struct stfs_model *m)
{
	stfs_jw_key(w, "files", 5);
	stfs_jw_begin(w, '[');
	for (size_t i = 0; i < m->nfiles; i++) {
		const struct stfs_header *h = m->files[i]->header;

		stfs_jw_begin(w, '{');
		stfs_jw_key(w, "file", 4);
		stfs_jw_cstr(w, m->file_names[i]);
		stfs_jw_key(w, "size", 4);
		stfs_jw_u64(w, stfs_file_size(m->files[i]));
		stfs_jw_key(w, "header_len", 10);
		stfs_jw_u64(w, m->files[i]->header_len);
		stfs_jw_key(w, "format", 6);
		stfs_jw_cstr(w, m->files[i]->format);
		if (m->files[i]->doc)
			foreign_file(w, h);
		stfs_jw_key(w, "metadata", 8);
		if (!stfs_header_has_metadata(h)) {
			stfs_jw_null(w);
		} else {
			stfs_jw_begin(w, '{');
			for (size_t k = 0; k < stfs_header_meta_count(h); k++) {
				const struct stfs_meta *e =
					stfs_header_meta(h, k);
				stfs_jw_key(w, e->key, e->key_len);
				stfs_jw_str(w, e->value, e->value_len);
			}
			stfs_jw_end(w, '}');
		}
		stfs_jw_end(w, '}');
	}
	stfs_jw_end(w, ']');
}

/* Entry i of the "tensors" array. */
static void tensor(struct stfs_jw *w, const struct stfs_model *m, size_t i,
		   int want_views)
{
	const struct stfs_tensor *t = m->entries[i].t;
	uint64_t off[2] = { t->begin, t->end };

	stfs_jw_begin(w, '{');
	stfs_jw_key(w, "name", 4);
	stfs_jw_str(w, t->name, t->name_len);
	stfs_jw_key(w, "path", 4);
	path(w, m, m->tree.entry_node[i]);
	stfs_jw_key(w, "dtype", 5);
	if (t->dtype == STFS_DTYPE_NONE)
		stfs_jw_null(w);
	else
		stfs_jw_cstr(w, stfs_dtype_name(t->dtype));
	if (t->foreign)
		foreign_tensor(w, t);
	stfs_jw_key(w, "shape", 5);
	stfs_jw_u64s(w, t->shape, t->rank);
	stfs_jw_key(w, "bytes", 5);
	stfs_jw_u64(w, stfs_tensor_bytes(t));
	stfs_jw_key(w, "data_offsets", 12);
	stfs_jw_u64s(w, off, 2);
	stfs_jw_key(w, "file", 4);
	stfs_jw_cstr(w, m->file_names[m->entries[i].file]);
	stfs_jw_key(w, "file_offset", 11);
	stfs_jw_u64(w, stfs_model_tensor_offset(m, i));
	if (want_views)
		views(w, m, i);
	stfs_jw_end(w, '}');
}

/* Add tensor t to the totals and to its dtype's. */
static void tally(struct totals *all, struct totals *by,
		  const struct stfs_tensor *t)
{
	uint64_t n = stfs_tensor_elements(t);
	struct totals *d = &by[t->dtype];

	d->tensors++;
	d->params = sat_add(d->params, n);
	d->bytes += stfs_tensor_bytes(t);
	all->tensors++;
	all->params = sat_add(all->params, n);
	all->bytes += stfs_tensor_bytes(t);
}

char *stfs_model_json(const struct stfs_model *m, int want_views,
		      size_t *len)
{
	struct totals all = { 0 }, by[STFS_DTYPE_COUNT + 1];
	struct stfs_jw w;

	memset(by, 0, sizeof(by));
	stfs_jw_init(&w, 1);
	stfs_jw_begin(&w, '{');
	stfs_jw_key(&w, "source", 6);
	stfs_jw_cstr(&w, m->loc->arg);
	stfs_jw_key(&w, "sharded", 7);
	stfs_jw_bool(&w, m->sharded);
	files(&w, m);
	stfs_jw_key(&w, "tensors", 7);
	stfs_jw_begin(&w, '[');
	for (size_t i = 0; i < m->nentries; i++) {
		tally(&all, by, m->entries[i].t);
		tensor(&w, m, i, want_views);
	}
	stfs_jw_end(&w, ']');
	stfs_jw_key(&w, "totals", 6);
	stfs_jw_begin(&w, '{');
	totals(&w, &all);
	stfs_jw_key(&w, "by_dtype", 8);
	stfs_jw_begin(&w, '{');
	for (int d = 0; d <= STFS_DTYPE_COUNT; d++) {
		const char *dn = d == STFS_DTYPE_NONE ? "other" :
				 stfs_dtype_name((enum stfs_dtype)d);
		if (!by[d].tensors)
			continue;
		stfs_jw_key(&w, dn, strlen(dn));
		stfs_jw_begin(&w, '{');
		totals(&w, &by[d]);
		stfs_jw_end(&w, '}');
	}
	stfs_jw_end(&w, '}');
	stfs_jw_end(&w, '}');
	stfs_jw_end(&w, '}');
	return stfs_jw_finish(&w, len);
}

/*
 * index_json.c: the header file of a sharded mount: a merged index, with
 * the index's own "metadata" (or the total size), the weight_map, every
 * tensor with its file, dtype, shape and offsets, and each shard's size
 * and __metadata__.  Written with the one JSON writer (format layer).
 * Also the header file of a single file when a selection is active: its
 * header with only the selected tensors, their offsets as stored.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "model.h"

static void meta_obj(struct stfs_jw *w, const struct stfs_header *h)
{
	stfs_jw_begin(w, '{');
	for (size_t k = 0; k < stfs_header_meta_count(h); k++) {
		const struct stfs_meta *e = stfs_header_meta(h, k);
		stfs_jw_key(w, e->key, e->key_len);
		stfs_jw_str(w, e->value, e->value_len);
	}
	stfs_jw_end(w, '}');
}

/* A remote shard's URL and ETag (the service's, else the server's). */
static void shard_origin(struct stfs_jw *w, const struct stfs_source *s)
{
	const char *etag = stfs_source_origin(s, STFS_ORIGIN_ETAG);
	struct stfs_source_info si;

	stfs_source_info(s, &si);
	if (si.url) {
		stfs_jw_key(w, "url", 3);
		stfs_jw_cstr(w, si.url);
	}
	if (!etag || !*etag)
		etag = si.url ? si.etag : NULL;
	if (etag) {
		stfs_jw_key(w, "etag", 4);
		stfs_jw_cstr(w, etag);
	}
}

int stfs_model_index_json(struct stfs_model *m, const char *index_meta,
			  size_t meta_len, struct stfs_error *err)
{
	struct stfs_jw w;
	uint64_t total = 0;
	size_t len;
	char *s;

	stfs_jw_init(&w, 1);
	stfs_jw_begin(&w, '{');
	stfs_jw_key(&w, "metadata", 8);
	if (index_meta) {
		stfs_jw_raw(&w, index_meta, meta_len);
	} else {
		for (size_t i = 0; i < m->nentries; i++)
			total += m->entries[i].t->end - m->entries[i].t->begin;
		stfs_jw_begin(&w, '{');
		stfs_jw_key(&w, "total_size", 10);
		stfs_jw_u64(&w, total);
		stfs_jw_end(&w, '}');
	}
	stfs_jw_key(&w, "weight_map", 10);
	stfs_jw_begin(&w, '{');
	for (size_t i = 0; i < m->nentries; i++) {
		const struct stfs_tensor *t = m->entries[i].t;
		stfs_jw_key(&w, t->name, t->name_len);
		stfs_jw_cstr(&w, m->file_names[m->entries[i].file]);
	}
	stfs_jw_end(&w, '}');
	stfs_jw_key(&w, "tensors", 7);
	stfs_jw_begin(&w, '[');
	for (size_t i = 0; i < m->nentries; i++) {
		const struct stfs_entry *e = &m->entries[i];
		const struct stfs_tensor *t = e->t;

		stfs_jw_begin(&w, '{');
		stfs_jw_key(&w, "name", 4);
		stfs_jw_str(&w, t->name, t->name_len);
		stfs_jw_key(&w, "file", 4);
		stfs_jw_cstr(&w, m->file_names[e->file]);
		stfs_jw_tensor_fields(&w, t->dtype, t->shape, t->rank, t->begin,
				      t->end);
		stfs_jw_key(&w, "file_offset", 11);
		stfs_jw_u64(&w, stfs_model_tensor_offset(m, i));
		stfs_jw_end(&w, '}');
	}
	stfs_jw_end(&w, ']');
	if (m->nfiles && stfs_source_origin(m->files[0]->src,
					    STFS_ORIGIN_REPO)) {
		const struct stfs_source *s0 = m->files[0]->src;
		const char *rev = stfs_source_origin(s0, STFS_ORIGIN_REVISION);

		stfs_jw_key(&w, "origin", 6);
		stfs_jw_begin(&w, '{');
		stfs_jw_key(&w, "repo", 4);
		stfs_jw_cstr(&w, stfs_source_origin(s0, STFS_ORIGIN_REPO));
		if (rev) {
			stfs_jw_key(&w, "revision", 8);
			stfs_jw_cstr(&w, rev);
		}
		stfs_jw_end(&w, '}');
	}
	stfs_jw_key(&w, "shards", 6);
	stfs_jw_begin(&w, '{');
	for (size_t i = 0; i < m->nfiles; i++) {
		stfs_jw_key(&w, m->file_names[i], strlen(m->file_names[i]));
		stfs_jw_begin(&w, '{');
		stfs_jw_key(&w, "__metadata__", 12);
		meta_obj(&w, m->files[i]->header);
		stfs_jw_key(&w, "size", 4);
		stfs_jw_u64(&w, stfs_file_size(m->files[i]));
		shard_origin(&w, m->files[i]->src);
		stfs_jw_end(&w, '}');
	}
	stfs_jw_end(&w, '}');
	stfs_jw_end(&w, '}');
	stfs_jw_raw(&w, "\n", 1);
	if (!(s = stfs_jw_finish(&w, &len)))
		return stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET,
				 "out of memory writing the merged index");
	m->index = s;
	m->index_len = len;
	return 0;
}

int stfs_model_header_selected(struct stfs_model *m, struct stfs_error *err)
{
	const struct stfs_header *h = m->files[0]->header;
	struct stfs_jw w;
	size_t len;
	char *s;

	stfs_jw_init(&w, 0);
	stfs_jw_begin(&w, '{');
	if (stfs_header_has_metadata(h)) {
		stfs_jw_key(&w, "__metadata__", 12);
		meta_obj(&w, h);
	}
	for (size_t i = 0; i < m->nentries; i++) {
		const struct stfs_tensor *t = m->entries[i].t;

		stfs_jw_tensor(&w, t->name, t->name_len, t->dtype, t->shape,
			       t->rank, t->begin, t->end);
	}
	stfs_jw_end(&w, '}');
	if (!(s = stfs_jw_finish(&w, &len)))
		return stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET,
				 "out of memory writing the header file");
	m->index = s;
	m->index_len = len;
	return 0;
}

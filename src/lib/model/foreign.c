/*
 * foreign.c: the header file (%header.json) of a file of another format
 * (GGUF, PyTorch; docs/formats.md).  Such a file has no safetensors header
 * to serve, so its header file is generated once at open: the format, its
 * key-values (GGUF metadata, PyTorch plain values) as JSON, every tensor
 * with its dtype (null when safetensors cannot name its type), the
 * format's own type, the row-major shape, the absolute byte range and a
 * view's strides, and what the reader left out.
 */
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "model.h"

static void tensor(struct stfs_jw *w, const struct stfs_tensor *t)
{
	const struct stfs_foreign *f = t->foreign;

	stfs_jw_key(w, t->name, t->name_len);
	stfs_jw_begin(w, '{');
	stfs_jw_key(w, "dtype", 5);
	if (t->dtype == STFS_DTYPE_NONE)
		stfs_jw_null(w);
	else
		stfs_jw_cstr(w, stfs_dtype_name(t->dtype));
	if (f && f->type) {
		stfs_jw_key(w, "type", 4);
		stfs_jw_cstr(w, f->type);
	}
	stfs_jw_key(w, "shape", 5);
	stfs_jw_u64s(w, t->shape, t->rank);
	stfs_jw_key(w, "offsets", 7);
	stfs_jw_u64s(w, (uint64_t[]){ t->begin, t->end }, 2);
	if (f && f->strides) {
		stfs_jw_key(w, "strides", 7);
		stfs_jw_u64s(w, f->strides, t->rank);
	}
	stfs_jw_end(w, '}');
}

char *stfs_foreign_doc(const struct stfs_file *f, size_t *len)
{
	const struct stfs_header *h = f->header;
	struct stfs_jw w;

	stfs_jw_init(&w, 1);
	stfs_jw_begin(&w, '{');
	stfs_jw_key(&w, "format", 6);
	stfs_jw_cstr(&w, stfs_header_format(h));
	stfs_jw_key(&w, "metadata", 8);
	stfs_jw_begin(&w, '{');
	for (size_t i = 0; i < stfs_header_kv_count(h); i++) {
		const struct stfs_meta *kv = stfs_header_kv(h, i);
		stfs_jw_key(&w, kv->key, kv->key_len);
		stfs_jw_raw(&w, kv->value, kv->value_len);
	}
	stfs_jw_end(&w, '}');
	stfs_jw_key(&w, "tensors", 7);
	stfs_jw_begin(&w, '{');
	for (size_t i = 0; i < stfs_header_count(h); i++)
		tensor(&w, stfs_header_tensor_by_name(h, i));
	stfs_jw_end(&w, '}');
	stfs_jw_key(&w, "skipped", 7);
	stfs_jw_begin(&w, '[');
	for (size_t i = 0; i < stfs_header_skipped_count(h); i++)
		stfs_jw_cstr(&w, stfs_header_skipped(h, i));
	stfs_jw_end(&w, ']');
	stfs_jw_end(&w, '}');
	return stfs_jw_finish(&w, len);
}

/*
 * access.c: the public read side of a parsed safetensors header (the
 * struct stfs_header that header.c fills): its tensors by position and by
 * name, its metadata, what it skipped, and each tensor's element and byte
 * counts.  Nothing here fails or allocates.
 */
#include <stdlib.h>
#include <string.h>

#include "stfs/stfs.h"
#include "format.h"

void stfs_header_free(struct stfs_header *h)
{
	if (!h)
		return;
	if (h->tensors)
		free(h->tensors);
	free(h->meta);
	free(h->arena);
	free(h->dims);
	free(h->by_name);
	if (h->ext_free)
		h->ext_free(h->ext);
	free(h);
}

const char *stfs_header_format(const struct stfs_header *h)
{
	return h->format ? h->format : "safetensors";
}

size_t stfs_header_kv_count(const struct stfs_header *h)
{
	return h->nkv;
}

const struct stfs_meta *stfs_header_kv(const struct stfs_header *h,
				       size_t i)
{
	return i < h->nkv ? &h->kv[i] : NULL;
}

size_t stfs_header_skipped_count(const struct stfs_header *h)
{
	return h->nskipped;
}

const char *stfs_header_skipped(const struct stfs_header *h, size_t i)
{
	return i < h->nskipped ? h->skipped[i] : NULL;
}

const struct stfs_tensor *stfs_header_tensor_by_name(
	const struct stfs_header *h, size_t i)
{
	return i < h->count ? &h->tensors[h->by_name[i]] : NULL;
}

size_t stfs_header_count(const struct stfs_header *h)
{
	return h->count;
}

const struct stfs_tensor *stfs_header_tensor(const struct stfs_header *h,
					     size_t i)
{
	return i < h->count ? &h->tensors[i] : NULL;
}

int stfs_header_has_metadata(const struct stfs_header *h)
{
	return h->has_meta;
}

size_t stfs_header_meta_count(const struct stfs_header *h)
{
	return h->nmeta;
}

const struct stfs_meta *stfs_header_meta(const struct stfs_header *h,
					 size_t i)
{
	return i < h->nmeta ? &h->meta[i] : NULL;
}

uint64_t stfs_header_data_len(const struct stfs_header *h)
{
	return h->data_len;
}

uint64_t stfs_tensor_elements(const struct stfs_tensor *t)
{
	uint64_t n = 1;

	for (size_t i = 0; i < t->rank; i++)
		n *= t->shape[i];
	return n;
}

const char *stfs_tensor_type(const struct stfs_tensor *t)
{
	if (t->dtype == STFS_DTYPE_NONE)
		return t->foreign && t->foreign->type ? t->foreign->type : "?";
	return stfs_dtype_name(t->dtype);
}

uint64_t stfs_tensor_bytes(const struct stfs_tensor *t)
{
	if (t->foreign && t->foreign->strides)
		return stfs_tensor_elements(t) * t->foreign->elem_bytes;
	return t->end - t->begin;
}

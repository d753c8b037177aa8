/*
 * table.c: the tensor table of a file of another format (GGUF, PyTorch).
 *
 * A format's reader adds one record per tensor (name, dtype or the
 * format's own type, row-major shape, the absolute byte range, strides for
 * a view) and its key-values; stfs_table_finish checks the whole and
 * makes a struct stfs_header that the model serves exactly as a
 * safetensors file's.  The safetensors rules of contiguity and a complete
 * buffer (R15, R20) do not apply; these do, with errors naming the file,
 * the tensor and the rule:
 *   - every range lies inside the file;
 *   - the size of dtype x shape (or of the quantized blocks) is the range's,
 *     overflow-checked; a view's furthest element lies inside its range;
 *   - a name appears once; ranges do not overlap unless the format allows
 *     it (tied weights: two keys over one storage).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"

/* One tensor: the public records and the copies they point into. */
struct trec {
	struct stfs_tensor t;
	struct stfs_foreign f;
	uint64_t dims[];          /* shape, then strides */
};

struct stfs_table {
	const char *format;
	char *name;
	struct trec **recs;
	size_t n, cap;
	struct stfs_meta *kv;
	size_t nkv, capkv;
	char **skipped;
	size_t nskipped, capskipped;
};

static int rd_mem(void *ctx, void *buf, size_t len, uint64_t off)
{
	const struct stfs_reader *r = ctx;

	if (off > r->size || len > r->size - off)
		return -EIO;
	if (len)
		memcpy(buf, (const char *)r->mem + off, len);
	return 0;
}

void stfs_reader_mem(struct stfs_reader *r, const void *p, size_t n,
		     const char *name)
{
	r->read = rd_mem;
	r->ctx = r;
	r->mem = p;
	r->size = n;
	r->name = name;
}

struct stfs_table *stfs_table_new(const char *format, const char *name)
{
	struct stfs_table *tb = calloc(1, sizeof(*tb));

	if (tb && !(tb->name = strdup(name ? name : "?"))) {
		free(tb);
		return NULL;
	}
	if (tb)
		tb->format = format;
	return tb;
}

static void table_free(void *p)
{
	struct stfs_table *tb = p;

	if (!tb)
		return;
	for (size_t i = 0; i < tb->n; i++)
		free(tb->recs[i]);
	for (size_t i = 0; i < tb->nkv; i++) {
		free((char *)tb->kv[i].key);
		free((char *)tb->kv[i].value);
	}
	for (size_t i = 0; i < tb->nskipped; i++)
		free(tb->skipped[i]);
	free(tb->recs);
	free(tb->kv);
	free(tb->skipped);
	free(tb->name);
	free(tb);
}

void stfs_table_free(struct stfs_table *tb)
{
	table_free(tb);
}

/* The bytes dtype x shape (or quant's blocks) take: 0 or an error. */
static int want_bytes(const struct stfs_table *tb, const struct stfs_rec *r,
		      const char *q, uint64_t nel, uint64_t *out,
		      struct stfs_error *err)
{
	unsigned bb, be;

	if (r->dtype != STFS_DTYPE_NONE) {
		unsigned bits = stfs_dtype_bits(r->dtype);

		if (!bits)
			return stfs_fail(err, -EINVAL, "dtype", STFS_NO_OFFSET,
					 "tensor \"%s\": no such dtype",
					 q);
		if (nel > UINT64_MAX / bits)
			return stfs_fail(err, -EINVAL, "size-overflow",
					 STFS_NO_OFFSET, "tensor \"%s\": "
					 "%" PRIu64 " elements overflow",
					 q, nel);
		if (nel * bits % 8)
			return stfs_fail(err, -EINVAL, "whole-bytes",
					 STFS_NO_OFFSET, "tensor \"%s\": "
					 "not a whole number of bytes",
					 q);
		*out = nel * bits / 8;
		return 0;
	}
	if (!r->quant) {          /* the reader sized it itself */
		*out = r->end - r->begin;
		return 0;
	}
	be = stfs_quant_block(r->quant, &bb);
	if (!be || r->strides)
		return stfs_fail(err, -EINVAL, "type", STFS_NO_OFFSET,
				 "tensor \"%s\": no such quantized type",
				 q);
	if (r->rank == 0 || r->shape[r->rank - 1] % be)
		return stfs_fail(err, -EINVAL, "block-size", STFS_NO_OFFSET,
				 "tensor \"%s\": %s rows must be a "
				 "multiple of %u elements", q,
				 r->type ? r->type : "?", be);
	if (nel / be > UINT64_MAX / bb)
		return stfs_fail(err, -EINVAL, "size-overflow", STFS_NO_OFFSET,
				 "tensor \"%s\": size overflows",
				 q);
	*out = nel / be * bb;
	return 0;
}

/* The bytes one element of a view takes: its dtype's, or (dtype NONE)
 * the reader's; 0: it has none (a sub-byte or block type). */
unsigned stfs_rec_elem_bytes(const struct stfs_rec *r)
{
	unsigned bits = stfs_dtype_bits(r->dtype);

	if (r->dtype == STFS_DTYPE_NONE)
		return r->quant ? 0 : r->elem_bytes;
	return bits % 8 ? 0 : bits / 8;
}

int stfs_rec_view_fits(const struct stfs_rec *r, uint64_t *out)
{
	uint64_t nel = 1, eb = stfs_rec_elem_bytes(r), span = r->end - r->begin;

	for (size_t i = 0; i < r->rank; i++)
		if (__builtin_mul_overflow(nel, r->shape[i], &nel))
			nel = UINT64_MAX;
	if (__builtin_mul_overflow(nel, eb, out))
		*out = UINT64_MAX;
	return *out <= (span > STFS_VIEW_BYTES_FLOOR ? span
						     : STFS_VIEW_BYTES_FLOOR);
}

/* A view's furthest element must lie inside [begin, end), and its
 * gathered bytes within the limit. */
static int check_strides(const struct stfs_table *tb,
			 const struct stfs_rec *r, const char *q, uint64_t nel,
			 struct stfs_error *err)
{
	uint64_t last = 0, eb = stfs_rec_elem_bytes(r), out;

	if (eb == 0)
		return stfs_fail(err, -EINVAL, "view-dtype", STFS_NO_OFFSET,
				 "tensor \"%s\": a strided view of a type "
				 "with no whole-byte element", q);
	if (!stfs_rec_view_fits(r, &out))
		return stfs_fail(err, -EINVAL, "view-size", STFS_NO_OFFSET,
				 "tensor \"%s\": a view of %" PRIu64 " bytes "
				 "over %" PRIu64 " bytes of storage, past the "
				 "limit", q, out, r->end - r->begin);
	if (nel == 0)
		return 0;
	for (size_t i = 0; i < r->rank; i++) {
		uint64_t d = r->shape[i] - 1;

		if (r->strides[i] && d > (UINT64_MAX - last) / r->strides[i])
			goto overflow;
		last += d * r->strides[i];
	}
	if (last >= UINT64_MAX / eb)
		goto overflow;
	if ((last + 1) * eb > r->end - r->begin)
		return stfs_fail(err, -EINVAL, "view-bounds", STFS_NO_OFFSET,
				 "tensor \"%s\": its strides reach byte "
				 "%" PRIu64 " of a %" PRIu64 "-byte storage",
				 q, (last + 1) * eb,
				 r->end - r->begin);
	return 0;
overflow:
	return stfs_fail(err, -EINVAL, "size-overflow", STFS_NO_OFFSET,
			 "tensor \"%s\": strides overflow", q);
}

static int check_rec(const struct stfs_table *tb, const struct stfs_rec *r,
		     uint64_t file_size, const char *q, struct stfs_error *err)
{
	uint64_t nel = 1, want = 0;
	size_t bad;
	int rc;

	if (!stfs_utf8_valid(r->name, r->name_len, &bad))
		return stfs_fail(err, -EINVAL, "name-utf8", STFS_NO_OFFSET,
				 "tensor \"%s\": name is not UTF-8",
				 q);
	if (r->rank > STFS_TABLE_RANK_MAX)
		return stfs_fail(err, -EINVAL, "rank", STFS_NO_OFFSET,
				 "tensor \"%s\": %zu dimensions, over the "
				 "limit of %d", q, r->rank,
				 STFS_TABLE_RANK_MAX);
	for (size_t i = 0; i < r->rank; i++) {
		if (r->shape[i] && nel > UINT64_MAX / r->shape[i])
			return stfs_fail(err, -EINVAL, "shape-overflow",
					 STFS_NO_OFFSET, "tensor \"%s\": "
					 "the shape's product overflows",
					 q);
		nel *= r->shape[i];
	}
	if (r->begin > r->end || r->end > file_size)
		return stfs_fail(err, -EINVAL, "range", r->begin, "tensor "
				 "\"%s\": bytes [%" PRIu64 ",%" PRIu64 ") are "
				 "not inside the file (%" PRIu64 " bytes)",
				 q, r->begin, r->end, file_size);
	if ((rc = want_bytes(tb, r, q, nel, &want, err)))
		return rc;
	if (r->strides)
		return check_strides(tb, r, q, nel, err);
	if (want != r->end - r->begin)
		return stfs_fail(err, -EINVAL, "size-match", r->begin,
				 "tensor \"%s\": %" PRIu64 " bytes in the file "
				 "but %s of its shape needs %" PRIu64,
				 q, r->end - r->begin,
				 r->type ? r->type : "?", want);
	return 0;
}

int stfs_table_add(struct stfs_table *tb, const struct stfs_rec *r,
		   uint64_t file_size, struct stfs_error *err)
{
	size_t nd = r->rank * (r->strides ? 2 : 1);
	struct trec *x;
	char q[128];
	int rc;

	stfs_quote(r->name, r->name_len, q, sizeof(q));
	if (tb->n >= STFS_TABLE_TENSORS_MAX)
		return stfs_fail(err, -EINVAL, "tensor-count", STFS_NO_OFFSET,
				 "more than %u tensors",
				 STFS_TABLE_TENSORS_MAX);
	if ((rc = check_rec(tb, r, file_size, q, err)))
		return rc;
	if (stfs_grow((void **)&tb->recs, &tb->cap, tb->n + 1, sizeof(*tb->recs)))
		return stfs_nomem(err);
	x = calloc(1, sizeof(*x) + nd * 8 + r->name_len + 1);
	if (!x)
		return stfs_nomem(err);
	memcpy(x->dims, r->shape, r->rank * 8);
	if (r->strides)
		memcpy(x->dims + r->rank, r->strides, r->rank * 8);
	memcpy((char *)(x->dims + nd), r->name, r->name_len);
	x->f.format = tb->format;
	x->f.type = r->type;
	x->f.quant = r->quant;
	x->f.strides = r->strides ? x->dims + r->rank : NULL;
	x->f.elem_bytes = r->strides ? stfs_rec_elem_bytes(r) : 0;
	x->t.name = (const char *)(x->dims + nd);
	x->t.name_len = r->name_len;
	x->t.dtype = r->dtype;
	x->t.rank = r->rank;
	x->t.shape = r->rank ? x->dims : NULL;
	x->t.begin = r->begin;
	x->t.end = r->end;
	x->t.foreign = &x->f;
	tb->recs[tb->n++] = x;
	return 0;
}

int stfs_table_add_kv(struct stfs_table *tb, const char *key, size_t klen,
		      const char *json, size_t jlen, struct stfs_error *err)
{
	struct stfs_meta *m;
	char *k, *v;

	if (stfs_grow((void **)&tb->kv, &tb->capkv, tb->nkv + 1, sizeof(*tb->kv)))
		return stfs_nomem(err);
	k = malloc(klen + 1);
	v = malloc(jlen + 1);
	if (!k || !v) {
		free(k);
		free(v);
		return stfs_nomem(err);
	}
	memcpy(k, key, klen);
	k[klen] = 0;
	memcpy(v, json, jlen);
	v[jlen] = 0;
	m = &tb->kv[tb->nkv++];
	*m = (struct stfs_meta){ k, klen, v, jlen };
	return 0;
}

int stfs_table_skip(struct stfs_table *tb, const char *line,
		    struct stfs_error *err)
{
	char *s;

	if (stfs_grow((void **)&tb->skipped, &tb->capskipped, tb->nskipped + 1,
		 sizeof(*tb->skipped)) || !(s = strdup(line)))
		return stfs_nomem(err);
	tb->skipped[tb->nskipped++] = s;
	return 0;
}

static int cmp_offsets(const void *x, const void *y)
{
	const struct trec *a = *(struct trec *const *)x;
	const struct trec *b = *(struct trec *const *)y;

	if (a->t.begin != b->t.begin)
		return a->t.begin < b->t.begin ? -1 : 1;
	if (a->t.end != b->t.end)
		return a->t.end < b->t.end ? -1 : 1;
	return stfs_bytes_cmp(a->t.name, a->t.name_len, b->t.name,
			      b->t.name_len);
}

static int cmp_names(const void *x, const void *y, void *ctx)
{
	const struct stfs_tensor *t = ctx;
	const struct stfs_tensor *a = &t[*(const uint32_t *)x];
	const struct stfs_tensor *b = &t[*(const uint32_t *)y];

	return stfs_bytes_cmp(a->name, a->name_len, b->name, b->name_len);
}

static int cmp_kv(const void *x, const void *y)
{
	const struct stfs_meta *a = x, *b = y;

	return stfs_bytes_cmp(a->key, a->key_len, b->key, b->key_len);
}

/* Overlaps (in file order) and names twice (in name order). */
static int check_all(struct stfs_table *tb, const struct stfs_header *h,
		     unsigned flags, struct stfs_error *err)
{
	uint64_t reach = 0;
	size_t who = 0;
	char q1[128], q2[128];

	for (size_t i = 0; i < h->count && !(flags & STFS_TABLE_OVERLAP);
	     i++) {
		const struct stfs_tensor *t = &h->tensors[i];

		if (t->begin == t->end)
			continue;
		if (t->begin < reach)
			return stfs_fail(err, -EINVAL, "overlap", t->begin,
				"tensor \"%s\" overlaps tensor \"%s\" "
				"(bytes from %" PRIu64 ")",
				stfs_quote(t->name, t->name_len, q1, 128),
				stfs_quote(h->tensors[who].name,
					   h->tensors[who].name_len, q2, 128),
				t->begin);
		reach = t->end;
		who = i;
	}
	for (size_t i = 1; i < h->count; i++) {
		const struct stfs_tensor *a = &h->tensors[h->by_name[i - 1]];
		const struct stfs_tensor *b = &h->tensors[h->by_name[i]];

		if (!stfs_bytes_cmp(a->name, a->name_len, b->name,
				    b->name_len))
			return stfs_fail(err, -EINVAL, "duplicate-name",
					 STFS_NO_OFFSET, "tensor \"%s\" "
					 "appears twice",
					 stfs_quote(a->name, a->name_len, q1,
						    128));
	}
	for (size_t i = 1; i < tb->nkv; i++)
		if (!cmp_kv(&tb->kv[i - 1], &tb->kv[i]))
			return stfs_fail(err, -EINVAL, "duplicate-key",
					 STFS_NO_OFFSET, "key \"%s\" "
					 "appears twice",
					 stfs_quote(tb->kv[i].key,
						    tb->kv[i].key_len, q1,
						    128));
	return 0;
}

int stfs_table_finish(struct stfs_table *tb, unsigned flags,
		      struct stfs_header **out, struct stfs_error *err)
{
	struct stfs_header *h = calloc(1, sizeof(*h));
	int rc;

	*out = NULL;
	if (!h || (tb->n && (!(h->tensors = calloc(tb->n, sizeof(*h->tensors)))
			     || !(h->by_name = malloc(tb->n * 4))))) {
		rc = stfs_nomem(err);
		goto fail;
	}
	if (tb->n > 1)
		qsort(tb->recs, tb->n, sizeof(*tb->recs), cmp_offsets);
	for (size_t i = 0; i < tb->n; i++) {
		h->tensors[i] = tb->recs[i]->t;
		h->by_name[i] = (uint32_t)i;
		if (h->tensors[i].end > h->data_len)
			h->data_len = h->tensors[i].end;
	}
	h->count = tb->n;
	if (tb->n > 1)
		qsort_r(h->by_name, tb->n, 4, cmp_names, h->tensors);
	if (tb->nkv > 1)
		qsort(tb->kv, tb->nkv, sizeof(*tb->kv), cmp_kv);
	if ((rc = check_all(tb, h, flags, err)))
		goto fail;
	h->format = tb->format;
	h->kv = tb->kv;
	h->nkv = tb->nkv;
	h->skipped = tb->skipped;
	h->nskipped = tb->nskipped;
	h->ext = tb;
	h->ext_free = table_free;
	*out = h;
	return 0;
fail:
	stfs_header_free(h);
	table_free(tb);
	return rc;
}

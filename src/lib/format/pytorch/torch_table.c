/*
 * torch_table.c: a PyTorch checkpoint as a foreign-format table (the
 * model's view of any format): each tensor a record with its safetensors
 * dtype (or none: complex128, quantized), the torch type name, its shape,
 * its strides when it is a view, and its bytes in the file (a contiguous
 * tensor's own range, zero-copy; a view's from its first element to the
 * end of its storage, gathered on read); plain values as key-values;
 * objects never made as "skipped" lines naming their class.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "torch.h"

static const char *type_name(const char *torch_dtype)
{
	static const char *const names[] = {
		"torch.float32", "torch.float64", "torch.float16",
		"torch.bfloat16", "torch.uint8", "torch.int8", "torch.int16",
		"torch.int32", "torch.int64", "torch.bool", "torch.complex64",
		"torch.complex128", "torch.complex32", "torch.qint8",
		"torch.quint8", "torch.qint32", "torch.quint4x2",
		"torch.quint2x4"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(names[i] + 6, torch_dtype))
			return names[i];
	return "torch.?";
}

/* A view whose gathered bytes are past the limit: listed, left out. */
static int skip_view(struct stfs_table *tb, const struct stfs_torch_tensor *t,
		     uint64_t out, uint64_t span, struct stfs_error *err)
{
	char line[500], q[300];

	stfs_quote(t->name, t->name_len, q, sizeof(q));
	if (out == UINT64_MAX)
		snprintf(line, sizeof(line), "%s: a view whose size overflows "
			 "64 bits, left out (view-size)", q);
	else
		snprintf(line, sizeof(line), "%s: a view of %" PRIu64 " bytes "
			 "over %" PRIu64 " bytes of storage (past the larger "
			 "of its storage and %llu bytes), left out "
			 "(view-size)", q, out, span,
			 (unsigned long long)STFS_VIEW_BYTES_FLOOR);
	return stfs_table_skip(tb, line, err);
}

static int add_tensor(struct stfs_table *tb, const struct stfs_torch_tensor *t,
		      uint64_t size, struct stfs_error *err)
{
	struct stfs_rec r = {0};
	uint64_t out;

	r.name = t->name;
	r.name_len = t->name_len;
	r.dtype = t->dtype < 0 ? STFS_DTYPE_NONE : (enum stfs_dtype)t->dtype;
	r.type = type_name(t->torch_dtype);
	r.rank = t->rank;
	r.shape = t->shape;
	r.begin = t->st_begin + t->offset * t->elem_size;
	if (t->nbytes == 0) {
		r.begin = t->st_begin;
		r.end = r.begin;
	} else if (t->contiguous) {
		r.end = r.begin + t->nbytes;
	} else {
		r.strides = t->stride;
		r.elem_bytes = t->elem_size;
		r.end = t->st_begin + t->st_len;
		if (!stfs_rec_view_fits(&r, &out))
			return skip_view(tb, t, out, r.end - r.begin, err);
	}
	return stfs_table_add(tb, &r, size, err);
}

/* A plain value as JSON text. */
static char *value_json(const struct stfs_torch_value *v, size_t *len)
{
	struct stfs_jw w;
	char num[40];

	stfs_jw_init(&w, 0);
	switch (v->kind) {
	case STFS_TV_NONE:
		stfs_jw_null(&w);
		break;
	case STFS_TV_BOOL:
		stfs_jw_bool(&w, (int)v->i);
		break;
	case STFS_TV_INT:
		snprintf(num, sizeof(num), "%" PRId64, v->i);
		stfs_jw_raw(&w, num, strlen(num));
		break;
	case STFS_TV_FLOAT:
		if (isfinite(v->f)) {   /* the shortest that reads back */
			for (int p = 15; p <= 17; p++) {
				snprintf(num, sizeof(num), "%.*g", p, v->f);
				if (strtod(num, NULL) == v->f)
					break;
			}
			stfs_jw_raw(&w, num, strlen(num));
		} else {
			stfs_jw_null(&w);   /* JSON has no NaN or infinity */
		}
		break;
	case STFS_TV_STR:
		stfs_jw_str(&w, v->s, v->n);
		break;
	}
	return stfs_jw_finish(&w, len);
}

static int fill(struct stfs_table *tb, const struct stfs_torch *t,
		uint64_t size, struct stfs_error *err)
{
	char line[700], q[300];
	int rc = 0;

	for (size_t i = 0; !rc && i < t->nt; i++)
		rc = add_tensor(tb, &t->t[i], size, err);
	for (size_t i = 0; !rc && i < t->nv; i++) {
		size_t jl;
		char *j = value_json(&t->v[i], &jl);

		if (!j)
			return stfs_fail_sys(err, -ENOMEM, "cannot allocate");
		rc = stfs_table_add_kv(tb, t->v[i].key, t->v[i].key_len, j, jl,
				       err);
		free(j);
	}
	for (size_t i = 0; !rc && i < t->no; i++) {
		stfs_quote(t->o[i].key, t->o[i].key_len, q, sizeof(q));
		snprintf(line, sizeof(line), t->o[i].ref == 2 ?
			 "%s: %s, left out" : t->o[i].ref ?
			 "%s: a reference to %s, left out" :
			 "%s: an object of class %s, never made, left out",
			 q[0] ? q : "(the root)", t->o[i].cls);
		rc = stfs_table_skip(tb, line, err);
	}
	return rc;
}

/* The model's messages are prefixed with the file already: drop the
 * readers' own "NAME: " (they keep it for other callers). */
static int unprefix(int rc, const char *name, struct stfs_error *err)
{
	size_t n = strlen(name);

	if (rc && err && n && !strncmp(err->msg, name, n) &&
	    !strncmp(err->msg + n, ": ", 2))
		memmove(err->msg, err->msg + n + 2, strlen(err->msg + n + 2) + 1);
	return rc;
}

int stfs_torch_read(const struct stfs_reader *r, struct stfs_header **out,
		    uint64_t *header_len, struct stfs_error *err)
{
	struct stfs_torch *t;
	struct stfs_table *tb;
	int rc;

	*out = NULL;
	*header_len = 0;
	rc = stfs_torch_open(r->read, r->ctx, r->size, r->mem != NULL ||
			     r->cheap, r->name, &t, err);
	if (rc)
		return unprefix(rc, r->name, err);
	tb = stfs_table_new("pytorch", r->name);
	if (!tb) {
		stfs_torch_free(t);
		return stfs_fail_sys(err, -ENOMEM, "cannot allocate");
	}
	rc = fill(tb, t, r->size, err);
	*header_len = t->pickle_off + t->pickle_len;
	stfs_torch_free(t);
	if (rc) {
		stfs_table_free(tb);
		return unprefix(rc, r->name, err);
	}
	return stfs_table_finish(tb, STFS_TABLE_OVERLAP, out, err);
}

/*
 * torch_walk.c: the walk from an interpreted torch pickle to the flat
 * list: dicts, lists and tuples become '.'-joined keys, tensors are
 * placed in their storages and checked against them, plain values are
 * kept, and everything else (an object never made, a class reference,
 * bytes, a set) is listed by its class name and left out.  The walk is
 * bounded in depth, in visits (a memo can make a small pickle a huge
 * tree) and in the bytes of names it makes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "pickle.h"
#include "torch_walk.h"

#define VISITS_MAX (16u << 20)
#define NAME_BYTES_MAX (64u << 20)

static const struct {
	const char *storage, *dtype;
	int st;
	unsigned esize;
} dtypes[] = {
	{"FloatStorage", "float32", STFS_DTYPE_F32, 4},
	{"DoubleStorage", "float64", STFS_DTYPE_F64, 8},
	{"HalfStorage", "float16", STFS_DTYPE_F16, 2},
	{"BFloat16Storage", "bfloat16", STFS_DTYPE_BF16, 2},
	{"ByteStorage", "uint8", STFS_DTYPE_U8, 1},
	{"CharStorage", "int8", STFS_DTYPE_I8, 1},
	{"ShortStorage", "int16", STFS_DTYPE_I16, 2},
	{"IntStorage", "int32", STFS_DTYPE_I32, 4},
	{"LongStorage", "int64", STFS_DTYPE_I64, 8},
	{"BoolStorage", "bool", STFS_DTYPE_BOOL, 1},
	{"ComplexFloatStorage", "complex64", STFS_DTYPE_C64, 8},
	{"ComplexDoubleStorage", "complex128", -1, 16},
	{"ComplexHalfStorage", "complex32", -1, 4},
	{"QInt8Storage", "qint8", -1, 1},
	{"QUInt8Storage", "quint8", -1, 1},
	{"QInt32Storage", "qint32", -1, 4},
	{"QUInt4x2Storage", "quint4x2", -1, 1},
	{"QUInt2x4Storage", "quint2x4", -1, 1},
	{"UntypedStorage", "uint8", STFS_DTYPE_U8, 1},
};

static int eq(const char *s, size_t n, const char *lit)
{
	return n == strlen(lit) && memcmp(s, lit, n) == 0;
}

/* A storage type (torch.FloatStorage, or a dtype such as torch.float32):
 * its safetensors dtype (-1: none), torch name and element size; -EINVAL
 * if unknown. */
static int stfs_torch_dtype(const struct stfs_pk_storage *st, int *dtype,
			    const char **torch_name, unsigned *esize)
{
	if (!eq(st->mod, st->mod_len, "torch"))
		return -EINVAL;
	for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
		if (eq(st->type, st->type_len, dtypes[i].storage) ||
		    eq(st->type, st->type_len, dtypes[i].dtype)) {
			*dtype = dtypes[i].st;
			*torch_name = dtypes[i].dtype;
			*esize = dtypes[i].esize;
			return 0;
		}
	return -EINVAL;
}

static char *dup(const char *s, size_t n)
{
	char *d = malloc(n + 1);

	if (d) {
		if (n)
			memcpy(d, s, n);
		d[n] = '\0';
	}
	return d;
}

static void *grow(void *p, size_t *cap, size_t n, size_t size)
{
	size_t c;
	void *q;

	if (n < *cap)
		return p;
	c = *cap ? *cap * 2 : 16;
	q = realloc(p, c * size);
	if (q)
		*cap = c;
	return q;
}

static int fail_key(struct stfs_torch_walk *w, int code, const char *rule,
		    uint64_t off, const char *what)
{
	char q[200];

	stfs_quote(w->key, w->key_len, q, sizeof(q));
	return stfs_fail(w->err, code, rule, off, "%s: \"%s\": %s", w->name,
			 q, what);
}

/* The current key, counted against the names budget. */
static char *key_copy(struct stfs_torch_walk *w)
{
	w->name_bytes += w->key_len + 1;
	if (w->name_bytes > NAME_BYTES_MAX)
		return NULL;
	return dup(w->key, w->key_len);
}

static int add_object_ref(struct stfs_torch_walk *w, const char *cls,
			  size_t n, int ref)
{
	struct stfs_torch *o = w->out;
	struct stfs_torch_object *a;

	if (o->no >= STFS_TORCH_TENSORS_MAX)
		return fail_key(w, -E2BIG, TR_LIMIT, STFS_NO_OFFSET,
				"more objects than the limit");
	a = grow(o->o, &w->cap_o, o->no, sizeof(*a));
	if (!a)
		return stfs_fail_sys(w->err, -ENOMEM, w->name);
	o->o = a;
	a[o->no].key = key_copy(w);
	a[o->no].key_len = w->key_len;
	a[o->no].cls = dup(cls, n);
	a[o->no].ref = ref;
	if (!a[o->no].key || !a[o->no].cls) {
		free(a[o->no].key);
		free(a[o->no].cls);
		return fail_key(w, -E2BIG, TR_LIMIT, STFS_NO_OFFSET,
				"names past the limit (or out of memory)");
	}
	o->no++;
	return 0;
}

static int add_object(struct stfs_torch_walk *w, const char *cls, size_t n)
{
	return add_object_ref(w, cls, n, 0);
}

static int add_value(struct stfs_torch_walk *w, const struct stfs_pk_val *v)
{
	struct stfs_torch *o = w->out;
	struct stfs_torch_value *a;

	if (o->nv >= STFS_TORCH_TENSORS_MAX)
		return fail_key(w, -E2BIG, TR_LIMIT, STFS_NO_OFFSET,
				"more values than the limit");
	a = grow(o->v, &w->cap_v, o->nv, sizeof(*a));
	if (!a)
		return stfs_fail_sys(w->err, -ENOMEM, w->name);
	o->v = a;
	a += o->nv;
	memset(a, 0, sizeof(*a));
	a->kind = v->kind == STFS_PK_NONE ? STFS_TV_NONE :
		  v->kind == STFS_PK_BOOL ? STFS_TV_BOOL :
		  v->kind == STFS_PK_INT ? STFS_TV_INT :
		  v->kind == STFS_PK_FLOAT ? STFS_TV_FLOAT : STFS_TV_STR;
	if (v->kind == STFS_PK_FLOAT)
		a->f = v->u.f;
	else if (v->kind == STFS_PK_STR) {
		w->name_bytes += v->u.str.n;
		a->s = w->name_bytes > NAME_BYTES_MAX
			       ? NULL : dup(v->u.str.s, v->u.str.n);
		a->n = v->u.str.n;
	} else if (v->kind != STFS_PK_NONE)
		a->i = v->u.i;
	a->key = key_copy(w);
	a->key_len = w->key_len;
	if (!a->key || (v->kind == STFS_PK_STR && !a->s)) {
		free(a->key);
		free(a->s);
		return fail_key(w, -E2BIG, TR_LIMIT, STFS_NO_OFFSET,
				"names and strings past the limit");
	}
	o->nv++;
	return 0;
}

/* Where the tensor's storage is: the zip record or the legacy table. */
static int storage_bytes(struct stfs_torch_walk *w,
			 const struct stfs_pk_storage *st, unsigned esize,
			 uint64_t *begin, uint64_t *len, size_t *idx)
{
	char rec[4200], msg[200], q[64];
	uint64_t want;

	stfs_quote(st->key, st->key_len, q, sizeof(q));
	if (__builtin_mul_overflow(st->numel, (uint64_t)esize, &want))
		want = UINT64_MAX;
	if (w->kind == STFS_TORCH_LEGACY) {
		for (size_t i = 0; i < w->nlegacy; i++) {
			const struct stfs_torch_legacy *l = &w->legacy[i];

			if (l->key_len != st->key_len ||
			    memcmp(l->key, st->key, st->key_len))
				continue;
			if (l->numel * l->esize != want) {
				snprintf(msg, sizeof(msg), "storage \"%s\" holds "
					 "%" PRIu64 " elements, its persistent "
					 "id says %" PRIu64, q, l->numel,
					 st->numel);
				return fail_key(w, -EINVAL, TR_STORAGE,
						l->begin, msg);
			}
			*begin = l->begin;
			*len = want;
			*idx = i;
			return 0;
		}
	} else if (st->key_len <= 64) {
		const struct stfs_zip_entry *e;

		memcpy(rec, w->prefix, w->prefix_len);
		memcpy(rec + w->prefix_len, "/data/", 6);
		memcpy(rec + w->prefix_len + 6, st->key, st->key_len);
		e = stfs_zip_find(&w->zip, rec, w->prefix_len + 6 + st->key_len);
		if (e && e->size != want) {
			snprintf(msg, sizeof(msg), "the record of storage \"%s\" "
				 "holds %" PRIu64 " bytes, its persistent id "
				 "says %" PRIu64 " elements of %u", q, e->size,
				 st->numel, esize);
			return fail_key(w, -EINVAL, TR_STORAGE, e->lho, msg);
		}
		if (e) {
			*begin = e->data;
			*len = e->size;
			*idx = (size_t)(e - w->zip.e);
			return 0;
		}
	}
	snprintf(msg, sizeof(msg), "storage \"%s\" is not in the file", q);
	return fail_key(w, -EINVAL, TR_STORAGE, STFS_NO_OFFSET, msg);
}

/* The tensor's elements must lie in its storage (or legacy view). */
static int check_bounds(struct stfs_torch_walk *w,
			const struct stfs_pk_tensor *pt,
			const struct stfs_pk_storage *st,
			struct stfs_torch_tensor *t)
{
	uint64_t nel = 1, last = pt->offset, limit = st->numel, step;
	const uint64_t *sz = pt->dims, *sd = pt->dims + pt->rank;
	int contig = 1;
	uint64_t expect = 1;

	if (st->has_view) {
		if (st->view_off > st->numel ||
		    st->numel - st->view_off < st->view_numel)
			return fail_key(w, -EINVAL, TR_BOUNDS, pt->at,
					"a storage view past its storage");
		limit = st->view_numel;
	}
	for (size_t i = 0; i < pt->rank; i++)
		if (__builtin_mul_overflow(nel, sz[i], &nel))
			return fail_key(w, -EOVERFLOW, TR_BOUNDS, pt->at,
					"the element count overflows");
	if (__builtin_mul_overflow(nel, (uint64_t)t->elem_size, &t->nbytes) ||
	    t->nbytes > (UINT64_MAX >> 1))
		return fail_key(w, -EOVERFLOW, TR_BOUNDS, pt->at,
				"the byte count overflows");
	for (size_t i = pt->rank; i-- > 0;) {
		if (nel && (__builtin_mul_overflow(sz[i] - 1, sd[i], &step) ||
			    __builtin_add_overflow(last, step, &last)))
			return fail_key(w, -EOVERFLOW, TR_BOUNDS, pt->at,
					"size, stride and offset overflow");
		if (sz[i] != 1 && sd[i] != expect)
			contig = 0;
		if (__builtin_mul_overflow(expect, sz[i], &expect))
			expect = UINT64_MAX;
	}
	if (nel && last >= limit)
		return fail_key(w, -EINVAL, TR_BOUNDS, pt->at,
				"size, stride and offset reach past the "
				"storage");
	t->offset = pt->offset + (st->has_view ? st->view_off : 0);
	t->contiguous = contig;
	t->rank = pt->rank;
	memcpy(t->shape, sz, pt->rank * sizeof(*sz));
	memcpy(t->stride, sd, pt->rank * sizeof(*sd));
	return 0;
}

static int add_tensor(struct stfs_torch_walk *w,
		      const struct stfs_pk_tensor *pt)
{
	struct stfs_torch *o = w->out;
	struct stfs_torch_tensor *t;
	const struct stfs_pk_storage *st = pt->st;
	int rc;

	if (o->nt >= STFS_TORCH_TENSORS_MAX)
		return fail_key(w, -E2BIG, TR_LIMIT, pt->at,
				"more tensors than the limit");
	t = grow(o->t, &w->cap_t, o->nt, sizeof(*t));
	if (!t)
		return stfs_fail_sys(w->err, -ENOMEM, w->name);
	o->t = t;
	t += o->nt;
	memset(t, 0, sizeof(*t));
	if (stfs_torch_dtype(st, &t->dtype, &t->torch_dtype, &t->elem_size))
		return fail_key(w, -EINVAL, TR_STORAGE, pt->at,
				"an unknown storage type");
	rc = storage_bytes(w, st, t->elem_size, &t->st_begin, &t->st_len,
			   &t->storage);
	if (!rc)
		rc = check_bounds(w, pt, st, t);
	if (rc)
		return rc;
	t->name = key_copy(w);
	t->name_len = w->key_len;
	if (!t->name)
		return fail_key(w, -E2BIG, TR_LIMIT, pt->at,
				"names past the limit");
	o->nt++;
	return 0;
}

static int walk(struct stfs_torch_walk *w, const struct stfs_pk_val *v,
		int depth);

/* Append ".seg" (or "seg" at the root) to the key; returns the old
 * length to restore. */
static int key_push(struct stfs_torch_walk *w, const char *seg, size_t n,
		    size_t *old)
{
	size_t need = w->key_len + 1 + n + 1;

	*old = w->key_len;
	if (need > (64u << 10))
		return fail_key(w, -E2BIG, TR_LIMIT, STFS_NO_OFFSET,
				"a key longer than 64 KiB");
	if (need > w->key_cap) {
		char *k = realloc(w->key, need * 2);

		if (!k)
			return stfs_fail_sys(w->err, -ENOMEM, w->name);
		w->key = k;
		w->key_cap = need * 2;
	}
	if (w->key_len)
		w->key[w->key_len++] = '.';
	memcpy(w->key + w->key_len, seg, n);
	w->key_len += n;
	return 0;
}

/* A dict: each key once, as Python's dict has it (torch_keys.c). */
static int walk_dict(struct stfs_torch_walk *w, const struct stfs_pk_val *v,
		     int depth)
{
	size_t *win, old;
	char buf[64], why[120];
	int rc = 0;

	if (stfs_torch_dict_winners(v, &win))
		return stfs_fail_sys(w->err, -ENOMEM, w->name);
	for (size_t i = 0; !rc && i < v->u.seq.count / 2; i++) {
		const char *s, *what;
		size_t n;

		if (win[i] == SIZE_MAX)
			continue;   /* an earlier key is the same key */
		if (stfs_torch_key_seg(v->u.seq.items[2 * i], buf, sizeof(buf),
				       &s, &n, &what)) {
			int k = snprintf(why, sizeof(why), "a dict entry whose "
					 "key is %s", what);

			rc = add_object_ref(w, why, (size_t)k, 2);
			continue;
		}
		rc = key_push(w, s, n, &old);
		if (!rc)
			rc = walk(w, v->u.seq.items[2 * win[i] + 1], depth + 1);
		w->key_len = old;
	}
	free(win);
	return rc;
}

static int walk_items(struct stfs_torch_walk *w, const struct stfs_pk_val *v,
		      int depth)
{
	size_t old;
	char buf[32];
	int rc = 0;

	if (v->kind == STFS_PK_DICT)
		return walk_dict(w, v, depth);
	for (size_t i = 0; !rc && i < v->u.seq.count; i++) {
		size_t n = (size_t)snprintf(buf, sizeof(buf), "%zu", i);

		rc = key_push(w, buf, n, &old);
		if (!rc)
			rc = walk(w, v->u.seq.items[i], depth + 1);
		w->key_len = old;
	}
	return rc;
}

static int walk(struct stfs_torch_walk *w, const struct stfs_pk_val *v,
		int depth)
{
	char cls[600];
	int n;

	if (depth > STFS_PICKLE_DEPTH_MAX)
		return fail_key(w, -E2BIG, TR_LIMIT, STFS_NO_OFFSET,
				"containers nested deeper than the limit");
	if (++w->visits > VISITS_MAX)
		return fail_key(w, -E2BIG, TR_LIMIT, STFS_NO_OFFSET,
				"more values reached than the limit (shared "
				"references?)");
	switch (v->kind) {
	case STFS_PK_TENSOR:
		return add_tensor(w, v->u.t);
	case STFS_PK_DICT: case STFS_PK_LIST: case STFS_PK_TUPLE:
		return walk_items(w, v, depth);
	case STFS_PK_NONE: case STFS_PK_BOOL: case STFS_PK_FLOAT:
	case STFS_PK_STR:
		return add_value(w, v);
	case STFS_PK_INT:
		return v->big ? add_object(w, "int", 3) : add_value(w, v);
	case STFS_PK_GLOBAL: case STFS_PK_OBJECT:
		n = snprintf(cls, sizeof(cls), "%.*s.%.*s",
			     (int)(v->u.g.mod_len > 280 ? 280 : v->u.g.mod_len),
			     v->u.g.mod,
			     (int)(v->u.g.nm_len > 280 ? 280 : v->u.g.nm_len),
			     v->u.g.nm);
		return add_object_ref(w, cls, (size_t)n,
				      v->kind == STFS_PK_GLOBAL);
	case STFS_PK_STORAGE:
		return add_object(w, "torch storage", 13);
	case STFS_PK_BYTES:
		return add_object(w, "bytes", 5);
	case STFS_PK_SET:
		return add_object(w, "set", 3);
	default:
		return add_object(w, "?", 1);
	}
}

int stfs_torch_walk(struct stfs_torch_walk *w)
{
	size_t old;
	int rc;

	if (w->root->kind == STFS_PK_TENSOR) {   /* a bare tensor */
		rc = key_push(w, "tensor", 6, &old);
		if (rc)
			return rc;
	}
	rc = walk(w, w->root, 0);
	free(w->key);
	w->key = NULL;
	return rc;
}

static int st_cmp(const void *a, const void *b)
{
	const struct stfs_pk_storage *const *x = a, *const *y = b;

	return stfs_bytes_cmp((*x)->key, (*x)->key_len, (*y)->key,
			      (*y)->key_len);
}

/* Every storage the object pickle named, sorted by key. */
static int storages_by_key(struct stfs_torch_walk *w,
			   const struct stfs_pk_storage ***out, size_t *n)
{
	const struct stfs_pk_storage **a;
	size_t k = 0;

	*n = 0;
	for (const struct stfs_pk_val *v = w->pk->vals; v; v = v->next)
		k += v->kind == STFS_PK_STORAGE;
	a = malloc((k ? k : 1) * sizeof(*a));
	if (!a)
		return stfs_fail_sys(w->err, -ENOMEM, w->name);
	k = 0;
	for (const struct stfs_pk_val *v = w->pk->vals; v; v = v->next)
		if (v->kind == STFS_PK_STORAGE)
			a[k++] = v->u.st;
	qsort(a, k, sizeof(*a), st_cmp);
	*out = a;
	*n = k;
	return 0;
}

static int legacy_one(struct stfs_torch_walk *w, const struct stfs_pk_val *k,
		      const struct stfs_pk_storage **by, size_t nby,
		      uint64_t *pos, const unsigned char *buf, size_t buf_len,
		      stfs_read_fn rd, void *ctx, uint64_t size)
{
	struct stfs_pk_storage key = {0};
	const struct stfs_pk_storage *kp = &key, **st;
	struct stfs_torch_legacy *l = &w->legacy[w->nlegacy];
	unsigned char n8[8];
	int dt, rc;
	const char *tn;
	uint64_t bytes;

	if (k->kind != STFS_PK_STR)
		return stfs_fail(w->err, -EINVAL, TR_STORAGE, *pos,
				 "%s: a storage key that is not a string",
				 w->name);
	key.key = k->u.str.s;
	key.key_len = k->u.str.n;
	st = bsearch(&kp, by, nby, sizeof(*by), st_cmp);
	if (!st || stfs_torch_dtype(*st, &dt, &tn, &l->esize))
		return stfs_fail(w->err, -EINVAL, TR_STORAGE, *pos,
				 "%s: a storage in the file that no tensor "
				 "names, or of an unknown type", w->name);
	if (size < 8 || *pos > size - 8)
		return stfs_fail(w->err, -EINVAL, TR_STORAGE, *pos,
				 "%s: storages run past the end of the file",
				 w->name);
	if (*pos + 8 <= buf_len) {
		memcpy(n8, buf + *pos, 8);
	} else if ((rc = rd(ctx, n8, 8, *pos)) < 0) {
		return stfs_fail(w->err, rc, NULL, *pos, "%s: reading failed",
				 w->name);
	}
	l->numel = 0;
	for (int i = 7; i >= 0; i--)
		l->numel = l->numel << 8 | n8[i];
	l->key = key.key;
	l->key_len = key.key_len;
	l->begin = *pos + 8;
	if (__builtin_mul_overflow(l->numel, (uint64_t)l->esize, &bytes) ||
	    bytes > size - l->begin)
		return stfs_fail(w->err, -EINVAL, TR_STORAGE, *pos,
				 "%s: a storage of %" PRIu64 " elements runs "
				 "past the end of the file", w->name, l->numel);
	*pos = l->begin + bytes;
	w->nlegacy++;
	return 0;
}

int stfs_torch_legacy_storages(struct stfs_torch_walk *w,
			       struct stfs_pk_val *keys, uint64_t pos,
			       const unsigned char *buf, size_t buf_len,
			       stfs_read_fn rd, void *ctx, uint64_t size,
			       const char *name, struct stfs_error *err)
{
	const struct stfs_pk_storage **by = NULL;
	size_t nby, n = keys->u.seq.count;
	int rc;

	(void)name;
	(void)err;
	if (n > STFS_TORCH_TENSORS_MAX)
		return stfs_fail(w->err, -E2BIG, TR_LIMIT, pos,
				 "%s: more storages than the limit", w->name);
	rc = storages_by_key(w, &by, &nby);
	if (rc)
		return rc;
	w->legacy = calloc(n ? n : 1, sizeof(*w->legacy));
	if (!w->legacy)
		rc = stfs_fail_sys(w->err, -ENOMEM, w->name);
	for (size_t i = 0; !rc && i < n; i++)
		rc = legacy_one(w, keys->u.seq.items[i], by, nby, &pos, buf,
				buf_len, rd, ctx, size);
	free(by);
	return rc;
}

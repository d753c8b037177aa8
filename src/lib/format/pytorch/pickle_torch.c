/*
 * pickle_torch.c: what the pickle interpreter makes of a call or a
 * persistent id.  It recognises exactly torch's reconstruction patterns:
 * torch._utils._rebuild_tensor_v2 (and _rebuild_tensor) of a storage, an
 * offset, a size and a stride become a tensor description;
 * _rebuild_parameter gives the tensor it wraps; collections.OrderedDict()
 * is a dict; a persistent id ('storage', type, key, location, numel[,
 * view]) is a storage.  Any other call is an opaque object that keeps the
 * callable's name and is never made.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "pickle.h"

static int eq(const char *s, size_t n, const char *lit)
{
	return n == strlen(lit) && memcmp(s, lit, n) == 0;
}

/* Whether v is the GLOBAL mod.nm. */
static int stfs_pk_is_global(const struct stfs_pk_val *v, const char *mod,
			     const char *nm)
{
	return v && v->kind == STFS_PK_GLOBAL &&
	       eq(v->u.g.mod, v->u.g.mod_len, mod) &&
	       eq(v->u.g.nm, v->u.g.nm_len, nm);
}

static int is_uint(const struct stfs_pk_val *v)
{
	return v && v->kind == STFS_PK_INT && !v->big && v->u.i >= 0;
}

static struct stfs_pk_val *opaque(struct stfs_pk *pk, struct stfs_pk_val *fn)
{
	struct stfs_pk_val *o = stfs_pk_new(pk, STFS_PK_OBJECT);

	if (!o)
		return NULL;
	if (fn->kind == STFS_PK_GLOBAL || fn->kind == STFS_PK_OBJECT) {
		o->u.g = fn->u.g;
	} else {
		o->u.g.mod = "?";
		o->u.g.mod_len = 1;
		o->u.g.nm = "?";
		o->u.g.nm_len = 1;
	}
	return o;
}

/* A tuple of rank non-negative ints into dims. */
static int dims_of(const struct stfs_pk_val *v, size_t rank, uint64_t *dims)
{
	if (!v || v->kind != STFS_PK_TUPLE || v->u.seq.count != rank)
		return -1;
	for (size_t i = 0; i < rank; i++) {
		if (!is_uint(v->u.seq.items[i]))
			return -1;
		dims[i] = (uint64_t)v->u.seq.items[i]->u.i;
	}
	return 0;
}

/* _rebuild_tensor_v2(storage, offset, size, stride, ...). */
static struct stfs_pk_val *rebuild_tensor(struct stfs_pk *pk,
					  struct stfs_pk_val *args)
{
	struct stfs_pk_val **a = args->u.seq.items, *v;
	struct stfs_pk_tensor *t;
	size_t rank;

	if (args->u.seq.count < 4 || a[0]->kind != STFS_PK_STORAGE ||
	    !is_uint(a[1]) || a[2]->kind != STFS_PK_TUPLE) {
		stfs_pk_fail(pk, -EINVAL, PR_TENSOR,
			     "a tensor's rebuild arguments are not (storage, "
			     "offset, size, stride)", "");
		return NULL;
	}
	rank = a[2]->u.seq.count;
	if (rank > STFS_TORCH_RANK_MAX) {
		stfs_pk_fail(pk, -E2BIG, PR_TENSOR,
			     "a tensor of more dimensions than the limit", "");
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (t)
		t->dims = calloc(rank ? 2 * rank : 1, sizeof(*t->dims));
	if (!t || !t->dims) {
		if (t)
			free(t);
		stfs_pk_fail(pk, -ENOMEM, NULL, "out of memory", "");
		return NULL;
	}
	t->st = a[0]->u.st;
	t->offset = (uint64_t)a[1]->u.i;
	t->rank = rank;
	t->at = pk->base + pk->op_at;
	if (dims_of(a[2], rank, t->dims) ||
	    dims_of(a[3], rank, t->dims + rank)) {
		free(t->dims);
		free(t);
		stfs_pk_fail(pk, -EINVAL, PR_TENSOR,
			     "a tensor's size or stride is not a tuple of "
			     "as many non-negative ints", "");
		return NULL;
	}
	v = stfs_pk_new(pk, STFS_PK_TENSOR);
	if (!v) {
		free(t->dims);
		free(t);
		return NULL;
	}
	v->u.t = t;
	return v;
}

/* OrderedDict() or OrderedDict([(k, v), ...]). */
static struct stfs_pk_val *ordered_dict(struct stfs_pk *pk,
					struct stfs_pk_val *fn,
					struct stfs_pk_val *args)
{
	struct stfs_pk_val *d, *l;

	if (args->u.seq.count == 0)
		return stfs_pk_new(pk, STFS_PK_DICT);
	l = args->u.seq.items[0];
	if (args->u.seq.count != 1 ||
	    (l->kind != STFS_PK_LIST && l->kind != STFS_PK_TUPLE))
		return opaque(pk, fn);
	for (size_t i = 0; i < l->u.seq.count; i++) {
		struct stfs_pk_val *p = l->u.seq.items[i];

		if (p->kind != STFS_PK_TUPLE || p->u.seq.count != 2)
			return opaque(pk, fn);
	}
	d = stfs_pk_new(pk, STFS_PK_DICT);
	for (size_t i = 0; d && i < l->u.seq.count; i++) {
		struct stfs_pk_val *p = l->u.seq.items[i];

		if (stfs_pk_append(pk, d, p->u.seq.items[0]) ||
		    stfs_pk_append(pk, d, p->u.seq.items[1]))
			return NULL;
	}
	return d;
}

struct stfs_pk_val *stfs_pk_call(struct stfs_pk *pk, struct stfs_pk_val *fn,
				 struct stfs_pk_val *args, int kwargs)
{
	if (!fn || !args)
		return NULL;
	if (!pk->torch || kwargs || args->kind != STFS_PK_TUPLE)
		return opaque(pk, fn);
	if (stfs_pk_is_global(fn, "torch._utils", "_rebuild_tensor_v2") ||
	    stfs_pk_is_global(fn, "torch._utils", "_rebuild_tensor"))
		return rebuild_tensor(pk, args);
	if ((stfs_pk_is_global(fn, "torch._utils", "_rebuild_parameter") ||
	     stfs_pk_is_global(fn, "torch._utils",
			       "_rebuild_parameter_with_state")) &&
	    args->u.seq.count >= 1 &&
	    args->u.seq.items[0]->kind == STFS_PK_TENSOR)
		return args->u.seq.items[0];
	if (stfs_pk_is_global(fn, "collections", "OrderedDict"))
		return ordered_dict(pk, fn, args);
	return opaque(pk, fn);
}

struct stfs_pk_val *stfs_pk_persid(struct stfs_pk *pk,
				   struct stfs_pk_val *pid)
{
	struct stfs_pk_val **a, *v;
	struct stfs_pk_storage *st;
	size_t n;

	if (!pk->torch || pid->kind != STFS_PK_TUPLE || pid->u.seq.count < 5)
		goto bad;
	a = pid->u.seq.items;
	n = pid->u.seq.count;
	if (a[0]->kind != STFS_PK_STR || !eq(a[0]->u.str.s, a[0]->u.str.n,
					     "storage") ||
	    a[1]->kind != STFS_PK_GLOBAL || a[2]->kind != STFS_PK_STR ||
	    !is_uint(a[4]) || n > 6)
		goto bad;
	/* legacy: a sixth item, None or (view key, offset, size) */
	if (n == 6 && a[5]->kind != STFS_PK_NONE &&
	    (a[5]->kind != STFS_PK_TUPLE || a[5]->u.seq.count != 3 ||
	     !is_uint(a[5]->u.seq.items[1]) || !is_uint(a[5]->u.seq.items[2])))
		goto bad;
	st = calloc(1, sizeof(*st));
	if (!st) {
		stfs_pk_fail(pk, -ENOMEM, NULL, "out of memory", "");
		return NULL;
	}
	st->mod = a[1]->u.g.mod;
	st->mod_len = a[1]->u.g.mod_len;
	st->type = a[1]->u.g.nm;
	st->type_len = a[1]->u.g.nm_len;
	st->key = a[2]->u.str.s;
	st->key_len = a[2]->u.str.n;
	st->numel = (uint64_t)a[4]->u.i;
	if (n == 6 && a[5]->kind == STFS_PK_TUPLE) {
		st->view_off = (uint64_t)a[5]->u.seq.items[1]->u.i;
		st->view_numel = (uint64_t)a[5]->u.seq.items[2]->u.i;
		st->has_view = 1;
	}
	v = stfs_pk_new(pk, STFS_PK_STORAGE);
	if (!v) {
		free(st);
		return NULL;
	}
	v->u.st = st;
	return v;
bad:
	stfs_pk_fail(pk, -EINVAL, PR_PERSID,
		     "a persistent id that is not a torch storage "
		     "('storage', type, key, location, numel)", "");
	return NULL;
}

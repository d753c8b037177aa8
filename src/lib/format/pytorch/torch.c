/*
 * torch.c: a PyTorch checkpoint as a list of tensors, plain values and
 * left-out objects.  It finds the object pickle (the zip's PREFIX/data.pkl, or
 * the fourth pickle of the legacy format), runs the interpreter on it,
 * walks the result (nested containers give '.'-joined keys), and places
 * each tensor's storage in the file: the zip record PREFIX/data/KEY, or the
 * legacy format's storages, which follow the pickles in the order of the
 * key list, each an 8-byte element count and the elements.  Every tensor
 * is checked against its storage (size, stride and offset, with overflow
 * checks) before anyone reads it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "torch.h"
#include "torch_walk.h"

static const unsigned char legacy_magic[10] = {
	0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

/* What the first bytes (n >= 4 for a useful answer) say: a zip file, a
 * pickle whose first value is torch's legacy magic number, or neither. */
static enum stfs_torch_kind stfs_torch_detect(const unsigned char *h, size_t n)
{
	size_t i = 2;

	if (n >= 4 && memcmp(h, "PK\003\004", 4) == 0)
		return STFS_TORCH_ZIP;
	if (n < 2 || h[0] != 0x80 || h[1] < 2 || h[1] > 5)
		return STFS_TORCH_NONE;
	if (n > i && h[i] == 0x95)
		i += 9;
	if (n >= i + 12 && h[i] == 0x8a && h[i + 1] == 10 &&
	    memcmp(h + i + 2, legacy_magic, 10) == 0)
		return STFS_TORCH_LEGACY;
	return STFS_TORCH_NONE;
}

/* Run one pickle at buf[*pos]; advance *pos past it. */
static int one_pickle(const unsigned char *buf, size_t len, size_t *pos,
		      int torch, const char *name, struct stfs_pk **pk,
		      struct stfs_pk_val **root, struct stfs_error *err)
{
	int rc = stfs_pk_run(buf + *pos, len - *pos, *pos, torch, name, pk,
			     root, err);

	if (!rc)
		*pos += stfs_pk_used(*pk);
	return rc;
}

/* The legacy format's pickles, from a prefix of the file.  -ENODATA:
 * the prefix is too short. */
static int legacy_pickles(const unsigned char *buf, size_t len,
			  const char *name, struct stfs_torch_walk *w,
			  struct stfs_pk **keys_pk, struct stfs_pk_val **keys,
			  size_t *end, struct stfs_error *err)
{
	struct stfs_pk *pk = NULL;
	struct stfs_pk_val *v, *k;
	size_t pos = 0, at;
	int rc, little = 0;

	rc = one_pickle(buf, len, &pos, 0, name, &pk, &v, err);
	if (!rc && !(v->kind == STFS_PK_INT && v->big && v->u.str.n == 10 &&
		     !memcmp(v->u.str.s, legacy_magic, 10)))
		rc = stfs_fail(err, -EINVAL, TR_LAYOUT, 0,
			       "%s: not torch's legacy magic number", name);
	stfs_pk_free(pk);
	pk = NULL;
	at = pos;
	if (!rc)
		rc = one_pickle(buf, len, &pos, 0, name, &pk, &v, err);
	if (!rc && (v->kind != STFS_PK_INT || v->big || v->u.i != 1001))
		rc = stfs_fail(err, -EINVAL, TR_LAYOUT, at,
			       "%s: legacy protocol version is not 1001", name);
	stfs_pk_free(pk);
	pk = NULL;
	at = pos;
	if (!rc)
		rc = one_pickle(buf, len, &pos, 0, name, &pk, &v, err);
	for (size_t i = 0; !rc && v->kind == STFS_PK_DICT &&
			   i + 1 < v->u.seq.count; i += 2) {
		k = v->u.seq.items[i];
		if (k->kind == STFS_PK_STR && k->u.str.n == 13 &&
		    !memcmp(k->u.str.s, "little_endian", 13) &&
		    v->u.seq.items[i + 1]->kind == STFS_PK_BOOL)
			little = (int)v->u.seq.items[i + 1]->u.i;
	}
	if (!rc && !little)
		rc = stfs_fail(err, -EINVAL, TR_LAYOUT, at,
			       "%s: the checkpoint is not little-endian",
			       name);
	stfs_pk_free(pk);
	pk = NULL;
	if (!rc) {
		w->pickle_off = pos;
		rc = one_pickle(buf, len, &pos, 1, name, &w->pk, &w->root,
				err);
		w->pickle_len = pos - w->pickle_off;
	}
	if (!rc)
		rc = one_pickle(buf, len, &pos, 0, name, keys_pk, keys, err);
	if (!rc && (*keys)->kind != STFS_PK_LIST)
		rc = stfs_fail(err, -EINVAL, TR_LAYOUT, pos,
			       "%s: the storage key list is not a list", name);
	*end = pos;
	return rc;
}

/* Read a prefix of the file that holds the legacy pickles, growing it. */
static int legacy_open(stfs_read_fn rd, void *ctx, uint64_t size,
		       const char *name, struct stfs_torch_walk *w,
		       struct stfs_error *err)
{
	uint64_t want = size < (1u << 20) ? size : (1u << 20);
	uint64_t cap = (uint64_t)STFS_PICKLE_SIZE_MAX + (1u << 20);
	struct stfs_pk *kpk = NULL;
	struct stfs_pk_val *keys = NULL;
	unsigned char *buf = NULL;
	size_t end = 0;
	int rc;

	for (;;) {
		unsigned char *b = realloc(buf, (size_t)want + 1);

		if (!b) {
			rc = stfs_fail_sys(err, -ENOMEM, name);
			break;
		}
		buf = b;
		rc = rd(ctx, buf, (size_t)want, 0);
		if (rc < 0) {
			rc = stfs_fail(err, rc, NULL, 0, "%s: reading failed",
				       name);
			break;
		}
		rc = legacy_pickles(buf, (size_t)want, name, w, &kpk, &keys,
				    &end, err);
		if (rc != -ENODATA || want == size || want >= cap)
			break;
		stfs_pk_free(w->pk);
		stfs_pk_free(kpk);
		w->pk = kpk = NULL;
		want = want * 8 < size ? want * 8 : size;
		if (want > cap)
			want = cap;
	}
	if (!rc)
		rc = stfs_torch_legacy_storages(w, keys, end, buf, end, rd, ctx,
						size, name, err);
	stfs_pk_free(kpk);
	w->pickle_buf = buf;   /* the values point into it */
	return rc;
}

/* The zip's object pickle and byteorder, in one read when they are
 * close together (torch writes byteorder right after data.pkl). */
static int zip_pickle(struct stfs_zip *z, stfs_read_fn rd, void *ctx,
		      const char *name, const struct stfs_zip_entry *pkl,
		      const struct stfs_zip_entry *bo, unsigned char **pbuf,
		      struct stfs_error *err)
{
	uint64_t lo = pkl->lho, hi = pkl->data + pkl->size;
	unsigned char *span, *order = NULL;
	int rc;

	(void)z;
	if (pkl->size > STFS_PICKLE_SIZE_MAX)
		return stfs_fail(err, -EFBIG, TR_LAYOUT, pkl->lho,
				 "%s: data.pkl is %" PRIu64 " bytes, past the "
				 "limit of %u", name, pkl->size,
				 STFS_PICKLE_SIZE_MAX);
	if (bo && bo->size > 16)
		return stfs_fail(err, -EINVAL, TR_LAYOUT, bo->lho,
				 "%s: byteorder is %" PRIu64 " bytes", name,
				 bo->size);
	if (bo && bo->lho < lo && lo - bo->lho < (64u << 10))
		lo = bo->lho;
	if (bo && bo->data + bo->size > hi &&
	    bo->data + bo->size - hi < (64u << 10))
		hi = bo->data + bo->size;
	span = malloc((size_t)(hi - lo) + 1);
	if (!span)
		return stfs_fail_sys(err, -ENOMEM, name);
	rc = rd(ctx, span, (size_t)(hi - lo), lo);
	if (rc < 0)
		rc = stfs_fail(err, rc, NULL, lo, "%s: reading failed", name);
	if (!rc)
		rc = stfs_zip_extract(pkl, span, lo, (size_t)(hi - lo), name,
				      pbuf, err);
	if (!rc && bo) {
		if (bo->lho >= lo && bo->data + bo->size <= hi)
			rc = stfs_zip_extract(bo, span, lo, (size_t)(hi - lo),
					      name, &order, err);
		else
			rc = stfs_zip_load(bo, rd, ctx, 16, name, &order, err);
		if (!rc && !(bo->size == 6 && !memcmp(order, "little", 6)))
			rc = stfs_fail(err, -EINVAL, TR_LAYOUT, bo->data,
				       "%s: byteorder is not \"little\"", name);
	}
	free(order);
	free(span);
	return rc;
}

/* Find PREFIX/data.pkl (one top-level folder) and PREFIX/byteorder. */
static int zip_open(stfs_read_fn rd, void *ctx, uint64_t size,
		    int read_local, const char *name, struct stfs_torch_walk *w,
		    struct stfs_error *err)
{
	const struct stfs_zip_entry *pkl = NULL, *bo;
	unsigned char *buf = NULL;
	char tmp[4200];
	int rc;

	rc = stfs_zip_open(rd, ctx, size, read_local, name, &w->zip, err);
	if (rc)
		return rc;
	for (size_t i = 0; i < w->zip.n; i++) {
		const struct stfs_zip_entry *e = &w->zip.e[i];
		const char *sl = memchr(e->name, '/', e->name_len);

		if (!sl || e->name_len - (size_t)(sl - e->name) != 9 ||
		    memcmp(sl, "/data.pkl", 9) != 0)
			continue;
		if (pkl)
			return stfs_fail(err, -EINVAL, TR_LAYOUT, e->lho,
					 "%s: two data.pkl records", name);
		pkl = e;
	}
	if (!pkl || pkl->name_len - 9 > 4096)
		return stfs_fail(err, -EINVAL, TR_LAYOUT, STFS_NO_OFFSET,
				 "%s: a zip file without a data.pkl record: "
				 "not a torch checkpoint", name);
	w->prefix_len = pkl->name_len - 9;
	memcpy(w->prefix, pkl->name, w->prefix_len);
	memcpy(tmp, pkl->name, w->prefix_len);
	memcpy(tmp + w->prefix_len, "/byteorder", 10);
	bo = stfs_zip_find(&w->zip, tmp, w->prefix_len + 10);
	rc = zip_pickle(&w->zip, rd, ctx, name, pkl, bo, &buf, err);
	w->pickle_buf = buf;   /* freed by the caller, on error too */
	if (rc)
		return rc;
	w->pickle_off = pkl->data;
	w->pickle_len = pkl->size;
	return stfs_pk_run(buf, (size_t)pkl->size, pkl->data, 1, name, &w->pk,
			   &w->root, err);
}

int stfs_torch_open(stfs_read_fn rd, void *ctx, uint64_t size,
		    int read_local, const char *name, struct stfs_torch **out,
		    struct stfs_error *err)
{
	struct stfs_torch_walk w;
	unsigned char head[32];
	size_t hn = size < sizeof(head) ? (size_t)size : sizeof(head);
	int rc;

	*out = NULL;
	memset(&w, 0, sizeof(w));
	w.name = name;
	w.err = err;
	rc = rd(ctx, head, hn, 0);
	if (rc < 0)
		return stfs_fail(err, rc, NULL, 0, "%s: reading failed", name);
	w.kind = stfs_torch_detect(head, hn);
	w.out = calloc(1, sizeof(*w.out));
	if (!w.out)
		return stfs_fail_sys(err, -ENOMEM, name);
	w.out->kind = w.kind;
	if (w.kind == STFS_TORCH_ZIP)
		rc = zip_open(rd, ctx, size, read_local, name, &w, err);
	else if (w.kind == STFS_TORCH_LEGACY)
		rc = legacy_open(rd, ctx, size, name, &w, err);
	else
		rc = stfs_fail(err, -EINVAL, TR_LAYOUT, 0,
			       "%s: neither a zip file nor a legacy torch "
			       "checkpoint", name);
	if (!rc)
		rc = stfs_torch_walk(&w);
	w.out->pickle_off = w.pickle_off;
	w.out->pickle_len = w.pickle_len;
	stfs_pk_free(w.pk);
	stfs_zip_free(&w.zip);
	free(w.pickle_buf);
	free(w.legacy);
	if (rc) {
		stfs_torch_free(w.out);
		return rc;
	}
	*out = w.out;
	return 0;
}

void stfs_torch_free(struct stfs_torch *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nt; i++)
		free(t->t[i].name);
	for (size_t i = 0; i < t->nv; i++) {
		free(t->v[i].key);
		free(t->v[i].s);
	}
	for (size_t i = 0; i < t->no; i++) {
		free(t->o[i].key);
		free(t->o[i].cls);
	}
	free(t->t);
	free(t->v);
	free(t->o);
	free(t);
}

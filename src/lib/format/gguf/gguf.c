/*
 * gguf.c: the GGUF reader (versions 2 and 3, little-endian), from the
 * published GGUF specification.
 *
 * A GGUF file is: "GGUF", a u32 version, a u64 tensor count, a u64
 * key-value count, the key-values (a string key, a u32 type, a value;
 * arrays hold a u32 type, a u64 count and the values), the tensor infos
 * (a string name, a u32 dimension count, u64 dimensions innermost first,
 * a u32 ggml type, a u64 offset into the data section), padding, and the
 * data section at the next multiple of general.alignment (default 32).
 *
 * The header is read through a bounded window (64 KiB doubling to 1 MiB),
 * so a remote file costs the range requests of its header and no more
 * than one window past it, and is hostile
 * input: every count and length is checked against the bytes left in the
 * file before anything is allocated for it, strings and arrays have
 * limits (ggml.h), dimensions are at most 4 and their product is
 * overflow-checked, types must be ggml's, offsets aligned, and the table
 * (table.c) refuses ranges past the file and overlapping tensors.
 * Errors name the key or tensor and the rule ("gguf-..."); the caller
 * names the file.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "ggml.h"

/* The window starts small and doubles on each refill up to WINDOW: a
 * small header costs one small read, a 10 MB vocabulary a few, and what
 * is read past the header's end is at most one window. */
#define WINDOW0 (64u << 10)
#define WINDOW (1u << 20)

enum { T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STRING,
       T_ARRAY, T_U64, T_I64, T_F64, T_COUNT };

static const unsigned tsize[T_COUNT] = { 1, 1, 2, 2, 4, 4, 4, 1, 8, 12,
					 8, 8, 8 };

struct cur {
	const struct stfs_reader *r;
	struct stfs_error *err;
	uint64_t pos;             /* next byte to take */
	uint64_t wpos;            /* file offset of win[0] */
	size_t wlen;
	size_t wnext;             /* the next refill's size */
	uint64_t json;            /* bytes of key-values as JSON so far */
	unsigned char *win;
	char what[160];           /* the key or tensor being read */
};

static int fail(struct cur *c, const char *rule, const char *fmt, ...)
	STFS_PRINTF(3, 4);

static int fail(struct cur *c, const char *rule, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return stfs_fail(c->err, -EINVAL, rule, c->pos, "GGUF %s%s%s",
			 c->what, *c->what ? ": " : "", msg);
}

static uint64_t left(const struct cur *c)
{
	return c->r->size - c->pos;
}

/* Take n bytes (into dst, if not NULL). */
static int take(struct cur *c, void *dst, uint64_t n)
{
	unsigned char *d = dst;

	if (n > left(c))
		return fail(c, "gguf-truncated", "%" PRIu64 " bytes at offset "
			    "%" PRIu64 " run past the end of the file (%"
			    PRIu64 " bytes)", n, c->pos, c->r->size);
	if (c->pos + n > STFS_GGUF_HEADER_MAX)
		return fail(c, "gguf-header-limit", "the header runs past %llu "
			    "bytes", STFS_GGUF_HEADER_MAX);
	if (!d) {                 /* skipped: nothing to read */
		c->pos += n;
		return 0;
	}
	while (n) {
		size_t at, k;
		int rc;

		if (c->pos < c->wpos || c->pos >= c->wpos + c->wlen) {
			uint64_t want = left(c) < c->wnext ? left(c) :
					c->wnext;

			if (c->wnext < WINDOW)
				c->wnext *= 2;

			if ((rc = c->r->read(c->r->ctx, c->win, (size_t)want,
					     c->pos)))
				return stfs_fail(c->err, rc, NULL, c->pos,
						 "cannot read the GGUF header "
						 "at offset %" PRIu64 ": %s",
						 c->pos, strerror(-rc));
			c->wpos = c->pos;
			c->wlen = (size_t)want;
		}
		at = (size_t)(c->pos - c->wpos);
		k = c->wlen - at < n ? c->wlen - at : (size_t)n;
		if (d) {
			memcpy(d, c->win + at, k);
			d += k;
		}
		c->pos += k;
		n -= k;
	}
	return 0;
}

static int u32(struct cur *c, uint32_t *v)
{
	unsigned char b[4];
	int rc = take(c, b, 4);

	*v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
	     (uint32_t)b[3] << 24;
	return rc;
}

static int u64(struct cur *c, uint64_t *v)
{
	unsigned char b[8];
	int rc = take(c, b, 8);

	*v = 0;
	for (int i = 7; i >= 0; i--)
		*v = *v << 8 | b[i];
	return rc;
}

/* A string: its bytes in a malloc'd, NUL-terminated copy; at most max
 * bytes of it are kept (the rest skipped), *len says how long it is. */
static int string_cut(struct cur *c, char **s, uint64_t *len, uint64_t max)
{
	uint64_t n, keep;
	int rc;

	*s = NULL;
	if ((rc = u64(c, &n)))
		return rc;
	if (n > left(c))
		return fail(c, "gguf-string", "a string of %" PRIu64 " bytes "
			    "runs past the end of the file", n);
	if (n > STFS_GGUF_STRING_MAX)
		return fail(c, "gguf-string", "a string of %" PRIu64 " bytes, "
			    "over the limit of %llu", n, STFS_GGUF_STRING_MAX);
	keep = n < max ? n : max;
	if (!(*s = malloc((size_t)keep + 1)))
		return stfs_fail(c->err, -ENOMEM, NULL, c->pos, "out of memory");
	if ((rc = take(c, *s, keep)) || (rc = take(c, NULL, n - keep))) {
		free(*s);
		*s = NULL;
		return rc;
	}
	(*s)[keep] = 0;
	*len = n;
	return 0;
}

/* A key or a tensor name: whole, at most the specification's 65535
 * bytes. */
static int string(struct cur *c, char **s, uint64_t *len)
{
	uint64_t at = c->pos;
	int rc = string_cut(c, s, len, STFS_GGUF_NAME_MAX + 1ull);

	if (!rc && *len > STFS_GGUF_NAME_MAX) {
		free(*s);
		*s = NULL;
		c->pos = at;
		return fail(c, "gguf-string", "a name of %" PRIu64 " bytes, over "
			    "the specification's limit of %d", *len,
			    STFS_GGUF_NAME_MAX);
	}
	return rc;
}

/* n, or less so that a UTF-8 character across byte n is left out. */
static size_t utf8_cut(const unsigned char *s, size_t n)
{
	size_t i = n;

	while (i > 0 && n - i < 3 && (s[i - 1] & 0xc0) == 0x80)
		i--;
	if (i > 0 && s[i - 1] >= 0xc0) {
		size_t need = s[i - 1] >= 0xf0 ? 4 : s[i - 1] >= 0xe0 ? 3 : 2;

		if (n - (i - 1) < need)
			return i - 1;
	}
	return n;
}

/*
 * A string value as JSON: whole up to STFS_GGUF_SHOWN_MAX bytes; past
 * it, its first bytes (cut at a character's start) and the marker
 * " [... cut by stfs: N bytes in all, at byte OFF of the file]", so the
 * metadata's JSON stays within a few times the file's bytes and the
 * whole value can still be read from the file.
 */
static int string_value(struct cur *c, struct stfs_jw *w)
{
	uint64_t len, at = c->pos + 8;
	size_t k;
	char *s, *t;
	int rc = string_cut(c, &s, &len, STFS_GGUF_SHOWN_MAX);

	if (rc)
		return rc;
	if (len <= STFS_GGUF_SHOWN_MAX) {
		stfs_jw_str(w, s, (size_t)len);
		free(s);
		return 0;
	}
	k = utf8_cut((const unsigned char *)s, STFS_GGUF_SHOWN_MAX);
	if (!(t = realloc(s, k + 100))) {
		free(s);
		return stfs_fail(c->err, -ENOMEM, NULL, c->pos, "out of memory");
	}
	k += (size_t)snprintf(t + k, 100, " " STFS_CUT_MARK "%" PRIu64
			      " bytes in all, at byte %" PRIu64 " of the "
			      "file]", len, at);
	stfs_jw_str(w, t, k);
	free(t);
	return 0;
}

static void num(struct stfs_jw *w, const char *fmt, ...) STFS_PRINTF(2, 3);

static void num(struct stfs_jw *w, const char *fmt, ...)
{
	char b[48];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(b, sizeof(b), fmt, ap);
	va_end(ap);
	stfs_jw_raw(w, b, (size_t)n);
}

static void real(struct stfs_jw *w, double d, int single)
{
	if (!isfinite(d))
		stfs_jw_null(w);        /* JSON has no NaN or infinity */
	else
		num(w, single ? "%.9g" : "%.17g", d);
}

static int value(struct cur *c, uint32_t type, struct stfs_jw *w, int depth);

static int array(struct cur *c, struct stfs_jw *w, int depth)
{
	uint32_t type;
	uint64_t n;
	int rc;

	if (depth >= STFS_GGUF_DEPTH_MAX)
		return fail(c, "gguf-depth", "arrays nested deeper than %d",
			    STFS_GGUF_DEPTH_MAX);
	if ((rc = u32(c, &type)) || (rc = u64(c, &n)))
		return rc;
	if (type >= T_COUNT)
		return fail(c, "gguf-type", "an array of unknown type %" PRIu32,
			    type);
	if (n > STFS_GGUF_ARRAY_MAX)
		return fail(c, "gguf-count", "an array of %" PRIu64 " values, "
			    "over the limit of %llu", n, STFS_GGUF_ARRAY_MAX);
	if (n > left(c) / tsize[type])
		return fail(c, "gguf-count", "an array of %" PRIu64 " values "
			    "runs past the end of the file", n);
	stfs_jw_begin(w, '[');
	for (uint64_t i = 0; i < n; i++)
		if ((rc = value(c, type, w, depth + 1)))
			return rc;
	stfs_jw_end(w, ']');
	return 0;
}

static int value(struct cur *c, uint32_t type, struct stfs_jw *w, int depth)
{
	unsigned char b[8];
	uint64_t v = 0;
	int rc;

	if (type == T_ARRAY)
		return array(c, w, depth);
	if (type == T_STRING)
		return string_value(c, w);
	if (type >= T_COUNT)
		return fail(c, "gguf-type", "unknown value type %" PRIu32, type);
	if ((rc = take(c, b, tsize[type])))
		return rc;
	for (int i = (int)tsize[type] - 1; i >= 0; i--)
		v = v << 8 | b[i];
	switch (type) {
	case T_U8: case T_U16: case T_U32: case T_U64:
		stfs_jw_u64(w, v);
		break;
	case T_I8: num(w, "%d", (int8_t)v); break;
	case T_I16: num(w, "%d", (int16_t)v); break;
	case T_I32: num(w, "%" PRId32, (int32_t)v); break;
	case T_I64: num(w, "%" PRId64, (int64_t)v); break;
	case T_BOOL:
		if (v > 1)
			return fail(c, "gguf-bool", "a bool of value %" PRIu64,
				    v);
		stfs_jw_bool(w, (int)v);
		break;
	case T_F32: {
		float f;
		uint32_t u = (uint32_t)v;
		memcpy(&f, &u, 4);
		real(w, f, 1);
		break;
	}
	default: {
		double d;
		memcpy(&d, &v, 8);
		real(w, d, 0);
		break;
	}
	}
	return 0;
}

/* One key-value into the table; general.alignment into *align. */
static int kv(struct cur *c, struct stfs_table *tb, uint64_t *align)
{
	struct stfs_jw w;
	uint32_t type;
	uint64_t klen, at;
	char *key, *json;
	size_t jlen;
	int rc;

	if ((rc = string(c, &key, &klen)))
		return rc;
	stfs_quote(key, (size_t)klen, c->what + 5, sizeof(c->what) - 7);
	memcpy(c->what, "key \"", 5);
	strcat(c->what, "\"");
	at = c->pos;
	if ((rc = u32(c, &type)))
		goto out;
	stfs_jw_init(&w, 0);
	if ((rc = value(c, type, &w, 0))) {
		free(stfs_jw_finish(&w, &jlen));
		goto out;
	}
	if (!(json = stfs_jw_finish(&w, &jlen))) {
		rc = stfs_fail(c->err, -ENOMEM, NULL, at, "out of memory");
		goto out;
	}
	c->json += jlen + klen;
	if (c->json > STFS_GGUF_JSON_MAX)
		rc = fail(c, "gguf-header-limit", "the key-values take over "
			  "%llu bytes as JSON", STFS_GGUF_JSON_MAX);
	if (!rc && klen == 17 && !memcmp(key, "general.alignment", 17)) {
		uint64_t a = strtoull(json, NULL, 10);

		if (type != T_U32 || a == 0 || (a & (a - 1)))
			rc = fail(c, "gguf-alignment", "must be a u32 power of "
				  "two, not %s of type %" PRIu32, json, type);
		*align = a;
	}
	if (!rc)
		rc = stfs_table_add_kv(tb, key, (size_t)klen, json, jlen,
				       c->err);
	free(json);
out:
	free(key);
	c->what[0] = 0;
	return rc;
}

/* One tensor info, its offset kept for when the data section is known. */
struct info {
	char *name;
	uint64_t len;
	uint32_t ndims, type;
	uint64_t dims[STFS_GGUF_DIMS_MAX];
	uint64_t off;
};

static int tensor_info(struct cur *c, struct info *t)
{
	int rc;

	if ((rc = string(c, &t->name, &t->len)))
		return rc;
	stfs_quote(t->name, (size_t)t->len, c->what + 8, sizeof(c->what) - 10);
	memcpy(c->what, "tensor \"", 8);
	strcat(c->what, "\"");
	if ((rc = u32(c, &t->ndims)))
		return rc;
	if (t->ndims > STFS_GGUF_DIMS_MAX)
		return fail(c, "gguf-dims", "%" PRIu32 " dimensions, over "
			    "ggml's %d", t->ndims, STFS_GGUF_DIMS_MAX);
	for (uint32_t i = 0; i < t->ndims; i++)
		if ((rc = u64(c, &t->dims[i])))
			return rc;
	if ((rc = u32(c, &t->type)) || (rc = u64(c, &t->off)))
		return rc;
	if (!stfs_ggml_type(t->type))
		return fail(c, "gguf-type", "unknown ggml type %" PRIu32,
			    t->type);
	return 0;
}

/* Place tensor t in the data section at data and add it to the table. */
static int place(struct cur *c, struct stfs_table *tb, const struct info *t,
		 uint64_t data, uint64_t align)
{
	const struct stfs_ggml_type *gt = stfs_ggml_type(t->type);
	uint64_t shape[STFS_GGUF_DIMS_MAX], nel = 1, bytes;
	struct stfs_rec r = { 0 };

	stfs_quote(t->name, (size_t)t->len, c->what + 8, sizeof(c->what) - 10);
	memcpy(c->what, "tensor \"", 8);
	strcat(c->what, "\"");
	for (uint32_t i = 0; i < t->ndims; i++) {
		shape[i] = t->dims[t->ndims - 1 - i];   /* row-major */
		if (t->dims[i] && nel > UINT64_MAX / t->dims[i])
			return fail(c, "gguf-dims", "the dimensions' product "
				    "overflows");
		nel *= t->dims[i];
	}
	if (t->off % align)
		return fail(c, "gguf-offset", "offset %" PRIu64 " is not a "
			    "multiple of the alignment %" PRIu64, t->off,
			    align);
	if (gt->blck > 1 && (t->ndims == 0 || t->dims[0] % gt->blck))
		return fail(c, "gguf-block", "%s rows of %" PRIu64 " elements "
			    "are not whole blocks of %u", gt->name,
			    t->ndims ? t->dims[0] : 1, gt->blck);
	if (nel / gt->blck > UINT64_MAX / gt->bytes)
		return fail(c, "gguf-dims", "the size overflows");
	bytes = nel / gt->blck * gt->bytes;
	if (t->off > UINT64_MAX - data || bytes > UINT64_MAX - data - t->off ||
	    data + t->off + bytes > c->r->size)
		return fail(c, "gguf-range", "%" PRIu64 " bytes at offset %"
			    PRIu64 " of the data section (file offset %" PRIu64
			    ") run past the end of the file (%" PRIu64
			    " bytes)", bytes, t->off, data, c->r->size);
	r.name = t->name;
	r.name_len = (size_t)t->len;
	r.dtype = gt->dtype;
	r.type = gt->name;
	r.quant = gt->quant;
	r.rank = t->ndims;
	r.shape = shape;
	r.begin = data + t->off;
	r.end = r.begin + bytes;
	return stfs_table_add(tb, &r, c->r->size, c->err);
}

int stfs_gguf_detect(const unsigned char *p, size_t n)
{
	return n >= 4 && !memcmp(p, "GGUF", 4);
}

/* The fixed part: magic, version, counts (checked against the file). */
static int preamble(struct cur *c, uint64_t *nt, uint64_t *nkv)
{
	unsigned char magic[4];
	uint32_t version;
	int rc;

	if ((rc = take(c, magic, 4)) || (rc = u32(c, &version)))
		return rc;
	if (memcmp(magic, "GGUF", 4))
		return fail(c, "gguf-magic", "not a GGUF file");
	if (version == 1)
		return fail(c, "gguf-version", "version 1 (32-bit counts) is "
			    "not read; versions 2 and 3 are");
	if (version != 2 && version != 3)
		return fail(c, "gguf-version", "version %" PRIu32 " is unknown"
			    "%s", version, (version & 0xffff) == 0 ?
			    " (a big-endian file?)" : "");
	if ((rc = u64(c, nt)) || (rc = u64(c, nkv)))
		return rc;
	if (*nkv > STFS_GGUF_KV_MAX || *nkv > left(c) / 12)
		return fail(c, "gguf-count", "%" PRIu64 " key-values: past the "
			    "end of the file or over the limit of %u", *nkv,
			    STFS_GGUF_KV_MAX);
	if (*nt > STFS_TABLE_TENSORS_MAX || *nt > left(c) / 24)
		return fail(c, "gguf-count", "%" PRIu64 " tensors: past the "
			    "end of the file or over the limit of %u", *nt,
			    STFS_TABLE_TENSORS_MAX);
	return 0;
}

static int read_all(struct cur *c, struct stfs_table *tb,
		    struct info **infos, uint64_t *ninfos, uint64_t *header_len)
{
	uint64_t n = 0, *nt = &n;
	uint64_t nkv = 0, align = 32, data;
	int rc;

	if ((rc = preamble(c, nt, &nkv)))
		return rc;
	for (uint64_t i = 0; i < nkv; i++)
		if ((rc = kv(c, tb, &align)))
			return rc;
	for (uint64_t i = 0, cap = 0; i < *nt; i++) {
		if (i == cap) {     /* grown as read: the count is a claim */
			struct info *p;

			cap = cap ? 2 * cap : 64;
			if (!(p = realloc(*infos, cap * sizeof(*p))))
				return stfs_fail(c->err, -ENOMEM, NULL, c->pos,
						 "out of memory");
			memset(p + i, 0, (cap - i) * sizeof(*p));
			*infos = p;
		}
		*ninfos = i + 1;
		if ((rc = tensor_info(c, &(*infos)[i])))
			return rc;
	}
	c->what[0] = 0;
	data = (c->pos + align - 1) / align * align;
	for (uint64_t i = 0; i < *nt; i++)
		if ((rc = place(c, tb, &(*infos)[i], data, align)))
			return rc;
	*header_len = data;
	return 0;
}

int stfs_gguf_read(const struct stfs_reader *r, struct stfs_header **out,
		   uint64_t *header_len, struct stfs_error *err)
{
	struct cur c = { .r = r, .err = err, .wnext = WINDOW0 };
	struct stfs_table *tb = stfs_table_new("gguf", r->name);
	struct info *infos = NULL;
	uint64_t nt = 0;          /* infos read */
	int rc;

	*out = NULL;
	c.win = malloc(r->size < WINDOW ? (size_t)r->size + 1 : WINDOW);
	if (!tb || !c.win) {
		rc = stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET,
			       "out of memory");
		stfs_table_free(tb);
		goto out;
	}
	if ((rc = read_all(&c, tb, &infos, &nt, header_len))) {
		stfs_table_free(tb);
		goto out;
	}
	rc = stfs_table_finish(tb, 0, out, err);
out:
	for (uint64_t i = 0; infos && i < nt; i++)
		free(infos[i].name);
	free(infos);
	free(c.win);
	return rc;
}

/*
 * header.c: the strict safetensors header parser.
 *
 * The header is a security boundary: it comes from files people download.
 * This is a hand-written, length-counted JSON parser that accepts exactly
 * what the reference reader (serde_json + serde derive in the safetensors
 * crate) accepts, and checks in the reference's order (RULES.md):
 *
 *   R4  strict UTF-8 over all N bytes, before any JSON is looked at;
 *   R5-R8 RFC 8259 syntax, a top-level object, the 4 JSON whitespace bytes
 *       around it and nesting depth <= 127;
 *   R9-R14 the HashMetadata shape: "__metadata__" is null or a string map
 *       (a second "__metadata__" is refused, a repeated key inside it: last
 *       wins), every other key is a tensor object with exactly one each of
 *       dtype / shape / data_offsets (unknown fields are parsed and
 *       ignored), and a repeated tensor name: last wins;
 *   R15-R19 walking the tensors sorted by (begin, end): the offset chain,
 *       element and bit overflow, whole bytes, and the size;
 *   R20 the tensors fill the data section exactly.
 *
 * Strings are unescaped into one arena no larger than the header (an
 * unescaped string plus its NUL never outgrows its quoted form), so names
 * may hold NUL bytes and memory stays proportional to the header.  Numbers
 * for shape and data_offsets are parsed as u64 with overflow checks; other
 * numbers are checked for JSON syntax and a finite double, as serde_json
 * does.  Recursion is bounded by the depth limit.
 */
#define _GNU_SOURCE             /* qsort_r */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stfs/stfs.h"
#include "format.h"
#include "parse.h"

static const char *qname(const struct stfs_tensor *t, char *buf)
{
	return stfs_quote(t->name, t->name_len, buf, QUOTE_MAX);
}

/* An unsigned integer for shape or data_offsets (R12, R13). */
static int parse_u64(struct parser *P, const char *rule, const char *field,
		     const char *name, uint64_t *out)
{
	uint64_t v = 0;
	uint64_t s;
	int rc;

	stfs_jp_skip_ws(P);
	s = stfs_jp_at(P);
	if (stfs_jp_peek(P) == '-' || !(stfs_jp_peek(P) >= '0' && stfs_jp_peek(P) <= '9'))
		return stfs_fail(P->err, -EINVAL, rule, s,
				 "tensor \"%s\": %s must hold integers in "
				 "0..2^64-1 (header byte %" PRIu64 ")",
				 name, field, s);
	if (stfs_jp_peek(P) == '0') {
		P->pos++;
		if (stfs_jp_peek(P) >= '0' && stfs_jp_peek(P) <= '9')
			return stfs_jp_syntax(P, "no leading zero");
	} else {
		while (stfs_jp_peek(P) >= '0' && stfs_jp_peek(P) <= '9') {
			unsigned d = (unsigned)(stfs_jp_peek(P) - '0');
			if (v > (UINT64_MAX - d) / 10) {
				if ((rc = stfs_jp_number(P)))
					return rc;
				return stfs_fail(P->err, -EINVAL, rule, s,
						 "tensor \"%s\": %s value at "
						 "header byte %" PRIu64 " is "
						 "above 2^64-1", name, field,
						 s);
			}
			v = v * 10 + d;
			P->pos++;
		}
	}
	if (stfs_jp_peek(P) == '.' || stfs_jp_peek(P) == 'e' || stfs_jp_peek(P) == 'E') {
		P->pos = (size_t)(s - P->base);
		if ((rc = stfs_jp_number(P)))
			return rc;
		return stfs_fail(P->err, -EINVAL, rule, s,
				 "tensor \"%s\": %s value at header byte %"
				 PRIu64 " is not an integer", name, field, s);
	}
	*out = v;
	return 0;
}

static int parse_dims(struct parser *P, const char *name, struct rec *r)
{
	int rc;

	stfs_jp_skip_ws(P);
	if (stfs_jp_peek(P) != '[') {
		if ((rc = stfs_jp_skip_value(P, 3)))
			return rc;
		return stfs_fail(P->err, -EINVAL, R12, r->off,
				 "tensor \"%s\": shape must be an array of "
				 "integers", name);
	}
	P->pos++;
	r->dim0 = P->ndims;
	r->t.rank = 0;
	stfs_jp_skip_ws(P);
	if (stfs_jp_peek(P) == ']') {
		P->pos++;
		return 0;
	}
	for (;;) {
		uint64_t v;

		if ((rc = parse_u64(P, R12, "shape", name, &v)))
			return rc;
		if ((rc = stfs_grow((void **)&P->dims, &P->capdims, P->ndims + 1,
			       sizeof(uint64_t))))
			return rc;
		P->dims[P->ndims++] = v;
		r->t.rank++;
		stfs_jp_skip_ws(P);
		if (stfs_jp_peek(P) == ',') {
			P->pos++;
			continue;
		}
		return stfs_jp_expect(P, ']', "',' or ']'");
	}
}

static int parse_offsets(struct parser *P, const char *name, struct rec *r)
{
	uint64_t v[2];
	int rc;

	stfs_jp_skip_ws(P);
	if (stfs_jp_peek(P) != '[') {
		if ((rc = stfs_jp_skip_value(P, 3)))
			return rc;
		return stfs_fail(P->err, -EINVAL, R13, r->off,
				 "tensor \"%s\": data_offsets must be an "
				 "array of 2 integers", name);
	}
	P->pos++;
	for (int i = 0; i < 3; i++) {
		stfs_jp_skip_ws(P);
		if (stfs_jp_peek(P) == ']') {
			if (i == 2)
				break;
			return stfs_fail(P->err, -EINVAL, R13, stfs_jp_at(P),
					 "tensor \"%s\": data_offsets has %d "
					 "element%s, not 2", name, i,
					 i == 1 ? "" : "s");
		}
		if (i == 2)
			return stfs_fail(P->err, -EINVAL, R13, stfs_jp_at(P),
					 "tensor \"%s\": data_offsets has more "
					 "than 2 elements", name);
		if (i > 0 && (rc = stfs_jp_expect(P, ',', "',' or ']'")))
			return rc;
		if ((rc = parse_u64(P, R13, "data_offsets", name, &v[i])))
			return rc;
	}
	P->pos++;
	r->t.begin = v[0];
	r->t.end = v[1];
	return 0;
}

enum { F_DTYPE = 1, F_SHAPE = 2, F_OFFSETS = 4 };

static int parse_tensor(struct parser *P, struct rec *r)
{
	char name[QUOTE_MAX];
	unsigned have = 0;
	int rc;

	qname(&r->t, name);
	stfs_jp_skip_ws(P);
	if (stfs_jp_peek(P) != '{') {
		if ((rc = stfs_jp_skip_value(P, 2)))
			return rc;
		return stfs_fail(P->err, -EINVAL, R10, r->off,
				 "tensor \"%s\": value must be an object "
				 "with dtype, shape and data_offsets", name);
	}
	if ((rc = stfs_jp_enter(P, 2)))
		return rc;
	P->pos++;
	stfs_jp_skip_ws(P);
	if (stfs_jp_peek(P) == '}') {
		P->pos++;
		goto done;
	}
	for (;;) {
		size_t mark = P->used;
		uint64_t koff;
		const char *k;
		size_t klen;
		unsigned f = 0;

		stfs_jp_skip_ws(P);
		koff = stfs_jp_at(P);
		if ((rc = stfs_jp_string(P, &k, &klen)))
			return rc;
		if (klen == 5 && memcmp(k, "dtype", 5) == 0)
			f = F_DTYPE;
		else if (klen == 5 && memcmp(k, "shape", 5) == 0)
			f = F_SHAPE;
		else if (klen == 12 && memcmp(k, "data_offsets", 12) == 0)
			f = F_OFFSETS;
		P->used = mark;
		if (f & have)
			return stfs_fail(P->err, -EINVAL, R14, koff,
					 "tensor \"%s\": duplicate field "
					 "\"%s\" at header byte %" PRIu64,
					 name, f == F_DTYPE ? "dtype" :
					 f == F_SHAPE ? "shape" :
					 "data_offsets", koff);
		have |= f;
		if ((rc = stfs_jp_expect(P, ':', "':'")))
			return rc;
		if (f == F_DTYPE) {
			const char *v;
			size_t vlen;
			char q[QUOTE_MAX];

			stfs_jp_skip_ws(P);
			if (stfs_jp_peek(P) != '"') {
				uint64_t voff = stfs_jp_at(P);
				if ((rc = stfs_jp_skip_value(P, 3)))
					return rc;
				return stfs_fail(P->err, -EINVAL, R11, voff,
						 "tensor \"%s\": dtype must be "
						 "a string", name);
			}
			if ((rc = stfs_jp_string(P, &v, &vlen)))
				return rc;
			P->used = mark;
			if (stfs_dtype_from_name(v, vlen, &r->t.dtype))
				return stfs_fail(P->err, -EINVAL, R11, koff,
						 "tensor \"%s\": unknown dtype "
						 "\"%s\"", name,
						 stfs_quote(v, vlen, q,
							    sizeof(q)));
		} else if (f == F_SHAPE) {
			if ((rc = parse_dims(P, name, r)))
				return rc;
		} else if (f == F_OFFSETS) {
			if ((rc = parse_offsets(P, name, r)))
				return rc;
		} else if ((rc = stfs_jp_skip_value(P, 3))) {
			return rc;
		}
		stfs_jp_skip_ws(P);
		if (stfs_jp_peek(P) == ',') {
			P->pos++;
			continue;
		}
		if ((rc = stfs_jp_expect(P, '}', "',' or '}'")))
			return rc;
		break;
	}
done:
	if ((have & (F_DTYPE | F_SHAPE | F_OFFSETS)) != 7)
		return stfs_fail(P->err, -EINVAL, R10, r->off,
				 "tensor \"%s\": missing field \"%s\"", name,
				 !(have & F_DTYPE) ? "dtype" :
				 !(have & F_SHAPE) ? "shape" : "data_offsets");
	return 0;
}

static int parse_metadata(struct parser *P, uint64_t koff)
{
	int rc;

	if (P->seen_meta)
		return stfs_fail(P->err, -EINVAL, R14, koff,
				 "duplicate \"__metadata__\" at header byte %"
				 PRIu64, koff);
	P->seen_meta = 1;
	stfs_jp_skip_ws(P);
	if (stfs_jp_peek(P) == 'n')
		return stfs_jp_literal(P, "null");
	if (stfs_jp_peek(P) != '{') {
		uint64_t voff = stfs_jp_at(P);
		if ((rc = stfs_jp_skip_value(P, 2)))
			return rc;
		return stfs_fail(P->err, -EINVAL, R9, voff,
				 "__metadata__ must be an object of strings "
				 "or null (header byte %" PRIu64 ")", voff);
	}
	if ((rc = stfs_jp_enter(P, 2)))
		return rc;
	P->has_meta = 1;
	P->pos++;
	stfs_jp_skip_ws(P);
	if (stfs_jp_peek(P) == '}') {
		P->pos++;
		return 0;
	}
	for (;;) {
		struct mrec *m;
		uint64_t voff;

		if ((rc = stfs_grow((void **)&P->metas, &P->capmetas,
			       P->nmetas + 1, sizeof(*P->metas))))
			return rc;
		m = &P->metas[P->nmetas];
		if ((rc = stfs_jp_string(P, &m->m.key, &m->m.key_len)))
			return rc;
		if ((rc = stfs_jp_expect(P, ':', "':'")))
			return rc;
		stfs_jp_skip_ws(P);
		voff = stfs_jp_at(P);
		if (stfs_jp_peek(P) != '"') {
			char q[QUOTE_MAX];
			if ((rc = stfs_jp_skip_value(P, 3)))
				return rc;
			return stfs_fail(P->err, -EINVAL, R9, voff,
					 "__metadata__ \"%s\": value must be "
					 "a string (header byte %" PRIu64 ")",
					 stfs_quote(m->m.key, m->m.key_len, q,
						    sizeof(q)), voff);
		}
		if ((rc = stfs_jp_string(P, &m->m.value, &m->m.value_len)))
			return rc;
		m->order = P->nmetas++;
		stfs_jp_skip_ws(P);
		if (stfs_jp_peek(P) == ',') {
			P->pos++;
			continue;
		}
		return stfs_jp_expect(P, '}', "',' or '}'");
	}
}

static int parse_top(struct parser *P)
{
	int rc;

	stfs_jp_skip_ws(P);
	if (P->pos >= P->len)
		return stfs_jp_syntax(P, "a JSON object");
	if (stfs_jp_peek(P) != '{') {
		uint64_t s = stfs_jp_at(P);
		if ((rc = stfs_jp_skip_value(P, 1)))
			return rc;
		return stfs_fail(P->err, -EINVAL, R6, s,
				 "header is not a JSON object");
	}
	P->pos++;
	stfs_jp_skip_ws(P);
	if (stfs_jp_peek(P) == '}') {
		P->pos++;
	} else {
		for (;;) {
			const char *k;
			size_t klen;
			uint64_t koff;

			stfs_jp_skip_ws(P);
			koff = stfs_jp_at(P);
			if ((rc = stfs_jp_string(P, &k, &klen)))
				return rc;
			if ((rc = stfs_jp_expect(P, ':', "':'")))
				return rc;
			if (klen == 12 && memcmp(k, "__metadata__", 12) == 0) {
				P->used -= klen + 1;
				if ((rc = parse_metadata(P, koff)))
					return rc;
			} else {
				struct rec *r;

				if ((rc = stfs_grow((void **)&P->recs, &P->caprecs,
					       P->nrecs + 1,
					       sizeof(*P->recs))))
					return rc;
				r = &P->recs[P->nrecs];
				memset(r, 0, sizeof(*r));
				r->t.name = k;
				r->t.name_len = klen;
				r->off = koff;
				r->order = P->nrecs;
				if ((rc = parse_tensor(P, r)))
					return rc;
				P->nrecs++;
			}
			stfs_jp_skip_ws(P);
			if (stfs_jp_peek(P) == ',') {
				P->pos++;
				continue;
			}
			if ((rc = stfs_jp_expect(P, '}', "',' or '}'")))
				return rc;
			break;
		}
	}
	stfs_jp_skip_ws(P);
	if (P->pos != P->len)
		return stfs_fail(P->err, -EINVAL, R7, stfs_jp_at(P),
				 "header byte %" PRIu64 ": trailing "
				 "characters after the JSON object", stfs_jp_at(P));
	return 0;
}

static int cmp_rec_name(const void *x, const void *y)
{
	const struct rec *a = x, *b = y;
	int c = stfs_bytes_cmp(a->t.name, a->t.name_len, b->t.name, b->t.name_len);

	if (c)
		return c;
	return a->order < b->order ? -1 : a->order > b->order;
}

static int cmp_rec_offsets(const void *x, const void *y)
{
	const struct rec *a = x, *b = y;

	if (a->t.begin != b->t.begin)
		return a->t.begin < b->t.begin ? -1 : 1;
	if (a->t.end != b->t.end)
		return a->t.end < b->t.end ? -1 : 1;
	return stfs_bytes_cmp(a->t.name, a->t.name_len, b->t.name, b->t.name_len);
}

static int cmp_meta(const void *x, const void *y)
{
	const struct mrec *a = x, *b = y;
	int c = stfs_bytes_cmp(a->m.key, a->m.key_len, b->m.key, b->m.key_len);

	if (c)
		return c;
	return a->order < b->order ? -1 : a->order > b->order;
}

/* Sort n records by cmp unless they are in order already, as most
 * writers leave them by offset: qsort moves whole records. */
static void sort_recs(struct rec *r, size_t n,
		      int (*cmp)(const void *, const void *))
{
	for (size_t i = 1; i < n; i++)
		if (cmp(&r[i - 1], &r[i]) > 0) {
			qsort(r, n, sizeof(*r), cmp);
			return;
		}
}

static int cmp_ix_name(const void *x, const void *y, void *recs)
{
	const struct rec *r = recs;

	return cmp_rec_name(&r[*(const uint32_t *)x], &r[*(const uint32_t *)y]);
}

#define DROPPED SIZE_MAX
_Static_assert(STFS_HEADER_MAX < UINT32_MAX, "record numbers fit in 32 bits");

/* How many '{' buf holds: every tensor entry opens an object of its own,
 * so this bounds the number of records (braces in strings only add). */
static size_t count_braces(const char *buf, size_t len)
{
	const char *p = buf, *end = buf + len;
	size_t n = 0;

	while ((p = memchr(p, '{', (size_t)(end - p)))) {
		n++;
		p++;
	}
	return n;
}

/* R14: of several equal keys the last one wins.  The records keep their
 * header order, which is usually the offsets' order as well, so that
 * validate() need not sort them; an index sorted by name (4 bytes an
 * entry, where sorting the records moved 80) gives each survivor the
 * rank of its name in ->order.  0 or -ENOMEM. */
static int last_wins_recs(struct rec *r, size_t *n)
{
	uint32_t *ix;
	size_t o = 0, rank = 0;
	int sorted = 1;

	if (*n < 2) {
		if (*n)
			r[0].order = 0;
		return 0;
	}
	if (!(ix = malloc(*n * sizeof(*ix))))
		return -ENOMEM;
	for (size_t i = 0; i < *n; i++) {
		ix[i] = (uint32_t)i;
		if (i && cmp_rec_name(&r[i - 1], &r[i]) > 0)
			sorted = 0;
	}
	if (!sorted)
		qsort_r(ix, *n, sizeof(*ix), cmp_ix_name, r);
	for (size_t i = 0; i < *n; i++) {
		struct rec *a = &r[ix[i]], *b = i + 1 < *n ? &r[ix[i + 1]] : NULL;

		if (b && stfs_bytes_cmp(a->t.name, a->t.name_len, b->t.name,
					b->t.name_len) == 0)
			a->order = DROPPED;     /* a later one has its name */
		else
			a->order = rank++;
	}
	free(ix);
	for (size_t i = 0; i < *n; i++)
		if (r[i].order != DROPPED)
			r[o++] = r[i];
	*n = o;
	return 0;
}

static size_t last_wins_meta(struct mrec *m, size_t n)
{
	size_t o = 0;

	if (n > 1)
		qsort(m, n, sizeof(*m), cmp_meta);
	for (size_t i = 0; i < n; i++) {
		if (i + 1 < n && stfs_bytes_cmp(m[i].m.key, m[i].m.key_len,
					   m[i + 1].m.key,
					   m[i + 1].m.key_len) == 0)
			continue;
		m[o++] = m[i];
	}
	return o;
}

/* R15-R19 for one tensor, in the reference's order. */
static int check_tensor(struct parser *P, const struct rec *r,
			uint64_t prev_end)
{
	const struct stfs_tensor *t = &r->t;
	char name[QUOTE_MAX], shape[96];
	uint64_t n = 1, bits;
	unsigned bsz = stfs_dtype_bits(t->dtype);

	qname(t, name);
	if (stfs_shape_str(t, shape, sizeof(shape)) >= sizeof(shape))
		strcpy(shape + sizeof(shape) - 5, "...]");
	if (t->begin != prev_end || t->end < t->begin) {
		if (t->end < t->begin)
			return stfs_fail(P->err, -EINVAL, R15, r->off,
					 "tensor \"%s\": data_offsets [%"
					 PRIu64 ",%" PRIu64 ") end before "
					 "they begin", name, t->begin,
					 t->end);
		if (t->begin < prev_end)
			return stfs_fail(P->err, -EINVAL, R15, r->off,
					 "tensor \"%s\": data_offsets [%"
					 PRIu64 ",%" PRIu64 ") overlap the "
					 "previous tensor, which ends at %"
					 PRIu64, name, t->begin, t->end,
					 prev_end);
		return stfs_fail(P->err, -EINVAL, R15, r->off,
				 "tensor \"%s\": data_offsets [%" PRIu64 ",%"
				 PRIu64 ") leave a hole: the previous tensor "
				 "ends at %" PRIu64, name, t->begin, t->end,
				 prev_end);
	}
	for (size_t i = 0; i < t->rank; i++)
		if (__builtin_mul_overflow(n, t->shape[i], &n))
			return stfs_fail(P->err, -EINVAL, R16, r->off,
					 "tensor \"%s\": shape %s has more "
					 "than 2^64-1 elements", name, shape);
	if (__builtin_mul_overflow(n, (uint64_t)bsz, &bits))
		return stfs_fail(P->err, -EINVAL, R17, r->off,
				 "tensor \"%s\": %s %s is more than 2^64-1 "
				 "bits", name, stfs_dtype_name(t->dtype),
				 shape);
	if (bits % 8)
		return stfs_fail(P->err, -EINVAL, R18, r->off,
				 "tensor \"%s\": %s %s is %" PRIu64 " bits, "
				 "not a whole number of bytes", name,
				 stfs_dtype_name(t->dtype), shape, bits);
	if (t->end - t->begin != bits / 8)
		return stfs_fail(P->err, -EINVAL, R19, r->off,
				 "tensor \"%s\": data_offsets [%" PRIu64 ",%"
				 PRIu64 ") but %s %s needs %" PRIu64 " bytes",
				 name, t->begin, t->end,
				 stfs_dtype_name(t->dtype), shape, bits / 8);
	return 0;
}

static int validate(struct parser *P, uint64_t data_len, uint64_t *last)
{
	uint64_t end = 0;
	int rc;

	sort_recs(P->recs, P->nrecs, cmp_rec_offsets);
	for (size_t i = 0; i < P->nrecs; i++) {
		struct rec *r = &P->recs[i];

		r->t.shape = r->t.rank ? P->dims + r->dim0 : NULL;
		if ((rc = check_tensor(P, r, end)))
			return rc;
		end = r->t.end;
	}
	*last = end;
	if (data_len != STFS_DATA_LEN_ANY && end != data_len)
		return stfs_fail(P->err, -EINVAL, R20, P->base + P->len + end,
				 "the tensors cover %" PRIu64 " bytes of data "
				 "but the data section holds %" PRIu64
				 " bytes%s", end, data_len,
				 end < data_len ? " (trailing bytes)" :
				 " (file truncated)");
	return 0;
}

static void parser_free(struct parser *P)
{
	free(P->arena);
	free(P->recs);
	free(P->metas);
	free(P->dims);
}

int stfs_header_parse(const char *buf, size_t len, uint64_t data_len,
		      uint64_t base, struct stfs_header **out,
		      struct stfs_error *err)
{
	struct stfs_error dummy;
	struct parser P = { .buf = buf, .len = len, .base = base };
	struct stfs_header *h = NULL;
	uint64_t last;
	size_t bad;
	int rc;

	*out = NULL;
	P.err = err ? err : &dummy;
	memset(P.err, 0, sizeof(*P.err));
	if (len > STFS_HEADER_MAX)
		return stfs_fail(P.err, -EINVAL, R2, 0, "header length %zu is "
				 "above the limit of %llu bytes", len,
				 STFS_HEADER_MAX);
	if (!stfs_utf8_valid(buf, len, &bad))
		return stfs_fail(P.err, -EINVAL, R4, base + bad,
				 "header byte %" PRIu64 ": invalid UTF-8",
				 base + bad);
	P.arena = malloc(len + 1);
	if (!P.arena)
		return stfs_fail(P.err, -ENOMEM, NULL, STFS_NO_OFFSET,
				 "out of memory for a %zu-byte header", len);
	stfs_hint_huge(P.arena, len + 1, 0);
	/* The tensor table at the largest it can get, in one allocation,
	 * where doubling by realloc copied it again and again (stfs_grow() still
	 * guards every append). */
	P.caprecs = count_braces(buf, len) + 1;
	if (!(P.recs = malloc(P.caprecs * sizeof(*P.recs)))) {
		rc = -ENOMEM;
		goto fail;
	}
	stfs_hint_huge(P.recs, P.caprecs * sizeof(*P.recs), 0);
	if ((rc = parse_top(&P)))
		goto fail;
	if ((rc = last_wins_recs(P.recs, &P.nrecs)))
		goto fail;
	P.nmetas = last_wins_meta(P.metas, P.nmetas);
	if ((rc = validate(&P, data_len, &last)))
		goto fail;

	h = calloc(1, sizeof(*h));
	if (!h || (P.nrecs && !(h->tensors = calloc(P.nrecs,
						     sizeof(*h->tensors)))) ||
	    (P.nmetas && !(h->meta = calloc(P.nmetas, sizeof(*h->meta))))) {
		rc = -ENOMEM;
		goto fail;
	}
	stfs_hint_huge(h->tensors, P.nrecs * sizeof(*h->tensors), 1);
	if (P.nrecs && !(h->by_name = malloc(P.nrecs * sizeof(*h->by_name)))) {
		rc = -ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < P.nrecs; i++) {
		h->tensors[i] = P.recs[i].t;
		h->by_name[P.recs[i].order] = (uint32_t)i;
	}
	for (size_t i = 0; i < P.nmetas; i++)
		h->meta[i] = P.metas[i].m;
	h->count = P.nrecs;
	h->nmeta = P.nmetas;
	h->has_meta = P.has_meta;
	h->data_len = last;
	h->arena = P.arena;
	h->dims = P.dims;
	free(P.recs);
	free(P.metas);
	*out = h;
	return 0;
fail:
	if (rc == -ENOMEM && P.err->code == 0)
		stfs_fail(P.err, -ENOMEM, NULL, STFS_NO_OFFSET,
			  "out of memory while parsing the header");
	stfs_header_free(h);
	parser_free(&P);
	return rc;
}

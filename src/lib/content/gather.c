/*
 * gather.c: a strided view's elements in row-major order, gathered on
 * read (a PyTorch tensor with a storage offset, transposed or strided).
 * A read of output bytes [lo, hi) covers output elements [e0, e1); their
 * source elements lie in one span of the storage, [smin, smax] elements
 * from the view's first element.  From a mapped source the elements are
 * copied with process_vm_readv (a file that shrank gives EIO, never
 * SIGBUS), up to 1024 runs a call; from any other source the span is read
 * into the read's buffer and the elements copied from there when it is in.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "source.h"
#include "content.h"
#include "gather.h"

unsigned stfs_gather_esize(const struct stfs_seg *s)
{
	return s->t->foreign->elem_bytes;
}

/* The multi-index of output element e (row-major). */
static void unravel(const struct stfs_tensor *t, uint64_t e, uint64_t *idx)
{
	for (size_t i = t->rank; i-- > 0;) {
		idx[i] = t->shape[i] ? e % t->shape[i] : 0;
		e = t->shape[i] ? e / t->shape[i] : 0;
	}
}

/* Step idx to the next element; returns the change of the source
 * element offset (may be negative). */
static int64_t step(const struct stfs_tensor *t, uint64_t *idx)
{
	const uint64_t *st = t->foreign->strides;
	int64_t d = 0;

	for (size_t i = t->rank; i-- > 0;) {
		if (++idx[i] < t->shape[i])
			return d + (int64_t)st[i];
		d -= (int64_t)((t->shape[i] - 1) * st[i]);
		idx[i] = 0;
	}
	return d;
}

static uint64_t source_el(const struct stfs_tensor *t, const uint64_t *idx)
{
	uint64_t o = 0;

	for (size_t i = 0; i < t->rank; i++)
		o += idx[i] * t->foreign->strides[i];
	return o;
}

void stfs_gather_plan(const struct stfs_seg *s, uint64_t lo, uint64_t hi,
		      struct stfs_gather *g)
{
	const struct stfs_tensor *t = s->t;
	uint64_t idx[STFS_GATHER_RANK_MAX], o;
	unsigned es = stfs_gather_esize(s);

	g->e0 = lo / es;
	g->e1 = (hi + es - 1) / es;
	unravel(t, g->e0, idx);
	o = source_el(t, idx);
	g->smin = g->smax = o;
	for (uint64_t e = g->e0 + 1; e < g->e1; e++) {
		o = (uint64_t)((int64_t)o + step(t, idx));
		if (o < g->smin)
			g->smin = o;
		if (o > g->smax)
			g->smax = o;
	}
}

size_t stfs_gather_need(const struct stfs_seg *s, uint64_t lo, uint64_t hi,
			int mapped)
{
	struct stfs_gather g;
	unsigned es = stfs_gather_esize(s);
	size_t out;

	stfs_gather_plan(s, lo, hi, &g);
	out = ((size_t)(g.e1 - g.e0) * es + 7) & ~(size_t)7;
	if (mapped || (g.smax - g.smin + 1) * es > STFS_GATHER_SPAN_MAX)
		return out;   /* (a span past the limit fails the read) */
	return out + (((size_t)(g.smax - g.smin + 1) * es + 7) & ~(size_t)7);
}

void stfs_gather_copy(const struct stfs_seg *s, const struct stfs_gather *g,
		      const char *raw, char *out)
{
	const struct stfs_tensor *t = s->t;
	uint64_t idx[STFS_GATHER_RANK_MAX], o;
	unsigned es = stfs_gather_esize(s);

	unravel(t, g->e0, idx);
	o = source_el(t, idx);
	for (uint64_t e = g->e0; e < g->e1; e++) {
		memcpy(out, raw + (o - g->smin) * es, es);
		out += es;
		if (e + 1 < g->e1)
			o = (uint64_t)((int64_t)o + step(t, idx));
	}
}

int stfs_gather_map(const struct stfs_seg *s, const struct stfs_gather *g,
		    const char *map, char *out)
{
	enum { BATCH = 1024 };
	const struct stfs_tensor *t = s->t;
	struct iovec rem[BATCH], loc = { out, 0 };
	uint64_t idx[STFS_GATHER_RANK_MAX], o;
	unsigned es = stfs_gather_esize(s);
	size_t n = 0;

	unravel(t, g->e0, idx);
	o = source_el(t, idx);
	for (uint64_t e = g->e0; e < g->e1; e++) {
		const char *p = map + s->u.r.off + o * es;

		if (n && (const char *)rem[n - 1].iov_base +
				 rem[n - 1].iov_len == p) {
			rem[n - 1].iov_len += es;   /* a run goes on */
		} else {
			if (n == BATCH) {
				if (process_vm_readv(getpid(), &loc, 1, rem, n,
						     0) != (ssize_t)loc.iov_len)
					return -EIO;
				loc.iov_base = (char *)loc.iov_base +
					       loc.iov_len;
				loc.iov_len = 0;
				n = 0;
			}
			rem[n++] = (struct iovec){ (void *)p, es };
		}
		loc.iov_len += es;
		if (e + 1 < g->e1)
			o = (uint64_t)((int64_t)o + step(t, idx));
	}
	if (n && process_vm_readv(getpid(), &loc, 1, rem, n, 0) !=
		 (ssize_t)loc.iov_len)
		return -EIO;
	return 0;
}

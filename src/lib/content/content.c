/*
 * content.c: a file of the mount as a list of segments, and the one read
 * loop over them.
 *
 * A read of [off, off + size) finds its first segment by binary search
 * and walks the segments it covers, making one iovec each:
 *   - inline bytes: a pointer into them;
 *   - a range of a source that has a map: a pointer into the map, so the
 *     bytes go from the page cache of the source to the reader with no
 *     copy in userspace (a local file);
 *   - a range of a source with no map: an asynchronous read into the
 *     read's buffer;
 *   - a converted range: an asynchronous read of the raw elements, which
 *     are converted to float32 in place once they are in.
 * When every read has completed, the callback gets the iovecs.  Local
 * sources complete at once, so a local read finishes before
 * stfs_content_read() returns; a remote one may finish later, on another
 * thread, and the caller's request loop never waits for it.  Once the
 * callback has handed the bytes on, every source range the read used is
 * dropped from the source's page cache (stfs_source_drop): the reader's
 * page cache holds them now, and a model is then in memory once.
 *
 * The state of a read (its iovecs and buffers) comes from a small pool,
 * so buffers are reused: a fresh megabyte per request costs more in page
 * faults than the reading.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "format.h"
#include "source.h"
#include "metrics.h"
#include "content.h"
#include "gather.h"

#define POOL_MAX 16         /* idle read states kept */
#define IOV_LIMIT 512       /* more iovecs than this are flattened */

/* ---- building ---------------------------------------------------------- */

struct stfs_content *stfs_content_new(void)
{
	struct stfs_content *c = calloc(1, sizeof(*c));

	if (c) {
		c->seg = c->small;
		c->cap = sizeof(c->small) / sizeof(c->small[0]);
	}
	return c;
}

void stfs_content_free(struct stfs_content *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nseg; i++) {
		if (c->seg[i].kind != STFS_SEG_INLINE)
			continue;
		free(c->seg[i].u.in.own);
		if (c->seg[i].u.in.release)
			c->seg[i].u.in.release(c->seg[i].u.in.release_arg);
	}
	if (c->seg != c->small)
		free(c->seg);
	free(c);
}

uint64_t stfs_content_size(const struct stfs_content *c)
{
	return c->size;
}

static struct stfs_seg *add(struct stfs_content *c, enum stfs_seg_kind k,
			    uint64_t len)
{
	struct stfs_seg *s;

	if (len > UINT64_MAX - c->size)
		return NULL;
	if (c->nseg == c->cap) {
		size_t cap = c->cap * 2;
		struct stfs_seg *p = c->seg == c->small ? NULL : c->seg;

		if (!(p = realloc(p, cap * sizeof(*p))))
			return NULL;
		if (c->seg == c->small)
			memcpy(p, c->small, sizeof(c->small));
		c->seg = p;
		c->cap = cap;
	}
	s = &c->seg[c->nseg++];
	memset(s, 0, sizeof(*s));
	s->kind = k;
	s->at = c->size;
	s->len = len;
	c->size += len;
	return s;
}

int stfs_content_add_inline(struct stfs_content *c, const char *bytes,
			    size_t len, int own)
{
	struct stfs_seg *s = add(c, STFS_SEG_INLINE, len);

	if (!s) {
		if (own)
			free((char *)bytes);
		return -ENOMEM;
	}
	s->u.in.bytes = bytes;
	if (own)
		s->u.in.own = (char *)bytes;
	return 0;
}

int stfs_content_add_shared(struct stfs_content *c, const char *bytes,
			    size_t len, void (*release)(void *), void *arg)
{
	struct stfs_seg *s = add(c, STFS_SEG_INLINE, len);

	if (!s) {
		release(arg);
		return -ENOMEM;
	}
	s->u.in.bytes = bytes;
	s->u.in.release = release;
	s->u.in.release_arg = arg;
	return 0;
}

int stfs_content_add_range(struct stfs_content *c, struct stfs_source *src,
			   uint64_t off, uint64_t len)
{
	struct stfs_seg *s = add(c, STFS_SEG_RANGE, len);

	if (!s)
		return -ENOMEM;
	s->u.r.src = src;
	s->u.r.off = off;
	return 0;
}

int stfs_content_add_piece(struct stfs_content *c, struct stfs_source *src,
			   uint64_t off, uint64_t len)
{
	int rc = stfs_content_add_range(c, src, off, len);

	if (!rc)
		c->seg[c->nseg - 1].u.r.piece = 1;
	return rc;
}

int stfs_content_add_f32(struct stfs_content *c, struct stfs_source *src,
			 uint64_t off, enum stfs_dtype dtype, uint64_t nel)
{
	struct stfs_seg *s;

	if (!stfs_dtype_to_f32(dtype) || nel > UINT64_MAX / 4)
		return -EINVAL;
	if (!(s = add(c, STFS_SEG_F32, nel * 4)))
		return -ENOMEM;
	s->u.r.src = src;
	s->u.r.off = off;
	s->dtype = dtype;
	s->uin = stfs_dtype_bits(dtype) / 8;
	s->uout = 1;
	return 0;
}

/* nel elements quantized as quant (stfs_quant_dequantizes) at off,
 * dequantized to float32. */
static int stfs_content_add_dequant(struct stfs_content *c,
				    struct stfs_source *src,
				    uint64_t off, unsigned quant, uint64_t nel)
{
	unsigned bytes, elems = stfs_quant_block(quant, &bytes);
	struct stfs_seg *s;

	if (!stfs_quant_dequantizes(quant) || nel % elems ||
	    nel > UINT64_MAX / 4)
		return -EINVAL;
	if (!(s = add(c, STFS_SEG_F32, nel * 4)))
		return -ENOMEM;
	s->u.r.src = src;
	s->u.r.off = off;
	s->dtype = STFS_DTYPE_NONE;
	s->quant = quant;
	s->uin = bytes;
	s->uout = elems;
	return 0;
}

/* A strided view's elements in row-major order (gather.c): t (with
 * foreign->strides) must stay valid as long as c; its first element is at
 * off. */
static int stfs_content_add_gather(struct stfs_content *c,
				   struct stfs_source *src,
				   uint64_t off, const struct stfs_tensor *t)
{
	unsigned es = t->foreign ? t->foreign->elem_bytes : 0;
	uint64_t nel = stfs_tensor_elements(t);
	struct stfs_seg *s;

	if (!t->foreign || !t->foreign->strides || !es ||
	    t->rank > STFS_GATHER_RANK_MAX || nel > UINT64_MAX / es)
		return -EINVAL;
	if (!(s = add(c, STFS_SEG_GATHER, nel * es)))
		return -ENOMEM;
	s->u.r.src = src;
	s->u.r.off = off;
	s->t = t;
	return 0;
}

int stfs_tensor_to_f32(const struct stfs_tensor *t)
{
	if (t->foreign && t->foreign->strides)
		return 0;
	if (t->foreign && t->foreign->quant)
		return stfs_quant_dequantizes(t->foreign->quant);
	return stfs_dtype_to_f32(t->dtype);
}

int stfs_content_add_tensor(struct stfs_content *c,
			    const struct stfs_tensor *t,
			    struct stfs_source *src, uint64_t off)
{
	const struct stfs_foreign *f = t->foreign;

	if (f && f->strides)
		return stfs_content_add_gather(c, src, off, t);
	return stfs_content_add_range(c, src, off, t->end - t->begin);
}

int stfs_content_add_tensor_f32(struct stfs_content *c,
				const struct stfs_tensor *t,
				struct stfs_source *src, uint64_t off)
{
	if (!stfs_tensor_to_f32(t))
		return -EINVAL;
	if (t->foreign && t->foreign->quant)
		return stfs_content_add_dequant(c, src, off, t->foreign->quant,
						stfs_tensor_elements(t));
	return stfs_content_add_f32(c, src, off, t->dtype,
				    stfs_tensor_elements(t));
}

/* ---- reading ----------------------------------------------------------- */

struct conv {                   /* a converted range, done at the end */
	const struct stfs_seg *gs;  /* or a gathered one (gather.c) */
	struct stfs_gather g;
	enum stfs_dtype dtype;
	unsigned quant;
	const void *raw;
	float *out;
	size_t nel;
};

struct span {                   /* source bytes read, dropped when served */
	struct stfs_source *src;
	uint64_t off, len;
};

struct rd {
	stfs_read_done done;
	void *arg;
	atomic_int pending;
	atomic_int err;
	struct iovec *iov;
	size_t niov, iovcap;
	struct conv *conv;
	size_t nconv, convcap;
	struct span *span;
	size_t nspan, spancap;
	char *buf;                  /* copied and converted bytes */
	size_t bufcap;
	char *flat;                 /* IOV_LIMIT fallback */
	size_t flatcap;
	struct rd *next;            /* in the pool */
};

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static struct rd *pool;
static unsigned pool_n;

static struct rd *rd_get(void)
{
	struct rd *r;

	pthread_mutex_lock(&pool_mu);
	r = pool;
	if (r) {
		pool = r->next;
		pool_n--;
	}
	pthread_mutex_unlock(&pool_mu);
	if (!r)
		r = calloc(1, sizeof(*r));
	return r;
}

static void rd_free(struct rd *r)
{
	free(r->iov);
	free(r->conv);
	free(r->span);
	free(r->buf);
	free(r->flat);
	free(r);
}

static void rd_put(struct rd *r)
{
	pthread_mutex_lock(&pool_mu);
	if (pool_n < POOL_MAX) {
		r->next = pool;
		pool = r;
		pool_n++;
		r = NULL;
	}
	pthread_mutex_unlock(&pool_mu);
	if (r)
		rd_free(r);
}

static int reserve(void **p, size_t *cap, size_t need, size_t elem)
{
	void *q;

	if (need <= *cap)
		return 0;
	if (!(q = malloc(need * elem)))
		return -ENOMEM;
	free(*p);
	*p = q;
	*cap = need;
	return 0;
}

/* Copy the iovecs into one buffer, safely (a map may have lost pages). */
static int flatten(struct rd *r)
{
	size_t total = 0, at = 0;

	for (size_t i = 0; i < r->niov; i++)
		total += r->iov[i].iov_len;
	if (reserve((void **)&r->flat, &r->flatcap, total ? total : 1, 1))
		return -ENOMEM;
	for (size_t i = 0; i < r->niov; i++) {
		struct iovec local = { r->flat + at, r->iov[i].iov_len };
		if (process_vm_readv(getpid(), &local, 1, &r->iov[i], 1, 0) !=
		    (ssize_t)r->iov[i].iov_len)
			return -EIO;
		at += r->iov[i].iov_len;
	}
	r->iov[0] = (struct iovec){ r->flat, total };
	r->niov = 1;
	return 0;
}

static void finish(struct rd *r)
{
	int err = atomic_load(&r->err);

	for (size_t i = 0; !err && i < r->nconv; i++) {
		const struct conv *v = &r->conv[i];

		if (v->gs)
			stfs_gather_copy(v->gs, &v->g, v->raw,
					 (char *)v->out);
		else if (v->quant)
			stfs_dequant(v->quant, v->raw, v->nel, v->out);
		else
			stfs_convert_f32(v->dtype, v->raw, v->nel, v->out);
	}
	if (!err && r->niov > IOV_LIMIT)
		err = flatten(r);
	if (err)
		r->done(r->arg, NULL, 0, err);
	else
		r->done(r->arg, r->iov, (int)r->niov, 0);
	/* served (done() has handed the bytes on): out of the source's
	 * page cache */
	for (size_t i = 0; i < r->nspan; i++)
		stfs_source_drop(r->span[i].src, r->span[i].off,
				 r->span[i].len);
	rd_put(r);
}

static void one_done(void *arg, int err)
{
	struct rd *r = arg;

	if (err) {
		int none = 0;
		atomic_compare_exchange_strong(&r->err, &none, err);
	}
	if (atomic_fetch_sub(&r->pending, 1) == 1)
		finish(r);
}

static size_t first_seg(const struct stfs_content *c, uint64_t off)
{
	size_t lo = 0, hi = c->nseg;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (c->seg[mid].at <= off)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* What a segment's part [lo, lo + n) needs of the buffer, 8-aligned. */
static size_t buf_need(const struct stfs_seg *s, uint64_t lo, size_t n)
{
	if (s->kind == STFS_SEG_RANGE && !stfs_source_map(s->u.r.src))
		return (n + 7) & ~(size_t)7;
	if (s->kind == STFS_SEG_F32) {
		uint64_t u0 = lo / 4 / s->uout;
		uint64_t u1 = ((lo + n + 3) / 4 + s->uout - 1) / s->uout;
		size_t nu = (size_t)(u1 - u0);
		return ((nu * s->uout * 4 + 7) & ~(size_t)7) +
		       ((nu * s->uin + 7) & ~(size_t)7);
	}
	if (s->kind == STFS_SEG_GATHER)
		return stfs_gather_need(s, lo, lo + n,
					stfs_source_map(s->u.r.src) != NULL);
	return 0;
}

/* A converted segment's part [lo, hi): its raw units read into the
 * buffer at *at, converted in place by finish().  A unit is one element,
 * or one quantized block. */
static void read_conv(struct rd *r, const struct stfs_seg *s, uint64_t lo,
		      uint64_t hi, struct iovec *v, size_t *at)
{
	uint64_t u0 = lo / 4 / s->uout;
	uint64_t u1 = ((hi + 3) / 4 + s->uout - 1) / s->uout;
	size_t nu = (size_t)(u1 - u0), n = (size_t)(hi - lo);
	float *out = (float *)(void *)(r->buf + *at);
	char *raw = r->buf + *at + ((nu * s->uout * 4 + 7) & ~(size_t)7);
	struct stfs_extent ext = { s->u.r.off, s->u.r.off +
				   s->len / 4 / s->uout * s->uin, 0 };

	*v = (struct iovec){ (char *)out + (lo - u0 * s->uout * 4), n };
	*at += buf_need(s, lo, n);
	r->conv[r->nconv++] = (struct conv){ .dtype = s->dtype,
		.quant = s->quant, .raw = raw, .out = out, .nel = nu };
	r->span[r->nspan++] = (struct span){ s->u.r.src,
		s->u.r.off + u0 * s->uin, nu * s->uin };
	atomic_fetch_add(&r->pending, 1);
	stfs_source_read_async(s->u.r.src, raw, nu * s->uin,
			       s->u.r.off + u0 * s->uin, &ext, one_done, r);
}

/* A GATHER segment's part [lo, hi): its iovec, and the copy now (a
 * mapped source) or a read of the span and the copy when it is in.
 * Returns the buffer it used. */
static size_t gather(struct rd *r, const struct stfs_seg *s, uint64_t lo,
		     uint64_t hi, char *out, struct iovec *v)
{
	const char *map = stfs_source_map(s->u.r.src);
	unsigned es = stfs_gather_esize(s);
	struct stfs_gather g;
	size_t need = stfs_gather_need(s, lo, hi, map != NULL), outn;
	uint64_t span;
	struct stfs_extent ext;

	stfs_gather_plan(s, lo, hi, &g);
	outn = ((size_t)(g.e1 - g.e0) * es + 7) & ~(size_t)7;
	span = (g.smax - g.smin + 1) * es;
	*v = (struct iovec){ out + (lo - g.e0 * es), (size_t)(hi - lo) };
	r->span[r->nspan++] = (struct span){ s->u.r.src,
		s->u.r.off + g.smin * es, span };
	if (map) {
		if (stfs_gather_map(s, &g, map, out))
			atomic_compare_exchange_strong(&r->err, &(int){ 0 },
						       -EIO);
		return need;
	}
	if (span > STFS_GATHER_SPAN_MAX) {
		atomic_compare_exchange_strong(&r->err, &(int){ 0 }, -EFBIG);
		return need;
	}
	r->conv[r->nconv++] = (struct conv){ .gs = s, .g = g,
					     .raw = out + outn,
					     .out = (float *)(void *)out };
	atomic_fetch_add(&r->pending, 1);
	ext = (struct stfs_extent){ s->u.r.off + g.smin * es,
				    s->u.r.off + g.smin * es + span, 0 };
	stfs_source_read_async(s->u.r.src, out + outn, (size_t)span,
			       s->u.r.off + g.smin * es, &ext, one_done, r);
	return need;
}

void stfs_content_read(const struct stfs_content *c, uint64_t off,
		       size_t size, stfs_read_done done, void *arg)
{
	size_t first, nseg = 0, need = 0, at = 0, nconv = 0;
	uint64_t end;
	struct rd *r;

	if (off >= c->size || size == 0) {
		done(arg, NULL, 0, 0);
		return;
	}
	if (size > c->size - off)
		size = (size_t)(c->size - off);
	end = off + size;
	first = first_seg(c, off);
	/* pass 1: how many iovecs, how much buffer */
	for (size_t i = first; i < c->nseg && c->seg[i].at < end; i++) {
		const struct stfs_seg *s = &c->seg[i];
		uint64_t lo = off > s->at ? off - s->at : 0;
		uint64_t hi = end - s->at < s->len ? end - s->at : s->len;

		if (hi <= lo)
			continue;
		nseg++;
		need += buf_need(s, lo, (size_t)(hi - lo));
		nconv += s->kind == STFS_SEG_F32 || s->kind == STFS_SEG_GATHER;
	}
	r = rd_get();
	if (!r || reserve((void **)&r->iov, &r->iovcap, nseg + 1,
			  sizeof(*r->iov)) ||
	    reserve((void **)&r->conv, &r->convcap, nconv + 1,
		    sizeof(*r->conv)) ||
	    reserve((void **)&r->span, &r->spancap, nseg + 1,
		    sizeof(*r->span)) ||
	    reserve((void **)&r->buf, &r->bufcap, need + 8, 1)) {
		if (r)
			rd_put(r);
		done(arg, NULL, 0, -ENOMEM);
		return;
	}
	r->done = done;
	r->arg = arg;
	r->niov = r->nconv = r->nspan = 0;
	atomic_store(&r->err, 0);
	atomic_store(&r->pending, 1);
	/* pass 2: the iovecs, and the reads */
	for (size_t i = first; i < c->nseg && c->seg[i].at < end; i++) {
		const struct stfs_seg *s = &c->seg[i];
		uint64_t lo = off > s->at ? off - s->at : 0;
		uint64_t hi = end - s->at < s->len ? end - s->at : s->len;
		size_t n = (size_t)(hi - lo);
		struct iovec *v = &r->iov[r->niov];
		struct stfs_extent ext;
		const char *map;

		if (hi <= lo)
			continue;
		r->niov++;
		switch (s->kind) {
		case STFS_SEG_INLINE:
			*v = (struct iovec){ (char *)s->u.in.bytes + lo, n };
			break;
		case STFS_SEG_RANGE:
			r->span[r->nspan++] = (struct span){ s->u.r.src,
				s->u.r.off + lo, n };
			map = stfs_source_map(s->u.r.src);
			if (map) {
				stfs_m_read(s->u.r.src->metrics,
					    STFS_FROM_LOCAL, n);
				*v = (struct iovec){ (char *)map + s->u.r.off +
						     lo, n };
				break;
			}
			*v = (struct iovec){ r->buf + at, n };
			at += buf_need(s, lo, n);
			atomic_fetch_add(&r->pending, 1);
			ext = (struct stfs_extent){ s->u.r.off,
						    s->u.r.off + s->len,
						    s->u.r.piece };
			stfs_source_read_async(s->u.r.src, v->iov_base, n,
					       s->u.r.off + lo, &ext, one_done,
					       r);
			break;
		case STFS_SEG_F32:
			read_conv(r, s, lo, hi, v, &at);
			break;
		case STFS_SEG_GATHER:
			at += gather(r, s, lo, hi, r->buf + at, v);
			break;
		}
	}
	one_done(r, 0);
}

/* ---- reading into a buffer ------------------------------------------- */

struct sync_read {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done;
	ssize_t result;
	char *buf;
};

static void sync_done(void *arg, const struct iovec *iov, int n, int err)
{
	struct sync_read *s = arg;
	size_t at = 0;

	for (int i = 0; i < n && !err; i++) {
		struct iovec local = { s->buf + at, iov[i].iov_len };
		if (process_vm_readv(getpid(), &local, 1, &iov[i], 1, 0) !=
		    (ssize_t)iov[i].iov_len)
			err = -EIO;
		at += iov[i].iov_len;
	}
	pthread_mutex_lock(&s->mu);
	s->result = err ? err : (ssize_t)at;
	s->done = 1;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

ssize_t stfs_content_pread(const struct stfs_content *c, void *buf,
			   size_t size, uint64_t off)
{
	struct sync_read s = { .buf = buf };

	pthread_mutex_init(&s.mu, NULL);
	pthread_cond_init(&s.cv, NULL);
	stfs_content_read(c, off, size, sync_done, &s);
	pthread_mutex_lock(&s.mu);
	while (!s.done)
		pthread_cond_wait(&s.cv, &s.mu);
	pthread_mutex_unlock(&s.mu);
	pthread_cond_destroy(&s.cv);
	pthread_mutex_destroy(&s.mu);
	return s.result;
}

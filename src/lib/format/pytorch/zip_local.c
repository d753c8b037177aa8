/*
 * zip_local.c: the records' local headers of a torch zip file: where each
 * record's data starts, and the checks that place it.  Over a local file
 * each header is read (in windows of several); over a URL only the bytes
 * where a header must lie for its record to end where the next begins.
 * Both paths accept the same files and place every record at the same
 * offset (fuzz_zip checks it).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "torch.h"

static int entry_lho_cmp(const void *a, const void *b)
{
	const struct stfs_zip_entry *const *x = a, *const *y = b;

	return (*x)->lho < (*y)->lho ? -1 : (*x)->lho > (*y)->lho;
}

/*
 * Where a record's data must start for the record (local header, data,
 * and a data descriptor if flag bit 3 says so) to end where the next one
 * begins, without reading its local header: exact when there is no
 * descriptor; with one (12 to 24 bytes), the one candidate that torch's
 * writer's 64-byte data alignment allows.  0: cannot tell.
 */
static int infer(struct stfs_zip_entry *e, uint64_t next)
{
	static const unsigned desc[] = {16, 24, 12, 20};
	uint64_t min = e->lho + 30 + e->name_len, found = UINT64_MAX;

	if (!(e->flags & 8)) {
		e->data = next - e->size;
		return e->data - min <= 65535;
	}
	for (unsigned i = 0; i < 4; i++) {
		uint64_t d;

		if (next - min < e->size + desc[i])
			continue;
		d = next - e->size - desc[i];
		if (d % 64 == 0 && d - min <= 65535) {
			if (found != UINT64_MAX)
				return 0;
			found = d;
		}
	}
	if (found == UINT64_MAX)
		return 0;
	e->data = found;
	return 1;
}

#define HMAX (30 + 65535)   /* a local header's most bytes */
#define WMAX (1u << 20)      /* one read of local headers */

/*
 * Where the bytes a placement of e reads end: over a URL (!read_local)
 * where its local header must end for the record to end where the next
 * begins (the span infer() gives), over a local file a window.  Either
 * way the verdict depends only on the header's first 30 + name bytes,
 * which both read.
 */
static uint64_t hdr_end(const struct stfs_zip_entry *e, uint64_t next,
			int read_local)
{
	struct stfs_zip_entry c = *e;
	uint64_t end = next - e->lho < HMAX ? next : e->lho + HMAX;

	if (!read_local && infer(&c, next) && c.data - e->lho < HMAX &&
	    c.data - e->lho >= 30 + e->name_len)
		end = c.data;
	return end;
}

/*
 * Place e's data where its local header (h, hn bytes) ends.  The record
 * must end where the next begins (no gap; with a data descriptor, 12 to
 * 24 bytes): what one path accepts the other does, at the same place.
 */
static int place_one(struct stfs_zip_entry *e, uint64_t next,
		     const unsigned char *h, size_t hn, const char *name,
		     struct stfs_error *err)
{
	uint64_t gap;
	char q[160];
	int rc;

	e->data = UINT64_MAX;
	rc = stfs_zip_check_local(h, hn, e, name, err);
	if (rc)
		return rc;
	stfs_quote(e->name, e->name_len, q, sizeof(q));
	if (e->data > next || next - e->data < e->size)
		return stfs_fail(err, -EINVAL, ZR_BOUNDS, e->lho,
				 "%s: entry \"%s\" overlaps the next record",
				 name, q);
	gap = next - e->data - e->size;
	if (e->flags & 8 ? gap < 12 || gap > 24 || gap % 4 : gap != 0)
		return stfs_fail(err, -EINVAL, ZR_BOUNDS, e->data + e->size,
				 "%s: entry \"%s\" is followed by %" PRIu64
				 " bytes before the next record: a gap (only "
				 "a data descriptor of 12 to 24 bytes may lie "
				 "there)", name, q, gap);
	return 0;
}

/* Bytes read for local headers: [lo, hi) of the file, for the records
 * from by[start] on that lie within it; the read's status and error. */
struct hwin {
	unsigned char *b;
	uint64_t lo, hi;
	size_t start;
	int rc;
	struct stfs_error err;
};

/*
 * The windows of local headers at hand: up to BATCH of them, read at once
 * (over a URL in parallel, each a round trip: a checkpoint of hundreds of
 * large storages mounts in a few round trips' time, not hundreds; over a
 * local file one at a time, as reads cost nothing there).
 */
#define BATCH 16
#define BATCH_BYTES (2u << 20)
struct hwins {
	struct hwin w[BATCH];
	size_t nw, cur;
	stfs_read_fn rd;
	void *ctx;
	const char *name;
};

static void read_nth(void *arg, size_t k)
{
	struct hwins *h = arg;
	struct hwin *w = &h->w[k];

	memset(&w->err, 0, sizeof(w->err));
	if (!(w->b = malloc((size_t)(w->hi - w->lo))))
		w->rc = stfs_fail_sys(&w->err, -ENOMEM, h->name);
	else
		w->rc = stfs_zip_read_at(h->rd, h->ctx, w->b,
					 (size_t)(w->hi - w->lo), w->lo,
					 h->name, &w->err);
}

static void drop(struct hwins *h)
{
	for (size_t k = 0; k < h->nw; k++)
		free(h->w[k].b);
	h->nw = h->cur = 0;
}

/* Read the windows from record i on: each begins at a record's header and
 * reads in one go the headers of as many records after it as end within
 * WMAX bytes of it; the next begins at the first record it does not
 * hold.  width: how many at once. */
static void refill(struct hwins *h, struct stfs_zip_entry *const *by,
		   const uint64_t *ends, size_t i, size_t n, unsigned width)
{
	uint64_t bytes = 0;

	drop(h);
	/* at most BATCH_BYTES at once (a shard opener runs beside others):
	 * windows of a few bytes, as large storages give, all go together */
	while (h->nw < width && i < n && bytes < BATCH_BYTES) {
		struct hwin *w = &h->w[h->nw++];

		w->lo = by[i]->lho;
		w->hi = ends[i];
		w->start = i;
		w->b = NULL;
		for (size_t j = i + 1; j < n && ends[j] - w->lo <= WMAX; j++)
			if (ends[j] > w->hi)
				w->hi = ends[j];
		for (i++; i < n && ends[i] <= w->hi; i++)
			;
		bytes += w->hi - w->lo;
	}
	stfs_parallel_for(h->nw, width, read_nth, h);
}

/* The window that holds record i's header (read as needed): 0 with *out,
 * or the read's error. */
static int window(struct hwins *h, struct stfs_zip_entry *const *by,
		  const uint64_t *ends, size_t i, size_t n, unsigned width,
		  const struct hwin **out, struct stfs_error *err)
{
	const struct hwin *w;

	if (h->nw && h->cur + 1 < h->nw && h->w[h->cur + 1].start == i)
		h->cur++;
	else if (!h->nw || by[i]->lho < h->w[h->cur].lo ||
		 ends[i] > h->w[h->cur].hi)
		refill(h, by, ends, i, n, width);
	w = &h->w[h->cur];
	if (w->rc && err)
		*err = w->err;
	*out = w;
	return w->rc;
}

static int lho_bounds(const struct stfs_zip *z, const char *name,
		      struct stfs_error *err)
{
	for (size_t i = 0; i < z->n; i++)
		if (z->e[i].lho >= z->cd_off ||
		    z->cd_off - z->e[i].lho < 30 + z->e[i].name_len) {
			char q[160];

			stfs_quote(z->e[i].name, z->e[i].name_len, q,
				   sizeof(q));
			return stfs_fail(err, -EINVAL, ZR_BOUNDS, z->e[i].lho,
					 "%s: entry \"%s\" starts past the "
					 "records, at %" PRIu64, name, q,
					 z->e[i].lho);
		}
	return 0;
}

/* Place every record's data from its local header, and refuse records
 * out of [0, cd_off), overlapping, or with gaps. */
int stfs_zip_place(struct stfs_zip *z, stfs_read_fn rd, void *ctx,
		   int read_local, const char *name, struct stfs_error *err)
{
	size_t n1 = z->n ? z->n : 1;
	struct stfs_zip_entry **by = malloc(n1 * sizeof(*by));
	uint64_t *ends = malloc(n1 * sizeof(*ends));
	struct hwins h = { .rd = rd, .ctx = ctx, .name = name };
	const struct hwin *w;
	int rc = 0;

	if (!by || !ends) {
		rc = stfs_fail_sys(err, -ENOMEM, name);
		goto out;
	}
	if ((rc = lho_bounds(z, name, err)))
		goto out;
	for (size_t i = 0; i < z->n; i++)
		by[i] = &z->e[i];
	qsort(by, z->n, sizeof(*by), entry_lho_cmp);
	for (size_t i = 0; i < z->n; i++)
		ends[i] = hdr_end(by[i], i + 1 < z->n ? by[i + 1]->lho
						      : z->cd_off, read_local);
	for (size_t i = 0; i < z->n && !rc; i++) {
		struct stfs_zip_entry *e = by[i];
		uint64_t next = i + 1 < z->n ? by[i + 1]->lho : z->cd_off;
		char q[160];

		stfs_quote(e->name, e->name_len, q, sizeof(q));
		if (next > z->cd_off || e->lho >= next ||
		    next - e->lho < 30 + e->name_len ||
		    next - e->lho - 30 - e->name_len < e->size) {
			rc = stfs_fail(err, -EINVAL, ZR_BOUNDS, e->lho,
				       "%s: entry \"%s\" (%" PRIu64 " bytes at "
				       "%" PRIu64 ") overlaps the next record "
				       "or runs out of the file", name, q,
				       e->size, e->lho);
			break;
		}
		rc = window(&h, by, ends, i, z->n, read_local ? 1 : BATCH,
			    &w, err);
		if (!rc)
			rc = place_one(e, next, w->b + (e->lho - w->lo),
				       (size_t)(ends[i] - e->lho), name, err);
	}
out:
	drop(&h);
	free(by);
	free(ends);
	return rc;
}


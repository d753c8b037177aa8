/*
 * zip.c: a strict reader of the zip files torch >= 1.6 writes: the end of
 * central directory record (searched for in the last 64 KiB and the
 * record), zip64 (the locator and the zip64 end record, zip64 extra
 * fields), the central directory, and the records' local headers.  Only
 * stored records are accepted; a compressed or encrypted record, a record
 * out of the file or overlapping another, a truncated directory or an
 * absurd count is an error naming the file, the entry and the rule.
 * Every byte comes through a read callback: the tail, the directory, and
 * whatever record the caller loads.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "torch.h"

#define ZR_ZIP64 "Z2 zip64"

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_LOC64 0x07064b50u
#define SIG_EOCD64 0x06064b50u

static uint16_t le16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* What the end records say. */
struct zend {
	uint64_t count, cd_off, cd_size;
	uint64_t end;   /* where the central directory must end */
};

int stfs_zip_read_at(stfs_read_fn rd, void *ctx, void *buf, size_t n,
		     uint64_t off, const char *name, struct stfs_error *err)
{
	int rc = rd(ctx, buf, n, off);

	if (rc < 0)
		return stfs_fail(err, rc, NULL, off,
				 "%s: reading %zu bytes at %" PRIu64 " failed",
				 name, n, off);
	return 0;
}

/* The zip64 end record the locator at tail[loc] points to. */
static int zip64_end(stfs_read_fn rd, void *ctx, uint64_t size,
		     const unsigned char *t, uint64_t toff, uint64_t loc_off,
		     const char *name, struct zend *ze, struct stfs_error *err)
{
	const unsigned char *loc = t + (loc_off - toff);
	unsigned char r[56];
	uint64_t off = le64(loc + 8);

	if (le32(loc + 4) != 0 || le32(loc + 16) > 1)
		return stfs_fail(err, -EINVAL, ZR_ZIP64, loc_off,
				 "%s: a zip split over disks", name);
	if (off > size || size - off < sizeof(r) || off + sizeof(r) > loc_off)
		return stfs_fail(err, -EINVAL, ZR_ZIP64, loc_off,
				 "%s: the zip64 end record at %" PRIu64
				 " is out of the file", name, off);
	if (off >= toff) {   /* in the tail already read */
		memcpy(r, t + (off - toff), sizeof(r));
	} else {
		int rc = stfs_zip_read_at(rd, ctx, r, sizeof(r), off, name, err);

		if (rc)
			return rc;
	}
	if (le32(r) != SIG_EOCD64 || le64(r + 4) < 44 ||
	    le64(r + 4) > loc_off - off - 12)
		return stfs_fail(err, -EINVAL, ZR_ZIP64, off,
				 "%s: no zip64 end record where the locator "
				 "points", name);
	if (le32(r + 16) != 0 || le32(r + 20) != 0 ||
	    le64(r + 24) != le64(r + 32))
		return stfs_fail(err, -EINVAL, ZR_ZIP64, off,
				 "%s: a zip split over disks", name);
	ze->count = le64(r + 32);
	ze->cd_size = le64(r + 40);
	ze->cd_off = le64(r + 48);
	ze->end = off;
	return 0;
}

/* Find the end record in the tail and, if present, the zip64 records. */
static int find_end(stfs_read_fn rd, void *ctx, uint64_t size,
		    const char *name, unsigned char **tailp, uint64_t *tail_off,
		    struct zend *ze, struct stfs_error *err)
{
	size_t tn = size < STFS_ZIP_TAIL + 20 ? (size_t)size
					      : STFS_ZIP_TAIL + 20;
	uint64_t toff = size - tn;
	unsigned char *t;
	size_t at;
	int rc;

	if (size < 22)
		return stfs_fail(err, -EINVAL, ZR_EOCD, 0,
				 "%s: too small for a zip file", name);
	t = malloc(tn);
	if (!t)
		return stfs_fail_sys(err, -ENOMEM, name);
	*tailp = t;
	*tail_off = toff;
	rc = stfs_zip_read_at(rd, ctx, t, tn, toff, name, err);
	if (rc)
		return rc;
	/* the last record whose comment runs exactly to the end */
	for (at = tn - 22;; at--) {
		if (le32(t + at) == SIG_EOCD && le16(t + at + 20) == tn - at - 22)
			break;
		if (at == 0)
			return stfs_fail(err, -EINVAL, ZR_EOCD, STFS_NO_OFFSET,
					 "%s: no end of central directory in "
					 "the last 64 KiB (truncated?)", name);
	}
	if (le16(t + at + 4) != 0 || le16(t + at + 6) != 0 ||
	    le16(t + at + 8) != le16(t + at + 10))
		return stfs_fail(err, -EINVAL, ZR_EOCD, toff + at,
				 "%s: a zip split over disks", name);
	ze->count = le16(t + at + 10);
	ze->cd_size = le32(t + at + 12);
	ze->cd_off = le32(t + at + 16);
	ze->end = toff + at;
	if (at >= 20 && le32(t + at - 20) == SIG_LOC64) {
		struct zend z64 = {0};

		rc = zip64_end(rd, ctx, size, t, toff, toff + at - 20, name,
			       &z64, err);
		if (rc)
			return rc;
		if ((ze->count != 0xffff && ze->count != z64.count) ||
		    (ze->cd_size != 0xffffffff && ze->cd_size != z64.cd_size) ||
		    (ze->cd_off != 0xffffffff && ze->cd_off != z64.cd_off))
			return stfs_fail(err, -EINVAL, ZR_ZIP64, toff + at,
					 "%s: the end record and the zip64 "
					 "end record disagree", name);
		*ze = z64;
	}
	if (ze->cd_off > ze->end || ze->cd_size != ze->end - ze->cd_off)
		return stfs_fail(err, -EINVAL, ZR_CD, ze->end,
				 "%s: the central directory (%" PRIu64
				 " bytes at %" PRIu64 ") does not end where "
				 "the end record begins", name, ze->cd_size,
				 ze->cd_off);
	if (ze->cd_size > STFS_ZIP_CD_MAX || ze->count > STFS_ZIP_ENTRIES_MAX ||
	    ze->count > ze->cd_size / 46)
		return stfs_fail(err, -EINVAL, ZR_CD, ze->end,
				 "%s: %" PRIu64 " entries in %" PRIu64
				 " bytes of central directory: past the "
				 "limits", name, ze->count, ze->cd_size);
	return 0;
}

/* Apply an entry's zip64 extra field to the sentinel values. */
static int zip64_extra(const unsigned char *x, size_t xn, uint64_t *usize,
		       uint64_t *csize, uint64_t *lho)
{
	while (xn >= 4) {
		uint16_t id = le16(x), n = le16(x + 2);
		const unsigned char *p = x + 4;
		size_t left = n;

		if ((size_t)n > xn - 4)
			return -EINVAL;
		if (id == 1) {
			uint64_t *f[3] = {usize, csize, lho};

			for (int i = 0; i < 3; i++) {
				if (*f[i] != 0xffffffff)
					continue;
				if (left < 8)
					return -EINVAL;
				*f[i] = le64(p);
				p += 8;
				left -= 8;
			}
			return 0;
		}
		x += 4 + n;
		xn -= 4 + (size_t)n;
	}
	if (*usize == 0xffffffff || *csize == 0xffffffff || *lho == 0xffffffff)
		return -EINVAL;
	return 0;
}

static int entry_name_cmp(const void *a, const void *b)
{
	const struct stfs_zip_entry *x = a, *y = b;

	return stfs_bytes_cmp(x->name, x->name_len, y->name, y->name_len);
}

/* One central directory entry at cd[*pos]. */
static int cd_entry(const unsigned char *cd, size_t cdn, size_t *pos,
		    uint64_t cd_off, const char *name,
		    struct stfs_zip_entry *e, struct stfs_error *err)
{
	const unsigned char *p = cd + *pos;
	uint64_t at = cd_off + *pos;
	size_t nl, xl, cl;
	uint64_t usize, csize, lho;
	char q[160];

	if (cdn - *pos < 46 || le32(p) != SIG_CENTRAL)
		return stfs_fail(err, -EINVAL, ZR_CD, at,
				 "%s: a central directory entry is missing "
				 "or truncated", name);
	nl = le16(p + 28);
	xl = le16(p + 30);
	cl = le16(p + 32);
	if (cdn - *pos - 46 < nl + xl + cl)
		return stfs_fail(err, -EINVAL, ZR_CD, at,
				 "%s: a central directory entry runs past "
				 "the directory", name);
	stfs_quote((const char *)p + 46, nl, q, sizeof(q));
	if (le16(p + 8) & 1)
		return stfs_fail(err, -EINVAL, ZR_METHOD, at,
				 "%s: entry \"%s\" is encrypted", name, q);
	if (le16(p + 10) != 0)
		return stfs_fail(err, -EINVAL, ZR_METHOD, at,
				 "%s: entry \"%s\" is compressed (method %u); "
				 "only stored records can be served", name, q,
				 le16(p + 10));
	if (le16(p + 34) != 0 && le16(p + 34) != 0xffff)
		return stfs_fail(err, -EINVAL, ZR_CD, at,
				 "%s: entry \"%s\" is on another disk", name,
				 q);
	csize = le32(p + 20);
	usize = le32(p + 24);
	lho = le32(p + 42);
	if (zip64_extra(p + 46 + nl, xl, &usize, &csize, &lho))
		return stfs_fail(err, -EINVAL, ZR_ZIP64, at,
				 "%s: entry \"%s\": bad zip64 extra field",
				 name, q);
	if (usize != csize)
		return stfs_fail(err, -EINVAL, ZR_METHOD, at,
				 "%s: stored entry \"%s\" has two sizes", name,
				 q);
	e->name = malloc(nl + 1);
	if (!e->name)
		return stfs_fail_sys(err, -ENOMEM, name);
	memcpy(e->name, p + 46, nl);
	e->name[nl] = '\0';
	e->name_len = nl;
	e->lho = lho;
	e->size = usize;
	e->data = UINT64_MAX;
	e->flags = le16(p + 8);
	e->verified = 0;
	*pos += 46 + nl + xl + cl;
	return 0;
}

int stfs_zip_check_local(const unsigned char *h, size_t hn,
			 struct stfs_zip_entry *e, const char *name,
			 struct stfs_error *err)
{
	char q[160];
	size_t nl, xl;

	stfs_quote(e->name, e->name_len, q, sizeof(q));
	if (hn < 30 || le32(h) != SIG_LOCAL)
		return stfs_fail(err, -EINVAL, ZR_LOCAL, e->lho,
				 "%s: entry \"%s\": no local header at %" PRIu64,
				 name, q, e->lho);
	nl = le16(h + 26);
	xl = le16(h + 28);
	if (nl != e->name_len || hn - 30 < nl ||
	    memcmp(h + 30, e->name, nl) != 0)
		return stfs_fail(err, -EINVAL, ZR_LOCAL, e->lho,
				 "%s: entry \"%s\": the local header names "
				 "another file", name, q);
	if (le16(h + 8) != 0 || (le16(h + 6) & 1))
		return stfs_fail(err, -EINVAL, ZR_METHOD, e->lho,
				 "%s: entry \"%s\" is compressed or encrypted "
				 "in its local header", name, q);
	if (e->data != UINT64_MAX && e->data != e->lho + 30 + nl + xl)
		return stfs_fail(err, -EINVAL, ZR_LOCAL, e->lho,
				 "%s: entry \"%s\": the local header does not "
				 "end where the record's data begins", name, q);
	e->data = e->lho + 30 + nl + xl;
	e->verified = 1;
	return 0;
}

int stfs_zip_open(stfs_read_fn rd, void *ctx, uint64_t size, int read_local,
		  const char *name, struct stfs_zip *z, struct stfs_error *err)
{
	unsigned char *tail = NULL, *cd = NULL;
	uint64_t toff = 0;
	struct zend ze = {0};
	size_t pos = 0;
	int rc;

	memset(z, 0, sizeof(*z));
	rc = find_end(rd, ctx, size, name, &tail, &toff, &ze, err);
	if (rc)
		goto out;
	z->cd_off = ze.cd_off;
	z->cd_size = ze.cd_size;
	if (ze.cd_off >= toff) {
		cd = tail + (ze.cd_off - toff);   /* already read */
	} else {
		cd = malloc(ze.cd_size ? (size_t)ze.cd_size : 1);
		if (!cd) {
			rc = stfs_fail_sys(err, -ENOMEM, name);
			goto out;
		}
		rc = stfs_zip_read_at(rd, ctx, cd, (size_t)ze.cd_size,
				      ze.cd_off, name,
			   err);
		if (rc)
			goto out;
	}
	z->e = calloc(ze.count ? (size_t)ze.count : 1, sizeof(*z->e));
	if (!z->e) {
		rc = stfs_fail_sys(err, -ENOMEM, name);
		goto out;
	}
	for (; z->n < ze.count; z->n++) {
		rc = cd_entry(cd, (size_t)ze.cd_size, &pos, ze.cd_off, name,
			      &z->e[z->n], err);
		if (rc)
			goto out;
	}
	if (pos != ze.cd_size) {
		rc = stfs_fail(err, -EINVAL, ZR_CD, ze.cd_off + pos,
			       "%s: %" PRIu64 " bytes after the last central "
			       "directory entry", name, ze.cd_size - pos);
		goto out;
	}
	qsort(z->e, z->n, sizeof(*z->e), entry_name_cmp);
	for (size_t i = 1; i < z->n; i++)
		if (!entry_name_cmp(&z->e[i - 1], &z->e[i])) {
			char q[160];

			stfs_quote(z->e[i].name, z->e[i].name_len, q,
				   sizeof(q));
			rc = stfs_fail(err, -EINVAL, ZR_CD, z->e[i].lho,
				       "%s: entry \"%s\" appears twice", name,
				       q);
			goto out;
		}
	rc = stfs_zip_place(z, rd, ctx, read_local, name, err);
out:
	if (cd && (cd < tail || cd >= tail + STFS_ZIP_TAIL + 20))
		free(cd);
	free(tail);
	if (rc)
		stfs_zip_free(z);
	return rc;
}

void stfs_zip_free(struct stfs_zip *z)
{
	if (!z)
		return;
	for (size_t i = 0; i < z->n; i++)
		free(z->e[i].name);
	free(z->e);
	memset(z, 0, sizeof(*z));
}

const struct stfs_zip_entry *stfs_zip_find(const struct stfs_zip *z,
					   const char *name, size_t len)
{
	struct stfs_zip_entry key = {.name = (char *)name, .name_len = len};

	if (!z->n)
		return NULL;
	return bsearch(&key, z->e, z->n, sizeof(*z->e), entry_name_cmp);
}

int stfs_zip_extract(const struct stfs_zip_entry *e, const unsigned char *b,
		     uint64_t b_off, size_t b_len, const char *name,
		     unsigned char **out, struct stfs_error *err)
{
	struct stfs_zip_entry c = *e;
	unsigned char *o;
	char q[160];
	int rc;

	*out = NULL;
	stfs_quote(e->name, e->name_len, q, sizeof(q));
	if (e->lho < b_off || e->data + e->size - b_off > b_len)
		return stfs_fail(err, -EINVAL, ZR_BOUNDS, e->lho,
				 "%s: entry \"%s\" is not in the bytes read",
				 name, q);
	rc = stfs_zip_check_local(b + (e->lho - b_off),
			 (size_t)(e->data + e->size - e->lho), &c, name, err);
	if (rc)
		return rc;
	o = malloc(e->size ? (size_t)e->size : 1);
	if (!o)
		return stfs_fail_sys(err, -ENOMEM, name);
	memcpy(o, b + (e->data - b_off), (size_t)e->size);
	*out = o;
	return 0;
}

int stfs_zip_load(const struct stfs_zip_entry *e, stfs_read_fn rd, void *ctx,
		  uint64_t max, const char *name, unsigned char **buf,
		  struct stfs_error *err)
{
	uint64_t span = e->data + e->size - e->lho;
	unsigned char *b;
	char q[160];
	int rc;

	*buf = NULL;
	stfs_quote(e->name, e->name_len, q, sizeof(q));
	if (e->size > max || span > SIZE_MAX - 1)
		return stfs_fail(err, -EFBIG, NULL, e->lho,
				 "%s: entry \"%s\" is %" PRIu64 " bytes, past "
				 "the limit of %" PRIu64, name, q, e->size, max);
	b = malloc((size_t)span + 1);
	if (!b)
		return stfs_fail_sys(err, -ENOMEM, name);
	rc = stfs_zip_read_at(rd, ctx, b, (size_t)span, e->lho, name, err);
	if (!rc)
		rc = stfs_zip_extract(e, b, e->lho, (size_t)span, name, buf,
				      err);
	free(b);
	return rc;
}

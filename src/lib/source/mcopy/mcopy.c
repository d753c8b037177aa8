/*
 * mcopy.c: one file of `stfs mirror`: skipped when the bucket holds it
 * already, verified (its object's size and ETag as its receipt recorded
 * them, and a receipt of the same origin, version and origin checksum);
 * else read from the origin part by part, checked against the origin's
 * checksum as it comes (the whole file's before it is committed: a
 * single PUT is sent only once it matched, a multipart upload completed
 * only then and aborted otherwise), each block's CRC-32C taken as the
 * mount reads blocks, and its receipt written after it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "sourceops.h"
#include "mirror/mirror.h"
#include "mcopy/mcopy.h"

/* The bytes an http(s) source's open holds (http.c's first range): read
 * apart, they are served from what the open fetched, not asked again. */
#define HEAD_BYTES (64u << 10)
/* A file past this is sent as a multipart upload of parts of this size
 * (a multiple of every block size up to it; a larger block is a part). */
#define PART_BYTES (8u << 20)
/* A part is read from the origin in up to this many ranges at once, of at
 * least SLICE_MIN bytes each. */
#define SLICES 4
#define SLICE_MIN (1u << 20)

static char *receipt_key(const char *path)
{
	char *k;

	return asprintf(&k, "%s%s.json", STFS_MIRROR_RECEIPTS, path) < 0 ?
	       NULL : k;
}

static int same(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

/* The file as the bucket holds it, if its receipt says it is this one,
 * of this origin and version, and its object is still what the receipt
 * recorded: 1 with *out filled, else 0. */
static int already(struct stfs_mjob *j, const struct stfs_rfile *rf,
		   struct stfs_mfile *out)
{
	struct stfs_s3ans a = { 0 }, h = { 0 };
	struct stfs_manifest m = { 0 };
	struct stfs_error e = { 0 };
	char *key = receipt_key(rf->path), why[256];
	int ok = 0;

	if (!key || stfs_s3io_call(j->io, "GET", key, "", NULL, 0, NULL, 0,
				   STFS_MANIFEST_MAX, &a, &e) ||
	    a.status != 200 ||
	    stfs_manifest_parse(a.body, a.len, &m, why, sizeof(why)) ||
	    m.n != 1 || strcmp(m.f[0].path, rf->path) ||
	    strcmp(m.origin, j->origin) || strcmp(m.revision, j->revision) ||
	    m.block != j->block || (rf->size && m.f[0].size != rf->size) ||
	    !same(m.f[0].origin_sum, rf->sum) || !m.f[0].etag)
		goto out;
	if (stfs_s3io_call(j->io, "HEAD", rf->path, "", NULL, 0, NULL, 0, 0,
			   &h, &e) || h.status != 200 || !h.has_length ||
	    h.length != m.f[0].size || strcmp(h.etag, m.f[0].etag))
		goto out;
	*out = m.f[0];
	memset(&m.f[0], 0, sizeof(m.f[0]));
	ok = 1;
out:
	stfs_manifest_free(&m);
	stfs_s3ans_free(&a);
	stfs_s3ans_free(&h);
	free(key);
	return ok;
}

/* The digests a file is checked and recorded with. */
struct sums {
	EVP_MD_CTX *sha256, *origin;    /* origin: as its sum's kind, or NULL */
	const char *kind;               /* "sha256", "sha1-blob", "md5" */
};

static int sums_init(struct sums *s, const char *sum, uint64_t size)
{
	const EVP_MD *md = NULL;
	char pre[48];
	int n;

	memset(s, 0, sizeof(*s));
	if (!(s->sha256 = EVP_MD_CTX_new()) ||
	    !EVP_DigestInit_ex(s->sha256, EVP_sha256(), NULL))
		return -ENOMEM;
	if (!sum)
		return 0;
	s->kind = !strncmp(sum, "sha256:", 7) ? "sha256" :
		  !strncmp(sum, "sha1-blob:", 10) ? "sha1-blob" :
		  !strncmp(sum, "md5:", 4) ? "md5" : NULL;
	if (!s->kind)
		return 0;       /* a kind stfs does not know: unchecked */
	md = !strcmp(s->kind, "sha256") ? EVP_sha256() :
	     !strcmp(s->kind, "md5") ? EVP_md5() : EVP_sha1();
	if (!md)
		return 0;
	if (!(s->origin = EVP_MD_CTX_new()) ||
	    !EVP_DigestInit_ex(s->origin, md, NULL))
		return -ENOMEM;
	if (md == EVP_sha1()) {          /* git's blob id */
		n = snprintf(pre, sizeof(pre), "blob %" PRIu64, size);
		EVP_DigestUpdate(s->origin, pre, (size_t)n + 1);
	}
	return 0;
}

static void sums_add(struct sums *s, const void *p, size_t n)
{
	EVP_DigestUpdate(s->sha256, p, n);
	if (s->origin)
		EVP_DigestUpdate(s->origin, p, n);
}

static void hexof(EVP_MD_CTX *c, char *out)
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned n = 0;

	EVP_DigestFinal_ex(c, d, &n);
	for (unsigned i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", d[i]);
	out[2 * n] = '\0';
}

/* The digests done: f->sha256 set; 0 if the origin's sum want (if any;
 * NULL: an upload given up, nothing checked) holds, else -EIO with err. */
static int sums_end(struct sums *s, const char *want, struct stfs_mfile *f,
		    struct stfs_error *err)
{
	char hex[2 * EVP_MAX_MD_SIZE + 1];
	int rc = 0;

	hexof(s->sha256, f->sha256);
	if (s->origin) {
		hexof(s->origin, hex);
		if (want && strcmp(hex, strchr(want, ':') + 1))
			rc = stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET,
				       "%s: the bytes read are not those the "
				       "origin published (%s %s, read %s); "
				       "not mirrored", f->path, s->kind,
				       strchr(want, ':') + 1, hex);
	}
	EVP_MD_CTX_free(s->sha256);
	EVP_MD_CTX_free(s->origin);
	memset(s, 0, sizeof(*s));
	return rc;
}

/* One slice of a part, read on a thread of its own. */
struct slice {
	struct stfs_source *src;
	char *buf;
	size_t n;
	uint64_t off;
	int rc;
	pthread_t th;
};

static void *read_slice(void *arg)
{
	struct slice *sl = arg;

	sl->rc = sl->src->ops->read(sl->src, sl->buf, sl->n, sl->off);
	return NULL;
}

/* [off, off + n) of src into buf, in up to SLICES ranges read at once
 * (each its own request, on a connection of its own). */
static int read_slices(struct stfs_source *src, char *buf, size_t n,
		       uint64_t off)
{
	struct slice sl[SLICES];
	size_t each = (n / SLICES + SLICE_MIN - 1) & ~(size_t)(SLICE_MIN - 1);
	unsigned k = 0, started = 0;
	int rc = 0;

	if (each < SLICE_MIN)
		each = SLICE_MIN;
	for (size_t at = 0; at < n && k < SLICES; at += each, k++)
		sl[k] = (struct slice){ src, buf + at,
					n - at < each ? n - at : each,
					off + at, 0, 0 };
	for (unsigned i = 1; i < k; i++, started++)
		if (pthread_create(&sl[i].th, NULL, read_slice, &sl[i]))
			break;
	read_slice(&sl[0]);
	for (unsigned i = 1; i <= started; i++)
		pthread_join(sl[i].th, NULL);
	for (unsigned i = started + 1; i < k; i++)     /* not started */
		read_slice(&sl[i]);
	for (unsigned i = 0; i < k && !rc; i++)
		rc = sl[i].rc;
	return rc;
}

/* Bytes [off, off + n) of src into buf, the open's head apart. */
static int read_part(struct stfs_source *src, char *buf, size_t n,
		     uint64_t off)
{
	size_t first = off < HEAD_BYTES ? HEAD_BYTES - (size_t)off : 0;
	int rc = 0;

	if (first > n)
		first = n;
	if (first)
		rc = src->ops->read(src, buf, first, off);
	if (!rc && n > first)
		rc = read_slices(src, buf + first, n - first, off + first);
	return rc;
}

/* <Tag>value</Tag> of an XML answer into out: 0 or -EINVAL. */
static int xml_value(const char *doc, const char *tag, char *out,
		     size_t outsz)
{
	char open[64], close[64];
	const char *a, *b;

	snprintf(open, sizeof(open), "<%s>", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	if (!doc || !(a = strstr(doc, open)) ||
	    !(b = strstr(a += strlen(open), close)) ||
	    (size_t)(b - a) >= outsz || b == a)
		return -EINVAL;
	memcpy(out, a, (size_t)(b - a));
	out[b - a] = '\0';
	return 0;
}

/* An S3 answer that is not the status wanted: -EIO with err naming it. */
static int refused(const struct stfs_s3ans *a, const char *what,
		   const char *path, struct stfs_error *err)
{
	char code[128] = "";

	xml_value(a->body, "Code", code, sizeof(code));
	return stfs_fail(err, a->status == 403 ? -EACCES : -EIO, NULL,
			 STFS_NO_OFFSET, "%s: the mirror refused the %s: "
			 "HTTP %ld%s%s", path, what, a->status,
			 *code ? " " : "", code);
}

/* Percent-encode an upload id for a query (canonical form). */
static void qesc(const char *s, char *out, size_t outsz)
{
	size_t k = 0;

	for (; *s && k + 4 < outsz; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || strchr("-._~", c))
			out[k++] = (char)c;
		else
			k += (size_t)sprintf(out + k, "%%%02X", c);
	}
	out[k] = '\0';
}

/* The file's CRC-32C of each whole block of buf (bytes from off). */
static void crcs(struct stfs_mfile *f, size_t block, const char *buf,
		 size_t n, uint64_t off)
{
	for (size_t at = 0; at < n; at += block) {
		size_t l = n - at < block ? n - at : block;

		f->crc[(off + at) / block] = stfs_crc32c(0, buf + at, l);
	}
}

/* End the multipart upload qid of f with its parts' ETags: 0 or -errno. */
static int complete(struct stfs_mjob *j, const struct stfs_mfile *f,
		    const char *qid, char (*etags)[256], uint64_t nparts,
		    struct stfs_error *err)
{
	struct stfs_s3ans a = { 0 };
	char q[3300], *doc = NULL, *nd;
	int rc;

	for (uint64_t p = 0; p < nparts; p++) {
		int k = asprintf(&nd, "%s<Part><PartNumber>%" PRIu64
				 "</PartNumber><ETag>%s</ETag></Part>",
				 doc ? doc : "<CompleteMultipartUpload>", p + 1,
				 etags[p]);

		free(doc);
		if (k < 0)
			return stfs_nomem(err);
		doc = nd;
	}
	if (asprintf(&nd, "%s</CompleteMultipartUpload>", doc) < 0) {
		free(doc);
		return stfs_nomem(err);
	}
	free(doc);
	doc = nd;
	snprintf(q, sizeof(q), "uploadId=%s", qid);
	rc = stfs_s3io_call(j->io, "POST", f->path, q, NULL, 0, doc,
			    strlen(doc), 1 << 20, &a, err);
	/* S3 may answer 200 with an error document */
	if (!rc && (a.status != 200 || !a.body ||
		    !strstr(a.body, "CompleteMultipartUploadResult")))
		rc = refused(&a, "multipart upload's end", f->path, err);
	stfs_s3ans_free(&a);
	free(doc);
	return rc;
}

/* A part on its way up, while the next one is read. */
struct upload {
	struct stfs_mjob *j;
	const char *path, *qid;
	uint64_t p;
	const char *buf;
	size_t n;
	char *etag;             /* 256 bytes: the part's ETag */
	int rc, running;
	struct stfs_error err;
	pthread_t th;
};

static void *put_part(void *arg)
{
	struct upload *u = arg;
	struct stfs_s3ans a = { 0 };
	char q[3300];

	snprintf(q, sizeof(q), "partNumber=%" PRIu64 "&uploadId=%s", u->p + 1,
		 u->qid);
	u->rc = stfs_s3io_call(u->j->io, "PUT", u->path, q, NULL, 0, u->buf,
			       u->n, 1 << 16, &a, &u->err);
	if (!u->rc && (a.status != 200 || !a.etag[0]))
		u->rc = refused(&a, "part", u->path, &u->err);
	if (!u->rc) {
		snprintf(u->etag, 256, "%s", a.etag);
		stfs_mjob_progress(u->j, u->n, 0);
	}
	stfs_s3ans_free(&a);
	return NULL;
}

/* Start u (on a thread, else here). */
static void put_start(struct upload *u)
{
	u->running = !pthread_create(&u->th, NULL, put_part, u);
	if (!u->running)
		put_part(u);
}

/* The part on its way is up: 0, or its -errno with err. */
static int put_wait(struct upload *u, struct stfs_error *err)
{
	if (u->running)
		pthread_join(u->th, NULL);
	u->running = 0;
	if (u->rc && err)
		*err = u->err;
	return u->rc;
}

/* Send f as a multipart upload, read part by part from src into buf and
 * a second buffer in turn: a part is read while the one before goes up.
 * Completed once the whole file matched its origin checksum, else
 * aborted. */
static int multipart(struct stfs_mjob *j, struct stfs_source *src,
		     const char *sum, struct stfs_mfile *f, char *buf,
		     size_t part, struct stfs_error *err)
{
	struct stfs_s3ans a = { 0 };
	struct upload up = { .j = j, .path = f->path };
	struct sums s;
	char id[1024], qid[3200], q[3300], (*etags)[256] = NULL, *two[2];
	uint64_t nparts = (f->size + part - 1) / part;
	int rc, started = 0;

	two[0] = buf;
	if (!(two[1] = malloc(part)))
		return stfs_nomem(err);
	if ((rc = sums_init(&s, sum, f->size)) ||
	    !(etags = calloc(nparts, sizeof(*etags)))) {
		rc = stfs_nomem(err);
		goto out;
	}
	if ((rc = stfs_s3io_call(j->io, "POST", f->path, "uploads=", NULL, 0,
				 "", 0, 1 << 20, &a, err)))
		goto out;
	if (a.status != 200 || xml_value(a.body, "UploadId", id, sizeof(id))) {
		rc = refused(&a, "multipart upload", f->path, err);
		goto out;
	}
	started = 1;
	qesc(id, qid, sizeof(qid));
	up.qid = qid;
	for (uint64_t p = 0; p < nparts; p++) {
		uint64_t off = p * part;
		size_t n = f->size - off < part ? (size_t)(f->size - off) : part;
		char *cur = two[p % 2];

		if ((rc = read_part(src, cur, n, off))) {
			rc = stfs_fail(err, rc, NULL, STFS_NO_OFFSET, "%s: "
				       "cannot read it from the origin: %s",
				       f->path, strerror(-rc));
			goto out;
		}
		sums_add(&s, cur, n);
		crcs(f, j->block, cur, n, off);
		if ((rc = put_wait(&up, err)))
			goto out;
		up.p = p;
		up.buf = cur;
		up.n = n;
		up.etag = etags[p];
		put_start(&up);
	}
	if ((rc = put_wait(&up, err)) || (rc = sums_end(&s, sum, f, err)) ||
	    (rc = complete(j, f, qid, etags, nparts, err)))
		goto out;
	started = 0;
out:
	put_wait(&up, NULL);
	if (s.sha256)
		sums_end(&s, NULL, f, NULL);
	if (started) {          /* aborted: no object of unchecked bytes */
		struct stfs_error e2 = { 0 };

		snprintf(q, sizeof(q), "uploadId=%s", qid);
		stfs_s3io_call(j->io, "DELETE", f->path, q, NULL, 0, NULL, 0,
			       1 << 16, &a, &e2);
	}
	stfs_s3ans_free(&a);
	free(etags);
	free(two[1]);
	return rc;
}

/* Send f (of at most one part) with one PUT, once its bytes matched. */
static int single(struct stfs_mjob *j, struct stfs_source *src,
		  const char *sum, struct stfs_mfile *f, char *buf,
		  struct stfs_error *err)
{
	struct stfs_s3ans a = { 0 };
	char meta[120];
	const char *hdr[1] = { meta };
	struct sums s;
	int rc;

	if (sums_init(&s, sum, f->size))
		return stfs_nomem(err);
	rc = f->size ? read_part(src, buf, (size_t)f->size, 0) : 0;
	if (rc) {
		sums_end(&s, NULL, f, NULL);
		return stfs_fail(err, rc, NULL, STFS_NO_OFFSET, "%s: cannot "
				 "read it from the origin: %s", f->path,
				 strerror(-rc));
	}
	sums_add(&s, buf, (size_t)f->size);
	crcs(f, j->block, buf, (size_t)f->size, 0);
	if ((rc = sums_end(&s, sum, f, err)))
		return rc;
	snprintf(meta, sizeof(meta), "x-amz-meta-stfs-sha256: %s", f->sha256);
	rc = stfs_s3io_call(j->io, "PUT", f->path, "", hdr, 1, buf,
			    (size_t)f->size, 1 << 16, &a, err);
	if (!rc && a.status != 200)
		rc = refused(&a, "upload", f->path, err);
	if (!rc)
		stfs_mjob_progress(j, f->size, 0);
	stfs_s3ans_free(&a);
	return rc;
}

/* The object's ETag now (after its upload), and its receipt written. */
static int seal(struct stfs_mjob *j, struct stfs_mfile *f,
		struct stfs_error *err)
{
	struct stfs_manifest m = { .origin = (char *)j->origin,
				   .revision = (char *)j->revision,
				   .block = j->block,
				   .created = (char *)j->created,
				   .f = f, .n = 1 };
	struct stfs_s3ans a = { 0 };
	char *doc, *key;
	size_t len;
	int rc;

	if ((rc = stfs_s3io_call(j->io, "HEAD", f->path, "", NULL, 0, NULL, 0,
				 0, &a, err)))
		return rc;
	if (a.status != 200 || !a.has_length || a.length != f->size ||
	    !a.etag[0]) {
		rc = stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "%s: the "
			       "mirror does not hold it as sent (HTTP %ld, "
			       "%" PRIu64 " bytes)", f->path, a.status,
			       a.length);
		stfs_s3ans_free(&a);
		return rc;
	}
	free(f->etag);
	f->etag = strdup(a.etag);
	stfs_s3ans_free(&a);
	if (!f->etag || !(doc = stfs_manifest_write(&m, &len)))
		return stfs_nomem(err);
	if (!(key = receipt_key(f->path))) {
		free(doc);
		return stfs_nomem(err);
	}
	rc = stfs_s3io_call(j->io, "PUT", key, "", NULL, 0, doc, len, 1 << 16,
			    &a, err);
	if (!rc && a.status != 200)
		rc = refused(&a, "receipt", f->path, err);
	stfs_s3ans_free(&a);
	free(doc);
	free(key);
	return rc;
}

int stfs_mirror_copy(struct stfs_mjob *j, const struct stfs_rfile *rf,
		     struct stfs_mfile *f, struct stfs_error *err)
{
	struct stfs_source *src = NULL;
	size_t part = j->block > PART_BYTES ? j->block : PART_BYTES;
	char *buf = NULL;
	int rc;

	memset(f, 0, sizeof(*f));
	if (already(j, rf, f)) {
		stfs_mjob_progress(j, f->size, 1);
		return 0;
	}
	if (!(f->path = strdup(rf->path)) ||
	    (rf->sum && !(f->origin_sum = strdup(rf->sum))))
		return stfs_nomem(err);
	f->size = rf->size;
	if ((rf->size || !j->listed) &&
	    (rc = stfs_location_open_path(j->loc, rf->path, &src, err))) {
		stfs_mfile_free(f);
		return rc;
	}
	if (src) {
		if (src->info.size != rf->size && j->listed) {
			rc = stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "%s: "
				       "the origin lists %" PRIu64 " bytes "
				       "but serves %" PRIu64, rf->path,
				       rf->size, src->info.size);
			goto out;
		}
		f->size = src->info.size;
		if (!j->listed)         /* its size known only now */
			stfs_mjob_total(j, f->size);
		if (src->info.etag && !(f->origin_etag =
					strdup(src->info.etag))) {
			rc = stfs_nomem(err);
			goto out;
		}
	}
	f->nblocks = (f->size + j->block - 1) / j->block;
	rc = -ENOMEM;
	if ((f->nblocks && !(f->crc = calloc(f->nblocks, sizeof(*f->crc)))) ||
	    !(buf = malloc(f->size < part ? (size_t)f->size + 1 : part))) {
		rc = stfs_nomem(err);
		goto out;
	}
	rc = f->size <= part ? single(j, src, rf->sum, f, buf, err) :
	     multipart(j, src, rf->sum, f, buf, part, err);
	if (!rc)
		rc = seal(j, f, err);
out:
	stfs_source_close(src);
	free(buf);
	if (rc)
		stfs_mfile_free(f);
	return rc;
}

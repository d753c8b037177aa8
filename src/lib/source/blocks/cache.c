/*
 * cache.c: the on-disk cache of remote objects, in blocks.
 *
 * Layout under the cache directory:
 *   v1/<hash of the URL>/latest                  the last version seen
 *   v1/<hash of the URL>/<hash of ETag and size>/meta
 *   v1/<hash of the URL>/<hash of ETag and size>/<block number>
 *   v1/<hash of the URL>/<hash of ETag and size>/head
 * A version is named by the ETag (or Last-Modified) and the size seen at
 * open, so a changed object is never served from an old version's blocks.
 * The "URL" is a Hub file's content key (http.c), within its repo.  Each
 * hash is the first 64 bits of SHA-256, so that a URL or a repo name
 * cannot be chosen to share another's directory.
 * A block is written to a temporary name, flushed (fdatasync) and renamed,
 * so it is either complete or absent, even after a crash, kill -9 or a
 * power loss.  A block file (and the head) starts with a header that
 * names the object version (the hash of its directory), the block and
 * the CRC-32C of each piece of it (blockfile.c), checked on every read:
 * a block that fails is never served, and the engine drops it and
 * fetches it again (lookup.c).  Blocks
 * written together (stfs_cache_put_batch()) are all written, then all
 * flushed, then all renamed: one wait for the disk, not one per block.  The small
 * files (meta, latest, head) are renamed into place but not flushed: a
 * power loss can leave them short or empty, and they are checked when
 * read (the head by its checksums, and its header is then validated as
 * any header is), and a meta
 * must name the version its directory is the hash of.  Every file
 * written here is counted in cache_size, and the least recently used
 * (by mtime, which a hit refreshes) are removed when the cache grows
 * past it (evict.c).
 *
 * The cache is trusted only when it is private, and nothing under it is
 * reached through a symbolic link (cachedir.c): every path here is
 * relative to the cache's directory descriptor, opened once.  The cache
 * is an object of the remote layer (struct stfs_cache, engine.h), made
 * from its options.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <openssl/evp.h>

#include "format.h"
#include "cache.h"
#include "metrics.h"

int stfs_cache_init(struct stfs_cache *c, const char *dir, uint64_t max,
		    size_t block, int offline)
{
	*c = (struct stfs_cache){ .max_bytes = max, .block = block,
				  .offline = offline, .root = -1, .usage = -1 };
	if (strlen(dir) > STFS_CACHE_DIR_MAX)
		return -ENAMETOOLONG;
	if (!(c->dir = strdup(dir)))
		return -ENOMEM;
	pthread_mutex_init(&c->mu, NULL);
	return 0;
}

void stfs_cache_fini(struct stfs_cache *c)
{
	pthread_mutex_destroy(&c->mu);
	if (c->usage >= 0)
		close(c->usage);
	c->usage = -1;
	if (c->root >= 0)
		close(c->root);
	c->root = -1;
	free(c->dir);
	c->dir = NULL;
}

/* The cache's descriptor, made on first use: >= 0, or -errno with why. */
static int root_fd(struct stfs_cache *c, char *why, size_t whysz)
{
	int fd;

	pthread_mutex_lock(&c->mu);
	if (c->root < 0)
		c->root = stfs_cachedir_root(c->dir, !c->offline, why, whysz);
	fd = c->root;
	pthread_mutex_unlock(&c->mu);
	return fd;
}

/* The directory rel of the cache (made if create): a descriptor, or
 * -errno with why. */
static int cache_dir(struct stfs_cache *c, const char *rel, int create,
		     char *why, size_t whysz)
{
	int root = root_fd(c, why, whysz);

	if (root < 0)
		return root;
	return stfs_cachedir_opendir(root, c->dir, rel, create, why, whysz);
}

/* The directories of rel (v1/A/B) about to be made counted in the
 * cache's use. */
static void made_dirs(struct stfs_cache *c, const char *rel)
{
	char why[512];
	uint64_t n;
	int root = root_fd(c, why, sizeof(why));

	if (root >= 0 && !c->offline &&
	    (n = stfs_cache_dirs_missing(root, rel))) {
		stfs_cache_reserve(c, n);
		stfs_cache_unreserve(c, n, 0, 1, 0);
	}
}

int stfs_cache_ready(struct stfs_cache *c, struct stfs_error *err)
{
	char why[512];
	int fd;

	if (!c)
		return 0;
	if ((fd = cache_dir(c, "v1", !c->offline, why, sizeof(why))) < 0) {
		if (c->offline && fd == -ENOENT)
			return 0;       /* nothing cached: the open says so */
		return stfs_fail(err, fd == -ELOOP || fd == -ENOTDIR ? -EPERM :
				 fd, NULL, STFS_NO_OFFSET, "cache=%s: %s",
				 c->dir, why);
	}
	/* blocks are read by no one else (a cache made before was 0755) */
	(void)fchmod(fd, 0700);
	close(fd);
	if (!c->offline)
		stfs_cache_count(c);
	return 0;
}

/* The 64-bit name of a, or of a, b and n (b not NULL) into *id: the first
 * 8 bytes of their SHA-256, so that no one can choose a URL (a repo's
 * name, a content key) whose directory is another's, as one could with a
 * hash that is not cryptographic: 0, or -ENOMEM. */
static int id64(const char *a, const char *b, uint64_t n, uint64_t *id)
{
	unsigned char d[EVP_MAX_MD_SIZE];
	char num[24];
	EVP_MD_CTX *x = EVP_MD_CTX_new();
	int ok;

	snprintf(num, sizeof(num), "%" PRIu64, n);
	ok = x && EVP_DigestInit_ex(x, EVP_sha256(), NULL) &&
	     EVP_DigestUpdate(x, a, strlen(a) + 1) &&
	     (!b || (EVP_DigestUpdate(x, b, strlen(b) + 1) &&
		     EVP_DigestUpdate(x, num, strlen(num)))) &&
	     EVP_DigestFinal_ex(x, d, NULL);
	EVP_MD_CTX_free(x);
	if (!ok)
		return -ENOMEM;
	*id = 0;
	for (int i = 0; i < 8; i++)
		*id = *id << 8 | d[i];
	return 0;
}

/* The name of url's version and size, blocks of another size than the
 * default kept apart (a block of the wrong size would be a miss anyway:
 * its length is checked). */
static int version_id(const struct stfs_cache *c, const char *url,
		      const char *version, uint64_t size, uint64_t *id)
{
	int rc = id64(url, version, size, id);

	*id ^= c->block == 4u << 20 ? 0 :
	       (uint64_t)c->block * UINT64_C(0x9e3779b97f4a7c15);
	return rc;
}

/* ---- objects -------------------------------------------------------------- */

int stfs_cache_object(struct stfs_cache *c, const char *url,
		      const char *version, uint64_t size,
		      struct stfs_cache_obj *o, struct stfs_error *err)
{
	char text[512], why[512], id[17];
	uint64_t uid, vid;
	int rc, n, d, up;

	memset(o, 0, sizeof(*o));
	if (!c || !version[0])
		return -ENOENT;         /* no cache, or no way to key it */
	for (const char *v = version; *v; v++)
		if ((unsigned char)*v < 0x20 || *v == 0x7f)
			return -EINVAL; /* meta holds it on one line */
	if (id64(url, NULL, 0, &uid) || version_id(c, url, version, size, &vid))
		return -ENOMEM;
	snprintf(o->dir, sizeof(o->dir), "v1/%016" PRIx64 "/%016" PRIx64,
		 uid, vid);
	o->size = size;
	o->key = stfs_hash64(o->dir, strlen(o->dir));
	made_dirs(c, o->dir);
	if ((d = cache_dir(c, o->dir, 1, why, sizeof(why))) < 0) {
		if (d == -EPERM || d == -ELOOP || d == -ENOTDIR)
			return stfs_fail(err, -EPERM, NULL, STFS_NO_OFFSET,
					 "the cache: %s", why);
		return d;
	}
	/* meta: what offline mounts need to open the object */
	n = snprintf(text, sizeof(text), "%" PRIu64 "\n%s\n", size, version);
	rc = n > 0 && (size_t)n < sizeof(text) ?
	     stfs_cache_put_small(c, d, "meta", NULL, 0, text, (size_t)n) :
	     -EINVAL;
	close(d);
	if (rc)
		return rc;
	snprintf(id, sizeof(id), "%s", strrchr(o->dir, '/') + 1);
	*strrchr(o->dir, '/') = '\0';
	up = cache_dir(c, o->dir, 0, why, sizeof(why));
	o->dir[strlen(o->dir)] = '/';
	if (up < 0)
		return up;
	rc = stfs_cache_put_small(c, up, "latest", NULL, 0, id, 16);
	close(up);
	if (rc)
		return rc;
	o->c = c;
	o->valid = 1;
	return 0;
}

/* The small file name of dir, whole (at most sz - 1 bytes), NUL
 * terminated: its length, or -ENOENT. */
static ssize_t read_small(int dir, const char *name, char *buf, size_t sz)
{
	int fd = stfs_cachedir_open_file(dir, name, UINT64_MAX);
	ssize_t n;

	if (fd < 0)
		return -ENOENT;
	n = read(fd, buf, sz - 1);
	close(fd);
	if (n <= 0 || (size_t)n == sz - 1)
		return -ENOENT;
	buf[n] = '\0';
	return n;
}

/* meta's text: "SIZE\nVERSION\n" into *size and version: 0, or -ENOENT. */
static int parse_meta(char *text, uint64_t *size, char *version, size_t vsz)
{
	char *nl = strchr(text, '\n'), *end;
	unsigned long long sz;

	if (!nl || !isdigit((unsigned char)text[0]))
		return -ENOENT;
	*nl = '\0';
	errno = 0;
	sz = strtoull(text, &end, 10);
	if (errno || *end || !nl[1])
		return -ENOENT;
	end = strchr(nl + 1, '\n');
	if (!end || end[1] || (size_t)(end - nl - 1) >= vsz)
		return -ENOENT;
	memcpy(version, nl + 1, (size_t)(end - nl - 1));
	version[end - nl - 1] = '\0';
	*size = sz;
	return 0;
}

int stfs_cache_latest(struct stfs_cache *c, const char *url,
		      struct stfs_cache_obj *o, char *version, size_t vsz)
{
	char rel[48], id[32], text[512], why[512];
	uint64_t uid;
	int d;

	memset(o, 0, sizeof(*o));
	if (!c || id64(url, NULL, 0, &uid))
		return -ENOENT;
	snprintf(rel, sizeof(rel), "v1/%016" PRIx64, uid);
	if ((d = cache_dir(c, rel, 0, why, sizeof(why))) < 0)
		return -ENOENT;
	if (read_small(d, "latest", id, sizeof(id)) != 16 ||
	    strspn(id, "0123456789abcdef") != 16) {
		close(d);
		return -ENOENT;
	}
	close(d);
	snprintf(o->dir, sizeof(o->dir), "%.19s/%.16s", rel, id);
	if ((d = cache_dir(c, o->dir, 0, why, sizeof(why))) < 0)
		return -ENOENT;
	if (read_small(d, "meta", text, sizeof(text)) < 0 ||
	    parse_meta(text, &o->size, version, vsz)) {
		close(d);
		return -ENOENT;
	}
	close(d);
	/* the directory is the hash of what meta says, or it is not ours */
	if (version_id(c, url, version, o->size, &uid))
		return -ENOENT;
	snprintf(text, sizeof(text), "%016" PRIx64, uid);
	if (strcmp(text, id) != 0)
		return -ENOENT;
	o->key = stfs_hash64(o->dir, strlen(o->dir));
	o->c = c;
	o->valid = 1;
	return 0;
}

/* ---- blocks --------------------------------------------------------------- */

static void block_name(uint64_t block, char *out, size_t outsz)
{
	if (block == STFS_CACHE_HEAD)
		snprintf(out, outsz, "head");
	else
		snprintf(out, outsz, "%" PRIu64, block);
}

int stfs_cache_open_block(const struct stfs_cache_obj *o, uint64_t block,
			  size_t block_len, struct stfs_cache_blk *b,
			  char *why, size_t whysz)
{
	char name[24], dwhy[512];
	struct stat st;
	int d, fd, rc;

	b->fd = -1;
	b->crc = NULL;
	if (!o->valid)
		return -ENOENT;
	block_name(block, name, sizeof(name));
	if ((d = cache_dir(o->c, o->dir, 0, dwhy, sizeof(dwhy))) < 0)
		return -ENOENT;
	/* not ours, or not a file: a miss */
	fd = stfs_cachedir_open_file(d, name, UINT64_MAX);
	close(d);
	if (fd < 0 || fstat(fd, &st) < 0) {
		if (fd >= 0)
			close(fd);
		return -ENOENT;
	}
	if ((uint64_t)st.st_size != (uint64_t)block_len + STFS_BLOCK_HDR) {
		/* exactly the block's bytes: one an older stfs wrote, with
		 * no header, a miss (replaced when fetched again) */
		rc = (uint64_t)st.st_size == block_len ? -ENOENT : -EBADMSG;
		snprintf(why, whysz, "it is %" PRIu64 " bytes, not %" PRIu64,
			 (uint64_t)st.st_size,
			 (uint64_t)block_len + STFS_BLOCK_HDR);
	} else {
		rc = stfs_blockfile_open(fd, o->key, block, block_len, b, why,
					 whysz);
	}
	b->dev = st.st_dev;
	b->ino = st.st_ino;
	if (rc) {
		close(fd);
		return rc;
	}
	(void)futimens(fd, NULL);       /* recently used */
	return 0;
}

void stfs_cache_drop_block(const struct stfs_cache_obj *o,
			   const struct stfs_cache_blk *b, uint64_t block)
{
	char name[24], why[512];
	struct stat st;
	int d;

	if (!o->valid || o->c->offline)
		return;
	block_name(block, name, sizeof(name));
	if ((d = cache_dir(o->c, o->dir, 0, why, sizeof(why))) < 0)
		return;
	/* the file that failed, not one written since in its place */
	if (fstatat(d, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    st.st_dev == b->dev && st.st_ino == b->ino)
		(void)unlinkat(d, name, 0);
	close(d);
}

int stfs_cache_read(const struct stfs_cache_obj *o, uint64_t block,
		    size_t block_len, size_t off, void *buf, size_t len)
{
	struct stfs_cache_blk b;
	char why[160];
	int rc;

	if (off > block_len || len > block_len - off)
		return -ENOENT;
	if ((rc = stfs_cache_open_block(o, block, block_len, &b, why,
					sizeof(why))) < 0) {
		if (rc == -EBADMSG)
			stfs_cache_drop_block(o, &b, block);
		return -ENOENT;
	}
	rc = stfs_blockfile_pread(&b, buf, len, off, why, sizeof(why));
	if (rc == -EBADMSG)
		stfs_cache_drop_block(o, &b, block);
	stfs_blockfile_close(&b);
	return rc ? -ENOENT : 0;
}

/* ---- answers kept for offline mounts -------------------------------------- */

/* The directory of url's answer (v1/<hash of URL>) into dir, and the key
 * its header names (into *key): 0, or -ENOMEM. */
static int doc_dir(const char *url, char *dir, size_t dirsz, uint64_t *key)
{
	uint64_t uid;

	if (id64(url, NULL, 0, &uid))
		return -ENOMEM;
	snprintf(dir, dirsz, "v1/%016" PRIx64, uid);
	*key = stfs_hash64(dir, strlen(dir)) ^ UINT64_C(0xd0c0d0c0d0c0d0c0);
	return 0;
}

int stfs_cache_put_doc(struct stfs_cache *c, const char *url,
		       const void *buf, size_t len)
{
	unsigned char hdr[STFS_BLOCK_HDR];
	char dir[48], why[512];
	uint64_t key;
	int d, rc;

	if (!c || c->offline)
		return -ENOENT;
	if (doc_dir(url, dir, sizeof(dir), &key))
		return -ENOMEM;
	made_dirs(c, dir);
	if ((d = cache_dir(c, dir, 1, why, sizeof(why))) < 0)
		return d;
	stfs_blockfile_header(key, STFS_CACHE_DOC, buf, len, hdr);
	rc = stfs_cache_put_small(c, d, "doc", hdr, sizeof(hdr), buf, len);
	close(d);
	return rc;
}

int stfs_cache_get_doc(struct stfs_cache *c, const char *url, char **buf,
		       size_t *len, char *why, size_t whysz)
{
	struct stfs_cache_blk b;
	char dir[48], dwhy[512];
	struct stat st;
	uint64_t key;
	int d, fd, rc;

	*buf = NULL;
	*len = 0;
	if (!c || doc_dir(url, dir, sizeof(dir), &key))
		return -ENOENT;
	if ((d = cache_dir(c, dir, 0, dwhy, sizeof(dwhy))) < 0)
		return -ENOENT;
	fd = stfs_cachedir_open_file(d, "doc", UINT64_MAX);
	close(d);
	if (fd < 0)
		return -ENOENT;
	if (fstat(fd, &st) < 0 || st.st_size < STFS_BLOCK_HDR ||
	    (uint64_t)st.st_size - STFS_BLOCK_HDR > (1u << 30)) {
		close(fd);
		snprintf(why, whysz, "it is %s", "not a kept answer");
		return -EBADMSG;
	}
	if ((rc = stfs_blockfile_open(fd, key, STFS_CACHE_DOC,
				      (size_t)st.st_size - STFS_BLOCK_HDR, &b,
				      why, whysz))) {
		close(fd);
		return rc;
	}
	if (!(*buf = malloc(b.len + 1))) {
		stfs_blockfile_close(&b);
		return -ENOMEM;
	}
	if ((rc = stfs_blockfile_pread(&b, *buf, b.len, 0, why, whysz))) {
		free(*buf);
		*buf = NULL;
	} else {
		(*buf)[b.len] = '\0';
		*len = b.len;
	}
	stfs_blockfile_close(&b);
	return rc;
}

int stfs_cache_failed_once(struct stfs_cache *c)
{
	int first;

	pthread_mutex_lock(&c->mu);
	first = !c->told;
	c->told = 1;
	pthread_mutex_unlock(&c->mu);
	return first;
}

int stfs_cache_put(struct stfs_cache *c, const struct stfs_cache_obj *o,
		   uint64_t block, const void *buf, size_t len)
{
	struct stfs_cache_item it = { .o = o, .block = block, .buf = buf,
				      .len = len };
	unsigned char hdr[STFS_BLOCK_HDR];
	char name[24], why[512];
	int rc, d;

	if (block != STFS_CACHE_HEAD) {
		stfs_cache_put_batch(c, &it, 1);
		return it.rc;
	}
	/* the head is checked when read: unflushed */
	if (!c || !o->valid || len + STFS_BLOCK_HDR > c->max_bytes)
		return -ENOENT;
	made_dirs(c, o->dir);
	if ((d = cache_dir(c, o->dir, 1, why, sizeof(why))) < 0)
		return d;
	block_name(block, name, sizeof(name));
	stfs_blockfile_header(o->key, block, buf, len, hdr);
	rc = stfs_cache_put_small(c, d, name, hdr, sizeof(hdr), buf, len);
	close(d);
	return rc;
}

/* Stage item it (its directory's descriptor into *d): 0, or -errno. */
static int stage(struct stfs_cache *c, struct stfs_cache_item *it, int *d,
		 struct stfs_cachedir_tmpf *t)
{
	_Alignas(4096) unsigned char hdr[STFS_BLOCK_HDR];
	char name[24], why[512];
	int rc;

	*d = -1;
	t->fd = -1;
	if (!c || !it->o->valid || it->len + STFS_BLOCK_HDR > c->max_bytes ||
	    it->block == STFS_CACHE_HEAD)
		return -ENOENT;
	/* made again if eviction took the directory while it was empty */
	made_dirs(c, it->o->dir);
	if ((*d = cache_dir(c, it->o->dir, 1, why, sizeof(why))) < 0)
		return *d;
	block_name(it->block, name, sizeof(name));
	stfs_blockfile_header(it->o->key, it->block, it->buf, it->len, hdr);
	/* past the page cache, unless its readers will read it from the
	 * file (blocks.c, stfs_inflight_item()) */
	t->direct = !it->keep_pages;
	rc = stfs_cachedir_stage(*d, name, hdr, sizeof(hdr), it->buf, it->len,
				 t);
	/* counted once its temporary file is there, of its whole size: the
	 * other daemons' scans count that file from then on, and one that
	 * scanned between a count made first and the file would set the
	 * shared use without it (the directory then ended above cache_size,
	 * test_shared_size); counted twice a moment at worst, which only
	 * evicts early */
	stfs_cache_reserve(c, stfs_cache_charge(it->len + STFS_BLOCK_HDR));
	return rc;
}

void stfs_cache_put_batch(struct stfs_cache *c, struct stfs_cache_item *it,
			  size_t n)
{
	struct stfs_cachedir_tmpf t[STFS_CACHE_BATCH];
	int d[STFS_CACHE_BATCH];

	if (n > STFS_CACHE_BATCH) {
		stfs_cache_put_batch(c, it + STFS_CACHE_BATCH,
				     n - STFS_CACHE_BATCH);
		n = STFS_CACHE_BATCH;
	}
	for (size_t i = 0; i < n; i++)
		it[i].rc = stage(c, &it[i], &d[i], &t[i]);
	/* every block's writeback started, then each waited for: the disk
	 * gets them together, and one journal commit can cover them all */
	for (size_t i = 0; i < n; i++)
		if (!it[i].rc)
			(void)sync_file_range(t[i].fd, 0, 0,
					      SYNC_FILE_RANGE_WRITE);
	for (size_t i = 0; i < n; i++)
		if (!it[i].rc && fdatasync(t[i].fd) < 0)
			it[i].rc = -errno;
	/* only now, all flushed, do they take their names */
	for (size_t i = 0; i < n; i++) {
		if (d[i] < 0)
			continue;
		if (t[i].fd >= 0) {
			t[i].flushed = !it[i].rc;
			t[i].keep = it[i].keep_pages;
			it[i].rc = stfs_cachedir_publish(&t[i], it[i].rc);
		}
		close(d[i]);
		stfs_cache_unreserve(c, stfs_cache_charge(it[i].len +
							  STFS_BLOCK_HDR),
				     it[i].rc, 0, 0);
	}
	if (c && n)
		stfs_cache_unreserve(c, 0, 0, 1, 0);
}

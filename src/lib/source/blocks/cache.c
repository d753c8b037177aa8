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
 * must name the version its directory is the hash of.  Least recently
 * used blocks (by mtime, which a hit refreshes) are removed when the
 * cache grows past its size; the temporary files of a writer that was
 * killed are removed then too.
 *
 * The cache is trusted only when it is private, and nothing under it is
 * reached through a symbolic link (cachedir.c): every path here is
 * relative to the cache's directory descriptor, opened once.  The cache
 * is an object of the remote layer (struct stfs_cache, remote.h), made
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
	if ((d = cache_dir(c, o->dir, 1, why, sizeof(why))) < 0) {
		if (d == -EPERM || d == -ELOOP || d == -ENOTDIR)
			return stfs_fail(err, -EPERM, NULL, STFS_NO_OFFSET,
					 "the cache: %s", why);
		return d;
	}
	/* meta: what offline mounts need to open the object */
	n = snprintf(text, sizeof(text), "%" PRIu64 "\n%s\n", size, version);
	rc = n > 0 && (size_t)n < sizeof(text) ?
	     stfs_cachedir_put(d, "meta", text, (size_t)n, 0) : -EINVAL;
	close(d);
	if (rc)
		return rc;
	snprintf(id, sizeof(id), "%s", strrchr(o->dir, '/') + 1);
	*strrchr(o->dir, '/') = '\0';
	up = cache_dir(c, o->dir, 0, why, sizeof(why));
	o->dir[strlen(o->dir)] = '/';
	if (up < 0)
		return up;
	rc = stfs_cachedir_put(up, "latest", id, 16, 0);
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

/* ---- eviction ------------------------------------------------------------- */

struct entry {
	char dir[48];           /* v1/X/Y */
	char name[24];
	time_t mtime;
	uint64_t size;
};

struct scan {
	struct entry *list;
	size_t n, cap;
	uint64_t total;
};

static int cmp_mtime(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	return x->mtime < y->mtime ? -1 : x->mtime > y->mtime;
}

/* Open directory name of dir (private, no link) for reading entries. */
static DIR *sub(int dir, const char *name, int *fd)
{
	char why[512];
	DIR *d;
	int dup_fd;

	if ((*fd = stfs_cachedir_opendir(dir, "", name, 0, why,
					 sizeof(why))) < 0)
		return NULL;
	if ((dup_fd = dup(*fd)) < 0 || !(d = fdopendir(dup_fd))) {
		if (dup_fd >= 0)
			close(dup_fd);
		close(*fd);
		return NULL;
	}
	return d;
}

/* The blocks of version directory fd (v1/a/b); temporary files of killed
 * writers removed, those of live ones (not ours: the cache's writing has
 * those) counted. */
static void scan_version(struct scan *sc, int fd, DIR *d, const char *a,
			 const char *b)
{
	char mine[32];
	struct dirent *c;

	snprintf(mine, sizeof(mine), ".tmp.%d.", (int)getpid());
	while ((c = readdir(d))) {
		struct stat st;
		struct entry *e;
		uint64_t sz;

		if (strstr(c->d_name, ".tmp.")) {
			if (!strstr(c->d_name, mine) &&
			    stfs_cachedir_tmp(fd, c->d_name, &sz) == 0)
				sc->total += sz;
			continue;
		}
		if (!c->d_name[0] || strlen(c->d_name) >= sizeof(e->name) ||
		    strspn(c->d_name, "0123456789") != strlen(c->d_name))
			continue;
		if (fstatat(fd, c->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		if (sc->n == sc->cap) {
			void *p = realloc(sc->list, (sc->cap * 2 + 64) *
					  sizeof(*sc->list));
			if (!p)
				return;
			sc->list = p;
			sc->cap = sc->cap * 2 + 64;
		}
		e = &sc->list[sc->n++];
		snprintf(e->dir, sizeof(e->dir), "v1/%.16s/%.16s", a, b);
		snprintf(e->name, sizeof(e->name), "%.23s", c->d_name);
		e->mtime = st.st_mtime;
		e->size = (uint64_t)st.st_size;
		sc->total += e->size;
	}
}

/* Every block of the cache (and the bytes they use), oldest first: only
 * in private directories, none reached through a link. */
static void list_blocks(const struct stfs_cache *c, struct scan *sc)
{
	char why[512];
	struct dirent *a, *b;
	int v1, f2, f3;
	DIR *d1, *d2, *d3;

	memset(sc, 0, sizeof(*sc));
	if (c->root < 0 ||
	    (v1 = stfs_cachedir_opendir(c->root, c->dir, "v1", 1, why,
					sizeof(why))) < 0)
		return;
	if ((f2 = dup(v1)) < 0 || !(d1 = fdopendir(f2))) {
		if (f2 >= 0)
			close(f2);
		close(v1);
		return;
	}
	while ((a = readdir(d1))) {
		if (strlen(a->d_name) != 16 || !(d2 = sub(v1, a->d_name, &f2)))
			continue;
		while ((b = readdir(d2))) {
			if (strlen(b->d_name) != 16 ||
			    !(d3 = sub(f2, b->d_name, &f3)))
				continue;
			scan_version(sc, f3, d3, a->d_name, b->d_name);
			closedir(d3);
			close(f3);
		}
		closedir(d2);
		close(f2);
	}
	closedir(d1);
	close(v1);
	if (sc->n > 1)
		qsort(sc->list, sc->n, sizeof(*sc->list), cmp_mtime);
}

/* Bring the cache under its size, oldest blocks first (under mu). */
static void evict(struct stfs_cache *c, uint64_t keep_free)
{
	struct scan sc;
	char why[512];

	list_blocks(c, &sc);
	/* the blocks on the disk (and other writers' temporary files) are
	 * kept under the size, with room for the one about to be written;
	 * ours being written are not counted here: counted, they made every
	 * block written go at once to make room for them, and a cache that
	 * could hold one block could end up with none.  The directory holds
	 * at most the size plus the blocks in flight. */
	for (size_t i = 0; i < sc.n && sc.total + keep_free > c->max_bytes;
	     i++) {
		int d = stfs_cachedir_opendir(c->root, c->dir,
					      sc.list[i].dir, 0, why,
					      sizeof(why));

		if (d < 0)
			continue;
		if (unlinkat(d, sc.list[i].name, 0) == 0) {
			sc.total -= sc.list[i].size;
			stfs_m_evicted(c->metrics, sc.list[i].size);
		}
		close(d);
	}
	c->used = sc.total + c->writing;
	c->scanned = 1;
	free(sc.list);
}

/* ---- the use shared by every daemon of the cache ---------------------------
 *
 * Daemons that share a cache directory share its size: the bytes of
 * blocks (and blocks being written) are counted in DIR/usage, which each
 * reads, changes and writes under an flock of it, so that each one's
 * eviction sees every daemon's blocks.  A usage that does not parse (a
 * crash while it was written, a hand that edited it) makes the next
 * writer count the blocks on the disk again.
 */

int stfs_cache_parse_usage(const char *text, size_t n, uint64_t *out)
{
	char num[24], *end;
	unsigned long long v;

	if (n < 2 || n > 21 || text[n - 1] != '\n')
		return -EINVAL;
	memcpy(num, text, n - 1);
	num[n - 1] = '\0';
	/* digits, as written: no sign, no space, no leading zero */
	if (strspn(num, "0123456789") != n - 1 || (num[0] == '0' && n > 2))
		return -EINVAL;
	errno = 0;
	v = strtoull(num, &end, 10);
	if (errno || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Lock the shared use and take it into c->used (under mu): no file (it
 * cannot be made) leaves c's own count. */
static void shared_begin(struct stfs_cache *c)
{
	char text[32];
	ssize_t n;

	if (c->usage < 0 && c->root >= 0)
		c->usage = openat(c->root, "usage", O_RDWR | O_CREAT |
				  O_NOFOLLOW | O_CLOEXEC, 0600);
	if (c->usage < 0)
		return;
	while (flock(c->usage, LOCK_EX) < 0 && errno == EINTR)
		;
	n = pread(c->usage, text, sizeof(text), 0);
	if (n <= 0 || stfs_cache_parse_usage(text, (size_t)n, &c->used))
		c->scanned = 0;         /* counted again from the disk */
}

/* Write c->used back and unlock (under mu). */
static void shared_end(struct stfs_cache *c)
{
	char text[32];
	int n;

	if (c->usage < 0)
		return;
	n = snprintf(text, sizeof(text), "%" PRIu64 "\n", c->used);
	if (pwrite(c->usage, text, (size_t)n, 0) != n ||
	    ftruncate(c->usage, n) < 0)
		(void)ftruncate(c->usage, 0);   /* counted again */
	(void)flock(c->usage, LOCK_UN);
}

/* len bytes of c about to be written (a place made for them). */
static void reserve(struct stfs_cache *c, size_t len)
{
	pthread_mutex_lock(&c->mu);
	shared_begin(c);
	if (!c->scanned || c->used + len > c->max_bytes)
		evict(c, len);
	c->used += len;
	c->writing += len;
	shared_end(c);
	pthread_mutex_unlock(&c->mu);
}

/* len bytes reserved are written (rc 0, now on the list) or not. */
static void unreserve(struct stfs_cache *c, size_t len, int rc, int now)
{
	pthread_mutex_lock(&c->mu);
	shared_begin(c);
	c->writing -= len;
	if (rc)
		c->used = c->used > len ? c->used - len : 0;
	/* blocks written at once may have passed the size together: the
	 * oldest go now that they are on the list (a batch's once all of
	 * it is: one by one, each would go to make room for the others
	 * still counted as being written) */
	if ((now && c->used > c->max_bytes) || !c->scanned)
		evict(c, 0);
	shared_end(c);
	pthread_mutex_unlock(&c->mu);
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
	struct stfs_cachedir_tmpf t = { .flushed = 0 };
	char dir[48], why[512];
	uint64_t key;
	int d, rc;

	if (!c || c->offline)
		return -ENOENT;
	if (doc_dir(url, dir, sizeof(dir), &key))
		return -ENOMEM;
	if ((d = cache_dir(c, dir, 1, why, sizeof(why))) < 0)
		return d;
	stfs_blockfile_header(key, STFS_CACHE_DOC, buf, len, hdr);
	if (!(rc = stfs_cachedir_stage(d, "doc", hdr, sizeof(hdr), buf, len,
				       &t)))
		rc = stfs_cachedir_publish(&t, 0);
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
	struct stfs_cachedir_tmpf t = { .flushed = 0 };
	char name[24], why[512];
	int rc, d;

	if (block != STFS_CACHE_HEAD) {
		stfs_cache_put_batch(c, &it, 1);
		return it.rc;
	}
	/* the head is checked when read: unflushed */
	if (!c || !o->valid || len + STFS_BLOCK_HDR > c->max_bytes)
		return -ENOENT;
	if ((d = cache_dir(c, o->dir, 0, why, sizeof(why))) < 0)
		return d;
	block_name(block, name, sizeof(name));
	stfs_blockfile_header(o->key, block, buf, len, hdr);
	rc = stfs_cachedir_stage(d, name, hdr, sizeof(hdr), buf, len, &t);
	reserve(c, len + STFS_BLOCK_HDR);       /* see stage() */
	if (!rc)
		rc = stfs_cachedir_publish(&t, 0);
	close(d);
	unreserve(c, len + STFS_BLOCK_HDR, rc, 1);
	return rc;
}

/* Stage item it (its directory's descriptor into *d): 0, or -errno. */
static int stage(struct stfs_cache *c, struct stfs_cache_item *it, int *d,
		 struct stfs_cachedir_tmpf *t)
{
	unsigned char hdr[STFS_BLOCK_HDR];
	char name[24], why[512];
	int rc;

	*d = -1;
	t->fd = -1;
	if (!c || !it->o->valid || it->len + STFS_BLOCK_HDR > c->max_bytes ||
	    it->block == STFS_CACHE_HEAD)
		return -ENOENT;
	if ((*d = cache_dir(c, it->o->dir, 0, why, sizeof(why))) < 0)
		return *d;
	block_name(it->block, name, sizeof(name));
	stfs_blockfile_header(it->o->key, it->block, it->buf, it->len, hdr);
	rc = stfs_cachedir_stage(*d, name, hdr, sizeof(hdr), it->buf, it->len,
				 t);
	/* counted once its temporary file is there, of its whole size: the
	 * other daemons' scans count that file from then on, and one that
	 * scanned between a count made first and the file would set the
	 * shared use without it (the directory then ended above cache_size,
	 * test_shared_size); counted twice a moment at worst, which only
	 * evicts early */
	reserve(c, it->len + STFS_BLOCK_HDR);
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
		unreserve(c, it[i].len + STFS_BLOCK_HDR, it[i].rc, 0);
	}
	if (c && n)
		unreserve(c, 0, 0, 1);
}

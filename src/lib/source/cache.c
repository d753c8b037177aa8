/*
 * cache.c: the on-disk cache of remote objects, in blocks.
 *
 * Layout under the cache directory:
 *   v1/<hash of the URL>/latest                  the last version seen
 *   v1/<hash of the URL>/<hash of ETag and size>/meta
 *   v1/<hash of the URL>/<hash of ETag and size>/<block number>
 * A version is named by the ETag (or Last-Modified) and the size seen at
 * open, so a changed object is never served from an old version's blocks.
 * A block is written to a temporary name, flushed (fsync) and renamed, so
 * it is either complete or absent, even after a crash, kill -9 or a power
 * loss; it is checked to have its exact length when read.  The small
 * files (meta, latest, head) are renamed into place but not flushed: a
 * power loss can leave them short or empty, and they are checked when
 * read (the head's header is validated as any header is).  Least
 * recently used blocks (by mtime, which a hit refreshes) are removed when
 * the cache grows past its size.  The cache is an object of the remote
 * layer (struct stfs_cache, remote.h), made from its options.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "remote.h"

#define BLOCK_PATH_MAX (sizeof(((struct stfs_cache_obj *)0)->dir) + 24)

int stfs_cache_init(struct stfs_cache *c, const char *dir, uint64_t max,
		    size_t block)
{
	*c = (struct stfs_cache){ .max_bytes = max, .block = block };
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
	free(c->dir);
	c->dir = NULL;
}

static uint64_t hash2(const char *a, const char *b, uint64_t n)
{
	char num[24];
	uint64_t h = stfs_hash64(a, strlen(a));

	snprintf(num, sizeof(num), "%" PRIu64, n);
	h ^= stfs_hash64(b, strlen(b)) * 0x9e3779b97f4a7c15ULL;
	return h ^ stfs_hash64(num, strlen(num)) * 0xc2b2ae3d27d4eb4fULL;
}

static int mkdirs(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST) {
			*p = '/';
			return -errno;
		}
		*p = '/';
	}
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Write len bytes to path atomically: a temporary file, renamed; with
 * durable, flushed (fsync) first, so that it survives a power loss too. */
/* Write len bytes from buf to fd: 0, or -errno. */
static int write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* buf to a temporary file renamed to path (flushed first if durable).
 * Blocks written with O_DIRECT instead made a cold read 2.3x slower here:
 * each worker then waited for the disk. */
static int put_file(const char *path, const void *buf, size_t len,
		    int durable)
{
	char tmp[BLOCK_PATH_MAX + 64];
	int fd, rc;

	snprintf(tmp, sizeof(tmp), "%s.tmp.%d.%lx", path, (int)getpid(),
		 (unsigned long)pthread_self());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	rc = write_all(fd, buf, len);
	if (!rc && durable && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path) < 0)
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

/* ---- objects -------------------------------------------------------------- */

int stfs_cache_object(struct stfs_cache *c, const char *url,
		      const char *version, uint64_t size,
		      struct stfs_cache_obj *o)
{
	char meta[sizeof(o->dir) + 8], latest[sizeof(o->dir) + 8], text[512];
	int rc, n;

	memset(o, 0, sizeof(*o));
	if (!c || !version[0])
		return -ENOENT;         /* no cache, or no way to key it */
	/* blocks of another size than the default are kept apart (a block
	 * of the wrong size would be a miss anyway: its length is checked) */
	n = snprintf(o->dir, sizeof(o->dir), "%s/v1/%016" PRIx64 "/%016"
		     PRIx64, c->dir, stfs_hash64(url, strlen(url)),
		     hash2(url, version, size) ^ (c->block == 4u << 20 ?
		     0 : (uint64_t)c->block * UINT64_C(0x9e3779b97f4a7c15)));
	if (n < 0 || (size_t)n >= sizeof(o->dir) - 32)
		return -ENAMETOOLONG;
	o->size = size;
	if ((rc = mkdirs(o->dir)))
		return rc;
	/* meta: what offline mounts need to open the object */
	n = snprintf(text, sizeof(text), "%" PRIu64 "\n%s\n", size, version);
	snprintf(meta, sizeof(meta), "%s/meta", o->dir);
	snprintf(latest, sizeof(latest), "%.*s/latest",
		 (int)(strrchr(o->dir, '/') - o->dir), o->dir);
	if ((rc = put_file(meta, text, (size_t)n, 0)) ||
	    (rc = put_file(latest, strrchr(o->dir, '/') + 1, 16, 0)))
		return rc;
	o->valid = 1;
	return 0;
}

int stfs_cache_latest(struct stfs_cache *c, const char *url,
		      struct stfs_cache_obj *o, char *version, size_t vsz)
{
	char path[sizeof(o->dir) + 8], id[17] = "", text[512];
	ssize_t n;
	int fd;

	memset(o, 0, sizeof(*o));
	if (!c)
		return -ENOENT;
	snprintf(path, sizeof(path), "%s/v1/%016" PRIx64 "/latest", c->dir,
		 stfs_hash64(url, strlen(url)));
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -ENOENT;
	n = read(fd, id, 16);
	close(fd);
	if (n != 16 || strspn(id, "0123456789abcdef") != 16)
		return -ENOENT;
	snprintf(o->dir, sizeof(o->dir), "%s/v1/%016" PRIx64 "/%s",
		 c->dir, stfs_hash64(url, strlen(url)), id);
	snprintf(path, sizeof(path), "%s/meta", o->dir);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -ENOENT;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return -ENOENT;
	text[n] = '\0';
	{
		char *nl = strchr(text, '\n'), *end;
		unsigned long long sz;

		if (!nl)
			return -ENOENT;
		*nl = '\0';
		errno = 0;
		sz = strtoull(text, &end, 10);
		if (errno || *end || !nl[1])
			return -ENOENT;
		end = strchr(nl + 1, '\n');
		if (!end || (size_t)(end - nl - 1) >= vsz)
			return -ENOENT;
		memcpy(version, nl + 1, (size_t)(end - nl - 1));
		version[end - nl - 1] = '\0';
		o->size = sz;
	}
	o->valid = 1;
	return 0;
}

/* ---- blocks --------------------------------------------------------------- */

static void block_path(const struct stfs_cache_obj *o, uint64_t block,
		       char *out, size_t outsz)
{
	if (block == STFS_CACHE_HEAD)
		snprintf(out, outsz, "%s/head", o->dir);
	else
		snprintf(out, outsz, "%s/%" PRIu64, o->dir, block);
}

int stfs_cache_open_block(const struct stfs_cache_obj *o, uint64_t block,
			  size_t block_len)
{
	char path[BLOCK_PATH_MAX];
	struct stat st;
	int fd;

	if (!o->valid)
		return -ENOENT;
	block_path(o, block, path, sizeof(path));
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -ENOENT;
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size != block_len) {
		close(fd);              /* not ours, or not whole: a miss */
		return -ENOENT;
	}
	(void)futimens(fd, NULL);       /* recently used */
	return fd;
}

int stfs_cache_pread(int fd, void *buf, size_t len, size_t off)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = pread(fd, (char *)buf + got, len - got,
				  (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	return got == len ? 0 : -ENOENT;
}

int stfs_cache_read(const struct stfs_cache_obj *o, uint64_t block,
		    size_t block_len, size_t off, void *buf, size_t len)
{
	int fd, rc;

	if (off > block_len || len > block_len - off)
		return -ENOENT;
	if ((fd = stfs_cache_open_block(o, block, block_len)) < 0)
		return fd;
	rc = stfs_cache_pread(fd, buf, len, off);
	close(fd);
	return rc;
}

/* names in the cache: a directory name is at most 255 bytes */
#define V1_MAX (STFS_CACHE_DIR_MAX + 8)
#define P2_MAX (V1_MAX + 260)
#define P3_MAX (P2_MAX + 260)

struct entry {
	char path[P3_MAX + 260];
	time_t mtime;
	uint64_t size;
};

static int cmp_mtime(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	return x->mtime < y->mtime ? -1 : x->mtime > y->mtime;
}

/* Every block of the cache (and the bytes they use), oldest first. */
static size_t list_blocks(const struct stfs_cache *cache,
			  struct entry **out, uint64_t *total)
{
	char v1[V1_MAX];
	struct entry *list = NULL;
	size_t n = 0, cap = 0;
	DIR *d1, *d2, *d3;
	struct dirent *a, *b, *c;

	*total = 0;
	snprintf(v1, sizeof(v1), "%s/v1", cache->dir);
	if (!(d1 = opendir(v1)))
		goto done;
	while ((a = readdir(d1))) {
		char p2[P2_MAX];

		if (a->d_name[0] == '.')
			continue;
		snprintf(p2, sizeof(p2), "%s/%s", v1, a->d_name);
		if (!(d2 = opendir(p2)))
			continue;
		while ((b = readdir(d2))) {
			char p3[P3_MAX];

			if (strlen(b->d_name) != 16)
				continue;
			snprintf(p3, sizeof(p3), "%s/%s", p2, b->d_name);
			if (!(d3 = opendir(p3)))
				continue;
			while ((c = readdir(d3))) {
				struct stat st;
				struct entry *e;

				if (strspn(c->d_name, "0123456789") !=
				    strlen(c->d_name) || !c->d_name[0])
					continue;
				if (n == cap) {
					void *p = realloc(list, (cap = cap * 2 +
							  64) * sizeof(*list));
					if (!p)
						break;
					list = p;
				}
				e = &list[n];
				snprintf(e->path, sizeof(e->path), "%s/%s", p3,
					 c->d_name);
				if (stat(e->path, &st) < 0)
					continue;
				e->mtime = st.st_mtime;
				e->size = (uint64_t)st.st_size;
				*total += e->size;
				n++;
			}
			closedir(d3);
		}
		closedir(d2);
	}
	closedir(d1);
done:
	if (n > 1)
		qsort(list, n, sizeof(*list), cmp_mtime);
	*out = list;
	return n;
}

/* Bring the cache under its size, oldest blocks first (under mu). */
static void evict(struct stfs_cache *c, uint64_t keep_free)
{
	struct entry *list;
	uint64_t total;
	size_t n = list_blocks(c, &list, &total);

	/* blocks being written are not on the list yet, but count */
	total += c->writing;
	for (size_t i = 0; i < n && total + keep_free > c->max_bytes; i++)
		if (unlink(list[i].path) == 0)
			total -= list[i].size;
	c->used = total;
	c->scanned = 1;
	free(list);
}

int stfs_cache_put(struct stfs_cache *c, const struct stfs_cache_obj *o,
		   uint64_t block, const void *buf, size_t len)
{
	char path[BLOCK_PATH_MAX];
	int rc;

	if (!c || !o->valid || len > c->max_bytes)
		return -ENOENT;
	pthread_mutex_lock(&c->mu);
	if (!c->scanned || c->used + len > c->max_bytes)
		evict(c, len);
	c->used += len;
	c->writing += len;
	pthread_mutex_unlock(&c->mu);
	block_path(o, block, path, sizeof(path));
	/* data blocks are flushed: a block that is there is right; the head
	 * and meta are checked when read (and the header validated) */
	rc = put_file(path, buf, len, block != STFS_CACHE_HEAD);
	pthread_mutex_lock(&c->mu);
	c->writing -= len;
	if (rc)
		c->used = c->used > len ? c->used - len : 0;
	/* blocks written at once may have passed the size together: the
	 * oldest go now that they are on the list */
	else if (c->used > c->max_bytes)
		evict(c, 0);
	pthread_mutex_unlock(&c->mu);
	return rc;
}

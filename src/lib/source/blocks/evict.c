/*
 * evict.c: what the cache directory holds, counted and kept under
 * cache_size.
 *
 * Everything stfs writes under the cache counts: blocks, heads, kept
 * answers (doc), meta and latest, each file as its size rounded up to a
 * 4 KiB block (what a file system gives it), each directory of an object
 * or a version as 4 KiB, and the cache's own directory, v1 and usage as
 * 12 KiB.  A file replaced (a meta written again) counts once.
 *
 * Daemons that share a cache directory share its size: the bytes are
 * counted in DIR/usage, which each reads, changes and writes under an
 * flock of it, so that each one's eviction sees every daemon's files.  A
 * usage that does not parse (a crash while it was written, a hand that
 * edited it) makes the next writer count the files on the disk again.
 *
 * Eviction walks the cache only when it must free room, and then frees
 * more than the room asked: once the count passes cache_size, the least
 * recently used files (by mtime, which a hit refreshes) go until it is
 * under the low-water mark (STFS_CACHE_LOW_PCT of cache_size, less what
 * is about to be written), so that a full cache is walked once per tenth
 * of its size written, not once per block (issue 52: a stat of every
 * block file per block written, under the lock every daemon shares).  The
 * walk also sets the count to what is on the disk (a daemon killed while
 * it wrote leaves its reservation counted until then) and removes the
 * temporary files of writers that were killed.  A file another daemon
 * removed in between is passed over; a directory left empty is removed.
 * Nothing is reached through a symbolic link (cachedir.c).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format.h"
#include "cache.h"
#include "metrics.h"

#define BASE (3 * STFS_CACHE_FS_BLOCK)  /* the cache, v1, usage */

uint64_t stfs_cache_charge(uint64_t size)
{
	return (size + STFS_CACHE_FS_BLOCK - 1) /
	       STFS_CACHE_FS_BLOCK * STFS_CACHE_FS_BLOCK;
}

uint64_t stfs_cache_charged(int dir, const char *name)
{
	struct stat st;

	if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISREG(st.st_mode))
		return 0;
	return stfs_cache_charge((uint64_t)st.st_size);
}

uint64_t stfs_cache_dirs_missing(int root, const char *rel)
{
	char path[64];
	uint64_t n = 0;
	struct stat st;

	/* v1/A and v1/A/B: those that are not there yet */
	snprintf(path, sizeof(path), "%s", rel);
	for (char *s = strrchr(path, '/'); s; s = strrchr(path, '/')) {
		if (fstatat(root, path, &st, AT_SYMLINK_NOFOLLOW) == 0)
			break;
		n += STFS_CACHE_FS_BLOCK;
		*s = '\0';
	}
	return n;
}

/* ---- the walk ------------------------------------------------------------- */

struct entry {
	char dir[48];           /* v1/A or v1/A/B */
	char name[24];
	int64_t mtime;          /* ns */
	uint64_t size;          /* charged */
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

/* A file stfs writes in a version directory (deep) or an object's. */
static int ours(const char *name, int deep)
{
	size_t n = strlen(name);

	if (!deep)
		return !strcmp(name, "latest") || !strcmp(name, "doc");
	return !strcmp(name, "head") || !strcmp(name, "meta") ||
	       (n && n < 24 && strspn(name, "0123456789") == n);
}

static void add(struct scan *sc, const char *dir, const char *name,
		const struct stat *st)
{
	struct entry *e;

	if (sc->n == sc->cap) {
		void *p = realloc(sc->list, (sc->cap * 2 + 64) *
				  sizeof(*sc->list));
		if (!p)
			return;
		sc->list = p;
		sc->cap = sc->cap * 2 + 64;
	}
	e = &sc->list[sc->n++];
	snprintf(e->dir, sizeof(e->dir), "%s", dir);
	snprintf(e->name, sizeof(e->name), "%s", name);
	e->mtime = (int64_t)st->st_mtim.tv_sec * 1000000000 +
		   st->st_mtim.tv_nsec;
	e->size = stfs_cache_charge((uint64_t)st->st_size);
	sc->total += e->size;
}

/* The files of directory fd (rel: v1/A, or v1/A/B if deep) into sc;
 * temporary files of killed writers removed, those of live ones (not
 * ours: the cache's writing has those) counted; the version directories
 * of an object walked too. */
static void scan_dir(struct scan *sc, int fd, DIR *d, const char *rel,
		     int deep)
{
	char mine[32], sub_rel[48];
	struct dirent *c;

	snprintf(mine, sizeof(mine), ".tmp.%d.", (int)getpid());
	sc->total += STFS_CACHE_FS_BLOCK;       /* the directory itself */
	while ((c = readdir(d))) {
		struct stat st;
		uint64_t sz;
		DIR *d2;
		int f2;

		if (strstr(c->d_name, ".tmp.")) {
			if (!strstr(c->d_name, mine) &&
			    stfs_cachedir_tmp(fd, c->d_name, &sz) == 0)
				sc->total += stfs_cache_charge(sz);
			continue;
		}
		if (!deep && strlen(c->d_name) == 16 &&
		    strspn(c->d_name, "0123456789abcdef") == 16) {
			if (!(d2 = sub(fd, c->d_name, &f2)))
				continue;
			snprintf(sub_rel, sizeof(sub_rel), "%.19s/%.16s", rel,
				 c->d_name);
			scan_dir(sc, f2, d2, sub_rel, 1);
			closedir(d2);
			close(f2);
			continue;
		}
		if (!ours(c->d_name, deep) ||
		    fstatat(fd, c->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		add(sc, rel, c->d_name, &st);
	}
}

/* Every file stfs wrote in the cache (and the bytes they and their
 * directories use), oldest first: only in private directories, none
 * reached through a link. */
static void list_files(const struct stfs_cache *c, struct scan *sc)
{
	char why[512], rel[24];
	struct dirent *a;
	int v1, f1, f2;
	DIR *d1, *d2;

	memset(sc, 0, sizeof(*sc));
	sc->total = BASE;
	if (c->root < 0 ||
	    (v1 = stfs_cachedir_opendir(c->root, c->dir, "v1", 1, why,
					sizeof(why))) < 0)
		return;
	if ((f1 = dup(v1)) < 0 || !(d1 = fdopendir(f1))) {
		if (f1 >= 0)
			close(f1);
		close(v1);
		return;
	}
	while ((a = readdir(d1))) {
		if (strlen(a->d_name) != 16 || !(d2 = sub(v1, a->d_name, &f2)))
			continue;
		snprintf(rel, sizeof(rel), "v1/%.16s", a->d_name);
		scan_dir(sc, f2, d2, rel, 0);
		closedir(d2);
		close(f2);
	}
	closedir(d1);
	close(v1);
	if (sc->n > 1)
		qsort(sc->list, sc->n, sizeof(*sc->list), cmp_mtime);
}

/* The directory rel (v1/A or v1/A/B) removed if empty, and v1/A after
 * it: the bytes freed. */
static uint64_t prune(const struct stfs_cache *c, const char *rel)
{
	char path[48], why[512];
	uint64_t freed = 0;
	char *s;
	int up;

	snprintf(path, sizeof(path), "%s", rel);
	while ((s = strrchr(path, '/'))) {
		*s = '\0';
		if ((up = stfs_cachedir_opendir(c->root, c->dir, path, 0, why,
						sizeof(why))) < 0)
			break;
		if (unlinkat(up, s + 1, AT_REMOVEDIR) < 0) {
			close(up);
			break;                  /* not empty: in use */
		}
		close(up);
		freed += STFS_CACHE_FS_BLOCK;
	}
	return freed;
}

/* Bring the cache under its low-water mark, less keep_free, oldest files
 * first (under mu and the shared lock). */
static void evict(struct stfs_cache *c, uint64_t keep_free)
{
	uint64_t low = c->max_bytes / 100 * STFS_CACHE_LOW_PCT +
		       c->max_bytes % 100 * STFS_CACHE_LOW_PCT / 100;
	uint64_t goal = low > keep_free ? low - keep_free : 0;
	struct scan sc;
	char why[512];

	list_files(c, &sc);
	/* the files on the disk (and other writers' temporary files) are
	 * kept under the mark, with room for the one about to be written;
	 * ours being written are not counted here: counted, they made every
	 * block written go at once to make room for them, and a cache that
	 * could hold one block could end up with none.  The directory holds
	 * at most the size plus the blocks in flight. */
	if (sc.total + keep_free <= c->max_bytes)
		goal = sc.total;        /* a walk to count, nothing to free */
	for (size_t i = 0; i < sc.n && sc.total > goal; i++) {
		struct entry *e = &sc.list[i];
		int d = stfs_cachedir_opendir(c->root, c->dir, e->dir, 0, why,
					      sizeof(why));

		if (d < 0)
			continue;
		int ours = unlinkat(d, e->name, 0) == 0;

		if (ours)
			stfs_m_evicted(c->metrics, e->size);
		if (ours || errno == ENOENT) {
			/* gone either way (another daemon's eviction) */
			sc.total -= e->size;
			if (i + 1 == sc.n || strcmp(sc.list[i + 1].dir, e->dir))
				sc.total -= prune(c, e->dir);
		}
		close(d);
	}
	c->used = sc.total + c->writing;
	c->scanned = 1;
	free(sc.list);
}

/* ---- the use shared by every daemon of the cache ------------------------ */

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

void stfs_cache_count(struct stfs_cache *c)
{
	pthread_mutex_lock(&c->mu);
	shared_begin(c);
	if (!c->scanned)
		evict(c, 0);
	shared_end(c);
	pthread_mutex_unlock(&c->mu);
}

void stfs_cache_reserve(struct stfs_cache *c, uint64_t len)
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

void stfs_cache_unreserve(struct stfs_cache *c, uint64_t len, int rc,
			  int now, uint64_t freed)
{
	pthread_mutex_lock(&c->mu);
	shared_begin(c);
	c->writing -= len;
	if (rc)
		freed += len;
	c->used = c->used > freed ? c->used - freed : 0;
	/* blocks written at once may have passed the size together: the
	 * oldest go now that they are on the list (a batch's once all of
	 * it is: one by one, each would go to make room for the others
	 * still counted as being written) */
	if ((now && c->used > c->max_bytes) || !c->scanned)
		evict(c, 0);
	shared_end(c);
	pthread_mutex_unlock(&c->mu);
}

int stfs_cache_put_small(struct stfs_cache *c, int dir, const char *name,
			 const void *hdr, size_t hlen, const void *buf,
			 size_t len)
{
	struct stfs_cachedir_tmpf t = { .flushed = 0 };
	uint64_t n = stfs_cache_charge(hlen + len), old;
	int rc;

	if (n > c->max_bytes)
		return -ENOSPC;
	old = stfs_cache_charged(dir, name);
	rc = stfs_cachedir_stage(dir, name, hdr, hlen, buf, len, &t);
	/* counted once its temporary file is there (see cache.c's stage()) */
	stfs_cache_reserve(c, n);
	if (!rc)
		rc = stfs_cachedir_publish(&t, 0);
	stfs_cache_unreserve(c, n, rc, 1, rc ? 0 : old);
	return rc;
}

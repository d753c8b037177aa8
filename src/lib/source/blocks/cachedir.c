/*
 * cachedir.c: the cache directory of remote sources: usable, private, and
 * walked without following a link.
 *
 * Usable, checked before a mount (stfs_remote_opts_check_cache()): it
 * (or, while it does not exist yet, the nearest folder above it that
 * does) must be a directory stfs can write, so that a cache on a
 * read-only file system, or a regular file given as one, is an error
 * before anything is mounted rather than a mount that silently caches
 * nothing.  Offline, stfs only reads it.
 *
 * Private, checked when a remote source first opens (cache.c's
 * stfs_cache_ready(), through stfs_cachedir_root() here): whatever is
 * under the cache is served as an object's bytes, so another user who can
 * write there could make a mount return bytes of their choosing, and a
 * symbolic link planted there could make stfs write, or eviction delete,
 * outside it.  So, as ssh's StrictModes does for ~/.ssh: the cache
 * directory and every directory under it that stfs uses must be owned by
 * the mounting user and not writable by group or others, or the mount is
 * refused with what is wrong and how to fix it; stfs creates them 0700
 * and its files 0600.  Nothing under the cache is reached through a
 * symbolic link: every path is walked from the cache's own directory
 * descriptor, opened once, one component at a time with O_NOFOLLOW
 * (openat, mkdirat, unlinkat, renameat), and names are checked to be
 * plain components.  A file is used only if it is a regular file of ours,
 * not writable by others, of exactly the length expected.
 *
 * Files are written to "NAME.tmp.PID.TID" (locked with flock while being
 * written, renamed into place before the lock goes), so a writer killed
 * mid-write leaves an unlocked temporary file, which the next scan
 * removes (stfs_cachedir_tmp()).  Writing is in two steps, so that the
 * cache can flush several files at once between them: stage (written to
 * the temporary name, not flushed) and publish (renamed into place).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "format.h"
#include "engine.h"

/* ---- usable: checked before a mount ------------------------------------ */

/* 0, or -errno: ENOTDIR for a file, EROFS, EACCES... */
static int dir_usable(const char *dir, int offline)
{
	char *p = strdup(dir), *slash;
	struct stat st;
	int rc = 0;

	if (!p)
		return -ENOMEM;
	/* the nearest part of the path that exists */
	while (stat(p, &st) < 0) {
		if (errno != ENOENT || offline || !(slash = strrchr(p, '/'))) {
			rc = errno == ENOENT && offline ? 0 : -errno;
			free(p);
			return rc;
		}
		slash[slash == p] = '\0';       /* "/x" -> "/" */
	}
	if (!S_ISDIR(st.st_mode))
		rc = -ENOTDIR;
	else if (access(p, offline ? R_OK | X_OK : W_OK | X_OK) < 0)
		rc = -errno;
	free(p);
	return rc;
}

int stfs_remote_opts_check_cache(const struct stfs_remote_opts *o,
				 char *why, size_t whysz)
{
	int rc;

	why[0] = '\0';
	if (o->nocache || !o->cache_dir ||
	    !(rc = dir_usable(o->cache_dir, o->offline)))
		return 0;
	snprintf(why, whysz, "cache=%s: %s (give a cache= directory stfs can "
		 "%s, or nocache)", o->cache_dir, strerror(-rc),
		 o->offline ? "read" : "write");
	return rc;
}

/* ---- private: checked when a remote source first opens ---------------- */

/* A directory or file of ours that only we may change. */
static int private_stat(const struct stat *st, const char *shown,
			char *why, size_t whysz)
{
	if (st->st_uid != geteuid()) {
		snprintf(why, whysz, "%s is owned by uid %u, not by you (uid "
			 "%u), so its contents cannot be trusted; use a cache "
			 "of your own (cache=DIR), or remove it", shown,
			 (unsigned)st->st_uid, (unsigned)geteuid());
		return -EPERM;
	}
	if (st->st_mode & 022) {
		snprintf(why, whysz, "%s is writable by %s (mode %04o), so "
			 "another user could plant blocks in it; run chmod "
			 "go-w on it (stfs makes its cache 0700)", shown,
			 (st->st_mode & 022) == 022 ? "group and others" :
			 st->st_mode & 2 ? "others" : "its group",
			 (unsigned)(st->st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

/* Is the directory fd (shown as shown) owned by us and not writable by
 * group or others?  0, or -errno with why saying what to do. */
static int stfs_cachedir_check(int fd, const char *shown, char *why,
			       size_t whysz)
{
	struct stat st;

	if (fstat(fd, &st) < 0) {
		snprintf(why, whysz, "%s: %s", shown, strerror(errno));
		return -errno;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(why, whysz, "%s is not a directory", shown);
		return -ENOTDIR;
	}
	return private_stat(&st, shown, why, whysz);
}

/* A plain component: not empty, ".", ".." or with a '/'. */
static int plain(const char *name, size_t n)
{
	return n && n < 256 && memchr(name, '/', n) == NULL &&
	       !(n == 1 && name[0] == '.') &&
	       !(n == 2 && name[0] == '.' && name[1] == '.');
}

/* Open directory name under dir (creating it 0700 if create) without
 * following a link, and check it is private: fd, or -errno. */
static int open_sub(int dir, const char *name, int create, const char *shown,
		    char *why, size_t whysz)
{
	int fd, rc;

	if (create && mkdirat(dir, name, 0700) < 0 && errno != EEXIST) {
		snprintf(why, whysz, "cannot create %s: %s", shown,
			 strerror(errno));
		return -errno;
	}
	fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(why, whysz, "%s: %s", shown,
			 errno == ELOOP || errno == ENOTDIR ?
			 "not a directory (a symbolic link is never followed "
			 "in the cache)" : strerror(errno));
		return rc;
	}
	if ((rc = stfs_cachedir_check(fd, shown, why, whysz))) {
		close(fd);
		return rc;
	}
	return fd;
}

/* dir and the directories up to it made (0700), as mkdir -p: 0, or
 * -errno with why. */
static int make_dirs(const char *dir, char *why, size_t whysz)
{
	char *path = strdup(dir), *p;
	int rc;

	if (!path)
		return -ENOMEM;
	for (p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		(void)mkdir(path, 0700);
		*p = '/';
	}
	if (mkdir(path, 0700) < 0 && errno != EEXIST) {
		rc = -errno;
		snprintf(why, whysz, "cannot create %s: %s", dir,
			 strerror(errno));
		free(path);
		return rc;
	}
	free(path);
	return 0;
}

int stfs_cachedir_root(const char *dir, int create, char *why, size_t whysz)
{
	struct stat st;
	int fd, rc;

	if (create && (rc = make_dirs(dir, why, whysz)))
		return rc;
	/* the cache itself may be a link the user made, but not one
	 * another user owns */
	if (lstat(dir, &st) == 0 && S_ISLNK(st.st_mode) &&
	    st.st_uid != geteuid() && st.st_uid != 0) {
		snprintf(why, whysz, "%s is a symbolic link owned by uid %u, "
			 "not by you; use a cache of your own (cache=DIR)", dir,
			 (unsigned)st.st_uid);
		return -EPERM;
	}
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		rc = -errno;
		snprintf(why, whysz, "%s: %s", dir, strerror(errno));
		return rc;
	}
	if ((rc = stfs_cachedir_check(fd, dir, why, whysz))) {
		close(fd);
		return rc;
	}
	return fd;
}

int stfs_cachedir_opendir(int root, const char *shown, const char *rel,
			  int create, char *why, size_t whysz)
{
	char path[1400];
	const char *all = rel;
	int fd = dup(root);

	if (fd < 0)
		return -errno;
	while (*rel) {
		size_t n = strcspn(rel, "/");
		char name[256];
		int next;

		if (!plain(rel, n)) {
			close(fd);
			snprintf(why, whysz, "%s: a bad name in the cache",
				 shown);
			return -EINVAL;
		}
		memcpy(name, rel, n);
		name[n] = '\0';
		/* messages name the directory: the cache's path and on */
		snprintf(path, sizeof(path), "%s/%.*s", shown,
			 (int)(rel + n - all), all);
		next = open_sub(fd, name, create, path, why, whysz);
		close(fd);
		if (next < 0)
			return next;
		fd = next;
		rel += n + (rel[n] == '/');
	}
	return fd;
}

int stfs_cachedir_open_file(int dir, const char *name, uint64_t size)
{
	struct stat st;
	char why[256];           /* (not shown: a miss) */
	int fd;

	if (!plain(name, strlen(name)))
		return -ENOENT;
	fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -ENOENT;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    private_stat(&st, "", why, sizeof(why)) ||
	    (size != UINT64_MAX && (uint64_t)st.st_size != size)) {
		close(fd);              /* not ours, or not whole: a miss */
		return -ENOENT;
	}
	return fd;
}

#define ALIGN 4096u

static int aligned(const void *p, size_t len)
{
	return ((uintptr_t)p | len) % ALIGN == 0;
}

/* All of the n buffers of v to fd, in order (v is used up): 0, or
 * -errno. */
static int writev_all(int fd, struct iovec *v, int n)
{
	for (;;) {
		ssize_t k;

		while (n && !v->iov_len) {      /* nothing left of it */
			v++;
			n--;
		}
		if (!n)
			return 0;
		k = writev(fd, v, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EIO;
		for (; n && (size_t)k >= v->iov_len; v++, n--)
			k -= (ssize_t)v->iov_len;
		if (n) {
			v->iov_base = (char *)v->iov_base + k;
			v->iov_len -= (size_t)k;
		}
	}
}

/* Write len bytes from p to fd: 0, or -errno. */
static int write_all(int fd, const char *p, size_t len)
{
	struct iovec v = { (void *)p, len };

	return writev_all(fd, &v, 1);
}

/* Write hdr and buf to fd (opened with O_DIRECT): as much of buf as is in
 * whole 4 KiB units past the page cache, the rest (and all of it, if the
 * file system refuses: EINVAL) through it.  A block file's bytes follow a
 * 4 KiB header, so a block's are aligned in the file as in memory.  The
 * page-cache copy (the largest share of the daemon's CPU with the cache
 * on: docs/performance.md) and the writeback and drop after it are saved;
 * the writer threads (writeback.c) wait for the disk as they did at the
 * flush.  (When the workers wrote the cache themselves, O_DIRECT made a
 * cold read 2.3x slower: each then waited for the disk.) */
static int write_direct(int fd, const char *hdr, size_t hlen,
			const char *buf, size_t len)
{
	size_t whole = len / ALIGN * ALIGN;
	/* the header and the block's bytes in one request to the disk */
	struct iovec v[2] = { { (void *)hdr, hlen }, { (void *)buf, whole } };
	int rc = writev_all(fd, v, whole ? 2 : 1);

	if (rc == -EINVAL) {            /* refused: from where it stopped */
		off_t at = lseek(fd, 0, SEEK_CUR);

		if (at < 0 || (size_t)at > hlen + len)
			return -EIO;
		whole = (size_t)at < hlen ? 0 : (size_t)at - hlen;
		hdr += (size_t)at < hlen ? (size_t)at : hlen;
		hlen -= (size_t)at < hlen ? (size_t)at : hlen;
		if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_DIRECT) < 0)
			return -errno;
		if ((rc = write_all(fd, hdr, hlen)))
			return rc;
		return write_all(fd, buf + whole, len - whole);
	}
	if (rc || whole == len)
		return rc;
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_DIRECT) < 0)
		return -errno;
	return write_all(fd, buf + whole, len - whole);
}

int stfs_cachedir_stage(int dir, const char *name, const void *hdr,
			size_t hlen, const void *buf, size_t len,
			struct stfs_cachedir_tmpf *t)
{
	int rc, direct;

	t->fd = -1;
	t->dir = dir;
	if (!plain(name, strlen(name)) || strlen(name) >= sizeof(t->name))
		return -EINVAL;
	memcpy(t->name, name, strlen(name) + 1);
	snprintf(t->tmp, sizeof(t->tmp), "%s.tmp.%d.%lx", name, (int)getpid(),
		 (unsigned long)pthread_self());
	(void)unlinkat(dir, t->tmp, 0);  /* ours, left by a failed write */
	direct = t->direct && hlen && aligned(hdr, hlen) && aligned(buf, 0) &&
		 len >= ALIGN;
	t->fd = openat(dir, t->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
		       O_CLOEXEC, 0600);
	if (t->fd < 0)
		return -errno;
	/* asked for once the file is there: a file system without O_DIRECT
	 * refuses it here (EINVAL), where an open with it would have made
	 * the file and then failed; the write then goes through the page
	 * cache */
	if (direct) {
		int fl = fcntl(t->fd, F_GETFL);

		direct = fl >= 0 && fcntl(t->fd, F_SETFL, fl | O_DIRECT) == 0;
	}
	/* locked while it is written: a scan removes it only once its
	 * writer is gone; and of its whole size from the start, which is
	 * what another daemon's scan counts it for (stfs_cachedir_tmp()) */
	(void)flock(t->fd, LOCK_EX);
	if (ftruncate(t->fd, (off_t)(hlen + len)) < 0)
		rc = -errno;
	else if (direct)
		rc = write_direct(t->fd, hdr, hlen, buf, len);
	else if (!(rc = write_all(t->fd, hdr, hlen)))
		rc = write_all(t->fd, buf, len);
	if (rc)
		(void)stfs_cachedir_publish(t, rc);
	return rc;
}

int stfs_cachedir_publish(struct stfs_cachedir_tmpf *t, int rc)
{
	if (t->fd < 0)
		return rc ? rc : -EBADF;
	/* flushed, so clean: its pages leave the page cache (the reader has
	 * the bytes, and the mount's page cache keeps them), unless no reader
	 * has had them yet (a warm's block: read from memory when it is
	 * read, and dropped then, blockfile.c) */
	if (!rc && t->flushed && !t->keep)
		(void)posix_fadvise(t->fd, 0, 0, POSIX_FADV_DONTNEED);
	if (!rc && renameat(t->dir, t->tmp, t->dir, t->name) < 0)
		rc = -errno;
	if (rc)
		unlinkat(t->dir, t->tmp, 0);
	if (close(t->fd) < 0 && !rc)
		rc = -errno;
	t->fd = -1;
	return rc;
}

int stfs_cachedir_put(int dir, const char *name, const void *buf,
		      size_t len, int durable)
{
	struct stfs_cachedir_tmpf t = { .flushed = durable };
	int rc = stfs_cachedir_stage(dir, name, NULL, 0, buf, len, &t);

	if (rc)
		return rc;
	if (durable && fdatasync(t.fd) < 0)
		rc = -errno;
	return stfs_cachedir_publish(&t, rc);
}

int stfs_cachedir_tmp(int dir, const char *name, uint64_t *size)
{
	const char *t = strstr(name, ".tmp.");
	struct stat a, b;
	int fd, rc = 0;

	*size = 0;
	if (!t || !plain(name, strlen(name)))
		return -1;
	fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return 1;               /* gone already */
	if (fstat(fd, &a) == 0 && S_ISREG(a.st_mode) &&
	    flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK) {
		*size = (uint64_t)a.st_size;    /* its writer is at work */
	} else if (fstatat(dir, name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
		   b.st_ino == a.st_ino && b.st_dev == a.st_dev) {
		/* its writer died (or it is not a file): not a block, ever */
		rc = unlinkat(dir, name, 0) == 0;
	}
	close(fd);
	return rc;
}

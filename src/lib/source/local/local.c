/*
 * local.c: the byte source of a local file.
 *
 * The whole file is mapped read-only at open, so opening a 400 GB file
 * reads nothing.  Readers that can hand the map to the kernel
 * (a FUSE reply) use it directly, with no copy.  Reads into a buffer go
 * through process_vm_readv, which fails with EFAULT where the map has no
 * file behind it (the file shrank): the daemon never touches a lost page
 * itself, so it cannot die of SIGBUS, and the reader gets EIO.
 * A FIFO or device is refused without blocking on it (O_NONBLOCK).
 *
 * Bytes once served are in the mount's own page cache (its files are
 * kept cached), so drop() takes them out of the source's: the map's
 * pages are unmapped (MADV_DONTNEED, which alone leaves them cached) and
 * then dropped (POSIX_FADV_DONTNEED, which skips pages still mapped), so
 * a model read once through a mount is in memory once, not twice.  The
 * map asks for huge pages (MADV_HUGEPAGE), so the page cache reads the
 * file in 2 MiB folios: a few folios to insert, map and drop per request.  That
 * is why the descriptor is kept open.  Clean pages only: nothing of the
 * file changes, and a page dropped while another thread copies from it
 * is read again by that copy's fault, with the same bytes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "format.h"
#include "source.h"
#include "sourceops.h"

struct local_src {
	struct stfs_source s;       /* first: the source is the object */
	int fd;
	uint64_t page;
};

static void local_close(struct stfs_source *s)
{
	struct local_src *l = (struct local_src *)s;

	if (s->map)
		munmap((void *)s->map, s->info.size);
	if (l->fd >= 0)
		close(l->fd);
	free(s->name);
	free(l);
}

/*
 * The page cache holds a file in folios of up to FOLIO_MAX bytes, and a
 * folio is dropped only whole: the range dropped starts at the folio
 * boundary below off, so that the bytes served before it (a sequential
 * reader's last request) and these together cover each folio they share.
 * It ends at the page after the last byte: a page shared with bytes not
 * yet served costs one page read again, if needed.
 */
#define FOLIO_MAX ((uint64_t)2 << 20)

static void local_drop(struct stfs_source *s, uint64_t off, uint64_t len)
{
	const struct local_src *l = (const struct local_src *)s;
	uint64_t a = off & ~(FOLIO_MAX - 1);
	uint64_t b = len > s->info.size - off ? s->info.size : off + len;

	b = (b + l->page - 1) & ~(l->page - 1);
	if (!s->map || b <= a)
		return;
	(void)madvise((char *)s->map + a, (size_t)(b - a), MADV_DONTNEED);
	(void)posix_fadvise(l->fd, (off_t)a, (off_t)(b - a),
			    POSIX_FADV_DONTNEED);
}

static int local_read(struct stfs_source *s, void *buf, size_t len,
		      uint64_t off)
{
	while (len) {
		struct iovec local = { buf, len };
		struct iovec remote = { (char *)s->map + off, len };
		ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1,
					     0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EIO;    /* EFAULT: the file shrank */
		buf = (char *)buf + n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static const struct stfs_source_ops local_ops = {
	.close = local_close,
	.read = local_read,
	.drop = local_drop,
};

int stfs_source_open_file(const char *path, struct stfs_source **out,
			  struct stfs_error *err)
{
	struct local_src *l = NULL;
	struct stfs_source *s = NULL;
	struct stat st;
	int fd, rc;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return stfs_fail_sys(err, -errno, "cannot open");
	if (fstat(fd, &st) < 0) {
		rc = stfs_fail_sys(err, -errno, "cannot stat");
		goto fail;
	}
	if (S_ISDIR(st.st_mode)) {
		rc = stfs_fail(err, -EISDIR, NULL, STFS_NO_OFFSET,
			       "is a directory");
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
			       "not a regular file");
		goto fail;
	}
	if ((l = calloc(1, sizeof(*l))))
		l->fd = -1;
	s = l ? &l->s : NULL;
	if (!s || !(s->name = strdup(path))) {
		rc = stfs_fail_sys(err, -ENOMEM, "cannot allocate");
		goto fail;
	}
	l->page = (uint64_t)sysconf(_SC_PAGESIZE);
	s->ops = &local_ops;
	s->info.size = (uint64_t)st.st_size;
	s->info.mtime_sec = st.st_mtim.tv_sec;
	s->info.mtime_nsec = st.st_mtim.tv_nsec;
	if (s->info.size) {
		void *map = mmap(NULL, s->info.size, PROT_READ, MAP_SHARED,
				 fd, 0);
		if (map == MAP_FAILED) {
			rc = stfs_fail_sys(err, -errno, "cannot map");
			goto fail;
		}
		/* a fault reads ahead, not around: nothing before the
		 * bytes served is read in, where drop() would not reach.
		 * Huge pages: a fault reads the 2 MiB around it into one
		 * 2 MiB folio where the file system has large folios (ext4,
		 * xfs; drop() starts at that boundary), not into 4 KiB ones
		 * that each cost a page-cache insert, a mapping and a
		 * removal at drop(): with 8 readers at 8 places of a file,
		 * or 2 interleaving, that was the daemon's CPU (0.65 s a GiB
		 * against 0.2; docs/performance.md, issue 52) */
		(void)madvise(map, (size_t)s->info.size, MADV_SEQUENTIAL);
		(void)madvise(map, (size_t)s->info.size, MADV_HUGEPAGE);
		s->map = map;
	}
	l->fd = fd;
	*out = s;
	return 0;
fail:
	if (s)
		local_close(s);
	close(fd);
	return rc;
}

/*
 * local.c: the byte source of a local file.
 *
 * The whole file is mapped read-only at open and the descriptor closed,
 * so a mount of thousands of shards holds no descriptors and opening a
 * 400 GB file reads nothing.  Readers that can hand the map to the kernel
 * (a FUSE reply) use it directly, with no copy.  Reads into a buffer go
 * through process_vm_readv, which fails with EFAULT where the map has no
 * file behind it (the file shrank): the daemon never touches a lost page
 * itself, so it cannot die of SIGBUS, and the reader gets EIO.
 * A FIFO or device is refused without blocking on it (O_NONBLOCK).
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

static void local_close(struct stfs_source *s)
{
	if (s->map)
		munmap((void *)s->map, s->info.size);
	free(s->name);
	free(s);
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
};

int stfs_source_open_file(const char *path, struct stfs_source **out,
			  struct stfs_error *err)
{
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
	s = calloc(1, sizeof(*s));
	if (!s || !(s->name = strdup(path))) {
		rc = stfs_fail_sys(err, -ENOMEM, "cannot allocate");
		goto fail;
	}
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
		s->map = map;
	}
	close(fd);
	*out = s;
	return 0;
fail:
	if (s)
		local_close(s);
	close(fd);
	return rc;
}

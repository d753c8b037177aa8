/*
 * file.c: opening one safetensors file.
 *
 * R1-R3 are checked on the file size and the 8-byte length before any
 * header byte is read; then exactly N header bytes are read with pread and
 * parsed (header.c).  The data section is never read here: the whole file
 * is mapped read-only and the descriptor closed, so opening a 400 GB file
 * costs one header read, and thousands of shards cost no descriptors.
 * A FIFO or device is refused without blocking on it (O_NONBLOCK).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stfs/stfs.h"
#include "internal.h"

static int read_all(int fd, void *buf, size_t len, uint64_t off)
{
	char *p = buf;

	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;    /* shrank under us */
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static int sys_fail(struct stfs_error *err, int rc, const char *what)
{
	return stfs_fail(err, rc, NULL, STFS_NO_OFFSET, "%s: %s", what,
			 strerror(-rc));
}

int stfs_file_open(const char *path, struct stfs_file **out,
		   struct stfs_error *err)
{
	struct stfs_file *f = NULL;
	unsigned char le[8];
	char *hdr = NULL;
	struct stat st;
	uint64_t n;
	int fd, rc;

	*out = NULL;
	if (err)
		memset(err, 0, sizeof(*err));
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return sys_fail(err, -errno, "cannot open");
	if (fstat(fd, &st) < 0) {
		rc = sys_fail(err, -errno, "cannot stat");
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
	if ((uint64_t)st.st_size < 8) {
		rc = stfs_fail(err, -EINVAL, R1, 0, "file is %jd bytes, too "
			       "short for the 8-byte header length",
			       (intmax_t)st.st_size);
		goto fail;
	}
	if ((rc = read_all(fd, le, 8, 0))) {
		sys_fail(err, rc, "cannot read");
		goto fail;
	}
	n = 0;
	for (int i = 7; i >= 0; i--)
		n = (n << 8) | le[i];
	if (n > STFS_HEADER_MAX) {
		rc = stfs_fail(err, -EINVAL, R2, 0, "header length %" PRIu64
			       " is above the limit of %llu bytes", n,
			       STFS_HEADER_MAX);
		goto fail;
	}
	if (n > (uint64_t)st.st_size - 8) {
		rc = stfs_fail(err, -EINVAL, R3, 0, "header length %" PRIu64
			       " runs past the end of the file (%jd bytes)",
			       n, (intmax_t)st.st_size);
		goto fail;
	}
	hdr = malloc(n ? n : 1);
	stfs_hint_huge(hdr, n, 1);
	f = calloc(1, sizeof(*f));
	if (!hdr || !f || !(f->path = strdup(path))) {
		rc = sys_fail(err, -ENOMEM, "cannot allocate");
		goto fail;
	}
	if ((rc = read_all(fd, hdr, n, 8))) {
		sys_fail(err, rc, "cannot read the header");
		goto fail;
	}
	if ((rc = stfs_header_parse(hdr, n, (uint64_t)st.st_size - 8 - n, 8,
				    &f->header, err)))
		goto fail;
	free(hdr);
	hdr = NULL;
	f->size = (uint64_t)st.st_size;
	f->mtime_sec = st.st_mtim.tv_sec;
	f->mtime_nsec = st.st_mtim.tv_nsec;
	f->header_len = n;
	f->data_start = 8 + n;
	f->map = mmap(NULL, f->size, PROT_READ, MAP_SHARED, fd, 0);
	if (f->map == MAP_FAILED) {
		f->map = NULL;
		rc = sys_fail(err, -errno, "cannot map");
		goto fail;
	}
	close(fd);
	*out = f;
	return 0;
fail:
	free(hdr);
	stfs_file_close(f);
	close(fd);
	return rc;
}

void stfs_file_close(struct stfs_file *f)
{
	if (!f)
		return;
	if (f->map)
		munmap((void *)f->map, f->size);
	stfs_header_free(f->header);
	free(f->path);
	free(f);
}

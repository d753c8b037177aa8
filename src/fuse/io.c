/*
 * io.c: the session's channel to the kernel.  Plain read(2) and writev(2)
 * on /dev/fuse, as libfuse does, except for one thing: the reply to the
 * kernel's INIT is reshaped to ask for read requests of up to max_pages
 * pages.  libfuse 3.14 asks for at most 256 (1 MiB), from its write-buffer
 * size, which has nothing to do with reads; larger requests mean fewer
 * round trips for a large sequential read.  The kernel grants at most
 * /proc/sys/fs/fuse/max_pages_limit pages (kernels from 6.13; 256 unless
 * root raised it), and older kernels ignore the field they did not offer.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fs.h"

#define LIMIT_PATH "/proc/sys/fs/fuse/max_pages_limit"

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	struct stfs_fs *fs = userdata;
	ssize_t n = read(fd, buf, len);
	const struct fuse_in_header *in = buf;

	if (n > 0)
		stfs_fsmetrics_request(fs, buf, (size_t)n);
	if (!fs->init_replied && n >= (ssize_t)sizeof(*in) &&
	    in->opcode == FUSE_INIT)
		fs->init_unique = in->unique;
	return n;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count,
			 void *userdata)
{
	struct stfs_fs *fs = userdata;
	const struct fuse_out_header *out = iov[0].iov_base;

	if (!fs->init_replied && count >= 2 &&
	    iov[0].iov_len >= sizeof(*out) && out->unique == fs->init_unique &&
	    out->error == 0 && fs->max_pages &&
	    iov[1].iov_len >= offsetof(struct fuse_init_out, max_pages) +
			      sizeof(uint16_t) &&
	    iov[1].iov_len <= sizeof(fs->init_out)) {
		/* our own copy: libfuse's reply is not ours to change */
		memcpy(fs->init_out, iov[1].iov_base, iov[1].iov_len);
		struct fuse_init_out *o = (void *)fs->init_out;
		if (o->flags & FUSE_MAX_PAGES)
			o->max_pages = (uint16_t)fs->max_pages;
		iov[1].iov_base = fs->init_out;
		fs->init_replied = 1;
	}
	if (count >= 1)
		stfs_fsmetrics_reply(fs, iov[0].iov_base, iov[0].iov_len);
	return writev(fd, iov, count);
}

int stfs_io_install(struct fuse_session *se)
{
	static const struct fuse_custom_io io = {
		.read = io_read,
		.writev = io_writev,
	};

	return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}

int stfs_max_pages_limit(unsigned *out)
{
	FILE *f = fopen(LIMIT_PATH, "re");
	int rc = 0;

	*out = 0;
	if (!f)
		return -errno;
	if (fscanf(f, "%u", out) != 1)
		rc = -EINVAL;
	fclose(f);
	return rc;
}

int stfs_raise_max_pages_limit(unsigned pages)
{
	return stfs_write_number(LIMIT_PATH, pages);
}

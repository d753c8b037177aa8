/*
 * views.c: serving the views of a tensor (docs/views.md).
 *
 * An .npy view is a generated NPY header followed by the tensor's bytes:
 * the header comes from memory and the data straight from the map, in one
 * fuse_reply_iov, so the data is never copied in userspace.
 *
 * An .f32 view is computed on read.  The source bytes of the elements the
 * request covers are copied out of the map with process_vm_readv, which
 * fails with EFAULT where the map has no file behind it (a source truncated
 * while mounted): the daemon never touches a lost page itself, so it cannot
 * die of SIGBUS, and the reader gets EIO.  They are converted into the
 * reply buffer.  Buffers are per thread and reused: allocating a fresh
 * megabyte per request costs more in page faults than the conversion.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fs.h"

enum { BUF_OUT, BUF_RAW, BUF_F32, BUF_COUNT };

struct scratch {
	void *p[BUF_COUNT];
	size_t cap[BUF_COUNT];
};

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *v)
{
	struct scratch *s = v;

	for (int i = 0; i < BUF_COUNT; i++)
		free(s->p[i]);
	free(s);
}

static void scratch_init(void)
{
	(void)pthread_key_create(&scratch_key, scratch_free);
}

/* This thread's buffer `which`, at least n bytes (aligned for floats). */
static void *scratch(int which, size_t n)
{
	struct scratch *s;

	pthread_once(&scratch_once, scratch_init);
	s = pthread_getspecific(scratch_key);
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s || pthread_setspecific(scratch_key, s)) {
			free(s);
			return NULL;
		}
	}
	if (s->cap[which] < n) {
		void *p = malloc(n);
		if (!p)
			return NULL;
		free(s->p[which]);
		s->p[which] = p;
		s->cap[which] = n;
	}
	return s->p[which];
}

/* Bytes [off, off + size) of the float32 values of t into out. */
static int read_f32(const struct stfs_tensor *t, const unsigned char *src,
		    uint64_t off, size_t size, char *out)
{
	size_t eb = stfs_dtype_bits(t->dtype) / 8;
	uint64_t first = off / 4, last = (off + size + 3) / 4;
	size_t nel = (size_t)(last - first);
	unsigned char *raw = scratch(BUF_RAW, nel * eb);
	struct iovec local = { raw, nel * eb };
	struct iovec remote = { (void *)(src + first * eb), nel * eb };
	float *f;

	if (!raw)
		return -ENOMEM;
	if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) !=
	    (ssize_t)(nel * eb))
		return -EIO;
	if (off % 4 == 0 && size % 4 == 0 && (uintptr_t)out % 4 == 0) {
		stfs_convert_f32(t->dtype, raw, nel, (float *)(void *)out);
		return 0;
	}
	if (!(f = scratch(BUF_F32, nel * sizeof(*f))))
		return -ENOMEM;
	stfs_convert_f32(t->dtype, raw, nel, f);
	memcpy(out, (char *)f + (off - first * 4), size);
	return 0;
}

void stfs_view_read(fuse_req_t req, const struct stfs_tensor *t,
		    enum stfs_view v, const unsigned char *src, uint64_t off,
		    size_t size)
{
	uint64_t head;
	char small[512], *hdr = small, *out;
	size_t hn = 0;
	int rc = 0;

	stfs_view_size(t, v, &head);
	if (head) {
		if (head > sizeof(small) && !(hdr = malloc(head))) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		stfs_view_npy_header(t, v, hdr, head);
		if (off < head)
			hn = (size_t)(head - off) < size ?
			     (size_t)(head - off) : size;
	}
	if (stfs_view_dtype(t, v) == t->dtype) {
		/* header from memory, data straight from the map */
		struct iovec iov[2] = {
			{ hn ? hdr + off : hdr, hn },
			{ (void *)(src + (off + hn - head)), size - hn },
		};
		if (hn)
			fuse_reply_iov(req, iov, size > hn ? 2 : 1);
		else
			fuse_reply_buf(req, (const char *)iov[1].iov_base,
				       size);
	} else if (!(out = scratch(BUF_OUT, size ? size : 1))) {
		fuse_reply_err(req, ENOMEM);
	} else {
		if (hn)
			memcpy(out, hdr + off, hn);
		if (size > hn)
			rc = read_f32(t, src, off + hn - head, size - hn,
				      out + hn);
		if (rc)
			fuse_reply_err(req, -rc);
		else
			fuse_reply_buf(req, out, size);
	}
	if (hdr != small)
		free(hdr);
}

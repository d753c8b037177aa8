/*
 * file.c: one safetensors file over a byte source.
 *
 * R1-R3 are checked on the source's size and the 8-byte length before any
 * header byte is read; then exactly N header bytes are read and parsed
 * (header.c).  The data section is never read here, so opening a 400 GB
 * file costs one header read.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "model.h"

int stfs_file_open_source(struct stfs_source *src, struct stfs_file **out,
			  struct stfs_error *err)
{
	struct stfs_file *f = NULL;
	unsigned char le[8];
	char *hdr = NULL;
	uint64_t n, size = src->info.size;
	int rc;

	*out = NULL;
	if (size < 8) {
		rc = stfs_fail(err, -EINVAL, R1, 0, "file is %" PRIu64 " bytes, "
			       "too short for the 8-byte header length", size);
		goto fail;
	}
	if ((rc = stfs_source_read(src, le, 8, 0))) {
		stfs_fail_sys(err, rc, "cannot read");
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
	if (n > size - 8) {
		rc = stfs_fail(err, -EINVAL, R3, 0, "header length %" PRIu64
			       " runs past the end of the file (%" PRIu64
			       " bytes)", n, size);
		goto fail;
	}
	hdr = malloc(n ? n : 1);
	stfs_hint_huge(hdr, n, 1);
	f = calloc(1, sizeof(*f));
	if (!hdr || !f) {
		rc = stfs_fail_sys(err, -ENOMEM, "cannot allocate");
		goto fail;
	}
	if ((rc = stfs_source_read(src, hdr, n, 8))) {
		stfs_fail_sys(err, rc, "cannot read the header");
		goto fail;
	}
	if ((rc = stfs_header_parse(hdr, n, size - 8 - n, 8, &f->header,
				    err)))
		goto fail;
	free(hdr);
	f->src = src;
	f->header_len = n;
	f->data_start = 8 + n;
	*out = f;
	return 0;
fail:
	free(hdr);
	free(f);
	stfs_source_close(src);
	return rc;
}

int stfs_file_open(const char *path, struct stfs_file **out,
		   struct stfs_error *err)
{
	struct stfs_source *src;
	int rc;

	*out = NULL;
	if (err)
		memset(err, 0, sizeof(*err));
	if ((rc = stfs_source_open_file(path, &src, err)))
		return rc;
	return stfs_file_open_source(src, out, err);
}

void stfs_file_close(struct stfs_file *f)
{
	if (!f)
		return;
	stfs_source_close(f->src);
	stfs_header_free(f->header);
	free(f);
}

const struct stfs_header *stfs_file_header(const struct stfs_file *f)
{
	return f->header;
}

struct stfs_source *stfs_file_source(const struct stfs_file *f)
{
	return f->src;
}

uint64_t stfs_file_size(const struct stfs_file *f)
{
	return f->src->info.size;
}

uint64_t stfs_file_header_len(const struct stfs_file *f)
{
	return f->header_len;
}

uint64_t stfs_file_data_start(const struct stfs_file *f)
{
	return f->data_start;
}

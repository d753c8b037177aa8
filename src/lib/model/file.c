/*
 * file.c: one file of weights over a byte source, its format found by its
 * first bytes (never its name): GGUF's magic, a zip's or a legacy torch
 * pickle's (docs/formats.md), else safetensors.
 *
 * Every format's reader, safetensors' too, reads what its header needs
 * through a struct stfs_reader over the source (format.h's seam; the
 * format layer knows no source) and gives a struct stfs_header.  The data
 * section is never read here, so opening a 400 GB file costs one header
 * read.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "model.h"

static int src_read(void *ctx, void *buf, size_t len, uint64_t off)
{
	return stfs_source_read(ctx, buf, len, off);
}

int stfs_file_open_source(struct stfs_source *src, struct stfs_file **out,
			  struct stfs_error *err)
{
	struct stfs_reader r = { src_read, src, src->info.size,
				 stfs_source_name(src), NULL, src->map != NULL };
	const struct stfs_format *fm;
	struct stfs_file *f = NULL;
	unsigned char first[8] = { 0 };
	int rc;

	*out = NULL;
	if (src->info.size >= 8 && (rc = stfs_source_read(src, first, 8, 0))) {
		stfs_fail_sys(err, rc, "cannot read");
		goto fail;
	}
	fm = stfs_format_of(first, src->info.size >= 8 ? 8 : 0);
	if (!(f = calloc(1, sizeof(*f)))) {
		rc = stfs_fail_sys(err, -ENOMEM, "cannot allocate");
		goto fail;
	}
	if ((rc = fm->read(&r, &f->header, &f->header_len, err)))
		goto fail;
	f->format = fm->name;
	f->data_start = fm->data_relative ? 8 + f->header_len : 0;
	if (!fm->data_relative &&
	    !(f->doc = stfs_foreign_doc(f, &f->doc_len))) {
		rc = stfs_fail_sys(err, -ENOMEM, "cannot allocate");
		goto fail;
	}
	f->src = src;
	*out = f;
	return 0;
fail:
	if (f) {
		stfs_header_free(f->header);
		free(f);
	}
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
	free(f->doc);
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

const char *stfs_file_format(const struct stfs_file *f)
{
	return f->format;
}

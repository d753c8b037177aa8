/*
 * file.c: one file of weights over a byte source, its format found by its
 * first bytes (never its name): GGUF's magic, a zip's or a legacy torch
 * pickle's (docs/formats.md), else safetensors.
 *
 * Safetensors: R1-R3 are checked on the source's size and the 8-byte
 * length before any header byte is read; then exactly N header bytes are
 * read and parsed (header.c).  Another format's reader reads what its
 * header needs through a struct stfs_reader and builds a table
 * (format/table.c).  The data section is never read here, so opening a
 * 400 GB file costs one header read.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "ggml.h"
#include "torch.h"
#include "model.h"

/*
 * A safetensors file begins with its header's length, at most 100 MB, so
 * none of these magics can begin one whose length passes R2:
 *   GGUF    "GGUF" (a length over 1 GB);
 *   zip     "PK\3\4" and any of bytes 4-7 (version, flags) non-zero (a
 *           length over 4 GiB); the zip of torch >= 1.6;
 *   pickle  0x80 0x02-0x05 0x8a 0x0a: a protocol, then the 10-byte long
 *           that is legacy torch's magic number (a length over 160 MB);
 *           or, protocol 4 or 5, a FRAME (0x95) of at least 12 bytes
 *           around it (a length over 200 MB).
 */
static int zip_detect(const unsigned char *p, size_t n)
{
	return n >= 8 && !memcmp(p, "PK\3\4", 4) && (p[4] | p[5] | p[6] | p[7]);
}

static int legacy_detect(const unsigned char *p, size_t n)
{
	if (n < 4 || p[0] != 0x80 || p[1] < 2 || p[1] > 5)
		return 0;
	return (p[2] == 0x8a && p[3] == 0x0a) ||
	       (p[1] >= 4 && p[2] == 0x95 && p[3] >= 0x0c);
}

/*
 * The formats other than safetensors: detect(first bytes, n >= 8) says
 * whether a file is one, read() builds its table.  A new format is one
 * line here and its reader in src/lib/format/.
 */
static const struct stfs_format {
	const char *name;
	int (*detect)(const unsigned char *p, size_t n);
	int (*read)(const struct stfs_reader *r, struct stfs_header **out,
		    uint64_t *header_len, struct stfs_error *err);
} formats[] = {
	{ "gguf", stfs_gguf_detect, stfs_gguf_read },
	{ "pytorch", zip_detect, stfs_torch_read },
	{ "pytorch", legacy_detect, stfs_torch_read },
};

static int src_read(void *ctx, void *buf, size_t len, uint64_t off)
{
	return stfs_source_read(ctx, buf, len, off);
}

static int open_foreign(struct stfs_source *src, const struct stfs_format *fm,
			struct stfs_file *f, struct stfs_error *err)
{
	struct stfs_reader r = { src_read, src, src->info.size,
				 stfs_source_name(src), NULL, src->map != NULL };
	int rc;

	if ((rc = fm->read(&r, &f->header, &f->header_len, err)))
		return rc;
	f->format = fm->name;
	f->data_start = 0;
	if (!(f->doc = stfs_foreign_doc(f, &f->doc_len)))
		return stfs_fail_sys(err, -ENOMEM, "cannot allocate");
	return 0;
}

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
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		if (!formats[i].detect(le, 8))
			continue;
		if (!(f = calloc(1, sizeof(*f)))) {
			rc = stfs_fail_sys(err, -ENOMEM, "cannot allocate");
			goto fail;
		}
		if ((rc = open_foreign(src, &formats[i], f, err))) {
			stfs_header_free(f->header);
			free(f->doc);
			free(f);
			f = NULL;
			goto fail;
		}
		f->src = src;
		*out = f;
		return 0;
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
	f->format = "safetensors";
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

/*
 * reader.c: a safetensors file through the format seam (format.h's struct
 * stfs_reader): R1-R3 checked on the file's size and the 8-byte length
 * before any header byte is read, then exactly N header bytes read and
 * parsed (header.c).  The data section is never read here, so opening a
 * 400 GB file costs one header read.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "stfs/stfs.h"
#include "format.h"

int stfs_safetensors_read(const struct stfs_reader *r,
			  struct stfs_header **out, uint64_t *header_len,
			  struct stfs_error *err)
{
	unsigned char le[8];
	uint64_t n = 0, size = r->size;
	char *hdr;
	int rc;

	if (size < 8)
		return stfs_fail(err, -EINVAL, R1, 0, "file is %" PRIu64
				 " bytes, too short for the 8-byte header "
				 "length", size);
	if ((rc = r->read(r->ctx, le, 8, 0)))
		return stfs_fail_sys(err, rc, "cannot read");
	for (int i = 7; i >= 0; i--)
		n = (n << 8) | le[i];
	if (n > STFS_HEADER_MAX)
		return stfs_fail(err, -EINVAL, R2, 0, "header length %" PRIu64
				 " is above the limit of %llu bytes", n,
				 STFS_HEADER_MAX);
	if (n > size - 8)
		return stfs_fail(err, -EINVAL, R3, 0, "header length %" PRIu64
				 " runs past the end of the file (%" PRIu64
				 " bytes)", n, size);
	if (!(hdr = malloc(n ? n : 1)))
		return stfs_fail_sys(err, -ENOMEM, "cannot allocate");
	stfs_hint_huge(hdr, n, 1);
	if ((rc = r->read(r->ctx, hdr, n, 8)))
		rc = stfs_fail_sys(err, rc, "cannot read the header");
	else
		rc = stfs_header_parse(hdr, n, size - 8 - n, 8, out, err);
	free(hdr);
	if (!rc)
		*header_len = n;
	return rc;
}

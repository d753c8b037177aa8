/*
 * views.c: the segments of a tensor's views (docs/views.md).  A tensor is
 * one range of its shard; an .npy view is an inline NPY header and that
 * range; an .f32 view is the range converted (or dequantized, for a
 * block-quantized tensor of another format); an .f32.npy view is a header
 * and the converted range.  A strided view of another format is gathered.
 */
#include <errno.h>
#include <stdlib.h>

#include "content.h"

int stfs_content_view(const struct stfs_tensor *t, enum stfs_view v,
		      struct stfs_source *src, uint64_t off,
		      struct stfs_content **out)
{
	struct stfs_content *c = stfs_content_new();
	uint64_t head;
	char *hdr = NULL;
	int rc = 0;

	*out = NULL;
	if (!c)
		return -ENOMEM;
	stfs_view_size(t, v, &head);
	if (head) {
		if (!(hdr = malloc(head))) {
			stfs_content_free(c);
			return -ENOMEM;
		}
		stfs_view_npy_header(t, v, hdr, head);
		rc = stfs_content_add_inline(c, hdr, head, 1);
	}
	if (!rc && (v == STFS_VIEW_RAW || v == STFS_VIEW_NPY))
		rc = stfs_content_add_tensor(c, t, src, off);
	else if (!rc)
		rc = stfs_content_add_tensor_f32(c, t, src, off);
	if (rc) {
		stfs_content_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

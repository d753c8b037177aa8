/*
 * gather.h: the gathering of a strided view's elements (gather.c), for
 * content.c's read loop.  Private to the content layer.
 */
#ifndef STFS_GATHER_H
#define STFS_GATHER_H

#include <stddef.h>
#include <stdint.h>

#include "content.h"

#define STFS_GATHER_RANK_MAX 64
/* The most storage one read of a view over an unmapped source (a URL)
 * reads to gather its elements; past it the read fails with EFBIG. */
#define STFS_GATHER_SPAN_MAX (256u << 20)

/* What output bytes [lo, hi) of a GATHER segment need: output elements
 * [e0, e1), from source elements [smin, smax] (relative to the view's
 * first element, in elements). */
struct stfs_gather {
	uint64_t e0, e1, smin, smax;
};

void stfs_gather_plan(const struct stfs_seg *s, uint64_t lo, uint64_t hi,
		      struct stfs_gather *g);
/* The bytes of one element of a GATHER segment's view: its format's
 * element size (a complex128 is 16 bytes, whatever dtype it maps to). The
 * one place every gather computation takes it from. */
unsigned stfs_gather_esize(const struct stfs_seg *s);
/* Buffer bytes the read needs (8-aligned): the output elements, and the
 * source span unless the source is mapped. */
size_t stfs_gather_need(const struct stfs_seg *s, uint64_t lo, uint64_t hi,
			int mapped);
/* Copy the elements from raw (the span from smin) into out. */
void stfs_gather_copy(const struct stfs_seg *s, const struct stfs_gather *g,
		      const char *raw, char *out);
/* Copy the elements from a mapped source, safely; -EIO if it shrank. */
int stfs_gather_map(const struct stfs_seg *s, const struct stfs_gather *g,
		    const char *map, char *out);

#endif

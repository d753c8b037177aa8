/*
 * pfspec.h: the value of a prefetch request read into a warm's selection
 * (pfspec.c): no FUSE in it, so that its fuzzer links it alone.
 */
#ifndef STFS_PFSPEC_H
#define STFS_PFSPEC_H

#include <stddef.h>

#include "stfs/stfs.h"

/* Globs of one request, at most (more are ignored). */
#define STFS_PF_MAX_GLOBS 256

/*
 * text (NUL terminated, cut into lines here, so the globs point into it):
 * lines "+GLOB" (include), "-GLOB" (exclude), "#N" (the asker's number),
 * "all"; empty lines are skipped, no line at all is the whole mount.  The
 * globs go to inc and exc (STFS_PF_MAX_GLOBS each), sel set to them: 0,
 * or -EINVAL for any other line.
 */
int stfs_prefetch_parse(char *text, struct stfs_warm_sel *sel,
			const char **inc, const char **exc);

#endif

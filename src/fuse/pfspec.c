/*
 * pfspec.c: the value of a prefetch request (the STFS_IOC_PREFETCH
 * ioctl's payload, and the lines -o prefetch= makes) read into a warm's
 * selection.  Pure text work, apart from prefetch.c, so that
 * tests/fuzz/fuzz_prefetch.c links it without FUSE.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pfspec.h"

int stfs_prefetch_parse(char *text, struct stfs_warm_sel *sel,
			const char **inc, const char **exc)
{
	char *save = NULL;

	*sel = (struct stfs_warm_sel){ .include = inc, .exclude = exc };
	for (char *l = strtok_r(text, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		if (*l == '+' && l[1] && sel->ninclude < STFS_PF_MAX_GLOBS)
			inc[sel->ninclude++] = l + 1;
		else if (*l == '-' && l[1] &&
			 sel->nexclude < STFS_PF_MAX_GLOBS)
			exc[sel->nexclude++] = l + 1;
		else if (*l == '#')
			sel->id = (unsigned)strtoul(l + 1, NULL, 10);
		else if (strcmp(l, "all") != 0)
			return -EINVAL;
	}
	return 0;
}

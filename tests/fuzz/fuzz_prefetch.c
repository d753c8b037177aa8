/*
 * fuzz_prefetch.c: libFuzzer harness for the value of a prefetch request
 * (src/fuse/pfspec.c: the STFS_IOC_PREFETCH ioctl's payload, which any
 * process that can open the mount's root sends, and -o prefetch=).  The
 * input is the payload as the kernel hands it over (cut at its first NUL,
 * as prefetch.c does).  Whatever it is, the parse ends with 0 or -EINVAL;
 * on 0 every glob is non-empty, lies within the payload, is one line of
 * it (no newline) and follows its '+' or '-' at a line's start (after the
 * payload's start, a newline, or the NUL that ended the line before), and
 * there are at most STFS_PF_MAX_GLOBS of each.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pfspec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_globs(const char *text, size_t len,
			const char *const *g, size_t n, char mark)
{
	if (n > STFS_PF_MAX_GLOBS)
		abort();
	for (size_t i = 0; i < n; i++) {
		if (g[i] <= text || g[i] >= text + len || !g[i][0] ||
		    strchr(g[i], '\n') || g[i][-1] != mark ||
		    (g[i] - 1 != text && g[i][-2] != '\0' &&
		     g[i][-2] != '\n'))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *inc[STFS_PF_MAX_GLOBS], *exc[STFS_PF_MAX_GLOBS];
	struct stfs_warm_sel sel;
	char *text = strndup((const char *)data, size);
	size_t len;
	int rc;

	if (!text)
		return 0;
	len = strlen(text);
	rc = stfs_prefetch_parse(text, &sel, inc, exc);
	if (rc != 0 && rc != -EINVAL)
		abort();
	if (rc == 0) {
		if (sel.include != inc || sel.exclude != exc)
			abort();
		check_globs(text, len, sel.include, sel.ninclude, '+');
		check_globs(text, len, sel.exclude, sel.nexclude, '-');
	}
	free(text);
	return 0;
}

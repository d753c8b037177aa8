/*
 * suffix.c: the file names that say which weight format a file is meant to
 * be, in one place for the locators (a directory's files, a Hub path that
 * names one file).  What a file holds is always checked by its content
 * (model/file.c), never by this.
 */
#include <string.h>

#include "format.h"

/* name ends in tail and is longer than it */
static int has_suffix(const char *name, const char *tail)
{
	size_t n = strlen(name), k = strlen(tail);

	return n > k && memcmp(name + n - k, tail, k) == 0;
}

int stfs_name_is_torch(const char *name)
{
	static const char *const torch[] = { ".bin", ".pt", ".pth", ".ckpt" };

	for (size_t i = 0; i < sizeof(torch) / sizeof(*torch); i++)
		if (has_suffix(name, torch[i]))
			return 1;
	return 0;
}

int stfs_name_is_checkpoint(const char *name)
{
	return has_suffix(name, ".gguf") || stfs_name_is_torch(name);
}

/*
 * cachedir.c: the cache directory of remote sources, checked before a
 * mount: it (or, while it does not exist yet, the nearest folder above it
 * that does) must be a directory stfs can write, so that a cache on a
 * read-only file system, or a regular file given as one, is an error
 * before anything is mounted rather than a mount that silently caches
 * nothing.  Offline, stfs only reads it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format.h"
#include "remote.h"

/* 0, or -errno: ENOTDIR for a file, EROFS, EACCES... */
static int dir_usable(const char *dir, int offline)
{
	char *p = strdup(dir), *slash;
	struct stat st;
	int rc = 0;

	if (!p)
		return -ENOMEM;
	/* the nearest part of the path that exists */
	while (stat(p, &st) < 0) {
		if (errno != ENOENT || offline || !(slash = strrchr(p, '/'))) {
			rc = errno == ENOENT && offline ? 0 : -errno;
			free(p);
			return rc;
		}
		slash[slash == p] = '\0';       /* "/x" -> "/" */
	}
	if (!S_ISDIR(st.st_mode))
		rc = -ENOTDIR;
	else if (access(p, offline ? R_OK | X_OK : W_OK | X_OK) < 0)
		rc = -errno;
	free(p);
	return rc;
}

int stfs_remote_opts_check_cache(const struct stfs_remote_opts *o,
				 char *why, size_t whysz)
{
	int rc;

	why[0] = '\0';
	if (o->nocache || !o->cache_dir ||
	    !(rc = dir_usable(o->cache_dir, o->offline)))
		return 0;
	snprintf(why, whysz, "cache=%s: %s (give a cache= directory stfs can "
		 "%s, or nocache)", o->cache_dir, strerror(-rc),
		 o->offline ? "read" : "write");
	return rc;
}

/*
 * mount.h: what the command line (src/cli) calls of the FUSE side.  No
 * FUSE type appears here, so the command line builds without FUSE's
 * headers.
 */
#ifndef STFS_MOUNT_H
#define STFS_MOUNT_H

#include <stdio.h>

/* `stfs mount ...` and the mount-helper form; argv[0] is the program.
 * Returns the exit status. */
int stfs_mount_main(int argc, char **argv);
/* Set up the on-disk cache of URL sources from cache=DIR, cache_size=,
 * nocache, offline (NULL / 0 when not given); with check (a mount of a
 * URL), the cache must be a directory stfs can write (offline: read).
 * 0, or -1 after saying on stderr what is wrong. */
int stfs_cache_opts(const char *src, const char *dir, const char *size,
		    int nocache, int offline, int check);
/* cachedir.c: can the cache at dir (absolute) be used: written, or with
 * offline read?  0, or -errno (ENOTDIR for a file, EROFS, EACCES). */
int stfs_cache_dir_check(const char *dir, int offline);
/* The usage text of the stfs command. */
void stfs_usage(FILE *out);

#endif

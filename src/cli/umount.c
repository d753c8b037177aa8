/*
 * umount.c: `stfs umount [-z] MOUNTPOINT`.  It unmounts stfs mounts only:
 * fusermount3 run by root unmounts any file system (a tmpfs, /home), so
 * the mount point, canonicalised, must be the top mount of that path in
 * /proc/self/mountinfo and of type fuse.stfs; anything else is refused
 * with `stfs: PATH: not an stfs mount`.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "mount.h"

/* The absolute path of mnt with every symlink resolved.  A dead FUSE
 * mount (ENOTCONN) and another user's (EACCES, even for root) cannot be
 * looked at: then its parent is resolved and its own name kept.  NULL
 * with errno set if neither works. */
static char *canonical(const char *mnt)
{
	char *p = realpath(mnt, NULL), *copy1, *copy2, *dir, *out = NULL;
	const char *base;

	if (p || (errno != ENOTCONN && errno != EACCES))
		return p;
	if (!(copy1 = strdup(mnt)) || !(copy2 = strdup(mnt))) {
		free(copy1);
		return NULL;
	}
	base = basename(copy1);
	if (strcmp(base, ".") && strcmp(base, "..") && strcmp(base, "/") &&
	    (dir = realpath(dirname(copy2), NULL))) {
		if (asprintf(&out, "%s/%s", strcmp(dir, "/") ? dir : "",
			     base) < 0)
			out = NULL;
		free(dir);
	} else {
		errno = ENOTCONN;
	}
	free(copy1);
	free(copy2);
	return out;
}

/* 1 if the top mount on path (absolute, canonical) is an stfs one, 0 if
 * it is another or none, -errno if mountinfo cannot be read. */
static int is_stfs_mount(const char *path)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	int found = 0;

	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		char *point = NULL, *type = NULL, *dash = strstr(line, " - ");

		if (dash && sscanf(line, "%*s %*s %*s %*s %ms", &point) == 1 &&
		    sscanf(dash + 3, "%ms", &type) == 1) {
			stfs_mountinfo_unescape(point);
			if (strcmp(point, path) == 0)   /* the last one is on top */
				found = strcmp(type, "fuse.stfs") == 0;
		}
		free(point);
		free(type);
	}
	free(line);
	fclose(f);
	return found;
}

int stfs_umount_main(int argc, char **argv)
{
	const char *lazy = NULL, *mnt = NULL;
	char *path;
	int rc;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-z") == 0)
			lazy = "-z";
		else if (!mnt)
			mnt = argv[i];
		else
			mnt = NULL, i = argc;
	}
	if (!mnt) {
		fprintf(stderr, "usage: stfs umount [-z] MOUNTPOINT\n");
		return 2;
	}
	if (!(path = canonical(mnt))) {
		fprintf(stderr, "stfs: %s: %s\n", mnt, strerror(errno));
		return 1;
	}
	if ((rc = is_stfs_mount(path)) <= 0) {
		if (rc < 0)
			fprintf(stderr, "stfs: %s: cannot read the mount table: "
				"%s\n", mnt, strerror(-rc));
		else
			fprintf(stderr, "stfs: %s: not an stfs mount\n", mnt);
		free(path);
		return 1;
	}
	if (lazy)
		execlp("fusermount3", "fusermount3", "-u", lazy, path,
		       (char *)NULL);
	else
		execlp("fusermount3", "fusermount3", "-u", path, (char *)NULL);
	fprintf(stderr, "stfs: cannot run fusermount3: %s\n", strerror(errno));
	free(path);
	return 1;
}

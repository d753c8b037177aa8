/*
 * main.c: the stfs command: `stfs mount` (and the mount-helper form that
 * mount.fuse3 calls), `stfs inspect`, `stfs umount`.  Only dispatch lives
 * here: mounting is src/fuse/mount.c, inspecting inspect.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "mount.h"

static int do_umount(int argc, char **argv)
{
	const char *lazy = NULL, *mnt = NULL;

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
	if (lazy)
		execlp("fusermount3", "fusermount3", "-u", lazy, mnt,
		       (char *)NULL);
	else
		execlp("fusermount3", "fusermount3", "-u", mnt, (char *)NULL);
	fprintf(stderr, "stfs: cannot run fusermount3: %s\n", strerror(errno));
	return 1;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		stfs_usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "inspect") == 0)
		return stfs_inspect_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "umount") == 0 || strcmp(argv[1], "unmount") == 0)
		return do_umount(argc - 1, argv + 1);
	if (strcmp(argv[1], "mount") == 0) {
		argv[1] = argv[0];
		return stfs_mount_main(argc - 1, argv + 1);
	}
	return stfs_mount_main(argc, argv);
}

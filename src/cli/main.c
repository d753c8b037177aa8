/*
 * main.c: the stfs command: `stfs mount` (and the mount-helper form that
 * mount.fuse3 calls), `stfs inspect`, `stfs umount`.  Only dispatch lives
 * here: mounting is src/fuse/mount.c, inspecting inspect.c,
 * unmounting umount.c.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "mount.h"

int main(int argc, char **argv)
{
	if (argc < 2) {
		stfs_usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "inspect") == 0)
		return stfs_inspect_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "umount") == 0 || strcmp(argv[1], "unmount") == 0)
		return stfs_umount_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "mount") == 0) {
		argv[1] = argv[0];
		return stfs_mount_main(argc - 1, argv + 1);
	}
	return stfs_mount_main(argc, argv);
}

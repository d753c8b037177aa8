/*
 * main.c: the stfs command: `stfs mount` (and the mount-helper form that
 * mount.fuse3 calls), `stfs inspect`, `stfs prefetch`, `stfs stats`,
 * `stfs mirror`, `stfs umount`.  Only dispatch lives
 * here: mounting is src/fuse/mount.c, inspecting inspect.c,
 * unmounting umount.c.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "mount.h"

static int dispatch(int argc, char **argv)
{
	if (argc < 2) {
		stfs_usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "inspect") == 0)
		return stfs_inspect_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "prefetch") == 0)
		return stfs_prefetch_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "stats") == 0)
		return stfs_stats_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "mirror") == 0)
		return stfs_mirror_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "umount") == 0 || strcmp(argv[1], "unmount") == 0)
		return stfs_umount_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "mount") == 0) {
		argv[1] = argv[0];
		return stfs_mount_main(argc - 1, argv + 1);
	}
	return stfs_mount_main(argc, argv);
}

int main(int argc, char **argv)
{
	/* before anything: no URL password or query left in our cmdline */
	char **args = stfs_scrub_argv(argc, argv), *first;
	int rc;

	if (!args) {
		fprintf(stderr, "stfs: out of memory\n");
		return 1;
	}
	first = argc > 1 ? args[1] : NULL;      /* dispatch may replace it */
	rc = dispatch(argc, args);
	if (argc > 1)
		args[1] = first;
	stfs_free_argv(argc, args);
	return rc;
}

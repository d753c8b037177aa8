/*
 * cli.h: the pieces of the stfs command line outside main.c.
 */
#ifndef STFS_CLI_H
#define STFS_CLI_H

/* inspect.c: `stfs inspect`; argv[0] is "inspect". */
int stfs_inspect_main(int argc, char **argv);
/* umount.c: `stfs umount`; argv[0] is "umount".  It unmounts stfs
 * mounts only. */
int stfs_umount_main(int argc, char **argv);

/* prefetch.c: `stfs prefetch`; argv[0] is "prefetch". */
int stfs_prefetch_main(int argc, char **argv);
/* stats.c: `stfs stats`; argv[0] is "stats". */
int stfs_stats_main(int argc, char **argv);

/* mirror.c: `stfs mirror`; argv[0] is "mirror". */
int stfs_mirror_main(int argc, char **argv);

/* scrub.c: overwrite, in place, the password and query of each URL in
 * argv (what /proc/PID/cmdline shows); returns private copies of the
 * arguments as given (stfs_free_argv()), or NULL when out of memory. */
char **stfs_scrub_argv(int argc, char **argv);
void stfs_free_argv(int argc, char **copy);

#endif

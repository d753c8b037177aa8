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
/* The usage text of the stfs command. */
void stfs_usage(FILE *out);
/* A mount point as /proc/self/mountinfo writes it (' ', '\t', '\n' and
 * '\\' as \ooo), decoded in place. */
void stfs_mountinfo_unescape(char *s);

#endif

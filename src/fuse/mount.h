/*
 * mount.h: what the command line (src/cli) calls of the FUSE side.  No
 * FUSE type appears here, so the command line builds without FUSE's
 * headers.
 */
#ifndef STFS_MOUNT_H
#define STFS_MOUNT_H

#include <stdio.h>
#include <sys/ioctl.h>

/* `stfs prefetch` asks a mount's daemon for a warm with this ioctl on the
 * mount's root (setxattr cannot: the mount is read-only): in, the warm's
 * lines ("+GLOB", "-GLOB", "#ID"; NUL-terminated); 0, or -1 with errno
 * (the root's user.stfs.prefetch.error then says why, but for EBUSY: a
 * warm is under way).  src/fuse/prefetch.c. */
#define STFS_PREFETCH_SPEC_MAX 4096
#define STFS_IOC_PREFETCH _IOW('S', 0x33, char[STFS_PREFETCH_SPEC_MAX])

/* `stfs stats` reads a mount's counters from this xattr of its root: the
 * Prometheus text of -o metrics=PATH (docs/metrics.md); the mount's
 * owner and root only (EPERM), ENODATA with -o nometrics.
 * src/fuse/fsmetrics.c. */
#define STFS_METRICS_XATTR "user.stfs.metrics"

/* The exit statuses of `stfs mount` (stfs(1), EXIT STATUS): a failure to
 * open the source says its class (exitclass.c, from the error's negative
 * errno code). */
enum {
	STFS_EXIT_OK = 0,
	STFS_EXIT_FAILED = 1,       /* an invalid source, a failed mount */
	STFS_EXIT_USAGE = 2,
	STFS_EXIT_NOT_FOUND = 3,    /* HTTP 404/410, no such file */
	STFS_EXIT_REFUSED = 4,      /* the credentials refused: HTTP 401/403 */
	STFS_EXIT_UNREACHABLE = 5,  /* no connection, DNS, a timeout */
	STFS_EXIT_POLICY = 6,       /* public_net, allow_net refused it */
};
int stfs_exit_class(int code);

/* `stfs mount ...` and the mount-helper form; argv[0] is the program.
 * Returns the exit status. */
int stfs_mount_main(int argc, char **argv);
/* The usage text of the stfs command. */
void stfs_usage(FILE *out);
/* A mount point as /proc/self/mountinfo writes it (' ', '\t', '\n' and
 * '\\' as \ooo), decoded in place. */
void stfs_mountinfo_unescape(char *s);

#endif

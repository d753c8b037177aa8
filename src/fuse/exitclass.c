/*
 * exitclass.c: the exit status of a mount that failed, by the class of its
 * failure (the error's errno, never its words), so that what started stfs
 * (a script, the CSI driver) can tell an origin it cannot reach from one
 * that refused it.  The classes are documented in stfs(1), "EXIT STATUS",
 * and docs/usage.md.
 */
#include <errno.h>

#include "mount.h"

int stfs_exit_class(int code)
{
	switch (code) {
	case -ENOENT:           /* HTTP 404/410, no such file */
		return STFS_EXIT_NOT_FOUND;
	case -EACCES:           /* HTTP 401/403, a file one may not read */
		return STFS_EXIT_REFUSED;
	case -ENETUNREACH:      /* no connection, a stall, a timeout */
	case -EHOSTUNREACH:     /* a name that does not resolve */
	case -ETIMEDOUT:
	case -ECONNREFUSED:
		return STFS_EXIT_UNREACHABLE;
	case -EPERM:            /* public_net, allow_net; a cache not private */
		return STFS_EXIT_POLICY;
	default:
		return STFS_EXIT_FAILED;
	}
}

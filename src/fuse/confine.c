/*
 * confine.c: what a daemon served on /dev/fd/N holds.  Such a daemon is a
 * privileged mounter's (the Kubernetes driver's launcher), sharing its
 * user with every other daemon of the node, each with its own tenant's
 * credentials in its environment.  Always: not dumpable (no other daemon
 * reads its /proc/PID/environ or memory, or traces it; no core dump).
 * When the mounter asks (STFS_CONFINE=1): also no descriptor but 0-2 and
 * N (nothing its starter left open), no_new_privs (no setuid program or
 * file capability gives it privilege, nor a credential_process helper),
 * an empty bounding set and no effective, permitted, inheritable or
 * ambient capability.  The mounter does the same for its children; this
 * holds whatever thread of the mounter started it.  What cannot be done
 * is an error: the daemon does not serve.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "confine.h"

/* The bounding set emptied: 0, or -errno (the capability it holds that
 * this process may not drop: it lacks CAP_SETPCAP). */
static int drop_bounding(const char *src)
{
	for (int c = 0;; c++) {
		int in = prctl(PR_CAPBSET_READ, c, 0, 0, 0);

		if (in < 0)
			return 0; /* EINVAL: past the last capability */
		if (in && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0) {
			int e = errno;

			fprintf(stderr, "stfs: %s: STFS_CONFINE: the bounding "
				"set holds capability %d, which stfs cannot "
				"drop (%s): start it with an empty bounding "
				"set, or with CAP_SETPCAP\n", src, c,
				strerror(e));
			return -e;
		}
	}
}

/* Every capability set empty but the bounding set (drop_bounding). */
static int drop_capabilities(const char *src)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[2];

	memset(data, 0, sizeof(data));
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 ||
	    syscall(SYS_capset, &hdr, data) < 0) {
		int e = errno;

		fprintf(stderr, "stfs: %s: STFS_CONFINE: dropping the "
			"capabilities: %s\n", src, strerror(e));
		return -e;
	}
	return 0;
}

/* Every descriptor from 3 on closed but fd, one by one as
 * /proc/self/fd lists them: where close_range is missing (Linux before
 * 5.9, or a seccomp profile that refuses it).  0, or -1 with errno. */
static int close_listed(int fd)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char *end;
		long n = strtol(e->d_name, &end, 10);

		if (*end || end == e->d_name || n < 3 || n == fd ||
		    n == dirfd(d))
			continue;
		(void)close((int)n);
	}
	closedir(d);
	return 0;
}

/* Every descriptor from 3 on closed but fd. */
static int close_others(const char *src, int fd)
{
	int r = 0;

	if (fd > 3)
		r = close_range(3, (unsigned)fd - 1, 0);
	if (r == 0)
		r = close_range(fd >= 3 ? (unsigned)fd + 1 : 3, ~0U, 0);
	if (r < 0)
		r = close_listed(fd);
	if (r < 0) {
		int e = errno;

		fprintf(stderr, "stfs: %s: STFS_CONFINE: closing inherited "
			"descriptors: %s\n", src, strerror(e));
		return -e;
	}
	return 0;
}

int stfs_confine_fd_daemon(const char *src, int fd)
{
	const char *ask = getenv("STFS_CONFINE");
	int r;

	if (fd < 0)
		return 0;
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (!ask || strcmp(ask, "1") != 0)
		return 0;
	if ((r = close_others(src, fd)) < 0 || (r = drop_bounding(src)) < 0 ||
	    (r = drop_capabilities(src)) < 0)
		return r;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		r = -errno;
		fprintf(stderr, "stfs: %s: STFS_CONFINE: no_new_privs: %s\n",
			src, strerror(-r));
		return r;
	}
	return 0;
}

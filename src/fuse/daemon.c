/*
 * daemon.c: the life of a mounted stfs: readahead tuning, and going to the
 * background with logging to syslog (or -o log=FILE).  The request loop is
 * serve.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "fs.h"
#include "mount.h"

static FILE *log_fp;

/* mountinfo escapes ' ', '\t', '\n' and '\\' as \ooo. */
void stfs_mountinfo_unescape(char *s)
{
	char *o = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' &&
		    s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
				      (s[3] - '0'));
			s += 4;
		} else {
			*o++ = *s++;
		}
	}
	*o = '\0';
}

/*
 * The kernel gives a FUSE mount its own backing device "0:N"; its
 * read_ahead_kb decides how large the kernel's read requests are.  Found
 * through /proc/self/mountinfo, so the mount itself is never touched
 * (stfs has answered INIT and nothing else yet).  Written after INIT,
 * which could only lower it.
 */
int stfs_set_readahead(const char *mnt, unsigned kb, unsigned *cur)
{
	char *want = realpath(mnt, NULL), *line = NULL;
	char dev[64] = "", path[128];
	size_t cap = 0;
	FILE *f;
	int rc = 0;

	*cur = 0;
	if (!want)
		return -errno;
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		rc = -errno;
	while (f && getline(&line, &cap, f) > 0) {
		char mdev[64], *point = NULL;

		if (sscanf(line, "%*s %*s %63s %*s %ms", mdev, &point) == 2) {
			stfs_mountinfo_unescape(point);
			if (strcmp(point, want) == 0 && strstr(line, "fuse.stfs"))
				strcpy(dev, mdev);   /* the last one wins */
		}
		free(point);
	}
	if (f)
		fclose(f);
	free(line);
	free(want);
	if (rc)
		return rc;
	if (!dev[0])
		return -ENOENT;
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", dev);
	f = fopen(path, "re");
	if (f) {
		if (fscanf(f, "%u", cur) != 1)
			*cur = 0;
		fclose(f);
	}
	return stfs_write_number(path, kb);
}

int stfs_write_number(const char *path, unsigned v)
{
	FILE *f = fopen(path, "we");
	int rc = 0;

	if (!f)
		return -errno;
	if (fprintf(f, "%u\n", v) < 0)
		rc = -EIO;
	if (fclose(f) != 0 && !rc)
		rc = -errno;
	return rc;
}

static void log_func(enum fuse_log_level level, const char *fmt, va_list ap)
{
	if (log_fp) {
		vfprintf(log_fp, fmt, ap);
		fflush(log_fp);
	} else {
		vsyslog((int)level, fmt, ap);
	}
}

int stfs_daemonize(int foreground, const char *log_file, const char *src)
{
	if (foreground)
		return 0;
	if (log_file) {
		log_fp = fopen(log_file, "ae");
		if (!log_fp) {
			fprintf(stderr, "stfs: %s: log=%s: %s\n", src,
				log_file, strerror(errno));
			return -1;
		}
		setvbuf(log_fp, NULL, _IOLBF, 0);
	} else {
		openlog("stfs", LOG_PID, LOG_DAEMON);
	}
	fuse_set_log_func(log_func);
	if (fuse_daemonize(0) != 0)
		return -1;
	fuse_log(FUSE_LOG_INFO, "stfs: %s: serving (pid %d)\n", src,
		 (int)getpid());
	return 0;
}

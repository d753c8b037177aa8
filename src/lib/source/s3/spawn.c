/*
 * spawn.c: a child process run with bounds, for credential_process
 * (credproc.c): stdin /dev/null, the environment inherited, a process
 * group of its own; its stdout collected (at most STFS_CHILD_OUT_MAX, else
 * it is killed), the start of its stderr kept (STFS_CHILD_ERR_KEEP); its
 * time bounded (STFS_CHILD_TIME_MS, then it is killed with its group), and
 * killed at once when its caller cancels (an unmount never waits for it).
 * It is judged by its exit, not by its pipes: once it has exited, what is
 * still in the pipes is read for a grace of STFS_CHILD_GRACE_MS at most,
 * then the process group it led is killed and its answer stands (a
 * background child it left holding stdout does not make the caller wait).
 * Every buffer that held its output is zeroed (it prints secrets).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "s3.h"

extern char **environ;

/* One child while it runs: its pipes (stdout, stderr; -1 once closed),
 * its deadline, how much of its stderr is kept, whether it printed too
 * much. */
struct child {
	pid_t pid;
	int po[2], pe[2];
	long long end;
	size_t el;
	int over;
	int gone;	/* it exited (not reaped): the pipes have a grace */
};

static long long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int cancelled(const int *cancel)
{
	return cancel && __atomic_load_n(cancel, __ATOMIC_ACQUIRE);
}

/* Whether pid has exited, seen without reaping it: its zombie keeps the
 * process group's number from being reused until the group is killed. */
static int exited(pid_t pid)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT))
		return 0;
	return si.si_pid == pid;
}

/* The pipes made and argv started in a process group of its own: 0, or
 * -errno with err. */
static int start(struct child *c, char **argv, struct stfs_error *err)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	int rc;

	if (pipe2(c->po, O_CLOEXEC) || pipe2(c->pe, O_CLOEXEC))
		return stfs_fail(err, -errno, NULL, STFS_NO_OFFSET, "pipe: %s",
				 strerror(errno));
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, c->po[1], 1);
	posix_spawn_file_actions_adddup2(&fa, c->pe[1], 2);
	/* a process group of its own: what it started dies with it */
	posix_spawnattr_init(&at);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
	posix_spawnattr_setpgroup(&at, 0);
	rc = posix_spawnp(&c->pid, argv[0], &fa, &at, argv, environ);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	close(c->po[1]);
	close(c->pe[1]);
	c->po[1] = c->pe[1] = -1;
	if (rc)
		return stfs_fail(err, -rc, NULL, STFS_NO_OFFSET, "cannot run "
				 "%s: %s", argv[0], strerror(rc));
	return 0;
}

/* What one read of pipe i (0 stdout, 1 stderr) gave, kept: stdout into
 * out (past STFS_CHILD_OUT_MAX: c->over), stderr's start into errs. */
static void keep(struct child *c, int i, const char *buf, size_t got,
		 char *out, size_t *outlen, char *errs)
{
	if (!i) {
		if (*outlen + got > STFS_CHILD_OUT_MAX) {
			c->over = 1;
			return;
		}
		memcpy(out + *outlen, buf, got);
		*outlen += got;
	} else if (c->el < STFS_CHILD_ERR_KEEP) {
		size_t k = got < STFS_CHILD_ERR_KEEP - c->el ? got :
			   STFS_CHILD_ERR_KEEP - c->el;

		memcpy(errs + c->el, buf, k);
		c->el += k;
		errs[c->el] = '\0';
	}
}

/* Read both pipes until both are closed, the time is up, it printed too
 * much or the caller cancels. */
static void collect(struct child *c, const int *cancel, char *out,
		    size_t *outlen, char *errs)
{
	while (c->po[0] >= 0 || c->pe[0] >= 0) {
		struct pollfd p[2] = { { c->po[0], POLLIN, 0 },
				       { c->pe[0], POLLIN, 0 } };
		long long left;
		char buf[4096];

		/* exited: the pipes get a grace, not the whole time */
		if (!c->gone && exited(c->pid)) {
			c->gone = 1;
			if (c->end > now_ms() + STFS_CHILD_GRACE_MS)
				c->end = now_ms() + STFS_CHILD_GRACE_MS;
		}
		left = c->end - now_ms();
		if (left <= 0 || c->over || cancelled(cancel))
			break;
		/* a tenth of a second at most: a cancel is seen soon */
		if (poll(p, 2, left < 100 ? (int)left : 100) < 0 &&
		    errno != EINTR)
			break;
		for (int i = 0; i < 2 && !c->over; i++) {
			int *fd = i ? &c->pe[0] : &c->po[0];
			ssize_t got;

			if (*fd < 0 || !(p[i].revents & (POLLIN | POLLHUP |
							 POLLERR)))
				continue;
			got = read(*fd, buf, sizeof(buf));
			if (got <= 0) {
				if (got < 0 && errno == EINTR)
					continue;
				close(*fd);
				*fd = -1;
				continue;
			}
			keep(c, i, buf, (size_t)got, out, outlen, errs);
		}
		explicit_bzero(buf, sizeof(buf));
	}
}

static void kill_wait(struct child *c, int *status)
{
	kill(-c->pid, SIGKILL);
	while (waitpid(c->pid, status, 0) < 0 && errno == EINTR)
		;
}

/* Its end: killed if a pipe is still open (too much, too long,
 * cancelled), else waited for (bounded by the time left): 0 with
 * *status, or -errno with err. */
static int reap(struct child *c, char **argv, const int *cancel,
		int *status, struct stfs_error *err)
{
	if (c->po[0] >= 0 || c->pe[0] >= 0) {
		kill_wait(c, status);
		/* it exited and the grace is over: its answer stands, what
		 * it left holding the pipes is ended */
		if (c->gone && !c->over && !cancelled(cancel))
			return 0;
		return stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "%s %s; "
				 "killed", argv[0], c->over ? "printed over "
				 "64 KiB" : cancelled(cancel) ? "was still "
				 "running when stopped" : "ran over 30 s");
	}
	/* both pipes closed: it is ending (bounded by the time left) */
	for (;;) {
		pid_t w = waitpid(c->pid, status, WNOHANG);

		if (w == c->pid)
			return 0;
		if (w < 0 && errno != EINTR)
			return stfs_fail(err, -errno, NULL, STFS_NO_OFFSET,
					 "waitpid: %s", strerror(errno));
		if (now_ms() > c->end || cancelled(cancel)) {
			kill_wait(c, status);
			return stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "%s "
					 "ran over 30 s; killed", argv[0]);
		}
		(void)stfs_nap(10, NULL);
	}
}

int stfs_child_run(char **argv, const int *cancel, char *out,
		   size_t *outlen, char *errs, int *status,
		   struct stfs_error *err)
{
	struct child c = { .po = { -1, -1 }, .pe = { -1, -1 },
			   .end = now_ms() + STFS_CHILD_TIME_MS };
	int rc;

	*outlen = 0;
	errs[0] = '\0';
	if (!(rc = start(&c, argv, err))) {
		collect(&c, cancel, out, outlen, errs);
		rc = reap(&c, argv, cancel, status, err);
	}
	for (int i = 0; i < 2; i++) {
		if (c.po[i] >= 0)
			close(c.po[i]);
		if (c.pe[i] >= 0)
			close(c.pe[i]);
	}
	return rc;
}

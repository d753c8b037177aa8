/*
 * credproc.c: a profile's credential_process, run as botocore runs it:
 * the line split into words as a POSIX shell would split them (quotes and
 * backslashes, no expansion, no shell), the first word looked up in PATH,
 * stdin /dev/null, the environment inherited.  What it prints is bounded
 * (64 KiB of stdout, 4 KiB of stderr kept) and so is its time (30 s, then
 * it is killed, with the process group it leads, or at once when its
 * caller cancels: an unmount never waits for it).  It is judged by its
 * exit, not by its pipes: once it has exited, what is still in the pipes
 * is read for a grace of 250 ms at most, then the process group it led is
 * killed (a background child it left holding stdout does not make the
 * caller wait).  A status other than 0 is an error quoting the start of
 * its stderr.  Its stdout is one JSON object read strictly by credjson.c:
 * Version 1 (a number), AccessKeyId, SecretAccessKey, and optionally
 * SessionToken and Expiration (without one the keys never expire).  The
 * command line is never quoted in a message (it may hold a secret): only
 * its first word.
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

#define LINE_MAX_ (16u << 10)
#define WORDS_MAX 256
#define OUT_MAX (64u << 10)
#define ERR_KEEP 4096
#define TIME_MAX_MS 30000
#define GRACE_MS 250

extern char **environ;

void stfs_words_free(char **w)
{
	if (!w)
		return;
	for (char **p = w; *p; p++) {
		explicit_bzero(*p, strlen(*p));
		free(*p);
	}
	free(w);
}

char **stfs_words(const char *line, const char **why)
{
	size_t n = strlen(line), nw = 0;
	char **w = calloc(WORDS_MAX + 1, sizeof(*w)), *cur = NULL;
	size_t cl = 0;
	int in_word = 0;

	*why = NULL;
	if (n > LINE_MAX_) {
		*why = "the command line is over 16 KiB";
		free(w);
		return NULL;
	}
	if (!w || !(cur = malloc(n + 1)))
		goto nomem;
	for (const char *p = line;; p++) {
		char c = *p;

		if (!c || c == ' ' || c == '\t' || c == '\n') {
			if (in_word) {
				if (nw == WORDS_MAX) {
					*why = "over 256 words";
					goto bad;
				}
				cur[cl] = '\0';
				if (!(w[nw++] = strdup(cur)))
					goto nomem;
				cl = 0;
				in_word = 0;
			}
			if (!c)
				break;
			continue;
		}
		in_word = 1;
		if (c == '\\') {
			if (!p[1]) {
				*why = "a backslash at the end";
				goto bad;
			}
			cur[cl++] = *++p;
		} else if (c == '\'') {
			const char *e = strchr(p + 1, '\'');

			if (!e) {
				*why = "an unbalanced single quote";
				goto bad;
			}
			memcpy(cur + cl, p + 1, (size_t)(e - p - 1));
			cl += (size_t)(e - p - 1);
			p = e;
		} else if (c == '"') {
			for (p++; *p && *p != '"'; p++) {
				/* inside, a backslash escapes " and \ only */
				if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
					p++;
				cur[cl++] = *p;
			}
			if (!*p) {
				*why = "an unbalanced double quote";
				goto bad;
			}
		} else {
			cur[cl++] = c;
		}
	}
	if (!nw) {
		*why = "the command line is empty";
		goto bad;
	}
	explicit_bzero(cur, n + 1);
	free(cur);
	return w;
nomem:
	*why = "out of memory";
bad:
	if (cur)
		explicit_bzero(cur, n + 1);
	free(cur);
	stfs_words_free(w);
	return NULL;
}

static long long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Run argv; its stdout (at most OUT_MAX) into out, the start of its
 * stderr into errs; killed when *cancel turns nonzero.  0 with *status,
 * or -errno with err. */
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

static int run(char **argv, const int *cancel, char *out, size_t *outlen,
	       char *errs, int *status, struct stfs_error *err)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	int po[2] = { -1, -1 }, pe[2] = { -1, -1 }, rc = 0, over = 0;
	int gone = 0;
	size_t el = 0;
	long long end = now_ms() + TIME_MAX_MS;
	pid_t pid;

	*outlen = 0;
	errs[0] = '\0';
	if (pipe2(po, O_CLOEXEC) || pipe2(pe, O_CLOEXEC)) {
		rc = stfs_fail(err, -errno, NULL, STFS_NO_OFFSET, "pipe: %s",
			       strerror(errno));
		goto out;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, po[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
	/* a process group of its own: what it started dies with it */
	posix_spawnattr_init(&at);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
	posix_spawnattr_setpgroup(&at, 0);
	rc = posix_spawnp(&pid, argv[0], &fa, &at, argv, environ);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	close(po[1]);
	close(pe[1]);
	po[1] = pe[1] = -1;
	if (rc) {
		rc = stfs_fail(err, -rc, NULL, STFS_NO_OFFSET, "cannot run "
			       "%s: %s", argv[0], strerror(rc));
		goto out;
	}
	while (po[0] >= 0 || pe[0] >= 0) {
		struct pollfd p[2] = { { po[0], POLLIN, 0 },
				       { pe[0], POLLIN, 0 } };
		long long left;
		char buf[4096];

		/* exited: the pipes get a grace, not the 30 s */
		if (!gone && exited(pid)) {
			gone = 1;
			if (end > now_ms() + GRACE_MS)
				end = now_ms() + GRACE_MS;
		}
		left = end - now_ms();
		if (left <= 0 || over || cancelled(cancel))
			break;
		/* a tenth of a second at most: a cancel is seen soon */
		if (poll(p, 2, left < 100 ? (int)left : 100) < 0 &&
		    errno != EINTR)
			break;
		for (int i = 0; i < 2; i++) {
			int *fd = i ? &pe[0] : &po[0];
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
			if (!i) {
				if (*outlen + (size_t)got > OUT_MAX) {
					over = 1;
					break;
				}
				memcpy(out + *outlen, buf, (size_t)got);
				*outlen += (size_t)got;
			} else if (el < ERR_KEEP) {
				size_t k = (size_t)got < ERR_KEEP - el ?
					   (size_t)got : ERR_KEEP - el;

				memcpy(errs + el, buf, k);
				el += k;
				errs[el] = '\0';
			}
		}
		explicit_bzero(buf, sizeof(buf));
	}
	if (po[0] >= 0 || pe[0] >= 0) {
		kill(-pid, SIGKILL);
		while (waitpid(pid, status, 0) < 0 && errno == EINTR)
			;
		/* it exited and the grace is over: its answer stands, what
		 * it left holding the pipes is ended */
		if (gone && !over && !cancelled(cancel))
			goto out;
		rc = stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "%s %s; "
			       "killed", argv[0], over ? "printed over 64 KiB" :
			       cancelled(cancel) ? "was still running when "
			       "stopped" : "ran over 30 s");
		goto out;
	}
	/* both pipes closed: it is ending (bounded by the time left) */
	for (;;) {
		pid_t w = waitpid(pid, status, WNOHANG);

		if (w == pid)
			break;
		if (w < 0 && errno != EINTR) {
			rc = stfs_fail(err, -errno, NULL, STFS_NO_OFFSET,
				       "waitpid: %s", strerror(errno));
			break;
		}
		if (now_ms() > end || cancelled(cancel)) {
			kill(-pid, SIGKILL);
			while (waitpid(pid, status, 0) < 0 && errno == EINTR)
				;
			rc = stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "%s "
				       "ran over 30 s; killed", argv[0]);
			break;
		}
		(void)stfs_nap(10, NULL);
	}
out:
	for (int i = 0; i < 2; i++) {
		if (po[i] >= 0)
			close(po[i]);
		if (pe[i] >= 0)
			close(pe[i]);
	}
	return rc;
}

int stfs_process_fetch(const struct stfs_creds_src *src, const int *cancel,
		       struct stfs_creds_keys *k, struct stfs_error *err)
{
	char *out = malloc(OUT_MAX + 1), errs[ERR_KEEP + 1], q[300];
	const char *why;
	struct stfs_credjson j;
	char **argv;
	size_t len;
	int rc, status = 0;

	memset(k, 0, sizeof(*k));
	if (!out)
		return stfs_nomem(err);
	if (!(argv = stfs_words(src->command, &why))) {
		free(out);
		return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET, "the "
				 "profile's credential_process: %s", why);
	}
	rc = run(argv, cancel, out, &len, errs, &status, err);
	if (!rc && (!WIFEXITED(status) || WEXITSTATUS(status))) {
		size_t n = strcspn(errs, "\n");

		rc = stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "the "
			       "credential_process %s %s %d%s%s", argv[0],
			       WIFEXITED(status) ? "exited with status" :
			       "was killed by signal", WIFEXITED(status) ?
			       WEXITSTATUS(status) : WTERMSIG(status),
			       n ? ": " : "", n ? stfs_quote(errs, n < 200 ?
			       n : 200, q, sizeof(q)) : "");
	} else if (!rc) {
		out[len] = '\0';
		if ((rc = stfs_credjson_parse(out, len, &j, &why)) == 0) {
			const char *v = NULL;

			for (size_t i = 0; i < j.n; i++)
				if (!strcmp(j.kv[i].name, "Version") &&
				    j.kv[i].type == '0')
					v = j.kv[i].value;
			if (!v || strcmp(v, "1")) {
				why = "Version is not the number 1";
				rc = -EINVAL;
			} else {
				rc = stfs_credjson_keys(&j, "SessionToken", 0,
							k, &why);
			}
			stfs_credjson_free(&j);
		}
		if (rc)
			rc = rc == -ENOMEM ? stfs_nomem(err) :
			     stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "what "
				       "the credential_process %s printed: %s",
				       argv[0], why);
	}
	explicit_bzero(out, OUT_MAX + 1);
	free(out);
	stfs_words_free(argv);
	return rc;
}

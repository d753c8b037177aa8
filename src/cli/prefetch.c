/*
 * prefetch.c: `stfs prefetch`: asks a mount's daemon to warm its cache
 * (an ioctl on the mount's root, mount.h; src/fuse/prefetch.c)
 * with the whole mount, the named files and directories, or what globs
 * select, and shows how far it has come from the root's
 * user.stfs.prefetch.* xattrs until it is done (or returns at once with
 * --background).  The warm runs in the daemon, which owns the connections
 * and the cache: an interrupted view leaves it running.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "mount.h"
#include "pfspec.h"
#include "progress.h"

#define PF "user.stfs.prefetch"

struct pf_status {
	char state[16], error[1024];
	unsigned id;
	int local;
	uint64_t asked, cached, elapsed_ms, failed;
	unsigned long files_total, files_done;
	char raw[2048];
};

/* A number field of the status JSON (the daemon writes it: flat). */
static uint64_t field(const char *j, const char *key)
{
	char k[64];
	const char *p;

	snprintf(k, sizeof(k), "\"%s\":", key);
	return (p = strstr(j, k)) ? strtoull(p + strlen(k), NULL, 10) : 0;
}

static void str_field(const char *j, const char *key, char *out, size_t n)
{
	char k[64];
	const char *p;
	size_t i = 0;

	snprintf(k, sizeof(k), "\"%s\":\"", key);
	if ((p = strstr(j, k)))
		for (p += strlen(k); *p && *p != '"' && i + 1 < n; p++) {
			if (*p == '\\' && p[1])
				p++;
			out[i++] = *p;
		}
	out[i] = 0;
}

/* The mount's warm: 0, or -errno (-ENODATA: not an stfs mount). */
static int read_status(const char *mnt, struct pf_status *st)
{
	ssize_t n = getxattr(mnt, PF ".json", st->raw, sizeof(st->raw) - 1);

	if (n < 0)
		return errno == ENOTSUP || errno == EOPNOTSUPP ? -ENODATA :
		       -errno;
	st->raw[n] = 0;
	str_field(st->raw, "state", st->state, sizeof(st->state));
	str_field(st->raw, "error", st->error, sizeof(st->error));
	st->id = (unsigned)field(st->raw, "id");
	st->local = strstr(st->raw, "\"local\":true") != NULL;
	st->asked = field(st->raw, "bytes_asked");
	st->cached = field(st->raw, "bytes_cached");
	st->elapsed_ms = field(st->raw, "elapsed_ms");
	st->failed = field(st->raw, "failed_blocks");
	st->files_total = (unsigned long)field(st->raw, "files_total");
	st->files_done = (unsigned long)field(st->raw, "files_done");
	return 0;
}

/* One progress line: bytes done of total, rate, time left, files. */
static void progress(FILE *out, const struct pf_status *st, int tty)
{
	char done[32], total[32], rate[32];
	double s = st->elapsed_ms / 1000.0, r = s > 0 ? st->cached / s : 0;
	double left = r > 0 ? (st->asked - st->cached) / r : 0;

	stfs_human_size(st->cached, done, sizeof(done));
	stfs_human_size(st->asked, total, sizeof(total));
	stfs_human_size((uint64_t)r, rate, sizeof(rate));
	fprintf(out, "%sstfs prefetch: %s of %s (%.0f%%), %s/s, %s%.0f s, "
		"files %lu/%lu%s", tty ? "\r" : "", done, total,
		st->asked ? 100.0 * st->cached / st->asked : 100.0, rate,
		strcmp(st->state, "warming") ? "took " : "",
		strcmp(st->state, "warming") ? s : left, st->files_done,
		st->files_total, tty ? "\033[K" : "\n");
	fflush(out);
}

/* The glob that names path (a file or directory under the mount mnt,
 * both real paths) in the mount: its characters escaped; "" for the root
 * or a file of the whole model (%model.safetensors, %header.json). */
static char *glob_of(const char *mnt, const char *path, int dir)
{
	size_t ml = strlen(mnt), k = 0;
	const char *rel;
	char *g;

	if (strncmp(path, mnt, ml) || (path[ml] && path[ml] != '/'))
		return NULL;
	rel = path + ml + (path[ml] == '/');
	if (!*rel || *rel == '%')
		return strdup("");
	if (!(g = malloc(2 * strlen(rel) + 3)))
		return NULL;
	for (; *rel; rel++) {
		if (strchr("*?[]\\", *rel))
			g[k++] = '\\';
		g[k++] = *rel;
	}
	if (dir) {
		g[k++] = '/';
		g[k++] = '*';
	}
	g[k] = 0;
	return g;
}

static void usage(FILE *out)
{
	fprintf(out,
"usage: stfs prefetch [--include=GLOB] [--exclude=GLOB] [--background]\n"
"                     [-q | --json] MOUNTPOINT [PATH...]\n"
"       stfs prefetch --status [--json] MOUNTPOINT\n"
"Warm the cache of a mount of a URL, hf:// or s3:// source: the whole\n"
"mount, the files and directories PATH, or the tensors (paths in the\n"
"mount) and shard files whose names match --include and not --exclude.\n"
"  --wait         wait until every block is in the cache (the default)\n"
"  --background   start the warm in the mount's daemon and return\n"
"  --status       show the state of the mount's warm\n"
"  -q             no progress line\n"
"  --json         the state as JSON lines, for programs\n"
"Exit status: 0 done (or started), 1 failed (the file is named), 2 usage.\n");
}

struct pf_args {
	const char *mnt;
	char *spec;
	size_t len;
	int background, quiet, json, status;
};

/* Add a "+GLOB" or "-GLOB" line to the spec: 0 or -1. */
static int add_line(struct pf_args *a, char sign, const char *g)
{
	char *p = NULL;

	if (asprintf(&p, "%s%c%s\n", a->spec ? a->spec : "", sign, g) < 0)
		return -1;
	free(a->spec);
	a->spec = p;
	a->len = strlen(p);
	return 0;
}

/* The PATH arguments as globs: 0, or 2 after saying why. */
static int add_paths(struct pf_args *a, char **paths, int n)
{
	char mnt[PATH_MAX], real[PATH_MAX];
	struct stat sb;

	if (!realpath(a->mnt, mnt)) {
		fprintf(stderr, "stfs: %s: %s\n", a->mnt, strerror(errno));
		return 2;
	}
	for (int i = 0; i < n; i++) {
		char *g;

		if (!realpath(paths[i], real) || stat(real, &sb)) {
			fprintf(stderr, "stfs: %s: %s\n", paths[i],
				strerror(errno));
			return 2;
		}
		if (!(g = glob_of(mnt, real, S_ISDIR(sb.st_mode)))) {
			fprintf(stderr, "stfs: %s: not in the mount %s\n",
				paths[i], a->mnt);
			return 2;
		}
		if (*g ? add_line(a, '+', g) : add_line(a, '+', "*")) {
			free(g);
			return 2;
		}
		free(g);
	}
	return 0;
}

static int parse(int argc, char **argv, struct pf_args *a)
{
	static const struct option opts[] = {
		{ "include", required_argument, NULL, 'i' },
		{ "exclude", required_argument, NULL, 'x' },
		{ "background", no_argument, NULL, 'b' },
		{ "wait", no_argument, NULL, 'w' },
		{ "status", no_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 } };
	int c;

	while ((c = getopt_long(argc, argv, "qh", opts, NULL)) != -1) {
		switch (c) {
		case 'i': case 'x':
			if (add_line(a, c == 'i' ? '+' : '-', optarg))
				return 1;
			break;
		case 'b': a->background = 1; break;
		case 'w': a->background = 0; break;
		case 's': a->status = 1; break;
		case 'j': a->json = 1; break;
		case 'q': a->quiet = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	a->mnt = argv[optind];
	return add_paths(a, argv + optind + 1, argc - optind - 1) ? 2 : -1;
}

/* Report the end of a warm (tty: a progress line is on the terminal):
 * the exit status. */
static int finish(const struct pf_args *a, const struct pf_status *st,
		  int tty)
{
	if (tty) {
		progress(stderr, st, 1);
		fputc('\n', stderr);
	} else if (a->json) {
		printf("%s\n", st->raw);
	} else if (!a->quiet && strcmp(st->state, "failed")) {
		progress(stdout, st, 0);
	}
	if (strcmp(st->state, "failed") == 0) {
		fprintf(stderr, "stfs: %s: prefetch failed: %s\n", a->mnt,
			st->error);
		return 1;
	}
	return 0;
}

/* Follow the warm until it ends (or an interrupt): the exit status. */
static int follow(const struct pf_args *a, struct pf_status *st)
{
	int tty = !a->quiet && !a->json && isatty(2);
	struct timespec nap = { 0, 50 * 1000000L };
	unsigned ticks = 0;
	int rc, interrupted = 0;
	sigset_t set;

	/* SIGINT is waited for between polls (no handler, no global) */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	while (!(rc = read_status(a->mnt, st)) &&
	       strcmp(st->state, "warming") == 0 && !interrupted) {
		if (tty)
			progress(stderr, st, 1);
		else if (a->json && ticks % 20 == 0)
			printf("%s\n", st->raw), fflush(stdout);
		else if (!a->quiet && !a->json && ticks % 100 == 0 && ticks)
			progress(stdout, st, 0);
		ticks++;
		interrupted = sigtimedwait(&set, NULL, &nap) == SIGINT;
	}
	if (tty && (rc || interrupted))
		fputc('\n', stderr);
	if (rc) {
		fprintf(stderr, "stfs: %s: %s\n", a->mnt, strerror(-rc));
		return 1;
	}
	if (interrupted) {
		fprintf(stderr, "stfs: %s: the warm goes on in the mount's "
			"daemon (stfs prefetch --status %s)\n", a->mnt, a->mnt);
		return 130;
	}
	return finish(a, st, tty);
}

/* A request past what one holds (STFS_PF_MAX_GLOBS globs of each kind,
 * STFS_PREFETCH_SPEC_MAX bytes): 2 after saying so, else 0. */
static int too_much(const struct pf_args *a)
{
	size_t inc = 0, exc = 0;

	for (const char *l = a->spec; l && *l; l = strchr(l, '\n') + 1) {
		inc += *l == '+';
		exc += *l == '-';
	}
	if (inc > STFS_PF_MAX_GLOBS || exc > STFS_PF_MAX_GLOBS) {
		fprintf(stderr, "stfs: %s: %zu --%s globs (and PATHs): a "
			"request takes %d at most; give fewer, broader ones "
			"(a '*' matches across '/')\n", a->mnt,
			inc > exc ? inc : exc, inc > exc ? "include" :
			"exclude", STFS_PF_MAX_GLOBS);
		return 2;
	}
	if (a->len >= STFS_PREFETCH_SPEC_MAX) {
		fprintf(stderr, "stfs: %s: the globs (and PATHs) take %zu "
			"bytes: a request takes %d at most; give fewer, "
			"broader ones (a '*' matches across '/')\n", a->mnt,
			a->len, STFS_PREFETCH_SPEC_MAX - 1);
		return 2;
	}
	return 0;
}

/* Ask the daemon of mnt for a warm of spec: 0 or an errno. */
static int ask(const char *mnt, const char *spec, size_t len)
{
	char buf[STFS_PREFETCH_SPEC_MAX] = { 0 };
	int fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	if (fd < 0)
		return errno;
	if (len >= sizeof(buf)) {
		close(fd);
		return E2BIG;
	}
	memcpy(buf, spec, len);
	rc = ioctl(fd, STFS_IOC_PREFETCH, buf) ? errno : 0;
	close(fd);
	return rc;
}

int stfs_prefetch_main(int argc, char **argv)
{
	struct pf_args a = { 0 };
	struct pf_status st;
	char idl[32];
	int rc = parse(argc, argv, &a), busy;

	if (rc >= 0)
		goto out;
	rc = read_status(a.mnt, &st);
	if (rc) {
		fprintf(stderr, "stfs: %s: %s\n", a.mnt, rc == -ENODATA ?
			"not an stfs mount (no user.stfs.prefetch xattrs)" :
			strerror(-rc));
		rc = 1;
		goto out;
	}
	if (a.status) {
		if (a.json)
			printf("%s\n", st.raw);
		else
			progress(stdout, &st, 0), printf("state: %s%s%s\n",
				st.state, *st.error ? ", " : "", st.error);
		rc = strcmp(st.state, "failed") == 0;
		goto out;
	}
	snprintf(idl, sizeof(idl), "#%u", (unsigned)getpid());
	if (add_line(&a, '#', idl + 1)) {
		rc = 1;
		goto out;
	}
	if ((rc = too_much(&a)))
		goto out;
	busy = ask(a.mnt, a.spec, a.len);
	if (busy == EPERM) {
		fprintf(stderr, "stfs: %s: only the user who mounted it and "
			"root may prefetch it (reads are open to others)\n",
			a.mnt);
		rc = 1;
		goto out;
	}
	if (busy && busy != EBUSY) {
		if (read_status(a.mnt, &st) == 0 && *st.error)
			fprintf(stderr, "stfs: %s: %s\n", a.mnt, st.error);
		else
			fprintf(stderr, "stfs: %s: %s\n", a.mnt,
				strerror(busy));
		rc = 1;
		goto out;
	}
	if (busy && !a.quiet)
		fprintf(stderr, "stfs: %s: a warm is under way already: "
			"following it\n", a.mnt);
	if ((rc = read_status(a.mnt, &st)) == 0 && st.local) {
		if (!a.quiet)
			printf("stfs: %s: nothing to prefetch: a local mount, "
			       "its files are read from the disk\n", a.mnt);
		goto out;
	}
	rc = a.background ? 0 : follow(&a, &st);
	if (a.background && !a.quiet)
		printf("stfs: %s: prefetch started (stfs prefetch --status %s)"
		       "\n", a.mnt, a.mnt);
out:
	free(a.spec);
	return rc;
}

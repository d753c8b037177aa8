/*
 * mount.c: `stfs mount` and the mount-helper form `stfs SOURCE MOUNTPOINT
 * -o OPTS` that mount.fuse3 (and so fstab and systemd) calls: the options,
 * and the life of a mount from opening the model to unmounting.
 *
 * A mount validates everything before anything is mounted: the options
 * (libfuse's own included, by creating the session first), the mountpoint,
 * then the whole source.  Only then is the filesystem mounted; without -f
 * the command returns once the daemon is serving.  On any error it prints
 * `stfs: SOURCE: <what is wrong>`, exits 1, and leaves nothing mounted or
 * running.
 *
 * The mountpoint may also be /dev/fd/N: a descriptor of /dev/fuse that a
 * privileged process opened and mounted itself (mount(2) with fd=N), then
 * handed to stfs, which serves it without any privilege (libfuse >= 3.3).
 * Whatever stfs does on a mountpoint's path is then the mounter's: it
 * checks the directory, sets the mount's options (ro, allow_other, the
 * user), tunes its readahead and unmounts it; stfs checks that N is an
 * open /dev/fuse, serves until the mount goes away and, when it stops
 * first, leaves a dead mount ("Transport endpoint is not connected") for
 * the mounter to unmount or mount again.  Such a daemon makes itself not
 * dumpable: other processes of its user (other mounters' daemons, other
 * tenants') cannot read its environment's credentials or trace it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <syslog.h>
#include <unistd.h>

#include "confine.h"
#include "fs.h"
#include "mount.h"
#include "progress.h"

struct stfs_opts {
	char *source;
	char *mountpoint;
	int nonopts;
	int foreground;
	int debug;
	int flat;
	int npy;
	int show_virtual;
	/* -o include=GLOB, exclude=GLOB, each repeatable */
	char **include, **exclude;
	size_t ninclude, nexclude;
	/* -o files=GLOB (repeatable), -o repo: the repository at the root */
	char **files;
	size_t nfiles;
	int repo;
	char *convert;
	int help;
	int version;
	int single;
	/* number options, as given; checked by number_opts() */
	char *uid, *gid, *umask, *threads, *readahead, *max_read, *max_request;
	/* the options of remote sources, taken by libstfs, and the first
	 * that it refused (why) */
	struct stfs_remote_opts *remote;
	char *remote_bad;
	char *log;
	char *prefetch;         /* -o prefetch=: a warm's lines (prefetch.c) */
	char *metrics;          /* -o metrics=PATH, nometrics (fsmetrics.c) */
	int nometrics;
};

enum {
	KEY_FOREGROUND,
	KEY_DEBUG,
	KEY_HELP,
	KEY_VERSION,
	KEY_SINGLE,
	KEY_DISCARD,
	KEY_MAX_READ,
	KEY_INCLUDE,
	KEY_EXCLUDE,
	KEY_FILES,
	KEY_PREFETCH,
};

#define STFS_OPT(t, p, v) { t, offsetof(struct stfs_opts, p), v }

static const struct fuse_opt stfs_opt_spec[] = {
	STFS_OPT("flat", flat, 1),
	STFS_OPT("npy", npy, 1),
	STFS_OPT("show_virtual", show_virtual, 1),
	FUSE_OPT_KEY("include=", KEY_INCLUDE),
	FUSE_OPT_KEY("exclude=", KEY_EXCLUDE),
	FUSE_OPT_KEY("files=", KEY_FILES),
	STFS_OPT("repo", repo, 1),
	FUSE_OPT_KEY("prefetch=", KEY_PREFETCH),
	STFS_OPT("convert=%s", convert, 0),
	STFS_OPT("uid=%s", uid, 0),
	STFS_OPT("gid=%s", gid, 0),
	STFS_OPT("umask=%s", umask, 0),
	STFS_OPT("threads=%s", threads, 0),
	STFS_OPT("readahead=%s", readahead, 0),
	STFS_OPT("max_request=%s", max_request, 0),
	STFS_OPT("log=%s", log, 0),
	STFS_OPT("metrics=%s", metrics, 0),
	STFS_OPT("nometrics", nometrics, 1),
	FUSE_OPT_KEY("max_read=", KEY_MAX_READ),   /* libfuse's, and ours */
	FUSE_OPT_KEY("-f", KEY_FOREGROUND),
	FUSE_OPT_KEY("-d", KEY_DEBUG),
	FUSE_OPT_KEY("debug", KEY_DEBUG),
	FUSE_OPT_KEY("-s", KEY_SINGLE),
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	/* mount(8) options that mean nothing to a FUSE daemon */
	FUSE_OPT_KEY("ro", KEY_DISCARD),
	FUSE_OPT_KEY("rw", KEY_DISCARD),
	FUSE_OPT_KEY("defaults", KEY_DISCARD),
	FUSE_OPT_KEY("auto", KEY_DISCARD),
	FUSE_OPT_KEY("noauto", KEY_DISCARD),
	FUSE_OPT_KEY("user", KEY_DISCARD),
	FUSE_OPT_KEY("nouser", KEY_DISCARD),
	FUSE_OPT_KEY("users", KEY_DISCARD),
	FUSE_OPT_KEY("nofail", KEY_DISCARD),
	FUSE_OPT_KEY("_netdev", KEY_DISCARD),
	FUSE_OPT_END
};

/* A model warning on stderr; ctx is the SOURCE string. */
static void warn_stderr(void *ctx, const char *text)
{
	fprintf(stderr, "stfs: %s: warning: %s\n", (const char *)ctx, text);
}

/* An option of remote sources (URL, hf://, s3://), which libstfs parses:
 * 0, or 1 when it is none (libfuse's, or unknown). */
static int remote_opt(struct stfs_opts *o, const char *arg)
{
	char why[512];
	int rc = stfs_remote_opts_set(o->remote, arg, why, sizeof(why));

	if (rc < 0 && !o->remote_bad && !(o->remote_bad = strdup(why)))
		return -1;
	return rc > 0;
}

static int opt_proc(void *data, const char *arg, int key,
		    struct fuse_args *outargs)
{
	struct stfs_opts *o = data;

	switch (key) {
	case FUSE_OPT_KEY_NONOPT:
		if (o->nonopts == 0)
			o->source = strdup(arg);
		else if (o->nonopts == 1)
			o->mountpoint = strdup(arg);
		o->nonopts++;
		return 0;
	case FUSE_OPT_KEY_OPT:
		/* x-systemd.*, x-gvfs-* and comment=: hints for others */
		if (strncmp(arg, "x-", 2) == 0 ||
		    strncmp(arg, "comment=", 8) == 0)
			return 0;
		return remote_opt(o, arg);
	case KEY_FOREGROUND:
		o->foreground = 1;
		return 0;
	case KEY_DEBUG:
		o->debug = 1;
		o->foreground = 1;
		return 1;
	case KEY_SINGLE:
		o->single = 1;
		return 0;
	case KEY_INCLUDE:
	case KEY_EXCLUDE:
	case KEY_FILES: {
		char ***list = key == KEY_INCLUDE ? &o->include :
			       key == KEY_FILES ? &o->files : &o->exclude;
		size_t *n = key == KEY_INCLUDE ? &o->ninclude :
			    key == KEY_FILES ? &o->nfiles : &o->nexclude;
		char **p = realloc(*list, (*n + 1) * sizeof(*p));

		if (!p)
			return -1;
		*list = p;
		if (!(p[*n] = strdup(strchr(arg, '=') + 1)))
			return -1;
		(*n)++;
		return 0;
	}
	case KEY_PREFETCH: {    /* all, or a glob: "+GLOB" (repeatable) */
		const char *g = arg + strlen("prefetch=");
		char *p = NULL;

		if (asprintf(&p, "%s%s%s\n", o->prefetch ? o->prefetch : "",
			     strcmp(g, "all") ? "+" : "", g) < 0)
			return -1;
		free(o->prefetch);
		o->prefetch = p;
		return 0;
	}
	case KEY_MAX_READ:      /* keep it for libfuse, which checks it too */
		free(o->max_read);
		o->max_read = strdup(arg + strlen("max_read="));
		return o->max_read ? 1 : -1;
	case KEY_HELP:
		o->help = 1;
		return 0;
	case KEY_VERSION:
		o->version = 1;
		return 0;
	case KEY_DISCARD:
		return 0;
	}
	return 1;
}

/*
 * One number option: text (NULL when not given) must be only digits of
 * base, from lo to hi.  libfuse's own %u and %o would take "-1" as
 * 4294967295 and wrap what does not fit, so numbers are checked here.
 * 0 (and *out set if given), or -1 after saying what is wrong.
 */
static int number_opt(const char *src, const char *name, const char *text,
		      int base, unsigned long lo, unsigned long hi,
		      const char *want, unsigned long *out)
{
	const char *digits = base == 8 ? "01234567" : "0123456789";
	unsigned long v;
	char *end;

	if (!text)
		return 0;
	errno = 0;
	v = strtoul(text, &end, base);
	if (!*text || strspn(text, digits) != strlen(text) || errno ||
	    *end || v < lo || v > hi) {
		fprintf(stderr, "stfs: %s: %s=%s: give %s\n", src, name, text,
			want);
		return -1;
	}
	*out = v;
	return 0;
}

/* The options of remote sources together: 0, or -1 after saying what is
 * wrong. */
static int remote_opts(const struct stfs_opts *o, const char *src)
{
	char why[512];

	if (o->remote_bad) {
		fprintf(stderr, "stfs: %s: %s\n", src, o->remote_bad);
		return -1;
	}
	if (stfs_remote_opts_check(o->remote, why, sizeof(why)) ||
	    /* a mount of a URL: a cache it can use (cachedir.c) */
	    (stfs_source_is_remote(src) &&
	     stfs_remote_opts_check_cache(o->remote, why, sizeof(why)))) {
		fprintf(stderr, "stfs: %s: %s\n", src, why);
		return -1;
	}
	return 0;
}

static void log_line(void *ctx, const char *line)
{
	fuse_log(FUSE_LOG_ERR, "%s\n", line);
}

/* Check the number options into fs and *threads: 0, or -1. */
static int number_opts(const struct stfs_opts *o, const char *src,
		       struct stfs_fs *fs, unsigned *threads)
{
	unsigned long uid = getuid(), gid = getgid(), umask = 0,
		      th = STFS_DEFAULT_THREADS, ra = STFS_DEFAULT_READAHEAD,
		      max_read = 0, max_req = 0;

	if (number_opt(src, "uid", o->uid, 10, 0, 4294967294UL,
		       "a user id, 0 to 4294967294", &uid) ||
	    number_opt(src, "gid", o->gid, 10, 0, 4294967294UL,
		       "a group id, 0 to 4294967294", &gid) ||
	    number_opt(src, "umask", o->umask, 8, 0, 0777,
		       "an octal mode up to 777", &umask) ||
	    number_opt(src, "threads", o->threads, 10, 1, 256, "1 to 256",
		       &th) ||
	    number_opt(src, "readahead", o->readahead, 10, 1, 1048576,
		       "1 to 1048576 (KiB)", &ra) ||
	    number_opt(src, "max_read", o->max_read, 10, 0, UINT_MAX,
		       "a size in bytes, 0 to 4294967295", &max_read) ||
	    number_opt(src, "max_request", o->max_request, 10, 4, 262140,
		       "4 to 262140 (KiB)", &max_req))
		return -1;
	fs->max_pages = (unsigned)(max_req + 3) / 4;
	fs->uid = (uid_t)uid;
	fs->gid = (gid_t)gid;
	fs->umask = (mode_t)umask;
	fs->readahead_kb = (unsigned)ra;
	fs->max_read = (unsigned)max_read;
	*threads = o->single ? 1 : (unsigned)th;
	return 0;
}

/*
 * The read request size to ask for at INIT (fs->max_pages), within what
 * the kernel grants (fs.fuse.max_pages_limit): the default asks for up to
 * STFS_DEFAULT_MAX_REQUEST and never touches the limit; an explicit
 * max_request= raises the limit (root only) or says why it cannot.  The
 * readahead follows, unless readahead= was given: requests are never
 * larger than the readahead window.
 */
static void request_size(const struct stfs_opts *o, const char *src,
			 struct stfs_fs *fs)
{
	unsigned limit = 0, want = fs->max_pages;
	int rc;

	if (stfs_max_pages_limit(&limit) < 0)
		limit = 256;    /* before 6.13: FUSE_MAX_MAX_PAGES */
	if (!want) {
		want = STFS_DEFAULT_MAX_REQUEST / 4;
		if (want > limit)
			want = limit;
	} else if (want > limit) {
		rc = stfs_raise_max_pages_limit(want);
		if (rc < 0) {
			fprintf(stderr, "stfs: %s: max_request=%s: cannot raise "
				"fs.fuse.max_pages_limit from %u pages (%s); "
				"requests stay at most %u KiB\n", src,
				o->max_request, limit, strerror(-rc),
				limit * 4);
			want = limit;
		}
	}
	fs->max_pages = want;
	if (!o->readahead && want * 4 > fs->readahead_kb)
		fs->readahead_kb = want * 4;
}

/* The N of a mountpoint /dev/fd/N (only digits, as libfuse reads it), or
 * -1 when mnt is a path. */
static int fd_mountpoint(const char *mnt)
{
	const char *d = mnt + strlen("/dev/fd/");
	char *end;
	long n;

	if (strncmp(mnt, "/dev/fd/", strlen("/dev/fd/")) != 0 ||
	    !*d || strspn(d, "0123456789") != strlen(d))
		return -1;
	errno = 0;
	n = strtol(d, &end, 10);
	return errno || n > INT_MAX ? -1 : (int)n;
}

/* /dev/fd/N: is N an open descriptor of /dev/fuse (10:229)?  0, or
 * -errno after saying what is wrong. */
static int check_fuse_fd(const char *src, const char *mnt, int fd)
{
	struct stat st;

	if (fstat(fd, &st) < 0) {
		int e = errno;
		fprintf(stderr, "stfs: %s: mountpoint %s: %s (give the number "
			"of an open /dev/fuse that is mounted)\n", src, mnt,
			strerror(e));
		return -e;
	}
	if (!S_ISCHR(st.st_mode) || st.st_rdev != makedev(10, 229)) {
		fprintf(stderr, "stfs: %s: mountpoint %s is not /dev/fuse\n",
			src, mnt);
		return -EINVAL;
	}
	return 0;
}

/* Is path itself a mount point (or a dead FUSE mount)?  0, or -errno. */
static int check_mountpoint(const char *src, const char *mnt)
{
	struct stat st, up;
	char *parent;
	int fd = fd_mountpoint(mnt);

	if (fd >= 0)
		return check_fuse_fd(src, mnt, fd);
	if (stat(mnt, &st) < 0) {
		int e = errno;
		fprintf(stderr, "stfs: %s: mountpoint %s: %s%s\n", src, mnt,
			strerror(e), e == ENOTCONN ?
			" (a dead mount: run fusermount3 -u on it)" : "");
		return -e;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "stfs: %s: mountpoint %s: Not a directory\n",
			src, mnt);
		return -ENOTDIR;
	}
	if (asprintf(&parent, "%s/..", mnt) < 0)
		return -ENOMEM;
	if (stat(parent, &up) == 0 &&
	    (up.st_dev != st.st_dev || up.st_ino == st.st_ino)) {
		fprintf(stderr, "stfs: %s: mountpoint %s is busy: something "
			"is already mounted there\n", src, mnt);
		free(parent);
		return -EBUSY;
	}
	free(parent);
	return 0;
}

/* A session over a copy of args, to check them. */
static struct fuse_session *session_of_copy(const struct fuse_args *args,
					    struct stfs_fs *fs)
{
	struct fuse_args copy = FUSE_ARGS_INIT(0, NULL);
	struct fuse_session *se = NULL;
	int i;

	for (i = 0; i < args->argc; i++)
		if (fuse_opt_add_arg(&copy, args->argv[i]))
			break;
	if (i == args->argc)
		se = fuse_session_new(&copy, &stfs_ll_ops, sizeof(stfs_ll_ops),
				      fs);
	fuse_opt_free_args(&copy);
	return se;
}

/* Parse the command line into *o: -1 to go on (with *src, the source as
 * messages show it, and *threads), else the exit status. */
static int parse_args(struct fuse_args *args, struct stfs_opts *o,
		      struct stfs_fs *fs, char **src, unsigned *threads)
{
	if (!(o->remote = stfs_remote_opts_new())) {
		fprintf(stderr, "stfs: out of memory\n");
		return 1;
	}
	if (fuse_opt_parse(args, o, stfs_opt_spec, opt_proc) == -1) {
		fprintf(stderr, "stfs: invalid options (see stfs --help)\n");
		return 2;
	}
	if (o->help) {
		stfs_usage(stdout);
		return 0;
	}
	if (o->version) {
		printf("stfs %s (libfuse %s)\n", STFS_VERSION,
		       fuse_pkgversion());
		return 0;
	}
	if (o->nonopts != 2) {
		fprintf(stderr, "stfs: %s\n", o->nonopts < 2 ?
			"a SOURCE and a MOUNTPOINT are needed" :
			"too many arguments");
		stfs_usage(stderr);
		return 2;
	}
	/* messages and logs name it without a URL's password */
	if (!(*src = stfs_source_shown(o->source))) {
		fprintf(stderr, "stfs: out of memory\n");
		return 1;
	}
	if (number_opts(o, *src, fs, threads) || remote_opts(o, *src))
		return 2;
	if (o->convert && strcmp(o->convert, "f32") != 0) {
		fprintf(stderr, "stfs: %s: convert=%s: only convert=f32 is "
			"supported\n", *src, o->convert);
		return 2;
	}
	return -1;
}

/* Open the whole source as fs->model, with the tree options: 0, or the
 * exit status (its class: exitclass.c) after saying why. */
static int open_model(struct stfs_opts *o, const char *src,
		      struct stfs_fs *fs)
{
	struct stfs_model_opts mo = { 0 };
	struct stfs_open_line line;
	struct stfs_error err;
	int rc;

	mo.flags = (o->flat ? STFS_TREE_FLAT : 0) |
		   (o->npy ? STFS_TREE_NPY : 0) |
		   (o->convert ? STFS_TREE_F32 : 0) |
		   (o->show_virtual ? STFS_TREE_LIST_VIRTUAL : 0) |
		   (o->repo ? STFS_TREE_REPO : 0);
	mo.files = (const char *const *)o->files;
	mo.nfiles = o->nfiles;
	mo.include = (const char *const *)o->include;
	mo.ninclude = o->ninclude;
	mo.exclude = (const char *const *)o->exclude;
	mo.nexclude = o->nexclude;
	mo.warn = warn_stderr;
	mo.ctx = (void *)src;
	stfs_remote_opts_log(o->remote, log_line, NULL);
	if (stfs_fsmetrics_new(fs, o->remote, o->metrics, o->nometrics, src))
		return 1;
	mo.remote = o->remote;
	/* on a terminal, a line while a slow source is listed and read */
	stfs_open_line_start(&line, o->remote, stderr);
	rc = stfs_model_open_opts(o->source, &mo, &fs->model, &err);
	stfs_open_line_stop(&line, o->remote);
	if (rc) {
		fprintf(stderr, "stfs: %s: %s\n", src, err.msg);
		stfs_fsmetrics_free(fs);
		return stfs_exit_class(rc);
	}
	return 0;
}

/* Mount fs->model (open) on o->mountpoint and serve it until unmount: the
 * exit status.  The model is closed and fs destroyed on every path. */
static int serve_model(struct fuse_args *args, struct stfs_opts *o,
		       const char *src, struct stfs_fs *fs, unsigned threads)
{
	struct fuse_session *se = NULL;
	struct stfs_remote_stats stats;
	char *fsname = NULL, *mopts = NULL, why[PATH_MAX + 128];
	unsigned ra_now = 0;
	int ret = 1, rc;

	/* The mount shows the source as its device, read-only. */
	if (asprintf(&fsname, "fsname=%s",
		     stfs_model_canonical(fs->model)) < 0 ||
	    fuse_opt_add_opt(&mopts, "ro,subtype=stfs") ||
	    fuse_opt_add_opt_escaped(&mopts, fsname) ||
	    fuse_opt_add_arg(args, "-o") || fuse_opt_add_arg(args, mopts) ||
	    !(se = fuse_session_new(args, &stfs_ll_ops, sizeof(stfs_ll_ops),
				    fs))) {
		fprintf(stderr, "stfs: %s: cannot start the FUSE session\n",
			src);
		goto out_model;
	}
	fs->timeout = 86400.0;
	request_size(o, src, fs);
	if (o->debug)
		fprintf(stderr, "stfs: %s: flat=%d npy=%d convert=%s uid=%u "
			"gid=%u umask=%03o threads=%u readahead=%u "
			"max_request=%s log=%s\n",
			src, o->flat, o->npy, o->convert ? o->convert : "none",
			(unsigned)fs->uid, (unsigned)fs->gid,
			(unsigned)fs->umask, threads, fs->readahead_kb,
			o->max_request ? o->max_request : "default",
			o->log ? o->log : "syslog");
	if (stfs_fs_init(fs)) {
		fprintf(stderr, "stfs: %s: out of memory\n", src);
		goto out_model;
	}
	if (fs->metrics && stfs_fsmetrics_init(fs, o->metrics, why,
					       sizeof(why))) {
		fprintf(stderr, "stfs: %s: %s\n", src, why);
		goto out_model;
	}
	if (fuse_set_signal_handlers(se) != 0) {
		fprintf(stderr, "stfs: %s: cannot set signal handlers\n", src);
		goto out_model;
	}
	if (fuse_session_mount(se, o->mountpoint) != 0) {
		fprintf(stderr, "stfs: %s: cannot mount on %s\n", src,
			o->mountpoint);
		goto out_signals;
	}
	if (stfs_io_install(se) != 0) {
		fprintf(stderr, "stfs: %s: cannot set up the FUSE channel\n",
			src);
		goto out_unmount;
	}
	if (stfs_serve_init(se, &fs->initialized) != 0) {
		fprintf(stderr, "stfs: %s: the FUSE session did not start "
			"(see above)\n", src);
		goto out_unmount;
	}
	if (fd_mountpoint(o->mountpoint) >= 0) {
		/* the mounter knows the mount, and sets its readahead */
		if (o->readahead)
			fprintf(stderr, "stfs: %s: readahead=%u: on %s the "
				"mounter sets it (read_ahead_kb of the mount's "
				"/sys/class/bdi/MAJOR:MINOR)\n", src,
				fs->readahead_kb, o->mountpoint);
		rc = 0;
	} else {
		rc = stfs_set_readahead(o->mountpoint, fs->readahead_kb,
					&ra_now);
	}
	if (rc < 0 && o->readahead)   /* the default may fall back quietly */
		fprintf(stderr, "stfs: %s: readahead=%u: cannot set it (%s); "
			"the mount keeps the kernel's %u KiB\n", src,
			fs->readahead_kb, strerror(-rc), ra_now);
	if (stfs_daemonize(o->foreground, o->log, src) != 0)
		goto out_unmount;
	if (stfs_fsmetrics_start(fs))
		fuse_log(FUSE_LOG_ERR, "stfs: %s: no metrics= writer\n", src);
	if (o->prefetch &&
	    stfs_prefetch_start(fs, o->prefetch, strlen(o->prefetch)))
		fuse_log(FUSE_LOG_ERR, "stfs: %s: -o prefetch: %s\n", src,
			 fs->warm_last.error);
	ret = stfs_serve(se, threads) ? 1 : 0;
	stfs_prefetch_stop(fs);
	stfs_fsmetrics_stop(fs);
	/* Reads still in flight answer on the session's fd, which unmounting
	 * closes (and the number may then name another file): closing the
	 * model ends their transfers and waits for their replies first. */
	stfs_remote_stats(stfs_model_remote(fs->model), &stats);
	stfs_model_close(fs->model);
	fs->model = NULL;
	stfs_fsmetrics_log_stats(src, &stats);
out_unmount:
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_model:
	/* (on the way out of a failed start) the model before the handles:
	 * closing a remote source waits for its reads in flight, whose
	 * replies point into the open files' contents */
	stfs_model_close(fs->model);
	fs->model = NULL;
	stfs_fs_destroy(fs);
	if (se)
		fuse_session_destroy(se);
	free(fsname);
	free(mopts);
	return ret;
}

static void opts_free(struct stfs_opts *o)
{
	free(o->source);
	free(o->mountpoint);
	free(o->log);
	free(o->prefetch);
	free(o->metrics);
	free(o->convert);
	for (size_t i = 0; i < o->ninclude; i++)
		free(o->include[i]);
	for (size_t i = 0; i < o->nexclude; i++)
		free(o->exclude[i]);
	for (size_t i = 0; i < o->nfiles; i++)
		free(o->files[i]);
	free(o->files);
	free(o->include);
	free(o->exclude);
	free(o->uid);
	free(o->gid);
	free(o->umask);
	free(o->threads);
	free(o->readahead);
	free(o->max_request);
	stfs_remote_opts_free(o->remote);
	free(o->remote_bad);
	free(o->max_read);
}

/* The open-file limit raised to its hard limit: %repo/'s lazy files stay
 * open until unmount, and a directory may hold more of them than the
 * soft limit (often 1024, or less) lets a process open. */
static void raise_nofile(void)
{
	struct rlimit r;

	if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
		r.rlim_cur = r.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &r);
	}
}

int stfs_mount_main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct stfs_opts o = { 0 };
	struct stfs_fs fs = { .handles_mu = PTHREAD_MUTEX_INITIALIZER,
			      .warm_mu = PTHREAD_MUTEX_INITIALIZER };
	struct fuse_session *se;
	char *src = NULL;
	unsigned threads = 1;
	int ret = parse_args(&args, &o, &fs, &src, &threads);

	if (ret >= 0)
		goto out;
	/* Options first (libfuse rejects what it does not know here, and
	 * takes what it knows out of the arguments, so it checks a copy)... */
	if (!(se = session_of_copy(&args, &fs))) {
		fprintf(stderr, "stfs: %s: invalid mount options (see stfs "
			"--help)\n", src);
		ret = 2;
		goto out;
	}
	fuse_session_destroy(se);
	/* ...then the mountpoint, then the whole source. */
	ret = 1;
	raise_nofile();
	/* a daemon handed /dev/fd/N: confined before it opens anything */
	if (check_mountpoint(src, o.mountpoint) == 0 &&
	    stfs_confine_fd_daemon(src, fd_mountpoint(o.mountpoint)) == 0 &&
	    (ret = open_model(&o, src, &fs)) == 0)
		ret = serve_model(&args, &o, src, &fs, threads);
out:
	free(src);
	opts_free(&o);
	fuse_opt_free_args(&args);
	return ret;
}

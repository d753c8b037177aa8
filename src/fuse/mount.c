/*
 * mount.c: `stfs mount` and the mount-helper form `stfs SOURCE MOUNTPOINT
 * -o OPTS` that mount.fuse3 (and so fstab and systemd) calls: the life of
 * a mount from opening the model to unmounting (its command line is read by
 * mountopts.c).
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
#include "mountopts.h"
#include "progress.h"

/* A model warning on stderr; ctx is the SOURCE string. */
static void warn_stderr(void *ctx, const char *text)
{
	fprintf(stderr, "stfs: %s: warning: %s\n", (const char *)ctx, text);
}

static void log_line(void *ctx, const char *line)
{
	fuse_log(FUSE_LOG_ERR, "%s\n", line);
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

/* The mount's readahead (fs->readahead_kb), set on its backing device;
 * on /dev/fd/N the mounter's.  Said on stderr when readahead= was given
 * and cannot be had. */
static void mount_readahead(const struct stfs_opts *o, const char *src,
			    const struct stfs_fs *fs)
{
	unsigned ra_now = 0;
	int rc;

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
}

/* Mount fs->model (open) on o->mountpoint and serve it until unmount: the
 * exit status.  The model is closed and fs destroyed on every path. */
static int serve_model(struct fuse_args *args, struct stfs_opts *o,
		       const char *src, struct stfs_fs *fs, unsigned threads)
{
	struct fuse_session *se = NULL;
	struct stfs_remote_stats stats;
	char *fsname = NULL, *mopts = NULL, why[PATH_MAX + 128];
	int ret = 1;

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
	mount_readahead(o, src, fs);
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
	int ret = stfs_mount_args(&args, &o, &fs, &src, &threads);

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
	stfs_mount_opts_free(&o);
	fuse_opt_free_args(&args);
	return ret;
}

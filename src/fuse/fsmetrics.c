/*
 * fsmetrics.c: the daemon's side of its counters (libstfs's struct
 * stfs_metrics, stfs/metrics.h; docs/metrics.md): the time of each FUSE
 * request, from its arrival on the channel to its answer (io.c calls in
 * with each request's and each reply's header), the errno of reads that
 * failed, the file of -o metrics=PATH written every 10 s and at unmount
 * (a temporary file beside it renamed over it, so a reader such as node
 * exporter's textfile collector never sees a part of one), and the
 * root's user.stfs.metrics xattr that `stfs stats` reads (the mount's
 * owner's and root's only, as the prefetch ioctl is).  No port is opened.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs.h"
#include "mount.h"

#define EVERY_S 10
#define SLOTS 1024              /* requests timed at once, at most */

/* A request being answered: its unique (0: a free slot), operation and
 * arrival. */
struct slot {
	_Atomic uint64_t unique;
	_Atomic uint64_t t0;
	_Atomic unsigned op;
};

struct stfs_fsmetrics {
	char *path;                     /* absolute, for messages; NULL: no
					 * file */
	int dirfd;                      /* its directory, opened once (-1) */
	char *name, *tmp;               /* the file's and the temporary's
					 * names in it */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop, running, started;
	pthread_t th;
	struct slot slot[SLOTS];
};

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int op_of(uint32_t opcode)
{
	switch (opcode) {
	case FUSE_LOOKUP: return STFS_FUSE_LOOKUP;
	case FUSE_GETATTR: return STFS_FUSE_GETATTR;
	case FUSE_OPEN: case FUSE_OPENDIR: return STFS_FUSE_OPEN;
	case FUSE_READ: return STFS_FUSE_READ;
	case FUSE_RELEASE: case FUSE_RELEASEDIR: return STFS_FUSE_RELEASE;
	case FUSE_READDIR: case FUSE_READDIRPLUS: return STFS_FUSE_READDIR;
	case FUSE_GETXATTR: return STFS_FUSE_GETXATTR;
	case FUSE_LISTXATTR: return STFS_FUSE_LISTXATTR;
	case FUSE_STATFS: return STFS_FUSE_STATFS;
	case FUSE_IOCTL: return STFS_FUSE_IOCTL;
	/* no answer to these: nothing to time */
	case FUSE_FORGET: case FUSE_BATCH_FORGET: case FUSE_INTERRUPT:
		return -1;
	default: return STFS_FUSE_OTHER;
	}
}

void stfs_fsmetrics_request(struct stfs_fs *fs, const void *hdr, size_t n)
{
	const struct fuse_in_header *in = hdr;
	struct slot *s;
	int op;

	if (!fs->fm || n < sizeof(*in) || (op = op_of(in->opcode)) < 0)
		return;
	s = &fs->fm->slot[(in->unique >> 1) % SLOTS];
	atomic_store_explicit(&s->t0, now_ns(), memory_order_relaxed);
	atomic_store_explicit(&s->op, (unsigned)op, memory_order_relaxed);
	atomic_store_explicit(&s->unique, in->unique, memory_order_release);
}

void stfs_fsmetrics_reply(struct stfs_fs *fs, const void *hdr, size_t n)
{
	const struct fuse_out_header *out = hdr;
	uint64_t u;
	struct slot *s;

	if (!fs->fm || n < sizeof(*out) || !(u = out->unique))
		return;
	s = &fs->fm->slot[(u >> 1) % SLOTS];
	if (atomic_load_explicit(&s->unique, memory_order_acquire) != u)
		return;
	uint64_t t0 = atomic_load_explicit(&s->t0, memory_order_relaxed);
	unsigned op = atomic_load_explicit(&s->op, memory_order_relaxed);

	if (!atomic_compare_exchange_strong(&s->unique, &u, 0))
		return;         /* answered twice, or taken by another */
	stfs_metrics_fuse(fs->metrics, (enum stfs_fuse_op)op, now_ns() - t0,
			  -out->error);
}

/* The text now: the gauges taken first (the model may be closed). */
static char *text_now(struct stfs_fs *fs, size_t *len)
{
	if (fs->model)
		stfs_metrics_sample(fs->metrics, stfs_model_remote(fs->model));
	return stfs_metrics_text(fs->metrics, len);
}

/* Write the file: into tmp, then renamed over path, both in the
 * directory opened at start (a directory swapped for a link later
 * changes nothing).  The temporary is made afresh (O_EXCL): one someone
 * else made there is removed first, or the write fails, so the file is
 * never one another user owns.  0 or -errno. */
static int write_file(struct stfs_fs *fs)
{
	struct stfs_fsmetrics *fm = fs->fm;
	size_t len, at = 0;
	char *t = text_now(fs, &len);
	int fd, rc = 0;

	if (!t)
		return -ENOMEM;
	for (int k = 0; k < 2; k++) {
		fd = openat(fm->dirfd, fm->tmp, O_WRONLY | O_CREAT | O_EXCL |
			    O_CLOEXEC | O_NOFOLLOW, 0644);
		if (fd >= 0 || errno != EEXIST || k)
			break;
		if (unlinkat(fm->dirfd, fm->tmp, 0) < 0)
			break;
	}
	if (fd < 0) {
		free(t);
		return -errno;
	}
	while (at < len && rc == 0) {
		ssize_t k = write(fd, t + at, len - at);

		if (k > 0)
			at += (size_t)k;
		else if (k < 0 && errno != EINTR)
			rc = -errno;
	}
	free(t);
	if (close(fd) < 0 && !rc)
		rc = -errno;
	if (!rc && renameat(fm->dirfd, fm->tmp, fm->dirfd, fm->name) < 0)
		rc = -errno;
	if (rc)
		(void)unlinkat(fm->dirfd, fm->tmp, 0);
	return rc;
}

static void *writer(void *arg)
{
	struct stfs_fs *fs = arg;
	struct stfs_fsmetrics *fm = fs->fm;
	struct timespec at;
	int told = 0, rc;

	pthread_mutex_lock(&fm->mu);
	while (!fm->stop) {
		clock_gettime(CLOCK_MONOTONIC, &at);
		at.tv_sec += EVERY_S;
		while (!fm->stop &&
		       pthread_cond_timedwait(&fm->cv, &fm->mu, &at) == 0)
			;
		if (fm->stop)
			break;
		pthread_mutex_unlock(&fm->mu);
		if ((rc = write_file(fs)) && !told++)
			fuse_log(FUSE_LOG_ERR, "stfs: metrics=%s: cannot write "
				 "it: %s (tried again every %d s)\n", fm->path,
				 strerror(-rc), EVERY_S);
		pthread_mutex_lock(&fm->mu);
	}
	pthread_mutex_unlock(&fm->mu);
	return NULL;
}

int stfs_fsmetrics_new(struct stfs_fs *fs, struct stfs_remote_opts *ro,
		       const char *path, int off, const char *src)
{
	if (off && path) {
		fprintf(stderr, "stfs: %s: metrics= and nometrics: give one\n",
			src);
		return -1;
	}
	if (!off && !(fs->metrics = stfs_metrics_new())) {
		fprintf(stderr, "stfs: %s: out of memory\n", src);
		return -1;
	}
	stfs_remote_opts_metrics(ro, fs->metrics);
	return 0;
}

int stfs_fsmetrics_init(struct stfs_fs *fs, const char *path, char *why,
			size_t whysz)
{
	struct stfs_fsmetrics *fm;
	char *d = NULL, *b = NULL, *dir = NULL;
	pthread_condattr_t ca;
	int rc = -ENOMEM;

	if (!(fm = calloc(1, sizeof(*fm))))
		goto fail;
	fs->fm = fm;
	fm->dirfd = -1;
	pthread_mutex_init(&fm->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&fm->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (!path)
		return 0;
	/* absolute: the daemon's directory is / */
	if (!(d = strdup(path)) || !(b = strdup(path)))
		goto fail;
	if (!*basename(b) || !strcmp(basename(b), ".") ||
	    !strcmp(basename(b), "..")) {
		snprintf(why, whysz, "metrics=%s: give a file's path", path);
		rc = -EINVAL;
		goto fail;
	}
	if (!(dir = realpath(dirname(d), NULL))) {
		rc = -errno;
		snprintf(why, whysz, "metrics=%s: its directory: %s", path,
			 strerror(errno));
		goto fail;
	}
	if ((fm->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		rc = -errno;
		snprintf(why, whysz, "metrics=%s: its directory: %s", path,
			 strerror(errno));
		goto fail;
	}
	if (asprintf(&fm->path, "%s/%s", dir, basename(b)) < 0 ||
	    !(fm->name = strdup(basename(b))) ||
	    asprintf(&fm->tmp, ".%s.tmp.%d", basename(b),
		     (int)getpid()) < 0) {
		fm->tmp = NULL;
		goto fail;
	}
	if ((rc = write_file(fs)))
		snprintf(why, whysz, "metrics=%s: cannot write it: %s", path,
			 strerror(-rc));
fail:
	if (rc == -ENOMEM)
		snprintf(why, whysz, "out of memory");
	free(d);
	free(b);
	free(dir);
	return rc;
}

int stfs_fsmetrics_start(struct stfs_fs *fs)
{
	struct stfs_fsmetrics *fm = fs->fm;

	if (!fm || !fm->path)
		return 0;
	/* the tmp file is named by the process that writes it (the
	 * daemon, forked since init) */
	free(fm->tmp);
	if (asprintf(&fm->tmp, ".%s.tmp.%d", fm->name, (int)getpid()) < 0) {
		fm->tmp = NULL;
		return -ENOMEM;
	}
	fm->started = 1;        /* the file is written at the end */
	if (pthread_create(&fm->th, NULL, writer, fs))
		return -EAGAIN;
	fm->running = 1;
	return 0;
}

void stfs_fsmetrics_stop(struct stfs_fs *fs)
{
	struct stfs_fsmetrics *fm = fs->fm;

	if (!fm || !fm->running)
		return;
	pthread_mutex_lock(&fm->mu);
	fm->stop = 1;
	pthread_cond_signal(&fm->cv);
	pthread_mutex_unlock(&fm->mu);
	pthread_join(fm->th, NULL);
	fm->running = 0;
	if (fs->model)          /* the gauges, while there is a cache */
		stfs_metrics_sample(fs->metrics, stfs_model_remote(fs->model));
}

void stfs_fsmetrics_free(struct stfs_fs *fs)
{
	struct stfs_fsmetrics *fm = fs->fm;
	int rc;

	if (fm) {
		/* the last file, once the model is closed: what its reads
		 * and requests in flight at unmount did is in it */
		stfs_fsmetrics_stop(fs);
		if (fm->started && (rc = write_file(fs)))
			fuse_log(FUSE_LOG_ERR, "stfs: metrics=%s: cannot write "
				 "it at unmount: %s\n", fm->path,
				 strerror(-rc));
		else if (!fm->started && fm->name)
			/* a mount that failed */
			(void)unlinkat(fm->dirfd, fm->name, 0);
		if (fm->dirfd >= 0)
			close(fm->dirfd);
		pthread_mutex_destroy(&fm->mu);
		pthread_cond_destroy(&fm->cv);
		free(fm->path);
		free(fm->name);
		free(fm->tmp);
		free(fm);
	}
	fs->fm = NULL;
	stfs_metrics_free(fs->metrics);
	fs->metrics = NULL;
}

int stfs_fsmetrics_xattr(fuse_req_t req, struct stfs_fs *fs,
			 const char *name, size_t size)
{
	size_t len;
	char *t;

	if (strcmp(name, STFS_METRICS_XATTR) != 0)
		return 0;
	if (fuse_req_ctx(req)->uid != 0 && fuse_req_ctx(req)->uid != getuid())
		fuse_reply_err(req, EPERM);
	else if (!fs->metrics)
		fuse_reply_err(req, ENODATA);  /* -o nometrics */
	else if (!(t = text_now(fs, &len)))
		fuse_reply_err(req, ENOMEM);
	else {
		if (size == 0)
			fuse_reply_xattr(req, len);
		else if (size < len)
			fuse_reply_err(req, ERANGE);
		else
			fuse_reply_buf(req, t, len);
		free(t);
	}
	return 1;
}

void stfs_fsmetrics_log_stats(const char *src,
			      const struct stfs_remote_stats *st)
{
	if (st->requests || st->cache_hits)
		fuse_log(FUSE_LOG_INFO, "stfs: %s: fetched %llu bytes in %llu "
			 "requests (%llu retries), %llu blocks read from the "
			 "cache, %llu reads failed; of the requests %llu "
			 "resolves (%llu rate-limited)\n", src,
			 (unsigned long long)st->bytes,
			 (unsigned long long)st->requests,
			 (unsigned long long)st->retries,
			 (unsigned long long)st->cache_hits,
			 (unsigned long long)st->failed,
			 (unsigned long long)st->resolves,
			 (unsigned long long)st->rate_limited);
}

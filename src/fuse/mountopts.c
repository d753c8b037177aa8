/*
 * mountopts.c: the command line of `stfs mount` read into struct
 * stfs_opts: libfuse's option table with stfs's own options, the -o
 * options of remote sources handed to libstfs, the number options checked
 * (libfuse would wrap what does not fit), --help and --version.  What the
 * options do is mount.c's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs.h"
#include "mount.h"
#include "mountopts.h"

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

/* Parse the command line into *o: -1 to go on (with *src, the source as
 * messages show it, and *threads), else the exit status. */
int stfs_mount_args(struct fuse_args *args, struct stfs_opts *o,
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

void stfs_mount_opts_free(struct stfs_opts *o)
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

/*
 * mountopts.h: the options of `stfs mount` as the FUSE side keeps them
 * (struct stfs_opts), and the command line read into them (mountopts.c)
 * for mount.c, which mounts what they say.
 */
#ifndef STFS_MOUNTOPTS_H
#define STFS_MOUNTOPTS_H

#include <fuse_lowlevel.h>

#include "fs.h"

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

/* Parse the command line into *o: -1 to go on (with *src, the source as
 * messages show it, and *threads), else the exit status. */
int stfs_mount_args(struct fuse_args *args, struct stfs_opts *o,
		    struct stfs_fs *fs, char **src, unsigned *threads);
void stfs_mount_opts_free(struct stfs_opts *o);

#endif

/*
 * cli.h: the pieces of the stfs command outside main.c.
 */
#ifndef STFS_CLI_H
#define STFS_CLI_H

#include <stdio.h>

#include "fs.h"

#define STFS_DEFAULT_THREADS 4
#define STFS_DEFAULT_READAHEAD 1024

void stfs_usage(FILE *out);

/* inspect.c: `stfs inspect`; argv[0] is "inspect". */
int stfs_inspect_main(int argc, char **argv);
/* A model warning on stderr; ctx is the SOURCE string. */
void stfs_warn_stderr(void *ctx, const char *text);

/* daemon.c */
/* Set the kernel readahead of the FUSE mount at mnt to kb KiB: 0, or -errno
 * (-EACCES when not root: only root may write a backing device's
 * read_ahead_kb).  *cur gets the value before, or 0 if unknown. */
int stfs_set_readahead(const char *mnt, unsigned kb, unsigned *cur);
/* Go to the background unless foreground; log to syslog or log_file. */
int stfs_daemonize(int foreground, const char *log_file, const char *src);
/* serve.c: answer requests up to the kernel's INIT, until *initialized is
 * set (by .init): 0, or -errno if the session ended instead. */
int stfs_serve_init(struct fuse_session *se, const int *initialized);
/* serve.c: serve requests with up to threads threads until unmount or a
 * signal: 0, or -1 on error. */
int stfs_serve(struct fuse_session *se, unsigned threads);

#endif

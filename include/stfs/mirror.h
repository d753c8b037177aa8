/*
 * stfs/mirror.h: `stfs mirror` as libstfs offers it: a pinned source
 * copied into an S3 bucket, each file checked against the origin's
 * checksum, the manifest written last (source/mirror/, source/mcopy/,
 * docs/mirror.md).  A header of its own beside stfs.h, as metrics.h is:
 * a program that mirrors includes it.
 */
#ifndef STFS_MIRROR_PUBLIC_H
#define STFS_MIRROR_PUBLIC_H

#include <stddef.h>
#include <stdint.h>

#include "stfs/stfs.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility push(default)
#endif

/* How far a mirror has come (bytes and files of those selected). */
struct stfs_mirror_status {
	size_t files_total, files_done, files_skipped;
	uint64_t bytes_total, bytes_done, bytes_skipped;
	uint64_t elapsed_ms;
};

struct stfs_mirror_req {
	const char *source;     /* hf://ORG/NAME@COMMIT, s3://BUCKET/PREFIX/,
				 * https://HOST/FILE */
	const char *dest;       /* s3://BUCKET/PREFIX */
	const struct stfs_remote_opts *remote;  /* NULL: the defaults */
	/* fnmatch(3) globs on the files' paths ('*' matches '/'): a file is
	 * copied if it matches an include (or there are none) and no
	 * exclude */
	const char *const *include;
	size_t ninclude;
	const char *const *exclude;
	size_t nexclude;
	unsigned jobs;          /* files copied at once; 0: 4 */
	/* progress after each part, one call at a time, from any thread;
	 * log: a line for what is skipped or replaced */
	void (*progress)(void *ctx, const struct stfs_mirror_status *st);
	void (*log)(void *ctx, const char *line);
	void *ctx;
};

/* Copy q->source's files into q->dest, each checked against the origin's
 * checksum, and write the manifest last: 0, or -errno with err (then no
 * manifest of this version is there; a run again goes on where this one
 * stopped).  *st (if given) says how far it came. */
int stfs_mirror_run(const struct stfs_mirror_req *q,
		    struct stfs_mirror_status *st, struct stfs_error *err);

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* STFS_MIRROR_PUBLIC_H */

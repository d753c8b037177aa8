/*
 * stfs/remote.h: the remote sources of a model (http(s)://, hf://, s3://)
 * as libstfs offers them: their options (struct stfs_remote_opts, set
 * from the text of `-o` options), how far the opening of a model has come,
 * the s3:// addressing style, and what the remote sources did.  A part of
 * the public API that stfs.h includes; it names nothing of stfs.h.
 */
#ifndef STFS_REMOTE_PUBLIC_H
#define STFS_REMOTE_PUBLIC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility push(default)
#endif

/*
 * Remote sources (http(s)://, hf://, s3://, docs/remote-cache.md): the options
 * of one model's remote sources, given as the text of `-o` options.  The
 * model makes its remote layer from them when it is opened (connections,
 * threads, the cache) and frees it with it, so two models of one process
 * may be configured apart.
 */
struct stfs_remote_opts;
/* The defaults: 10 s to connect, 30 s stalls, 3 retries, 8 connections,
 * 16K/s, blocks of 4M, the cache in $XDG_CACHE_HOME/stfs (or
 * ~/.cache/stfs), 10G of it; NULL when out of memory. */
struct stfs_remote_opts *stfs_remote_opts_new(void);
void stfs_remote_opts_free(struct stfs_remote_opts *o);
/* Take one option, "KEY=VALUE" or "KEY": connect_timeout=S,
 * stall_timeout=S, retries=N, connections=N, min_speed=SIZE,
 * block_size=SIZE, cache=DIR (relative to the working directory now),
 * cache_size=SIZE, nocache, offline, unvalidated (open objects whose
 * server sends neither a strong ETag nor Last-Modified, uncached),
 * s3_style=path|virtual, public_net (connect to public addresses only),
 * allow_net=CIDR (with public_net, that range too; at most 16).  0; 1 if it
 * is not one of them (o unchanged); or -EINVAL (-ENAMETOOLONG, -ENOMEM)
 * with why saying what is wrong ("retries=x: give 0 to 100"). */
int stfs_remote_opts_set(struct stfs_remote_opts *o, const char *opt,
			 char *why, size_t whysz);
/* The options together (nocache goes with neither cache= nor offline):
 * 0, or -EINVAL with why. */
int stfs_remote_opts_check(const struct stfs_remote_opts *o, char *why,
			   size_t whysz);
/* Can the cache be used: a directory stfs can write (with offline,
 * read), or while it does not exist, the nearest directory above it?  0
 * (also with nocache), or -errno (ENOTDIR for a file, EROFS, EACCES) with
 * why.  A mount of a URL calls it; inspect need not. */
int stfs_remote_opts_check_cache(const struct stfs_remote_opts *o,
				 char *why, size_t whysz);
/* Where the remote layer reports what goes wrong after open (a read that
 * failed, and why): one line each to fn(ctx, line).  Default: nowhere. */
void stfs_remote_opts_log(struct stfs_remote_opts *o,
			  void (*fn)(void *ctx, const char *line), void *ctx);
/* How far the opening of a model with these options has come: the files
 * whose headers were read, of those to read (0 of 0 while the source is
 * still listed), and the bytes received so far. */
struct stfs_open_progress {
	size_t files_done, files_total;
	uint64_t bytes;
};
/* Where the opening reports its progress (for a progress line): fn(ctx,
 * p) once the files to open are known and after each header is read,
 * from the library's threads, one call at a time.  Default: nowhere. */
void stfs_remote_opts_progress(struct stfs_remote_opts *o,
			       void (*fn)(void *ctx,
					  const struct stfs_open_progress *p),
			       void *ctx);

/* s3:// addressing: virtual-hosted (https://BUCKET.HOST/KEY) or path-style
 * (https://HOST/BUCKET/KEY).  AUTO, the default: virtual-hosted on AWS,
 * path-style on an endpoint given by AWS_ENDPOINT_URL(_S3). */
enum stfs_s3_style { STFS_S3_AUTO, STFS_S3_PATH, STFS_S3_VIRTUAL };

/* What the remote sources of one model did since it was opened. */
struct stfs_remote;
struct stfs_remote_stats {
	uint64_t requests;      /* HTTP requests, retries included */
	uint64_t retries;
	uint64_t bytes;         /* bytes received */
	uint64_t cache_hits;    /* reads of blocks served by the cache */
	uint64_t failed;        /* reads that ended in an error */
	uint64_t resolves;      /* requests to a URL that redirects (the
				 * Hub's /resolve), among requests */
	uint64_t rate_limited;  /* of them, answered 429 */
};
/* r's statistics (all 0 for NULL). */
void stfs_remote_stats(const struct stfs_remote *r,
		       struct stfs_remote_stats *out);

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* STFS_REMOTE_PUBLIC_H */

/*
 * source.h: the door of the byte-source layer, for the layers above it
 * (never installed): the operations a kind of source implements, the
 * asynchronous read, the remote object's life, and the locator that turns
 * a SOURCE argument into named sources.  What only the rooms of the layer
 * share is in remote.h; what one room keeps to itself, in that room's
 * header (http/httphdr.h, hub/hub.h, s3/s3.h).
 */
#ifndef STFS_SOURCE_H
#define STFS_SOURCE_H

#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "stfs/stfs.h"

/* Completion of an asynchronous read: err is 0 or a negative errno. */
struct stfs_extent {
	uint64_t off, end;      /* [off, end) of the source */
};

typedef void (*stfs_source_done)(void *arg, int err);

/* What a warm of a remote source needs to know of it. */
struct stfs_warm_info {
	size_t block;               /* bytes per block */
	unsigned connections;       /* blocks to have in flight */
	uint64_t cache_max;         /* the cache's size limit */
	const void *remote;         /* its remote object (one per model) */
};

struct stfs_source_ops {
	void (*close)(struct stfs_source *s);
	/* Read exactly len bytes at off (within the size): 0 or -errno. */
	int (*read)(struct stfs_source *s, void *buf, size_t len,
		    uint64_t off);
	/* Start such a read and call done exactly once, now or later, from
	 * any thread.  NULL: read() then done(), before returning.  The read
	 * is part of the extent *ext (a tensor's bytes), a hint for what
	 * may be read next, or NULL. */
	void (*read_async)(struct stfs_source *s, void *buf, size_t len,
			   uint64_t off, const struct stfs_extent *ext,
			   stfs_source_done done, void *arg);
	/* The bytes [off, off + len) were served (copied to a reader or
	 * handed to the kernel): leave none of their pages in the page
	 * cache, where the mount's own file pages hold them now.  NULL:
	 * nothing to drop. */
	void (*drop)(struct stfs_source *s, uint64_t off, uint64_t len);
	/* A warm (`stfs prefetch`): what it needs to know, and block b
	 * brought into the cache (done called once).  NULL: a local file,
	 * nothing to warm. */
	int (*warm_info)(const struct stfs_source *s,
			 struct stfs_warm_info *wi);
	void (*warm)(struct stfs_source *s, uint64_t b,
		     stfs_source_done done, void *arg);
	/* wait until the blocks warmed are written; drop those queued */
	void (*warm_flush)(struct stfs_source *s);
	void (*warm_cancel)(struct stfs_source *s);
	/* next is read after s, from its start (a model's next shard): a
	 * reader going on to s's end may have next's first blocks fetched
	 * ahead of it; next NULL: no more.  NULL: nothing to do. */
	void (*follow)(struct stfs_source *s, struct stfs_source *next);
};

/* What every kind of source shares; kinds embed it first. */
struct stfs_source {
	const struct stfs_source_ops *ops;
	char *name;
	struct stfs_source_info info;
	const void *map;            /* info.size bytes, or NULL */
	const char *origin[STFS_ORIGIN_COUNT]; /* the locator's, or NULL */
	struct stfs_metrics *metrics; /* its model's counters, or NULL */
};

/* Read [off, off + len) of s asynchronously (see read_async).  Reads past
 * the size complete with -EIO. */
void stfs_source_read_async(struct stfs_source *s, void *buf, size_t len,
			    uint64_t off, const struct stfs_extent *ext,
			    stfs_source_done done, void *arg);

/* Call s's follow, if it has one (see follow). */
void stfs_source_follow(struct stfs_source *s, struct stfs_source *next);
/* Call s's drop for [off, off + len), if it has one. */
void stfs_source_drop(struct stfs_source *s, uint64_t off, uint64_t len);
/* What a warm of s needs: 0 with *wi; -EOPNOTSUPP for a local source
 * (nothing to warm), -ENOSPC for a remote one without a cache (nowhere to
 * warm it into).  Then block b of s into the cache, done(arg, 0 or
 * -errno) called once, from any thread; and a wait until the blocks
 * warmed are written. */
int stfs_source_warm_info(const struct stfs_source *s,
			  struct stfs_warm_info *wi);
void stfs_source_warm(struct stfs_source *s, uint64_t b,
		      stfs_source_done done, void *arg);
void stfs_source_warm_flush(struct stfs_source *s);
void stfs_source_warm_cancel(struct stfs_source *s);

/* Read the whole of s (at most max bytes, else -EFBIG) into a new buffer,
 * NUL-terminated: 0 or -errno. */
int stfs_source_slurp(struct stfs_source *s, uint64_t max, char **out,
		      size_t *len);

struct stfs_auth;

/* ---- the remote object of one model (remote.h) ---------------------------- */

/* The remote object every remote source of a model belongs to, made from
 * opts (NULL: the defaults without a cache): 0, or -errno with err. */
int stfs_remote_new(const struct stfs_remote_opts *opts,
		    struct stfs_remote **out, struct stfs_error *err);
/* Free r, after every source of it was closed. */
void stfs_remote_free(struct stfs_remote *r);
/* Stop its idle transfer threads (before a fork; they start again when
 * needed). */
void stfs_remote_park(struct stfs_remote *r);
/* Tell the options' progress function (if any) that done of total files
 * were opened; r may be NULL. */
void stfs_remote_progress(struct stfs_remote *r, size_t done, size_t total);
/* The opening is over: no more calls of the progress function. */
void stfs_remote_progress_end(struct stfs_remote *r);
/* Its bytes per block (-o block_size=), 0 for NULL (remote.c). */
size_t stfs_remote_block_size(const struct stfs_remote *r);
/* ---- the repository: every file of the source (repo.c) ----------------- */

/* Files of at most this many bytes that are not weights are fetched whole
 * at mount and verified (docs/remote.md). */
#define STFS_REPO_SMALL_MAX (1u << 20)
/* What a mount fetches whole and keeps at most: past this many small files
 * or bytes of them (path order), the rest are read lazily like large ones,
 * unverified (stfs inspect --files says "lazy"). */
#define STFS_REPO_SMALL_FILES 4096
#define STFS_REPO_SMALL_BYTES (64u << 20)
#define STFS_REPO_PATH_MAX 4096
/* Small files are fetched this many at a time, each its own request (one
 * connection each, as HTTP/1.1 has it): 200 of them take a connection's
 * round trip and two of requests, not one round trip per file
 * (docs/performance.md). */
#define STFS_REPO_FETCHERS 128

/* One file of the source's repository, as its listing gives it. */
struct stfs_rfile {
	char *path;             /* relative, '/' between components */
	uint64_t size;          /* from the listing (or stat) */
	char *sum;              /* "sha1-blob:HEX", "sha256:HEX", "md5:HEX",
				 * "crc64nvme:HEX", or NULL: none published */
	char *revision;         /* its own (a local file's mtime, an
				 * object's ETag), or NULL */
	const char *left_out;   /* why it is not shown (a static text), or
				 * NULL */
	int small;              /* fetched whole at mount (remote only) */
	char *bytes;            /* a small file's verified bytes */
	char *fault;            /* why its bytes are never served, or NULL */
	const char *unchecked;  /* why a fetched file was served unchecked
				 * (a static text), or NULL */
};

struct stfs_rlist {
	struct stfs_rfile *f;
	size_t n, cap;
	int listed;             /* the source lists its files (else the
				 * model's own files are the repository) */
};

/* Add a file: 0 or -ENOMEM. */
int stfs_rlist_push(struct stfs_rlist *l, const char *path, uint64_t size,
		    const char *sum, const char *left_out);
void stfs_rlist_free(struct stfs_rlist *l);
/* l's files sorted by path, as *ix (l->n pointers into l, malloc'd; NULL
 * when l is empty), for stfs_rlist_find(): 0 or -ENOMEM. */
int stfs_rlist_index(const struct stfs_rlist *l,
		     const struct stfs_rfile ***ix);
/* The file at path in ix (n of them: stfs_rlist_index()), or NULL; of a
 * path listed twice, the last one listed. */
const struct stfs_rfile *stfs_rlist_find(const struct stfs_rfile **ix,
					 size_t n, const char *path);
/* Why a path may not be shown (a static text), or NULL if it may. */
const char *stfs_repo_path_bad(const char *path);
/* Every regular file under dir (symlinks followed only while they stay
 * under root, which may be wider than dir: the Hugging Face cache's
 * blobs): 0 or -errno. */
int stfs_rlist_walk(struct stfs_rlist *l, const char *dir, const char *root,
		    struct stfs_error *err);
/* Is a file called path (of size bytes) small: fetched whole at mount? */
int stfs_repo_is_small(const char *path, uint64_t size);

/* ---- the locator ------------------------------------------------------ */

enum stfs_loc_kind {
	STFS_LOC_FILE,      /* one safetensors file: name */
	STFS_LOC_INDEX,     /* an index file: name, shards beside it */
	STFS_LOC_DIR,       /* shards with no index: names */
};

/*
 * Where a model's bytes are: its kind, and the names of its files, which
 * stfs_location_open() turns into sources.  Names are plain file names
 * relative to the location (no '/').
 */
struct stfs_service;

struct stfs_location {
	enum stfs_loc_kind kind;
	char *arg;          /* SOURCE as given (a URL less its user,
			     * password and query) */
	char *canonical;    /* its absolute form (the mount's device) */
	char *base;         /* the directory names are relative to */
	char *name;         /* FILE and INDEX: that file's name */
	char **names;       /* DIR: the *.safetensors files, sorted */
	size_t nnames;
	int http;           /* SOURCE is an http(s) URL; base is a URL */
	int remote;         /* hf:// or s3://: base is a URL prefix */
	struct stfs_auth *auth;     /* what requests to base carry */
	char *local_base;   /* hf: the snapshot in the Hugging Face cache */
	int offline;        /* hf: HF_HUB_OFFLINE or -o offline: files not
			     * in local_base are errors, never fetched */
	char *repo, *revision;      /* hf: the repo and its resolved commit */
	char *domain;       /* hf: its trust domain, "ORIGIN REPO": a file's
			     * blocks are shared by content within it */
	char **etag_names, **etags; /* the service's ETag of each file */
	size_t netags;
	struct stfs_remote *net;    /* the remote layer its sources use */
	struct stfs_rlist files;    /* every file, for %repo/ (repo.c) */
	char *repo_base;            /* local: the directory the files are in */
	char *note;                 /* a warning for the model to give */
	const struct stfs_service *service; /* the service that located a
					     * URL (locate.h), or NULL */
};

/* Find what SOURCE names, its remote sources (and requests) of net
 * (NULL: no hf:// or s3://, and no http(s) source opened); errors say
 * what is wrong with it. */
int stfs_locate(const char *arg, struct stfs_remote *net,
		struct stfs_location **out, struct stfs_error *err);
void stfs_location_free(struct stfs_location *loc);
/* Before the process forks: stop the thread that refreshes loc's
 * credentials, if it has one (the next request starts it again). */
void stfs_location_park(struct stfs_location *loc);
/* Open the file at path (relative, '/' allowed) of loc's repository:
 * 0 or -errno. */
int stfs_location_open_path(const struct stfs_location *loc,
			    const char *path, struct stfs_source **out,
			    struct stfs_error *err);
/* Fetch loc's small files (several at a time) and verify each against
 * its published checksum: a file that does not match keeps its fault
 * (and is never served).  0, or -errno for what stops the mount. */
int stfs_repo_fetch_small(struct stfs_location *loc,
			  void (*warn)(void *, const char *), void *ctx);
/* Open the file called name at loc. */
int stfs_location_open(const struct stfs_location *loc, const char *name,
		       struct stfs_source **out, struct stfs_error *err);

#endif

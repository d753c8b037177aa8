/*
 * source.h: the byte-source layer's declarations for the layers above it
 * (never installed): the operations a kind of source implements, the
 * asynchronous read, and the locator that turns a SOURCE argument into
 * named sources.
 */
#ifndef STFS_SOURCE_H
#define STFS_SOURCE_H

#include <limits.h>

#include "stfs/stfs.h"

/* Completion of an asynchronous read: err is 0 or a negative errno. */
struct stfs_extent {
	uint64_t off, end;      /* [off, end) of the source */
};

typedef void (*stfs_source_done)(void *arg, int err);

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
};

/* What every kind of source shares; kinds embed it first. */
struct stfs_source {
	const struct stfs_source_ops *ops;
	char *name;
	struct stfs_source_info info;
	const void *map;            /* info.size bytes, or NULL */
};

/* Read [off, off + len) of s asynchronously (see read_async).  Reads past
 * the size complete with -EIO. */
void stfs_source_read_async(struct stfs_source *s, void *buf, size_t len,
			    uint64_t off, const struct stfs_extent *ext,
			    stfs_source_done done, void *arg);

/* Read the whole of s (at most max bytes, else -EFBIG) into a new buffer,
 * NUL-terminated: 0 or -errno. */
int stfs_source_slurp(struct stfs_source *s, uint64_t max, char **out,
		      size_t *len);

/* ---- HTTP (http.c, httphdr.c) ----------------------------------------- */

/* What stfs takes from a response's header lines. */
struct stfs_http_resp {
	int has_range;          /* Content-Range: bytes FIRST-LAST/TOTAL */
	int has_total;          /* ... or bytes * /TOTAL */
	uint64_t range_first, range_last, total;
	char etag[256];         /* "" if none (or unusable) */
	char last_modified[64];
	unsigned retry_after_s; /* 0 if none */
};

/* Take one header line (with or without its CRLF) into r.  A status line
 * ("HTTP/...") starts a new response.  Never fails: what does not parse
 * is left out. */
void stfs_http_header_line(const char *line, size_t len,
			   struct stfs_http_resp *r);

/* Is arg an http:// or https:// URL? */
int stfs_is_url(const char *arg);
/* A byte source for the object at url: fetches its first block, which
 * gives its size and version (ETag, Last-Modified): 0, or -errno with err
 * saying why (HTTP status, connection error, a server that ignores
 * ranges). */
int stfs_source_open_http(const char *url, struct stfs_source **out,
			  struct stfs_error *err);

/* ---- the on-disk cache of remote objects (cache.c) ----------------------- */

#define STFS_CACHE_BLOCK (4u << 20)     /* bytes per cached block */
#define STFS_CACHE_HEAD UINT64_MAX      /* the block of an object's head */

/* One version of one object in the cache. */
#define STFS_CACHE_DIR_MAX 1024          /* the cache's own path, at most */

struct stfs_cache_obj {
	char dir[STFS_CACHE_DIR_MAX + 64];
	uint64_t size;
	int valid;              /* 0: not cached (no cache, or no version) */
};

/* 1 if -o offline: no network, the cache only. */
int stfs_cache_offline(void);
/* The cache entry of url in version (an ETag or Last-Modified) and size,
 * made if need be and remembered as the latest: 0, or -errno. */
int stfs_cache_object(const char *url, const char *version, uint64_t size,
		      struct stfs_cache_obj *o);
/* The latest version of url cached (for offline, or a server that is
 * down): 0 with *o and version filled, or -ENOENT. */
int stfs_cache_latest(const char *url, struct stfs_cache_obj *o,
		      char *version, size_t vsz);
/* Bytes [off, off + len) of block number block (or STFS_CACHE_HEAD),
 * whose length is block_len: 0, or -ENOENT when the block is not (wholly)
 * there. */
int stfs_cache_read(const struct stfs_cache_obj *o, uint64_t block,
		    size_t block_len, size_t off, void *buf, size_t len);
int stfs_cache_put(const struct stfs_cache_obj *o, uint64_t block,
		   const void *buf, size_t len);

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
struct stfs_location {
	enum stfs_loc_kind kind;
	char *arg;          /* SOURCE as given */
	char *canonical;    /* its absolute form (the mount's device) */
	char *base;         /* the directory names are relative to */
	char *name;         /* FILE and INDEX: that file's name */
	char **names;       /* DIR: the *.safetensors files, sorted */
	size_t nnames;
	int remote;         /* base is a URL prefix */
};

/* Find what SOURCE names; errors say what is wrong with it. */
int stfs_locate(const char *arg, struct stfs_location **out,
		struct stfs_error *err);
void stfs_location_free(struct stfs_location *loc);
/* Open the file called name at loc. */
int stfs_location_open(const struct stfs_location *loc, const char *name,
		       struct stfs_source **out, struct stfs_error *err);

#endif

/*
 * cache.h: the private cache on disk as the remote layer sees it: the
 * store of blocks by object and version (cache.c) and the directory it
 * lives in, opened and written without following links (cachedir.c).
 */
#ifndef STFS_CACHE_H
#define STFS_CACHE_H

#include <pthread.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

#include "source.h"

/* ---- the cache store on disk (cache.c) --------------------------------- */

#define STFS_CACHE_HEAD UINT64_MAX      /* the block of an object's head */
#define STFS_CACHE_DOC (UINT64_MAX - 1) /* the block of a kept answer */
#define STFS_CACHE_DIR_MAX 1024         /* the cache's own path, at most */

/* The cache of a remote: its directory, limit and use. */
struct stfs_cache {
	char *dir;
	int root;                       /* its descriptor, or -1 until made */
	int offline;                    /* only read: nothing made */
	uint64_t max_bytes;
	size_t block;                   /* blocks of another size live apart */
	uint64_t used;                  /* bytes of blocks, as far as known */
	uint64_t writing;               /* bytes of blocks being written */
	int scanned;
	int told;                       /* a write that failed was logged */
	int usage;                      /* usage, shared by the daemons
					 * of the directory, or -1 */
	struct stfs_metrics *metrics;   /* its owner's counters, or NULL */
	pthread_mutex_t mu;
};

/* One version of one object in the cache. */
struct stfs_cache_obj {
	char dir[48];           /* v1/<hash of URL>/<hash of version>,
				 * relative to the cache */
	uint64_t key;           /* its blocks' headers name it (the hash
				 * of dir) */
	uint64_t size;
	int valid;              /* 0: not cached (no cache, or no version) */
	struct stfs_cache *c;   /* the cache it is in, when valid */
};

/* A cache under dir (copied; nothing on disk yet), only read if offline:
 * 0, or -errno. */
int stfs_cache_init(struct stfs_cache *c, const char *dir, uint64_t max,
		    size_t block, int offline);
void stfs_cache_fini(struct stfs_cache *c);
/* The cache c (NULL: none), made if need be (0700), and private (owned by
 * the user, not writable by group or others): 0; else -errno with err
 * saying what is wrong and how to fix it.  A remote source calls it when
 * it opens, so that a local mount never touches the cache. */
int stfs_cache_ready(struct stfs_cache *c, struct stfs_error *err);
/* The cache entry of url in version (a strong ETag or Last-Modified) and
 * size, made if need be and remembered as the latest: 0; -EPERM (err
 * says why: a directory of the cache that is not private) or another
 * -errno (-ENOENT: no cache, or no version to key it by). */
int stfs_cache_object(struct stfs_cache *c, const char *url,
		      const char *version, uint64_t size,
		      struct stfs_cache_obj *o, struct stfs_error *err);
/* The latest version of url cached (for offline, or a server that is
 * down): 0 with *o and version filled, or -ENOENT. */
int stfs_cache_latest(struct stfs_cache *c, const char *url,
		      struct stfs_cache_obj *o, char *version, size_t vsz);
/* Bytes [off, off + len) of block number block (or STFS_CACHE_HEAD),
 * whose length is block_len, checked: 0, or -ENOENT when the block is not
 * there, not a regular file of ours that only we may write, or fails its
 * check. */
int stfs_cache_read(const struct stfs_cache_obj *o, uint64_t block,
		    size_t block_len, size_t off, void *buf, size_t len);

/* ---- a block file: its header and checked reads (blockfile.c) ---------- */

#define STFS_BLOCK_HDR 4096             /* the header before its bytes */
#define STFS_BLOCK_CHUNKS 1008          /* checksums in a header, at most */

/* A block of the cache open for reading, its header checked. */
struct stfs_cache_blk {
	int fd;                         /* -1: none */
	uint64_t block;
	size_t len;                     /* its bytes (the file has a header
					 * more) */
	unsigned shift, n;              /* n chunks of 1 << shift bytes */
	uint32_t *crc;                  /* CRC-32C of each */
	dev_t dev;
	ino_t ino;                      /* the file, to drop it */
};
/* The header of block (or STFS_CACHE_HEAD) of the object version key,
 * whose len bytes are at buf, into hdr (STFS_BLOCK_HDR bytes). */
void stfs_blockfile_header(uint64_t key, uint64_t block, const void *buf,
			   size_t len, unsigned char *hdr);
/* The header of the block file fd checked (magic, key, block number,
 * length, its own checksum): 0 with *b holding fd (closed by
 * stfs_blockfile_close()); -EBADMSG with why (fd left to the caller), or
 * -ENOMEM. */
int stfs_blockfile_open(int fd, uint64_t key, uint64_t block, size_t len,
			struct stfs_cache_blk *b, char *why, size_t whysz);
void stfs_blockfile_close(struct stfs_cache_blk *b);
/* Bytes [off, off + len) of block b, every chunk they touch read and
 * checked against its checksum: 0, or -EBADMSG with why (never a byte
 * that failed), or -ENOMEM. */
int stfs_blockfile_pread(const struct stfs_cache_blk *b, void *buf,
			 size_t len, size_t off, char *why, size_t whysz);

/* Block of o, whose length is block_len, opened for reading (and marked
 * recently used), its header checked: 0 with *b; -ENOENT when it is not
 * there (or not a file of ours that only we may write, or one of an older
 * stfs), -EBADMSG when it is there but fails its check (why says how), or
 * -ENOMEM.  A block evicted while open stays readable. */
int stfs_cache_open_block(const struct stfs_cache_obj *o, uint64_t block,
			  size_t block_len, struct stfs_cache_blk *b,
			  char *why, size_t whysz);
/* Block b of o failed its check: its file removed, if it is still the one
 * b read (not when offline: nothing is changed then). */
void stfs_cache_drop_block(const struct stfs_cache_obj *o,
			   const struct stfs_cache_blk *b, uint64_t block);
/* Write block (or STFS_CACHE_HEAD) of o to the cache: 0, or -errno.  A
 * block is flushed before it takes its name; the head is not. */
int stfs_cache_put(struct stfs_cache *c, const struct stfs_cache_obj *o,
		   uint64_t block, const void *buf, size_t len);

/* An answer kept for url (len bytes at buf, an encoding of the HTTP
 * room's: http/kept.c), in the format of a block, for offline mounts:
 * 0, or -errno. */
int stfs_cache_put_doc(struct stfs_cache *c, const char *url,
		       const void *buf, size_t len);
/* The answer kept for url, checked as a block is: 0 with *buf (malloc'd,
 * NUL terminated) and *len; -ENOENT (none), -EBADMSG (it fails its check:
 * why says how) or -ENOMEM. */
int stfs_cache_get_doc(struct stfs_cache *c, const char *url, char **buf,
		       size_t *len, char *why, size_t whysz);

/* The trust tag of a credential in cache c (blocks/trustkey.c): into
 * out, "trust:CLS:HEX", HEX 128 bits of an HMAC-SHA256 of cls and the
 * idlen bytes of id (the credential, secret and all) under the cache's own
 * random key (v1/trust.key, made at first use unless c is offline), so
 * that keys starting with it name what that credential fetched and no
 * other source spelling can name them, and no name or log holds the
 * secret: 0, or -errno (-ENOENT: no cache, or offline with no key). */
int stfs_cache_trust_tag(struct stfs_cache *c, const char *cls,
			 const void *id, size_t idlen, char *out,
			 size_t outsz);

/* The text of usage (n bytes: a number as written, digits with no
 * leading zero, and a newline) into *out: 0, or -EINVAL. */
int stfs_cache_parse_usage(const char *text, size_t n, uint64_t *out);

/* A block could not be written (rc): 1 the first time (the caller logs
 * it, with why), else 0. */
int stfs_cache_failed_once(struct stfs_cache *c);

#define STFS_CACHE_BATCH 16

/* One block to write, and the result (rc). */
struct stfs_cache_item {
	const struct stfs_cache_obj *o;
	uint64_t block;                 /* never STFS_CACHE_HEAD */
	const void *buf;
	size_t len;
	int keep_pages;                 /* a block its readers will read
					 * from the file (a warm's; one that
					 * cannot be held): written through
					 * the page cache and its pages stay,
					 * for them; any other goes past it
					 * (O_DIRECT) */
	int rc;
};
/* Write n blocks (each rc set): all written, then all flushed, then all
 * renamed into place, so that the disk is waited for once. */
void stfs_cache_put_batch(struct stfs_cache *c, struct stfs_cache_item *it,
			  size_t n);

/* ---- what the cache holds, counted and evicted (evict.c) ---------------- */

#define STFS_CACHE_FS_BLOCK 4096u       /* a file's bytes count in these */
#define STFS_CACHE_LOW_PCT 90           /* a full cache is evicted down to
					 * this share of cache_size */

/* size rounded up to STFS_CACHE_FS_BLOCK: what a file of size counts. */
uint64_t stfs_cache_charge(uint64_t size);
/* What the regular file name in dir counts now (0: none). */
uint64_t stfs_cache_charged(int dir, const char *name);
/* What the directories of rel ("v1/A/B") that do not exist yet under
 * root will count. */
uint64_t stfs_cache_dirs_missing(int root, const char *rel);
/* The cache's files walked and counted once (the temporary files of
 * killed writers removed), so that its first write does not wait for
 * that walk. */
void stfs_cache_count(struct stfs_cache *c);
/* len bytes about to be written in c, counted in the shared use (room
 * made for them first: a full cache evicted down to its low-water mark). */
void stfs_cache_reserve(struct stfs_cache *c, uint64_t len);
/* len bytes reserved are written (rc 0) or not (uncounted); freed bytes
 * (a file they replaced) uncounted; with now, the cache brought under
 * its size if it passed it. */
void stfs_cache_unreserve(struct stfs_cache *c, uint64_t len, int rc,
			  int now, uint64_t freed);
/* hlen bytes of hdr and len of buf to name in dir, unflushed, counted
 * (what it replaces uncounted): 0, or -errno (-ENOSPC: larger than
 * cache_size). */
int stfs_cache_put_small(struct stfs_cache *c, int dir, const char *name,
			 const void *hdr, size_t hlen, const void *buf,
			 size_t len);

/* ---- the cache directory (cachedir.c) ------------------------------------ */

/* The cache directory dir, made (0700, as mkdir -p) if need be and
 * create, opened and checked: a descriptor, or -errno with why. */
int stfs_cachedir_root(const char *dir, int create, char *why, size_t whysz);
/* The directory rel ("a/b/c", plain components) under the directory root,
 * each component opened without following a link and checked (made 0700
 * first with create): a descriptor, or -errno with why (shown names the
 * cache in it). */
int stfs_cachedir_opendir(int root, const char *shown, const char *rel,
			  int create, char *why, size_t whysz);
/* The file name in dir for reading, if it is a regular file of ours, not
 * writable by others, of exactly size bytes (UINT64_MAX: any size): a
 * descriptor, or -ENOENT. */
int stfs_cachedir_open_file(int dir, const char *name, uint64_t size);
/* A file of the cache being written: its temporary name, open, locked. */
struct stfs_cachedir_tmpf {
	int dir, fd;                    /* dir is the caller's */
	int flushed;                    /* set by whoever flushed fd */
	int keep;                       /* its pages stay in the page cache */
	int direct;                     /* asked: its bytes past hlen go with
					 * O_DIRECT where aligned (a block no
					 * reader wants in the page cache) */
	char name[64];
	char tmp[128];
};
/* hlen bytes of hdr (none if hlen is 0), then len bytes of buf, to name
 * in dir, staged: written to a 0600 temporary file, locked, not flushed:
 * 0 (publish t then), or -errno (nothing left).  With t->direct set by the
 * caller, hdr, buf and hlen 4 KiB aligned, the bytes are written past the
 * page cache (O_DIRECT; the unaligned tail and a file system that refuses
 * it through the page cache). */
int stfs_cachedir_stage(int dir, const char *name, const void *hdr,
			size_t hlen, const void *buf, size_t len,
			struct stfs_cachedir_tmpf *t);
/* A staged file renamed into place if rc is 0 (its pages dropped if it
 * was flushed, unless keep), else removed; closed either way: 0, or
 * -errno. */
int stfs_cachedir_publish(struct stfs_cachedir_tmpf *t, int rc);
/* len bytes of buf to name in dir: staged, flushed if durable, published:
 * 0, or -errno. */
int stfs_cachedir_put(int dir, const char *name, const void *buf,
		      size_t len, int durable);
/* name in dir, if a temporary file ("*.tmp.*"): removed if its writer is
 * gone (1), else 0 with its size in *size; -1 if not one. */
int stfs_cachedir_tmp(int dir, const char *name, uint64_t *size);

#endif

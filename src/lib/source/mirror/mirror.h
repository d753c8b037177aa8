/*
 * mirror.h: what the mirror room (mirror/) shares among its files: the
 * manifest of a mirror, its reader with limits and its writer
 * (manifest.c), and the signed S3 requests that `stfs mirror` writes the
 * bucket with (s3io.c).  The copy itself is mirror.c; the format is
 * docs/mirror.md.
 */
#ifndef STFS_MIRROR_H
#define STFS_MIRROR_H

#include <stddef.h>
#include <stdint.h>

#include "source.h"

struct stfs_remote;

struct stfs_auth;

/* ---- the manifest (manifest.c) ----------------------------------------- */

#define STFS_MIRROR_FORMAT "stfs-mirror"
#define STFS_MIRROR_VERSION 1
/* Where, under the mirror's prefix, the manifest and the receipts (one
 * manifest of one file each, written once that file is in) are. */
#define STFS_MIRROR_DIR ".stfs-mirror"
#define STFS_MIRROR_MANIFEST STFS_MIRROR_DIR "/manifest.json"
#define STFS_MIRROR_RECEIPTS STFS_MIRROR_DIR "/files/"
/* The limits of the reader: a manifest's bytes, its files, a string (but
 * a file's block sums, bounded by the manifest's bytes only). */
#define STFS_MANIFEST_MAX (64u << 20)
#define STFS_MANIFEST_FILES_MAX 100000
/* JSON values a manifest may hold (objects, arrays and the values in
 * them): a file's entry has a dozen, so a hostile one of millions of
 * empty arrays is refused before json-c builds it (gigabytes) */
#define STFS_MANIFEST_VALUES_MAX (16u * STFS_MANIFEST_FILES_MAX + 64)
#define STFS_MANIFEST_STR_MAX 4096
#define STFS_MANIFEST_DEPTH 6

/* One file of a mirror. */
struct stfs_mfile {
	char *path;             /* relative, as the repository has it */
	uint64_t size;
	char *origin_sum;       /* "sha256:HEX", "sha1-blob:HEX",
				 * "md5:HEX", or NULL: none published */
	char *origin_etag;      /* the origin's ETag, or NULL */
	char sha256[65];        /* of its bytes, lower-case hex */
	char *etag;             /* the mirror object's ETag at copy */
	uint32_t *crc;          /* CRC-32C of each block (block_size) */
	uint64_t nblocks;
};

struct stfs_manifest {
	char *origin;           /* the source without its version */
	char *revision;         /* the pinned version: a commit, or "" */
	size_t block;           /* bytes per block of crc[] */
	char *created;          /* UTC, ISO 8601 */
	int complete;           /* every file of the version is in f (no
				 * --include, --exclude): the listing may
				 * come from it */
	struct stfs_mfile *f;   /* sorted by path */
	size_t n;
};

/* Read a manifest: 0, or -EINVAL with why saying what is wrong (not
 * JSON, nesting past STFS_MANIFEST_DEPTH, another format or version, a
 * field missing or of the wrong type, a string not UTF-8, a path the
 * repository may not hold or given twice, a block size not a power of two from 64K to 64M, block
 * sums not one per block, past a limit above), -EFBIG past
 * STFS_MANIFEST_MAX bytes, -ENOMEM.  m is empty on failure. */
int stfs_manifest_parse(const char *json, size_t len,
			struct stfs_manifest *m, char *why, size_t whysz);
/* The manifest as JSON (malloc'd, *len bytes), or NULL: no memory. */
char *stfs_manifest_write(const struct stfs_manifest *m, size_t *len);
void stfs_manifest_free(struct stfs_manifest *m);
void stfs_mfile_free(struct stfs_mfile *f);
/* m's file at path, or NULL. */
const struct stfs_mfile *stfs_manifest_find(const struct stfs_manifest *m,
					    const char *path);

/* ---- the mirror as a mount reads it (tier.c) -------------------------- */

/* loc's origin as a manifest names it: its SOURCE less user, password,
 * query and (hf://) "@REVISION" (malloc'd), or NULL. */
char *stfs_mirror_origin(const struct stfs_location *loc);
/* With -o mirror= in loc's remote options: read the mirror's manifest and,
 * if it fits loc (the same origin, pinned version and block size), have
 * loc's remote read the files from it (logged either way).  0 (also when
 * the mirror is not used), or -ENOMEM. */
int stfs_mirror_attach(struct stfs_location *loc);
/* With -o mirror= in r's options, before a source is located: r's
 * mirror_list set, so that the locator of a pinned hf:// source may list
 * it from the manifest (read then, once: stfs_mirror_attach() uses it).
 * 0, or -ENOMEM. */
int stfs_mirror_prepare(struct stfs_remote *r);

/* ---- the mirror's keys (keys.c) ---------------------------------------- */

/* -o mirror_profile=, else STFS_MIRROR_AWS_* in the environment: ml (the
 * mirror's location) reads with those keys alone, not the chain's; with
 * neither, as it is.  0 or -errno with e (a profile that has no keys, a
 * key without its secret). */
int stfs_mirror_keys(struct stfs_remote *r, struct stfs_location *ml,
		     struct stfs_error *e);
/* Has the mirror keys of its own (-o mirror_profile=, or either of
 * STFS_MIRROR_AWS_ACCESS_KEY_ID and STFS_MIRROR_AWS_SECRET_ACCESS_KEY)?
 * Then its location is found with no credential chain run. */
int stfs_mirror_has_keys(const struct stfs_remote *r);

/* ---- signed S3 requests (s3io.c) --------------------------------------- */

/* A bucket prefix: base is its URL, ending in '/', auth what its
 * requests carry (signed with SigV4 when it has keys). */
struct stfs_s3io {
	char *base;
	struct stfs_auth *auth;
	unsigned connect_timeout_ms, stall_timeout_ms, retries;
};

/* An answer. */
struct stfs_s3ans {
	long status;
	int has_length;
	uint64_t length;
	char etag[256];
	char meta_sha256[80];   /* x-amz-meta-stfs-sha256 */
	char *body;             /* NUL-terminated (malloc'd), or NULL */
	size_t len;
};

/* method on the object key (relative to io->base, not escaped) with the
 * query (canonical: sorted, escaped) or "", extra header lines ("name:
 * value", lower-case x-amz-* names, signed), and a body: the answer in
 * *a (zeroed, or holding an earlier answer: freed first; a body of at
 * most max bytes kept).  Connection failures and 5xx
 * are retried.  0 with any status, or -errno with err saying why. */
int stfs_s3io_call(const struct stfs_s3io *io, const char *method,
		   const char *key, const char *query,
		   const char *const *hdrs, size_t nhdrs, const void *body,
		   size_t blen, size_t max, struct stfs_s3ans *a,
		   struct stfs_error *err);
void stfs_s3ans_free(struct stfs_s3ans *a);

#endif

/*
 * format.h: the format layer's declarations for the layers above it
 * (never installed): error filling, rule names, memory hints, hashing, and
 * the JSON writer.  Knows nothing of sources, trees or FUSE.
 */
#ifndef STFS_FORMAT_H
#define STFS_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "stfs/stfs.h"

#if defined(__GNUC__)
#define STFS_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define STFS_PRINTF(a, b)
#endif

/* Fill err (if not NULL) and return code.  The rule is appended to msg. */
int stfs_fail(struct stfs_error *err, int code, const char *rule,
	      uint64_t offset, const char *fmt, ...) STFS_PRINTF(5, 6);

/* The same for a failed system call: "what: strerror(-code)". */
int stfs_fail_sys(struct stfs_error *err, int code, const char *what);

/* Rule identifiers, as in RULES.md. */
#define R1 "R1 size-field"
#define R2 "R2 header-limit"
#define R3 "R3 header-bounds"
#define R4 "R4 utf8"
#define R5 "R5 json-syntax"
#define R6 "R6 json-toplevel"
#define R7 "R7 json-whitespace"
#define R8 "R8 json-depth"
#define R9 "R9 metadata"
#define R10 "R10 tensorinfo-fields"
#define R11 "R11 dtype"
#define R12 "R12 shape-type"
#define R13 "R13 offsets-type"
#define R14 "R14 duplicate-keys"
#define R15 "R15 offsets-contiguous"
#define R16 "R16 shape-overflow"
#define R17 "R17 bits-overflow"
#define R18 "R18 subbyte-whole"
#define R19 "R19 size-match"
#define R20 "R20 buffer-complete"

/* JSON nesting the reference accepts (serde_json's limit is 128). */
#define STFS_JSON_DEPTH_MAX 127

/*
 * A hint for a large buffer just allocated and not yet touched: back it
 * with transparent huge pages where the kernel allows (madvise mode), and
 * with fill (for a buffer that will be written whole) fault it in with one
 * call.  A 100 MB header otherwise costs some 60,000 page faults, each a
 * trap, to parse.  Harmless when refused.
 */
void stfs_hint_huge(void *p, size_t n, int fill);

/* 64-bit FNV-1a (text.c): shortened long names in the tree (model/) and
 * the names of cache files (source/cache.c). */
uint64_t stfs_hash64(const char *s, size_t len);


/* Compare two length-counted byte strings as memcmp, shorter first. */
int stfs_bytes_cmp(const char *a, size_t alen, const char *b, size_t blen);

/*
 * A JSON writer into a growing buffer: always valid JSON out, whatever the
 * bytes in (control bytes and NUL escaped, invalid UTF-8 written as
 * U+FFFD).  Errors (no memory, nesting past 64) stick; stfs_jw_finish
 * then returns NULL.  pretty: two-space indents, one member a line.
 */
struct stfs_jw {
	char *buf;
	size_t len, cap;
	int failed;
	int pretty;
	int depth;
	unsigned char first[64];   /* no member written yet at this depth */
	int after_key;
};

void stfs_jw_init(struct stfs_jw *w, int pretty);
void stfs_jw_begin(struct stfs_jw *w, char open);   /* '{' or '[' */
void stfs_jw_end(struct stfs_jw *w, char close);    /* '}' or ']' */
void stfs_jw_key(struct stfs_jw *w, const char *s, size_t len);
void stfs_jw_str(struct stfs_jw *w, const char *s, size_t len);
void stfs_jw_cstr(struct stfs_jw *w, const char *s);
void stfs_jw_u64(struct stfs_jw *w, uint64_t v);
void stfs_jw_bool(struct stfs_jw *w, int v);
void stfs_jw_null(struct stfs_jw *w);
void stfs_jw_u64s(struct stfs_jw *w, const uint64_t *v, size_t n);
/* "dtype", "shape" and "data_offsets" of one tensor, as in a header. */
void stfs_jw_tensor_fields(struct stfs_jw *w, enum stfs_dtype dt,
			   const uint64_t *shape, size_t rank, uint64_t begin,
			   uint64_t end);
/* A header's entry: "name":{"dtype":..,"shape":[..],"data_offsets":[..]}. */
void stfs_jw_tensor(struct stfs_jw *w, const char *name, size_t len,
		    enum stfs_dtype dt, const uint64_t *shape, size_t rank,
		    uint64_t begin, uint64_t end);
/* A value already written as JSON (len bytes of valid JSON text). */
void stfs_jw_raw(struct stfs_jw *w, const char *json, size_t len);
/* The text (NUL-terminated, *len bytes; the caller frees), or NULL if
 * anything failed (the buffer is freed then). */
char *stfs_jw_finish(struct stfs_jw *w, size_t *len);

#endif

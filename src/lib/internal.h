/*
 * internal.h: declarations shared by libstfs's own files, never installed.
 */
#ifndef STFS_INTERNAL_H
#define STFS_INTERNAL_H

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

/* 64-bit FNV-1a, for shortened long names. */
uint64_t stfs_hash64(const char *s, size_t len);

#endif

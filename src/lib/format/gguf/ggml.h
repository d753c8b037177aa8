/*
 * ggml.h: GGUF's tensor types (ggml.c) and its reader (gguf.c), for the
 * model layer's format dispatch and the fuzzer (never installed).
 */
#ifndef STFS_GGML_H
#define STFS_GGML_H

#include <stdint.h>

#include "format.h"

struct stfs_ggml_type {
	const char *name;         /* "Q4_K" */
	unsigned blck;            /* elements per block (1: plain) */
	unsigned bytes;           /* bytes per block */
	enum stfs_dtype dtype;    /* STFS_DTYPE_NONE: quantized */
	unsigned quant;           /* STFS_Q_*, or 0 */
};

/* The type of ggml id, or NULL for an id GGUF does not define. */
const struct stfs_ggml_type *stfs_ggml_type(uint32_t id);

/* GGUF limits (docs/formats.md). */
#define STFS_GGUF_HEADER_MAX (1ULL << 28)   /* bytes of header read */
#define STFS_GGUF_KV_MAX (1u << 20)         /* key-values */
#define STFS_GGUF_ARRAY_MAX (1ULL << 24)    /* elements in one array */
#define STFS_GGUF_JSON_MAX (1ULL << 27)     /* the key-values as JSON */
#define STFS_GGUF_STRING_MAX (1ULL << 26)   /* bytes of one string */
#define STFS_GGUF_SHOWN_MAX (1u << 16)      /* bytes of a string value
					     * shown; the rest is cut */
#define STFS_GGUF_NAME_MAX 65535            /* bytes of a key or a
					     * tensor name (the spec's) */
#define STFS_GGUF_DEPTH_MAX 8               /* arrays in arrays */
#define STFS_GGUF_DIMS_MAX 4                /* GGML_MAX_DIMS */

/* stfs_gguf_detect() and stfs_gguf_read(), the format's entry points,
 * are declared in format.h (*header_len: the data section's offset). */

#endif

/*
 * stfs.h: the public API of libstfs, the safetensors format library.
 *
 * libstfs reads safetensors files exactly as the reference reader (the
 * huggingface `safetensors` crate) does: a strict, length-counted header
 * parser that applies rules R1-R26 of the format in the reference's order,
 * the dtype table, the mapping from tensor names to filesystem paths, and
 * the "model" that joins one file or a set of shards into one tree.
 *
 * It knows nothing of FUSE, and no JSON library type appears here.
 *
 * Conventions: functions return 0 (or a non-negative count) on success and a
 * negative errno on failure.  Functions that can fail because of the input
 * also fill a caller-owned struct stfs_error.  Every *_open / *_parse /
 * *_build has a matching *_close / *_free, which accepts NULL.
 */
#ifndef STFS_STFS_H
#define STFS_STFS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* libstfs.so exports exactly the functions declared here. */
#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility push(default)
#endif

#define STFS_VERSION "0.1.0"

/* R2: the largest header the reference accepts, in bytes. */
#define STFS_HEADER_MAX 100000000ULL

/* ---- errors --------------------------------------------------------- */

#define STFS_NO_OFFSET UINT64_MAX

/*
 * What went wrong with an input, for a message such as
 *   stfs: m.safetensors: tensor "w": data_offsets [0,12) but F32 [2,2]
 *   needs 16 bytes (R19 size-match)
 * msg never contains raw control bytes: tensor names are escaped in it.
 */
struct stfs_error {
	int code;          /* negative errno: -EINVAL for bad input */
	const char *rule;  /* "R19 size-match", or NULL when no rule applies */
	uint64_t offset;   /* byte offset in the source file, or STFS_NO_OFFSET */
	char msg[512];     /* full human-readable text, rule included */
};

/* ---- dtypes --------------------------------------------------------- */

enum stfs_dtype {
	STFS_DTYPE_BOOL,
	STFS_DTYPE_F4,
	STFS_DTYPE_F6_E2M3,
	STFS_DTYPE_F6_E3M2,
	STFS_DTYPE_U8,
	STFS_DTYPE_I8,
	STFS_DTYPE_F8_E5M2,
	STFS_DTYPE_F8_E4M3,
	STFS_DTYPE_F8_E8M0,
	STFS_DTYPE_F8_E4M3FNUZ,
	STFS_DTYPE_F8_E5M2FNUZ,
	STFS_DTYPE_I16,
	STFS_DTYPE_U16,
	STFS_DTYPE_F16,
	STFS_DTYPE_BF16,
	STFS_DTYPE_I32,
	STFS_DTYPE_U32,
	STFS_DTYPE_F32,
	STFS_DTYPE_C64,
	STFS_DTYPE_F64,
	STFS_DTYPE_I64,
	STFS_DTYPE_U64,
	STFS_DTYPE_COUNT
};

/* The header spelling ("BF16"), or NULL for an out-of-range value. */
const char *stfs_dtype_name(enum stfs_dtype dt);
/* Bits per element (4, 6, 8, 16, 32 or 64), or 0 for an out-of-range value. */
unsigned stfs_dtype_bits(enum stfs_dtype dt);
/* Exact, case-sensitive, length-counted lookup: 0, or -EINVAL if unknown. */
int stfs_dtype_from_name(const char *s, size_t len, enum stfs_dtype *out);

/* ---- header --------------------------------------------------------- */

/* One tensor.  Strings are length-counted and may contain NUL bytes. */
struct stfs_tensor {
	const char *name;      /* the unescaped name, NUL-terminated too */
	size_t name_len;
	enum stfs_dtype dtype;
	size_t rank;
	const uint64_t *shape; /* rank entries; NULL when rank is 0 */
	uint64_t begin, end;   /* data_offsets, relative to the data section */
};

/* One __metadata__ entry (unescaped, NUL-terminated too). */
struct stfs_meta {
	const char *key;
	size_t key_len;
	const char *value;
	size_t value_len;
};

struct stfs_header;

/* Pass as data_len to skip R20 (the "buffer complete" check). */
#define STFS_DATA_LEN_ANY UINT64_MAX

/*
 * Parse and validate the N header bytes `buf` (R4-R19, in the reference's
 * order) and, unless data_len is STFS_DATA_LEN_ANY, check that the tensors
 * exactly fill a data section of data_len bytes (R20).  `base` is the file
 * offset of buf[0] (8 for a file), used in error offsets.
 * On success *out is a new header the caller releases with
 * stfs_header_free(); it does not point into buf.
 */
int stfs_header_parse(const char *buf, size_t len, uint64_t data_len,
		      uint64_t base, struct stfs_header **out,
		      struct stfs_error *err);
void stfs_header_free(struct stfs_header *h);

/* Tensors, sorted by data_offsets (file order); duplicates resolved. */
size_t stfs_header_count(const struct stfs_header *h);
const struct stfs_tensor *stfs_header_tensor(const struct stfs_header *h,
					     size_t i);
/* The same tensors in name order (bytes, as memcmp). */
const struct stfs_tensor *stfs_header_tensor_by_name(
	const struct stfs_header *h, size_t i);
/* 1 if __metadata__ was present and not null. */
int stfs_header_has_metadata(const struct stfs_header *h);
/* __metadata__ entries, sorted by key bytes, duplicates resolved. */
size_t stfs_header_meta_count(const struct stfs_header *h);
const struct stfs_meta *stfs_header_meta(const struct stfs_header *h,
					 size_t i);
/* Bytes of the data section the tensors use (the last end). */
uint64_t stfs_header_data_len(const struct stfs_header *h);

/* Element count of a validated tensor (cannot overflow once parsed). */
uint64_t stfs_tensor_elements(const struct stfs_tensor *t);

/* Strict UTF-8 check (R4): 1 if valid, else 0 and *bad = offending byte. */
int stfs_utf8_valid(const char *s, size_t len, size_t *bad);

/* ---- one safetensors file ------------------------------------------- */

/*
 * An open, validated file.  The whole file is mapped read-only; nothing in
 * the data section is read until someone touches the mapping.  The file
 * descriptor is closed after mapping, so a mount of thousands of shards
 * does not hold thousands of descriptors.  Fields are read-only.
 */
struct stfs_file {
	char *path;               /* as given to stfs_file_open */
	uint64_t size;            /* file size at open */
	int64_t mtime_sec;        /* modification time at open */
	long mtime_nsec;
	uint64_t header_len;      /* N */
	uint64_t data_start;      /* 8 + N */
	const unsigned char *map; /* size bytes, or NULL when size is 0 */
	struct stfs_header *header;
};

int stfs_file_open(const char *path, struct stfs_file **out,
		   struct stfs_error *err);
void stfs_file_close(struct stfs_file *f);

/* ---- names -> paths ------------------------------------------------- */

/*
 * The mapping, documented in docs/naming.md:
 *  - the name is split on '.' into path components (unless STFS_TREE_FLAT);
 *  - in a component, the bytes '%', '/', 0x00-0x1f and 0x7f are written
 *    %XX (upper-case hex); so is a '.' in flat mode when the whole
 *    component is "." or "..", and any '.' past STFS_MAX_DEPTH;
 *  - an empty component is written "%";
 *  - a component longer than 255 bytes keeps its first bytes and ends in
 *    "%h" and 16 hex digits of a hash of the whole component;
 *  - a tensor whose path is also a directory is the file "%self" in it;
 *  - names that begin with '%' and a lower-case letter are reserved
 *    (STFS_HEADER_FILE at the root).  Should two tensors still meet on one
 *    path (only a hash collision can do it) the later in name order gets a
 *    "%nK" suffix.
 */
#define STFS_HEADER_FILE "%header.json"
#define STFS_SELF_NAME "%self"
#define STFS_NAME_MAX 255
#define STFS_MAX_DEPTH 128

#define STFS_TREE_FLAT 1u
#define STFS_TREE_NPY 2u   /* add NAME.npy views (and .f32.npy with F32) */
#define STFS_TREE_F32 4u   /* add NAME.f32 float32 views */

/* Escape one component of a name into out (STFS_NAME_MAX + 1 bytes) and
 * return its length (1..255).  With esc_dots every '.' is escaped too. */
size_t stfs_name_component(const char *s, size_t len, int esc_dots,
			   char *out);

#define STFS_NODE_DIR UINT32_MAX

/* One directory entry.  Node 0 is the root. */
struct stfs_node {
	uint32_t parent;
	uint32_t entry;       /* caller's index, or STFS_NODE_DIR */
	uint32_t first;       /* dirs: index of first child in tree.children */
	uint32_t count;       /* dirs: number of children */
	uint32_t subdirs;     /* dirs: how many children are dirs */
	uint16_t name_len;
	uint16_t view;        /* files: enum stfs_view */
	const char *name;     /* escaped, NUL-terminated; "" for the root */
};

struct stfs_tree {
	struct stfs_node *nodes;
	uint32_t nnodes;
	uint32_t *children;   /* per dir, sorted by name (memcmp) */
	uint32_t *entry_node; /* caller's index -> node */
	char *names;          /* storage for node names */
};

/* A name to place, e.g. a tensor's, and the views it gets. */
struct stfs_name {
	const char *s;
	size_t len;
	unsigned views;       /* bit 1 << v for each view v besides RAW */
};

/*
 * Build the tree for n names (n < 2^31).  Deterministic: depends only on the
 * set of names, never on their order.  Each name's views are files beside
 * it, named after its own file plus the view's suffix (see docs/views.md).
 * Release with stfs_tree_free().
 */
int stfs_tree_build(struct stfs_tree *t, const struct stfs_name *names,
		    size_t n, unsigned flags, struct stfs_error *err);
void stfs_tree_free(struct stfs_tree *t);
/* Child of dir called name, or -ENOENT / -ENOTDIR.  O(log n). */
int64_t stfs_tree_lookup(const struct stfs_tree *t, uint32_t dir,
			 const char *name, size_t len);
/* "a/b/c" for a node (malloc'd, caller frees), or NULL on ENOMEM. */
char *stfs_tree_path(const struct stfs_tree *t, uint32_t node);

/* ---- views: the same tensor in forms other tools read ---------------- */

enum stfs_view {
	STFS_VIEW_RAW,        /* the tensor's own bytes */
	STFS_VIEW_NPY,        /* NPY v1.0 header + the raw bytes */
	STFS_VIEW_F32,        /* the values as little-endian float32 */
	STFS_VIEW_F32_NPY,    /* NPY header + the float32 values */
	STFS_VIEW_COUNT
};

/* "", ".npy", ".f32", ".f32.npy"; NULL for an out-of-range value. */
const char *stfs_view_suffix(enum stfs_view v);
/* The views a tensor of dtype dt gets under STFS_TREE_NPY / _F32 flags,
 * as a mask of 1 << view (RAW not included). */
unsigned stfs_views_for(enum stfs_dtype dt, unsigned flags);
/* numpy's descr for dt ("<f4", "|b1"), or NULL if numpy has no such type. */
const char *stfs_npy_descr(enum stfs_dtype dt);
/* 1 if dt converts exactly to float32 (BF16, F16, the F8 formats). */
int stfs_dtype_to_f32(enum stfs_dtype dt);
/*
 * Write the NPY header for descr and shape into out (outsz bytes): magic,
 * version, length, the dict, padded with spaces and '\n' so the data starts
 * at a multiple of 64.  Returns the header's length; if that is more than
 * outsz nothing is written.  Version 1.0, or 2.0 past 65535 bytes.
 */
size_t stfs_npy_header(const char *descr, const uint64_t *shape, size_t rank,
		       char *out, size_t outsz);
/* The view's dtype: F32 for the .f32 views, else the tensor's. */
enum stfs_dtype stfs_view_dtype(const struct stfs_tensor *t, enum stfs_view v);
/* The NPY header of view v (NPY or F32_NPY) of t into out; as
 * stfs_npy_header. */
size_t stfs_view_npy_header(const struct stfs_tensor *t, enum stfs_view v,
			    char *out, size_t outsz);
/* Size in bytes of view v of t; *data_start (if not NULL) gets the offset
 * where the array data begins (the NPY header's length, or 0). */
uint64_t stfs_view_size(const struct stfs_tensor *t, enum stfs_view v,
			uint64_t *data_start);
/* Convert n elements of dtype dt (stfs_dtype_to_f32) at src to float32.
 * Exact: every value of these formats is a float32.  NaNs stay NaN (quiet),
 * infinities and signed zeros are kept. */
void stfs_convert_f32(enum stfs_dtype dt, const void *src, size_t n,
		      float *dst);

/* ---- a model: one file or a set of shards, as one tree --------------- */

/* One tensor of the model and the shard it lives in. */
struct stfs_entry {
	const struct stfs_tensor *t;
	uint32_t file;            /* index into model->files */
};

struct stfs_model {
	char *source;             /* as given */
	size_t nfiles;
	struct stfs_file **files;
	char **file_names;        /* shard names relative to the source */
	int sharded;              /* source was a directory or an index */
	size_t nentries;
	struct stfs_entry *entries; /* sorted by name bytes */
	struct stfs_tree tree;
	char *index;              /* the reserved header file's bytes */
	size_t index_len;
	int index_owned;          /* index was allocated (not in a map) */
};

/*
 * Open SOURCE (a .safetensors file; see docs for directories and indexes),
 * validate everything, and build the tree.  flags: STFS_TREE_FLAT.
 * Warnings that do not refuse the source go to warn(ctx, text) if set.
 */
int stfs_model_open(const char *source, unsigned flags,
		    void (*warn)(void *ctx, const char *text), void *ctx,
		    struct stfs_model **out, struct stfs_error *err);
void stfs_model_close(struct stfs_model *m);

/* Absolute offset of an entry's first byte in its shard. */
uint64_t stfs_entry_file_offset(const struct stfs_model *m,
				const struct stfs_entry *e);

/* ---- small helpers shared by the front ends -------------------------- */

/* Write s as printable text into out (size outsz, always terminated):
 * control bytes, '"' and '\\' become \xNN / \" / \\, and long input is cut
 * with "...".  Returns out. */
char *stfs_quote(const char *s, size_t len, char *out, size_t outsz);
/* "[4096,4096]" for a shape, into out; returns bytes needed (snprintf). */
size_t stfs_shape_str(const struct stfs_tensor *t, char *out, size_t outsz);

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* STFS_STFS_H */

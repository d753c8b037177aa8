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
 * Layers (docs/design.md): format (header, dtypes) < byte sources < content
 * (segments, views) < model (files, shards, tree).  Every handle is opaque,
 * so where the bytes come from is not part of the ABI.
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
#include <sys/types.h>
#include <sys/uio.h>

#include "stfs/remote.h"

#ifdef __cplusplus
extern "C" {
#endif

/* libstfs.so exports exactly the functions declared here and in the
 * other headers of include/stfs/ (remote.h, metrics.h, mirror.h). */
#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility push(default)
#endif

#define STFS_VERSION "0.2.0"

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
	STFS_DTYPE_COUNT,
	/* A tensor of another format whose type safetensors cannot name (a
	 * GGUF Q4_K): its own type is in tensor->foreign->type. */
	STFS_DTYPE_NONE = STFS_DTYPE_COUNT
};

/* The header spelling ("BF16"), or NULL for an out-of-range value. */
const char *stfs_dtype_name(enum stfs_dtype dt);
/* Bits per element (4, 6, 8, 16, 32 or 64), or 0 for an out-of-range value. */
unsigned stfs_dtype_bits(enum stfs_dtype dt);
/* Exact, case-sensitive, length-counted lookup: 0, or -EINVAL if unknown. */
int stfs_dtype_from_name(const char *s, size_t len, enum stfs_dtype *out);

/* ---- header --------------------------------------------------------- */

/*
 * What a tensor read from another format (GGUF, PyTorch; docs/formats.md)
 * carries besides dtype and shape.  For such a tensor begin and end are
 * absolute offsets in its file (the file's data_start is 0).
 */
struct stfs_foreign {
	const char *format;       /* "gguf", "pytorch" */
	const char *type;         /* the format's own type name ("Q4_K") */
	unsigned quant;           /* nonzero: a block-quantized type whose
				   * .f32 view dequantizes (dtype NONE) */
	const uint64_t *strides;  /* a view: rank strides in elements, the
				   * first element at begin, gathered on
				   * read; NULL for a contiguous tensor */
	unsigned elem_bytes;      /* a view's element size in bytes (its
				   * dtype's, or its own type's: 16 for
				   * torch.complex128) */
};

/* One tensor.  Strings are length-counted and may contain NUL bytes. */
struct stfs_tensor {
	const char *name;      /* the unescaped name, NUL-terminated too */
	size_t name_len;
	enum stfs_dtype dtype;
	size_t rank;
	const uint64_t *shape; /* rank entries; NULL when rank is 0 */
	uint64_t begin, end;   /* data_offsets, relative to the data section */
	const struct stfs_foreign *foreign; /* NULL for safetensors */
};

/* How a key-value of another format too long to show whole ends (a GGUF
 * string past 64 KiB): "[... cut by stfs: N bytes in all, at byte OFF of
 * the file]", within the JSON string. */
#define STFS_CUT_MARK "[... cut by stfs: "

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
/* Bytes of its raw file: end - begin, or for a strided view its
 * elements times the element size. */
uint64_t stfs_tensor_bytes(const struct stfs_tensor *t);

/* Its type's name: the dtype's ("BF16"), or for a tensor of another
 * format that safetensors cannot name, the format's own ("Q4_K"). */
const char *stfs_tensor_type(const struct stfs_tensor *t);

/* The format a header was read from: "safetensors", "gguf", "pytorch". */
const char *stfs_header_format(const struct stfs_header *h);
/* Another format's key-values (GGUF metadata, PyTorch plain values),
 * sorted by key; each value is JSON text. */
size_t stfs_header_kv_count(const struct stfs_header *h);
const struct stfs_meta *stfs_header_kv(const struct stfs_header *h,
				       size_t i);
/* What a foreign file holds that the tree leaves out (an object of a
 * class, a tensor of an unknown type), one line each: count and line i. */
size_t stfs_header_skipped_count(const struct stfs_header *h);
const char *stfs_header_skipped(const struct stfs_header *h, size_t i);

/* Strict UTF-8 check (R4): 1 if valid, else 0 and *bad = offending byte. */
int stfs_utf8_valid(const char *s, size_t len, size_t *bad);

/* ---- byte sources ----------------------------------------------------- */

/*
 * A byte source is where a file's bytes come from: today a local file,
 * later a URL or an object.  It has a size and an identity fixed when it
 * is opened, and reads at any offset.  A source that has a direct map of
 * its bytes (a local file) exposes it, so readers can reply from it with
 * no copy; reads never fault on lost bytes (a file truncated under it
 * gives -EIO, never SIGBUS).  Sources are safe to read from any thread.
 */
struct stfs_source;

struct stfs_source_info {
	uint64_t size;          /* bytes, at open */
	int64_t mtime_sec;      /* modification time at open, or 0 */
	long mtime_nsec;
	const char *etag;       /* an opaque version tag, or NULL */
	const char *url;        /* a remote source's URL, or NULL */
};

/* Remote sources (http(s)://, hf://, s3://): their options, progress and
 * statistics are in stfs/remote.h, included above. */

/* SOURCE as it may be shown (messages, logs, the mount table): a URL
 * without the user, password and query it may carry (the query of a
 * presigned URL is its signature).  A copy to free, or NULL when out of
 * memory. */
char *stfs_source_shown(const char *source);
/* Is SOURCE read over the network: an http://, https://, hf:// or s3://
 * URL, the scheme in any case?  1 or 0. */
int stfs_source_is_remote(const char *source);

/* Open the local file at path (regular files only; a FIFO or device is
 * refused without blocking on it).  No data is read. */
int stfs_source_open_file(const char *path, struct stfs_source **out,
			  struct stfs_error *err);
void stfs_source_close(struct stfs_source *s);
void stfs_source_info(const struct stfs_source *s,
		      struct stfs_source_info *out);
/* What the service a source comes from says of it (hf://: the repo, the
 * commit its revision resolved to, and the file's ETag on the Hub); NULL
 * for what it does not say, and for local files and plain URLs. */
enum stfs_origin_field {
	STFS_ORIGIN_REPO,
	STFS_ORIGIN_REVISION,
	STFS_ORIGIN_ETAG,
	STFS_ORIGIN_COUNT
};
const char *stfs_source_origin(const struct stfs_source *s,
			       enum stfs_origin_field f);
/* The source's name, for messages ("/m/a.safetensors"). */
const char *stfs_source_name(const struct stfs_source *s);
/* Read exactly len bytes at off into buf: 0, or -errno (-EIO for bytes
 * that are gone). */
int stfs_source_read(struct stfs_source *s, void *buf, size_t len,
		     uint64_t off);
/* The source's bytes mapped in memory (size bytes), or NULL when it has
 * no such map.  Touching a lost page of it may fault: hand it to the
 * kernel (a reply to /dev/fuse), which turns that into EFAULT. */
const void *stfs_source_map(const struct stfs_source *s);

/* ---- one safetensors file ------------------------------------------- */

/*
 * An open, validated safetensors file over a byte source.  Opening reads
 * the 8-byte length and the header, nothing else: R1-R3 are checked on the
 * source's size before a header byte is read.
 */
struct stfs_file;

/* Open and validate the file at path. */
int stfs_file_open(const char *path, struct stfs_file **out,
		   struct stfs_error *err);
/* Validate the safetensors file held by src, which the file takes over
 * (closed on failure too). */
int stfs_file_open_source(struct stfs_source *src, struct stfs_file **out,
			  struct stfs_error *err);
void stfs_file_close(struct stfs_file *f);
const struct stfs_header *stfs_file_header(const struct stfs_file *f);
struct stfs_source *stfs_file_source(const struct stfs_file *f);
uint64_t stfs_file_size(const struct stfs_file *f);
uint64_t stfs_file_header_len(const struct stfs_file *f);   /* N */
uint64_t stfs_file_data_start(const struct stfs_file *f);   /* 8 + N */
/* The format found in the file's first bytes (never its name):
 * "safetensors", "gguf", "pytorch" (docs/formats.md).  For the others the
 * header is a table built from the format's own records, data_start is 0
 * and header_len is the bytes the format's header takes. */
const char *stfs_file_format(const struct stfs_file *f);

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

/* Flags of stfs_model_open(). */
#define STFS_TREE_FLAT 1u
#define STFS_TREE_NPY 2u   /* add NAME.npy views (and .f32.npy with F32) */
#define STFS_TREE_F32 4u   /* add NAME.f32 float32 views (and a
			    * STFS_VIRTUAL_F32 file in every directory) */
#define STFS_TREE_LIST_VIRTUAL 8u  /* list the virtual files in directories
				    * (they are always reachable by name) */
#define STFS_TREE_REPO 16u /* the repository at the root of the tree and
			    * the tensors under STFS_TENSORS_DIR (-o repo) */

/*
 * The repository (docs/remote.md): every file of the source under its
 * own path, in the reserved directory STFS_REPO_DIR at the root (or, with
 * STFS_TREE_REPO, at the root itself).
 */
#define STFS_REPO_DIR "%repo"
#define STFS_TENSORS_DIR "%tensors"

/*
 * Virtual safetensors files, in every directory (docs/virtual.md): the
 * tensors under it as one valid safetensors file, generated on first use,
 * its data served from the sources' ranges.  FULL keeps the tensors' full
 * names; STRIPPED (not in the root) drops the directory's own components
 * from them; F32 (with STFS_TREE_F32) is FULL with BF16, F16 and F8
 * tensors converted to F32.
 */
#define STFS_VIRTUAL_FULL "%model.safetensors"
#define STFS_VIRTUAL_STRIPPED "%model.stripped.safetensors"
#define STFS_VIRTUAL_F32 "%model.f32.safetensors"

/* Escape one component of a name into out (STFS_NAME_MAX + 1 bytes) and
 * return its length (1..255).  With esc_dots every '.' is escaped too. */
size_t stfs_name_component(const char *s, size_t len, int esc_dots,
			   char *out);

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
/* The same for tensor t: a block-quantized tensor of another format gets
 * the .f32 views (dequantized) when content/dequant.c knows its blocks. */
unsigned stfs_tensor_views(const struct stfs_tensor *t, unsigned flags);
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

struct stfs_model;

/*
 * Open SOURCE (a .safetensors file, a directory of shards or a
 * *.safetensors.index.json; docs/naming.md and README), validate
 * everything, and build the tree.  flags: STFS_TREE_*.  Warnings that do
 * not refuse the source go to warn(ctx, text) if set.
 */
int stfs_model_open(const char *source, unsigned flags,
		    void (*warn)(void *ctx, const char *text), void *ctx,
		    struct stfs_model **out, struct stfs_error *err);

/* What stfs_model_open_opts() takes. */
struct stfs_model_opts {
	unsigned flags;                 /* STFS_TREE_* */
	/* Selection: shell globs (fnmatch(3), no special '/' or '.') on
	 * tensor names.  A tensor is kept if it matches an include (or there
	 * are none) and no exclude; a pattern that matches no tensor of the
	 * source is an error. */
	const char *const *include;
	size_t ninclude;
	const char *const *exclude;
	size_t nexclude;
	void (*warn)(void *ctx, const char *text);
	void *ctx;
	/* The options of its remote sources, or NULL: the defaults but no
	 * cache (and no log); the caller keeps them. */
	const struct stfs_remote_opts *remote;
	/* The repository's files to show (fnmatch(3) globs on their paths,
	 * '*' matching '/' too; none: every file); one that matches no file
	 * is an error. */
	const char *const *files;
	size_t nfiles;
};

/* stfs_model_open() with a selection of tensors. */
int stfs_model_open_opts(const char *source, const struct stfs_model_opts *o,
			 struct stfs_model **out, struct stfs_error *err);
void stfs_model_close(struct stfs_model *m);

/* SOURCE as given, and its canonical form (an absolute path). */
const char *stfs_model_source(const struct stfs_model *m);
const char *stfs_model_canonical(const struct stfs_model *m);
/* The remote layer of its sources (statistics), never NULL. */
const struct stfs_remote *stfs_model_remote(const struct stfs_model *m);
/* The size of the blocks its remote files are fetched and cached in, the
 * size reads are best made in (st_blksize); 0 for a source on a local
 * disk. */
size_t stfs_model_block_size(const struct stfs_model *m);
/* 1 if the source was a directory or an index (names files in xattrs). */
int stfs_model_sharded(const struct stfs_model *m);

/* The files (shards), in name order, and their names relative to the
 * source's directory. */
size_t stfs_model_file_count(const struct stfs_model *m);
const struct stfs_file *stfs_model_file(const struct stfs_model *m,
					size_t i);
const char *stfs_model_file_name(const struct stfs_model *m, size_t i);

/* The tensors, in name order (bytes, as memcmp). */
size_t stfs_model_tensor_count(const struct stfs_model *m);
const struct stfs_tensor *stfs_model_tensor(const struct stfs_model *m,
					    size_t i);
/* The file tensor i lives in, and the absolute offset of its first byte
 * there. */
size_t stfs_model_tensor_file(const struct stfs_model *m, size_t i);
uint64_t stfs_model_tensor_offset(const struct stfs_model *m, size_t i);
/* "model/layers/0/weight": tensor i's path in the tree (malloc'd). */
char *stfs_model_tensor_path(const struct stfs_model *m, size_t i);
/* The __metadata__ entries every file carries with the same value, sorted
 * by key. */
size_t stfs_model_meta_count(const struct stfs_model *m);
const struct stfs_meta *stfs_model_meta(const struct stfs_model *m,
					size_t i);

/* Why %model.safetensors leaves tensor t out (a tensor of another format
 * whose type safetensors cannot name), as text; NULL if it does not. */
const char *stfs_model_left_out_why(const struct stfs_tensor *t);

/* The inspect document (docs/inspect-json.md) as pretty JSON text, with
 * each tensor's views if views: malloc'd, *len bytes, or NULL (ENOMEM). */
char *stfs_model_json(const struct stfs_model *m, int views, size_t *len);

/* ---- a warm of the cache: `stfs prefetch` (model/warm.c) ------------- */

struct stfs_warm;

enum stfs_warm_state {
	STFS_WARM_IDLE,         /* none asked for */
	STFS_WARM_WARMING,
	STFS_WARM_DONE,         /* every block asked for is in the cache */
	STFS_WARM_FAILED,       /* some could not be fetched: error says */
};

/* What to warm: shell globs (fnmatch(3), '*' matches '/' too) on tensor
 * paths in the tree (a view's name names its tensor) and on the files'
 * names (a shard); none: every file whole.  id: the asker's number for
 * it, given back in the status. */
struct stfs_warm_sel {
	const char *const *include;
	size_t ninclude;
	const char *const *exclude;
	size_t nexclude;
	unsigned id;
};

struct stfs_warm_status {
	enum stfs_warm_state state;
	unsigned id;
	int local;                      /* nothing remote to warm */
	uint64_t bytes_total;           /* of the blocks asked for */
	uint64_t bytes_done;            /* of them in the cache */
	size_t files_total, files_done;
	uint64_t failed_blocks;
	uint64_t started_ms, elapsed_ms;
	char error[512];                /* the last failure, naming its file */
};

/* Start warming the cache of m's remote files with what sel names, on a
 * thread of its own: 0 with *out (a warm with nothing remote to fetch is
 * done at once, local set); or -errno with err: -ENOENT (a pattern names
 * nothing), -EFBIG (more than the cache's size limit: the numbers and
 * the option), -ENOSPC (no cache).  Start it in the process that will
 * serve (after the daemon forked). */
int stfs_warm_start(struct stfs_model *m, const struct stfs_warm_sel *sel,
		    struct stfs_warm **out, struct stfs_error *err);
void stfs_warm_status(struct stfs_warm *w, struct stfs_warm_status *st);
/* 1 while it is warming. */
int stfs_warm_busy(struct stfs_warm *w);
/* Stop it (the blocks in flight end first) and free it; before the model
 * is closed. */
void stfs_warm_free(struct stfs_warm *w);

/* ---- the tree: every directory and file of a mount ------------------- */

/* Node 0 is the root.  Nodes never change while the model is open. */
enum stfs_node_kind {
	STFS_NODE_KIND_DIR,
	STFS_NODE_KIND_TENSOR,    /* a tensor, or one of its views */
	STFS_NODE_KIND_HEADER,    /* STFS_HEADER_FILE */
	STFS_NODE_KIND_VIRTUAL,   /* a virtual safetensors file */
	STFS_NODE_KIND_REPO,      /* a file of the repository (%repo/) */
};

enum stfs_virtual {
	STFS_VIRTUAL_KIND_FULL,
	STFS_VIRTUAL_KIND_STRIPPED,
	STFS_VIRTUAL_KIND_F32,
	STFS_VIRTUAL_KIND_COUNT
};

struct stfs_node_info {
	enum stfs_node_kind kind;
	uint32_t parent;
	const char *name;         /* escaped, NUL-terminated; "" for the root */
	size_t name_len;
	uint32_t children;        /* dirs: how many */
	uint32_t subdirs;         /* dirs: how many of them are dirs */
	size_t tensor;            /* TENSOR: index of the tensor */
	enum stfs_view view;      /* TENSOR: RAW, or which view */
	enum stfs_virtual virt;   /* VIRTUAL: which one (parent: its dir) */
	uint64_t size;            /* files but VIRTUAL: bytes */
};

uint32_t stfs_model_node_count(const struct stfs_model *m);
/* Fill *out for node: 0, or -ENOENT for no such node. */
int stfs_model_node(const struct stfs_model *m, uint32_t node,
		    struct stfs_node_info *out);
/* The size of a file node: 0 or -errno.  A virtual file's is known once
 * its header is generated: the first call for one takes about 1 s per
 * million tensors and may fail with -ENOMEM. */
int stfs_model_node_size(const struct stfs_model *m, uint32_t node,
			 uint64_t *size);
/*
 * A whole read of a %repo/ file whose source publishes its sha256 (an LFS
 * file of the Hub), checked at its end, for one open file: NULL when node
 * has nothing to check this way (or out of memory).  Feed it what each
 * read returned, at its offset: 0, or -EIO from the read that completes
 * the file when the bytes, in order from 0, do not match (why says so;
 * every later read of the open file is EIO too, why then "", and every
 * later open of the file).  Bytes are hashed in file order;
 * a few reads that come early are held, and an open whose reads skip
 * further ahead, or start past the beginning, stays unverified.
 */
struct stfs_verify;
struct stfs_verify *stfs_verify_new(struct stfs_model *m, uint32_t node);
int stfs_verify_feed(struct stfs_verify *v, uint64_t off,
		     const struct iovec *iov, int n, char *why, size_t whysz);
void stfs_verify_free(struct stfs_verify *v);
/* The model v was made for is closed (an open file outlives it at
 * unmount): v lets go of it, touching nothing of it, before it is freed. */
void stfs_verify_detach(struct stfs_verify *v);

/* Child k (0 <= k < children) of dir, in name order, or -ENOENT. */
int64_t stfs_model_child(const struct stfs_model *m, uint32_t dir,
			 uint32_t k);
/* Child of dir called name (len bytes): node, or -ENOENT / -ENOTDIR. */
int64_t stfs_model_lookup(const struct stfs_model *m, uint32_t dir,
			  const char *name, size_t len);
/* The view nodes of tensor i, in view order: how many (at most
 * STFS_VIEW_COUNT - 1) into nodes. */
size_t stfs_model_tensor_views(const struct stfs_model *m, size_t i,
			       uint32_t *nodes);
/* "a/b/c" for a node (malloc'd, caller frees), or NULL on ENOMEM. */
char *stfs_model_node_path(const struct stfs_model *m, uint32_t node);

/* The revision (user.stfs.revision) of a node of the repository: the
 * commit, or the file's ETag or mtime; NULL for other nodes. */
const char *stfs_model_node_revision(const struct stfs_model *m,
				     uint32_t node);

/* The repository's files as the source lists them, shown or not, in
 * path order (`stfs inspect --files`). */
struct stfs_repo_info {
	const char *path;
	uint64_t size;
	const char *verify;       /* "KIND:HEX" (sha256, sha1-blob, md5,
				   * crc64nvme), "unchecked (WHY)", or NULL */
	int small;                /* fetched whole at mount, verified */
	const char *left_out;     /* why it is not shown, or NULL */
	const char *fault;        /* why its bytes are refused, or NULL */
};
size_t stfs_model_repo_count(const struct stfs_model *m);
int stfs_model_repo_info(const struct stfs_model *m, size_t i,
			 struct stfs_repo_info *out);

/* ---- content: the bytes of a file of the tree ------------------------ */

/*
 * Every file of the tree is a list of segments: inline bytes (a generated
 * header), a range of a byte source (a tensor's bytes), or a range of a
 * source converted to float32 (a .f32 view).  A read is one loop over the
 * segments it covers; ranges of mapped sources are handed out as pointers
 * into the map, never copied.
 */
struct stfs_content;
struct iovec;

/* The content of a file node (not a dir: -EISDIR; a virtual file whose
 * header would be over STFS_HEADER_MAX: -EFBIG, see
 * stfs_model_node_error()). */
int stfs_model_content(const struct stfs_model *m, uint32_t node,
		       struct stfs_content **out);
void stfs_content_free(struct stfs_content *c);
/* Why node cannot be opened, as text for a log line, into out. */
void stfs_model_node_error(const struct stfs_model *m, uint32_t node,
			   int code, char *out, size_t outsz);
uint64_t stfs_content_size(const struct stfs_content *c);

/*
 * Called exactly once per stfs_content_read(), maybe before it returns,
 * maybe later from another thread: the bytes as n iovecs (valid only
 * during the call; NULL and 0 past the end), or err (a negative errno).
 */
typedef void (*stfs_read_done)(void *arg, const struct iovec *iov, int n,
			       int err);
/* Read [off, off + size) of c (cut at the end). */
void stfs_content_read(const struct stfs_content *c, uint64_t off,
		       size_t size, stfs_read_done done, void *arg);
/* The same, into buf: bytes read (short only at the end), or -errno. */
ssize_t stfs_content_pread(const struct stfs_content *c, void *buf,
			   size_t size, uint64_t off);

/* `stfs mirror` (a pinned source copied into an S3 bucket): stfs/mirror.h. */

/* ---- small helpers shared by the front ends -------------------------- */

/* Write s as printable text into out (size outsz, always terminated):
 * control bytes and bytes of no well-formed UTF-8 sequence become \xNN,
 * the C1 and bidirectional controls (U+0080..U+009F, U+061C, U+200E,
 * U+200F, U+202A..U+202E, U+2066..U+2069) \uXXXX, '"' and '\\' \" and
 * \\; long input is cut with "..." (never inside a sequence).
 * Returns out. */
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

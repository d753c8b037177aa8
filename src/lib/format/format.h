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

/* The same for a failed allocation: -ENOMEM, "out of memory". */
int stfs_nomem(struct stfs_error *err);

/* File names (suffix.c): a PyTorch checkpoint's (.bin, .pt, .pth, .ckpt);
 * a single-file checkpoint's (those and .gguf).  Content decides, never
 * these: they only pick files. */
int stfs_name_is_torch(const char *name);
int stfs_name_is_checkpoint(const char *name);

/* Small helpers every layer uses (text.c): is the end of s tail; the value
 * of an environment variable, NULL when unset or empty. */
int stfs_ends_with(const char *s, const char *tail);
const char *stfs_env(const char *name);

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

/*
 * A parsed header: a safetensors file's (header.c), or the table a reader
 * of another format built with stfs_table_* (table.c).  The tensors,
 * metadata and by_name arrays are the header's; ext holds what a table
 * adds (names, shapes, foreign records, key-values), freed by ext_free.
 */
struct stfs_header {
	struct stfs_tensor *tensors;
	size_t count;
	struct stfs_meta *meta;
	size_t nmeta;
	int has_meta;
	uint64_t data_len;
	char *arena;
	uint64_t *dims;
	uint32_t *by_name;        /* tensor indices in name order */
	const char *format;       /* NULL: safetensors */
	struct stfs_meta *kv;     /* a foreign format's key-values */
	size_t nkv;
	char **skipped;           /* what a foreign file held that was left out */
	size_t nskipped;
	void *ext;
	void (*ext_free)(void *);
};

/*
 * Bytes a reader of another format reads from: read exactly len bytes at
 * off (0 or -errno), size bytes in all.  The model layer makes one over a
 * source; fuzzers and unit tests over memory (stfs_reader_mem).
 */
struct stfs_reader {
	int (*read)(void *ctx, void *buf, size_t len, uint64_t off);
	void *ctx;
	uint64_t size;
	const char *name;         /* for messages */
	const void *mem;          /* stfs_reader_mem's bytes */
	int cheap;                /* reads cost no request (a mapped file) */
};
/* A reader over n bytes of memory at p (ctx is the reader itself). */
void stfs_reader_mem(struct stfs_reader *r, const void *p, size_t n,
		     const char *name);

/*
 * The one seam of every format reader: read a file's header through r
 * into *out, a struct stfs_header whatever the format, and *header_len the
 * bytes of header (0 or -errno with err).  A format is found by the first
 * bytes of a file, never its name (detect.c; formats.md): safetensors
 * last, since any 8 bytes can begin one.  Its tensors' offsets are
 * relative to the end of the header (data_relative: safetensors' data
 * section, after the 8-byte length) or absolute in the file.  A new
 * format is its reader in its own room and one line in detect.c.
 */
typedef int (*stfs_format_read_fn)(const struct stfs_reader *r,
				   struct stfs_header **out,
				   uint64_t *header_len,
				   struct stfs_error *err);
struct stfs_format {
	const char *name;          /* "safetensors", "gguf", "pytorch" */
	int (*detect)(const unsigned char *p, size_t n);   /* n >= 8 */
	stfs_format_read_fn read;
	int data_relative;         /* offsets after 8 + header_len */
};
/* The format whose file begins with the n >= 8 bytes at p. */
const struct stfs_format *stfs_format_of(const unsigned char *p, size_t n);

/* The readers, one per room (safetensors/reader.c, gguf/gguf.c,
 * pytorch/torch_table.c), and the magics the other formats begin with
 * (gguf/gguf.c, pytorch/detect.c). */
int stfs_safetensors_read(const struct stfs_reader *r,
			  struct stfs_header **out, uint64_t *header_len,
			  struct stfs_error *err);
int stfs_gguf_read(const struct stfs_reader *r, struct stfs_header **out,
		   uint64_t *header_len, struct stfs_error *err);
int stfs_torch_read(const struct stfs_reader *r, struct stfs_header **out,
		    uint64_t *header_len, struct stfs_error *err);
int stfs_gguf_detect(const unsigned char *p, size_t n);
int stfs_torch_zip_detect(const unsigned char *p, size_t n);
int stfs_torch_legacy_detect(const unsigned char *p, size_t n);

/*
 * The foreign-format table (table.c): a reader adds one record per
 * tensor, and key-values, then stfs_table_finish validates them all and
 * makes a struct stfs_header the model uses as a safetensors file's.
 */
struct stfs_rec {
	const char *name;             /* copied */
	size_t name_len;
	enum stfs_dtype dtype;        /* STFS_DTYPE_NONE: not representable */
	const char *type;             /* the format's type name (static) */
	unsigned quant;               /* STFS_Q_*, with dtype NONE */
	size_t rank;                  /* <= STFS_TABLE_RANK_MAX */
	const uint64_t *shape;        /* row-major; copied */
	const uint64_t *strides;      /* elements, or NULL; copied */
	uint64_t begin, end;          /* absolute bytes in the file */
	unsigned elem_bytes;          /* a view with dtype NONE: the bytes
				       * of one element (complex128: 16) */
};

/* A record's element size in bytes, for a view (0: no whole-byte
 * element); whether a view's gathered bytes (*out) are within
 * STFS_VIEW_BYTES_FLOOR or its storage's bytes. */
unsigned stfs_rec_elem_bytes(const struct stfs_rec *r);
int stfs_rec_view_fits(const struct stfs_rec *r, uint64_t *out);

#define STFS_TABLE_RANK_MAX 64
/* A view's gathered bytes are at most its storage's bytes or this,
 * whichever is larger (an expand() of one byte cannot make a 2^61-byte
 * file); a reader leaves a larger view out, with the reason. */
#define STFS_VIEW_BYTES_FLOOR (1ull << 30)
#define STFS_TABLE_TENSORS_MAX (1u << 24)

struct stfs_table;
/* A table of format (a static string) for the file called name. */
struct stfs_table *stfs_table_new(const char *format, const char *name);
void stfs_table_free(struct stfs_table *tb);
/* Add a tensor: checks its own fields (rank, shape overflow, the size of
 * dtype x shape or of quant's blocks against [begin, end), the range in
 * the file of file_size bytes, strides' extent); errors name the tensor. */
int stfs_table_add(struct stfs_table *tb, const struct stfs_rec *r,
		   uint64_t file_size, struct stfs_error *err);
/* A key-value; value is JSON text (copied). */
int stfs_table_add_kv(struct stfs_table *tb, const char *key, size_t klen,
		      const char *json, size_t jlen, struct stfs_error *err);
/* A line for stfs_header_skipped (copied). */
int stfs_table_skip(struct stfs_table *tb, const char *line,
		    struct stfs_error *err);
/* Refuse overlapping byte ranges (GGUF) unless allowed (PyTorch's tied
 * weights), refuse a name twice, and make the header (tb is freed). */
#define STFS_TABLE_OVERLAP 1u
int stfs_table_finish(struct stfs_table *tb, unsigned flags,
		      struct stfs_header **out, struct stfs_error *err);

/*
 * Block-quantized types (ggml.c): the .f32 view of a tensor whose
 * foreign->quant is one of these dequantizes (content/dequant.c).
 */
enum stfs_quant {
	STFS_Q_NONE,
	STFS_Q4_0, STFS_Q4_1, STFS_Q5_0, STFS_Q5_1, STFS_Q8_0,
	STFS_Q2_K, STFS_Q3_K, STFS_Q4_K, STFS_Q5_K, STFS_Q6_K, STFS_Q8_K,
	STFS_Q_COUNT
};
/* Elements and bytes of one block of q; 0 if q is not one. */
unsigned stfs_quant_block(unsigned q, unsigned *bytes);

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

/* Make room in the array *p of *cap elements of elem bytes for need of
 * them, doubling (mem.c): 0, or -ENOMEM (also when the size overflows). */
int stfs_grow(void **p, size_t *cap, size_t need, size_t elem);

/* Run fn(ctx, i) for every i < n on up to width threads (par.c; at most
 * STFS_PARALLEL_MAX), the caller's among them, each taking the next i as
 * it finishes one; returns when every call has returned.  Threads that
 * cannot be started leave their share to the others (at worst the caller
 * runs them all).  fn must be safe to run concurrently with itself. */
#define STFS_PARALLEL_MAX 256
void stfs_parallel_for(size_t n, unsigned width,
		       void (*fn)(void *ctx, size_t i), void *ctx);

/* 64-bit FNV-1a (text.c): shortened long names in the tree (model/) and
 * the names of cache files (source/cache.c). */
uint64_t stfs_hash64(const char *s, size_t len);

/* A server's own words (an error's reason) made safe to print, in place
 * (text.c): C0 controls, DEL, C1 and bidirectional controls become ' ',
 * bytes of no UTF-8 sequence '?'; the rest is kept as it is. */
void stfs_text_clean(char *s);

/* The key two names of a folder clash by (unorm.c): name (len bytes) in
 * its canonical decomposition (NFD: canonically equivalent names, NFC
 * "caf\xc3\xa9" and NFD "cafe\xcc\x81", have one key), ASCII letters in
 * lower case, bytes of no UTF-8 sequence kept as they are.  A new
 * string, or NULL (no memory). */
char *stfs_name_key(const char *name, size_t len);

/* CRC-64/NVME (crc64.c) of len bytes, going on from crc (0 to start):
 * S3's CRC64NVME. */
uint64_t stfs_crc64nvme(uint64_t crc, const void *buf, size_t len);

/* CRC-32C (crc32c.c) of len bytes, going on from crc (0 to start): the
 * checksum of the cache's blocks. */
uint32_t stfs_crc32c(uint32_t crc, const void *buf, size_t len);
/* The CRC-32C of each of three buffers of len bytes (from 0): as three
 * calls, in about the time of one where the processor has the
 * instruction. */
void stfs_crc32c_3(const void *const p[3], size_t len, uint32_t out[3]);

/* Standard base64 (RFC 4648's alphabet, padded with '=', no spaces) of
 * the n bytes at s into out (text.c): 0 with *outlen, or -EINVAL for text
 * that is not strictly that (a length not a multiple of 4, a byte outside
 * the alphabet, '=' anywhere but the end, pad bits not zero), -ENOSPC
 * when it is longer than outsz bytes. */
int stfs_base64_decode(const char *s, size_t n, unsigned char *out,
		       size_t outsz, size_t *outlen);


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

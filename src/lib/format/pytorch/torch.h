/*
 * torch.h: the format layer's readers of PyTorch checkpoints (never
 * installed): a strict zip reader (zip.c), a pickle interpreter that
 * executes nothing (pickle.c), and the torch layer on top of them
 * (torch.c) that turns a checkpoint, in the zip format of torch >= 1.6 or
 * the legacy format of older torch, into a flat list of tensors with
 * their storages' absolute byte ranges, plain values and the names of the
 * objects it left out.  All bytes come through a read callback, so a
 * remote file fetches only the zip's central directory and the pickle.
 */
#ifndef STFS_TORCH_H
#define STFS_TORCH_H

#include <stddef.h>
#include <stdint.h>

#include "stfs/stfs.h"

/* The rules of PyTorch checkpoints (docs/formats.md), named once: the
 * zip (Z), the pickle (P), the checkpoint's layout (T). */
#define ZR_EOCD "Z1 end-record"
#define ZR_ZIP64 "Z2 zip64"
#define ZR_CD "Z3 central-directory"
#define ZR_LOCAL "Z4 local-header"
#define ZR_METHOD "Z5 stored-only"
#define ZR_BOUNDS "Z6 record-bounds"
#define PR_OP "P1 opcode"
#define PR_STACK "P2 stack"
#define PR_MEMO "P3 memo"
#define PR_LIMIT "P4 limits"
#define PR_TRUNC "P5 truncated"
#define PR_TENSOR "P6 torch-rebuild"
#define PR_PERSID "P7 torch-storage"
#define TR_LAYOUT "T1 checkpoint-layout"
#define TR_STORAGE "T2 storage"
#define TR_BOUNDS "T3 tensor-bounds"
#define TR_LIMIT "T4 limits"

/* Read exactly n bytes at off into buf: 0, or a negative errno. */
typedef int (*stfs_read_fn)(void *ctx, void *buf, size_t n, uint64_t off);

/* ---- zip ------------------------------------------------------------ */

/* Limits: central directory size and entry count (documented in
 * docs/formats.md). */
#define STFS_ZIP_CD_MAX (64u << 20)
#define STFS_ZIP_ENTRIES_MAX (1u << 20)
/* The end-of-central-directory search: the last 64 KiB + the record. */
#define STFS_ZIP_TAIL (65535u + 22u)

struct stfs_zip_entry {
	char *name;          /* NUL-terminated too */
	size_t name_len;
	uint64_t lho;        /* local header offset */
	uint64_t data;       /* the record's data offset */
	uint64_t size;       /* stored: compressed == uncompressed size */
	unsigned flags;      /* general purpose flags (bit 3: descriptor) */
	int verified;        /* the local header was read and agrees */
};

struct stfs_zip {
	struct stfs_zip_entry *e;  /* sorted by name */
	size_t n;
	uint64_t cd_off, cd_size;  /* the central directory */
};

/*
 * Read the end records and the central directory of the zip file of size
 * bytes behind rd, and every record's local header: each record's data
 * starts where its local header ends, and the record must end where the
 * next begins (no gap; with a data descriptor, 12 to 24 bytes later).
 * read_local (reads are cheap: a local file) reads each header with a
 * window; otherwise only the bytes where the header must lie for the
 * record to end where the next begins.  Both accept the same files and
 * place every record at the same offset.  Only stored records are
 * accepted.  name: the file, for messages.  *out is the caller's, freed
 * with stfs_zip_free().
 */
int stfs_zip_open(stfs_read_fn rd, void *ctx, uint64_t size, int read_local,
		  const char *name, struct stfs_zip *out,
		  struct stfs_error *err);
void stfs_zip_free(struct stfs_zip *z);
/* The entry named (len bytes), or NULL. */
const struct stfs_zip_entry *stfs_zip_find(const struct stfs_zip *z,
					   const char *name, size_t len);
/* Read an entry's data in one read that covers its local header too,
 * which must agree with the central directory.  *buf (malloc'd, the
 * caller frees) gets e->size bytes; at most max bytes. */
int stfs_zip_load(const struct stfs_zip_entry *e, stfs_read_fn rd, void *ctx,
		  uint64_t max, const char *name, unsigned char **buf,
		  struct stfs_error *err);
/* The same from b_len bytes already read at b_off (which must hold the
 * record's local header and data). */
int stfs_zip_extract(const struct stfs_zip_entry *e, const unsigned char *b,
		     uint64_t b_off, size_t b_len, const char *name,
		     unsigned char **out, struct stfs_error *err);

/* What zip.c and zip_local.c share: a read of n bytes at off whose
 * failure names the file and the bytes; the check of a local header (at
 * least 30 + name bytes at h) against e, setting e->data; the placing of
 * every record's data from its local header (zip_local.c), refusing
 * records out of [0, cd_off), overlapping, or with gaps. */
int stfs_zip_read_at(stfs_read_fn rd, void *ctx, void *buf, size_t n,
		     uint64_t off, const char *name, struct stfs_error *err);
int stfs_zip_check_local(const unsigned char *h, size_t hn,
			 struct stfs_zip_entry *e, const char *name,
			 struct stfs_error *err);
int stfs_zip_place(struct stfs_zip *z, stfs_read_fn rd, void *ctx,
		   int read_local, const char *name, struct stfs_error *err);

/* ---- pickle --------------------------------------------------------- */

/* Limits on one pickle (docs/formats.md). */
#define STFS_PICKLE_SIZE_MAX (256u << 20)
#define STFS_PICKLE_DEPTH_MAX 100      /* nested containers */
#define STFS_PICKLE_MEMO_MAX (1u << 20)
#define STFS_PICKLE_STACK_MAX (1u << 20)
#define STFS_PICKLE_VALUES_MAX (4u << 20)
#define STFS_TORCH_TENSORS_MAX (1u << 20)
#define STFS_TORCH_RANK_MAX 64

enum stfs_pk_kind {
	STFS_PK_NONE, STFS_PK_BOOL, STFS_PK_INT, STFS_PK_FLOAT, STFS_PK_STR,
	STFS_PK_BYTES, STFS_PK_TUPLE, STFS_PK_LIST, STFS_PK_DICT, STFS_PK_SET,
	STFS_PK_GLOBAL,  /* a reference to module.name, never imported */
	STFS_PK_OBJECT,  /* the result of calling a global: never made */
	STFS_PK_STORAGE, /* a persistent id ('storage', type, key, ...) */
	STFS_PK_TENSOR,  /* torch._utils._rebuild_tensor_v2(...) */
	STFS_PK_MARK     /* internal: the stack mark */
};

struct stfs_pk_storage {
	const char *mod, *type;  /* "torch", "FloatStorage" or "float32" */
	size_t mod_len, type_len;
	const char *key;
	size_t key_len;
	uint64_t numel;      /* elements, as the persistent id says */
	uint64_t view_off;   /* legacy storage views: offset in elements */
	uint64_t view_numel; /* and its elements */
	int has_view;
};

struct stfs_pk_tensor {
	struct stfs_pk_storage *st;
	uint64_t offset;     /* storage offset, elements */
	size_t rank;
	uint64_t *dims;      /* rank sizes, then rank strides */
	uint64_t at;         /* where in the file its REDUCE was */
};

/*
 * One value.  Strings point into the pickle's bytes (not terminated); so
 * do a GLOBAL's module and name, which an OBJECT (the never-made result
 * of calling something) keeps to say what it would have been.
 */
struct stfs_pk_val {
	enum stfs_pk_kind kind;
	int big;            /* INT past int64: u.str holds its LE bytes */
	union {
		int64_t i;      /* BOOL, INT */
		double f;       /* FLOAT */
		struct {
			const char *s;
			size_t n;
		} str;          /* STR, BYTES */
		struct {
			struct stfs_pk_val **items;
			size_t count, cap;
		} seq;          /* TUPLE, LIST, SET; DICT: k, v, k, v, ... */
		struct {
			const char *mod, *nm;
			size_t mod_len, nm_len;
		} g;            /* GLOBAL, OBJECT */
		struct stfs_pk_storage *st;
		struct stfs_pk_tensor *t;
	} u;
	struct stfs_pk_val *next;   /* every value, for freeing */
};

struct stfs_pk;  /* an interpreter run: its values live until freed */

/*
 * Interpret the pickle buf[0..len) as data.  torch: recognise torch's
 * reconstruction patterns (persistent ids become storages); otherwise any
 * call is an opaque object.  base: where buf starts in the file (for
 * messages).  *pk holds every value; stfs_pk_free() frees them.  *root is
 * the value STOP returned.
 */
int stfs_pk_run(const unsigned char *buf, size_t len, uint64_t base,
		int torch, const char *name, struct stfs_pk **pk,
		struct stfs_pk_val **root, struct stfs_error *err);
void stfs_pk_free(struct stfs_pk *pk);
/* How many bytes of buf the run used (up to and with STOP). */
size_t stfs_pk_used(const struct stfs_pk *pk);

/* ---- torch checkpoints ---------------------------------------------- */

enum stfs_torch_kind { STFS_TORCH_NONE, STFS_TORCH_ZIP, STFS_TORCH_LEGACY };


struct stfs_torch_tensor {
	char *name;             /* full key, '.'-joined; NUL-terminated */
	size_t name_len;
	int dtype;              /* enum stfs_dtype, or -1: not representable */
	const char *torch_dtype;/* "float32", "complex128", ... */
	unsigned elem_size;     /* bytes per element */
	size_t rank;
	uint64_t shape[STFS_TORCH_RANK_MAX], stride[STFS_TORCH_RANK_MAX];
	uint64_t offset;        /* storage offset in elements */
	uint64_t st_begin, st_len;  /* the storage's bytes in the file */
	size_t storage;         /* index of the storage, for tied weights */
	int contiguous;         /* row-major, one range */
	uint64_t nbytes;        /* elements * elem_size */
};

enum stfs_torch_vkind { STFS_TV_NONE, STFS_TV_BOOL, STFS_TV_INT,
			STFS_TV_FLOAT, STFS_TV_STR };

struct stfs_torch_value {
	char *key;              /* NUL-terminated */
	size_t key_len;
	enum stfs_torch_vkind kind;
	int64_t i;
	double f;
	char *s;                /* STR: the bytes (valid UTF-8 not checked) */
	size_t n;
};

struct stfs_torch_object {
	char *key;              /* where it was */
	size_t key_len;
	char *cls;              /* the class or callable never called;
				 * with ref 2, the reason it is left out */
	int ref;                /* 1: a bare reference (a class, a dtype);
				 * 2: not an object (a dict entry whose
				 * key is a NaN) */
};

struct stfs_torch {
	enum stfs_torch_kind kind;
	struct stfs_torch_tensor *t;
	size_t nt;
	struct stfs_torch_value *v;
	size_t nv;
	struct stfs_torch_object *o;
	size_t no;
	uint64_t pickle_off, pickle_len;   /* the object pickle in the file */
};

/*
 * Read the checkpoint of size bytes behind rd: detect its kind, read the
 * zip directory (read_local as for stfs_zip_open) or the legacy layout,
 * interpret the pickle, check every tensor against its storage.  name:
 * the file, for messages.  Free *out with stfs_torch_free().
 */
int stfs_torch_open(stfs_read_fn rd, void *ctx, uint64_t size,
		    int read_local, const char *name,
		    struct stfs_torch **out, struct stfs_error *err);
void stfs_torch_free(struct stfs_torch *t);

/* stfs_torch_read() (torch_table.c), the checkpoint as a foreign-format
 * table, and the two magics (detect.c) are declared in format.h. */

#endif

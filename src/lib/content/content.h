/*
 * content.h: the content layer's declarations for the model above it
 * (never installed): building a file's list of segments.
 */
#ifndef STFS_CONTENT_H
#define STFS_CONTENT_H

#include "stfs/stfs.h"

enum stfs_seg_kind {
	STFS_SEG_INLINE,    /* bytes in memory */
	STFS_SEG_RANGE,     /* a range of a source */
	STFS_SEG_F32,       /* a range of a source, converted to float32 */
	STFS_SEG_GATHER,    /* a strided view's elements, gathered (gather.c) */
};


struct stfs_seg {
	uint64_t at;                 /* its first byte's offset in the file */
	uint64_t len;                /* bytes it gives */
	enum stfs_seg_kind kind;
	enum stfs_dtype dtype;       /* F32: the source's dtype */
	unsigned quant;              /* F32: a quantization (STFS_Q_*) */
	unsigned uin, uout;          /* F32: bytes in, floats out per unit */
	const struct stfs_tensor *t; /* GATHER: the view (shape, dtype and
				      * foreign->strides; first element at
				      * u.r.off); lives as long as the model */
	union {
		struct {             /* INLINE */
			const char *bytes;
			char *own;           /* freed with the content */
			void (*release)(void *); /* called then, if set */
			void *release_arg;
		} in;
		struct {             /* RANGE, F32 */
			struct stfs_source *src;
			uint64_t off;        /* first source byte */
			int piece;           /* RANGE: a tensor of a file
					      * (stfs_extent's piece) */
		} r;
	} u;
};

struct stfs_content {
	uint64_t size;
	size_t nseg, cap;
	struct stfs_seg *seg;
	struct stfs_seg small[2];
};

struct stfs_content *stfs_content_new(void);
/* Append len bytes; with own, the content takes over bytes (malloc'd),
 * and frees them, even when this fails. */
int stfs_content_add_inline(struct stfs_content *c, const char *bytes,
			    size_t len, int own);
/* Append len bytes that stay valid until release(arg) is called (when the
 * content is freed; also when this fails). */
int stfs_content_add_shared(struct stfs_content *c, const char *bytes,
			    size_t len, void (*release)(void *), void *arg);
int stfs_content_add_range(struct stfs_content *c, struct stfs_source *src,
			   uint64_t off, uint64_t len);
/* The same for a tensor's piece of a file read whole (%repo/'s shard):
 * its reads' extent says so (struct stfs_extent's piece). */
int stfs_content_add_piece(struct stfs_content *c, struct stfs_source *src,
			   uint64_t off, uint64_t len);
/* nel elements of dtype (stfs_dtype_to_f32) at off, as float32. */
int stfs_content_add_f32(struct stfs_content *c, struct stfs_source *src,
			 uint64_t off, enum stfs_dtype dtype, uint64_t nel);

/* The raw bytes of tensor t (a range, or gathered for a strided view),
 * the tensor's bytes starting at off in src. */
int stfs_content_add_tensor(struct stfs_content *c,
			    const struct stfs_tensor *t,
			    struct stfs_source *src, uint64_t off);
/* Its values as float32 (converted or dequantized); -EINVAL if it has no
 * such view. */
int stfs_content_add_tensor_f32(struct stfs_content *c,
				const struct stfs_tensor *t,
				struct stfs_source *src, uint64_t off);
/* 1 if t has an .f32 view (a dtype that converts, or a quantization
 * content/dequant.c dequantizes). */
int stfs_tensor_to_f32(const struct stfs_tensor *t);
/* Dequantize n blocks of quant at src into dst (dequant.c). */
/* 1 if stfs_dequant() can turn quantization q into float32 (dequant.c:
 * the set is written once, beside the code that does it). */
int stfs_quant_dequantizes(unsigned q);
void stfs_dequant(unsigned quant, const void *src, size_t nblocks,
		  float *dst);
/* One IEEE half as float32 (convert.c). */
float stfs_half_to_f32(uint16_t h);

/* The content of view v of tensor t, whose bytes start at off in src. */
int stfs_content_view(const struct stfs_tensor *t, enum stfs_view v,
		      struct stfs_source *src, uint64_t off,
		      struct stfs_content **out);
/* The NPY header of view v (NPY or F32_NPY) of t; as stfs_npy_header. */
size_t stfs_view_npy_header(const struct stfs_tensor *t, enum stfs_view v,
			    char *out, size_t outsz);

#endif

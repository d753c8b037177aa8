/*
 * npy.c: views of a tensor for tools that do not read safetensors: which
 * views a dtype gets, their file-name suffixes, and the NPY header that
 * makes a tensor's bytes a file numpy.load() reads (format: numpy's
 * "NPY format" document, version 1.0; 2.0 only for a header over 64 KiB).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "stfs/stfs.h"
#include "format.h"
#include "content.h"

static const char *const suffixes[STFS_VIEW_COUNT] = {
	"", ".npy", ".f32", ".f32.npy",
};

const char *stfs_view_suffix(enum stfs_view v)
{
	return (unsigned)v < STFS_VIEW_COUNT ? suffixes[v] : NULL;
}

const char *stfs_npy_descr(enum stfs_dtype dt)
{
	switch (dt) {
	case STFS_DTYPE_BOOL: return "|b1";
	case STFS_DTYPE_U8:   return "|u1";
	case STFS_DTYPE_I8:   return "|i1";
	case STFS_DTYPE_U16:  return "<u2";
	case STFS_DTYPE_I16:  return "<i2";
	case STFS_DTYPE_F16:  return "<f2";
	case STFS_DTYPE_U32:  return "<u4";
	case STFS_DTYPE_I32:  return "<i4";
	case STFS_DTYPE_F32:  return "<f4";
	case STFS_DTYPE_U64:  return "<u8";
	case STFS_DTYPE_I64:  return "<i8";
	case STFS_DTYPE_F64:  return "<f8";
	case STFS_DTYPE_C64:  return "<c8";
	default:              return NULL;
	}
}

int stfs_dtype_to_f32(enum stfs_dtype dt)
{
	switch (dt) {
	case STFS_DTYPE_BF16:
	case STFS_DTYPE_F16:
	case STFS_DTYPE_F8_E4M3:
	case STFS_DTYPE_F8_E5M2:
	case STFS_DTYPE_F8_E4M3FNUZ:
	case STFS_DTYPE_F8_E5M2FNUZ:
	case STFS_DTYPE_F8_E8M0:
		return 1;
	default:
		return 0;
	}
}

unsigned stfs_views_for(enum stfs_dtype dt, unsigned flags)
{
	unsigned v = 0;

	if ((flags & STFS_TREE_NPY) && stfs_npy_descr(dt))
		v |= 1u << STFS_VIEW_NPY;
	if ((flags & STFS_TREE_F32) && stfs_dtype_to_f32(dt)) {
		v |= 1u << STFS_VIEW_F32;
		if (flags & STFS_TREE_NPY)
			v |= 1u << STFS_VIEW_F32_NPY;
	}
	return v;
}

unsigned stfs_tensor_views(const struct stfs_tensor *t, unsigned flags)
{
	unsigned v;

	if (!t->foreign || !t->foreign->quant)
		return stfs_views_for(t->dtype, flags);
	v = 0;
	if ((flags & STFS_TREE_F32) && stfs_quant_dequantizes(t->foreign->quant)) {
		v |= 1u << STFS_VIEW_F32;
		if (flags & STFS_TREE_NPY)
			v |= 1u << STFS_VIEW_F32_NPY;
	}
	return v;
}

size_t stfs_npy_header(const char *descr, const uint64_t *shape, size_t rank,
		       char *out, size_t outsz)
{
	size_t dict = 0, pre = 10, total;
	char num[24];

	/* {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } */
	dict += strlen("{'descr': '', 'fortran_order': False, 'shape': (), }")
		+ strlen(descr);
	for (size_t i = 0; i < rank; i++)
		dict += (size_t)snprintf(num, sizeof(num), "%" PRIu64,
					 shape[i]) + (i ? 2 : 0);
	if (rank == 1)
		dict += 1;                       /* "(n,)" */
	if (pre + dict + 1 > 65535) 
		pre = 12;                        /* version 2.0 */
	total = (pre + dict + 1 + 63) / 64 * 64;
	if (total > outsz)
		return total;

	memcpy(out, "\x93NUMPY", 6);
	out[6] = pre == 10 ? 1 : 2;
	out[7] = 0;
	for (size_t i = 0, hl = total - pre; i < pre - 8; i++, hl >>= 8)
		out[8 + i] = (char)(hl & 0xff);
	{
		size_t at = pre;
		at += (size_t)sprintf(out + at,
				      "{'descr': '%s', 'fortran_order': False,"
				      " 'shape': (", descr);
		for (size_t i = 0; i < rank; i++)
			at += (size_t)sprintf(out + at, "%s%" PRIu64,
					      i ? ", " : "", shape[i]);
		at += (size_t)sprintf(out + at, "%s), }", rank == 1 ? "," : "");
		memset(out + at, ' ', total - 1 - at);
		out[total - 1] = '\n';
	}
	return total;
}

enum stfs_dtype stfs_view_dtype(const struct stfs_tensor *t, enum stfs_view v)
{
	return v == STFS_VIEW_F32 || v == STFS_VIEW_F32_NPY ? STFS_DTYPE_F32 :
	       t->dtype;
}

size_t stfs_view_npy_header(const struct stfs_tensor *t, enum stfs_view v,
			    char *out, size_t outsz)
{
	const char *descr = stfs_npy_descr(stfs_view_dtype(t, v));

	return stfs_npy_header(descr ? descr : "|V1", t->shape, t->rank, out,
			       outsz);
}

uint64_t stfs_view_size(const struct stfs_tensor *t, enum stfs_view v,
			uint64_t *data_start)
{
	uint64_t head = 0, body = stfs_tensor_bytes(t);

	if (v == STFS_VIEW_NPY || v == STFS_VIEW_F32_NPY)
		head = stfs_view_npy_header(t, v, NULL, 0);
	if (v == STFS_VIEW_F32 || v == STFS_VIEW_F32_NPY)
		body = stfs_tensor_elements(t) * 4;
	if (data_start)
		*data_start = head;
	return head + body;
}

/*
 * dtype.c: the 22 safetensors dtypes, their header spellings and bit sizes
 * (RULES.md R11).  Lookup is exact, case-sensitive and length-counted, so
 * "F32\u0000" or " F32" never match.
 */
#include <errno.h>
#include <string.h>

#include "stfs/stfs.h"

static const struct {
	const char *name;
	unsigned char len;
	unsigned char bits;
} dtypes[STFS_DTYPE_COUNT] = {
#define DT(id, bits) [STFS_DTYPE_##id] = { #id, sizeof(#id) - 1, bits }
	DT(BOOL, 8),         DT(F4, 4),           DT(F6_E2M3, 6),
	DT(F6_E3M2, 6),      DT(U8, 8),           DT(I8, 8),
	DT(F8_E5M2, 8),      DT(F8_E4M3, 8),      DT(F8_E8M0, 8),
	DT(F8_E4M3FNUZ, 8),  DT(F8_E5M2FNUZ, 8),  DT(I16, 16),
	DT(U16, 16),         DT(F16, 16),         DT(BF16, 16),
	DT(I32, 32),         DT(U32, 32),         DT(F32, 32),
	DT(C64, 64),         DT(F64, 64),         DT(I64, 64),
	DT(U64, 64),
#undef DT
};

const char *stfs_dtype_name(enum stfs_dtype dt)
{
	if ((unsigned)dt >= STFS_DTYPE_COUNT)
		return NULL;
	return dtypes[dt].name;
}

unsigned stfs_dtype_bits(enum stfs_dtype dt)
{
	if ((unsigned)dt >= STFS_DTYPE_COUNT)
		return 0;
	return dtypes[dt].bits;
}

int stfs_dtype_from_name(const char *s, size_t len, enum stfs_dtype *out)
{
	for (unsigned i = 0; i < STFS_DTYPE_COUNT; i++) {
		if (dtypes[i].len == len && memcmp(dtypes[i].name, s, len) == 0) {
			*out = (enum stfs_dtype)i;
			return 0;
		}
	}
	return -EINVAL;
}

/*
 * ggml.c: the tensor types of GGUF files (ggml's type ids) and the blocks
 * of the block-quantized ones: for each id its name, how many elements a
 * block holds and how many bytes it takes, the safetensors dtype when
 * there is one, and the format-neutral quantization (STFS_Q_*) whose .f32
 * view content/dequant.c computes.  Facts from the GGUF specification and
 * ggml's published block layouts.
 */
#include <stddef.h>

#include "format.h"
#include "ggml.h"

#define N STFS_DTYPE_NONE
static const struct stfs_ggml_type types[] = {
	[0] = { "F32", 1, 4, STFS_DTYPE_F32, 0 },
	[1] = { "F16", 1, 2, STFS_DTYPE_F16, 0 },
	[2] = { "Q4_0", 32, 18, N, STFS_Q4_0 },
	[3] = { "Q4_1", 32, 20, N, STFS_Q4_1 },
	[6] = { "Q5_0", 32, 22, N, STFS_Q5_0 },
	[7] = { "Q5_1", 32, 24, N, STFS_Q5_1 },
	[8] = { "Q8_0", 32, 34, N, STFS_Q8_0 },
	[9] = { "Q8_1", 32, 36, N, 0 },
	[10] = { "Q2_K", 256, 84, N, STFS_Q2_K },
	[11] = { "Q3_K", 256, 110, N, STFS_Q3_K },
	[12] = { "Q4_K", 256, 144, N, STFS_Q4_K },
	[13] = { "Q5_K", 256, 176, N, STFS_Q5_K },
	[14] = { "Q6_K", 256, 210, N, STFS_Q6_K },
	[15] = { "Q8_K", 256, 292, N, STFS_Q8_K },
	[16] = { "IQ2_XXS", 256, 66, N, 0 },
	[17] = { "IQ2_XS", 256, 74, N, 0 },
	[18] = { "IQ3_XXS", 256, 98, N, 0 },
	[19] = { "IQ1_S", 256, 50, N, 0 },
	[20] = { "IQ4_NL", 32, 18, N, 0 },
	[21] = { "IQ3_S", 256, 110, N, 0 },
	[22] = { "IQ2_S", 256, 82, N, 0 },
	[23] = { "IQ4_XS", 256, 136, N, 0 },
	[24] = { "I8", 1, 1, STFS_DTYPE_I8, 0 },
	[25] = { "I16", 1, 2, STFS_DTYPE_I16, 0 },
	[26] = { "I32", 1, 4, STFS_DTYPE_I32, 0 },
	[27] = { "I64", 1, 8, STFS_DTYPE_I64, 0 },
	[28] = { "F64", 1, 8, STFS_DTYPE_F64, 0 },
	[29] = { "IQ1_M", 256, 56, N, 0 },
	[30] = { "BF16", 1, 2, STFS_DTYPE_BF16, 0 },
	[34] = { "TQ1_0", 256, 54, N, 0 },
	[35] = { "TQ2_0", 256, 66, N, 0 },
	[39] = { "MXFP4", 32, 17, N, 0 },
};
#undef N

const struct stfs_ggml_type *stfs_ggml_type(uint32_t id)
{
	if (id >= sizeof(types) / sizeof(types[0]) || !types[id].name)
		return NULL;
	return &types[id];
}

/* The block of a format-neutral quantization (STFS_Q_*): the ggml type's
 * that maps to it, the one table above. */
unsigned stfs_quant_block(unsigned q, unsigned *bytes)
{
	*bytes = 0;
	if (q == STFS_Q_NONE || q >= STFS_Q_COUNT)
		return 0;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		if (types[i].name && types[i].quant == q) {
			*bytes = types[i].bytes;
			return types[i].blck;
		}
	}
	return 0;
}

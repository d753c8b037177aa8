/*
 * dequant.c: the .f32 view of a block-quantized tensor (GGUF's Q4_0,
 * Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q4_K, Q5_K, Q6_K, Q8_K): each block's
 * values as float32, computed from the published block layouts (a half
 * scale d, sometimes a half minimum, packed quants).  Called by the read
 * loop (content.c) on whole blocks once their raw bytes are in, as
 * convert.c is for BF16 and F16.
 */
#include <stdint.h>
#include <string.h>

#include "format.h"
#include "content.h"

static float h(const uint8_t *p)
{
	return stfs_half_to_f32((uint16_t)(p[0] | p[1] << 8));
}

static void q4_0(const uint8_t *b, float *y)
{
	float d = h(b);

	for (int j = 0; j < 16; j++) {
		y[j] = d * (float)((b[2 + j] & 0xf) - 8);
		y[j + 16] = d * (float)((b[2 + j] >> 4) - 8);
	}
}

static void q4_1(const uint8_t *b, float *y)
{
	float d = h(b), m = h(b + 2);

	for (int j = 0; j < 16; j++) {
		y[j] = d * (float)(b[4 + j] & 0xf) + m;
		y[j + 16] = d * (float)(b[4 + j] >> 4) + m;
	}
}

/* Q5_0 and Q5_1: the fifth bits of 32 values in a little-endian word. */
static void q5(const uint8_t *qh4, const uint8_t *qs, float d, float m,
	       int off, float *y)
{
	uint32_t qh = (uint32_t)qh4[0] | (uint32_t)qh4[1] << 8 |
		      (uint32_t)qh4[2] << 16 | (uint32_t)qh4[3] << 24;

	for (int j = 0; j < 16; j++) {
		int x0 = (qs[j] & 0xf) | (int)((qh >> j) & 1) << 4;
		int x1 = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
		y[j] = d * (float)(x0 - off) + m;
		y[j + 16] = d * (float)(x1 - off) + m;
	}
}

static void q8_0(const uint8_t *b, float *y)
{
	float d = h(b);

	for (int j = 0; j < 32; j++)
		y[j] = d * (float)(int8_t)b[2 + j];
}

/* The 6-bit scale and minimum j of a K block's 12 packed bytes. */
static void scale_min(int j, const uint8_t *q, int *sc, int *mn)
{
	if (j < 4) {
		*sc = q[j] & 63;
		*mn = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
		*mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

/* Q2_K: scales[16], qs[64], d, dmin. */
static void q2_k(const uint8_t *b, float *y)
{
	const uint8_t *sc = b, *q = b + 16;
	float d = h(b + 80), mn = h(b + 82);
	int is = 0;

	for (int n = 0; n < 256; n += 128, q += 32) {
		for (int shift = 0; shift < 8; shift += 2) {
			for (int half = 0; half < 2; half++) {
				int s = sc[is++];
				float dl = d * (float)(s & 0xf);
				float ml = mn * (float)(s >> 4);
				for (int l = 0; l < 16; l++)
					*y++ = dl * (float)((q[l + 16 * half] >>
							     shift) & 3) - ml;
			}
		}
	}
}

/* Q4_K: d, dmin, scales[12], qs[128]. */
static void q4_k(const uint8_t *b, float *y)
{
	float d = h(b), mn = h(b + 2);
	const uint8_t *sc = b + 4, *q = b + 16;

	for (int j = 0, is = 0; j < 256; j += 64, q += 32, is += 2) {
		int s1, m1, s2, m2;
		scale_min(is, sc, &s1, &m1);
		scale_min(is + 1, sc, &s2, &m2);
		for (int l = 0; l < 32; l++)
			*y++ = d * (float)s1 * (float)(q[l] & 0xf) -
			       mn * (float)m1;
		for (int l = 0; l < 32; l++)
			*y++ = d * (float)s2 * (float)(q[l] >> 4) -
			       mn * (float)m2;
	}
}

/* Q5_K: d, dmin, scales[12], qh[32], qs[128]. */
static void q5_k(const uint8_t *b, float *y)
{
	float d = h(b), mn = h(b + 2);
	const uint8_t *sc = b + 4, *qh = b + 16, *q = b + 48;
	unsigned u1 = 1, u2 = 2;

	for (int j = 0, is = 0; j < 256; j += 64, q += 32, is += 2) {
		int s1, m1, s2, m2;
		scale_min(is, sc, &s1, &m1);
		scale_min(is + 1, sc, &s2, &m2);
		for (int l = 0; l < 32; l++)
			*y++ = d * (float)s1 * (float)((q[l] & 0xf) +
				(qh[l] & u1 ? 16 : 0)) - mn * (float)m1;
		for (int l = 0; l < 32; l++)
			*y++ = d * (float)s2 * (float)((q[l] >> 4) +
				(qh[l] & u2 ? 16 : 0)) - mn * (float)m2;
		u1 <<= 2;
		u2 <<= 2;
	}
}

/* Q6_K: ql[128], qh[64], scales[16] (signed), d. */
static void q6_k(const uint8_t *b, float *y)
{
	const uint8_t *ql = b, *qh = b + 128;
	const int8_t *sc = (const int8_t *)(b + 192);
	float d = h(b + 208);

	for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32,
	     sc += 8) {
		for (int l = 0; l < 32; l++) {
			int is = l / 16;
			int a = ((ql[l] & 0xf) | ((qh[l] >> 0) & 3) << 4) - 32;
			int c = ((ql[l + 32] & 0xf) | ((qh[l] >> 2) & 3) << 4) -
				32;
			int e = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
			int g = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) -
				32;
			y[l] = d * (float)sc[is] * (float)a;
			y[l + 32] = d * (float)sc[is + 2] * (float)c;
			y[l + 64] = d * (float)sc[is + 4] * (float)e;
			y[l + 96] = d * (float)sc[is + 6] * (float)g;
		}
	}
}

/* Q8_K: a float32 d, qs[256], bsums (unused here). */
static void q8_k(const uint8_t *b, float *y)
{
	float d;

	memcpy(&d, b, 4);
	for (int j = 0; j < 256; j++)
		y[j] = d * (float)(int8_t)b[4 + j];
}

int stfs_quant_dequantizes(unsigned q)
{
	switch (q) {
	case STFS_Q4_0: case STFS_Q4_1: case STFS_Q5_0: case STFS_Q5_1:
	case STFS_Q8_0: case STFS_Q2_K: case STFS_Q4_K: case STFS_Q5_K:
	case STFS_Q6_K: case STFS_Q8_K:
		return 1;
	default:                /* Q3_K: its scales' layout is not done */
		return 0;
	}
}

void stfs_dequant(unsigned quant, const void *src, size_t nblocks,
		  float *dst)
{
	unsigned bytes, elems = stfs_quant_block(quant, &bytes);
	const uint8_t *b = src;

	for (size_t i = 0; i < nblocks; i++, b += bytes, dst += elems) {
		switch (quant) {
		case STFS_Q4_0: q4_0(b, dst); break;
		case STFS_Q4_1: q4_1(b, dst); break;
		case STFS_Q5_0: q5(b + 2, b + 6, h(b), 0, 16, dst); break;
		case STFS_Q5_1: q5(b + 4, b + 8, h(b), h(b + 2), 0, dst); break;
		case STFS_Q8_0: q8_0(b, dst); break;
		case STFS_Q2_K: q2_k(b, dst); break;
		case STFS_Q4_K: q4_k(b, dst); break;
		case STFS_Q5_K: q5_k(b, dst); break;
		case STFS_Q6_K: q6_k(b, dst); break;
		case STFS_Q8_K: q8_k(b, dst); break;
		default: memset(dst, 0, elems * sizeof(float)); break;
		}
	}
}

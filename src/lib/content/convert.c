/*
 * convert.c: exact conversion of the 16- and 8-bit float formats to
 * float32, for the ".f32" views.  Every value of BF16, F16 and the F8
 * formats is a float32, so nothing is rounded.  The formats:
 *   BF16         the top half of a float32
 *   F16          IEEE binary16: bias 15, 10 mantissa bits, inf and NaN
 *   F8_E5M2      the top byte of an F16 (inf and NaN as in IEEE)
 *   F8_E4M3      bias 7, 3 mantissa bits, no inf; S.1111.111 is NaN
 *   F8_E4M3FNUZ  bias 8, no inf, no -0: 0x80 is the only NaN
 *   F8_E5M2FNUZ  bias 16, no inf, no -0: 0x80 is the only NaN
 *   F8_E8M0      an exponent alone: 2^(e - 127); 0xFF is NaN
 * NaNs come out as quiet NaNs of the same sign (F16 keeps its payload).
 * F16 and the 8-bit formats go through tables built once (257 KiB).
 */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "stfs/stfs.h"
#include "content.h"

static float from_bits(uint32_t b)
{
	float f;

	memcpy(&f, &b, sizeof(f));
	return f;
}

static float qnan(int neg)
{
	return from_bits((neg ? 0x80000000u : 0) | 0x7fc00000u);
}

static float f16(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;

	if (exp == 0x1f)    /* inf, or NaN with its payload, made quiet */
		return from_bits(sign | 0x7f800000u | (man << 13) |
				 (man ? 0x400000u : 0));
	if (exp == 0) {     /* zero or subnormal: man * 2^-24, exact */
		float mag = ldexpf((float)man, -24);
		return sign ? -mag : mag;
	}
	return from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

float stfs_half_to_f32(uint16_t h)
{
	return f16(h);
}

/* A small float: 1 sign bit, ebits exponent, mbits mantissa, bias. */
static float small(unsigned v, unsigned ebits, unsigned mbits, int bias)
{
	unsigned man = v & ((1u << mbits) - 1);
	unsigned exp = (v >> mbits) & ((1u << ebits) - 1);
	int neg = (v >> (ebits + mbits)) & 1;
	float mag = exp ? ldexpf((float)((1u << mbits) | man),
				 (int)exp - bias - (int)mbits)
			: ldexpf((float)man, 1 - bias - (int)mbits);

	return neg ? -mag : mag;
}

static float half[65536], e4m3[256], e4m3fnuz[256], e5m2fnuz[256],
	     e8m0[256];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void make_tables(void)
{
	for (unsigned v = 0; v < 65536; v++)
		half[v] = f16((uint16_t)v);
	for (unsigned v = 0; v < 256; v++) {
		e4m3[v] = (v & 0x7f) == 0x7f ? qnan(v & 0x80) :
			  small(v, 4, 3, 7);
		e4m3fnuz[v] = v == 0x80 ? qnan(1) : small(v, 4, 3, 8);
		e5m2fnuz[v] = v == 0x80 ? qnan(1) : small(v, 5, 2, 16);
		e8m0[v] = v == 0xff ? qnan(0) : ldexpf(1.0f, (int)v - 127);
	}
}

static void by_table(const float *tab, const uint8_t *s, size_t n, float *d)
{
	for (size_t i = 0; i < n; i++)
		d[i] = tab[s[i]];
}

void stfs_convert_f32(enum stfs_dtype dt, const void *src, size_t n,
		      float *dst)
{
	const uint8_t *s = src;

	pthread_once(&tables_once, make_tables);
	switch (dt) {
	case STFS_DTYPE_BF16:
		for (size_t i = 0; i < n; i++) {
			uint16_t h = (uint16_t)(s[2 * i] | s[2 * i + 1] << 8);
			dst[i] = from_bits((uint32_t)h << 16);
		}
		return;
	case STFS_DTYPE_F16:
		for (size_t i = 0; i < n; i++)
			dst[i] = half[s[2 * i] | s[2 * i + 1] << 8];
		return;
	case STFS_DTYPE_F8_E5M2:
		for (size_t i = 0; i < n; i++)
			dst[i] = half[s[i] << 8];
		return;
	case STFS_DTYPE_F8_E4M3:
		by_table(e4m3, s, n, dst);
		return;
	case STFS_DTYPE_F8_E4M3FNUZ:
		by_table(e4m3fnuz, s, n, dst);
		return;
	case STFS_DTYPE_F8_E5M2FNUZ:
		by_table(e5m2fnuz, s, n, dst);
		return;
	case STFS_DTYPE_F8_E8M0:
		by_table(e8m0, s, n, dst);
		return;
	default:
		memset(dst, 0, n * sizeof(*dst));
		return;
	}
}

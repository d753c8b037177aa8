/*
 * unorm.c: the key by which two names of a repository are one name to a
 * file system that folds case or normalizes Unicode (macOS's, a Windows
 * client's, git's core.precomposeUnicode): the name's canonical
 * decomposition (Unicode's NFD: the full canonical decomposition of each
 * code point, Hangul syllables by the algorithm of Unicode's chapter
 * 3.12, then combining marks in canonical order), with ASCII letters in
 * lower case.  Two names are canonically equivalent (NFC "café" and NFD
 * "café") exactly when their decompositions are equal.  The facts are
 * in unorm_table.h, written by scripts/gen-unorm.py.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stfs/stfs.h"
#include "format.h"
#include "unorm_table.h"

#define RAW 0x110000u           /* + a byte of no UTF-8 sequence */
#define S_BASE 0xac00u          /* Hangul: chapter 3.12's constants */
#define L_BASE 0x1100u
#define V_BASE 0x1161u
#define T_BASE 0x11a7u
#define V_COUNT 21u
#define T_COUNT 28u
#define S_COUNT 11172u

static unsigned ccc_of(uint32_t c)
{
	size_t lo = 0, hi = sizeof(combining) / sizeof(*combining);

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (c < combining[mid].lo)
			hi = mid;
		else if (c > combining[mid].hi)
			lo = mid + 1;
		else
			return combining[mid].ccc;
	}
	return 0;
}

/* c's full canonical decomposition appended at out: how many. */
static size_t decompose(uint32_t c, uint32_t *out)
{
	size_t lo = 0, hi = sizeof(decomp) / sizeof(*decomp);

	if (c >= S_BASE && c < S_BASE + S_COUNT) {
		uint32_t s = c - S_BASE;

		out[0] = L_BASE + s / (V_COUNT * T_COUNT);
		out[1] = V_BASE + s % (V_COUNT * T_COUNT) / T_COUNT;
		if (!(s % T_COUNT))
			return 2;
		out[2] = T_BASE + s % T_COUNT;
		return 3;
	}
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (c < decomp[mid].cp) {
			hi = mid;
		} else if (c > decomp[mid].cp) {
			lo = mid + 1;
		} else {
			memcpy(out, decomp_cps + decomp[mid].at,
			       decomp[mid].n * sizeof(*out));
			return decomp[mid].n;
		}
	}
	out[0] = c;
	return 1;
}

/* The code point of the well-formed sequence at s (n bytes left) and its
 * length; a byte of none: RAW + it, length 1. */
static size_t next_cp(const unsigned char *s, size_t n, uint32_t *c)
{
	size_t k = s[0] < 0x80 ? 1 : s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : 2;

	if (k == 1) {
		*c = s[0];
		return 1;
	}
	if (k > n || !stfs_utf8_valid((const char *)s, k, NULL)) {
		*c = RAW + s[0];
		return 1;
	}
	*c = k == 2 ? (uint32_t)(s[0] & 0x1f) << 6 | (s[1] & 0x3f) :
	     k == 3 ? (uint32_t)(s[0] & 0x0f) << 12 |
		      (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f) :
		      (uint32_t)(s[0] & 0x07) << 18 |
		      (uint32_t)(s[1] & 0x3f) << 12 |
		      (uint32_t)(s[2] & 0x3f) << 6 | (s[3] & 0x3f);
	return k;
}

static size_t put_utf8(uint32_t c, char *o)
{
	if (c >= RAW) {
		o[0] = (char)(c - RAW);
		return 1;
	}
	if (c < 0x80) {
		o[0] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
		return 1;
	}
	if (c < 0x800) {
		o[0] = (char)(0xc0 | c >> 6);
		o[1] = (char)(0x80 | (c & 0x3f));
		return 2;
	}
	if (c < 0x10000) {
		o[0] = (char)(0xe0 | c >> 12);
		o[1] = (char)(0x80 | (c >> 6 & 0x3f));
		o[2] = (char)(0x80 | (c & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | c >> 18);
	o[1] = (char)(0x80 | (c >> 12 & 0x3f));
	o[2] = (char)(0x80 | (c >> 6 & 0x3f));
	o[3] = (char)(0x80 | (c & 0x3f));
	return 4;
}

char *stfs_name_key(const char *name, size_t len)
{
	/* a code point decomposes into 4 at most (a byte into 1) */
	uint32_t *cp = malloc((len * 4 + 1) * sizeof(*cp));
	const unsigned char *s = (const unsigned char *)name;
	size_t n = 0, o = 0;
	char *out;

	if (!cp)
		return NULL;
	for (size_t i = 0; i < len;) {
		uint32_t c;

		i += next_cp(s + i, len - i, &c);
		n += c >= RAW ? (cp[n] = c, 1) : decompose(c, cp + n);
	}
	/* canonical order: each run of marks sorted by class, stably */
	for (size_t i = 1; i < n; i++) {
		uint32_t c = cp[i];
		unsigned k = c < RAW ? ccc_of(c) : 0;
		size_t j = i;

		while (k && j > 0 && cp[j - 1] < RAW && ccc_of(cp[j - 1]) > k) {
			cp[j] = cp[j - 1];
			j--;
		}
		cp[j] = c;
	}
	if ((out = malloc(n * 4 + 1))) {
		for (size_t i = 0; i < n; i++)
			o += put_utf8(cp[i], out + o);
		out[o] = '\0';
	}
	free(cp);
	return out;
}

/*
 * utf8.c: strict UTF-8 validation of the header bytes (R4), as Rust's
 * std::str::from_utf8 does it: no overlong forms, no encoded surrogates,
 * nothing above U+10FFFF, no truncated sequences.
 */
#include "stfs/stfs.h"

int stfs_utf8_valid(const char *str, size_t len, size_t *bad)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;

	while (i < len) {
		unsigned char c = s[i];
		size_t n;
		unsigned char lo = 0x80, hi = 0xbf;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			n = 1;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 2;
			if (c == 0xe0)
				lo = 0xa0;      /* overlong */
			else if (c == 0xed)
				hi = 0x9f;      /* surrogates */
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 3;
			if (c == 0xf0)
				lo = 0x90;      /* overlong */
			else if (c == 0xf4)
				hi = 0x8f;      /* above U+10FFFF */
		} else {
			goto fail;
		}
		if (len - i <= n)
			goto fail;
		if (s[i + 1] < lo || s[i + 1] > hi)
			goto fail;
		for (size_t k = 2; k <= n; k++)
			if ((s[i + k] & 0xc0) != 0x80)
				goto fail;
		i += n + 1;
	}
	return 1;
fail:
	if (bad)
		*bad = i;
	return 0;
}

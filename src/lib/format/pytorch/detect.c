/*
 * detect.c: the first bytes of a PyTorch checkpoint, the zip of torch >= 1.6
 * or the legacy pickle stream, told apart from a safetensors file's.
 *
 * A safetensors file begins with its header's length, at most 100 MB, so
 * neither magic can begin one whose length passes R2:
 *   zip     "PK\3\4" and any of bytes 4-7 (version, flags) non-zero (a
 *           length over 4 GiB);
 *   pickle  0x80 0x02-0x05 0x8a 0x0a: a protocol, then the 10-byte long
 *           that is legacy torch's magic number (a length over 160 MB);
 *           or, protocol 4 or 5, a FRAME (0x95) of at least 12 bytes
 *           around it (a length over 200 MB).
 */
#include <string.h>

#include "format.h"

int stfs_torch_zip_detect(const unsigned char *p, size_t n)
{
	return n >= 8 && !memcmp(p, "PK\3\4", 4) && (p[4] | p[5] | p[6] | p[7]);
}

int stfs_torch_legacy_detect(const unsigned char *p, size_t n)
{
	if (n < 4 || p[0] != 0x80 || p[1] < 2 || p[1] > 5)
		return 0;
	return (p[2] == 0x8a && p[3] == 0x0a) ||
	       (p[1] >= 4 && p[2] == 0x95 && p[3] >= 0x0c);
}

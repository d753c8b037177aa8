/*
 * names.c: how one component of a tensor name becomes one file name.
 *
 * Tensor names are arbitrary byte strings (R21): they may hold '/', NUL,
 * control bytes, be empty, be "." or "..", or run to megabytes.  A file
 * name may hold none of the first two, must not be "." / ".." / empty, and
 * has at most 255 bytes.  The escaping is percent-encoding with upper-case
 * hex, chosen so that every output is a valid, printable file name, and so
 * that no two different components give the same output except through a
 * 64-bit hash of a component longer than the limit (tree.c resolves even
 * that).  Outputs that begin with '%' and a lower-case letter never come
 * from here: they are reserved for stfs's own files.
 */
#include <string.h>

#include "stfs/stfs.h"
#include "format.h"

/* Leave room for "%h" + 16 hex digits and a "%nK" collision suffix. */
#define KEEP_MAX 200

static int must_escape(unsigned char c, int esc_dots)
{
	return c < 0x20 || c == 0x7f || c == '%' || c == '/' ||
	       (esc_dots && c == '.');
}

/* Length of the UTF-8 sequence led by c (the header is valid UTF-8). */
static size_t seq_len(unsigned char c)
{
	if (c < 0xc0)
		return 1;
	if (c < 0xe0)
		return 2;
	if (c < 0xf0)
		return 3;
	return 4;
}

size_t stfs_name_component(const char *s, size_t len, int esc_dots,
			   char *out)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0, enc = 0;
	uint64_t h;

	if (len == 0) {
		out[0] = '%';
		out[1] = '\0';
		return 1;
	}
	if ((len == 1 && s[0] == '.') ||
	    (len == 2 && s[0] == '.' && s[1] == '.'))
		esc_dots = 1;
	for (size_t i = 0; i < len; i++)
		enc += must_escape((unsigned char)s[i], esc_dots) ? 3 : 1;

	for (size_t i = 0; i < len;) {
		unsigned char c = (unsigned char)s[i];
		size_t n = must_escape(c, esc_dots) ? 1 : seq_len(c);
		size_t w = must_escape(c, esc_dots) ? 3 : n;

		if (i + n > len)        /* only for non-UTF-8 input */
			n = w = len - i;
		if (enc > STFS_NAME_MAX && o + w > KEEP_MAX)
			break;
		if (must_escape(c, esc_dots)) {
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		} else {
			memcpy(out + o, s + i, n);
			o += n;
		}
		i += n;
	}
	if (enc > STFS_NAME_MAX) {
		h = stfs_hash64(s, len);
		out[o++] = '%';
		out[o++] = 'h';
		for (int k = 15; k >= 0; k--)
			out[o++] = "0123456789abcdef"[(h >> (k * 4)) & 15];
	}
	out[o] = '\0';
	return o;
}

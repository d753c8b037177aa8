/*
 * detect.c: which format a file is, from its first bytes (never its
 * name), and the reader that turns its header into a struct stfs_header.
 * GGUF's magic and PyTorch's (a zip, a legacy pickle) cannot begin a
 * safetensors file whose header length passes R2, so they are tried
 * first; safetensors takes everything else and its own rules refuse what
 * is not one.
 */
#include "format.h"

static int any(const unsigned char *p, size_t n)
{
	(void)p;
	return n >= 8;
}

static const struct stfs_format formats[] = {
	{ "gguf", stfs_gguf_detect, stfs_gguf_read, 0 },
	{ "pytorch", stfs_torch_zip_detect, stfs_torch_read, 0 },
	{ "pytorch", stfs_torch_legacy_detect, stfs_torch_read, 0 },
	{ "safetensors", any, stfs_safetensors_read, 1 },
};

const struct stfs_format *stfs_format_of(const unsigned char *p, size_t n)
{
	size_t last = sizeof(formats) / sizeof(*formats) - 1;

	for (size_t i = 0; i < last; i++)
		if (formats[i].detect(p, n))
			return &formats[i];
	return &formats[last];
}

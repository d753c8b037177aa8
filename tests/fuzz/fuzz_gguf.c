/*
 * fuzz_gguf.c: libFuzzer harness for the GGUF reader (format/gguf.c) and
 * the foreign tensor table it fills (format/table.c).  The input is a
 * whole file.  Whatever it is, the reader must not crash, leak, hang or
 * read out of bounds; a refusal has a message and a negative code; an
 * accepted file's tensors lie inside it, do not overlap, and are as many
 * bytes as their type and shape say; every view's .f32 dequantization of
 * the first blocks runs on the bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "ggml.h"
#include "content.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_tensor(const struct stfs_tensor *t, const uint8_t *data,
			 size_t size)
{
	const struct stfs_foreign *f = t->foreign;
	unsigned bytes, elems;
	float out[256];

	if (!f || t->begin > t->end || t->end > size)
		abort();
	if (t->dtype != STFS_DTYPE_NONE &&
	    stfs_tensor_elements(t) * (stfs_dtype_bits(t->dtype) / 8) !=
	    t->end - t->begin)
		abort();
	elems = stfs_quant_block(f->quant, &bytes);
	if (elems && stfs_quant_dequantizes(f->quant) &&
	    t->end - t->begin >= bytes)
		stfs_dequant(f->quant, data + t->begin, 1, out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct stfs_reader r;
	struct stfs_header *h;
	struct stfs_error err;
	uint64_t hl, reach = 0;

	memset(&err, 0, sizeof(err));
	stfs_reader_mem(&r, data, size, "fuzz.gguf");
	if (stfs_gguf_read(&r, &h, &hl, &err) < 0) {
		if (!err.msg[0] || err.code >= 0 || h)
			abort();
		return 0;
	}
	for (size_t i = 0; i < stfs_header_count(h); i++) {
		const struct stfs_tensor *t = stfs_header_tensor(h, i);

		check_tensor(t, data, size);
		if (t->begin != t->end) {
			if (t->begin < reach)
				abort();
			reach = t->end;
		}
		if (!stfs_header_tensor_by_name(h, i))
			abort();
	}
	for (size_t i = 0; i < stfs_header_kv_count(h); i++)
		if (!stfs_header_kv(h, i)->value)
			abort();
	stfs_header_free(h);
	return 0;
}

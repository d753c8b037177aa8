/*
 * fuzz_zip.c: libFuzzer harness for the zip reader and, through it, the
 * whole zip checkpoint path (data.pkl, byteorder, the storages).  The
 * input is a whole file, read through the byte-source callback; the reader
 * must not crash, leak, read out of bounds or out of the file, and what it
 * accepts must hold: every record's data inside the file and before the
 * central directory, every tensor's storage inside the file; and the
 * remote path (no read_local) must accept exactly what the local one does,
 * placing every record at the same offset.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "torch.h"

struct buf {
	const uint8_t *p;
	size_t n;
};

static int rd(void *ctx, void *out, size_t n, uint64_t off)
{
	const struct buf *b = ctx;

	if (off > b->n || n > b->n - off)
		abort();   /* the reader asked for bytes past the file */
	memcpy(out, b->p + off, n);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct buf b = {data, size};
	struct stfs_error err;
	struct stfs_zip z, zl[2];
	struct stfs_torch *t;
	int ok[2];

	/* the remote path (0) and the local one (1) accept the same files
	 * and place every record at the same offset */
	for (int local = 0; local < 2; local++)
		ok[local] = stfs_zip_open(rd, &b, size, local, "f", &zl[local],
					  &err) == 0;
	if (ok[0] != ok[1])
		abort();
	for (size_t i = 0; ok[0] && i < zl[0].n; i++)
		if (zl[0].e[i].data != zl[1].e[i].data)
			abort();
	if (ok[0]) {
		stfs_zip_free(&zl[0]);
		stfs_zip_free(&zl[1]);
	}
	for (int local = 0; local < 2; local++) {
		if (stfs_zip_open(rd, &b, size, local, "f", &z, &err) == 0) {
			for (size_t i = 0; i < z.n; i++)
				if (z.e[i].data > z.cd_off ||
				    z.e[i].size > z.cd_off - z.e[i].data)
					abort();
			stfs_zip_free(&z);
		} else if (!err.msg[0] || err.code >= 0) {
			abort();
		}
		if (stfs_torch_open(rd, &b, size, local, "f", &t, &err) == 0) {
			for (size_t i = 0; i < t->nt; i++)
				if (t->t[i].st_begin > size ||
				    t->t[i].st_len > size - t->t[i].st_begin)
					abort();
			stfs_torch_free(t);
		}
	}
	/* and the table a mount uses: every size in it sane (views within
	 * their limit, never a wrapped size) */
	{
		struct stfs_reader r;
		struct stfs_header *h;
		uint64_t hl;

		stfs_reader_mem(&r, data, size, "f");
		if (stfs_torch_read(&r, &h, &hl, &err) == 0) {
			for (size_t i = 0; i < stfs_header_count(h); i++)
				if (stfs_tensor_bytes(stfs_header_tensor(h, i))
				    > (size > STFS_VIEW_BYTES_FLOOR ?
				       size : STFS_VIEW_BYTES_FLOOR))
					abort();
			stfs_header_free(h);
		}
	}
	return 0;
}

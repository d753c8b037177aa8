/*
 * fuzz_pickle.c: libFuzzer harness for the pickle interpreter and the walk
 * to a tensor list.  The input is run as one pickle (torch patterns on and
 * off), and as a whole file, which reaches the legacy format's layout and
 * storages when it starts with torch's legacy magic (the seeds do).
 * Nothing may crash, leak, hang or read out of bounds; an accepted
 * checkpoint's tensors must lie inside the file and inside their
 * storages.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "torch.h"

struct buf {
	const uint8_t *p;
	size_t n;
};

static int rd(void *ctx, void *out, size_t n, uint64_t off)
{
	const struct buf *b = ctx;

	if (off > b->n || n > b->n - off)
		abort();
	memcpy(out, b->p + off, n);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct buf b = {data, size};
	struct stfs_error err;
	struct stfs_pk *pk;
	struct stfs_pk_val *root;
	struct stfs_torch *t;

	for (int torch = 0; torch < 2; torch++) {
		int rc = stfs_pk_run(data, size, 0, torch, "f", &pk, &root,
				     &err);

		if (rc == 0 && (!root || stfs_pk_used(pk) > size))
			abort();
		if (rc && (!err.msg[0] || err.code >= 0))
			abort();
		stfs_pk_free(pk);
	}
	if (stfs_torch_open(rd, &b, size, 1, "f", &t, &err) == 0) {
		for (size_t i = 0; i < t->nt; i++) {
			const struct stfs_torch_tensor *x = &t->t[i];

			if (x->st_begin > size || x->st_len > size - x->st_begin)
				abort();
			if (x->nbytes && x->offset * x->elem_size >= x->st_len)
				abort();
		}
		stfs_torch_free(t);
	}
	return 0;
}

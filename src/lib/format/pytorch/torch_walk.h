/*
 * torch_walk.h: what torch.c hands torch_walk.c: the interpreted object
 * pickle, where the storages are (the zip directory, or the legacy
 * format's storage table), and the list being filled.  Private to the
 * format layer.
 */
#ifndef STFS_TORCH_WALK_H
#define STFS_TORCH_WALK_H

#include "torch.h"

/* A legacy storage: its key, element size and bytes in the file. */
struct stfs_torch_legacy {
	const char *key;
	size_t key_len;
	uint64_t begin, numel;
	unsigned esize;
};

struct stfs_torch_walk {
	enum stfs_torch_kind kind;
	const char *name;
	struct stfs_error *err;
	struct stfs_torch *out;
	struct stfs_pk *pk;
	struct stfs_pk_val *root;
	uint64_t pickle_off, pickle_len;
	unsigned char *pickle_buf;
	struct stfs_zip zip;           /* ZIP */
	char prefix[4097];
	size_t prefix_len;
	struct stfs_torch_legacy *legacy;   /* LEGACY */
	size_t nlegacy;
	/* the walk */
	char *key;
	size_t key_len, key_cap;
	uint64_t visits, name_bytes;
	size_t cap_t, cap_v, cap_o;
};

/* Walk w->root into w->out, placing and checking every tensor. */
int stfs_torch_walk(struct stfs_torch_walk *w);

/* Place the legacy storages named by the key list: they start at pos,
 * each an 8-byte element count and the elements.  buf holds the file's
 * first buf_len bytes; the rest is read through rd. */
int stfs_torch_legacy_storages(struct stfs_torch_walk *w,
			       struct stfs_pk_val *keys, uint64_t pos,
			       const unsigned char *buf, size_t buf_len,
			       stfs_read_fn rd, void *ctx, uint64_t size,
			       const char *name, struct stfs_error *err);

/* For each of dict d's entries, the entry whose value its key takes
 * (its own, or the last one Python holds equal to it), or SIZE_MAX when
 * an earlier entry's key is the same key (torch_keys.c).  *out is
 * malloc'd; -ENOMEM. */
int stfs_torch_dict_winners(const struct stfs_pk_val *d, size_t **out);
/* A dict key as a name segment, as Python writes it (in buf, or the
 * key's own bytes): 0; or 1 and *why (a float NaN, a tuple, ...). */
int stfs_torch_key_seg(const struct stfs_pk_val *k, char *buf, size_t bn,
		       const char **s, size_t *n, const char **why);

#endif

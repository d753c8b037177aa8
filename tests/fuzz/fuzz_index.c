/*
 * fuzz_index.c: libFuzzer harness for the index.json reader.  The input is
 * the index text.  Whatever it is, the reader must not crash, leak or read
 * out of bounds; when it accepts, every entry has a tensor name and a plain
 * shard name, and the shard list is sorted, distinct and holds exactly the
 * shards the entries name.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "index.h"

static int plain(const char *s)
{
	return *s && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct stfs_index ix;
	struct stfs_error err;

	if (stfs_index_parse((const char *)data, size, &ix, &err) < 0) {
		if (!err.msg[0] || err.code >= 0)
			abort();
		return 0;
	}
	for (size_t i = 0; i < ix.nshards; i++) {
		if (!plain(ix.shards[i]))
			abort();
		if (i && strcmp(ix.shards[i - 1], ix.shards[i]) >= 0)
			abort();
	}
	for (size_t i = 0; i < ix.nentries; i++) {
		const char *s = ix.entries[i].shard;

		if (!ix.entries[i].name || !plain(s))
			abort();
		if (!bsearch(&s, ix.shards, ix.nshards, sizeof(*ix.shards),
			     cmp_str))
			abort();
	}
	stfs_index_free(&ix);
	return 0;
}

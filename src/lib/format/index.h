/*
 * index.h: the weight map of a "*.index.json" file, parsed from memory.
 * Internal to libstfs (shards.c and the index fuzzer use it).
 */
#ifndef STFS_INDEX_H
#define STFS_INDEX_H

#include <json-c/json.h>
#include <stddef.h>

#include "stfs/stfs.h"

struct stfs_index_entry {
	const char *name;   /* tensor name, NUL-terminated, owned by root */
	const char *shard;  /* plain file name in the index's directory */
};

struct stfs_index {
	json_object *root;
	json_object *meta;             /* "metadata" object, or NULL */
	struct stfs_index_entry *entries;
	size_t nentries;
	const char **shards;           /* distinct shard names, sorted */
	size_t nshards;
};

/*
 * Parse len bytes of index JSON.  Refuses text that is not one strict JSON
 * object, a missing "weight_map" object, a value that is not a string, a
 * shard name that is not a plain file name, and any \u0000 escape (json-c
 * keys are C strings, so such a name could not be kept exactly).
 */
int stfs_index_parse(const char *text, size_t len, struct stfs_index *ix,
		     struct stfs_error *err);
void stfs_index_free(struct stfs_index *ix);

#endif

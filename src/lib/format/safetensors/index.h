/*
 * index.h: the weight map of a "*.index.json" file, parsed from memory.
 * Internal to libstfs (shards.c and the index fuzzer use it).  No json-c
 * type shows here: the layers above see only C strings (the model layer is
 * built with json-c's identifiers poisoned, src/lib/meson.build).
 */
#ifndef STFS_INDEX_H
#define STFS_INDEX_H

#include <stddef.h>

#include "stfs/stfs.h"

struct stfs_index_entry {
	const char *name;   /* tensor name, NUL-terminated, owned by doc */
	const char *shard;  /* plain file name in the index's directory */
};

struct stfs_index {
	struct stfs_index_entry *entries;
	size_t nentries;
	const char **shards;           /* distinct shard names, sorted */
	size_t nshards;
	/* The "metadata" object, if it is one (else NULL and 0): as plain
	 * JSON, and as pairs (key, a string's value or else the value's
	 * JSON), each key and value its own malloc'd, NUL-terminated string.
	 * A caller may take them, leaving NULL and 0 behind. */
	char *meta_json;
	size_t meta_json_len;
	struct stfs_meta *meta;
	size_t nmeta;
	void *doc;                     /* the parsed document (owns names) */
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

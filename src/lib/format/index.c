/*
 * index.c: reads the weight map of a sharded checkpoint's index.json.
 *
 * json-c parses the text (strict mode, UTF-8 checked); this file adds what
 * json-c does not: the whole text must be consumed, a NUL escape anywhere
 * is refused, and every shard name must be a plain file name (no '/', no
 * "." or "..").  The index only routes names to files; every byte served is
 * still checked by the strict header parser of the shard itself.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "index.h"

#define QMAX 160

static int plain_name(const char *s)
{
	return *s && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* 1 if a string in text holds the escape \u0000 (backslashes paired). */
static int has_nul_escape(const char *text, size_t len)
{
	for (size_t i = 0; i + 1 < len; i++) {
		if (text[i] != '\\')
			continue;
		if (text[i + 1] == 'u' && i + 5 < len &&
		    memcmp(text + i + 2, "0000", 4) == 0)
			return 1;
		i++;    /* skip the escaped character */
	}
	return 0;
}

int stfs_index_parse(const char *text, size_t len, struct stfs_index *ix,
		     struct stfs_error *err)
{
	struct json_tokener *tok;
	json_object *wm;
	char q[QMAX], q2[QMAX];
	size_t n = 0;
	int rc = 0;

	memset(ix, 0, sizeof(*ix));
	if (len > INT32_MAX)
		return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
				 "the index is over 2 GiB");
	if (has_nul_escape(text, len))
		return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
				 "invalid index JSON: a name holds \\u0000");
	tok = json_tokener_new_ex(JSON_TOKENER_DEFAULT_DEPTH);
	if (!tok)
		return stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET,
				 "out of memory");
#ifdef JSON_TOKENER_VALIDATE_UTF8
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT |
			       JSON_TOKENER_VALIDATE_UTF8);
#else
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
#endif
	ix->root = json_tokener_parse_ex(tok, text, (int)len);
	if (!ix->root || json_tokener_get_parse_end(tok) < len) {
		rc = stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
			       "invalid index JSON: %s",
			       ix->root ? "trailing characters" :
			       json_tokener_error_desc(
				       json_tokener_get_error(tok)));
		json_tokener_free(tok);
		goto fail;
	}
	json_tokener_free(tok);
	if (!json_object_is_type(ix->root, json_type_object) ||
	    !json_object_object_get_ex(ix->root, "weight_map", &wm) ||
	    !json_object_is_type(wm, json_type_object)) {
		rc = stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
			       "invalid index JSON: no \"weight_map\" object");
		goto fail;
	}
	if (json_object_object_get_ex(ix->root, "metadata", &ix->meta) &&
	    !json_object_is_type(ix->meta, json_type_object))
		ix->meta = NULL;

	n = (size_t)json_object_object_length(wm);
	ix->entries = calloc(n + 1, sizeof(*ix->entries));
	ix->shards = calloc(n + 1, sizeof(*ix->shards));
	if (!ix->entries || !ix->shards) {
		rc = stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET,
			       "out of memory");
		goto fail;
	}
	json_object_object_foreach(wm, key, val) {
		const char *s;

		if (!json_object_is_type(val, json_type_string)) {
			rc = stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
				       "invalid index JSON: weight_map[\"%s\"]"
				       " is not a file name",
				       stfs_quote(key, strlen(key), q, QMAX));
			goto fail;
		}
		s = json_object_get_string(val);
		if (!plain_name(s)) {
			rc = stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
				       "index names \"%s\" for tensor \"%s\": "
				       "shards must be plain file names in "
				       "the index's directory",
				       stfs_quote(s, strlen(s), q, QMAX),
				       stfs_quote(key, strlen(key), q2, QMAX));
			goto fail;
		}
		ix->entries[ix->nentries].name = key;
		ix->entries[ix->nentries++].shard = s;
		ix->shards[ix->nshards++] = s;
	}
	qsort(ix->shards, ix->nshards, sizeof(*ix->shards), cmp_str);
	n = 0;
	for (size_t i = 0; i < ix->nshards; i++)
		if (!n || strcmp(ix->shards[i], ix->shards[n - 1]))
			ix->shards[n++] = ix->shards[i];
	ix->nshards = n;
	return 0;
fail:
	stfs_index_free(ix);
	return rc;
}

void stfs_index_free(struct stfs_index *ix)
{
	if (!ix)
		return;
	free(ix->entries);
	free(ix->shards);
	json_object_put(ix->root);
	memset(ix, 0, sizeof(*ix));
}

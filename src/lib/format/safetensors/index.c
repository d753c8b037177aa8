/*
 * index.c: reads the weight map of a sharded checkpoint's index.json.
 *
 * json-c parses the text (strict mode, UTF-8 checked); this file adds what
 * json-c does not: the whole text must be consumed, a NUL escape anywhere
 * is refused, and every shard name must be a plain file name (no '/', no
 * "." or "..").  The index only routes names to files; every byte served is
 * still checked by the strict header parser of the shard itself.  The
 * index's "metadata" is handed up as C strings: json-c stays in this layer.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

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

/* The text as one strict JSON value, all of it consumed: 0 or -EINVAL. */
static int parse_text(const char *text, size_t len, json_object **root,
		      struct stfs_error *err)
{
	struct json_tokener *tok;

	*root = NULL;
	if (len > INT32_MAX)
		return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
				 "the index is over 2 GiB");
	if (has_nul_escape(text, len))
		return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
				 "invalid index JSON: a name holds \\u0000");
	tok = json_tokener_new_ex(JSON_TOKENER_DEFAULT_DEPTH);
	if (!tok)
		return stfs_nomem(err);
#ifdef JSON_TOKENER_VALIDATE_UTF8
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT |
			       JSON_TOKENER_VALIDATE_UTF8);
#else
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
#endif
	*root = json_tokener_parse_ex(tok, text, (int)len);
	if (!*root || json_tokener_get_parse_end(tok) < len) {
		int rc = stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
				   "invalid index JSON: %s",
				   *root ? "trailing characters" :
				   json_tokener_error_desc(
					   json_tokener_get_error(tok)));
		json_tokener_free(tok);
		json_object_put(*root);
		*root = NULL;
		return rc;
	}
	json_tokener_free(tok);
	return 0;
}

/* The weight map's entries, and the distinct shards they name. */
static int read_weight_map(json_object *wm, struct stfs_index *ix,
			   struct stfs_error *err)
{
	size_t n = (size_t)json_object_object_length(wm);
	char q[QMAX], q2[QMAX];

	ix->entries = calloc(n + 1, sizeof(*ix->entries));
	ix->shards = calloc(n + 1, sizeof(*ix->shards));
	if (!ix->entries || !ix->shards)
		return stfs_nomem(err);
	json_object_object_foreach(wm, key, val) {
		const char *s;

		if (!json_object_is_type(val, json_type_string))
			return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
					 "invalid index JSON: weight_map[\"%s\"]"
					 " is not a file name",
					 stfs_quote(key, strlen(key), q, QMAX));
		s = json_object_get_string(val);
		if (!plain_name(s))
			return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
					 "index names \"%s\" for tensor \"%s\": "
					 "shards must be plain file names in "
					 "the index's directory",
					 stfs_quote(s, strlen(s), q, QMAX),
					 stfs_quote(key, strlen(key), q2, QMAX));
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
}

/* The "metadata" object as plain JSON and as string pairs (a string's
 * value, else the value's JSON). */
static int keep_meta(json_object *meta, struct stfs_index *ix,
		     struct stfs_error *err)
{
	const int plain = JSON_C_TO_STRING_PLAIN |
			  JSON_C_TO_STRING_NOSLASHESCAPE;
	const char *s;
	size_t len;

	s = json_object_to_json_string_length(meta, plain, &len);
	ix->meta = calloc((size_t)json_object_object_length(meta) + 1,
			  sizeof(*ix->meta));
	if (!s || !ix->meta || !(ix->meta_json = strndup(s, len)))
		return stfs_nomem(err);
	ix->meta_json_len = len;
	json_object_object_foreach(meta, key, val) {
		struct stfs_meta *e = &ix->meta[ix->nmeta];
		const char *v = json_object_is_type(val, json_type_string) ?
			json_object_get_string(val) :
			json_object_to_json_string_ext(val, plain);

		e->key = strdup(key);
		e->value = v ? strdup(v) : NULL;
		if (!e->key || !e->value) {
			free((char *)e->key);
			free((char *)e->value);
			return stfs_nomem(err);
		}
		e->key_len = strlen(e->key);
		e->value_len = strlen(e->value);
		ix->nmeta++;
	}
	return 0;
}

int stfs_index_parse(const char *text, size_t len, struct stfs_index *ix,
		     struct stfs_error *err)
{
	json_object *root, *wm, *meta;
	int rc;

	memset(ix, 0, sizeof(*ix));
	if ((rc = parse_text(text, len, &root, err)))
		return rc;
	ix->doc = root;
	if (!json_object_is_type(root, json_type_object) ||
	    !json_object_object_get_ex(root, "weight_map", &wm) ||
	    !json_object_is_type(wm, json_type_object)) {
		rc = stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
			       "invalid index JSON: no \"weight_map\" object");
		goto fail;
	}
	if ((rc = read_weight_map(wm, ix, err)))
		goto fail;
	if (json_object_object_get_ex(root, "metadata", &meta) &&
	    json_object_is_type(meta, json_type_object) &&
	    (rc = keep_meta(meta, ix, err)))
		goto fail;
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
	free(ix->meta_json);
	for (size_t i = 0; i < ix->nmeta; i++) {
		free((char *)ix->meta[i].key);
		free((char *)ix->meta[i].value);
	}
	free(ix->meta);
	json_object_put(ix->doc);
	memset(ix, 0, sizeof(*ix));
}

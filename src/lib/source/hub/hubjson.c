/*
 * hubjson.c: the Hub's JSON answers (the revision API's commit, the tree
 * API's files), read with json-c and checked: nothing of an answer is
 * used before its type is.  Fuzzed by tests/fuzz/fuzz_remote.c.
 */
#include <ctype.h>
#include <errno.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "hub.h"

/* Is s n lower-case hex digits, and no more? */
static int hex_of(const char *s, size_t n)
{
	size_t i = 0;

	for (; s[i]; i++)
		if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
			return 0;
	return i == n;
}

int stfs_hf_is_sha(const char *s)
{
	return hex_of(s, 40);
}

int stfs_hub_parse_sha(const char *json, size_t len, char sha[41])
{
	json_tokener *tok = json_tokener_new();
	json_object *j, *v;
	int rc = -EINVAL;

	if (!tok)
		return -ENOMEM;
	j = json_tokener_parse_ex(tok, json, (int)(len > INT_MAX ? INT_MAX :
						   len));
	if (j && json_object_is_type(j, json_type_object) &&
	    json_object_object_get_ex(j, "sha", &v) &&
	    json_object_is_type(v, json_type_string) &&
	    stfs_hf_is_sha(json_object_get_string(v))) {
		memcpy(sha, json_object_get_string(v), 41);
		rc = 0;
	}
	json_object_put(j);
	json_tokener_free(tok);
	return rc;
}

int stfs_hub_parse_tree(const char *json, size_t len,
			int (*file)(void *arg, const char *path,
				    const char *etag, uint64_t size),
			void *arg)
{
	json_tokener *tok = json_tokener_new();
	json_object *j;
	int rc = -EINVAL;

	if (!tok)
		return -ENOMEM;
	j = json_tokener_parse_ex(tok, json, (int)(len > INT_MAX ? INT_MAX :
						   len));
	if (!j || !json_object_is_type(j, json_type_array))
		goto out;
	rc = 0;
	for (size_t i = 0; !rc && i < json_object_array_length(j); i++) {
		json_object *e = json_object_array_get_idx(j, i), *t, *p, *o,
			    *lfs, *sz;
		const char *etag = NULL;
		int64_t size = 0;

		if (!json_object_is_type(e, json_type_object) ||
		    !json_object_object_get_ex(e, "type", &t) ||
		    !json_object_object_get_ex(e, "path", &p) ||
		    !json_object_is_type(t, json_type_string) ||
		    !json_object_is_type(p, json_type_string)) {
			rc = -EINVAL;
			break;
		}
		/* (a path with a NUL in it is no path: never shown) */
		if (strcmp(json_object_get_string(t), "file") != 0 ||
		    strlen(json_object_get_string(p)) !=
		    (size_t)json_object_get_string_len(p))
			continue;
		/* the Hub's ETag: the LFS object's sha256 (64 lower-case
		 * hex), else the blob's sha1 (40); one that is not, of a
		 * server that may be hostile, is malformed (never shown
		 * or compared: "") */
		if (json_object_object_get_ex(e, "lfs", &lfs) && lfs) {
			etag = json_object_is_type(lfs, json_type_object) &&
			       json_object_object_get_ex(lfs, "oid", &o) &&
			       json_object_is_type(o, json_type_string) &&
			       hex_of(json_object_get_string(o), 64) ?
			       json_object_get_string(o) : "";
		} else if (json_object_object_get_ex(e, "oid", &o) && o) {
			etag = json_object_is_type(o, json_type_string) &&
			       hex_of(json_object_get_string(o), 40) ?
			       json_object_get_string(o) : "";
		}
		if (json_object_object_get_ex(e, "size", &sz) &&
		    json_object_is_type(sz, json_type_int))
			size = json_object_get_int64(sz);
		rc = file(arg, json_object_get_string(p), etag,
			  size > 0 ? (uint64_t)size : 0);
	}
out:
	json_object_put(j);
	json_tokener_free(tok);
	return rc;
}

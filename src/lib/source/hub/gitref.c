/*
 * gitref.c: the revisions of hf://ORG/NAME@REVISION stfs accepts.  A
 * revision names a file under the Hugging Face cache's refs/ folder
 * (offline) and goes into the Hub's URLs, so it must be what git itself
 * accepts as a ref name (git-check-ref-format(1)) or a commit: nothing
 * that climbs out of refs/ ("..", a leading '/'), no control byte, and
 * no '%' (the only escape taken, %2F, is decoded before this check).
 */
#include <string.h>

#include "format.h"
#include "hub.h"

#define REV_MAX 255

/* One '/'-separated component of a ref name: 1 if git allows it. */
static int component_ok(const char *c, size_t n, const char **why)
{
	if (!n) {
		*why = "an empty part (a leading, trailing or double '/')";
		return 0;
	}
	if (c[0] == '.') {
		*why = "a part that starts with '.'";
		return 0;
	}
	if (n >= 5 && memcmp(c + n - 5, ".lock", 5) == 0) {
		*why = "a part that ends with .lock";
		return 0;
	}
	return 1;
}

int stfs_hub_rev_ok(const char *rev, const char **why)
{
	size_t len = strlen(rev);
	const char *c = rev;

	*why = NULL;
	if (!len || len > REV_MAX) {
		*why = len ? "longer than 255 bytes" : "empty";
		return 0;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char b = (unsigned char)rev[i];

		if (b <= 0x20 || b == 0x7f) {
			*why = "a control character or a space in it";
			return 0;
		}
		if (strchr("~^:?*[\\%", b)) {
			*why = "one of ~ ^ : ? * [ \\ % in it";
			return 0;
		}
	}
	if (strstr(rev, "..")) {
		*why = "\"..\" in it";
		return 0;
	}
	if (strstr(rev, "@{") || !strcmp(rev, "@")) {
		*why = "\"@{\" in it, or only \"@\"";
		return 0;
	}
	if (rev[len - 1] == '.') {
		*why = "a trailing '.'";
		return 0;
	}
	for (;;) {
		const char *e = strchr(c, '/');
		size_t n = e ? (size_t)(e - c) : strlen(c);

		if (!component_ok(c, n, why))
			return 0;
		if (!e)
			return 1;
		c = e + 1;
	}
}

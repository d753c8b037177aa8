/*
 * hfcache.c: the Hugging Face tools' conventions that hf:// follows (the
 * token from HF_TOKEN, HUGGING_FACE_HUB_TOKEN, HF_TOKEN_PATH or
 * $HF_HOME/token; HF_HUB_CACHE, default $HF_HOME/hub), and the Hugging
 * Face cache read offline: a revision through its refs, the files of a
 * snapshot (whose links name their blobs, the files' ETags).  stfs never
 * writes into that cache.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format.h"
#include "hub.h"

static char *hf_home(void)
{
	const char *v;
	char *s = NULL;

	if ((v = stfs_env("HF_HOME")))
		return strdup(v);
	if ((v = stfs_env("XDG_CACHE_HOME")))
		return asprintf(&s, "%s/huggingface", v) < 0 ? NULL : s;
	return asprintf(&s, "%s/.cache/huggingface", stfs_env("HOME") ?
			stfs_env("HOME") : "/root") < 0 ? NULL : s;
}

/* The first line of a file, trimmed; NULL if none. */
static char *first_line(const char *path)
{
	FILE *f = fopen(path, "re");
	char buf[4096], *s = NULL;
	size_t n;

	if (!f)
		return NULL;
	if (fgets(buf, sizeof(buf), f)) {
		n = strlen(buf);
		while (n && isspace((unsigned char)buf[n - 1]))
			buf[--n] = '\0';
		if (n)
			s = strdup(buf);
	}
	fclose(f);
	return s;
}

char *stfs_hf_token(void)
{
	const char *v;
	char *home, *path = NULL, *t;

	if ((v = stfs_env("HF_TOKEN")) ||
	    (v = stfs_env("HUGGING_FACE_HUB_TOKEN")))
		return strdup(v);
	if ((v = stfs_env("HF_TOKEN_PATH")))
		return first_line(v);
	if (!(home = hf_home()) || asprintf(&path, "%s/token", home) < 0) {
		free(home);
		return NULL;
	}
	free(home);
	t = first_line(path);
	free(path);
	return t;
}

int stfs_hf_truthy(const char *v)
{
	return v && (!strcmp(v, "1") || !strcasecmp(v, "on") ||
		     !strcasecmp(v, "yes") || !strcasecmp(v, "true"));
}

/* The repo's folder in the Hugging Face cache:
 * $HF_HUB_CACHE/models--ORG--NAME (or datasets--...). */
char *stfs_hf_repo_cache(const struct hf *h)
{
	const char *v = stfs_env("HF_HUB_CACHE");
	const char *slash = strchr(h->repo, '/');
	const char *kind = h->dataset ? "datasets" : "models";
	char *home = NULL, *s = NULL;
	int n;

	if (!v && !(home = hf_home()))
		return NULL;
	n = asprintf(&s, "%s%s/%s--%.*s--%s", v ? v : home, v ? "" : "/hub",
		     kind, (int)(slash - h->repo), h->repo, slash + 1);
	free(home);
	return n < 0 ? NULL : s;
}

int stfs_hf_resolve_cached(struct hf *h, struct stfs_error *err)
{
	char *path = NULL, *sha;

	if (stfs_hf_is_sha(h->rev)) {
		memcpy(h->sha, h->rev, 41);
		return 0;
	}
	if (!h->cache || asprintf(&path, "%s/refs/%s", h->cache, h->rev) < 0)
		return stfs_nomem(err);
	sha = first_line(path);
	if (!sha || !stfs_hf_is_sha(sha)) {
		stfs_fail(err, -ENOENT, NULL, STFS_NO_OFFSET, "offline, and "
			  "revision %s is not in the Hugging Face cache (%s)",
			  h->rev, path);
		free(path);
		free(sha);
		return -ENOENT;
	}
	memcpy(h->sha, sha, 41);
	free(sha);
	free(path);
	return 0;
}

/* The ETag of a cached file: the name of the blob its link points to. */
static void blob_of(const char *path, char *out, size_t outsz)
{
	char target[PATH_MAX];
	ssize_t n = readlink(path, target, sizeof(target) - 1);
	const char *b;

	out[0] = '\0';
	if (n <= 0)
		return;
	target[n] = '\0';
	b = strrchr(target, '/');
	b = b ? b + 1 : target;
	if (strlen(b) < outsz)
		memcpy(out, b, strlen(b) + 1);
}

int stfs_hf_list_cached(struct hf *h, const char *snap, int depth,
		       const char *rel, struct stfs_error *err)
{
	DIR *d = opendir(snap);
	struct dirent *de;
	int rc = 0;

	if (!d)
		return depth ? 0 : stfs_fail(err, -ENOENT, NULL,
			STFS_NO_OFFSET, "offline, and not in the Hugging "
			"Face cache: %s", snap);
	while (!rc && (de = readdir(d))) {
		char *p = NULL, etag[256];
		struct stat st;

		if (de->d_name[0] == '.' ||
		    asprintf(&p, "%s/%s", snap, de->d_name) < 0)
			continue;
		if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
			if (!depth)
				rc = stfs_hf_list_cached(h, p, 1, de->d_name, err);
		} else if (!depth) {
			blob_of(p, etag, sizeof(etag));
			rc = stfs_hf_push(h, de->d_name, etag) ? stfs_nomem(err) : 0;
		} else if (strstr(de->d_name, ".safetensors")) {
			rc = stfs_hf_push_dir(h, rel, strlen(rel)) ? stfs_nomem(err) : 0;
		}
		free(p);
	}
	closedir(d);
	return rc;
}

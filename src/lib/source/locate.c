/*
 * locate.c: the locator.  It turns the SOURCE argument into a location:
 * one file, an index file with its shards beside it, or a directory of
 * shards with no index.  It is the only place that looks at the argument
 * itself (stat, realpath, the directory listing); everything above opens
 * files by name through stfs_location_open().  A URL goes to the service
 * that claims its scheme (struct stfs_service, locate.h), from the table
 * the locator's owner gives it (services.c): the locator names none.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include "format.h"
#include "scheme.h"
#include "auth.h"
#include "locate.h"
#include "rlist.h"
#include "http/http.h"

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int push(char ***list, size_t *n, const char *s)
{
	char **p = realloc(*list, (*n + 1) * sizeof(*p));

	if (!p)
		return -ENOMEM;
	*list = p;
	if (!(p[*n] = strdup(s)))
		return -ENOMEM;
	(*n)++;
	return 0;
}

static void free_list(char **list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(list[i]);
	free(list);
}

/* From the file names of a directory-like place (all[n]), pick what to
 * mount: its one index, or its *.safetensors files (kind, name, names).
 * where names the place in the error when there is neither. */
static int stfs_location_pick(struct stfs_location *loc, char **all, size_t n,
			      const char *where, struct stfs_error *err);

int stfs_location_pick_one(struct stfs_location *loc, char **all, size_t n,
			   const char *where, struct stfs_error *err)
{
	int rc = stfs_location_pick(loc, all, n, where, err);

	if (!rc && loc->kind == STFS_LOC_DIR && loc->nnames == 1) {
		loc->kind = STFS_LOC_FILE;
		free(loc->name);
		loc->name = loc->names[0];
		free(loc->names);
		loc->names = NULL;
		loc->nnames = 0;
	}
	return rc;
}

/*
 * Of a directory's files: the safetensors index, else the safetensors
 * files; a folder with neither (an older Hub repo) gives its PyTorch
 * index (pytorch_model.bin.index.json), else its PyTorch checkpoints.
 */
static int stfs_location_pick(struct stfs_location *loc, char **all, size_t n,
			      const char *where, struct stfs_error *err)
{
	char **indexes = NULL, **tnames = NULL, **tidx = NULL;
	size_t nindexes = 0, ntnames = 0, ntidx = 0;
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i++) {
		if (all[i][0] == '.')
			continue;
		if (stfs_ends_with(all[i], ".safetensors.index.json"))
			rc = push(&indexes, &nindexes, all[i]);
		else if (stfs_ends_with(all[i], ".safetensors"))
			rc = push(&loc->names, &loc->nnames, all[i]);
		else if (stfs_ends_with(all[i], ".bin.index.json"))
			rc = push(&tidx, &ntidx, all[i]);
		else if (stfs_name_is_torch(all[i]))
			rc = push(&tnames, &ntnames, all[i]);
	}
	if (!rc && !nindexes && !loc->nnames) {   /* PyTorch only */
		char **t = indexes;

		indexes = tidx;
		nindexes = ntidx;
		tidx = t;
		ntidx = 0;
		free(loc->names);
		loc->names = tnames;
		loc->nnames = ntnames;
		tnames = NULL;
		ntnames = 0;
	}
	free_list(tnames, ntnames);
	free_list(tidx, ntidx);
	if (rc) {
		rc = stfs_nomem(err);
		goto out;
	}
	if (nindexes > 1)
		qsort(indexes, nindexes, sizeof(*indexes), cmp_str);
	if (loc->nnames > 1)
		qsort(loc->names, loc->nnames, sizeof(*loc->names), cmp_str);
	loc->kind = STFS_LOC_DIR;
	if (nindexes > 1) {
		char names[400] = "", q[128];
		for (size_t i = 0; i < nindexes; i++) {
			size_t l = strlen(names);
			snprintf(names + l, sizeof(names) - l, "%s%s",
				 i ? ", " : "", stfs_quote(indexes[i],
				 strlen(indexes[i]), q, sizeof(q)));
		}
		rc = stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
			       "several index files, give one of them as "
			       "the source: %s", names);
	} else if (nindexes == 1) {
		loc->kind = STFS_LOC_INDEX;
		free(loc->name);
		loc->name = indexes[0];
		indexes[0] = NULL;
	} else if (loc->nnames == 0) {
		rc = stfs_fail(err, -ENOENT, NULL, STFS_NO_OFFSET,
			       "no *.safetensors files (nor PyTorch "
			       "checkpoints) in %s", where);
	}
out:
	free_list(indexes, nindexes);
	return rc;
}

/* A directory: its one index, or its *.safetensors files. */
static int list_dir(struct stfs_location *loc, struct stfs_error *err)
{
	DIR *d = opendir(loc->base);
	struct dirent *de;
	char **all = NULL;
	size_t n = 0;
	int rc = 0;

	if (!d)
		return stfs_fail(err, -errno, NULL, STFS_NO_OFFSET,
				 "cannot open directory: %s", strerror(errno));
	while ((de = readdir(d)))
		if (push(&all, &n, de->d_name)) {
			closedir(d);
			free_list(all, n);
			return stfs_nomem(err);
		}
	closedir(d);
	rc = stfs_location_pick(loc, all, n, "this directory", err);
	free_list(all, n);
	return rc;
}

/* Hand loc to the service that claims its URL (loc->service): a plain
 * URL (loc->http), or a repository behind a service (loc->remote), which
 * needs the remote layer: 0, or -errno with err saying why. */
static int locate_service(struct stfs_location *loc, struct stfs_remote *net,
			  struct stfs_error *err)
{
	const struct stfs_service *s = loc->service;
	int rc;

	if (!s->remote) {
		loc->http = 1;
		if ((rc = s->locate(loc, err)) == -ENOMEM)
			stfs_nomem(err);
		return rc;
	}
	loc->remote = 1;
	if (!net)
		return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
				 "no remote layer to reach it");
	if (!(loc->canonical = strdup(loc->arg)))
		return stfs_nomem(err);
	return s->locate(loc, err);
}

int stfs_locate_with(const struct stfs_service *svc, size_t nsvc,
		     const char *arg, struct stfs_remote *net,
		     struct stfs_location **out, struct stfs_error *err)
{
	struct stfs_location *loc;
	const char *slash;
	enum stfs_scheme scheme;
	struct stat st;
	int rc;

	*out = NULL;
	loc = calloc(1, sizeof(*loc));
	if (!loc || !(loc->arg = strdup(arg))) {
		free(loc);
		return stfs_nomem(err);
	}
	loc->net = net;
	/* HTTP://, Hf://: the scheme in lower case from here on */
	stfs_url_lower_scheme(loc->arg);
	scheme = stfs_url_scheme(loc->arg);
	for (size_t i = 0; i < nsvc && !loc->service; i++)
		if (svc[i].scheme == scheme)
			loc->service = &svc[i];
	if (loc->service) {
		if ((rc = locate_service(loc, net, err)))
			goto fail;
		*out = loc;
		return 0;
	}
	if (scheme != STFS_SCHEME_NONE) {
		rc = stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
			       "no service reads this URL");
		goto fail;
	}
	loc->canonical = realpath(arg, NULL);
	if (!loc->canonical) {
		rc = stfs_fail(err, -errno, NULL, STFS_NO_OFFSET, "%s",
			       strerror(errno));
		goto fail;
	}
	if (stat(loc->canonical, &st) == 0 && S_ISDIR(st.st_mode)) {
		loc->kind = STFS_LOC_DIR;
		if (!(loc->base = strdup(arg))) {
			rc = stfs_nomem(err);
			goto fail;
		}
		if ((rc = stfs_rlist_walk(&loc->files, loc->base, loc->base,
					  err)))
			goto fail;
		/* a folder of other files (a diffusers repo's top) still
		 * mounts: %repo/ shows them */
		if ((rc = list_dir(loc, err)) &&
		    (rc != -ENOENT || !loc->files.n))
			goto fail;
		if (rc && err && !(loc->note = strdup(err->msg))) {
			rc = stfs_nomem(err);
			goto fail;
		}
		rc = 0;
		*out = loc;
		return 0;
	}
	/* a file: its directory as given, and its name */
	loc->kind = stfs_ends_with(arg, ".index.json") ? STFS_LOC_INDEX :
		    STFS_LOC_FILE;
	slash = strrchr(arg, '/');
	if (!slash)
		loc->base = strdup(".");
	else if (slash == arg)
		loc->base = strdup("/");
	else
		loc->base = strndup(arg, (size_t)(slash - arg));
	loc->name = strdup(slash ? slash + 1 : arg);
	if (!loc->base || !loc->name) {
		rc = stfs_nomem(err);
		goto fail;
	}
	*out = loc;
	return 0;
fail:
	stfs_location_free(loc);
	return rc;
}

void stfs_location_park(struct stfs_location *loc)
{
	if (loc)
		stfs_auth_park(loc->auth);
}

void stfs_location_free(struct stfs_location *loc)
{
	if (!loc)
		return;
	free_list(loc->names, loc->nnames);
	free_list(loc->etag_names, loc->netags);
	free_list(loc->etags, loc->netags);
	stfs_rlist_free(&loc->files);
	free(loc->repo_base);
	free(loc->note);
	stfs_auth_unref(loc->auth);
	free(loc->local_base);
	free(loc->repo);
	free(loc->domain);
	free(loc->revision);
	free(loc->arg);
	free(loc->canonical);
	free(loc->base);
	free(loc->name);
	free(loc);
}

/* What the service says of the file called name: on its source. */
static void set_origin(const struct stfs_location *loc, const char *name,
		       struct stfs_source *src)
{
	src->origin[STFS_ORIGIN_REPO] = loc->repo;
	src->origin[STFS_ORIGIN_REVISION] = loc->revision;
	for (size_t i = 0; i < loc->netags; i++)
		if (strcmp(loc->etag_names[i], name) == 0)
			src->origin[STFS_ORIGIN_ETAG] = loc->etags[i];
}

/* Offline, a file the snapshot lacks is an error, never a request: a
 * link whose blob is missing (an interrupted download) or no link. */
static int not_cached(const struct stfs_location *loc, const char *name,
		      const char *path, struct stfs_error *err)
{
	char target[PATH_MAX], q[256], qt[256];
	ssize_t n = readlink(path, target, sizeof(target) - 1);

	stfs_quote(name, strlen(name), q, sizeof(q));
	if (n <= 0)
		return stfs_fail(err, -ENOENT, NULL, STFS_NO_OFFSET, "offline, "
				 "and %s is not in the Hugging Face cache (%s)",
				 q, loc->local_base);
	target[n] = '\0';
	return stfs_fail(err, -ENOENT, NULL, STFS_NO_OFFSET, "offline, and "
			 "the blob of %s is missing from the Hugging Face "
			 "cache (%s/%s links to %s)", q, loc->local_base, q,
			 stfs_quote(target, (size_t)n, qt, sizeof(qt)));
}

/* The file called name in loc->local_base (the Hugging Face cache's
 * snapshot), if it is there: 0, -ENOENT if not (offline: with err
 * saying so), else -errno. */
static int open_local(const struct stfs_location *loc, const char *name,
		      struct stfs_source **out, struct stfs_error *err)
{
	char *path;
	int rc;

	if (asprintf(&path, "%s/%s", loc->local_base, name) < 0)
		return stfs_nomem(err);
	if (access(path, F_OK) != 0) {
		rc = loc->offline ? not_cached(loc, name, path, err) : -ENOENT;
		free(path);
		return rc;
	}
	rc = stfs_source_open_file(path, out, err);
	free(path);
	if (!rc)
		set_origin(loc, name, *out);
	return rc;
}

int stfs_location_open(const struct stfs_location *loc, const char *name,
		       struct stfs_source **out, struct stfs_error *err)
{
	char *path;
	int rc;

	*out = NULL;
	if (!*name || strchr(name, '/'))
		return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
				 "not a plain file name");
	/* the file itself keeps the name it was given */
	if (loc->kind == STFS_LOC_FILE && strcmp(name, loc->name) == 0 &&
	    !loc->remote)
		return loc->http ? stfs_source_open_http(loc->net, loc->arg,
							 loc->auth, NULL, out,
							 err) :
		       stfs_source_open_file(loc->arg, out, err);
	if (loc->local_base && ((rc = open_local(loc, name, out, err)) !=
				-ENOENT || loc->offline))
		return rc;
	if (loc->http || loc->remote) {
		char *esc = curl_easy_escape(NULL, name, 0);
		if (!esc || asprintf(&path, "%s/%s", loc->base, esc) < 0) {
			curl_free(esc);
			return stfs_nomem(err);
		}
		curl_free(esc);
		rc = stfs_source_open_http(loc->net, path, loc->auth,
					   loc->domain, out, err);
		free(path);
		if (!rc)
			set_origin(loc, name, *out);
		return rc;
	}
	if (asprintf(&path, "%s%s%s", loc->base,
		     stfs_ends_with(loc->base, "/") ? "" : "/", name) < 0)
		return stfs_nomem(err);
	rc = stfs_source_open_file(path, out, err);
	free(path);
	return rc;
}

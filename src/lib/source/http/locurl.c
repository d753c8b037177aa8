/*
 * locurl.c: the service of plain http(s) URLs, as the locator calls it
 * (struct stfs_service, locate.h): what a URL names (one file, an index,
 * or a "directory" of shards), and its secrets (a user and password, a
 * presigned URL's query) taken out of what stfs shows into what its
 * requests carry.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "format.h"
#include "auth.h"
#include "http/http.h"

#define REMOTE_INDEX "model.safetensors.index.json"

/*
 * What a URL carries that is a secret goes to loc->auth and out of
 * loc->arg, so that what stfs shows of the source (messages, xattrs,
 * %header.json, the mount table, the cache's keys) never holds it: a user
 * and password, and a query (the signature of a presigned URL), sent with
 * every request.  0, -EINVAL or -ENOMEM.
 */
static int url_secrets(struct stfs_location *loc, struct stfs_error *err)
{
	const char *host = strstr(loc->arg, "://") + 3;
	const char *q = strchr(host, '?');
	char *user = NULL, *password = NULL, *shown;
	CURLU *u = NULL;
	int rc = 0;

	if (strchr(host, '#'))
		return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET, "a URL "
				 "with a #fragment is not supported");
	if (!(shown = stfs_source_shown(loc->arg)))
		return -ENOMEM;
	if (strcmp(shown, loc->arg) == 0) {
		free(shown);            /* nothing to hide */
		return 0;
	}
	if (!(loc->auth = stfs_auth_new(NULL, NULL, NULL, NULL, NULL)) ||
	    (q && !(loc->auth->query = strdup(q + 1))) || !(u = curl_url())) {
		rc = -ENOMEM;
		goto out;
	}
	if (curl_url_set(u, CURLUPART_URL, loc->arg, 0) != CURLUE_OK) {
		rc = stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
			       "not a valid URL");
		goto out;
	}
	curl_url_get(u, CURLUPART_USER, &user, CURLU_URLDECODE);
	curl_url_get(u, CURLUPART_PASSWORD, &password, CURLU_URLDECODE);
	if ((user || password) &&
	    (!(loc->auth->user = strdup(user ? user : "")) ||
	     (password && !(loc->auth->password = strdup(password))))) {
		rc = -ENOMEM;
		goto out;
	}
	memset(loc->arg, 0, strlen(loc->arg));  /* it held the secrets */
	free(loc->arg);
	loc->arg = shown;
	shown = NULL;
out:
	free(shown);
	if (password)
		memset(password, 0, strlen(password));
	curl_free(user);
	curl_free(password);
	curl_url_cleanup(u);
	return rc;
}

/* A URL: one file, an index, or a "directory" (ending in '/'). */
int stfs_locate_url(struct stfs_location *loc, struct stfs_error *err)
{
	const char *arg, *slash, *host;
	int rc;

	if ((rc = url_secrets(loc, err)))
		return rc;
	arg = loc->arg;
	slash = strrchr(arg, '/');
	host = strstr(arg, "://") + 3;
	if (!(loc->canonical = strdup(arg)))
		return -ENOMEM;
	if (!*host || slash < host)
		return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET, "a URL "
				 "needs a path: http://HOST/PATH/NAME."
				 "safetensors, or one ending in / for shards");
	loc->base = strndup(arg, (size_t)(slash - arg));
	if (!slash[1]) {
		loc->kind = STFS_LOC_INDEX;
		loc->name = strdup(REMOTE_INDEX);
	} else {
		loc->kind = stfs_ends_with(arg, ".index.json") ? STFS_LOC_INDEX :
			    STFS_LOC_FILE;
		loc->name = strdup(slash + 1);
	}
	if (loc->kind != STFS_LOC_FILE && loc->auth && loc->auth->query)
		return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET, "a URL "
				 "with a ?query (a presigned URL) names one "
				 "file: shards need a URL each");
	return loc->base && loc->name ? 0 : -ENOMEM;
}

/*
 * hubloc.c: the last step of the hf:// locator (hub.c): what it found
 * (the commit, the listing, the weights picked) handed to the location:
 * the Hub's ETag of each file, the base of the files' /resolve URLs, the
 * snapshot in the Hugging Face cache to read from, the trust domain
 * within which blocks are shared by content, the repo, the commit and the
 * auth of the requests.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format.h"
#include "hub.h"

/* The trust domain of h's files, within which a file's blocks are shared
 * by content (http.c): the endpoint's origin (scheme://host:port, in lower
 * case) and the repo id ([datasets/]ORG/NAME), "ORIGIN REPO"; a new
 * string, or NULL. */
static char *domain_of(const struct hf *h)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL, *port = NULL, *d = NULL;

	if (u && curl_url_set(u, CURLUPART_URL, h->endpoint, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) ==
	    CURLUE_OK &&
	    asprintf(&d, "%s://%s:%s %s%s", scheme, host, port,
		     h->dataset ? "datasets/" : "", h->repo) < 0)
		d = NULL;
	for (char *c = d; c && *c != ' '; c++)
		*c = (char)tolower((unsigned char)*c);
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
	return d;
}

int stfs_hf_answer(struct hf *h, struct stfs_location *loc,
		   struct stfs_auth **auth, char **snap, int own,
		   struct stfs_error *err)
{
	struct stat st;
	char *sub;

	/* what the service says of each file */
	loc->etag_names = h->names;
	loc->etags = h->etags;
	loc->netags = h->n;
	h->names = h->etags = NULL;
	h->n = 0;
	if (!(sub = stfs_url_escape_path(h->subdir)) ||
	    asprintf(&loc->base, "%s/%s%s/resolve/%s%s%s", h->endpoint,
		     h->dataset ? "datasets/" : "", h->repo, h->sha,
		     *sub ? "/" : "", sub) < 0) {
		free(sub);
		loc->base = NULL;
		return stfs_nomem(err);
	}
	free(sub);
	if (stat(*snap, &st) == 0 && S_ISDIR(st.st_mode)) {
		loc->local_base = *snap;
		*snap = NULL;
	}
	if (!(loc->domain = domain_of(h)))
		return stfs_nomem(err);
	loc->repo = h->repo;
	h->repo = NULL;
	if (!(loc->revision = strdup(h->sha)))
		return stfs_nomem(err);
	loc->auth = *auth;
	*auth = NULL;
	loc->offline = h->offline;
	if (h->offline && !loc->local_base && !own)
		return stfs_fail(err, -ENOENT, NULL, STFS_NO_OFFSET, "offline, "
				 "and not in the Hugging Face cache");
	return 0;
}

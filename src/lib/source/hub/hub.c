/*
 * hub.c: the locator of hf:// sources, models and datasets on the Hugging
 * Face Hub (or any server that speaks its API: HF_ENDPOINT).
 *
 *   hf://[datasets/]ORG/NAME[@REVISION][/SUBDIR][/FILE]
 *
 * (FILE: a name ending in .gguf, .bin, .pt, .pth or .ckpt names that one
 * file of the folder: a GGUF repo holds one file per quantization.)
 * The revision (a branch, a tag, refs/pr/N or a commit; main if none) is
 * resolved once, here, to a commit through the revision API, and every
 * byte is then read from that commit (/resolve/SHA/FILE), so a push while
 * mounted changes nothing.  The tree API (paginated with Link headers)
 * lists SUBDIR, and the usual rules pick the index or the shards.
 *
 * The Hub's conventions: the token from HF_TOKEN, HUGGING_FACE_HUB_TOKEN,
 * or the file at HF_TOKEN_PATH or $HF_HOME/token, sent to the Hub only
 * (never on to the host /resolve redirects to); HF_HUB_OFFLINE=1 for no
 * network.  Files of the commit found in the Hugging Face cache
 * (HF_HUB_CACHE, default $HF_HOME/hub) are read from there; stfs never
 * writes into it.  Offline, the cache's refs resolve the revision and its
 * snapshot lists the files; without them, the revision's and the tree's
 * answers stfs's own cache kept (STFS_REQ_KEEP, http/kept.c) do, and the
 * files open from stfs's cache: with -o offline, a pinned repo mounted
 * once mounts again with no network and no Hugging Face cache.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <curl/curl.h>
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
#include "rlist.h"
#include "hub.h"

#define HUB_DEFAULT "https://huggingface.co"
#define API_MAX (64u << 20)         /* bytes of one API answer, at most */
#define AGAIN "links back to a page already listed"

int stfs_hf_push(struct hf *h, const char *name, const char *etag)
{
	char **a = realloc(h->names, (h->n + 1) * sizeof(*a)), **b;

	if (!a)
		return -ENOMEM;
	h->names = a;
	if (!(b = realloc(h->etags, (h->n + 1) * sizeof(*b))))
		return -ENOMEM;
	h->etags = b;
	a[h->n] = strdup(name);
	b[h->n] = etag ? strdup(etag) : strdup("");
	if (!a[h->n] || !b[h->n]) {
		free(a[h->n]);
		free(b[h->n]);
		return -ENOMEM;
	}
	h->n++;
	return 0;
}

int stfs_hf_push_dir(struct hf *h, const char *dir, size_t len)
{
	char **a;

	for (size_t i = 0; i < h->ndirs; i++)
		if (strlen(h->dirs[i]) == len && !memcmp(h->dirs[i], dir, len))
			return 0;
	if (!(a = realloc(h->dirs, (h->ndirs + 1) * sizeof(*a))))
		return -ENOMEM;
	h->dirs = a;
	if (!(a[h->ndirs] = strndup(dir, len)))
		return -ENOMEM;
	h->ndirs++;
	return 0;
}

static void hf_free(struct hf *h)
{
	for (size_t i = 0; i < h->n; i++) {
		free(h->names[i]);
		free(h->etags[i]);
	}
	for (size_t i = 0; i < h->ndirs; i++)
		free(h->dirs[i]);
	free(h->names);
	free(h->etags);
	free(h->dirs);
	free(h->repo);
	free(h->rev);
	free(h->subdir);
	free(h->file);
	free(h->endpoint);
	if (h->token)
		memset(h->token, 0, strlen(h->token));
	free(h->token);
	free(h->cache);
}

/* ---- hf://... ------------------------------------------------------------ */

/* A repo name part: letters, digits, '-', '_', '.'; not "." or "..". */
static int name_ok(const char *s, size_t n)
{
	if (!n || n > 96 || (n == 1 && s[0] == '.') ||
	    (n == 2 && s[0] == '.' && s[1] == '.'))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("-_.", s[i]))
			return 0;
	return 1;
}

/* A path in the repo: components that are not empty, "." or "..", of
 * printable characters. */
static int path_ok(const char *s)
{
	const char *c = s;

	for (;;) {
		const char *e = strchr(c, '/');
		size_t n = e ? (size_t)(e - c) : strlen(c);

		if (!n || (n == 1 && c[0] == '.') ||
		    (n == 2 && c[0] == '.' && c[1] == '.'))
			return 0;
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)c[i] < 0x20 || c[i] == 0x7f ||
			    c[i] == '\\')
				return 0;
		if (!e)
			return 1;
		c = e + 1;
	}
}

/* "%2F" in a revision given URL-encoded (refs%2Fpr%2F1) */
static void decode_slashes(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '%' && s[1] == '2' && (s[2] == 'F' || s[2] == 'f')) {
			*o++ = '/';
			s += 2;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

/* A revision that is not a git ref name or a commit is refused: it
 * names a file under the cache's refs/ and goes into the Hub's URLs. */
static int rev_check(const char *rev, struct stfs_error *err)
{
	const char *why;
	char q[128];

	if (stfs_hub_rev_ok(rev, &why))
		return 0;
	return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET, "not a valid "
			 "revision: \"%s\": %s (give a branch, a tag, "
			 "refs/pr/N or a commit)",
			 stfs_quote(rev, strlen(rev), q, sizeof(q)), why);
}

static int split_file(struct hf *h);

static int parse(const char *arg, struct hf *h, struct stfs_error *err)
{
	const char *p = arg + 5, *org, *name, *e;
	size_t lorg, lname;

	if (!strncmp(p, "datasets/", 9)) {
		h->dataset = 1;
		p += 9;
	} else if (!strncmp(p, "models/", 7)) {
		p += 7;
	}
	org = p;
	if (!(e = strchr(p, '/')))
		goto bad;
	lorg = (size_t)(e - org);
	name = e + 1;
	lname = strcspn(name, "@/");
	if (!name_ok(org, lorg) || !name_ok(name, lname))
		goto bad;
	if (asprintf(&h->repo, "%.*s/%.*s", (int)lorg, org, (int)lname,
		     name) < 0)
		return stfs_nomem(err);
	p = name + lname;
	if (*p == '@') {
		const char *r = ++p;
		size_t n = strcspn(r, "/");

		/* refs/pr/N and refs/convert/X span three components */
		if (!strncmp(r, "refs/pr/", 8) || !strncmp(r, "refs/convert/",
							    13)) {
			const char *third = strchr(strchr(r, '/') + 1, '/') + 1;
			n = (size_t)(third - r) + strcspn(third, "/");
		}
		if (!n || !(h->rev = strndup(r, n)))
			return n ? stfs_nomem(err) : stfs_fail(err, -EINVAL, NULL,
				STFS_NO_OFFSET, "an empty revision after '@'");
		decode_slashes(h->rev);
		p = r + n;
	} else if (!(h->rev = strdup("main"))) {
		return stfs_nomem(err);
	}
	if (rev_check(h->rev, err))
		return -EINVAL;
	if (*p == '/')
		p++;
	if (!(h->subdir = strdup(p)))
		return stfs_nomem(err);
	while (*h->subdir && h->subdir[strlen(h->subdir) - 1] == '/')
		h->subdir[strlen(h->subdir) - 1] = '\0';
	if (*h->subdir && !path_ok(h->subdir))
		return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET, "not a "
				 "folder of a repo: %s", h->subdir);
	if (split_file(h))
		return stfs_nomem(err);
	return 0;
bad:
	return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET, "not a repo: "
			 "give hf://ORG/NAME[@REVISION][/FOLDER] or "
			 "hf://datasets/ORG/NAME...");
}

/* ---- online: the API ----------------------------------------------------- */

/* Is url on the Hub (the endpoint, then '/')? */
static int on_hub(const struct hf *h, const char *url)
{
	size_t n = strlen(h->endpoint);

	return !strncmp(url, h->endpoint, n) && url[n] == '/';
}

/* GET an API url whole, following its redirects on the Hub only (a
 * renamed repo's; the token goes with them): one elsewhere is refused,
 * as a next page elsewhere is.  As stfs_http_get(). */
static int api_get(struct hf *h, const char *url, struct stfs_auth *auth,
		   char **body, size_t *len, struct stfs_http_resp *r,
		   struct stfs_error *err)
{
	char *at = strdup(url), q[256];
	int rc = -ENOMEM;

	for (int hops = 0; at; hops++) {
		rc = stfs_http_get(h->net, at, auth,
				   STFS_REQ_NOFOLLOW | STFS_REQ_KEEP, NULL,
				   API_MAX, body, len, r, err);
		if (rc != STFS_HTTP_REDIRECT)
			break;
		if (hops == 5 || !r->location[0] || !on_hub(h, r->location)) {
			rc = stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "the "
				       "Hub's API %s: %s", hops == 5 ?
				       "redirects more than 5 times" :
				       "redirects elsewhere",
				       stfs_quote(r->location,
						  strlen(r->location), q,
						  sizeof(q)));
			break;
		}
		free(at);
		at = strdup(r->location);
		rc = -ENOMEM;
	}
	free(at);
	return rc == -ENOMEM ? stfs_nomem(err) : rc;
}

static int resolve(struct hf *h, struct stfs_auth *auth,
		   struct stfs_error *err)
{
	char *rev = curl_easy_escape(NULL, h->rev, 0), *url = NULL, *body;
	struct stfs_http_resp r;
	size_t len;
	int rc;

	if (!rev || asprintf(&url, "%s/api/%s/%s/revision/%s", h->endpoint,
			     h->dataset ? "datasets" : "models", h->repo,
			     rev) < 0) {
		curl_free(rev);
		return stfs_nomem(err);
	}
	curl_free(rev);
	rc = api_get(h, url, auth, &body, &len, &r, err);
	free(url);
	if (rc)
		return rc;
	if (stfs_hub_parse_sha(body, len, h->sha))
		rc = stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "the Hub's "
			       "answer for revision %s has no commit sha",
			       h->rev);
	free(body);
	return rc;
}

struct lister {
	struct hf *h;
	int recursive;
	size_t entries;         /* files listed so far */
};

/* A file of the repo for %repo/: its checksum by its length (a git
 * blob's sha1, an LFS object's sha256), small or not.  A file the
 * listing gives no checksum for is served unchecked (said so); one whose
 * checksum is malformed ("", hubjson.c) is refused. */
static int repo_file(struct stfs_rlist *rl, const char *name,
		     const char *etag, uint64_t size)
{
	size_t n = etag ? strlen(etag) : 0;
	struct stfs_rfile *f;
	char sum[96];
	int rc;

	if (n == 40 || n == 64)
		snprintf(sum, sizeof(sum), "%s:%s", n == 40 ? "sha1-blob" :
			 "sha256", etag);
	rc = stfs_rlist_push(rl, name, size, n == 40 || n == 64 ? sum : NULL,
			     stfs_repo_path_bad(name));
	if (rc)
		return rc;
	f = &rl->f[rl->n - 1];
	f->small = stfs_repo_is_small(name, size);
	if (!etag)
		f->unchecked = "unchecked (the listing gives no oid)";
	else if (!n && !(f->fault = strdup("its checksum in the Hub's "
					   "listing is malformed (an oid is "
					   "40 or 64 lower-case hex digits)")))
		return -ENOMEM;
	return 0;
}

static int on_file(void *arg, const char *path, const char *etag,
		   uint64_t size)
{
	struct lister *l = arg;
	struct hf *h = l->h;
	size_t sl = strlen(h->subdir);
	const char *name = path, *slash;

	l->entries++;
	if (sl) {
		if (strncmp(path, h->subdir, sl) != 0 || path[sl] != '/')
			return 0;
		name = path + sl + 1;
	}
	if (l->recursive && h->rl && repo_file(h->rl, name, etag, size))
		return -ENOMEM;
	if (!(slash = strrchr(name, '/')))
		return stfs_hf_push(h, name, etag);
	/* deeper: a subfolder holding weights? */
	if (!sl && (stfs_ends_with(slash, ".safetensors") ||
		    stfs_ends_with(slash, ".safetensors.index.json")))
		return stfs_hf_push_dir(h, name, (size_t)(slash - name));
	return 0;
}

/* A path ending in a checkpoint's file name names that one file (a GGUF
 * repo holds one file per quantization): the folder is listed for its
 * ETag and the file picked by name. */
static int split_file(struct hf *h)
{
	char *base = strrchr(h->subdir, '/');
	const char *name = base ? base + 1 : h->subdir;

	if (!stfs_name_is_checkpoint(name))
		return 0;
	if (!(h->file = strdup(name)))
		return -ENOMEM;
	if (base)
		*base = '\0';
	else
		h->subdir[0] = '\0';
	return 0;
}

/* The file h->file names, found in the folder's listing. */
static int pick_file(struct hf *h, struct stfs_location *loc,
		     struct stfs_error *err)
{
	for (size_t i = 0; i < h->n; i++) {
		if (strcmp(h->names[i], h->file))
			continue;
		loc->kind = STFS_LOC_FILE;
		free(loc->name);
		return (loc->name = strdup(h->file)) ? 0 : stfs_nomem(err);
	}
	return stfs_fail(err, -ENOENT, NULL, STFS_NO_OFFSET, "no file %s in "
			 "%s at %.12s", h->file, *h->subdir ? h->subdir :
			 "the repo", h->sha);
}

static int list_online(struct hf *h, struct stfs_auth *auth, int recursive,
		       struct stfs_error *err)
{
	struct lister l = { h, recursive, 0 };
	struct stfs_pages seen = { 0 };
	unsigned tmo = stfs_remote_list_timeout_ms(h->net);
	char *sub = stfs_url_escape_path(h->subdir), *url = NULL;
	int rc = 0;

	if (!sub || asprintf(&url, "%s/api/%s/%s/tree/%s%s%s%s", h->endpoint,
			     h->dataset ? "datasets" : "models", h->repo,
			     h->sha, *sub ? "/" : "", sub,
			     recursive ? "?recursive=true" : "") < 0) {
		free(sub);
		return stfs_nomem(err);
	}
	free(sub);
	while (url && !rc) {
		struct stfs_http_resp r;
		char *body, q[256];
		size_t len, before = l.entries;

		if ((rc = stfs_pages_add(&seen, url, tmo))) {
			rc = stfs_pages_fail(&seen, rc, "the Hub's file list",
					     AGAIN, url, tmo, err);
			break;
		}
		rc = api_get(h, url, auth, &body, &len, &r, err);
		free(url);
		url = NULL;
		if (rc)
			break;
		if ((rc = stfs_hub_parse_tree(body, len, on_file, &l)))
			rc = rc == -ENOMEM ? stfs_nomem(err) :
			     stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "the "
				       "Hub's file list does not parse");
		else if ((rc = stfs_pages_took(&seen, l.entries - before, len)))
			rc = stfs_pages_fail(&seen, rc, "the Hub's file list",
					     AGAIN, "", tmo, err);
		free(body);
		if (rc || !r.link_next[0])
			break;
		/* the next page, from the Hub itself only: the token goes
		 * with it */
		if (!on_hub(h, r.link_next)) {
			rc = stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "the "
				       "Hub's next page is elsewhere: %s",
				       stfs_quote(r.link_next,
						  strlen(r.link_next), q,
						  sizeof(q)));
			break;
		}
		if (!(url = strdup(r.link_next)))
			rc = stfs_nomem(err);
	}
	free(url);
	stfs_pages_free(&seen);
	return rc;
}

/* -o mirror= on a commit: the listing from the mirror's manifest, if it
 * names this origin and commit (the mirror room's hook, engine.h), and
 * no request to the Hub's API.  A folder (SUBDIR) is listed by the API:
 * a manifest lists a whole repository.  1 listed, 0 not, -ENOMEM. */
static int list_mirrored(struct stfs_location *loc, struct hf *h)
{
	struct lister l = { h, 1, 0 };
	struct stfs_remote *r = h->net;

	if (h->offline || *h->subdir || !r || !r->mirror_list ||
	    !stfs_hf_is_sha(h->rev))
		return 0;
	h->rl = &loc->files;
	return r->mirror_list(r, loc, h->rev, on_file, &l);
}

/* ---- the locator ------------------------------------------------------ */

static int no_weights(struct hf *h, struct stfs_error *err)
{
	char dirs[512] = "", q[128], first[128];

	if (*h->subdir || !h->ndirs)
		return stfs_fail(err, -ENOENT, NULL, STFS_NO_OFFSET, "no "
				 "*.safetensors files in %s at %.12s",
				 *h->subdir ? h->subdir : "the repo", h->sha);
	for (size_t i = 0; i < h->ndirs; i++) {
		size_t l = strlen(dirs);
		snprintf(dirs + l, sizeof(dirs) - l, "%s%s", i ? ", " : "",
			 stfs_quote(h->dirs[i], strlen(h->dirs[i]), q,
				    sizeof(q)));
	}
	stfs_quote(h->dirs[0], strlen(h->dirs[0]), first, sizeof(first));
	return stfs_fail(err, -ENOENT, NULL, STFS_NO_OFFSET, "no "
			 "*.safetensors files at the top of the repo; these "
			 "folders hold weights, mount one of them "
			 "(hf://%s/%s): %s", h->repo, first, dirs);
}

/* The Hub's endpoint (HF_ENDPOINT, else the Hub's own) and the repo's
 * folder in the Hugging Face cache, into h: 0 or -errno. */
static int endpoint_of(struct hf *h, struct stfs_error *err)
{
	const char *ep = stfs_env("HF_ENDPOINT");
	char *e;

	if (!(e = h->endpoint = strdup(ep ? ep : HUB_DEFAULT)) ||
	    !(h->cache = stfs_hf_repo_cache(h)))
		return stfs_nomem(err);
	stfs_url_lower_scheme(e);
	while (strlen(e) > 8 && e[strlen(e) - 1] == '/')
		e[strlen(e) - 1] = '\0';
	if (!stfs_is_url(e))
		return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
				 "HF_ENDPOINT is not an http(s) URL: %s", e);
	return 0;
}

/* The start: the argument parsed, the endpoint, the token, offline or
 * not, and the auth of the Hub's requests (*auth): 0 or -errno. */
static int begin(struct stfs_location *loc, struct hf *h,
		 struct stfs_auth **auth, struct stfs_error *err)
{
	int rc;

	if ((rc = parse(loc->arg, h, err)) || (rc = endpoint_of(h, err)))
		return rc;
	h->token = stfs_hf_token();
	h->net = loc->net;
	h->offline = stfs_hf_truthy(getenv("HF_HUB_OFFLINE")) ||
		     stfs_remote_offline(loc->net);
	if (!(*auth = stfs_auth_new(h->token, NULL, NULL, NULL, NULL)) ||
	    /* the CA bundle the Python tools (requests) trust */
	    (stfs_env("REQUESTS_CA_BUNDLE") &&
	     !((*auth)->ca_file = strdup(stfs_env("REQUESTS_CA_BUNDLE")))))
		return stfs_nomem(err);
	return 0;
}

/* The revision resolved to a commit and SUBDIR listed into loc->files:
 * online, or offline from the Hugging Face cache (its refs, its snapshot
 * *snap), else from the answers stfs's cache kept (*own: the files then
 * open from stfs's cache).  0 or -errno. */
static int find(struct stfs_location *loc, struct hf *h,
		struct stfs_auth *auth, char **snap, int *own,
		struct stfs_error *err)
{
	int rc, mirrored = 0;

	if (h->offline) {
		if ((rc = stfs_hf_resolve_cached(h, err)) &&
		    stfs_remote_offline(h->net) && resolve(h, auth, NULL) == 0)
			rc = 0;
		if (rc)
			return rc;
	} else if ((mirrored = list_mirrored(loc, h)) < 0) {
		return stfs_nomem(err);
	} else if (mirrored) {
		memcpy(h->sha, h->rev, sizeof(h->sha));
	} else if ((rc = resolve(h, auth, err))) {
		return rc;
	}
	if (asprintf(snap, "%s/snapshots/%s%s%s", h->cache, h->sha,
		     *h->subdir ? "/" : "", h->subdir) < 0) {
		*snap = NULL;
		return stfs_nomem(err);
	}
	h->rl = &loc->files;
	*own = h->offline && stfs_remote_offline(h->net) &&
	       access(*snap, F_OK) != 0 &&
	       list_online(h, auth, 1, NULL) == 0;
	rc = 0;
	if (!*own && !mirrored)
		rc = h->offline ? stfs_hf_list_cached(h, *snap, 0, "", err) :
				  list_online(h, auth, 1, err);
	if (!rc && h->offline && access(*snap, F_OK) == 0)
		rc = stfs_rlist_walk(&loc->files, *snap, h->cache, err);
	loc->files.listed = 1;
	return rc;
}

/* The weights among the files: the FILE the argument names, else the
 * index or the shards; a repo with none at the top still mounts (its
 * %repo/), with a note naming the folders that hold weights.  0 or
 * -errno. */
static int pick(struct stfs_location *loc, struct hf *h,
		struct stfs_error *err)
{
	int rc;

	if (h->file)
		return pick_file(h, loc, err);
	rc = stfs_location_pick_one(loc, h->names, h->n, "the repo", err);
	if (rc != -ENOENT)
		return rc;
	rc = no_weights(h, err);
	if (!loc->files.n || h->file)
		return rc;
	loc->kind = STFS_LOC_DIR;
	if (err && !(loc->note = strdup(err->msg)))
		return stfs_nomem(err);
	return 0;
}

int stfs_locate_hf(struct stfs_location *loc, struct stfs_error *err)
{
	struct hf h = { 0 };
	struct stfs_auth *auth = NULL;
	char *snap = NULL;
	int rc, own = 0;

	if (!(rc = begin(loc, &h, &auth, err)) &&
	    !(rc = find(loc, &h, auth, &snap, &own, err)) &&
	    !(rc = pick(loc, &h, err)))
		rc = stfs_hf_answer(&h, loc, &auth, &snap, own, err);
	free(snap);
	stfs_auth_unref(auth);
	hf_free(&h);
	return rc;
}

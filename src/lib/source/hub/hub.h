/*
 * hub.h: what the hf:// locator's files share (hub.c, the locator and the
 * Hub's API; hubloc.c, the location it fills; hfcache.c, the Hub's
 * conventions and the Hugging Face cache; hubjson.c, the Hub's JSON
 * answers): the state of one hf:// argument while it is located.  Private
 * to the source layer.
 */
#ifndef STFS_HUB_H
#define STFS_HUB_H

#include <stdlib.h>

#include "engine.h"
#include "scheme.h"
#include "auth.h"
#include "locate.h"
#include "http/http.h"
#include "hub/service.h"

struct hf {
	int dataset;
	char *repo;             /* ORG/NAME */
	char *rev;              /* as given (decoded), or "main" */
	char *subdir;           /* "" or a/b */
	char *file;             /* a file SUBDIR/FILE.gguf names, or NULL */
	char *endpoint;         /* no trailing '/' */
	char *token;            /* or NULL */
	int offline;
	struct stfs_remote *net;        /* requests go through it */
	char *cache;            /* the repo's folder in the HF cache */
	char sha[41];
	/* the files of SUBDIR: names, the Hub's ETags */
	char **names, **etags;
	size_t n;
	char **dirs;            /* subfolders with weights (no SUBDIR) */
	size_t ndirs;
	struct stfs_rlist *rl;  /* every file under SUBDIR (%repo/) */
};

/* hub.c: a file of the folder (its Hub ETag), a subfolder with weights;
 * 0 or -ENOMEM. */
int stfs_hf_push(struct hf *h, const char *name, const char *etag);
int stfs_hf_push_dir(struct hf *h, const char *dir, size_t len);

/* hubloc.c: the location filled from what the locator found (the
 * listing's ETags, the base URL, the snapshot *snap if it is a folder,
 * the trust domain, the repo, the commit, *auth); with the Hugging Face
 * cache offline and no snapshot nor own listing (own), -ENOENT.  0 or
 * -errno; what it takes from h, *snap and *auth is set to NULL there. */
int stfs_hf_answer(struct hf *h, struct stfs_location *loc,
		   struct stfs_auth **auth, char **snap, int own,
		   struct stfs_error *err);

/* hubjson.c: 40 lower-case hex digits */
int stfs_hf_is_sha(const char *s);

/* hfcache.c: the Hub's conventions and the Hugging Face cache */
char *stfs_hf_token(void);                 /* the user's token, or NULL */
int stfs_hf_truthy(const char *v);         /* "1", "on", "yes", "true" */
char *stfs_hf_repo_cache(const struct hf *h);
/* Offline: the revision through the cache's refs; the snapshot's files. */
int stfs_hf_resolve_cached(struct hf *h, struct stfs_error *err);
int stfs_hf_list_cached(struct hf *h, const char *snap, int depth,
			const char *rel, struct stfs_error *err);

/* ---- the Hub's JSON answers (hub.c) -------------------------------------- */

/* The commit ("sha": 40 lowercase hex digits) of a revision API answer:
 * 0, or -EINVAL. */
int stfs_hub_parse_sha(const char *json, size_t len, char sha[41]);
/* A tree API page: file() for each file's path, the Hub's ETag (its LFS
 * sha256, 64 lower-case hex digits, else its blob id, 40; NULL if the
 * entry gives none, "" if the one it gives is malformed) and size; a
 * non-zero return stops and is returned.  0, or -EINVAL. */
int stfs_hub_parse_tree(const char *json, size_t len,
			int (*file)(void *arg, const char *path,
				    const char *etag, uint64_t size),
			void *arg);

/* Is rev a revision of a Hugging Face repo stfs accepts (gitref.c): a
 * git ref name (git check-ref-format's rules, and no '%') or a commit?
 * 1 or 0; *why says which rule it breaks. */
int stfs_hub_rev_ok(const char *rev, const char **why);


#endif

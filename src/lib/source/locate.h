/*
 * locate.h: the locator (locate.c) as the services see it: the helpers a
 * service's locate function may call, and struct stfs_service, the entry
 * a service has in the table the locator's owner (services.c) gives it.
 * The locator calls a service only through that table.
 */
#ifndef STFS_LOCATE_H
#define STFS_LOCATE_H

#include <stddef.h>

#include "source.h"
#include "scheme.h"

/* The same, but one *.safetensors file is a file, not a set of shards
 * (a repo or a prefix with its model.safetensors). */
int stfs_location_pick_one(struct stfs_location *loc, char **all, size_t n,
			   const char *where, struct stfs_error *err);
/* A service the locator hands the URLs of one scheme to, as its owner
 * gives it (services.c's table): the locator calls it, and it calls only
 * the locator's helpers above. */
struct stfs_service {
	const char *name;               /* "http", "hf", "s3"... */
	enum stfs_scheme scheme;        /* the URLs it claims */
	int remote;                     /* a repository behind a service
					 * (hf://, s3://: loc->remote, needs
					 * the remote layer), else a plain
					 * URL (loc->http) */
	/* What loc->arg names (its scheme in lower case; loc->canonical
	 * set if remote): 0, or -errno with err saying why. */
	int (*locate)(struct stfs_location *loc, struct stfs_error *err);
	/* Fetch the small file f of loc whole and check it: f->bytes, or
	 * f->fault; f->sum and f->unchecked say what was checked.  NULL:
	 * repo.c fetches it as any file, checked against its listed sum. */
	void (*fetch_small)(const struct stfs_location *loc,
			    struct stfs_rfile *f);
};

/* stfs_locate() with the services svc[0..nsvc) (services.c). */
int stfs_locate_with(const struct stfs_service *svc, size_t nsvc,
		     const char *arg, struct stfs_remote *net,
		     struct stfs_location **out, struct stfs_error *err);

#endif

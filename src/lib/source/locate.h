/*
 * locate.h: the locator (locate.c) as the services see it: the helpers a
 * service's locate function may call.  Nothing here calls a service.
 */
#ifndef STFS_LOCATE_H
#define STFS_LOCATE_H

#include <stddef.h>

#include "source.h"

/* The same, but one *.safetensors file is a file, not a set of shards
 * (a repo or a prefix with its model.safetensors). */
int stfs_location_pick_one(struct stfs_location *loc, char **all, size_t n,
			   const char *where, struct stfs_error *err);
/* The locators of hf:// (hub.c) and s3:// (s3.c): loc->arg is set. */
int stfs_locate_hf(struct stfs_location *loc, struct stfs_error *err);
int stfs_locate_s3(struct stfs_location *loc, struct stfs_error *err);
/* Fetch the small file f of an s3:// loc whole and check it (s3sum.c):
 * f->bytes, or f->fault; f->sum and f->unchecked say what was checked. */
void stfs_s3_fetch_small(const struct stfs_location *loc,
			 struct stfs_rfile *f);

#endif

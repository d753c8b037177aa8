/*
 * service.h: what the S3 room (s3/) offers the locator's owner
 * (services.c): the functions of its entry in the service table (struct
 * stfs_service, locate.h).
 */
#ifndef STFS_S3_SERVICE_H
#define STFS_S3_SERVICE_H

#include "source.h"

/* The locator of s3:// (s3.c): loc->arg is set. */
int stfs_locate_s3(struct stfs_location *loc, struct stfs_error *err);
/* Fetch the small file f of an s3:// loc whole and check it (s3sum.c):
 * f->bytes, or f->fault; f->sum and f->unchecked say what was checked. */
void stfs_s3_fetch_small(const struct stfs_location *loc,
			 struct stfs_rfile *f);

#endif

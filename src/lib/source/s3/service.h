/*
 * service.h: what the S3 room (s3/) offers the rooms' owners: the
 * functions of its entry in the service table (struct stfs_service,
 * locate.h) for services.c, and S3's error documents in words for the
 * HTTP client that remote.c makes.
 */
#ifndef STFS_S3_SERVICE_H
#define STFS_S3_SERVICE_H

#include <stddef.h>

#include "source.h"

/* The locator of s3:// (s3.c): loc->arg is set. */
int stfs_locate_s3(struct stfs_location *loc, struct stfs_error *err);
/* The same with no credential chain (no provider run, no key read):
 * loc->auth unsigned, for a caller that gives it keys of its own (a
 * mirror's: mirror/keys.c), so that no provider of the chain, failing or
 * not, is asked for keys it would not use. */
int stfs_locate_s3_keyed(struct stfs_location *loc,
			 struct stfs_error *err);
/* Fetch the small file f of an s3:// loc whole and check it (s3sum.c):
 * f->bytes, or f->fault; f->sum and f->unchecked say what was checked. */
void stfs_s3_fetch_small(const struct stfs_location *loc,
			 struct stfs_rfile *f);

/* What requests carry with the static keys of the AWS profile named
 * (its section of ~/.aws/credentials, else of ~/.aws/config; no other
 * provider of the chain, no key of the environment), signed for region:
 * -o mirror_profile= (mirror/tier.c; s3/profile.c).  NULL with err saying
 * why (no such profile, no keys in it). */
struct stfs_auth;
struct stfs_auth *stfs_s3_profile_auth(const char *profile,
				       const char *region,
				       struct stfs_error *err);

/* For the HTTP client's messages (http/http.h: struct stfs_http_client's
 * error_text; remote.c and creds.c give it): */
/* An S3 error document's "Code: Message" into out (s3xml.c), for the
 * client's messages, cut to fit and control characters made spaces: 0,
 * -EINVAL when xml is not one, -ENOSPC when not one character fits.  Only
 * the start of the document may be at hand: a Code complete before the
 * cut is enough. */
int stfs_s3_error_parse(const char *xml, size_t len, char *out,
			size_t outsz);

#endif

/*
 * keys.c: the keys a mount reads its mirror with (-o mirror=, tier.c):
 * its own, apart from the origin's: an AWS profile's static keys
 * (-o mirror_profile=NAME), else STFS_MIRROR_AWS_ACCESS_KEY_ID,
 * STFS_MIRROR_AWS_SECRET_ACCESS_KEY and STFS_MIRROR_AWS_SESSION_TOKEN in
 * the environment (a CSI volume's secret gives them so), else the s3://
 * chain's (docs/mirror.md, "Credentials of the mirror").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "engine.h"
#include "auth.h"
#include "s3/service.h"
#include "mirror/mirror.h"

/* The mirror's own keys in the environment (STFS_MIRROR_AWS_*: a CSI
 * volume's secret gives them so), or NULL when there are none: an
 * access key without its secret is refused (-EACCES, said in e). */
static struct stfs_auth *env_keys(const char *region, int *rc,
				  struct stfs_error *e)
{
	const char *id = stfs_env("STFS_MIRROR_AWS_ACCESS_KEY_ID");
	const char *secret = stfs_env("STFS_MIRROR_AWS_SECRET_ACCESS_KEY");
	struct stfs_auth *au;

	*rc = 0;
	if (!id && !secret)
		return NULL;
	if (!id || !secret) {
		*rc = stfs_fail(e, -EACCES, NULL, STFS_NO_OFFSET, "%s is set "
				"without %s", id ? "STFS_MIRROR_AWS_ACCESS_KEY_ID"
				: "STFS_MIRROR_AWS_SECRET_ACCESS_KEY", id ?
				"STFS_MIRROR_AWS_SECRET_ACCESS_KEY" :
				"STFS_MIRROR_AWS_ACCESS_KEY_ID");
		return NULL;
	}
	if (!(au = stfs_auth_new(NULL, id, secret,
				 stfs_env("STFS_MIRROR_AWS_SESSION_TOKEN"),
				 region)))
		*rc = stfs_nomem(e);
	return au;
}

int stfs_mirror_keys(struct stfs_remote *r, struct stfs_location *ml,
		     struct stfs_error *e)
{
	struct stfs_auth *au;
	int rc = 0;

	au = r->o.mirror_profile ?
	     stfs_s3_profile_auth(r->o.mirror_profile, ml->auth->region,
				  e) : env_keys(ml->auth->region, &rc, e);
	if (!au)
		return r->o.mirror_profile || rc ? -EACCES : 0;
	if (ml->auth->ca_file && !(au->ca_file =
				      strdup(ml->auth->ca_file))) {
		stfs_auth_unref(au);
		return stfs_nomem(e);
	}
	stfs_auth_unref(ml->auth);
	ml->auth = au;
	return 0;
}

int stfs_mirror_has_keys(const struct stfs_remote *r)
{
	return r->o.mirror_profile ||
	       stfs_env("STFS_MIRROR_AWS_ACCESS_KEY_ID") ||
	       stfs_env("STFS_MIRROR_AWS_SECRET_ACCESS_KEY");
}

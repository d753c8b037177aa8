/*
 * profile.c: the keys of one AWS profile named apart from the
 * environment's: the mirror's own read-only credentials
 * (-o mirror_profile=NAME, mirror/tier.c; docs/mirror.md), static keys
 * of that profile's section in the credentials file, else in the config
 * file.  The chain's other providers are the source's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "s3/s3.h"

struct stfs_auth *stfs_s3_profile_auth(const char *profile,
				       const char *region,
				       struct stfs_error *err)
{
	struct stfs_aws_conf a;
	char *access = NULL, *secret = NULL, *token = NULL;
	struct stfs_auth *au = NULL;
	int rc;

	if (stfs_aws_conf_load_named(&a, profile, err))
		return NULL;
	if (!(rc = stfs_aws_conf_keys_at(&a, STFS_KEYS_CRED, &access,
					 &secret, &token, err)) && !access)
		rc = stfs_aws_conf_keys_at(&a, STFS_KEYS_CONF, &access,
					   &secret, &token, err);
	if (!rc && !access)
		stfs_fail(err, -ENOENT, NULL, STFS_NO_OFFSET, "the AWS profile "
			  "%s has no aws_access_key_id (mirror_profile= takes "
			  "a profile's static keys)", a.profile);
	else if (!rc && !(au = stfs_auth_new(NULL, access, secret, token,
					     region)))
		stfs_nomem(err);
	if (secret)
		memset(secret, 0, strlen(secret));
	free(access);
	free(secret);
	free(token);
	stfs_aws_conf_free(&a);
	return au;
}

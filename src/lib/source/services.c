/*
 * services.c: the services the locator hands URLs to, and the locator as
 * the layers above call it (stfs_locate(), source.h).  This file owns the
 * table (struct stfs_service, locate.h): the locator (locate.c) names no
 * service, and no service names another; a new scheme is a row here.
 */
#include <errno.h>
#include <stddef.h>

#include "format.h"
#include "locate.h"
#include "http/http.h"
#include "hub/service.h"
#include "s3/service.h"
#include "mirror/mirror.h"

static const struct stfs_service services[] = {
	{ "http", STFS_SCHEME_HTTP, 0, stfs_locate_url, NULL },
	{ "https", STFS_SCHEME_HTTPS, 0, stfs_locate_url, NULL },
	{ "hf", STFS_SCHEME_HF, 1, stfs_locate_hf, NULL },
	{ "s3", STFS_SCHEME_S3, 1, stfs_locate_s3, stfs_s3_fetch_small },
};

int stfs_locate(const char *arg, struct stfs_remote *net,
		struct stfs_location **out, struct stfs_error *err)
{
	int rc = stfs_mirror_prepare(net) ? stfs_nomem(err) :
		 stfs_locate_with(services,
				  sizeof(services) / sizeof(services[0]), arg,
				  net, out, err);

	/* -o mirror=: the listing (a pinned hf:// source) and the files
	 * read from it when its manifest fits */
	if (!rc && stfs_mirror_attach(*out) == -ENOMEM) {
		stfs_location_free(*out);
		*out = NULL;
		rc = stfs_nomem(err);
	}
	return rc;
}

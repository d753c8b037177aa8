/*
 * trust.c: the trust domain of what a request fetches, by the credential
 * it carries (struct stfs_auth, as httpc.c's request_auth() sends it).
 *
 * Bytes fetched with a credential are kept in the cache under keys that
 * start with the credential's tag (blocks/trustkey.c), so that a mount
 * without that credential (another spelling of the same object: the Hub's
 * resolve URL, the CDN's, an S3 object's plain URL; or the same source
 * with no credential, or another one) can never name them: not online,
 * not when the origin cannot be reached, not offline.  The credential is
 * the class of each part a request carries and its value:
 *   bearer   a Hub token (Authorization: Bearer)
 *   basic    a URL's user and password
 *   query    a presigned URL's query (its signature)
 *   aws      AWS keys: the access key and secret of the moment (keys
 *            refreshed since are another credential)
 *   netrc    with none of bearer, basic or aws (the requests libcurl
 *            sends ~/.netrc's entries with): the whole netrc file, as
 *            read now (NETRC, else $HOME/.netrc), when there is one
 * A request with none is public: no tag, its bytes shared by every mount
 * that fetches them with none.  A credential that changes (a new token of
 * the same user, rotated keys, an edited netrc) is another domain: its
 * first mount fetches again.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/crypto.h>

#include "format.h"
#include "engine.h"
#include "http/http.h"

#define NETRC_MAX (1u << 20)    /* a netrc larger is read as far as this */

/* The netrc libcurl reads for a request with no credential of its own
 * (NETRC, else the home's .netrc), whole, appended to f: 1 if there is
 * one, else 0. */
static int add_netrc(const struct stfs_remote *r, FILE *f)
{
	const char *file = r->http->netrc, *home = getenv("HOME");
	char path[4096], buf[8192];
	struct passwd pw, *res = NULL;
	size_t total = 0;
	ssize_t n;
	int fd;

	if (!file) {
		if (!home || !*home) {
			char pwbuf[4096];

			if (getpwuid_r(getuid(), &pw, pwbuf, sizeof(pwbuf),
				       &res) || !res)
				return 0;
			snprintf(path, sizeof(path), "%s/.netrc", res->pw_dir);
		} else {
			snprintf(path, sizeof(path), "%s/.netrc", home);
		}
		file = path;
	}
	if ((fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0)
		return 0;
	while (total < NETRC_MAX && (n = read(fd, buf, sizeof(buf))) > 0) {
		fwrite(buf, 1, (size_t)n, f);
		total += (size_t)n;
	}
	OPENSSL_cleanse(buf, sizeof(buf));
	close(fd);
	return 1;
}

/* The keys a signs with now (refreshed ones, if refreshing), appended to
 * f: 0, or -EKEYEXPIRED (none now). */
static int add_aws(const struct stfs_auth *a, FILE *f)
{
	struct stfs_creds_keys k = { 0 };
	char why[8];

	if (!a->creds) {
		fprintf(f, "%s%c%s%c", a->access_key, 0, a->secret_key, 0);
		return 0;
	}
	if (a->creds_ops->now(a->creds, &k, why, sizeof(why)))
		return -EKEYEXPIRED;
	fprintf(f, "%s%c%s%c", k.access, 0, k.secret, 0);
	stfs_creds_keys_drop(&k);
	return 0;
}

/* The class and credential of a's requests (flags: STFS_REQ_*) into cls
 * and the memory stream f: 0, or -errno. */
static int credential_of(const struct stfs_remote *r,
			 const struct stfs_auth *a, unsigned flags,
			 char *cls, size_t clsz, FILE *f)
{
	int rc = 0;

	cls[0] = '\0';
#define CLASS(name) snprintf(cls + strlen(cls), clsz - strlen(cls), \
			     "%s%s", cls[0] ? "+" : "", name)
	if (a && a->bearer) {
		CLASS("bearer");
		fprintf(f, "%s%c", a->bearer, 0);
	}
	if (a && a->sign) {
		CLASS("aws");
		rc = add_aws(a, f);
	}
	if (a && a->user) {
		CLASS("basic");
		fprintf(f, "%s%c%s%c", a->user, 0,
			a->password ? a->password : "", 0);
	}
	if (a && a->query) {
		CLASS("query");
		fprintf(f, "%s%c", a->query, 0);
	}
	/* as request_auth(): netrc for a request with none of those */
	if ((!a || (!a->bearer && !a->sign && !a->user)) &&
	    !(flags & STFS_REQ_NONETRC) && add_netrc(r, f))
		CLASS("netrc");
#undef CLASS
	return rc;
}

int stfs_http_trust(struct stfs_remote *r, const struct stfs_auth *a,
		    unsigned flags, char **tag)
{
	char cls[64], out[128], *id = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&id, &n);
	int rc;

	*tag = NULL;
	if (!f)
		return -ENOMEM;
	rc = credential_of(r, a, flags, cls, sizeof(cls), f);
	if (fclose(f) != 0) {
		free(id);
		return -ENOMEM;
	}
	if (!rc && cls[0]) {
		rc = stfs_cache_trust_tag(stfs_remote_cache(r), cls, id, n,
					  out, sizeof(out));
		if (!rc && !(*tag = strdup(out)))
			rc = -ENOMEM;
	}
	OPENSSL_cleanse(id, n);
	free(id);
	return rc;
}

char *stfs_http_trust_key(const char *tag, const char *key)
{
	char *k;

	if (!tag)
		return strdup(key);
	return asprintf(&k, "%s %s", tag, key) < 0 ? NULL : k;
}

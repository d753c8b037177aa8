/*
 * s3.c: the locator of s3:// sources, objects in AWS S3 or an
 * S3-compatible store (MinIO, Ceph RGW, OpenStack Swift's s3api).
 *
 *   s3://BUCKET/KEY        one file (or an index: KEY ends .index.json)
 *   s3://BUCKET/PREFIX/    its index, else its *.safetensors files (with
 *                          none: its PyTorch index or checkpoints)
 *                          directly under PREFIX, listed with
 *                          ListObjectsV2; its index by name when the
 *                          keys may not list (every object under it is
 *                          in %repo/)
 *
 * AWS's conventions: keys as botocore's chain finds them (chain() below):
 * AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, web
 * identity, the profile in ~/.aws/credentials, its credential_process,
 * its keys in ~/.aws/config (the profile found as the AWS CLI finds it,
 * awsconf.c), the container endpoint, IMDSv2 (creds.c); the region
 * from AWS_REGION, AWS_DEFAULT_REGION or the profile (us-east-1 if none);
 * the endpoint from AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL or the
 * profile's endpoint_url (AWS's regional endpoint if none); a private
 * endpoint's CA from AWS_CA_BUNDLE or the profile's ca_bundle.  With keys every request is signed (SigV4, sigv4.c); without,
 * requests go unsigned, for public buckets.  Addressing: virtual-hosted
 * (https://BUCKET.s3.REGION.amazonaws.com/KEY) on AWS, path-style
 * (ENDPOINT/BUCKET/KEY) on another endpoint, unless the remote options
 * say (s3_style=).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "s3.h"

#define LIST_MAX (16u << 20)        /* bytes of one listing page */
#define AGAIN "gives a continuation token already used"

/* ---- s3://BUCKET/KEY ------------------------------------------------------ */

static int bucket_ok(const char *b, size_t n)
{
	if (n < 1 || n > 255)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)b[i]) && !strchr(".-_", b[i]))
			return 0;
	return 1;
}

/* Each '/'-separated part of path escaped as SigV4 wants (all but
 * A-Za-z0-9-._~), the slashes kept. */
static char *escape_key(const char *path)
{
	char *out = malloc(strlen(path) * 3 + 1), *o = out;
	const char *c = path;

	if (!out)
		return NULL;
	*o = '\0';
	for (;;) {
		size_t n = strcspn(c, "/");
		char *e = n ? curl_easy_escape(NULL, c, (int)n) : NULL;

		if (n && !e) {
			free(out);
			return NULL;
		}
		o += sprintf(o, "%s", e ? e : "");
		curl_free(e);
		c += n;
		if (!*c)
			break;
		*o++ = '/';
		*o = '\0';
		c++;
	}
	return out;
}

struct s3 {
	char *bucket, *key;
	char *endpoint;         /* scheme://host[:port], no path */
	int virtual;
	struct stfs_remote *net;        /* requests go through it */
};

/* The URL of "directory" dir (escaped, "" or ending in '/') in the
 * bucket, without its trailing '/'. */
static char *url_of(const struct s3 *s, const char *dir_esc)
{
	const char *host = strstr(s->endpoint, "://") + 3;
	size_t l = strlen(dir_esc);
	char *u = NULL;
	int n;

	if (l && dir_esc[l - 1] == '/')
		l--;
	if (s->virtual)
		n = asprintf(&u, "%.*s%s.%s%s%.*s",
			     (int)(host - s->endpoint), s->endpoint, s->bucket,
			     host, l ? "/" : "", (int)l, dir_esc);
	else
		n = asprintf(&u, "%s/%s%s%.*s", s->endpoint, s->bucket,
			     l ? "/" : "", (int)l, dir_esc);
	return n < 0 ? NULL : u;
}

/* ---- listing ------------------------------------------------------------ */

struct names {
	const char *prefix;
	char **all;
	size_t n;
	size_t entries;         /* objects listed so far */
	struct stfs_rlist *rl;  /* every object under the prefix (%repo/) */
};

/* An object under the prefix, for %repo/: its ETag is the MD5 of its
 * bytes when it is 32 hex digits (a single-part upload; a multipart
 * ETag ends "-N" and checks nothing). */
static int repo_object(struct stfs_rlist *rl, const char *rel,
		       uint64_t size, const char *etag)
{
	char sum[48];
	size_t n = etag ? strlen(etag) : 0;
	int md5 = n == 34 && etag[0] == '"' && etag[33] == '"' &&
		  strspn(etag + 1, "0123456789abcdef") == 32;
	int rc;

	if (!*rel || rel[strlen(rel) - 1] == '/')
		return 0;               /* a folder marker */
	if (md5)
		snprintf(sum, sizeof(sum), "md5:%.32s", etag + 1);
	rc = stfs_rlist_push(rl, rel, size, md5 ? sum : NULL,
			     stfs_repo_path_bad(rel));
	if (!rc)
		rl->f[rl->n - 1].small = stfs_repo_is_small(rel, size);
	/* its revision (user.stfs.revision): the ETag */
	if (!rc && etag && !(rl->f[rl->n - 1].revision = strdup(etag)))
		rc = -ENOMEM;
	return rc;
}

static int on_object(void *arg, const char *key, uint64_t size,
		     const char *etag)
{
	struct names *l = arg;
	size_t pl = strlen(l->prefix);
	char **a;

	l->entries++;
	if (strncmp(key, l->prefix, pl) != 0 || !key[pl])
		return 0;
	if (l->rl && repo_object(l->rl, key + pl, size, etag))
		return -ENOMEM;
	if (strchr(key + pl, '/'))
		return 0;               /* not directly under the prefix */
	if (!(a = realloc(l->all, (l->n + 1) * sizeof(*a))))
		return -ENOMEM;
	l->all = a;
	if (!(a[l->n] = strdup(key + pl)))
		return -ENOMEM;
	l->n++;
	return 0;
}

/* The keys directly under s->key (a prefix ending in '/', or ""). */
static int list(const struct s3 *s, struct stfs_auth *auth, struct names *l,
		struct stfs_error *err)
{
	struct stfs_pages seen = { 0 };
	char *token = NULL, *root = url_of(s, "");
	unsigned tmo = stfs_remote_list_timeout_ms(s->net);
	const char *what = "the bucket's listing";
	int rc = 0, truncated = 1;

	if (!root)
		return stfs_nomem(err);
	/* the first page, which has none */
	if ((rc = stfs_pages_add(&seen, "", tmo)))
		rc = stfs_pages_fail(&seen, rc, what, AGAIN, "", tmo,
				     err);
	while (!rc && truncated) {
		size_t before = l->entries;
		char *tok = token ? curl_easy_escape(NULL, token, 0) : NULL;
		char *pre = curl_easy_escape(NULL, s->key, 0), *url = NULL;
		struct stfs_http_resp r;
		char *body;
		size_t len;

		/* the query's parameters sorted, as SigV4 signs them */
		if (!pre || (token && !tok) ||
		    asprintf(&url, "%s/?%s%s%slist-type=2&prefix=%s", root, tok ? "continuation-token=" :
			     "", tok ? tok : "", tok ? "&" : "", pre) < 0)
			url = NULL;
		curl_free(tok);
		curl_free(pre);
		free(token);
		token = NULL;
		if (!url) {
			rc = stfs_nomem(err);
			break;
		}
		rc = stfs_http_get(s->net, url, auth, STFS_REQ_KEEP, NULL,
				   LIST_MAX, &body, &len, &r, err);
		free(url);
		if (rc)
			break;
		rc = stfs_s3_list_parse(body, len, on_object, l, &truncated,
					&token);
		free(body);
		if (rc == -ENOMEM)
			rc = stfs_nomem(err);
		else if (rc)
			rc = stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "the "
				       "bucket's listing does not parse");
		else if ((rc = stfs_pages_took(&seen, l->entries - before,
					       len)) ||
			 (truncated && (rc = stfs_pages_add(&seen, token,
							    tmo))))
			rc = stfs_pages_fail(&seen, rc, what, AGAIN, token ?
					     token : "", tmo, err);
	}
	free(token);
	free(root);
	stfs_pages_free(&seen);
	return rc;
}

/* The endpoint, as the AWS CLI finds it (the environment, the profile,
 * else AWS's own for region) into *ep; *custom if it is not AWS's: 0 or
 * -errno. */
static int endpoint_of(struct stfs_aws_conf *a, const char *region,
		       char **ep, int *custom, struct stfs_error *err)
{
	char *e;

	e = stfs_env("AWS_ENDPOINT_URL_S3") ?
	    strdup(stfs_env("AWS_ENDPOINT_URL_S3")) :
	    stfs_env("AWS_ENDPOINT_URL") ? strdup(stfs_env("AWS_ENDPOINT_URL")) :
	    stfs_aws_conf_get(a, "endpoint_url");
	*custom = e != NULL;
	if (!e && asprintf(&e, "https://s3.%s.amazonaws.com", region) < 0)
		return stfs_nomem(err);
	*ep = e;
	stfs_url_lower_scheme(e);
	while (strlen(e) > 8 && e[strlen(e) - 1] == '/')
		e[strlen(e) - 1] = '\0';
	if (!stfs_is_url(e) || strchr(strstr(e, "://") + 3, '/') ||
	    strchr(e, '?'))
		return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET, "the S3 "
				 "endpoint is not http(s)://HOST[:PORT]: %s",
				 e);
	return 0;
}

/* What s->key names: a prefix (listed, or its index when listing is
 * refused) or one object; loc's kind, name and base.  0 or -errno. */
static int what_key_names(struct s3 *s, struct stfs_location *loc,
			  struct stfs_error *err)
{
	struct names l = { 0 };
	char *dir = NULL, *slash;
	int rc = 0;

	if (!*s->key || s->key[strlen(s->key) - 1] == '/') {
		l.prefix = s->key;
		l.rl = &loc->files;
		rc = list(s, loc->auth, &l, err);
		loc->files.listed = !rc;
		if (rc == -EACCES && *s->key) {
			/* no right to list: its index, if there is one */
			loc->kind = STFS_LOC_INDEX;
			if (!(loc->name = strdup("model.safetensors.index."
						 "json")))
				rc = stfs_nomem(err);
			else
				rc = 0;
		} else if (!rc) {
			rc = stfs_location_pick_one(loc, l.all, l.n,
						    "this prefix", err);
			/* no weights at the top: %repo/ still shows the rest */
			if (rc == -ENOENT && loc->files.n) {
				loc->kind = STFS_LOC_DIR;
				rc = err && !(loc->note = strdup(err->msg)) ?
				     stfs_nomem(err) : 0;
			}
		}
	} else {
		slash = strrchr(s->key, '/');
		loc->kind = stfs_ends_with(s->key, ".index.json") &&
			    strlen(s->key) > 11 ? STFS_LOC_INDEX :
			    STFS_LOC_FILE;
		if (!(loc->name = strdup(slash ? slash + 1 : s->key)))
			rc = stfs_nomem(err);
		else if (slash)
			slash[1] = '\0';
		else
			s->key[0] = '\0';
	}
	if (!rc && (!(dir = escape_key(s->key)) ||
		    !(loc->base = url_of(s, dir))))
		rc = stfs_nomem(err);
	for (size_t i = 0; i < l.n; i++)
		free(l.all[i]);
	free(l.all);
	free(dir);
	return rc;
}

/* ---- the credentials: botocore's chain --------------------------------- */

/*
 * The keys as botocore's chain finds them, in its order: the
 * environment's keys; web identity (creds.c); the credentials file's
 * section; credential_process; the config file's section; the container
 * endpoint; IMDS.  The first that is set up wins (one that is set up and
 * fails is the mount's error, as it is botocore's), and none at all means
 * unsigned requests.  Static keys in *access, *secret, *token, or
 * refreshing ones in *creds.  With -o offline, the providers that ask a
 * service are skipped.
 */
static int chain(const struct stfs_aws_conf *a, const char *region,
		 struct stfs_remote *net, char **access, char **secret,
		 char **token, struct stfs_creds **creds,
		 struct stfs_error *err)
{
	static const struct { int keys; int at; } order[] = {
		{ 1, STFS_KEYS_ENV }, { 0, STFS_CREDS_WEB_IDENTITY },
		{ 1, STFS_KEYS_CRED }, { 0, STFS_CREDS_PROCESS },
		{ 1, STFS_KEYS_CONF }, { 0, STFS_CREDS_CONTAINER },
		{ 0, STFS_CREDS_IMDS },
	};
	int rc;

	*creds = NULL;
	for (size_t i = 0; i < sizeof(order) / sizeof(*order); i++) {
		if (order[i].keys)
			rc = stfs_aws_conf_keys_at(a, order[i].at, access,
						   secret, token, err);
		else if (stfs_remote_offline(net))
			continue;
		else
			rc = stfs_creds_try(a, region, order[i].at, net, creds,
					    err);
		if (rc || *access || *creds)
			return rc;
	}
	return 0;
}

/* ---- the locator ------------------------------------------------------ */

/* loc located, its requests signed with the chain's keys (with_chain),
 * or unsigned: the caller gives the keys (stfs_locate_s3_keyed()). */
static int locate(struct stfs_location *loc, int with_chain,
		  struct stfs_error *err)
{
	struct stfs_aws_conf a;
	struct s3 s = { 0 };
	char *access = NULL, *secret = NULL, *token = NULL, *region = NULL;
	char *ep = NULL;
	struct stfs_creds *creds = NULL;
	const char *p = loc->arg + 5, *k;
	enum stfs_s3_style style;
	int rc = 0, custom, conf = 0;

	k = strchr(p, '/');
	if (!bucket_ok(p, k ? (size_t)(k - p) : strlen(p)))
		return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET, "not a "
				 "bucket: give s3://BUCKET/KEY or "
				 "s3://BUCKET/PREFIX/");
	if (!(s.bucket = k ? strndup(p, (size_t)(k - p)) : strdup(p)) ||
	    !(s.key = strdup(k ? k + 1 : "")))
		goto nomem;
	for (const char *c = s.key; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f) {
			rc = stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
				       "a control character in the key");
			goto out;
		}

	/* the profile, as the AWS CLI finds it (awsconf.c) */
	if ((rc = stfs_aws_conf_load(&a, err)))
		goto out;
	conf = 1;
	region = stfs_env("AWS_REGION") ? strdup(stfs_env("AWS_REGION")) :
		 stfs_env("AWS_DEFAULT_REGION") ? strdup(stfs_env("AWS_DEFAULT_REGION")) :
		 stfs_aws_conf_get(&a, "region");
	if ((stfs_env("AWS_REGION") || stfs_env("AWS_DEFAULT_REGION")) &&
	    !region)
		goto nomem;
	if (with_chain && (rc = chain(&a, region, loc->net, &access, &secret,
				      &token, &creds, err)))
		goto out;
	if (!region && !(region = strdup("us-east-1")))
		goto nomem;
	if ((rc = endpoint_of(&a, region, &ep, &custom, err)))
		goto out;
	s.endpoint = ep;
	s.net = loc->net;
	style = stfs_remote_s3_style(loc->net);
	s.virtual = style == STFS_S3_VIRTUAL ||
		    (style == STFS_S3_AUTO && !custom);
	if (!(loc->auth = stfs_auth_new(NULL, access, secret, token, region)))
		goto nomem;
	if (creds) {
		/* temporary keys, refreshed: every request asks them */
		loc->auth->creds = creds;
		loc->auth->creds_ops = stfs_creds_ops();
		loc->auth->sign = 1;
		creds = NULL;
	}
	/* a private endpoint's CA, as the AWS tools take it */
	loc->auth->ca_file = stfs_env("AWS_CA_BUNDLE") ?
			     strdup(stfs_env("AWS_CA_BUNDLE")) :
			     stfs_aws_conf_get(&a, "ca_bundle");
	if (stfs_env("AWS_CA_BUNDLE") && !loc->auth->ca_file)
		goto nomem;

	rc = what_key_names(&s, loc, err);
	goto out;
nomem:
	rc = stfs_nomem(err);
out:
	if (secret)
		memset(secret, 0, strlen(secret));
	free(access);
	free(secret);
	free(token);
	free(region);
	stfs_creds_free(creds);
	free(ep);
	free(s.bucket);
	free(s.key);
	if (conf)
		stfs_aws_conf_free(&a);
	return rc;
}

int stfs_locate_s3(struct stfs_location *loc, struct stfs_error *err)
{
	return locate(loc, 1, err);
}

int stfs_locate_s3_keyed(struct stfs_location *loc, struct stfs_error *err)
{
	return locate(loc, 0, err);
}

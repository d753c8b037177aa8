/*
 * sts.c: web identity (IRSA on EKS, any OIDC token): the token file read
 * again at every fetch (Kubernetes rotates it under the pod), sent to STS
 * AssumeRoleWithWebIdentity (an unsigned POST of the query protocol), and
 * the answer's XML read by s3xml.c (stfs_sts_parse()).
 *
 * The endpoint, as the SDKs find it: AWS_ENDPOINT_URL_STS, else
 * AWS_ENDPOINT_URL, else the profile's endpoint_url, else STS of the
 * region (https://sts.REGION.amazonaws.com; .amazonaws.com.cn in China),
 * or the global https://sts.amazonaws.com with no region, or for one of
 * the legacy regions when AWS_STS_REGIONAL_ENDPOINTS (or the profile's
 * sts_regional_endpoints) is "legacy".  A redirect is refused, the
 * answer bounded (64 KiB).
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format.h"
#include "s3.h"

#define TOKEN_FILE_MAX (64u << 10)
#define ANSWER_MAX (64u << 10)

static const char *const legacy_global[] = {
	"ap-northeast-1", "ap-south-1", "ap-southeast-1", "ap-southeast-2",
	"aws-global", "ca-central-1", "eu-central-1", "eu-north-1",
	"eu-west-1", "eu-west-2", "eu-west-3", "sa-east-1", "us-east-1",
	"us-east-2", "us-west-1", "us-west-2",
};

char *stfs_sts_url(const struct stfs_aws_conf *a, const char *region)
{
	const char *v = stfs_env("AWS_ENDPOINT_URL_STS");
	char *u = NULL, *mode;
	int legacy;

	if (!v)
		v = stfs_env("AWS_ENDPOINT_URL");
	if (v)
		u = strdup(v);
	else
		u = stfs_aws_conf_get(a, "endpoint_url");
	if (u || (v && !u))
		return u;
	mode = stfs_env("AWS_STS_REGIONAL_ENDPOINTS") ?
	       strdup(stfs_env("AWS_STS_REGIONAL_ENDPOINTS")) :
	       stfs_aws_conf_get(a, "sts_regional_endpoints");
	legacy = mode && !strcasecmp(mode, "legacy");
	free(mode);
	for (size_t i = 0; region && legacy &&
	     i < sizeof(legacy_global) / sizeof(*legacy_global); i++)
		if (!strcmp(region, legacy_global[i]))
			region = NULL;
	if (!region || !strcmp(region, "aws-global"))
		return strdup("https://sts.amazonaws.com");
	if (asprintf(&u, "https://sts.%s.amazonaws.com%s", region,
		     !strncmp(region, "cn-", 3) ? ".cn" : "") < 0)
		return NULL;
	return u;
}

/* The token file's bytes, whole (at most 64 KiB, not empty): 0 with
 * *out, or -errno with err. */
static int read_token(const char *path, char **out, struct stfs_error *err)
{
	int fd = stfs_creds_open_file(path);
	char *buf = NULL;
	size_t n = 0;
	ssize_t got;

	*out = NULL;
	if (fd < 0)
		return stfs_fail(err, fd, NULL, STFS_NO_OFFSET, "the web "
				 "identity token file %s: %s", path,
				 stfs_creds_open_why(fd));
	if (!(buf = malloc(TOKEN_FILE_MAX + 1))) {
		close(fd);
		return stfs_nomem(err);
	}
	while ((got = read(fd, buf + n, TOKEN_FILE_MAX + 1 - n)) > 0 &&
	       (n += (size_t)got) <= TOKEN_FILE_MAX)
		;
	close(fd);
	if (got < 0 || n > TOKEN_FILE_MAX || !n) {
		int e = got < 0 ? errno : 0;

		explicit_bzero(buf, TOKEN_FILE_MAX + 1);
		free(buf);
		return stfs_fail(err, e ? -e : -EINVAL, NULL, STFS_NO_OFFSET,
				 "the web identity token file %s: %s", path,
				 e ? strerror(e) : n ? "over 64 KiB" :
				 "empty");
	}
	buf[n] = '\0';
	*out = buf;
	return 0;
}

/* name=escaped(value) appended to *body (a new string each time). */
static int param(char **body, const char *name, const char *value)
{
	char *e = curl_easy_escape(NULL, value, 0), *nb = NULL;
	int rc;

	if (!e)
		return -ENOMEM;
	rc = asprintf(&nb, "%s%s%s=%s", *body ? *body : "", *body ? "&" : "",
		      name, e);
	explicit_bzero(e, strlen(e));
	curl_free(e);
	if (*body) {
		explicit_bzero(*body, strlen(*body));
		free(*body);
	}
	*body = rc < 0 ? NULL : nb;
	return rc < 0 ? -ENOMEM : 0;
}

int stfs_sts_fetch(struct stfs_http_client *h,
		   const struct stfs_creds_src *src, struct stfs_creds_keys *k,
		   struct stfs_error *err)
{
	static const char *const hdrs[] = {
		"Content-Type: application/x-www-form-urlencoded; "
		"charset=utf-8",
		"Accept: text/xml",
	};
	char *token = NULL, *body = NULL, *answer = NULL, *url = NULL;
	size_t len;
	int rc;

	memset(k, 0, sizeof(*k));
	if ((rc = read_token(src->token_file, &token, err)))
		return rc;
	/* the query protocol's parameters, sorted as botocore writes them */
	if (param(&body, "Action", "AssumeRoleWithWebIdentity") ||
	    param(&body, "Version", "2011-06-15") ||
	    param(&body, "RoleArn", src->role_arn) ||
	    param(&body, "RoleSessionName", src->session_name) ||
	    param(&body, "WebIdentityToken", token) ||
	    asprintf(&url, "%s/", src->sts_url) < 0) {
		rc = stfs_nomem(err);
		url = NULL;
		goto out;
	}
	rc = stfs_http_call(h, "POST", url, hdrs, 2, body, strlen(body), 0,
			    ANSWER_MAX, &answer, &len, err);
	if (rc) {
		char why[sizeof(err->msg)];

		stfs_creds_unsay(err, token);
		snprintf(why, sizeof(why), "%s", err->msg);
		rc = stfs_fail(err, rc, NULL, STFS_NO_OFFSET, "STS "
			       "AssumeRoleWithWebIdentity at %s (role %s): %s",
			       src->sts_url, src->role_arn, why);
		goto out;
	}
	rc = stfs_sts_parse(answer, len, k);
	if (rc == -ENOMEM)
		rc = stfs_nomem(err);
	else if (rc)
		rc = stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "STS at %s: "
			       "the answer is not an AssumeRoleWithWebIdentity"
			       "Response with its keys and an Expiration",
			       src->sts_url);
out:
	if (token) {
		explicit_bzero(token, strlen(token));
		free(token);
	}
	if (body) {
		explicit_bzero(body, strlen(body));
		free(body);
	}
	if (answer) {
		explicit_bzero(answer, len);
		free(answer);
	}
	free(url);
	return rc;
}

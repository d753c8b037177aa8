/*
 * imds.c: an EC2 instance's role through the instance metadata service,
 * version 2 only: a session token by PUT /latest/api/token with its TTL
 * (X-aws-ec2-metadata-token-ttl-seconds: 21600), then the role's name
 * (GET /latest/meta-data/iam/security-credentials/) and its keys (GET
 * .../ROLE), both with the token (X-aws-ec2-metadata-token).  IMDSv1
 * (no token) is never used.  Each call is one attempt (the service is a
 * hop away, or not there at all: AWS_EC2_METADATA_DISABLED=true skips it),
 * sends no X-Forwarded-For (IMDSv2 refuses a token to a request that
 * was forwarded), follows no redirect, and its answer is bounded: a
 * token of printable characters, a role name of IAM's characters, the
 * keys' JSON read by credjson.c.  The endpoint: AWS_EC2_METADATA_SERVICE_
 * ENDPOINT (or the profile's ec2_metadata_service_endpoint), else
 * http://[fd00:ec2::254] when the endpoint mode is IPv6, else
 * http://169.254.169.254 (creds.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "s3.h"

#define TOKEN_MAX 4096
#define ROLE_MAX 128
#define ANSWER_MAX (64u << 10)

static int token_ok(const char *t, size_t n)
{
	if (!n || n > TOKEN_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)t[i] <= 0x20 || (unsigned char)t[i] >= 0x7f)
			return 0;
	return 1;
}

/* IAM's role names: letters, digits and +=,.@_- (1 to 64; 128 kept). */
static int role_ok(const char *r, size_t n)
{
	if (!n || n > ROLE_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = r[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || strchr("+=,.@_-", c)) || !c)
			return 0;
	}
	return 1;
}

/* The keys of the role's answer doc (its JSON, len bytes) into k: 0, or
 * -errno with err (a Code other than Success: -EACCES). */
static int keys_of(const char *role, const char *doc, size_t len,
		   struct stfs_creds_keys *k, struct stfs_error *err)
{
	struct stfs_credjson j;
	const char *why;
	int rc;

	if ((rc = stfs_credjson_parse(doc, len, &j, &why)))
		return rc == -ENOMEM ? stfs_nomem(err) :
		       stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "the role "
				 "%s's credentials: %s", role, why);
	if (stfs_credjson_str(&j, "Code") &&
	    strcmp(stfs_credjson_str(&j, "Code"), "Success")) {
		const char *code = stfs_credjson_str(&j, "Code");
		char q[80];

		rc = stfs_fail(err, -EACCES, NULL, STFS_NO_OFFSET, "the role "
			       "%s: Code %s", role, stfs_quote(code,
			       strlen(code), q, sizeof(q)));
	} else if ((rc = stfs_credjson_keys(&j, "Token", 1, k, &why))) {
		rc = stfs_fail(err, rc == -ENOMEM ? rc : -EIO, NULL,
			       STFS_NO_OFFSET, "the role %s's credentials: %s",
			       role, why);
	}
	stfs_credjson_free(&j);
	return rc;
}

int stfs_imds_fetch(struct stfs_http_client *h,
		    const struct stfs_creds_src *src, struct stfs_creds_keys *k,
		    struct stfs_error *err)
{
	static const char *const ttl[] = {
		"X-aws-ec2-metadata-token-ttl-seconds: 21600",
		"Content-Type:",        /* no body, so no type */
	};
	char *url = NULL, *token = NULL, *role = NULL, *doc = NULL, *hdr = NULL;
	size_t len, n;
	int rc;

	memset(k, 0, sizeof(*k));
	if (asprintf(&url, "%s/latest/api/token", src->imds) < 0)
		return stfs_nomem(err);
	rc = stfs_http_call(h, "PUT", url, ttl, 2, "", 0, STFS_REQ_ONCE,
			    TOKEN_MAX, &token, &len, err);
	free(url);
	url = NULL;
	if (rc)
		goto fail;
	if (!token_ok(token, len)) {
		rc = stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "its session "
			       "token is not 1 to 4096 printable characters");
		goto out;
	}
	if (asprintf(&hdr, "X-aws-ec2-metadata-token: %s", token) < 0 ||
	    asprintf(&url, "%s/latest/meta-data/iam/security-credentials/",
		     src->imds) < 0) {
		rc = stfs_nomem(err);
		goto out;
	}
	rc = stfs_http_call(h, "GET", url, (const char *const *)&hdr, 1, NULL,
			    0, STFS_REQ_ONCE, ROLE_MAX + 2, &role, &len, err);
	free(url);
	url = NULL;
	if (rc)
		goto fail;
	n = strcspn(role, "\n");        /* the first role listed */
	role[n] = '\0';
	if (!role_ok(role, n)) {
		rc = stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "the instance "
			       "has no role, or its name is not IAM's");
		goto out;
	}
	if (asprintf(&url, "%s/latest/meta-data/iam/security-credentials/%s",
		     src->imds, role) < 0) {
		url = NULL;
		rc = stfs_nomem(err);
		goto out;
	}
	rc = stfs_http_call(h, "GET", url, (const char *const *)&hdr, 1, NULL,
			    0, STFS_REQ_ONCE, ANSWER_MAX, &doc, &len, err);
	if (rc)
		goto fail;
	rc = keys_of(role, doc, len, k, err);
	goto out;
fail:
	{
		char w[sizeof(err->msg)];

		stfs_creds_unsay(err, token);
		snprintf(w, sizeof(w), "%s", err->msg);
		rc = stfs_fail(err, rc, NULL, STFS_NO_OFFSET, "IMDSv2 at %s: "
			       "%s", src->imds, w);
	}
out:
	free(url);
	if (hdr) {
		explicit_bzero(hdr, strlen(hdr));
		free(hdr);
	}
	if (token) {
		explicit_bzero(token, strlen(token));
		free(token);
	}
	if (doc) {
		explicit_bzero(doc, strlen(doc));
		free(doc);
	}
	free(role);
	return rc;
}

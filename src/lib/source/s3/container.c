/*
 * container.c: the container credentials endpoint: ECS's task role
 * (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI, asked at http://169.254.170.2)
 * and EKS Pod Identity or any other agent (AWS_CONTAINER_CREDENTIALS_FULL_
 * URI).  The URL is allowed as botocore allows it: https to any host;
 * plain http only to a loopback address (127.0.0.0/8, ::1) or to the
 * hosts the agents listen on (169.254.170.2, 169.254.170.23,
 * fd00:ec2::23, localhost).  The authorization token is read again at each
 * fetch from AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE (EKS rotates it), else
 * taken from AWS_CONTAINER_AUTHORIZATION_TOKEN, and sent as the
 * Authorization header; a token with a control character is refused.  The
 * answer (a redirect refused, at most 64 KiB) is JSON read by credjson.c
 * and must carry AccessKeyId, SecretAccessKey, Token and Expiration.
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "format.h"
#include "s3.h"

#define AUTH_MAX (16u << 10)
#define ANSWER_MAX (64u << 10)

static int loopback(const char *host)
{
	unsigned a, b, c, d;
	char tail;

	if (!strcmp(host, "[::1]") || !strcmp(host, "::1"))
		return 1;
	return sscanf(host, "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) == 4 &&
	       a == 127 && b < 256 && c < 256 && d < 256;
}

int stfs_container_url_ok(const char *url)
{
	static const char *const hosts[] = {
		"169.254.170.2", "169.254.170.23", "[fd00:ec2::23]",
		"localhost",
	};
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL;
	int ok = 0;

	if (u && !curl_url_set(u, CURLUPART_URL, url, 0) &&
	    !curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) &&
	    !curl_url_get(u, CURLUPART_HOST, &host, 0)) {
		if (!strcmp(scheme, "https"))
			ok = 1;
		else if (!strcmp(scheme, "http")) {
			ok = loopback(host);
			for (size_t i = 0; i < sizeof(hosts) / sizeof(*hosts);
			     i++)
				ok |= !strcasecmp(host, hosts[i]);
		}
	}
	curl_free(scheme);
	curl_free(host);
	curl_url_cleanup(u);
	return ok;
}

/* The authorization token: the file's (read now), else the variable's;
 * NULL with none.  0, or -errno with err. */
static int auth_token(const struct stfs_creds_src *src, char **out,
		      struct stfs_error *err)
{
	char *t = NULL;
	size_t n = 0;

	*out = NULL;
	if (src->auth_file) {
		int fd = stfs_creds_open_file(src->auth_file);
		ssize_t got = 0;

		if (fd < 0)
			return stfs_fail(err, fd, NULL, STFS_NO_OFFSET,
					 "AWS_CONTAINER_AUTHORIZATION_TOKEN_"
					 "FILE %s: %s", src->auth_file,
					 stfs_creds_open_why(fd));
		if (!(t = malloc(AUTH_MAX + 1))) {
			close(fd);
			return stfs_nomem(err);
		}
		while ((got = read(fd, t + n, AUTH_MAX + 1 - n)) > 0 &&
		       (n += (size_t)got) <= AUTH_MAX)
			;
		close(fd);
		if (got < 0 || n > AUTH_MAX) {
			explicit_bzero(t, AUTH_MAX + 1);
			free(t);
			return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
					 "AWS_CONTAINER_AUTHORIZATION_TOKEN_"
					 "FILE %s: unreadable or over 16 KiB",
					 src->auth_file);
		}
		t[n] = '\0';
	} else if (src->auth_token) {
		if (!(t = strdup(src->auth_token)))
			return stfs_nomem(err);
		n = strlen(t);
	} else {
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)t[i] < 0x20 || t[i] == 0x7f || !t[i]) {
			explicit_bzero(t, n);
			free(t);
			return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
					 "the container authorization token "
					 "has a control character (a header "
					 "value cannot)");
		}
	*out = t;
	return 0;
}

int stfs_container_fetch(struct stfs_http_client *h,
			 const struct stfs_creds_src *src,
			 struct stfs_creds_keys *k, struct stfs_error *err)
{
	const char *hdrs[2] = { "Accept: application/json", NULL };
	char *tok = NULL, *line = NULL, *doc = NULL;
	struct stfs_credjson j;
	const char *why;
	size_t len = 0;
	int rc;

	memset(k, 0, sizeof(*k));
	if ((rc = auth_token(src, &tok, err)))
		return rc;
	if (tok && asprintf(&line, "Authorization: %s", tok) < 0) {
		line = NULL;
		rc = stfs_nomem(err);
		goto out;
	}
	hdrs[1] = line;
	rc = stfs_http_call(h, "GET", src->url, hdrs, line ? 2 : 1, NULL, 0,
			    0, ANSWER_MAX, &doc, &len, err);
	if (rc) {
		char w[sizeof(err->msg)];

		stfs_creds_unsay(err, tok);
		snprintf(w, sizeof(w), "%s", err->msg);
		rc = stfs_fail(err, rc, NULL, STFS_NO_OFFSET, "the container "
			       "credentials endpoint (%s): %s", src->from, w);
		goto out;
	}
	if ((rc = stfs_credjson_parse(doc, len, &j, &why)) == 0) {
		rc = stfs_credjson_keys(&j, "Token", 1, k, &why);
		stfs_credjson_free(&j);
	}
	if (rc)
		rc = rc == -ENOMEM ? stfs_nomem(err) :
		     stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "the container "
			       "credentials endpoint (%s) answered no "
			       "credentials: %s", src->from, why);
out:
	if (tok) {
		explicit_bzero(tok, strlen(tok));
		free(tok);
	}
	if (line) {
		explicit_bzero(line, strlen(line));
		free(line);
	}
	if (doc) {
		explicit_bzero(doc, len);
		free(doc);
	}
	return rc;
}

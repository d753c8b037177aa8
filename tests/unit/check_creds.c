/*
 * check_creds.c: unit tests of the credential chain's readers (s3/): the
 * strict JSON of the container endpoint, IMDS and credential_process
 * (credjson.c), the keys' form and ISO 8601 expiries, STS's
 * AssumeRoleWithWebIdentity answer and error (s3xml.c), the shell-word
 * split of a credential_process line (credproc.c), the container
 * endpoint's allowed hosts (container.c) and STS's endpoint as the SDKs
 * find it (sts.c; tests/remote/test_creds.py checks the same table against
 * botocore).
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "s3.h"
#include "suites.h"

static int parse(const char *s, const char **why)
{
	struct stfs_credjson j;
	int rc = stfs_credjson_parse(s, strlen(s), &j, why);

	if (!rc)
		stfs_credjson_free(&j);
	return rc;
}

START_TEST(t_json)
{
	const char *why;
	struct stfs_credjson j;
	struct stfs_creds_keys k;
	const char *good = "{ \"Code\": \"Success\", \"AccessKeyId\": "
			   "\"ASIAX1\", \"SecretAccessKey\": \"s/+=\", "
			   "\"Token\": \"t\\u002b\", \"Expiration\": "
			   "\"2026-11-27T13:00:00Z\", \"n\": -1.5e3, "
			   "\"u\": \"\\ud83d\\ude00\", \"z\": null }\n";

	ck_assert_int_eq(stfs_credjson_parse(good, strlen(good), &j, &why), 0);
	ck_assert_str_eq(stfs_credjson_str(&j, "Token"), "t+");
	ck_assert_str_eq(stfs_credjson_str(&j, "u"), "\xf0\x9f\x98\x80");
	ck_assert_int_eq(stfs_credjson_has(&j, "n"), '0');
	ck_assert_int_eq(stfs_credjson_has(&j, "z"), 'z');
	ck_assert_ptr_null(stfs_credjson_str(&j, "n"));
	ck_assert_int_eq(stfs_credjson_keys(&j, "Token", 1, &k, &why), 0);
	ck_assert_str_eq(k.access, "ASIAX1");
	ck_assert_str_eq(k.token, "t+");
	ck_assert_int_eq((long long)k.expires, 1795784400LL);
	stfs_creds_keys_drop(&k);
	stfs_credjson_free(&j);

	/* strict: each of these is refused, with a reason */
	static const char *const bad[] = {
		"", "[]", "{", "{\"a\":1,}", "{\"a\":1}x", "{\"a\":1,\"a\":2}",
		"{\"a\":{}}", "{\"a\":[1]}", "{a:1}", "{\"a\":01}",
		"{\"a\":1.}", "{\"a\":tru}", "{\"a\":\"\\ud800\"}",
		"{\"a\":\"\\udc00\"}", "{\"a\":\"\\u0000\"}", "{\"a\":\"\x01\"}",
		"{\"a\":\"\xff\"}", "{\"a\":\"\\x\"}", "{\"a\" \"b\"}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		why = NULL;
		ck_assert_msg(parse(bad[i], &why) == -EINVAL, "%s", bad[i]);
		ck_assert_ptr_nonnull(why);
	}
	/* too many members; a name too long */
	{
		char big[4096] = "{";

		for (int i = 0; i < 33; i++)
			sprintf(big + strlen(big), "%s\"k%d\":%d", i ? "," : "",
				i, i);
		strcat(big, "}");
		ck_assert_int_eq(parse(big, &why), -EINVAL);
		snprintf(big, sizeof(big), "{\"%064d\":1}", 0);
		ck_assert_int_eq(parse(big, &why), -EINVAL);
	}
}
END_TEST

START_TEST(t_keys_form)
{
	const char *why;
	struct stfs_credjson j;
	struct stfs_creds_keys k;
	static const char *const bad[] = {
		/* a key id with a space; a secret with a newline; a token
		 * that is a number; no expiry; an expiry not UTC */
		"{\"AccessKeyId\":\"AS IA\",\"SecretAccessKey\":\"s\","
		"\"Token\":\"t\",\"Expiration\":\"2026-11-27T13:00:00Z\"}",
		"{\"AccessKeyId\":\"ASIA\",\"SecretAccessKey\":\"s\\n\","
		"\"Token\":\"t\",\"Expiration\":\"2026-11-27T13:00:00Z\"}",
		"{\"AccessKeyId\":\"ASIA\",\"SecretAccessKey\":\"s\","
		"\"Token\":1,\"Expiration\":\"2026-11-27T13:00:00Z\"}",
		"{\"AccessKeyId\":\"ASIA\",\"SecretAccessKey\":\"s\","
		"\"Token\":\"t\"}",
		"{\"AccessKeyId\":\"ASIA\",\"SecretAccessKey\":\"s\","
		"\"Token\":\"t\",\"Expiration\":\"2026-11-27T13:00:00+01:00\"}",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		ck_assert_int_eq(stfs_credjson_parse(bad[i], strlen(bad[i]), &j,
						     &why), 0);
		ck_assert_msg(stfs_credjson_keys(&j, "Token", 1, &k, &why) ==
			      -EINVAL, "%zu", i);
		stfs_credjson_free(&j);
	}
}
END_TEST

START_TEST(t_time)
{
	time_t t;

	ck_assert_int_eq(stfs_creds_time("1970-01-01T00:00:00Z", &t), 0);
	ck_assert_int_eq((long long)t, 0);
	ck_assert_int_eq(stfs_creds_time("2026-11-27T13:00:00.123+00:00", &t),
			 0);
	ck_assert_int_eq((long long)t, 1795784400LL);
	ck_assert_int_eq(stfs_creds_time("2026-02-30T00:00:00Z", &t), -EINVAL);
	ck_assert_int_eq(stfs_creds_time("2026-11-27 13:00:00Z", &t), -EINVAL);
	ck_assert_int_eq(stfs_creds_time("2026-11-27T13:00:00", &t), -EINVAL);
	ck_assert_int_eq(stfs_creds_time("2026-11-27T24:00:00Z", &t), -EINVAL);
	ck_assert_int_eq(stfs_creds_time("2026-11-27T13:00:00.Z", &t),
			 -EINVAL);
}
END_TEST

#define STS_OK(keys) \
	"<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/" \
	"doc/2011-06-15/\"><AssumeRoleWithWebIdentityResult>" \
	"<SubjectFromWebIdentityToken>sa</SubjectFromWebIdentityToken>" \
	"<Credentials>" keys "</Credentials></AssumeRoleWithWebIdentityResult>" \
	"<ResponseMetadata><RequestId>r</RequestId></ResponseMetadata>" \
	"</AssumeRoleWithWebIdentityResponse>"
#define KEYS "<SessionToken>IQo+/=</SessionToken><SecretAccessKey>wJal" \
	"</SecretAccessKey><Expiration>2026-11-27T13:00:00Z</Expiration>" \
	"<AccessKeyId>ASIA2</AccessKeyId>"

START_TEST(t_sts)
{
	struct stfs_creds_keys k;
	char out[200];
	static const char *const bad[] = {
		STS_OK(KEYS KEYS),                      /* twice */
		STS_OK("<AccessKeyId>ASIA2</AccessKeyId>"), /* no secret */
		STS_OK("<SessionToken>a b</SessionToken><SecretAccessKey>w"
		       "</SecretAccessKey><Expiration>2026-11-27T13:00:00Z"
		       "</Expiration><AccessKeyId>A</AccessKeyId>"),
		STS_OK("<SessionToken>t</SessionToken><SecretAccessKey>w"
		       "</SecretAccessKey><Expiration>soon</Expiration>"
		       "<AccessKeyId>A</AccessKeyId>"),
		"<!DOCTYPE x [<!ENTITY a \"b\">]>" STS_OK(KEYS),
		"<Other>" KEYS "</Other>",
		STS_OK(KEYS) "<x/>",
	};
	const char *ok = STS_OK(KEYS);

	ck_assert_int_eq(stfs_sts_parse(ok, strlen(ok), &k), 0);
	ck_assert_str_eq(k.access, "ASIA2");
	ck_assert_str_eq(k.secret, "wJal");
	ck_assert_str_eq(k.token, "IQo+/=");
	ck_assert_int_eq((long long)k.expires, 1795784400LL);
	stfs_creds_keys_drop(&k);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		ck_assert_msg(stfs_sts_parse(bad[i], strlen(bad[i]), &k) ==
			      -EINVAL, "%zu", i);
	/* every cut of a good answer is refused, none crashes */
	for (size_t n = 0; n < strlen(ok); n++)
		ck_assert_int_eq(stfs_sts_parse(ok, n, &k), -EINVAL);
	/* STS's errors are inside <ErrorResponse> */
	ok = "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15"
	     "/\"><Error><Type>Sender</Type><Code>InvalidIdentityToken</Code>"
	     "<Message>bad token</Message></Error><RequestId>r</RequestId>"
	     "</ErrorResponse>";
	ck_assert_int_eq(stfs_s3_error_parse(ok, strlen(ok), out, sizeof(out)),
			 0);
	ck_assert_str_eq(out, "InvalidIdentityToken: bad token");
}
END_TEST

START_TEST(t_words)
{
	const char *why;
	char **w = stfs_words("  /bin/x --a 'b c' \"d \\\"e\\\" \\n\" f\\ g ''",
			      &why);

	ck_assert_ptr_nonnull(w);
	ck_assert_str_eq(w[0], "/bin/x");
	ck_assert_str_eq(w[1], "--a");
	ck_assert_str_eq(w[2], "b c");
	ck_assert_str_eq(w[3], "d \"e\" \\n");
	ck_assert_str_eq(w[4], "f g");
	ck_assert_str_eq(w[5], "");
	ck_assert_ptr_null(w[6]);
	stfs_words_free(w);
	ck_assert_ptr_null(stfs_words("a 'b", &why));
	ck_assert_ptr_null(stfs_words("a \"b", &why));
	ck_assert_ptr_null(stfs_words("a b\\", &why));
	ck_assert_ptr_null(stfs_words("   ", &why));
	ck_assert_ptr_nonnull(why);
}
END_TEST

START_TEST(t_container_hosts)
{
	static const char *const ok[] = {
		"https://example.com/creds", "http://127.0.0.1:8080/x",
		"http://127.9.9.9/x", "http://[::1]:80/x",
		"http://169.254.170.2/v2/credentials/1",
		"http://169.254.170.23/v1/credentials",
		"http://[fd00:ec2::23]/v1/credentials", "http://localhost:9/x",
		"HTTP://LOCALHOST/x",
	};
	static const char *const no[] = {
		"http://example.com/creds", "http://10.0.0.1/x",
		"http://169.254.169.254/latest", "http://127.0.0.1.evil.example/",
		"http://[fd00:ec2::254]/x", "ftp://127.0.0.1/x", "not a url",
	};

	for (size_t i = 0; i < sizeof(ok) / sizeof(*ok); i++)
		ck_assert_msg(stfs_container_url_ok(ok[i]), "%s", ok[i]);
	for (size_t i = 0; i < sizeof(no) / sizeof(*no); i++)
		ck_assert_msg(!stfs_container_url_ok(no[i]), "%s", no[i]);
}
END_TEST

/* STS's endpoint for a region, as botocore 1.44 resolves it (the same
 * table is checked against botocore in tests/remote/test_creds.py). */
START_TEST(t_sts_url)
{
	static const struct { const char *region, *mode, *url; } cases[] = {
		{ NULL, NULL, "https://sts.amazonaws.com" },
		{ "us-east-1", NULL, "https://sts.us-east-1.amazonaws.com" },
		{ "eu-west-1", NULL, "https://sts.eu-west-1.amazonaws.com" },
		{ "eu-west-1", "legacy", "https://sts.amazonaws.com" },
		{ "af-south-1", "legacy", "https://sts.af-south-1.amazonaws.com" },
		{ "cn-north-1", NULL, "https://sts.cn-north-1.amazonaws.com.cn" },
	};
	struct stfs_aws_conf a = { 0 };
	const char *ep = getenv("AWS_ENDPOINT_URL_STS");
	char *u;

	unsetenv("AWS_ENDPOINT_URL_STS");
	unsetenv("AWS_ENDPOINT_URL");
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		if (cases[i].mode)
			setenv("AWS_STS_REGIONAL_ENDPOINTS", cases[i].mode, 1);
		else
			unsetenv("AWS_STS_REGIONAL_ENDPOINTS");
		u = stfs_sts_url(&a, cases[i].region);
		ck_assert_str_eq(u, cases[i].url);
		free(u);
	}
	unsetenv("AWS_STS_REGIONAL_ENDPOINTS");
	setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1", 1);
	u = stfs_sts_url(&a, "eu-west-1");
	ck_assert_str_eq(u, "http://127.0.0.1:1");
	free(u);
	setenv("AWS_ENDPOINT_URL_STS", "http://127.0.0.1:2", 1);
	u = stfs_sts_url(&a, "eu-west-1");
	ck_assert_str_eq(u, "http://127.0.0.1:2");
	free(u);
	unsetenv("AWS_ENDPOINT_URL");
	if (ep)
		setenv("AWS_ENDPOINT_URL_STS", ep, 1);
	else
		unsetenv("AWS_ENDPOINT_URL_STS");
}
END_TEST

/* A token a service repeats in its refusal is never shown, whole or cut */
START_TEST(t_unsay)
{
	struct stfs_error e;
	const char *tok = "tok-0123456789";

	snprintf(e.msg, sizeof(e.msg), "HTTP 403: bad %s and %s!", tok, tok);
	stfs_creds_unsay(&e, tok);
	ck_assert_str_eq(e.msg, "HTTP 403: bad (the token sent) and (the "
			 "token sent)!");
	snprintf(e.msg, sizeof(e.msg), "HTTP 403: cut tok-01234");
	stfs_creds_unsay(&e, tok);
	ck_assert_str_eq(e.msg, "HTTP 403: cut ");
	snprintf(e.msg, sizeof(e.msg), "nothing of it");
	stfs_creds_unsay(&e, tok);
	ck_assert_str_eq(e.msg, "nothing of it");
}
END_TEST

Suite *creds_suite(void)
{
	Suite *s = suite_create("creds");
	TCase *tc = tcase_create("readers");

	tcase_add_test(tc, t_json);
	tcase_add_test(tc, t_keys_form);
	tcase_add_test(tc, t_time);
	tcase_add_test(tc, t_sts);
	tcase_add_test(tc, t_words);
	tcase_add_test(tc, t_container_hosts);
	tcase_add_test(tc, t_sts_url);
	tcase_add_test(tc, t_unsay);
	suite_add_tcase(s, tc);
	return s;
}

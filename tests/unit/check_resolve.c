/*
 * check_resolve.c: unit tests of what following a redirect once relies
 * on without a network: when a signed target URL expires (S3's and GCS's
 * dated forms, Expires=), and the headers a redirect of the Hub carries
 * (X-Linked-Etag, X-Linked-Size, X-Repo-Commit, RateLimit, Location).
 */
#include <check.h>
#include <errno.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "httphdr.h"
#include "suites.h"

static long long expiry(const char *url)
{
	time_t t;

	return stfs_url_expiry(url, &t) ? -1 : (long long)t;
}

START_TEST(t_url_expiry)
{
	/* 2024-01-01T00:00:00Z is 1704067200 */
	ck_assert_int_eq(expiry("https://b.s3.amazonaws.com/k?X-Amz-Algorithm"
				"=AWS4-HMAC-SHA256&X-Amz-Date=20240101T000000Z"
				"&X-Amz-Expires=3600&X-Amz-Signature=ab"),
			 1704067200 + 3600);
	ck_assert_int_eq(expiry("https://h/k?x-amz-expires=60&x-amz-date="
				"20240101T000100Z"), 1704067200 + 120);
	ck_assert_int_eq(expiry("https://storage.googleapis.com/b/o?"
				"X-Goog-Date=20240101T000000Z&X-Goog-Expires=900"),
			 1704067200 + 900);
	ck_assert_int_eq(expiry("https://d.cloudfront.net/x?Expires=1704067200"
				"&Signature=s&Key-Pair-Id=k"), 1704067200);
	ck_assert_int_eq(expiry("http://127.0.0.2:80/a?md5=x&expires=17"), 17);
	/* none, or not one that parses */
	ck_assert_int_eq(expiry("https://h/k"), -1);
	ck_assert_int_eq(expiry("https://h/k?Policy=abc&Signature=s"), -1);
	ck_assert_int_eq(expiry("https://h/Expires=5"), -1);
	ck_assert_int_eq(expiry("https://h/k?XExpires=5"), -1);
	ck_assert_int_eq(expiry("https://h/k?Expires=5x"), -1);
	ck_assert_int_eq(expiry("https://h/k?Expires="), -1);
	ck_assert_int_eq(expiry("https://h/k?Expires=1234567890123"), -1);
	ck_assert_int_eq(expiry("https://h/k#Expires=5"), -1);
	ck_assert_int_eq(expiry("https://h/k?a=1#&Expires=5"), -1);
	/* a bad date: month 13, no Z, a short one; a lifetime too long */
	ck_assert_int_eq(expiry("https://h/k?X-Amz-Date=20241301T000000Z&"
				"X-Amz-Expires=1"), -1);
	ck_assert_int_eq(expiry("https://h/k?X-Amz-Date=20240101T0000000&"
				"X-Amz-Expires=1"), -1);
	ck_assert_int_eq(expiry("https://h/k?X-Amz-Date=2024&X-Amz-Expires=1"),
			 -1);
	ck_assert_int_eq(expiry("https://h/k?X-Amz-Date=20240101T000000Z&"
				"X-Amz-Expires=999999999999"), -1);
	/* a dated form that does not parse leaves Expires= to say it */
	ck_assert_int_eq(expiry("https://h/k?X-Amz-Date=bad&X-Amz-Expires=1&"
				"Expires=99"), 99);
}
END_TEST

static void line(struct stfs_http_resp *r, const char *s)
{
	stfs_http_header_line(s, strlen(s), r);
}

START_TEST(t_hub_redirect_headers)
{
	struct stfs_http_resp r;

	memset(&r, 0, sizeof(r));
	line(&r, "HTTP/1.1 302 Found\r\n");
	line(&r, "X-Linked-Etag: \"ab12\"\r\n");
	line(&r, "x-linked-size: 1073741832\r\n");
	line(&r, "X-Repo-Commit: 0123456789abcdef0123456789abcdef01234567\r\n");
	line(&r, "RateLimit: \"resolvers\";r=2999;t=287\r\n");
	ck_assert_str_eq(r.linked_etag, "\"ab12\"");
	ck_assert_int_eq(r.has_linked_size, 1);
	ck_assert_uint_eq(r.linked_size, 1073741832u);
	ck_assert_str_eq(r.commit, "0123456789abcdef0123456789abcdef01234567");
	ck_assert_str_eq(r.ratelimit, "\"resolvers\";r=2999;t=287");
	line(&r, "Location: https://cdn-lfs.hf.co/r/ab?Expires=9&Signature=x\r\n");
	ck_assert_str_eq(r.location, "https://cdn-lfs.hf.co/r/ab?Expires=9&"
			 "Signature=x");
	ck_assert_uint_eq(r.ratelimit_t, 287);
	/* a size that is not one is none */
	line(&r, "X-Linked-Size: 12x\r\n");
	ck_assert_int_eq(r.has_linked_size, 0);
	line(&r, "X-Linked-Size: 99999999999999999999999\r\n");
	ck_assert_int_eq(r.has_linked_size, 0);
	/* t: at most an hour; only a parameter named t */
	line(&r, "RateLimit: \"api\";r=0;t=86400");
	ck_assert_uint_eq(r.ratelimit_t, 3600);
	line(&r, "RateLimit: \"api\";r=0;tt=5");
	ck_assert_uint_eq(r.ratelimit_t, 0);
	line(&r, "RateLimit: \"t=5\";r=0");
	ck_assert_uint_eq(r.ratelimit_t, 0);
	line(&r, "RateLimit: \"a\"; t=5x");
	ck_assert_uint_eq(r.ratelimit_t, 0);
	line(&r, "RateLimit: \"a\"; t=5, \"b\";t=9");
	ck_assert_uint_eq(r.ratelimit_t, 5);
	line(&r, "RateLimit: \"a\";t=");
	ck_assert_uint_eq(r.ratelimit_t, 0);
	/* a new response forgets them */
	line(&r, "HTTP/1.1 206 Partial Content\r\n");
	ck_assert_str_eq(r.linked_etag, "");
	ck_assert_int_eq(r.has_linked_size, 0);
	ck_assert_str_eq(r.ratelimit, "");
}
END_TEST

Suite *resolve_suite(void)
{
	Suite *s = suite_create("resolve");
	TCase *tc = tcase_create("resolve");

	tcase_add_test(tc, t_url_expiry);
	tcase_add_test(tc, t_hub_redirect_headers);
	suite_add_tcase(s, tc);
	return s;
}

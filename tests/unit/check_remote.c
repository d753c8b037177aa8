/*
 * check_remote.c: unit tests of what remote sources parse and compute
 * without a network: the SigV4 signer (AWS's published examples, which
 * also check libcrypto's SHA-256 and HMAC as the signer calls them),
 * the Hub's JSON (revision and tree answers) and the Link and X-Error-*
 * headers.  S3's XML is check_s3xml.c's; answers to range requests
 * check_answers.c's.
 */
#include <arpa/inet.h>
#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "http/http.h"
#include "hub.h"
#include "httphdr.h"
#include "s3.h"
#include "suites.h"

#define EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b78" \
	      "52b855"

START_TEST(t_sigv4_examples)
{
	char auth[512];
	/* Amazon S3's "GET Object" example (a Range header signed) */
	const struct stfs_sigv4_hdr h1[] = {
		{ "range", "bytes=0-9" },
		{ "x-amz-content-sha256", EMPTY },
	};
	struct stfs_sigv4_req r = {
		.method = "GET", .host = "examplebucket.s3.amazonaws.com",
		.path = "/test.txt", .query = "", .headers = h1,
		.nheaders = 2, .payload_hash = EMPTY,
		.amzdate = "20130524T000000Z",
		.access_key = "AKIAIOSFODNN7EXAMPLE",
		.secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
		.region = "us-east-1", .service = "s3",
	};

	ck_assert_int_eq(stfs_sigv4_sign(&r, auth, sizeof(auth)), 0);
	ck_assert_str_eq(auth, "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE"
		"/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;range;"
		"x-amz-content-sha256;x-amz-date, Signature=f0e8bdb87c964420e857"
		"bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
	/* its "GET Bucket (List Objects)" example: a query */
	r.path = "/";
	r.query = "max-keys=2&prefix=J";
	r.headers = h1 + 1;
	r.nheaders = 1;
	ck_assert_int_eq(stfs_sigv4_sign(&r, auth, sizeof(auth)), 0);
	ck_assert_ptr_nonnull(strstr(auth, "SignedHeaders=host;x-amz-content-"
		"sha256;x-amz-date, Signature=34b48302e7b5fa45bde8084f4b7868a8"
		"6f0a534bc59db6670ed5711ef69dc6f7"));
	/* the SigV4 test suite's get-vanilla: another service, no
	 * x-amz-content-sha256 */
	r = (struct stfs_sigv4_req){
		.method = "GET", .host = "example.amazonaws.com", .path = "/",
		.query = "", .payload_hash = EMPTY,
		.amzdate = "20150830T123600Z", .access_key = "AKIDEXAMPLE",
		.secret_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
		.region = "us-east-1", .service = "service",
	};
	ck_assert_int_eq(stfs_sigv4_sign(&r, auth, sizeof(auth)), 0);
	ck_assert_str_eq(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/"
		"20150830/us-east-1/service/aws4_request, SignedHeaders=host;"
		"x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a"
		"2260956d9b8aae1d763fbf31");
	/* what does not fit is refused, never cut */
	ck_assert_int_eq(stfs_sigv4_sign(&r, auth, 40), -EINVAL);
	r.amzdate = "2015";
	ck_assert_int_eq(stfs_sigv4_sign(&r, auth, sizeof(auth)), -EINVAL);
}
END_TEST

START_TEST(t_auth_headers)
{
	struct stfs_auth *a = stfs_auth_new(NULL, "AK", "SK", "TOKEN",
					    "eu-west-1");
	struct curl_slist *l;
	int ok, seen = 0;

	ck_assert_ptr_nonnull(a);
	ck_assert_int_eq(a->sign, 1);
	l = stfs_auth_headers(a, "http://127.0.0.1:9000/b/k%20x?list-type=2",
			      0, NULL, &ok, NULL, 0);
	ck_assert_int_eq(ok, 1);
	for (struct curl_slist *p = l; p; p = p->next) {
		if (!strncmp(p->data, "Authorization: AWS4-HMAC-SHA256 "
			     "Credential=AK/", 46)) {
			ck_assert_ptr_nonnull(strstr(p->data, "/eu-west-1/s3/"));
			ck_assert_ptr_nonnull(strstr(p->data, "SignedHeaders=host;"
				"x-amz-content-sha256;x-amz-date;"
				"x-amz-security-token,"));
			seen |= 1;
		}
		if (!strcmp(p->data, "x-amz-security-token: TOKEN"))
			seen |= 2;
		if (!strcmp(p->data, "x-amz-content-sha256: " EMPTY))
			seen |= 4;
	}
	ck_assert_int_eq(seen, 7);
	curl_slist_free_all(l);
	/* S3's checksums asked for: the header is sent, and signed */
	l = stfs_auth_headers(a, "http://127.0.0.1:9000/b/k", STFS_REQ_CHECKSUMS,
			      NULL, &ok, NULL, 0);
	ck_assert_int_eq(ok, 1);
	seen = 0;
	for (struct curl_slist *p = l; p; p = p->next) {
		if (strstr(p->data, "SignedHeaders=host;x-amz-checksum-mode;"
			   "x-amz-content-sha256;x-amz-date;"
			   "x-amz-security-token,"))
			seen |= 1;
		if (!strcmp(p->data, "x-amz-checksum-mode: ENABLED"))
			seen |= 2;
	}
	ck_assert_int_eq(seen, 3);
	curl_slist_free_all(l);
	l = stfs_auth_headers(a, "not a url", 0, NULL, &ok, NULL, 0);
	ck_assert_int_eq(ok, 0);
	curl_slist_free_all(l);
	stfs_auth_unref(stfs_auth_ref(a));
	stfs_auth_unref(a);
	a = stfs_auth_new("hf_x", NULL, NULL, NULL, NULL);
	ck_assert_int_eq(a->sign, 0);
	ck_assert_str_eq(a->bearer, "hf_x");
	stfs_auth_unref(a);
}
END_TEST

struct files {
	char path[4][64], etag[4][80];
	int n;
};

static int on_file(void *arg, const char *path, const char *etag,
		   uint64_t size)
{
	struct files *f = arg;

	(void)size;
	if (f->n == 4)
		return -E2BIG;
	snprintf(f->path[f->n], sizeof(f->path[0]), "%s", path);
	snprintf(f->etag[f->n++], sizeof(f->etag[0]), "%s",
		 etag ? etag : "(none)");
	return 0;
}

#define HEX64 "ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00"

START_TEST(t_hub_json)
{
	char sha[41];
	const char *rev = "{\"id\":\"o/n\",\"sha\":\"0123456789abcdef0123456789"
			  "abcdef01234567\",\"siblings\":[]}";
	const char *tree =
		"[{\"type\":\"directory\",\"oid\":\"1\",\"size\":0,\"path\":\"u\"},"
		"{\"type\":\"file\",\"oid\":\"0123456789abcdef0123456789abcdef"
		"01234567\",\"size\":3,\"path\":\"u/a\"},"
		"{\"type\":\"file\",\"oid\":\"abd\",\"size\":9,\"path\":\"m.st\","
		"\"lfs\":{\"oid\":\"" HEX64 "\",\"size\":9}},"
		"{\"type\":\"file\",\"oid\":\"a\\\"q\",\"size\":1,\"path\":\"q\"}]";
	/* what a hostile server gives: ESC and BEL in 40 bytes, upper case,
	 * a short oid, an LFS oid of the wrong length (not the pointer's
	 * oid instead), none at all, nulls */
	const char *bad =
		"[{\"type\":\"file\",\"oid\":\"\\u001b]0;t\\u0007aaaaaaaaaaaaaaaaaaaa"
		"aaaaaaaaaaaaaa\",\"path\":\"e\"},"
		"{\"type\":\"file\",\"oid\":\"0123456789ABCDEF0123456789abcdef"
		"01234567\",\"path\":\"u\"},"
		"{\"type\":\"file\",\"oid\":\"0123456789abcdef0123456789abcdef"
		"01234567\",\"path\":\"l\",\"lfs\":{\"oid\":\"ff00\"}},"
		"{\"type\":\"file\",\"path\":\"n\"}]";
	const char *nulls =
		"[{\"type\":\"file\",\"oid\":null,\"lfs\":null,\"path\":\"z\"}]";
	struct files f = { 0 };

	ck_assert_int_eq(stfs_hub_parse_sha(rev, strlen(rev), sha), 0);
	ck_assert_str_eq(sha, "0123456789abcdef0123456789abcdef01234567");
	ck_assert_int_eq(stfs_hub_parse_sha("{\"sha\":\"main\"}", 14, sha),
			 -EINVAL);
	ck_assert_int_eq(stfs_hub_parse_sha("{\"sha\":\"0123456789ABCDEF012345"
					    "6789abcdef01234567\"}", 50, sha),
			 -EINVAL);
	ck_assert_int_eq(stfs_hub_parse_sha("[1]", 3, sha), -EINVAL);
	ck_assert_int_eq(stfs_hub_parse_sha("{\"sha\":", 7, sha), -EINVAL);
	ck_assert_int_eq(stfs_hub_parse_tree(tree, strlen(tree), on_file, &f),
			 0);
	ck_assert_int_eq(f.n, 3);
	ck_assert_str_eq(f.path[0], "u/a");
	ck_assert_str_eq(f.etag[0], "0123456789abcdef0123456789abcdef01234567");
	ck_assert_str_eq(f.etag[1], HEX64);        /* the LFS object's */
	ck_assert_str_eq(f.etag[2], "");           /* a quote: malformed */
	f.n = 0;
	ck_assert_int_eq(stfs_hub_parse_tree(bad, strlen(bad), on_file, &f), 0);
	ck_assert_int_eq(f.n, 4);
	ck_assert_str_eq(f.etag[0], "");
	ck_assert_str_eq(f.etag[1], "");
	ck_assert_str_eq(f.etag[2], "");
	ck_assert_str_eq(f.etag[3], "(none)");
	f.n = 0;
	ck_assert_int_eq(stfs_hub_parse_tree(nulls, strlen(nulls), on_file,
					     &f), 0);
	ck_assert_int_eq(f.n, 1);
	ck_assert_str_eq(f.etag[0], "(none)");
	ck_assert_int_eq(stfs_hub_parse_tree("{}", 2, on_file, &f), -EINVAL);
	ck_assert_int_eq(stfs_hub_parse_tree("[{\"type\":1}]", 12, on_file,
					     &f), -EINVAL);
	ck_assert_int_eq(stfs_hub_parse_tree("[", 1, on_file, &f), -EINVAL);
}
END_TEST

/* A listing's bounds, all its pages together: its entries, the bytes of
 * its answers, its deadline; each refusal names its bound. */
START_TEST(t_listing_bounds)
{
	struct stfs_pages p = { 0 };
	struct stfs_error err;
	char key[32];

	ck_assert_int_eq(stfs_pages_add(&p, "", 0), 0);
	ck_assert_int_eq(stfs_pages_took(&p, STFS_LIST_ENTRIES_MAX - 1,
					 1000), 0);
	ck_assert_int_eq(stfs_pages_add(&p, "a", 0), 0);
	ck_assert_int_eq(stfs_pages_took(&p, 1, 1000), 0);
	ck_assert_int_eq(stfs_pages_took(&p, 1, 1000), -EMLINK);
	ck_assert_int_eq(stfs_pages_fail(&p, -EMLINK, "the list", "again",
					 "", 0, &err), -EIO);
	ck_assert_str_eq(err.msg, "the list goes on past 1000000 entries "
			 "(2 pages)");
	stfs_pages_free(&p);
	ck_assert_int_eq(stfs_pages_add(&p, "", 0), 0);
	ck_assert_int_eq(stfs_pages_took(&p, 1, STFS_LIST_BYTES_MAX), 0);
	ck_assert_int_eq(stfs_pages_took(&p, 1, 1), -E2BIG);
	stfs_pages_fail(&p, -E2BIG, "the list", "again", "", 0, &err);
	ck_assert_str_eq(err.msg, "the list goes on past 256 MiB of answers "
			 "(1 pages, 2 entries)");
	ck_assert_int_eq(stfs_pages_add(&p, "", 0), -ELOOP);
	stfs_pages_fail(&p, -ELOOP, "the list", "came back", "\x1b", 0, &err);
	ck_assert_str_eq(err.msg, "the list loops: page 1 came back (\\x1b)");
	stfs_pages_free(&p);
	/* the deadline, from the first page */
	ck_assert_int_eq(stfs_pages_add(&p, "", 1000), 0);
	ck_assert_int_eq(stfs_pages_add(&p, "b", 1000), 0);
	usleep(1100 * 1000);
	snprintf(key, sizeof(key), "c");
	ck_assert_int_eq(stfs_pages_add(&p, key, 1000), -ETIME);
	stfs_pages_fail(&p, -ETIME, "the list", "again", key, 1000, &err);
	ck_assert_str_eq(err.msg, "the list goes on past list_timeout=1 "
			 "(seconds; 2 pages, 0 entries so far)");
	stfs_pages_free(&p);
}
END_TEST

START_TEST(t_link_and_errors)
{
	struct stfs_http_resp r;
	const char *l1 = "Link: <https://h/api/x?cursor=2>; rel=\"next\"\r\n";
	const char *l2 = "link: <https://h/p>; rel=\"prev\", <https://h/n?a=1>;"
			 " rel=\"next\"\r\n";
	const char *l3 = "Link: <https://h/p>; rel=\"prev\"\r\n";
	const char *l4 = "Link: <https://h/p; rel=\"next\"\r\n";

	memset(&r, 0, sizeof(r));
	stfs_http_header_line(l1, strlen(l1), &r);
	ck_assert_str_eq(r.link_next, "https://h/api/x?cursor=2");
	memset(&r, 0, sizeof(r));
	stfs_http_header_line(l2, strlen(l2), &r);
	ck_assert_str_eq(r.link_next, "https://h/n?a=1");
	memset(&r, 0, sizeof(r));
	stfs_http_header_line(l3, strlen(l3), &r);
	stfs_http_header_line(l4, strlen(l4), &r);
	ck_assert_str_eq(r.link_next, "");
	stfs_http_header_line("X-Error-Code: GatedRepo\r\n", 25, &r);
	stfs_http_header_line("X-Error-Message: Access is restricted.\r\n", 40,
			      &r);
	ck_assert_str_eq(r.error_code, "GatedRepo");
	ck_assert_str_eq(r.error_message, "Access is restricted.");
	/* a new response (after a redirect) forgets them */
	stfs_http_header_line("HTTP/1.1 200 OK\r\n", 17, &r);
	ck_assert_str_eq(r.error_message, "");
}
END_TEST

START_TEST(t_content_encoding)
{
	static const struct { const char *line; int encoded; const char *name; }
	cases[] = {
		{ "Content-Encoding: gzip\r\n", 1, "gzip" },
		{ "content-encoding:br", 1, "br" },
		{ "Content-Encoding: gzip, identity\r\n", 1, "gzip, identity" },
		{ "Content-Encoding: identity\r\n", 0, "" },
		{ "CONTENT-ENCODING: IDENTITY", 0, "" },
		{ "Content-Encoding: \r\n", 0, "" },
		{ "Content-Encodings: gzip", 0, "" },
	};
	struct stfs_http_resp r;
	char longer[200];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memset(&r, 0, sizeof(r));
		stfs_http_header_line(cases[i].line, strlen(cases[i].line), &r);
		ck_assert_msg(r.encoded == cases[i].encoded, "%s",
			      cases[i].line);
		ck_assert_str_eq(r.encoding, cases[i].name);
	}
	/* too long to name, still refused */
	memset(&r, 0, sizeof(r));
	snprintf(longer, sizeof(longer), "Content-Encoding: %0150d", 7);
	stfs_http_header_line(longer, strlen(longer), &r);
	ck_assert_int_eq(r.encoded, 1);
	ck_assert_str_eq(r.encoding, "");
	/* a new response forgets it */
	stfs_http_header_line("HTTP/1.1 206 Partial Content\r\n", 30, &r);
	ck_assert_int_eq(r.encoded, 0);
}
END_TEST

START_TEST(t_retry_after)
{
	struct stfs_http_resp r;
	char line[128];
	time_t soon = time(NULL) + 20;
	struct tm tm;

	memset(&r, 0, sizeof(r));
	stfs_http_header_line("Retry-After: 7\r\n", 16, &r);
	ck_assert_uint_eq(r.retry_after_s, 7);
	stfs_http_header_line("Retry-After: 99999999999999999999", 33, &r);
	ck_assert_uint_eq(r.retry_after_s, 1);        /* overflows: a while */
	stfs_http_header_line("Retry-After: 86400", 18, &r);
	ck_assert_uint_eq(r.retry_after_s, 3600);
	/* an HTTP date: the seconds until then */
	gmtime_r(&soon, &tm);
	strftime(line, sizeof(line), "Retry-After: %a, %d %b %Y %H:%M:%S GMT",
		 &tm);
	stfs_http_header_line(line, strlen(line), &r);
	ck_assert_uint_ge(r.retry_after_s, 18);
	ck_assert_uint_le(r.retry_after_s, 20);
	/* a date passed, or none: a while */
	stfs_http_header_line("Retry-After: Wed, 21 Oct 2015 07:28:00 GMT",
			      42, &r);
	ck_assert_uint_eq(r.retry_after_s, 1);
	stfs_http_header_line("Retry-After: soon", 17, &r);
	ck_assert_uint_eq(r.retry_after_s, 1);
}
END_TEST

START_TEST(t_block_size)
{
	static const char *const bad[] = { "0", "1", "32K", "3M", "67112960",
					   "128M", "x", "" };
	static const char *const good[][2] = {
		{ "block_size=64K", "65536" }, { "block_size=64M", "67108864" },
		{ "block_size=4194304", "4194304" },
	};
	struct stfs_remote_opts *o = stfs_remote_opts_new(), *o2;
	char why[256], opt[64];

	ck_assert_ptr_nonnull(o);
	ck_assert_uint_eq(o->block, 4u << 20);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(opt, sizeof(opt), "block_size=%s", bad[i]);
		ck_assert_int_eq(stfs_remote_opts_set(o, opt, why, sizeof(why)),
				 -EINVAL);
		ck_assert_ptr_nonnull(strstr(why, "give a power of two"));
	}
	ck_assert_uint_eq(o->block, 4u << 20);
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		ck_assert_int_eq(stfs_remote_opts_set(o, good[i][0], why,
						      sizeof(why)), 0);
		ck_assert_uint_eq(o->block, strtoull(good[i][1], NULL, 10));
	}
	/* two sets of options are two configurations */
	o2 = stfs_remote_opts_new();
	ck_assert_int_eq(stfs_remote_opts_set(o2, "block_size=1M", why,
					      sizeof(why)), 0);
	ck_assert_uint_eq(o->block, 4u << 20);
	ck_assert_uint_eq(o2->block, 1u << 20);
	stfs_remote_opts_free(o2);
	stfs_remote_opts_free(o);
}
END_TEST

/* Two remote objects of one process: two configurations, two sets of
 * counters, nothing shared; made and freed without a thread started. */
START_TEST(t_remote_objects)
{
	struct stfs_remote_opts *o1 = stfs_remote_opts_new(),
				*o2 = stfs_remote_opts_new();
	struct stfs_remote *r1, *r2;
	struct stfs_remote_stats st;
	struct stfs_error err;
	char why[256];

	ck_assert_int_eq(stfs_remote_opts_set(o1, "block_size=1M", why,
					      sizeof(why)), 0);
	ck_assert_int_eq(stfs_remote_opts_set(o1, "offline", why,
					      sizeof(why)), 0);
	ck_assert_int_eq(stfs_remote_opts_set(o2, "nocache", why,
					      sizeof(why)), 0);
	ck_assert_int_eq(stfs_remote_opts_set(o2, "s3_style=path", why,
					      sizeof(why)), 0);
	ck_assert_int_eq(stfs_remote_new(o1, &r1, &err), 0);
	ck_assert_int_eq(stfs_remote_new(o2, &r2, &err), 0);
	stfs_remote_opts_free(o1);      /* the objects keep their copies */
	stfs_remote_opts_free(o2);
	ck_assert_uint_eq(r1->o.block, 1u << 20);
	ck_assert_uint_eq(r2->o.block, 4u << 20);
	ck_assert_int_eq(stfs_remote_offline(r1), 1);
	ck_assert_int_eq(stfs_remote_offline(r2), 0);
	ck_assert_int_eq(stfs_remote_s3_style(r1), STFS_S3_AUTO);
	ck_assert_int_eq(stfs_remote_s3_style(r2), STFS_S3_PATH);
	ck_assert_ptr_null(stfs_remote_cache(r2));
	ck_assert_uint_eq(stfs_prefetch_blocks(r1), 32);
	ck_assert_uint_eq(stfs_prefetch_blocks(r2), 8);
	r1->count.requests += 3;
	stfs_remote_stats(r1, &st);
	ck_assert_uint_eq(st.requests, 3);
	stfs_remote_stats(r2, &st);
	ck_assert_uint_eq(st.requests, 0);
	stfs_remote_stats(NULL, &st);
	ck_assert_uint_eq(st.requests, 0);
	stfs_remote_park(r1);
	stfs_remote_free(r1);
	stfs_remote_free(r2);
}
END_TEST

/* The text of every remote option: what it sets, what it refuses. */
START_TEST(t_remote_opts)
{
	struct stfs_remote_opts *o = stfs_remote_opts_new();
	char why[256];

	ck_assert_ptr_nonnull(o);
	ck_assert_int_eq(stfs_remote_opts_set(o, "connect_timeout=5", why,
					      sizeof(why)), 0);
	ck_assert_uint_eq(o->connect_timeout_ms, 5000);
	ck_assert_int_eq(stfs_remote_opts_set(o, "stall_timeout=0", why,
					      sizeof(why)), -EINVAL);
	ck_assert_str_eq(why, "stall_timeout=0: give 1 to 3600 (seconds)");
	ck_assert_uint_eq(o->list_timeout_ms, 300000);   /* the default */
	ck_assert_int_eq(stfs_remote_opts_set(o, "list_timeout=2", why,
					      sizeof(why)), 0);
	ck_assert_uint_eq(o->list_timeout_ms, 2000);
	ck_assert_int_eq(stfs_remote_opts_set(o, "list_timeout=86401", why,
					      sizeof(why)), -EINVAL);
	ck_assert_str_eq(why, "list_timeout=86401: give 1 to 86400 (seconds)");
	ck_assert_int_eq(stfs_remote_opts_set(o, "retries=-1", why,
					      sizeof(why)), -EINVAL);
	ck_assert_int_eq(stfs_remote_opts_set(o, "retries=0", why,
					      sizeof(why)), 0);
	ck_assert_uint_eq(o->retries, 0);
	ck_assert_int_eq(stfs_remote_opts_set(o, "connections=257", why,
					      sizeof(why)), -EINVAL);
	ck_assert_int_eq(stfs_remote_opts_set(o, "min_speed=0", why,
					      sizeof(why)), 0);
	ck_assert_uint_eq(o->min_speed, 0);
	ck_assert_int_eq(stfs_remote_opts_set(o, "min_speed=2G", why,
					      sizeof(why)), -EINVAL);
	ck_assert_int_eq(stfs_remote_opts_set(o, "cache_size=512M", why,
					      sizeof(why)), 0);
	ck_assert_uint_eq(o->cache_max, 512u << 20);
	ck_assert_int_eq(stfs_remote_opts_set(o, "s3_style=path", why,
					      sizeof(why)), 0);
	ck_assert_int_eq(o->s3_style, STFS_S3_PATH);
	ck_assert_int_eq(stfs_remote_opts_set(o, "s3_style=other", why,
					      sizeof(why)), -EINVAL);
	/* not a remote option: left for others */
	ck_assert_int_eq(stfs_remote_opts_set(o, "allow_other", why,
					      sizeof(why)), 1);
	ck_assert_int_eq(stfs_remote_opts_set(o, "retries", why,
					      sizeof(why)), 1);
	ck_assert_int_eq(stfs_remote_opts_set(o, "cache=/c", why,
					      sizeof(why)), 0);
	ck_assert_str_eq(o->cache_dir, "/c");
	ck_assert_int_eq(stfs_remote_opts_check(o, why, sizeof(why)), 0);
	ck_assert_int_eq(stfs_remote_opts_set(o, "nocache", why,
					      sizeof(why)), 0);
	ck_assert_int_eq(stfs_remote_opts_check(o, why, sizeof(why)),
			 -EINVAL);
	ck_assert_str_eq(why, "nocache goes with neither cache= nor offline");
	stfs_remote_opts_free(o);
}
END_TEST

/* A URL's user and password go to the location's credentials, and
 * nowhere that shows the source. */
START_TEST(t_url_credentials)
{
	static const char *const shown[][2] = {
		{ "http://h/m.safetensors", "http://h/m.safetensors" },
		{ "https://u:p@h:8/d/", "https://h:8/d/" },
		{ "http://u@h/m", "http://h/m" },
		{ "http://u:p@x@h/m", "http://h/m" },
		{ "http://h/a@b/m", "http://h/a@b/m" },
		{ "http://u:p@h", "http://h" },
		{ "/srv/a@b/m.safetensors", "/srv/a@b/m.safetensors" },
		{ "s3://b/k", "s3://b/k" },
		{ "https://h/m.safetensors?X-Sig=a%2Fb&e=1",
		  "https://h/m.safetensors" },
		{ "https://u:p@h/m?s=1@2", "https://h/m" },
		{ "http://h?x", "http://h" },
	};
	struct stfs_location *loc;
	struct stfs_error err;

	for (size_t i = 0; i < sizeof(shown) / sizeof(shown[0]); i++) {
		char *s = stfs_source_shown(shown[i][0]);
		ck_assert_str_eq(s, shown[i][1]);
		free(s);
	}
	ck_assert_int_eq(stfs_locate("http://alice:p%40ss%3Aw@h:1/d/"
				     "m.safetensors", NULL, &loc, &err), 0);
	ck_assert_str_eq(loc->arg, "http://h:1/d/m.safetensors");
	ck_assert_str_eq(loc->canonical, "http://h:1/d/m.safetensors");
	ck_assert_str_eq(loc->base, "http://h:1/d");
	ck_assert_ptr_nonnull(loc->auth);
	ck_assert_str_eq(loc->auth->user, "alice");
	ck_assert_str_eq(loc->auth->password, "p@ss:w");
	stfs_location_free(loc);
	ck_assert_int_eq(stfs_locate("http://h/a@b/m.safetensors", NULL, &loc,
				     &err), 0);
	ck_assert_ptr_null(loc->auth);
	stfs_location_free(loc);
	ck_assert_int_eq(stfs_locate("http://u:p@h/a b.safetensors", NULL, &loc,
				     &err), -EINVAL);
	ck_assert_str_eq(err.msg, "not a valid URL");
	/* a presigned URL: its query is sent, never shown */
	ck_assert_int_eq(stfs_locate("https://h/d/m.safetensors?X-Sig=a%2F&e=1",
				     NULL, &loc, &err), 0);
	ck_assert_str_eq(loc->arg, "https://h/d/m.safetensors");
	ck_assert_str_eq(loc->name, "m.safetensors");
	ck_assert_int_eq(loc->kind, STFS_LOC_FILE);
	ck_assert_str_eq(loc->auth->query, "X-Sig=a%2F&e=1");
	ck_assert_ptr_null(loc->auth->user);
	stfs_location_free(loc);
	ck_assert_int_eq(stfs_locate("https://h/d/?sig=1", NULL, &loc, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "shards need a URL each"));
	ck_assert_int_eq(stfs_locate("https://h/d/m.index.json?sig=1", NULL, &loc,
				     &err), -EINVAL);
	ck_assert_int_eq(stfs_locate("https://h/d/m.safetensors#x", NULL, &loc,
				     &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "fragment"));
}
END_TEST

/* -o public_net: which addresses are refused, and allow_net='s ranges. */
static const char *refused_class(const struct stfs_net_policy *p,
				 const char *addr, char *shown, size_t n)
{
	struct sockaddr_in s4 = { .sin_family = AF_INET };
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6 };

	if (inet_pton(AF_INET, addr, &s4.sin_addr) == 1)
		return stfs_net_refused(p, (struct sockaddr *)&s4, shown, n);
	ck_assert_int_eq(inet_pton(AF_INET6, addr, &s6.sin6_addr), 1);
	return stfs_net_refused(p, (struct sockaddr *)&s6, shown, n);
}

START_TEST(t_public_net)
{
	static const struct {
		const char *addr, *want;        /* NULL: public */
	} cases[] = {
		{ "8.8.8.8", NULL }, { "151.101.1.1", NULL },
		{ "2606:4700::1111", NULL }, { "172.32.0.1", NULL },
		{ "::ffff:8.8.8.8", NULL }, { "64:ff9b::808:808", NULL },
		{ "127.0.0.1", "a loopback" }, { "127.255.0.9", "a loopback" },
		{ "::1", "a loopback" }, { "::ffff:127.0.0.1", "a loopback" },
		{ "169.254.169.254", "the cloud metadata service's" },
		{ "fd00:ec2::254", "the cloud metadata service's" },
		{ "::ffff:169.254.169.254", "the cloud metadata service's" },
		{ "64:ff9b::a9fe:a9fe", "the cloud metadata service's" },
		{ "2002:a9fe:a9fe::1", "the cloud metadata service's" },
		{ "169.254.1.1", "a link-local" }, { "fe80::1", "a link-local" },
		{ "10.1.2.3", "a private" }, { "172.16.0.1", "a private" },
		{ "172.31.255.255", "a private" }, { "192.168.0.1", "a private" },
		{ "fc00::1", "a private" }, { "100.64.0.1", "a private (shared)" },
		{ "0.0.0.0", "an unspecified (this host)" },
		{ "::", "an unspecified" }, { "224.0.0.1", "a multicast" },
		{ "ff02::1", "a multicast" },
		{ "255.255.255.255", "a reserved (class E, broadcast)" },
		{ "::7f00:1", "a reserved (IPv4-compatible)" },
		{ "2001:db8::1", "a reserved (documentation)" },
		{ "2001:0:4136::1", "a reserved (IETF protocol, Teredo)" },
		/* a local NAT64 (RFC 8215) or SIIT (RFC 2765) may carry
		 * any IPv4 address, 169.254.169.254 too */
		{ "64:ff9b:1::a9fe:a9fe", "a reserved (local-use NAT64)" },
		{ "64:ff9b:1:a9fe:a9:fe00::", "a reserved (local-use NAT64)" },
		{ "::ffff:0:a9fe:a9fe", "a reserved (IPv4-translated)" },
		{ "64:ff9b:2::1", NULL },
	};
	struct stfs_net_policy p = { .on = 1 };
	char shown[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *got = refused_class(&p, cases[i].addr, shown,
						sizeof(shown));

		if (!cases[i].want)
			ck_assert_msg(!got, "%s: %s", cases[i].addr, got);
		else
			ck_assert_msg(got && !strcmp(got, cases[i].want),
				      "%s: %s", cases[i].addr,
				      got ? got : "(public)");
	}
	/* shown as the address connected to, an IPv4 one without ::ffff: */
	ck_assert_ptr_nonnull(refused_class(&p, "::ffff:127.0.0.2", shown,
					    sizeof(shown)));
	ck_assert_str_eq(shown, "127.0.0.2");
	/* allow_net= */
	ck_assert_int_eq(stfs_net_allow(&p, "127.0.0.1"), 0);
	ck_assert_int_eq(stfs_net_allow(&p, "10.0.0.0/8"), 0);
	ck_assert_int_eq(stfs_net_allow(&p, "fd00::/8"), 0);
	ck_assert_ptr_null(refused_class(&p, "127.0.0.1", shown, 64));
	ck_assert_ptr_null(refused_class(&p, "::ffff:127.0.0.1", shown, 64));
	ck_assert_ptr_nonnull(refused_class(&p, "127.0.0.2", shown, 64));
	ck_assert_ptr_null(refused_class(&p, "10.200.0.1", shown, 64));
	ck_assert_ptr_null(refused_class(&p, "11.0.0.1", shown, 64));
	ck_assert_ptr_null(refused_class(&p, "fd00:ec2::254", shown, 64));
	ck_assert_ptr_nonnull(refused_class(&p, "fc00::1", shown, 64));
	ck_assert_ptr_nonnull(refused_class(&p, "169.254.169.254", shown, 64));
	for (const char *const *b = (const char *const[]){ "", "/8",
		"127.0.0.1/33", "::1/129", "10.0.0.0/", "10.0.0.0/8x",
		"10.0.0.0/-1", "localhost", "1.2.3", "0x7f.0.0.1",
		"2130706433", NULL }; *b; b++)
		ck_assert_msg(stfs_net_allow(&p, *b) == -EINVAL, "%s", *b);
	while (p.n < STFS_NET_ALLOW_MAX)
		ck_assert_int_eq(stfs_net_allow(&p, "192.0.2.1"), 0);
	ck_assert_int_eq(stfs_net_allow(&p, "192.0.2.1"), -E2BIG);
}
END_TEST

Suite *remote_suite(void)
{
	Suite *s = suite_create("remote");
	TCase *tc = tcase_create("remote");

	tcase_add_test(tc, t_sigv4_examples);
	tcase_add_test(tc, t_auth_headers);
	tcase_add_test(tc, t_hub_json);
	tcase_add_test(tc, t_link_and_errors);
	tcase_add_test(tc, t_listing_bounds);
	tcase_add_test(tc, t_content_encoding);
	tcase_add_test(tc, t_retry_after);
	tcase_add_test(tc, t_block_size);
	tcase_add_test(tc, t_remote_opts);
	tcase_add_test(tc, t_remote_objects);
	tcase_add_test(tc, t_url_credentials);
	tcase_add_test(tc, t_public_net);
	suite_add_tcase(s, tc);
	return s;
}

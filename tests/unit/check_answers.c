/*
 * check_answers.c: unit tests of what an answer to a range request must be
 * (httphdr.c): ambiguous answers (two Content-Range headers, different
 * ETags, Last-Modified or Content-Length values, folded or spaced fields)
 * are marked; the check of every answer (its range, its Content-Length,
 * the object's size and the version seen at open); the conditional
 * header sent (If-Match, If-Unmodified-Since) and weak ETags.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "engine.h"
#include "httphdr.h"
#include "suites.h"

/* Feed the lines of text (separated by '\n') to a fresh r. */
static void hdrs(struct stfs_http_resp *r, const char *text)
{
	memset(r, 0, sizeof(*r));
	while (*text) {
		size_t n = strcspn(text, "\n");

		stfs_http_header_line(text, n, r);
		text += n + (text[n] == '\n');
	}
}

START_TEST(t_ambiguous_answers)
{
	static const struct { const char *text; int ambiguous; } cases[] = {
		{ "Content-Range: bytes 0-9/100\nContent-Length: 10\n"
		  "ETag: \"a\"\nETag: \"a\"", 0 },
		{ "Content-Range: bytes 0-9/100\n"
		  "Content-Range: bytes 10-19/100", 1 },
		{ "Content-Range: bytes 0-9/100\n"
		  "content-range: bytes 0-9/100", 1 },
		{ "ETag: \"a\"\nETag: \"b\"", 1 },
		{ "Last-Modified: Sun, 22 Nov 2026 08:00:00 GMT\n"
		  "Last-Modified: Sun, 22 Nov 2026 08:00:01 GMT", 1 },
		{ "Content-Length: 10\nContent-Length: 11", 1 },
		{ "Content-Length: 10\nContent-Length: 10", 0 },
		{ "Content-Length: 1x", 1 },
		{ "ETag : \"a\"", 1 },
		{ "Content-Range: bytes 0-9/100\n  , bytes 10-19/100", 1 },
		{ "X-Other: a\n  folded", 0 },
		/* a new response (a redirect's) starts again */
		{ "ETag: \"a\"\nHTTP/1.1 206 Partial\nETag: \"b\"", 0 },
	};
	struct stfs_http_resp r;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		hdrs(&r, cases[i].text);
		ck_assert_msg(r.ambiguous == cases[i].ambiguous, "%s",
			      cases[i].text);
		ck_assert_msg(!r.ambiguous || r.ambiguity[0], "%s",
			      cases[i].text);
	}
}
END_TEST

START_TEST(t_answer_check)
{
	const char *lm = "Sun, 22 Nov 2026 08:00:00 GMT";
	struct stfs_http_want w = { 10, 10, 100, "\"a\"", lm };
	struct stfs_http_resp r;
	char why[256], c[300];

	hdrs(&r, "Content-Range: bytes 10-19/100\nContent-Length: 10\n"
	     "ETag: \"a\"\nLast-Modified: Sun, 22 Nov 2026 08:00:00 GMT");
	ck_assert_int_eq(stfs_http_answer_check(&r, &w, why, sizeof(why)), 0);
	/* other bytes, another length, another size */
	w.off = 11;
	ck_assert_int_eq(stfs_http_answer_check(&r, &w, why, sizeof(why)),
			 -EIO);
	w.off = 10;
	r.length = 9;
	ck_assert_int_eq(stfs_http_answer_check(&r, &w, why, sizeof(why)),
			 -EIO);
	ck_assert_ptr_nonnull(strstr(why, "Content-Length of 9"));
	r.length = 10;
	w.total = 101;
	ck_assert_int_eq(stfs_http_answer_check(&r, &w, why, sizeof(why)),
			 -ESTALE);
	w.total = 100;
	/* a validator changed, or gone */
	strcpy(r.etag, "\"b\"");
	ck_assert_int_eq(stfs_http_answer_check(&r, &w, why, sizeof(why)),
			 -ESTALE);
	ck_assert_ptr_nonnull(strstr(why, "ETag \"b\", was \"a\""));
	r.etag[0] = '\0';
	ck_assert_int_eq(stfs_http_answer_check(&r, &w, why, sizeof(why)),
			 -ESTALE);
	ck_assert_ptr_nonnull(strstr(why, "no ETag"));
	w.etag = "";
	ck_assert_int_eq(stfs_http_answer_check(&r, &w, why, sizeof(why)), 0);
	r.last_modified[0] = '\0';
	ck_assert_int_eq(stfs_http_answer_check(&r, &w, why, sizeof(why)),
			 -ESTALE);
	/* ambiguous: refused whatever else it says */
	hdrs(&r, "Content-Range: bytes 10-19/100\nETag: \"a\"\n"
	     "Last-Modified: Sun, 22 Nov 2026 08:00:00 GMT\n"
	     "Content-Range: bytes 10-19/100");
	w.etag = "\"a\"";
	ck_assert_int_eq(stfs_http_answer_check(&r, &w, why, sizeof(why)),
			 -EIO);
	ck_assert_ptr_nonnull(strstr(why, "two Content-Range headers"));
	/* opening: a short answer at the object's end is fine */
	hdrs(&r, "Content-Range: bytes 0-49/50");
	w = (struct stfs_http_want){ 0, 100, UINT64_MAX, NULL, NULL };
	ck_assert_int_eq(stfs_http_answer_check(&r, &w, why, sizeof(why)), 0);
	hdrs(&r, "Content-Range: bytes 0-49/60");
	ck_assert_int_eq(stfs_http_answer_check(&r, &w, why, sizeof(why)),
			 -EIO);
	/* the condition sent: If-Match for a strong ETag, else
	 * If-Unmodified-Since; a weak ETag is no validator */
	ck_assert_int_eq(stfs_http_condition("\"a\"", lm, c, sizeof(c)), 1);
	ck_assert_str_eq(c, "If-Match: \"a\"");
	ck_assert_int_eq(stfs_http_condition("W/\"a\"", lm, c, sizeof(c)), 1);
	ck_assert_str_eq(c, "If-Unmodified-Since: Sun, 22 Nov 2026 08:00:00 "
			 "GMT");
	ck_assert_int_eq(stfs_http_condition("W/\"a\"", "", c, sizeof(c)), 0);
	ck_assert_int_eq(stfs_http_condition(NULL, NULL, c, sizeof(c)), 0);
	ck_assert_int_eq(stfs_http_strong_etag("W/\"a\""), 0);
	ck_assert_int_eq(stfs_http_strong_etag("\"a\""), 1);
}
END_TEST

Suite *answers_suite(void)
{
	Suite *s = suite_create("answers");
	TCase *tc = tcase_create("answers");

	tcase_add_test(tc, t_ambiguous_answers);
	tcase_add_test(tc, t_answer_check);
	suite_add_tcase(s, tc);
	return s;
}

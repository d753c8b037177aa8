/*
 * check_s3sum.c: unit tests of what S3 publishes of an object's bytes:
 * CRC-64/NVME (format/crc64.c) against its check value and S3's own
 * base64 of it; strict base64 (format/text.c), good and hostile; and the
 * check an answer's headers give (s3sum.c, through httphdr.c's parse):
 * x-amz-checksum-sha256 before -crc64nvme before an MD5 ETag, composite
 * checksums never used, SSE-KMS and SSE-C ETags not taken as MD5s, and
 * values that are not checksums (not base64, another length, sent twice,
 * empty, too long) refused.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "engine.h"
#include "httphdr.h"
#include "s3.h"
#include "suites.h"

START_TEST(t_crc64nvme)
{
	unsigned char d[8];
	size_t n;
	uint64_t v = 0;

	ck_assert_uint_eq(stfs_crc64nvme(0, "123456789", 9),
			  0xae8b14860a799888ull);
	ck_assert_uint_eq(stfs_crc64nvme(0, "", 0), 0);
	/* in two parts: the same */
	ck_assert_uint_eq(stfs_crc64nvme(stfs_crc64nvme(0, "1234", 4),
					 "56789", 5), 0xae8b14860a799888ull);
	/* S3's x-amz-checksum-crc64nvme of "hello world\n", big-endian */
	ck_assert_int_eq(stfs_base64_decode("D3gOhIHSoh8=", 12, d, sizeof(d),
					    &n), 0);
	ck_assert_uint_eq(n, 8);
	for (int i = 0; i < 8; i++)
		v = v << 8 | d[i];
	ck_assert_uint_eq(stfs_crc64nvme(0, "hello world\n", 12), v);
}
END_TEST

START_TEST(t_base64)
{
	static const char *const bad[] = {
		"aGVsbG8", "aGV*bG8=", "a===", "=AAA", "AA=A", "aGVsbG9=",
		"aGVsbA=A", "aGVsbB==", "AAAA====", "aGVs bG8=", "aGVs\nbG8=",
		"aGVs-bG8", "aGVs_bG8",
	};
	unsigned char out[16];
	size_t n;

	ck_assert_int_eq(stfs_base64_decode("aGVsbG8=", 8, out, sizeof(out),
					    &n), 0);
	ck_assert_uint_eq(n, 5);
	ck_assert_mem_eq(out, "hello", 5);
	ck_assert_int_eq(stfs_base64_decode("aGVsbA==", 8, out, sizeof(out),
					    &n), 0);
	ck_assert_uint_eq(n, 4);
	ck_assert_mem_eq(out, "hell", 4);
	ck_assert_int_eq(stfs_base64_decode("", 0, out, sizeof(out), &n), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(stfs_base64_decode("+/+/", 4, out, sizeof(out), &n),
			 0);
	ck_assert_uint_eq(out[0], 0xfb);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		ck_assert_msg(stfs_base64_decode(bad[i], strlen(bad[i]), out,
						 sizeof(out), &n) == -EINVAL,
			      "%s", bad[i]);
	/* longer than the room given */
	ck_assert_int_eq(stfs_base64_decode("aGVsbG8=", 8, out, 4, &n),
			 -ENOSPC);
}
END_TEST

/* The check the header lines (NULL-ended) give: its rc, into *s. */
static int expected(struct stfs_s3_sum *s, const char *const *lines)
{
	struct stfs_http_resp r;

	memset(&r, 0, sizeof(r));
	stfs_http_header_line("HTTP/1.1 200 OK\r\n", 17, &r);
	for (; *lines; lines++)
		stfs_http_header_line(*lines, strlen(*lines), &r);
	return stfs_s3_expected(&r, s);
}

#define ETAG "ETag: \"6f5902ac237024bdd0c176cb93063dc4\"\r\n"
#define SHA "x-amz-checksum-sha256: " \
	    "qUiQTy8PR5uPgZdpSzAYSw0u0cHNKh7A+4XSmaGSpEc=\r\n"
#define SHA_HEX "a948904f2f0f479b8f8197694b30184b0d2ed1c1cd2a1ec0fb85d299a192a447"
#define CRC "X-Amz-Checksum-Crc64nvme: D3gOhIHSoh8=\r\n"

START_TEST(t_s3_expected)
{
	struct stfs_s3_sum s;

	ck_assert_int_eq(expected(&s, (const char *[]){ ETAG, CRC, SHA,
			 "x-amz-checksum-type: FULL_OBJECT", NULL }), 0);
	ck_assert_str_eq(s.kind, "sha256");
	ck_assert_str_eq(s.hex, SHA_HEX);
	ck_assert_int_eq(expected(&s, (const char *[]){ ETAG, CRC, NULL }), 0);
	ck_assert_str_eq(s.kind, "crc64nvme");
	ck_assert_str_eq(s.hex, "0f780e8481d2a21f");
	ck_assert_int_eq(expected(&s, (const char *[]){ ETAG, NULL }), 0);
	ck_assert_str_eq(s.kind, "md5");
	ck_assert_str_eq(s.hex, "6f5902ac237024bdd0c176cb93063dc4");
	/* SSE-S3's ETags are MD5s; SSE-KMS's and SSE-C's are not */
	ck_assert_int_eq(expected(&s, (const char *[]){ ETAG,
			 "x-amz-server-side-encryption: AES256", NULL }), 0);
	ck_assert_str_eq(s.kind, "md5");
	ck_assert_int_eq(expected(&s, (const char *[]){ ETAG,
			 "x-amz-server-side-encryption: aws:kms", NULL }), 0);
	ck_assert_str_eq(s.kind, "");
	ck_assert_str_eq(s.unchecked, "unchecked (SSE-KMS ETag)");
	ck_assert_int_eq(expected(&s, (const char *[]){ ETAG,
			 "x-amz-server-side-encryption: aws:kms:dsse", NULL }),
			 0);
	ck_assert_str_eq(s.kind, "");
	ck_assert_int_eq(expected(&s, (const char *[]){ ETAG, "x-amz-server-"
			 "side-encryption-customer-algorithm: AES256", NULL }),
			 0);
	ck_assert_str_eq(s.unchecked, "unchecked (SSE-C ETag)");
	ck_assert_int_eq(expected(&s, (const char *[]){ ETAG, CRC,
			 "x-amz-server-side-encryption: aws:kms", NULL }), 0);
	ck_assert_str_eq(s.kind, "crc64nvme");
	ck_assert_ptr_null(s.unchecked);
	/* composite: of the parts, never taken as the whole's */
	ck_assert_int_eq(expected(&s, (const char *[]){ ETAG, SHA,
			 "x-amz-checksum-type: COMPOSITE", NULL }), 0);
	ck_assert_str_eq(s.kind, "md5");
	ck_assert_int_eq(expected(&s, (const char *[]){
			 "ETag: \"6f5902ac237024bdd0c176cb93063dc4-3\"",
			 "x-amz-checksum-sha256: qUiQTy8PR5uPgZdpSzAYSw0u0cHNKh"
			 "7A+4XSmaGSpEc=-3", NULL }), 0);
	ck_assert_str_eq(s.kind, "");
	ck_assert_ptr_null(s.unchecked);
}
END_TEST

START_TEST(t_s3_expected_hostile)
{
	static const char *const bad[] = {
		"x-amz-checksum-sha256: not*base64!",
		"x-amz-checksum-sha256: D3gOhIHSoh8=",          /* 8 bytes */
		"x-amz-checksum-crc64nvme: qUiQTy8PR5uPgZdpSzAYSw0u0cHNKh7A+"
		"4XSmaGSpEc=",                                  /* 32 bytes */
		"x-amz-checksum-crc64nvme: D3gOhIHSoh8",        /* unpadded */
		"x-amz-checksum-crc64nvme: D3gOhIHSoh9=",       /* pad bits */
		"x-amz-checksum-sha256:",
		"x-amz-checksum-sha256: " "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
		"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
		"x-amz-checksum-sha256: qUiQTy8PR5uPgZdpSzAYSw0u0cHNKh7A+4XS\x01"
		"maGSpEc=",
	};
	struct stfs_s3_sum s;

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		ck_assert_msg(expected(&s, (const char *[]){ ETAG, bad[i],
				       NULL }) == -EINVAL, "%s", bad[i]);
		ck_assert_ptr_nonnull(strstr(s.why, "x-amz-checksum-"));
	}
	/* sent twice, saying two things */
	ck_assert_int_eq(expected(&s, (const char *[]){ ETAG, CRC,
			 "x-amz-checksum-crc64nvme: AAAAAAAAAAA=", NULL }),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(s.why, "sent twice"));
	/* twice, the same: fine */
	ck_assert_int_eq(expected(&s, (const char *[]){ ETAG, CRC, CRC,
			 NULL }), 0);
	ck_assert_str_eq(s.kind, "crc64nvme");
	/* a type that is neither: refused, not taken as composite */
	ck_assert_int_eq(expected(&s, (const char *[]){ ETAG, SHA,
			 "x-amz-checksum-type: junk", NULL }), -EINVAL);
	ck_assert_ptr_nonnull(strstr(s.why, "x-amz-checksum-type"));
	/* "B64-N" said to be of the whole object: not base64, refused */
	ck_assert_int_eq(expected(&s, (const char *[]){ ETAG,
			 "x-amz-checksum-sha256: qUiQTy8PR5uPgZdpSzAYSw0u0cHNKh"
			 "7A+4XSmaGSpEc=-3", "x-amz-checksum-type: FULL_OBJECT",
			 NULL }), -EINVAL);
}
END_TEST

Suite *s3sum_suite(void)
{
	Suite *s = suite_create("s3sum");
	TCase *tc = tcase_create("s3sum");

	tcase_add_test(tc, t_crc64nvme);
	tcase_add_test(tc, t_base64);
	tcase_add_test(tc, t_s3_expected);
	tcase_add_test(tc, t_s3_expected_hostile);
	suite_add_tcase(s, tc);
	return s;
}

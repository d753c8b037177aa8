/*
 * check_header.c: the header parser against every rule of RULES.md
 * (R4-R26), each with inputs the reference accepts and inputs it refuses,
 * and the rule stfs must name when it refuses.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stfs/stfs.h"
#include "suites.h"

#define ANY STFS_DATA_LEN_ANY
#define T(dt, shape, b, e)                                              \
	"{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":[" #b \
	"," #e "]}"

struct hcase {
	const char *json;
	size_t len;          /* 0: strlen(json) */
	uint64_t data_len;
	const char *rule;    /* NULL: must be accepted */
	size_t tensors;      /* when accepted */
};

/* Every case: valid ones have rule NULL. */
static const struct hcase cases[] = {
	/* R24 empty and minimal headers */
	{ "{}", 0, 0, NULL, 0 },
	{ "{}      ", 0, 0, NULL, 0 },
	{ " \t\r\n{}\r\n \t", 0, 0, NULL, 0 },          /* R7 leading ws */
	{ "{\"__metadata__\":{\"a\":\"b\"}}", 0, 0, NULL, 0 },
	{ "{\"__metadata__\":null}", 0, 0, NULL, 0 },     /* quirk, MLX */
	{ "{}", 0, 1, "R20 buffer-complete", 0 },           /* trailing */
	/* R5 syntax */
	{ "", 0, 0, "R5 json-syntax", 0 },
	{ "   ", 0, 0, "R5 json-syntax", 0 },
	{ "{", 0, 0, "R5 json-syntax", 0 },
	{ "{/* c */}", 0, 0, "R5 json-syntax", 0 },
	{ "{\"a\":" T("F32", "[]", 0, 4) ",}", 0, 4, "R5 json-syntax", 0 },
	{ "{'a':" T("F32", "[]", 0, 4) "}", 0, 4, "R5 json-syntax", 0 },
	{ "{a:" T("F32", "[]", 0, 4) "}", 0, 4, "R5 json-syntax", 0 },
	{ "{\"a\":" T("F32", "[]", 0, 4) ",\"b\":NaN}", 0, 4,
	  "R5 json-syntax", 0 },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4],"
	  "\"x\":Infinity}}", 0, 4, "R5 json-syntax", 0 },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4],"
	  "\"x\":01}}", 0, 4, "R5 json-syntax", 0 },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4],"
	  "\"x\":+1}}", 0, 4, "R5 json-syntax", 0 },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4],"
	  "\"x\":0x10}}", 0, 4, "R5 json-syntax", 0 },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4],"
	  "\"x\":1e400}}", 0, 4, "R5 json-syntax", 0 },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4],"
	  "\"x\":-1.5e-400}}", 0, 4, NULL, 1 },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4],"
	  "\"x\":[true,false,null,-0.5E+3,\"s\",{}]}}", 0, 4, NULL, 1 },
	{ "{\"a\tb\":" T("F32", "[]", 0, 4) "}", 0, 4, "R5 json-syntax", 0 },
	{ "{\"a\\x\":" T("F32", "[]", 0, 4) "}", 0, 4, "R5 json-syntax", 0 },
	{ "{\"a\\ud800\":" T("F32", "[]", 0, 4) "}", 0, 4,
	  "R5 json-syntax", 0 },
	{ "{\"a\\udc00\":" T("F32", "[]", 0, 4) "}", 0, 4,
	  "R5 json-syntax", 0 },
	{ "{\"a\\ud800\\u0041\":" T("F32", "[]", 0, 4) "}", 0, 4,
	  "R5 json-syntax", 0 },
	{ "{\"a\\ud83d\\ude00\":" T("F32", "[]", 0, 4) "}", 0, 4, NULL, 1 },
	{ "{\"a\x7f\":" T("F32", "[]", 0, 4) "}", 0, 4, NULL, 1 },
	{ "{\"a\\u0000b\":" T("F32", "[]", 0, 4) "}", 0, 4, NULL, 1 },
	{ "{\"a\":" T("F32", "[]", 0, 4) "", 0, 4, "R5 json-syntax", 0 },
	{ "{\"a\" " T("F32", "[]", 0, 4) "}", 0, 4, "R5 json-syntax", 0 },
	{ "{\"a\":tru}", 0, 0, "R5 json-syntax", 0 },
	/* R6 top level must be an object */
	{ "[]", 0, 0, "R6 json-toplevel", 0 },
	{ "\"x\"", 0, 0, "R6 json-toplevel", 0 },
	{ "1", 0, 0, "R6 json-toplevel", 0 },
	{ "null", 0, 0, "R6 json-toplevel", 0 },
	/* R7 what may follow the object */
	{ "{}{}", 0, 0, "R7 json-whitespace", 0 },
	{ "{}\0", 3, 0, "R7 json-whitespace", 0 },
	{ "{}\f", 0, 0, "R7 json-whitespace", 0 },
	{ "{}\v", 0, 0, "R7 json-whitespace", 0 },
	{ "{}\xc2\xa0", 0, 0, "R7 json-whitespace", 0 },
	{ "\xef\xbb\xbf{}", 0, 0, "R5 json-syntax", 0 },
	/* R9 metadata */
	{ "{\"__metadata__\":{\"a\":1}}", 0, 0, "R9 metadata", 0 },
	{ "{\"__metadata__\":{\"a\":null}}", 0, 0, "R9 metadata", 0 },
	{ "{\"__metadata__\":[]}", 0, 0, "R9 metadata", 0 },
	{ "{\"__metadata__\":\"x\"}", 0, 0, "R9 metadata", 0 },
	{ "{\"__metadata__\":1}", 0, 0, "R9 metadata", 0 },
	{ "{\"\\u005f_metadata__\":{\"a\":\"b\"}}", 0, 0, NULL, 0 },
	{ "{\"__metadata__\\u0000\":" T("U8", "[1]", 0, 1) "}", 0, 1, NULL,
	  1 },
	/* R10 tensor fields */
	{ "{\"a\":{\"shape\":[],\"data_offsets\":[0,4]}}", 0, 4,
	  "R10 tensorinfo-fields", 0 },
	{ "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 0, 4,
	  "R10 tensorinfo-fields", 0 },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[]}}", 0, 4,
	  "R10 tensorinfo-fields", 0 },
	{ "{\"a\":{}}", 0, 0, "R10 tensorinfo-fields", 0 },
	{ "{\"a\":[\"F32\",[],[0,4]]}", 0, 4, "R10 tensorinfo-fields", 0 },
	{ "{\"a\":\"F32\"}", 0, 4, "R10 tensorinfo-fields", 0 },
	{ "{\"a\":null}", 0, 4, "R10 tensorinfo-fields", 0 },
	{ "{\"a\":{\"data_offsets\":[0,4],\"shape\":[],\"dtype\":\"I32\"}}",
	  0, 4, NULL, 1 },
	{ "{\"a\":{\"d\\u0074ype\":\"I32\",\"shape\":[],"
	  "\"data_offsets\":[0,4]}}", 0, 4, NULL, 1 },
	{ "{\"a\":{\"dtype\\u0000\":\"I32\",\"dtype\":\"I32\",\"shape\":[],"
	  "\"data_offsets\":[0,4]}}", 0, 4, NULL, 1 },
	/* R11 dtype */
	{ "{\"a\":" T("F8_E4M3FN", "[1]", 0, 1) "}", 0, 1, "R11 dtype", 0 },
	{ "{\"a\":" T("F8_E8M0FNU", "[1]", 0, 1) "}", 0, 1, "R11 dtype", 0 },
	{ "{\"a\":" T("f32", "[1]", 0, 4) "}", 0, 4, "R11 dtype", 0 },
	{ "{\"a\":" T("F32 ", "[1]", 0, 4) "}", 0, 4, "R11 dtype", 0 },
	{ "{\"a\":" T("F32\\u0000", "[1]", 0, 4) "}", 0, 4, "R11 dtype", 0 },
	{ "{\"a\":" T("F128", "[1]", 0, 16) "}", 0, 16, "R11 dtype", 0 },
	{ "{\"a\":{\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]}}", 0,
	  4, "R11 dtype", 0 },
	{ "{\"a\":{\"dtype\":null,\"shape\":[1],\"data_offsets\":[0,4]}}", 0,
	  4, "R11 dtype", 0 },
	{ "{\"a\":{\"dtype\":{\"F32\":null},\"shape\":[1],"
	  "\"data_offsets\":[0,4]}}", 0, 4, "R11 dtype", 0 },
	/* R12 shape */
	{ "{\"a\":" T("F32", "[2.0]", 0, 8) "}", 0, 8, "R12 shape-type", 0 },
	{ "{\"a\":" T("F32", "[2e0]", 0, 8) "}", 0, 8, "R12 shape-type", 0 },
	{ "{\"a\":" T("F32", "[-0]", 0, 0) "}", 0, 0, "R12 shape-type", 0 },
	{ "{\"a\":" T("F32", "[-1]", 0, 0) "}", 0, 0, "R12 shape-type", 0 },
	{ "{\"a\":" T("F32", "[\"2\"]", 0, 8) "}", 0, 8, "R12 shape-type", 0 },
	{ "{\"a\":" T("F32", "[null]", 0, 8) "}", 0, 8, "R12 shape-type", 0 },
	{ "{\"a\":" T("F32", "[[2]]", 0, 8) "}", 0, 8, "R12 shape-type", 0 },
	{ "{\"a\":" T("F32", "2", 0, 8) "}", 0, 8, "R12 shape-type", 0 },
	{ "{\"a\":" T("F32", "[18446744073709551616]", 0, 8) "}", 0, 8,
	  "R12 shape-type", 0 },
	{ "{\"a\":" T("U8", "[18446744073709551615]", 0, 8) "}", 0, 8,
	  "R17 bits-overflow", 0 },
	{ "{\"a\":" T("F32", "[02]", 0, 8) "}", 0, 8, "R5 json-syntax", 0 },
	{ "{\"a\":" T("F32", "[ 2 , 1 ]", 0, 8) "}", 0, 8, NULL, 1 },
	/* R13 data_offsets */
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0]}}", 0,
	  4, "R13 offsets-type", 0 },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[]}}", 0,
	  4, "R13 offsets-type", 0 },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[],"
	  "\"data_offsets\":[0,4,8]}}", 0, 4, "R13 offsets-type", 0 },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[],"
	  "\"data_offsets\":{\"0\":4}}}", 0, 4, "R13 offsets-type", 0 },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[],"
	  "\"data_offsets\":[0,4.0]}}", 0, 4, "R13 offsets-type", 0 },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[],"
	  "\"data_offsets\":[-0,4]}}", 0, 4, "R13 offsets-type", 0 },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[],"
	  "\"data_offsets\":[\"0\",4]}}", 0, 4, "R13 offsets-type", 0 },
	/* offsets near and above 2^64: refused, never wrapped */
	{ "{\"a\":" T("U8", "[1]", 18446744073709551614,
		      18446744073709551615) "}", 0, 1,
	  "R15 offsets-contiguous", 0 },
	{ "{\"a\":" T("U8", "[2305843009213693951]", 0,
		      2305843009213693951) "}", 0, 8, "R20 buffer-complete",
	  0 },
	{ "{\"a\":" T("U8", "[1]", 0, 18446744073709551616) "}", 0, 1,
	  "R13 offsets-type", 0 },
	{ "{\"a\":" T("U8", "[1]", 0, 1) ",\"b\":" T("U8",
	  "[18446744073709551615]", 1, 0) "}", 0, 1,
	  "R15 offsets-contiguous", 0 },              /* end before begin */
	/* R14 duplicates */
	{ "{\"a\":" T("F32", "[]", 0, 4) ",\"a\":" T("F32", "[2]", 0, 8) "}",
	  0, 8, NULL, 1 },                                /* last wins */
	{ "{\"a\":" T("F32", "[]", 0, 4) ",\"a\":" T("F32", "[2]", 0, 8) "}",
	  0, 4, "R20 buffer-complete", 0 },          /* first would win */
	{ "{\"a\":" T("F32", "[]", 0, 4) ",\"a\":" T("F32", "[]", 0, 4) "}",
	  0, 4, NULL, 1 },                                /* identical */
	{ "{\"\\u00e9\":" T("F32", "[]", 0, 4) ",\"\xc3\xa9\":"
	  T("F32", "[]", 0, 4) "}", 0, 4, NULL, 1 },      /* escaped == raw */
	{ "{\"e\xcc\x81\":" T("F32", "[]", 0, 4) ",\"\xc3\xa9\":"
	  T("F32", "[]", 4, 8) "}", 0, 8, NULL, 2 },      /* NFD != NFC */
	{ "{\"a\":" T("F32", "[]", 0, 4) ",\"b\":" T("F32", "[]", 0, 4) "}",
	  0, 4, "R15 offsets-contiguous", 0 },       /* shared range */
	{ "{\"__metadata__\":null,\"__metadata__\":null}", 0, 0,
	  "R14 duplicate-keys", 0 },
	{ "{\"__metadata__\":{},\"__metadata__\":{}}", 0, 0,
	  "R14 duplicate-keys", 0 },
	{ "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, 0, NULL, 0 },
	{ "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[],"
	  "\"data_offsets\":[0,4]}}", 0, 4, "R14 duplicate-keys", 0 },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"shape\":[1],"
	  "\"data_offsets\":[0,4]}}", 0, 4, "R14 duplicate-keys", 0 },
	/* R15 offsets chain */
	{ "{\"a\":" T("F32", "[]", 4, 8) "}", 0, 8, "R15 offsets-contiguous",
	  0 },
	{ "{\"a\":" T("F32", "[]", 0, 4) ",\"b\":" T("F32", "[]", 8, 12) "}",
	  0, 12, "R15 offsets-contiguous", 0 },
	{ "{\"a\":" T("F32", "[2]", 0, 8) ",\"b\":" T("F32", "[]", 4, 8) "}",
	  0, 8, "R15 offsets-contiguous", 0 },
	{ "{\"a\":" T("F32", "[]", 8, 4) "}", 0, 4, "R15 offsets-contiguous",
	  0 },
	{ "{\"b\":" T("F32", "[]", 4, 8) ",\"a\":" T("F32", "[]", 0, 4) "}",
	  0, 8, NULL, 2 },                          /* header order free */
	/* R16-R19 */
	{ "{\"a\":" T("U8", "[4294967296,4294967296,0]", 0, 0) "}", 0, 0,
	  "R16 shape-overflow", 0 },
	{ "{\"a\":" T("U8", "[0,4294967296,4294967296]", 0, 0) "}", 0, 0,
	  NULL, 1 },
	{ "{\"a\":" T("U8", "[2305843009213693952]", 0, 0) "}", 0, 0,
	  "R17 bits-overflow", 0 },
	{ "{\"a\":" T("F4", "[3]", 0, 2) "}", 0, 2, "R18 subbyte-whole", 0 },
	{ "{\"a\":" T("F4", "[]", 0, 1) "}", 0, 1, "R18 subbyte-whole", 0 },
	{ "{\"a\":" T("F6_E2M3", "[2]", 0, 2) "}", 0, 2, "R18 subbyte-whole",
	  0 },
	{ "{\"a\":" T("F4", "[2,3]", 0, 3) "}", 0, 3, NULL, 1 },
	{ "{\"a\":" T("F6_E3M2", "[4]", 0, 3) "}", 0, 3, NULL, 1 },
	{ "{\"a\":" T("F32", "[2,2]", 0, 12) "}", 0, 12, "R19 size-match",
	  0 },
	{ "{\"a\":" T("F32", "[]", 0, 5) "}", 0, 5, "R19 size-match", 0 },
	/* R20 */
	{ "{\"a\":" T("F32", "[]", 0, 4) "}", 0, 5, "R20 buffer-complete",
	  0 },
	{ "{\"a\":" T("F32", "[]", 0, 4) "}", 0, 3, "R20 buffer-complete",
	  0 },
	/* R22 zero-size, R23 scalar, R25 alignment */
	{ "{\"z\":" T("F32", "[0]", 0, 0) ",\"y\":" T("F32", "[0,3]", 0, 0)
	  ",\"a\":" T("F32", "[]", 0, 4) ",\"x\":" T("BF16", "[0]", 4, 4)
	  "}", 0, 4, NULL, 4 },
	{ "{\"a\":" T("U8", "[3]", 0, 3) ",\"b\":" T("F64", "[1]", 3, 11)
	  "}", 0, 11, NULL, 2 },
};

START_TEST(t_case)
{
	int i = _i;
	const struct hcase *c = &cases[i];
	struct stfs_header *h = NULL;
	struct stfs_error err;
	size_t len = c->len ? c->len : strlen(c->json);
	int rc = stfs_header_parse(c->json, len, c->data_len, 8, &h, &err);

	if (!c->rule) {
		ck_assert_msg(rc == 0, "case %d should be accepted: %s", i,
			      err.msg);
		ck_assert_uint_eq(stfs_header_count(h), c->tensors);
	} else {
		ck_assert_msg(rc == -EINVAL, "case %d should be refused (%s)",
			      i, c->rule);
		ck_assert_ptr_null(h);
		ck_assert_ptr_nonnull(err.rule);
		ck_assert_msg(strcmp(err.rule, c->rule) == 0,
			      "case %d: rule %s, expected %s (%s)", i,
			      err.rule, c->rule, err.msg);
		ck_assert_msg(strstr(err.msg, c->rule) != NULL,
			      "message names the rule: %s", err.msg);
	}
	stfs_header_free(h);
}
END_TEST

START_TEST(t_utf8)
{
	int i = _i;
	static const char *const bad[] = {
		"\xff", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
		"\xe2\x82", "\x80", "\xf8\x88\x80\x80\x80", "\xc2",
	};
	char json[64];
	struct stfs_header *h;
	struct stfs_error err;

	snprintf(json, sizeof(json), "{\"__metadata__\":{\"k\":\"%s\"}}",
		 bad[i]);
	ck_assert_int_eq(stfs_header_parse(json, strlen(json), 0, 8, &h, &err),
			 -EINVAL);
	ck_assert_str_eq(err.rule, "R4 utf8");
	/* the offset points at the bad byte */
	ck_assert_uint_eq(err.offset, 8 + 22);
}
END_TEST

START_TEST(t_utf8_good)
{
	const char *s = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\x7f\xed\x9f\xbf"
			"\xee\x80\x80\xf4\x8f\xbf\xbf";
	ck_assert(stfs_utf8_valid(s, strlen(s), NULL));
}
END_TEST

START_TEST(t_values)
{
	const char *j = "{\"__metadata__\":{\"k\":\"1\",\"a\":\"x\",\"k\":\"2\"},"
			"\"w\\u0000\\ud83d\\ude00\":" T("BF16", "[2,3]", 0, 12)
			"}   ";
	struct stfs_header *h;
	struct stfs_error err;
	const struct stfs_tensor *t;
	const struct stfs_meta *m;

	ck_assert_int_eq(stfs_header_parse(j, strlen(j), 12, 8, &h, &err), 0);
	ck_assert(stfs_header_has_metadata(h));
	ck_assert_uint_eq(stfs_header_meta_count(h), 2);
	m = stfs_header_meta(h, 1);
	ck_assert_str_eq(m->key, "k");
	ck_assert_str_eq(m->value, "2");          /* last wins */
	t = stfs_header_tensor(h, 0);
	ck_assert_uint_eq(t->name_len, 6);
	ck_assert(memcmp(t->name, "w\0\xf0\x9f\x98\x80", 6) == 0);
	ck_assert_int_eq(t->dtype, STFS_DTYPE_BF16);
	ck_assert_uint_eq(t->rank, 2);
	ck_assert_uint_eq(t->shape[0], 2);
	ck_assert_uint_eq(t->shape[1], 3);
	ck_assert_uint_eq(t->begin, 0);
	ck_assert_uint_eq(t->end, 12);
	ck_assert_uint_eq(stfs_tensor_elements(t), 6);
	ck_assert_uint_eq(stfs_header_data_len(h), 12);
	stfs_header_free(h);
}
END_TEST

START_TEST(t_metadata_null_is_absent)
{
	const char *j = "{\"__metadata__\":null}";
	struct stfs_header *h;

	ck_assert_int_eq(stfs_header_parse(j, strlen(j), 0, 8, &h, NULL), 0);
	ck_assert(!stfs_header_has_metadata(h));
	stfs_header_free(h);
}
END_TEST

/* Nesting: 127 levels in all are accepted, 128 refused (R8). */
static char *nested(int depth)
{
	/* top object (1) + tensor object (2) + unknown field levels */
	size_t n = (size_t)depth * 2 + 200;
	char *s = malloc(n), *p = s;
	int inner = depth - 2;

	p += sprintf(p, "{\"a\":{\"dtype\":\"U8\",\"shape\":[],"
		     "\"data_offsets\":[0,1],\"x\":");
	for (int i = 0; i < inner; i++)
		*p++ = '[';
	for (int i = 0; i < inner; i++)
		*p++ = ']';
	p += sprintf(p, "}}");
	return s;
}

START_TEST(t_depth)
{
	struct stfs_header *h;
	struct stfs_error err;
	char *ok = nested(127), *bad = nested(128);

	ck_assert_int_eq(stfs_header_parse(ok, strlen(ok), 1, 8, &h, &err), 0);
	stfs_header_free(h);
	ck_assert_int_eq(stfs_header_parse(bad, strlen(bad), 1, 8, &h, &err),
			 -EINVAL);
	ck_assert_str_eq(err.rule, "R8 json-depth");
	free(ok);
	free(bad);
}
END_TEST

START_TEST(t_rank_1001)
{
	char *j = malloc(4096), *p = j;
	struct stfs_header *h;

	p += sprintf(p, "{\"a\":{\"dtype\":\"U8\",\"shape\":[1");
	for (int i = 1; i < 1001; i++)
		p += sprintf(p, ",1");
	sprintf(p, "],\"data_offsets\":[0,1]}}");
	ck_assert_int_eq(stfs_header_parse(j, strlen(j), 1, 8, &h, NULL), 0);
	ck_assert_uint_eq(stfs_header_tensor(h, 0)->rank, 1001);
	stfs_header_free(h);
	free(j);
}
END_TEST

/* The error offset points into the file, at the offending byte. */
START_TEST(t_error_offset)
{
	const char *j = "{\"a\": x}";
	struct stfs_header *h;
	struct stfs_error err;

	ck_assert_int_eq(stfs_header_parse(j, strlen(j), 0, 8, &h, &err),
			 -EINVAL);
	ck_assert_uint_eq(err.offset, 8 + 6);
	ck_assert_ptr_nonnull(strstr(err.msg, "header byte 14"));
}
END_TEST

/* Messages name the tensor, quoted safely, as in the contract. */
START_TEST(t_message)
{
	const char *j = "{\"w\":" T("F32", "[2,2]", 0, 12) "}";
	const char *k = "{\"\\u001b[31m\":" T("F32", "[]", 0, 5) "}";
	struct stfs_header *h;
	struct stfs_error err;

	stfs_header_parse(j, strlen(j), 12, 8, &h, &err);
	ck_assert_str_eq(err.msg, "tensor \"w\": data_offsets [0,12) but F32 "
			 "[2,2] needs 16 bytes (R19 size-match)");
	stfs_header_parse(k, strlen(k), 5, 8, &h, &err);
	ck_assert_ptr_nonnull(strstr(err.msg, "tensor \"\\x1b[31m\""));
	ck_assert_ptr_null(strchr(err.msg, 0x1b));
}
END_TEST

/* Parsing its own description again gives the same tensors. */
START_TEST(t_many_tensors)
{
	size_t n = 20000;
	char *j = malloc(n * 80 + 16), *p = j;
	struct stfs_header *h;

	*p++ = '{';
	for (size_t i = 0; i < n; i++)
		p += sprintf(p, "%s\"t%zu\":{\"dtype\":\"F16\",\"shape\":[2],"
			     "\"data_offsets\":[%zu,%zu]}", i ? "," : "",
			     n - 1 - i, i * 4, i * 4 + 4);
	*p++ = '}';
	ck_assert_int_eq(stfs_header_parse(j, (size_t)(p - j), n * 4, 8, &h,
					   NULL), 0);
	ck_assert_uint_eq(stfs_header_count(h), n);
	for (size_t i = 0; i < n; i++)
		ck_assert_uint_eq(stfs_header_tensor(h, i)->begin, i * 4);
	stfs_header_free(h);
	free(j);
}
END_TEST

/* Names out of order with offsets in order (_i == 0), and names in order
 * with offsets out of order (_i == 1), each with an early definition of one
 * name that a later one replaces (R14): the tensors come out in offset
 * order, stfs_header_tensor_by_name() in byte order of the names, and the
 * replaced definition is gone (it would overlap the others, R15). */
START_TEST(t_order_and_duplicates)
{
	size_t n = 5000, seen = 0;
	char *j = malloc(n * 80 + 128), *p = j, prev[32] = "";
	struct stfs_header *h;

	p += sprintf(p, "{\"t%04zu\":{\"dtype\":\"U8\",\"shape\":[3],"
		     "\"data_offsets\":[1,4]}", _i ? (size_t)0 : (size_t)17);
	for (size_t k = 0; k < n; k++) {
		/* i: where its bytes are; name: a permutation (7919 is
		 * prime) or, with offsets descending, ascending */
		size_t i = _i ? n - 1 - k : k, name = _i ? k : k * 7919 % n;

		p += sprintf(p, ",\"t%04zu\":{\"dtype\":\"F16\",\"shape\":[2],"
			     "\"data_offsets\":[%zu,%zu]}", name, i * 4,
			     i * 4 + 4);
	}
	*p++ = '}';
	ck_assert_int_eq(stfs_header_parse(j, (size_t)(p - j), n * 4, 8, &h,
					   NULL), 0);
	ck_assert_uint_eq(stfs_header_count(h), n);
	for (size_t i = 0; i < n; i++) {
		const struct stfs_tensor *t = stfs_header_tensor(h, i);

		ck_assert_uint_eq(t->begin, i * 4);
		ck_assert_uint_eq(t->end, i * 4 + 4);
	}
	for (size_t i = 0; i < n; i++) {
		const struct stfs_tensor *t = stfs_header_tensor_by_name(h, i);
		char want[32];

		snprintf(want, sizeof(want), "t%04zu", i);
		ck_assert_str_eq(t->name, want);
		ck_assert_int_gt(strcmp(t->name, prev), 0);
		ck_assert_int_eq(t->dtype, STFS_DTYPE_F16);
		snprintf(prev, sizeof(prev), "%s", t->name);
		seen++;
	}
	ck_assert_ptr_null(stfs_header_tensor_by_name(h, n));
	ck_assert_uint_eq(seen, n);
	stfs_header_free(h);
	free(j);
}
END_TEST

Suite *header_suite(void)
{
	Suite *s = suite_create("header");
	TCase *tc = tcase_create("rules");

	tcase_add_loop_test(tc, t_case, 0, sizeof(cases) / sizeof(cases[0]));
	tcase_add_loop_test(tc, t_utf8, 0, 8);
	tcase_add_test(tc, t_utf8_good);
	tcase_add_test(tc, t_values);
	tcase_add_test(tc, t_metadata_null_is_absent);
	tcase_add_test(tc, t_depth);
	tcase_add_test(tc, t_rank_1001);
	tcase_add_test(tc, t_error_offset);
	tcase_add_test(tc, t_message);
	tcase_add_test(tc, t_many_tensors);
	tcase_add_loop_test(tc, t_order_and_duplicates, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

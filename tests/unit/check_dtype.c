/*
 * check_dtype.c: the 22 dtypes, their spellings and bit sizes (R11), and
 * the names the reference refuses.
 */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "stfs/stfs.h"
#include "suites.h"

static const struct {
	const char *name;
	unsigned bits;
} table[] = {
	{ "BOOL", 8 },        { "F4", 4 },          { "F6_E2M3", 6 },
	{ "F6_E3M2", 6 },     { "U8", 8 },          { "I8", 8 },
	{ "F8_E5M2", 8 },     { "F8_E4M3", 8 },     { "F8_E8M0", 8 },
	{ "F8_E4M3FNUZ", 8 }, { "F8_E5M2FNUZ", 8 }, { "I16", 16 },
	{ "U16", 16 },        { "F16", 16 },        { "BF16", 16 },
	{ "I32", 32 },        { "U32", 32 },        { "F32", 32 },
	{ "C64", 64 },        { "F64", 64 },        { "I64", 64 },
	{ "U64", 64 },
};

START_TEST(t_each)
{
	int i = _i;
	enum stfs_dtype dt;

	ck_assert_int_eq(stfs_dtype_from_name(table[i].name,
					      strlen(table[i].name), &dt), 0);
	ck_assert_str_eq(stfs_dtype_name(dt), table[i].name);
	ck_assert_uint_eq(stfs_dtype_bits(dt), table[i].bits);
}
END_TEST

START_TEST(t_count)
{
	ck_assert_int_eq(STFS_DTYPE_COUNT, 22);
	ck_assert_uint_eq(sizeof(table) / sizeof(table[0]), 22);
	ck_assert_ptr_null(stfs_dtype_name(STFS_DTYPE_COUNT));
	ck_assert_uint_eq(stfs_dtype_bits(STFS_DTYPE_COUNT), 0);
}
END_TEST

START_TEST(t_refused)
{
	static const char *const bad[] = {
		"F8_E4M3FN", "F8_E8M0FNU", "F128", "U128", "C128", "f32",
		" F32", "F32 ", "F3", "F322", "", "bf16", "Bool",
	};
	enum stfs_dtype dt;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_int_eq(stfs_dtype_from_name(bad[i], strlen(bad[i]),
						      &dt), -EINVAL);
	ck_assert_int_eq(stfs_dtype_from_name("F32\0", 4, &dt), -EINVAL);
	/* length-counted: the first 2 bytes of "F32" are "F3", no dtype */
	ck_assert_int_eq(stfs_dtype_from_name("F32", 2, &dt), -EINVAL);
	ck_assert_int_eq(stfs_dtype_from_name("F4x", 2, &dt), 0);
	ck_assert_int_eq(dt, STFS_DTYPE_F4);
}
END_TEST

Suite *dtype_suite(void)
{
	Suite *s = suite_create("dtype");
	TCase *tc = tcase_create("table");

	tcase_add_loop_test(tc, t_each, 0, 22);
	tcase_add_test(tc, t_count);
	tcase_add_test(tc, t_refused);
	suite_add_tcase(s, tc);
	return s;
}

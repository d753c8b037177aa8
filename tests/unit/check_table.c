/*
 * check_table.c: unit tests of the foreign-format tensor table
 * (format/table.c), the GGUF reader over memory (format/gguf.c) and the
 * block dequantizers (content/dequant.c): what the mount tests cannot
 * reach directly (strided views, allowed overlaps, limits).
 */
#include <errno.h>
#include <string.h>

#include <check.h>

#include "format.h"
#include "ggml.h"
#include "content.h"
#include "suites.h"

static struct stfs_rec rec(const char *name, enum stfs_dtype dt,
			   const uint64_t *shape, size_t rank, uint64_t b,
			   uint64_t e)
{
	struct stfs_rec r = { name, strlen(name), dt, "t", 0, rank, shape,
			      NULL, b, e, 0 };
	return r;
}

START_TEST(table_sizes_and_ranges)
{
	struct stfs_table *tb = stfs_table_new("test", "f");
	uint64_t s[2] = { 2, 3 };
	struct stfs_rec r = rec("a", STFS_DTYPE_F32, s, 2, 0, 24);
	struct stfs_error err;
	struct stfs_header *h;

	ck_assert_int_eq(stfs_table_add(tb, &r, 100, &err), 0);
	r = rec("b", STFS_DTYPE_F32, s, 2, 24, 40);      /* 16 != 24 */
	ck_assert_int_eq(stfs_table_add(tb, &r, 100, &err), -EINVAL);
	ck_assert_str_eq(err.rule, "size-match");
	r = rec("c", STFS_DTYPE_F32, s, 2, 90, 114);     /* past the end */
	ck_assert_int_eq(stfs_table_add(tb, &r, 100, &err), -EINVAL);
	ck_assert_str_eq(err.rule, "range");
	s[0] = UINT64_MAX / 2;
	r = rec("d", STFS_DTYPE_F32, s, 2, 0, 24);       /* overflow */
	ck_assert_int_eq(stfs_table_add(tb, &r, 100, &err), -EINVAL);
	ck_assert_str_eq(err.rule, "shape-overflow");
	ck_assert_int_eq(stfs_table_finish(tb, 0, &h, &err), 0);
	ck_assert_uint_eq(stfs_header_count(h), 1);
	ck_assert_str_eq(stfs_header_format(h), "test");
	ck_assert_ptr_nonnull(stfs_header_tensor(h, 0)->foreign);
	stfs_header_free(h);
}
END_TEST

START_TEST(table_overlap_and_views)
{
	uint64_t s[2] = { 3, 2 }, st[2] = { 1, 3 };  /* a transposed 2x3 */
	struct stfs_rec a = rec("a", STFS_DTYPE_F16, s, 2, 8, 20);
	struct stfs_rec b = rec("b", STFS_DTYPE_F16, s, 2, 8, 20);
	struct stfs_error err;
	struct stfs_header *h;
	struct stfs_table *tb;

	tb = stfs_table_new("test", "f");
	ck_assert_int_eq(stfs_table_add(tb, &a, 100, &err), 0);
	ck_assert_int_eq(stfs_table_add(tb, &b, 100, &err), 0);
	ck_assert_int_eq(stfs_table_finish(tb, 0, &h, &err), -EINVAL);
	ck_assert_str_eq(err.rule, "overlap");
	/* tied weights: allowed when the format says so; b a view */
	tb = stfs_table_new("test", "f");
	b.strides = st;
	ck_assert_int_eq(stfs_table_add(tb, &a, 100, &err), 0);
	ck_assert_int_eq(stfs_table_add(tb, &b, 100, &err), 0);
	ck_assert_int_eq(stfs_table_finish(tb, STFS_TABLE_OVERLAP, &h, &err),
			 0);
	ck_assert_uint_eq(stfs_tensor_bytes(stfs_header_tensor_by_name(h, 1)),
			  12);
	stfs_header_free(h);
	/* a view reaching past its storage */
	tb = stfs_table_new("test", "f");
	st[1] = 4;
	ck_assert_int_eq(stfs_table_add(tb, &b, 100, &err), -EINVAL);
	ck_assert_str_eq(err.rule, "view-bounds");
	stfs_table_free(tb);
}
END_TEST

START_TEST(table_view_elem_and_size)
{
	/* a transposed 2x3 of 16-byte elements (complex128: dtype NONE) */
	uint64_t s[2] = { 3, 2 }, st[2] = { 1, 3 }, big = (1ull << 61) - 1,
		 zero = 0, out;
	struct stfs_rec c = rec("c", STFS_DTYPE_NONE, s, 2, 0, 96);
	struct stfs_rec e = rec("e", STFS_DTYPE_U8, &big, 1, 96, 97);
	struct stfs_error err;
	struct stfs_header *h;
	struct stfs_table *tb;

	c.strides = st;
	c.type = "torch.complex128";
	tb = stfs_table_new("test", "f");
	ck_assert_int_eq(stfs_table_add(tb, &c, 100, &err), -EINVAL);
	ck_assert_str_eq(err.rule, "view-dtype");
	c.elem_bytes = 16;
	ck_assert_int_eq(stfs_table_add(tb, &c, 100, &err), 0);
	ck_assert_int_eq(stfs_table_finish(tb, 0, &h, &err), 0);
	ck_assert_uint_eq(stfs_tensor_bytes(stfs_header_tensor_by_name(h, 0)),
			  96);
	ck_assert_uint_eq(stfs_header_tensor_by_name(h, 0)->foreign->elem_bytes,
			  16);
	stfs_header_free(h);
	/* an expand() of one byte to 2^61-1: past the limit, whatever the
	 * reader does; 2^30 bytes of it are within it */
	e.strides = &zero;
	ck_assert(!stfs_rec_view_fits(&e, &out));
	ck_assert_uint_eq(out, big);
	tb = stfs_table_new("test", "f");
	ck_assert_int_eq(stfs_table_add(tb, &e, 100, &err), -EINVAL);
	ck_assert_str_eq(err.rule, "view-size");
	big = STFS_VIEW_BYTES_FLOOR;
	ck_assert(stfs_rec_view_fits(&e, &out));
	ck_assert_int_eq(stfs_table_add(tb, &e, 100, &err), 0);
	big++;
	ck_assert(!stfs_rec_view_fits(&e, &out));
	stfs_table_free(tb);
}
END_TEST

START_TEST(gguf_minimal)
{
	/* v3, one F32 [2] tensor "w" at 0, general.alignment 8 */
	static const unsigned char f[] =
		"GGUF\3\0\0\0" "\1\0\0\0\0\0\0\0" "\1\0\0\0\0\0\0\0"
		"\21\0\0\0\0\0\0\0general.alignment" "\4\0\0\0" "\10\0\0\0"
		"\1\0\0\0\0\0\0\0w" "\1\0\0\0" "\2\0\0\0\0\0\0\0"
		"\0\0\0\0" "\0\0\0\0\0\0\0\0"
		"\0\0\0\0\0\0" "\0\0\x80\x3f\0\0\0\x40";
	struct stfs_reader r;
	struct stfs_error err;
	struct stfs_header *h;
	const struct stfs_tensor *t;
	uint64_t hl;

	stfs_reader_mem(&r, f, sizeof(f) - 1, "m.gguf");
	ck_assert_int_eq(stfs_gguf_read(&r, &h, &hl, &err), 0);
	ck_assert_uint_eq(hl, 96);
	t = stfs_header_tensor(h, 0);
	ck_assert_int_eq(t->dtype, STFS_DTYPE_F32);
	ck_assert_uint_eq(t->begin, 96);
	ck_assert_uint_eq(t->end, 104);
	ck_assert_str_eq(t->foreign->type, "F32");
	ck_assert_str_eq(stfs_header_kv(h, 0)->value, "8");
	stfs_header_free(h);
	/* one byte short: the tensor runs past the end */
	stfs_reader_mem(&r, f, sizeof(f) - 2, "m.gguf");
	ck_assert_int_eq(stfs_gguf_read(&r, &h, &hl, &err), -EINVAL);
	ck_assert_str_eq(err.rule, "gguf-range");
	ck_assert_ptr_null(h);
}
END_TEST

START_TEST(dequant_q8_0)
{
	unsigned char b[34] = { 0x00, 0x3c };          /* d = 1.0 */
	float y[32];

	for (int i = 0; i < 32; i++)
		b[2 + i] = (unsigned char)(i - 16);
	stfs_dequant(STFS_Q8_0, b, 1, y);
	for (int i = 0; i < 32; i++)
		ck_assert_float_eq(y[i], (float)(i - 16));
}
END_TEST

Suite *table_suite(void)
{
	Suite *s = suite_create("table");
	TCase *tc = tcase_create("table");

	tcase_add_test(tc, table_sizes_and_ranges);
	tcase_add_test(tc, table_overlap_and_views);
	tcase_add_test(tc, table_view_elem_and_size);
	tcase_add_test(tc, gguf_minimal);
	tcase_add_test(tc, dequant_q8_0);
	suite_add_tcase(s, tc);
	return s;
}

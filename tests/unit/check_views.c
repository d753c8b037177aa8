/*
 * check_views.c: the views of a tensor: which dtypes get which views, the
 * NPY header bytes, the exact float32 conversion of BF16, F16 and the F8
 * formats (reference bit patterns: subnormals, extremes, infinities, NaN,
 * negative zero), and the names views get in the tree.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stfs/stfs.h"
#include "tree.h"
#include "suites.h"

#define NAN_BITS 0xffffffffu   /* "any NaN" in the table below */

static const struct {
	enum stfs_dtype dt;
	unsigned in;
	unsigned out;
} conv[] = {
	{ STFS_DTYPE_BF16, 0x3f80, 0x3f800000 },
	{ STFS_DTYPE_BF16, 0x8000, 0x80000000 },          /* -0 */
	{ STFS_DTYPE_BF16, 0x0001, 0x00010000 },          /* subnormal */
	{ STFS_DTYPE_BF16, 0x7f7f, 0x7f7f0000 },          /* max */
	{ STFS_DTYPE_BF16, 0x7f80, 0x7f800000 },          /* inf */
	{ STFS_DTYPE_BF16, 0xff80, 0xff800000 },          /* -inf */
	{ STFS_DTYPE_BF16, 0x7fc1, NAN_BITS },
	{ STFS_DTYPE_F16, 0x3c00, 0x3f800000 },           /* 1 */
	{ STFS_DTYPE_F16, 0xc000, 0xc0000000 },           /* -2 */
	{ STFS_DTYPE_F16, 0x0001, 0x33800000 },           /* 2^-24 */
	{ STFS_DTYPE_F16, 0x03ff, 0x387fc000 },           /* max subnormal */
	{ STFS_DTYPE_F16, 0x0400, 0x38800000 },           /* 2^-14 */
	{ STFS_DTYPE_F16, 0x7bff, 0x477fe000 },           /* 65504 */
	{ STFS_DTYPE_F16, 0x7c00, 0x7f800000 },
	{ STFS_DTYPE_F16, 0xfc00, 0xff800000 },
	{ STFS_DTYPE_F16, 0x8000, 0x80000000 },
	{ STFS_DTYPE_F16, 0x7e00, NAN_BITS },
	{ STFS_DTYPE_F16, 0x7c01, NAN_BITS },             /* signalling */
	{ STFS_DTYPE_F8_E4M3, 0x38, 0x3f800000 },
	{ STFS_DTYPE_F8_E4M3, 0x7e, 0x43e00000 },         /* 448 */
	{ STFS_DTYPE_F8_E4M3, 0xfe, 0xc3e00000 },
	{ STFS_DTYPE_F8_E4M3, 0x7f, NAN_BITS },
	{ STFS_DTYPE_F8_E4M3, 0xff, NAN_BITS },
	{ STFS_DTYPE_F8_E4M3, 0x78, 0x43800000 },         /* 256, not inf */
	{ STFS_DTYPE_F8_E4M3, 0x01, 0x3b000000 },         /* 2^-9 */
	{ STFS_DTYPE_F8_E4M3, 0x07, 0x3c600000 },         /* 7 * 2^-9 */
	{ STFS_DTYPE_F8_E4M3, 0x08, 0x3c800000 },         /* 2^-6 */
	{ STFS_DTYPE_F8_E4M3, 0x80, 0x80000000 },
	{ STFS_DTYPE_F8_E5M2, 0x3c, 0x3f800000 },
	{ STFS_DTYPE_F8_E5M2, 0x7b, 0x47600000 },         /* 57344 */
	{ STFS_DTYPE_F8_E5M2, 0x7c, 0x7f800000 },
	{ STFS_DTYPE_F8_E5M2, 0xfc, 0xff800000 },
	{ STFS_DTYPE_F8_E5M2, 0x7d, NAN_BITS },
	{ STFS_DTYPE_F8_E5M2, 0x01, 0x37800000 },         /* 2^-16 */
	{ STFS_DTYPE_F8_E5M2, 0x80, 0x80000000 },
	{ STFS_DTYPE_F8_E4M3FNUZ, 0x40, 0x3f800000 },
	{ STFS_DTYPE_F8_E4M3FNUZ, 0x00, 0x00000000 },
	{ STFS_DTYPE_F8_E4M3FNUZ, 0x80, NAN_BITS },       /* no -0 */
	{ STFS_DTYPE_F8_E4M3FNUZ, 0x7f, 0x43700000 },     /* 240 */
	{ STFS_DTYPE_F8_E4M3FNUZ, 0xff, 0xc3700000 },
	{ STFS_DTYPE_F8_E4M3FNUZ, 0x01, 0x3a800000 },     /* 2^-10 */
	{ STFS_DTYPE_F8_E5M2FNUZ, 0x40, 0x3f800000 },
	{ STFS_DTYPE_F8_E5M2FNUZ, 0x80, NAN_BITS },
	{ STFS_DTYPE_F8_E5M2FNUZ, 0x7f, 0x47600000 },     /* 57344 */
	{ STFS_DTYPE_F8_E5M2FNUZ, 0x7c, 0x47000000 },     /* 32768, not inf */
	{ STFS_DTYPE_F8_E5M2FNUZ, 0x01, 0x37000000 },     /* 2^-17 */
	{ STFS_DTYPE_F8_E8M0, 0x7f, 0x3f800000 },
	{ STFS_DTYPE_F8_E8M0, 0x80, 0x40000000 },
	{ STFS_DTYPE_F8_E8M0, 0x00, 0x00400000 },         /* 2^-127 */
	{ STFS_DTYPE_F8_E8M0, 0xfe, 0x7f000000 },         /* 2^127 */
	{ STFS_DTYPE_F8_E8M0, 0xff, NAN_BITS },
};

START_TEST(t_convert)
{
	int i = _i;
	unsigned char src[2] = { conv[i].in & 0xff, conv[i].in >> 8 };
	float f;
	unsigned bits;

	if (stfs_dtype_bits(conv[i].dt) == 8)
		src[0] = (unsigned char)conv[i].in;
	stfs_convert_f32(conv[i].dt, src, 1, &f);
	memcpy(&bits, &f, 4);
	if (conv[i].out == NAN_BITS)
		ck_assert_msg(isnan(f), "%s 0x%x gave 0x%08x, not NaN",
			      stfs_dtype_name(conv[i].dt), conv[i].in, bits);
	else
		ck_assert_msg(bits == conv[i].out, "%s 0x%x gave 0x%08x, "
			      "want 0x%08x", stfs_dtype_name(conv[i].dt),
			      conv[i].in, bits, conv[i].out);
}
END_TEST

/* Every BF16 and F16 bit pattern: sign kept, widening exact. */
START_TEST(t_convert_all16)
{
	unsigned char src[2];
	float f, g;

	for (unsigned v = 0; v < 65536; v++) {
		src[0] = v & 0xff;
		src[1] = v >> 8;
		stfs_convert_f32(STFS_DTYPE_BF16, src, 1, &f);
		stfs_convert_f32(STFS_DTYPE_F16, src, 1, &g);
		ck_assert(!!signbit(f) == !!(v & 0x8000));
		ck_assert(!!signbit(g) == !!(v & 0x8000));
		if ((v & 0x7c00) != 0x7c00) {
			/* finite: g is k * 2^e with |k| < 2^11 */
			float m = fabsf(g);
			int e;
			frexpf(m, &e);
			ck_assert(m == 0 ||
				  ldexpf(nearbyintf(ldexpf(m, 11 - e)),
					 e - 11) == m);
		} else {
			ck_assert(isnan(g) == ((v & 0x3ff) != 0));
		}
	}
}
END_TEST

START_TEST(t_views_for)
{
	unsigned both = STFS_TREE_NPY | STFS_TREE_F32;

	ck_assert_uint_eq(stfs_views_for(STFS_DTYPE_F32, both),
			  1u << STFS_VIEW_NPY);
	ck_assert_uint_eq(stfs_views_for(STFS_DTYPE_F16, both),
			  (1u << STFS_VIEW_NPY) | (1u << STFS_VIEW_F32) |
			  (1u << STFS_VIEW_F32_NPY));
	ck_assert_uint_eq(stfs_views_for(STFS_DTYPE_BF16, STFS_TREE_NPY), 0);
	ck_assert_uint_eq(stfs_views_for(STFS_DTYPE_BF16, both),
			  (1u << STFS_VIEW_F32) | (1u << STFS_VIEW_F32_NPY));
	ck_assert_uint_eq(stfs_views_for(STFS_DTYPE_F8_E4M3, STFS_TREE_F32),
			  1u << STFS_VIEW_F32);
	ck_assert_uint_eq(stfs_views_for(STFS_DTYPE_F4, both), 0);
	ck_assert_uint_eq(stfs_views_for(STFS_DTYPE_F6_E2M3, both), 0);
	ck_assert_uint_eq(stfs_views_for(STFS_DTYPE_C64, both),
			  1u << STFS_VIEW_NPY);
	ck_assert_uint_eq(stfs_views_for(STFS_DTYPE_I64, 0), 0);
	ck_assert_str_eq(stfs_npy_descr(STFS_DTYPE_BOOL), "|b1");
	ck_assert_str_eq(stfs_npy_descr(STFS_DTYPE_C64), "<c8");
	ck_assert_ptr_null(stfs_npy_descr(STFS_DTYPE_BF16));
}
END_TEST

static void check_npy(const char *descr, const uint64_t *shape, size_t rank,
		      const char *dict)
{
	char buf[256];
	size_t n = stfs_npy_header(descr, shape, rank, buf, sizeof(buf));

	ck_assert_uint_eq(n % 64, 0);
	ck_assert_uint_le(n, sizeof(buf));
	ck_assert_int_eq(memcmp(buf, "\x93NUMPY\x01\x00", 8), 0);
	ck_assert_uint_eq((unsigned char)buf[8] | (unsigned char)buf[9] << 8,
			  n - 10);
	ck_assert_int_eq(memcmp(buf + 10, dict, strlen(dict)), 0);
	for (size_t i = 10 + strlen(dict); i < n - 1; i++)
		ck_assert_int_eq(buf[i], ' ');
	ck_assert_int_eq(buf[n - 1], '\n');
	ck_assert_uint_eq(stfs_npy_header(descr, shape, rank, NULL, 0), n);
}

START_TEST(t_npy_header)
{
	uint64_t s2[] = { 2, 3 }, s1[] = { 5 },
		 big[] = { 18446744073709551615ULL, 0 };

	check_npy("<f4", s2, 2, "{'descr': '<f4', 'fortran_order': False, "
		  "'shape': (2, 3), }");
	check_npy("|b1", s1, 1, "{'descr': '|b1', 'fortran_order': False, "
		  "'shape': (5,), }");
	check_npy("<i8", NULL, 0, "{'descr': '<i8', 'fortran_order': False, "
		  "'shape': (), }");
	check_npy("<u2", big, 2, "{'descr': '<u2', 'fortran_order': False, "
		  "'shape': (18446744073709551615, 0), }");
}
END_TEST

START_TEST(t_npy_header_v2)
{
	size_t rank = 5000;
	uint64_t *shape = calloc(rank, sizeof(*shape));
	size_t n, hl;
	char *buf;

	for (size_t i = 0; i < rank; i++)
		shape[i] = 1000000000000ULL;
	n = stfs_npy_header("<f4", shape, rank, NULL, 0);
	ck_assert_uint_gt(n, 65535);
	buf = malloc(n);
	ck_assert_uint_eq(stfs_npy_header("<f4", shape, rank, buf, n), n);
	ck_assert_int_eq(memcmp(buf, "\x93NUMPY\x02\x00", 8), 0);
	hl = (unsigned char)buf[8] | (size_t)(unsigned char)buf[9] << 8 |
	     (size_t)(unsigned char)buf[10] << 16;
	ck_assert_uint_eq(hl + 12, n);
	ck_assert_uint_eq(n % 64, 0);
	free(buf);
	free(shape);
}
END_TEST

static const struct stfs_node *child(const struct stfs_tree *t, uint32_t d,
				     const char *name)
{
	int64_t n = stfs_tree_lookup(t, d, name, strlen(name));

	return n < 0 ? NULL : &t->nodes[n];
}

START_TEST(t_view_names)
{
	struct stfs_tree t;
	struct stfs_error err;
	unsigned npy = 1u << STFS_VIEW_NPY;
	char longname[300];
	struct stfs_name names[] = {
		{ "w", 1, npy, 0 }, { "w.npy", 5, npy, 0 },
		{ longname, 255, npy, 0 },
	};
	const struct stfs_node *n;

	memset(longname, 'x', sizeof(longname));
	longname[255] = 0;
	static const char *const sfx[STFS_TREE_SUFFIX_MAX] = { NULL, ".npy" };

	ck_assert_int_eq(stfs_tree_build(&t, names, 3, STFS_TREE_FLAT, sfx,
					 &err), 0);
	/* the tensor "w.npy" keeps its name; the view of "w" steps aside */
	ck_assert_ptr_nonnull(n = child(&t, 0, "w.npy"));
	ck_assert_uint_eq(n->extra, STFS_VIEW_RAW);
	ck_assert_uint_eq(n->entry, 1);
	ck_assert_ptr_nonnull(n = child(&t, 0, "w%v1.npy"));
	ck_assert_uint_eq(n->extra, STFS_VIEW_NPY);
	ck_assert_uint_eq(n->entry, 0);
	ck_assert_ptr_nonnull(n = child(&t, 0, "w.npy.npy"));
	ck_assert_uint_eq(n->entry, 1);
	/* a 255-byte name: its view is shortened, still under 256 */
	for (uint32_t i = 1; i < t.nnodes; i++) {
		ck_assert_uint_le(t.nodes[i].name_len, 255);
		if (t.nodes[i].entry == 2 && t.nodes[i].extra) {
			ck_assert_uint_eq(t.nodes[i].name_len, 255);
			ck_assert(strstr(t.nodes[i].name, "%h") != NULL);
			ck_assert_str_eq(t.nodes[i].name + 251, ".npy");
		}
	}
	ck_assert_uint_eq(t.nnodes, 1 + 3 + 3);
	stfs_tree_free(&t);
}
END_TEST

Suite *views_suite(void)
{
	Suite *s = suite_create("views");
	TCase *tc = tcase_create("views");

	tcase_add_loop_test(tc, t_convert, 0, sizeof(conv) / sizeof(conv[0]));
	tcase_add_test(tc, t_convert_all16);
	tcase_add_test(tc, t_views_for);
	tcase_add_test(tc, t_npy_header);
	tcase_add_test(tc, t_npy_header_v2);
	tcase_add_test(tc, t_view_names);
	suite_add_tcase(s, tc);
	return s;
}

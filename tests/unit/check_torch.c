/*
 * check_torch.c: the PyTorch checkpoint readers on hostile input, built
 * byte by byte here: zip files (compressed, encrypted, truncated, records
 * out of the file or overlapping, absurd counts, zip64), pickles (unknown
 * opcodes, calls of os.system and friends read as data, memo abuse, deep
 * nesting, stack floods), and tensors whose size, stride and offset
 * overflow or reach past their storage.  Every error must name the rule.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "torch.h"
#include "suites.h"

struct mbuf {
	unsigned char *p;
	size_t n, cap;
	int reads;
};

static void put(struct mbuf *b, const void *s, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
		ck_assert_ptr_nonnull(b->p);
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
}

static void put_le(struct mbuf *b, uint64_t v, unsigned n)
{
	unsigned char x[8];

	for (unsigned i = 0; i < n; i++)
		x[i] = (unsigned char)(v >> (8 * i));
	put(b, x, n);
}

static void put_s(struct mbuf *b, const char *s)
{
	put(b, s, strlen(s));
}

static int rd(void *ctx, void *out, size_t n, uint64_t off)
{
	struct mbuf *b = ctx;

	b->reads++;
	if (off > b->n || n > b->n - off)
		return -EIO;
	memcpy(out, b->p + off, n);
	return 0;
}

/* ---- zip building ---- */

struct rec {
	const char *name;
	const void *data;
	size_t n;
	unsigned method;
};

/* A zip of the records; lho_bump moves record 1's central offset; gap
 * bytes follow record 0's data (the offsets after it moved with them). */
static void make_zip_gap(struct mbuf *z, const struct rec *r, size_t nr,
			 long lho_bump, unsigned count_bump, size_t gap)
{
	uint64_t lho[8], cd, cdn;

	memset(z, 0, sizeof(*z));
	for (size_t i = 0; i < nr; i++) {
		lho[i] = z->n;
		put_le(z, 0x04034b50, 4);
		put_le(z, 20, 2);
		put_le(z, 0, 2);
		put_le(z, r[i].method, 2);
		put_le(z, 0, 4);
		put_le(z, 0, 4);          /* crc, not checked */
		put_le(z, r[i].n, 4);
		put_le(z, r[i].n, 4);
		put_le(z, strlen(r[i].name), 2);
		put_le(z, 0, 2);
		put_s(z, r[i].name);
		put(z, r[i].data, r[i].n);
		for (size_t k = 0; i == 0 && k < gap; k++)
			put(z, "\xab", 1);
	}
	cd = z->n;
	for (size_t i = 0; i < nr; i++) {
		put_le(z, 0x02014b50, 4);
		put_le(z, 20, 2);
		put_le(z, 20, 2);
		put_le(z, 0, 2);
		put_le(z, r[i].method, 2);
		put_le(z, 0, 4);
		put_le(z, 0, 4);
		put_le(z, r[i].n, 4);
		put_le(z, r[i].n, 4);
		put_le(z, strlen(r[i].name), 2);
		put_le(z, 0, 2);
		put_le(z, 0, 2);
		put_le(z, 0, 2);
		put_le(z, 0, 2);
		put_le(z, 0, 4);
		put_le(z, lho[i] + (i == 1 ? lho_bump : 0), 4);
		put_s(z, r[i].name);
	}
	cdn = z->n - cd;
	put_le(z, 0x06054b50, 4);
	put_le(z, 0, 4);
	put_le(z, nr + count_bump, 2);
	put_le(z, nr + count_bump, 2);
	put_le(z, cdn, 4);
	put_le(z, cd, 4);
	put_le(z, 0, 2);
}

static void make_zip(struct mbuf *z, const struct rec *r, size_t nr,
		     long lho_bump, unsigned count_bump)
{
	make_zip_gap(z, r, nr, lho_bump, count_bump, 0);
}

/* ---- pickle building ---- */

static void pk_str(struct mbuf *b, const char *s)
{
	put_s(b, "X");
	put_le(b, strlen(s), 4);
	put_s(b, s);
}

static void pk_int(struct mbuf *b, uint64_t v)
{
	put_s(b, "\x8a\x08");   /* LONG1 of 8 bytes */
	put_le(b, v, 8);
}

/* {"w": _rebuild_tensor_v2(('storage', torch.FloatStorage, '0', 'cpu',
 *  numel), off, (size,), (stride,), False, OrderedDict())} */
static void tensor_pickle(struct mbuf *b, uint64_t numel, uint64_t off,
			  uint64_t size, uint64_t stride)
{
	memset(b, 0, sizeof(*b));
	put_s(b, "\x80\x02}(");
	pk_str(b, "w");
	put_s(b, "ctorch._utils\n_rebuild_tensor_v2\n((");
	pk_str(b, "storage");
	put_s(b, "ctorch\nFloatStorage\n");
	pk_str(b, "0");
	pk_str(b, "cpu");
	pk_int(b, numel);
	put_s(b, "tQ");
	pk_int(b, off);
	pk_int(b, size);
	put_s(b, "\x85");
	pk_int(b, stride);
	put_s(b, "\x85\x89");
	put_s(b, "ccollections\nOrderedDict\n)R");
	put_s(b, "tRu.");
}

static int open_ckpt(struct mbuf *pkl, size_t storage_bytes,
		     struct stfs_torch **t, struct stfs_error *err)
{
	unsigned char *st = calloc(1, storage_bytes + 1);
	struct rec r[2] = {
		{"a/data.pkl", pkl->p, pkl->n, 0},
		{"a/data/0", st, storage_bytes, 0},
	};
	struct mbuf z;
	int rc;

	make_zip(&z, r, 2, 0, 0);
	rc = stfs_torch_open(rd, &z, z.n, 1, "t.pt", t, err);
	free(st);
	free(z.p);
	return rc;
}

START_TEST(zip_good)
{
	struct rec r[2] = {{"a/x", "hello", 5, 0}, {"a/y", "abc", 3, 0}};
	struct mbuf z;
	struct stfs_zip zz;
	struct stfs_error err;
	const struct stfs_zip_entry *e;

	make_zip(&z, r, 2, 0, 0);
	for (int local = 0; local < 2; local++) {
		ck_assert_int_eq(stfs_zip_open(rd, &z, z.n, local, "z", &zz,
					       &err), 0);
		ck_assert_uint_eq(zz.n, 2);
		e = stfs_zip_find(&zz, "a/y", 3);
		ck_assert_ptr_nonnull(e);
		ck_assert_int_eq(memcmp(z.p + e->data, "abc", 3), 0);
		stfs_zip_free(&zz);
	}
	free(z.p);
}
END_TEST

/* Each hostile zip and the rule its error must name. */
static const struct {
	unsigned method, count_bump;
	long lho_bump;
	int cut;
	const char *rule, *text;
} bad_zips[] = {
	{8, 0, 0, 0, "Z5 stored-only", "\"a/y\" is compressed"},
	{0, 0, 0, 1, "Z1 end-record", "truncated"},
	{0, 0, 1000000, 0, "Z6 record-bounds", "\"a/y\" starts past"},
	{0, 0, -10, 0, "Z6 record-bounds", "overlaps"},
	{0, 40000, 0, 0, "Z3 central-directory", "past the limits"},
	{0, 1, 0, 0, "Z3 central-directory", "3 entries"},
};

START_TEST(zip_bad)
{
	struct rec r[2] = {{"a/x", "hello", 5, 0},
			   {"a/y", "abc", 3, bad_zips[_i].method}};
	struct mbuf z;
	struct stfs_zip zz;
	struct stfs_error err;

	make_zip(&z, r, 2, bad_zips[_i].lho_bump, bad_zips[_i].count_bump);
	if (bad_zips[_i].cut)
		z.n -= 10;
	ck_assert_int_lt(stfs_zip_open(rd, &z, z.n, 1, "z", &zz, &err), 0);
	ck_assert_str_eq(err.rule, bad_zips[_i].rule);
	ck_assert_msg(strstr(err.msg, bad_zips[_i].text), "%s", err.msg);
	ck_assert_msg(strstr(err.msg, "z:") == err.msg, "%s", err.msg);
	free(z.p);
}
END_TEST

START_TEST(zip_remote_reads)
{
	/* the first bytes, the tail, one read of every record's local
	 * header (they lie within 1 MiB), data.pkl's read */
	struct mbuf p;
	struct stfs_torch *t;
	struct stfs_error err;
	unsigned char st[16] = {0};
	struct rec r[2];
	struct mbuf z;

	tensor_pickle(&p, 4, 0, 4, 1);
	r[0] = (struct rec){"a/data.pkl", p.p, p.n, 0};
	r[1] = (struct rec){"a/data/0", st, 16, 0};
	make_zip(&z, r, 2, 0, 0);
	z.reads = 0;
	ck_assert_int_eq(stfs_torch_open(rd, &z, z.n, 0, "t", &t, &err), 0);
	ck_assert_int_le(z.reads, 4);
	ck_assert_uint_eq(t->nt, 1);
	ck_assert_uint_eq(t->t[0].st_len, 16);
	stfs_torch_free(t);
	free(z.p);
	free(p.p);
}
END_TEST

START_TEST(zip_gap_refused_alike)
{
	/* 64 bytes after a/x's data: both paths refuse it (Z6); without
	 * the gap both place every record at the same offset */
	struct rec r[3] = {{"a/x", "hello", 5, 0}, {"a/y", "abc", 3, 0},
			   {"a/z", "0123456789", 10, 0}};
	struct stfs_zip zz[2];
	struct stfs_error err;
	struct mbuf z;

	make_zip_gap(&z, r, 3, 0, 0, 64);
	for (int local = 0; local < 2; local++) {
		ck_assert_int_eq(stfs_zip_open(rd, &z, z.n, local, "z", &zz[0],
					       &err), -EINVAL);
		ck_assert_str_eq(err.rule, "Z6 record-bounds");
		ck_assert_msg(strstr(err.msg, "\"a/x\"") &&
			      strstr(err.msg, "64 bytes") &&
			      strstr(err.msg, "gap"), "%s", err.msg);
	}
	free(z.p);
	make_zip(&z, r, 3, 0, 0);
	for (int local = 0; local < 2; local++)
		ck_assert_int_eq(stfs_zip_open(rd, &z, z.n, local, "z",
					       &zz[local], &err), 0);
	for (size_t i = 0; i < 3; i++) {
		ck_assert_uint_eq(zz[0].e[i].data, zz[1].e[i].data);
		ck_assert_int_eq(memcmp(z.p + zz[0].e[i].data, r[i].data,
					r[i].n), 0);
	}
	stfs_zip_free(&zz[0]);
	stfs_zip_free(&zz[1]);
	free(z.p);
}
END_TEST

START_TEST(byteorder_big_no_leak)
{
	/* refused (T1); under ASan the data.pkl buffer must not leak */
	struct mbuf p;
	struct stfs_torch *t;
	struct stfs_error err;
	unsigned char st[16] = {0};
	struct rec r[3];
	struct mbuf z;

	tensor_pickle(&p, 4, 0, 4, 1);
	r[0] = (struct rec){"a/data.pkl", p.p, p.n, 0};
	r[1] = (struct rec){"a/byteorder", "big", 3, 0};
	r[2] = (struct rec){"a/data/0", st, 16, 0};
	make_zip(&z, r, 3, 0, 0);
	for (int local = 0; local < 2; local++) {
		ck_assert_int_eq(stfs_torch_open(rd, &z, z.n, local, "t", &t,
						 &err), -EINVAL);
		ck_assert_str_eq(err.rule, "T1 checkpoint-layout");
		ck_assert_msg(strstr(err.msg, "byteorder"), "%s", err.msg);
	}
	free(z.p);
	free(p.p);
}
END_TEST

/* {KEY: tensor over storage SK, ...} of n (key opcodes, storage) */
static void keys_pickle(struct mbuf *b, const char *const *keys,
			const size_t *klen, const char *const *sks, size_t n)
{
	memset(b, 0, sizeof(*b));
	put_s(b, "\x80\x02}(");
	for (size_t i = 0; i < n; i++) {
		put(b, keys[i], klen[i]);
		put_s(b, "ctorch._utils\n_rebuild_tensor_v2\n((");
		pk_str(b, "storage");
		put_s(b, "ctorch\nFloatStorage\n");
		pk_str(b, sks[i]);
		pk_str(b, "cpu");
		pk_int(b, 1);
		put_s(b, "tQ");
		pk_int(b, 0);
		pk_int(b, 1);
		put_s(b, "\x85");
		pk_int(b, 1);
		put_s(b, "\x85\x89");
		put_s(b, "ccollections\nOrderedDict\n)RtR");
	}
	put_s(b, "u.");
}

START_TEST(dict_keys_as_python)
{
	/* 1, True, 1.0: one key "1" with the last value (storage 2);
	 * -0.0 and 0: "-0.0" with 0's (storage 1); 1.5 and 1e-05 named as
	 * repr() writes them; NaN left out with the reason */
	static const char *const keys[] = {
		"J\x01\x00\x00\x00", "\x88",
		"G\x3f\xf0\x00\x00\x00\x00\x00\x00",
		"G\x80\x00\x00\x00\x00\x00\x00\x00", "J\x00\x00\x00\x00",
		"G\x3f\xf8\x00\x00\x00\x00\x00\x00",
		"G\x3e\xe4\xf8\xb5\x88\xe3\x68\xf1",
		"G\x7f\xf8\x00\x00\x00\x00\x00\x00",
		"G\x44\x1a\xc4\xda\x03\xbc\x47\xe4"};
	static const size_t klen[] = {5, 1, 9, 9, 5, 9, 9, 9, 9};
	static const char *const sks[] = {"0", "1", "2", "0", "1", "3", "3",
					  "3", "3"};
	static const char *const want[] = {"1", "-0.0", "1.5", "1e-05",
					   "1.2345e+20"};
	static const char *const want_st[] = {"a/data/2", "a/data/1",
					      "a/data/3", "a/data/3",
					      "a/data/3"};
	unsigned char s4[4][4] = {{1}, {2}, {3}, {4}};
	struct rec r[5] = {{"a/data.pkl", NULL, 0, 0}, {"a/data/0", s4[0], 4, 0},
			   {"a/data/1", s4[1], 4, 0}, {"a/data/2", s4[2], 4, 0},
			   {"a/data/3", s4[3], 4, 0}};
	struct stfs_zip zz;
	struct stfs_torch *t;
	struct stfs_error err;
	struct mbuf p, z;

	keys_pickle(&p, keys, klen, sks, 9);
	r[0].data = p.p;
	r[0].n = p.n;
	make_zip(&z, r, 5, 0, 0);
	ck_assert_int_eq(stfs_torch_open(rd, &z, z.n, 1, "t", &t, &err), 0);
	ck_assert_int_eq(stfs_zip_open(rd, &z, z.n, 1, "t", &zz, &err), 0);
	ck_assert_uint_eq(t->nt, 5);
	for (size_t i = 0; i < 5; i++) {
		const struct stfs_zip_entry *e =
			stfs_zip_find(&zz, want_st[i], strlen(want_st[i]));

		ck_assert_str_eq(t->t[i].name, want[i]);
		ck_assert_uint_eq(t->t[i].st_begin, e->data);
	}
	ck_assert_uint_eq(t->no, 1);
	ck_assert_int_eq(t->o[0].ref, 2);
	ck_assert_str_eq(t->o[0].cls, "a dict entry whose key is a float NaN");
	stfs_torch_free(t);
	stfs_zip_free(&zz);
	free(z.p);
	free(p.p);
}
END_TEST

START_TEST(tensor_ok)
{
	struct mbuf p;
	struct stfs_torch *t;
	struct stfs_error err;

	tensor_pickle(&p, 10, 2, 4, 2);   /* elements 2,4,6,8 of 10 */
	ck_assert_int_eq(open_ckpt(&p, 40, &t, &err), 0);
	ck_assert_uint_eq(t->nt, 1);
	ck_assert_str_eq(t->t[0].name, "w");
	ck_assert_int_eq(t->t[0].dtype, STFS_DTYPE_F32);
	ck_assert_uint_eq(t->t[0].offset, 2);
	ck_assert_int_eq(t->t[0].contiguous, 0);
	stfs_torch_free(t);
	free(p.p);
}
END_TEST

static const struct {
	uint64_t numel, off, size, stride, bytes;
	const char *rule;
} bad_tensors[] = {
	{10, 2, 5, 2, 40, "T3 tensor-bounds"},             /* reaches 10 */
	{10, 0, 11, 1, 40, "T3 tensor-bounds"},
	{10, UINT64_MAX - 1, 2, 1, 40, "T3 tensor-bounds"},  /* not an int64 */
	{10, 0, 1ull << 62, 4, 40, "T3 tensor-bounds"},     /* bytes overflow */
	{10, 0, 2, 1ull << 62, 40, "T3 tensor-bounds"},
	{10, 0, 2, 1, 36, "T2 storage"},                   /* record short */
	{1ull << 62, 0, 2, 1, 40, "T2 storage"},
};

START_TEST(tensor_bad)
{
	struct mbuf p;
	struct stfs_torch *t;
	struct stfs_error err;
	int rc;

	tensor_pickle(&p, bad_tensors[_i].numel, bad_tensors[_i].off,
		      bad_tensors[_i].size, bad_tensors[_i].stride);
	rc = open_ckpt(&p, bad_tensors[_i].bytes, &t, &err);
	ck_assert_int_lt(rc, 0);
	ck_assert_msg(err.rule != NULL, "%s", err.msg);
	/* an offset past int64 is no int at all: a rebuild-args error */
	if (bad_tensors[_i].off > INT64_MAX)
		ck_assert_str_eq(err.rule, "P6 torch-rebuild");
	else
		ck_assert_str_eq(err.rule, bad_tensors[_i].rule);
	ck_assert_msg(strstr(err.msg, "t.pt"), "%s", err.msg);
	free(p.p);
}
END_TEST

static int run(const char *s, size_t n, int torch, struct stfs_error *err,
	       struct stfs_pk_val **root, struct stfs_pk **pk)
{
	return stfs_pk_run((const unsigned char *)s, n, 100, torch, "p.pkl",
			   pk, root, err);
}

START_TEST(pickle_calls_are_data)
{
	/* os.system('touch x'), eval, subprocess, builtins.exec: objects */
	static const char s[] =
		"\x80\x02(cos\nsystem\nX\x07\x00\x00\x00" "touch x\x85R"
		"cbuiltins\neval\nX\x01\x00\x00\x00" "1\x85R"
		"csubprocess\nPopen\n)\x81"
		"\x8c\x08" "builtins\x8c\x04" "exec\x93)Rl.";
	struct stfs_pk *pk;
	struct stfs_pk_val *root;
	struct stfs_error err;

	ck_assert_int_eq(run(s, sizeof(s) - 1, 1, &err, &root, &pk), 0);
	ck_assert_int_eq(root->kind, STFS_PK_LIST);
	ck_assert_uint_eq(root->u.seq.count, 4);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(root->u.seq.items[i]->kind, STFS_PK_OBJECT);
	ck_assert_int_eq(memcmp(root->u.seq.items[0]->u.g.nm, "system", 6), 0);
	stfs_pk_free(pk);
}
END_TEST

static const struct {
	const char *s;
	size_t n;
	const char *rule, *text;
} bad_pickles[] = {
	{"\x80\x02\xff.", 4, "P1 opcode", "byte 102"},
	{"\x80\x09N.", 4, "P1 opcode", "protocol"},
	{"\x80\x02Nr\xff\xff\xff\xff.", 9, "P3 memo", "limit"},
	{"\x80\x02h\x05.", 4, "P3 memo", "never put"},
	{"\x80\x02X\xff\xff\xff\x7f", 7, "P5 truncated", "past the end"},
	{"\x80\x02N", 3, "P5 truncated", "past the end"},
	{"\x80\x02.", 3, "P2 stack", "empty stack"},
	{"\x80\x02Nu.", 4, "P2 stack", "no mark"},
	{"\x80\x02]NNs.", 6, "P2 stack", "not a container"},
	{"\x80\x02\x82\x01.", 5, "P1 opcode", "extension"},
	{"\x80\x02(X\x01\x00\x00\x00" "aQ.", 12, "P7 torch-storage", "persistent"},
	/* a FRAME of 2^40 bytes in a 13-byte pickle (torch.load: truncated) */
	{"\x80\x04\x95\x00\x00\x00\x00\x00\x01\x00\x00}.", 13,
	 "P5 truncated", "FRAME longer"},
	{"\x80\x04\x95\x03\x00\x00\x00\x00\x00\x00\x00}.", 13,
	 "P5 truncated", "FRAME longer"},
};

START_TEST(pickle_bad)
{
	struct stfs_pk *pk;
	struct stfs_pk_val *root;
	struct stfs_error err;

	ck_assert_int_lt(run(bad_pickles[_i].s, bad_pickles[_i].n, 1, &err,
			     &root, &pk), 0);
	ck_assert_str_eq(err.rule, bad_pickles[_i].rule);
	ck_assert_msg(strstr(err.msg, bad_pickles[_i].text), "%s", err.msg);
	ck_assert_msg(strstr(err.msg, "p.pkl"), "%s", err.msg);
	stfs_pk_free(pk);
}
END_TEST

START_TEST(pickle_floods)
{
	/* 2M marks: the stack limit; 2^21 nested lists: the walk's depth */
	size_t n = 2u << 20;
	char *s = malloc(n + 8);
	struct stfs_pk *pk;
	struct stfs_pk_val *root;
	struct stfs_error err;

	memcpy(s, "\x80\x02", 2);
	memset(s + 2, '(', n);
	memcpy(s + 2 + n, "N.", 2);
	ck_assert_int_lt(run(s, n + 4, 1, &err, &root, &pk), 0);
	ck_assert_str_eq(err.rule, "P4 limits");
	stfs_pk_free(pk);
	free(s);
}
END_TEST

START_TEST(deep_nesting)
{
	/* {"x": [[[[...]]]]} 1000 deep: refused by the walk */
	struct mbuf p = {0};
	struct stfs_torch *t;
	struct stfs_error err;

	put_s(&p, "\x80\x02}");
	pk_str(&p, "x");
	for (int i = 0; i < 1000; i++)
		put_s(&p, "]");
	for (int i = 0; i < 999; i++)
		put_s(&p, "a");
	put_s(&p, "s.");
	ck_assert_int_lt(open_ckpt(&p, 0, &t, &err), 0);
	ck_assert_str_eq(err.rule, "T4 limits");
	ck_assert_msg(strstr(err.msg, "deeper"), "%s", err.msg);
	free(p.p);
}
END_TEST

START_TEST(memo_blowup)
{
	/* a list holding itself twice, 40 levels: 2^40 paths, one budget */
	struct mbuf p = {0};
	struct stfs_torch *t;
	struct stfs_error err;

	put(&p, "\x80\x02)q\x00\x30", 6);
	for (int i = 0; i < 40; i++)
		put(&p, "h\x00h\x00\x86q\x00\x30", 8);
	put(&p, "h\x00.", 3);
	ck_assert_int_lt(open_ckpt(&p, 0, &t, &err), 0);
	ck_assert_str_eq(err.rule, "T4 limits");
	free(p.p);
}
END_TEST

Suite *torch_suite(void)
{
	Suite *s = suite_create("torch");
	TCase *tc = tcase_create("torch");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, zip_good);
	tcase_add_loop_test(tc, zip_bad, 0,
			    sizeof(bad_zips) / sizeof(bad_zips[0]));
	tcase_add_test(tc, zip_remote_reads);
	tcase_add_test(tc, zip_gap_refused_alike);
	tcase_add_test(tc, byteorder_big_no_leak);
	tcase_add_test(tc, dict_keys_as_python);
	tcase_add_test(tc, tensor_ok);
	tcase_add_loop_test(tc, tensor_bad, 0,
			    sizeof(bad_tensors) / sizeof(bad_tensors[0]));
	tcase_add_test(tc, pickle_calls_are_data);
	tcase_add_loop_test(tc, pickle_bad, 0,
			    sizeof(bad_pickles) / sizeof(bad_pickles[0]));
	tcase_add_test(tc, pickle_floods);
	tcase_add_test(tc, deep_nesting);
	tcase_add_test(tc, memo_blowup);
	suite_add_tcase(s, tc);
	return s;
}

/*
 * check_names.c: the mapping from tensor names to paths (docs/naming.md):
 * escaping of one component, and the tree over awkward sets of names.
 * Every tensor must get exactly one path, every component must be a valid
 * file name of at most 255 bytes, and the result must not depend on order.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stfs/stfs.h"
#include "format.h"
#include "tree.h"
#include "suites.h"

static const char *comp(const char *s, size_t len, int esc_dots)
{
	static char out[STFS_NAME_MAX + 1];

	stfs_name_component(s, len, esc_dots, out);
	return out;
}

#define C(lit) comp(lit, sizeof(lit) - 1, 0)

START_TEST(t_component)
{
	ck_assert_str_eq(C("weight"), "weight");
	ck_assert_str_eq(C(""), "%");
	ck_assert_str_eq(C("."), "%2E");
	ck_assert_str_eq(C(".."), "%2E%2E");
	ck_assert_str_eq(C("..."), "...");
	ck_assert_str_eq(C("a/b"), "a%2Fb");
	ck_assert_str_eq(C("/"), "%2F");
	ck_assert_str_eq(C("100%"), "100%25");
	ck_assert_str_eq(C("a\0b"), "a%00b");
	ck_assert_str_eq(C("\x1b[31m"), "%1B[31m");
	ck_assert_str_eq(C("tab\there\x7f"), "tab%09here%7F");
	ck_assert_str_eq(C("%header.json"), "%25header.json");
	ck_assert_str_eq(C("sp ace \xc3\xa9"), "sp ace \xc3\xa9");
	ck_assert_str_eq(comp("a.b", 3, 1), "a%2Eb");
}
END_TEST

START_TEST(t_long_component)
{
	char a[300], b[300], e[256];
	char ra[STFS_NAME_MAX + 1], rb[STFS_NAME_MAX + 1];
	size_t la, lb;

	memset(a, 'x', sizeof(a));
	memcpy(b, a, sizeof(b));
	b[299] = 'y';
	la = stfs_name_component(a, sizeof(a), 0, ra);
	lb = stfs_name_component(b, sizeof(b), 0, rb);
	ck_assert_uint_le(la, STFS_NAME_MAX);
	ck_assert_uint_le(lb, STFS_NAME_MAX);
	ck_assert_str_ne(ra, rb);
	ck_assert_ptr_nonnull(strstr(ra, "%h"));
	/* exactly 255 bytes stays literal, 256 does not */
	ck_assert_uint_eq(stfs_name_component(a, 255, 0, ra), 255);
	ck_assert_ptr_null(strchr(ra, '%'));
	/* 128 x "é" is 256 bytes: shortened on a character boundary */
	for (int i = 0; i < 128; i++)
		memcpy(e + 2 * i, "\xc3\xa9", 2);
	la = stfs_name_component(e, 256, 0, ra);
	ck_assert_uint_le(la, STFS_NAME_MAX);
	ck_assert(stfs_utf8_valid(ra, la, NULL));
	/* 100 control bytes escape to 300: shortened between escapes */
	memset(a, 1, 100);
	la = stfs_name_component(a, 100, 0, ra);
	ck_assert_uint_le(la, STFS_NAME_MAX);
	ck_assert_int_eq(ra[strstr(ra, "%h") - ra - 3], '%');
}
END_TEST

/* Build a tree; return each name's path in out[] (caller frees). */
static void build(struct stfs_tree *t, const char *const *names,
		  const size_t *lens, size_t n, unsigned flags, char **out)
{
	struct stfs_name *nm = calloc(n + 1, sizeof(*nm));
	struct stfs_error err;

	for (size_t i = 0; i < n; i++) {
		nm[i].s = names[i];
		nm[i].len = lens ? lens[i] : strlen(names[i]);
	}
	ck_assert_int_eq(stfs_tree_build(t, nm, n, flags, NULL, &err), 0);
	for (size_t i = 0; i < n; i++)
		out[i] = stfs_tree_path(t, t->entry_node[i]);
	free(nm);
}

/* Every path resolves, by lookups from the root, to its own entry. */
static void check_reachable(const struct stfs_tree *t, char **paths,
			    size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char *p = strdup(paths[i]), *save, *c;
		int64_t node = 0;

		for (c = strtok_r(p, "/", &save); c;
		     c = strtok_r(NULL, "/", &save)) {
			ck_assert_uint_le(strlen(c), STFS_NAME_MAX);
			ck_assert_str_ne(c, ".");
			ck_assert_str_ne(c, "..");
			node = stfs_tree_lookup(t, (uint32_t)node, c,
						strlen(c));
			ck_assert_int_ge(node, 0);
		}
		ck_assert_uint_eq(t->nodes[node].entry, i);
		ck_assert_str_ne(paths[i], STFS_HEADER_FILE);
		free(p);
		for (size_t k = 0; k < i; k++)
			ck_assert_str_ne(paths[i], paths[k]);
	}
}

START_TEST(t_tree_basic)
{
	const char *names[] = {
		"model.layers.0.mlp.up_proj.weight",
		"model.layers.0.mlp.up_proj.bias",
		"model.embed_tokens.weight",
		"lm_head.weight",
	};
	char *p[4];
	struct stfs_tree t;

	build(&t, names, NULL, 4, 0, p);
	ck_assert_str_eq(p[0], "model/layers/0/mlp/up_proj/weight");
	ck_assert_str_eq(p[2], "model/embed_tokens/weight");
	ck_assert_str_eq(p[3], "lm_head/weight");
	check_reachable(&t, p, 4);
	/* root: lm_head, model */
	ck_assert_uint_eq(t.nodes[0].count, 2);
	ck_assert_uint_eq(t.nodes[0].subdirs, 2);
	ck_assert_int_eq(stfs_tree_lookup(&t, 0, "nope", 4), -ENOENT);
	ck_assert_int_eq(stfs_tree_lookup(&t, t.entry_node[3], "x", 1),
			 -ENOTDIR);
	for (int i = 0; i < 4; i++)
		free(p[i]);
	stfs_tree_free(&t);
	build(&t, names, NULL, 4, STFS_TREE_FLAT, p);
	ck_assert_str_eq(p[0], "model.layers.0.mlp.up_proj.weight");
	check_reachable(&t, p, 4);
	for (int i = 0; i < 4; i++)
		free(p[i]);
	stfs_tree_free(&t);
}
END_TEST

/* The awkward names of RULES.md ambiguity 6, all in one file. */
static const char *const awkward[] = {
	"a.b", "a.b.c", "a", "a/b", "", ".", "..", "../x", "a..b", ".a", "a.",
	"/", "//", "a\0b", "A.b", "\xc3\xa9", "e\xcc\x81", "%header.json",
	"__header__", "x.%self", "x.y", "\x1b]0;title\x07", "%", "%25",
};
static const size_t awkward_len[] = {
	3, 5, 1, 3, 0, 1, 2, 4, 4, 2, 2, 1, 2, 3, 3, 2, 3, 12, 10, 7, 3, 10,
	1, 3,
};
#define NAWK (sizeof(awkward) / sizeof(awkward[0]))

START_TEST(t_tree_awkward)
{
	char *p[NAWK];
	struct stfs_tree t;

	ck_assert_uint_eq(NAWK, sizeof(awkward_len) / sizeof(size_t));
	build(&t, awkward, awkward_len, NAWK, 0, p);
	ck_assert_str_eq(p[0], "a/b/%self");
	ck_assert_str_eq(p[1], "a/b/c");
	ck_assert_str_eq(p[2], "a/%self");
	ck_assert_str_eq(p[3], "a%2Fb");
	ck_assert_str_eq(p[4], "%/%self");      /* "" beside ".", ".." */
	ck_assert_str_eq(p[5], "%/%/%self");
	ck_assert_str_eq(p[10], "a/%/%self");   /* "a." beside "a..b" */
	ck_assert_str_eq(p[6], "%/%/%");
	ck_assert_str_eq(p[7], "%/%/%2Fx");
	ck_assert_str_eq(p[8], "a/%/b");
	ck_assert_str_eq(p[13], "a%00b");
	ck_assert_str_eq(p[17], "%25header/json");
	ck_assert_str_eq(p[21], "%1B]0;title%07");
	check_reachable(&t, p, NAWK);
	for (size_t i = 0; i < NAWK; i++)
		free(p[i]);
	stfs_tree_free(&t);

	build(&t, awkward, awkward_len, NAWK, STFS_TREE_FLAT, p);
	ck_assert_str_eq(p[0], "a.b");
	ck_assert_str_eq(p[5], "%2E");
	ck_assert_str_eq(p[6], "%2E%2E");
	ck_assert_str_eq(p[7], "..%2Fx");
	ck_assert_str_eq(p[17], "%25header.json");
	check_reachable(&t, p, NAWK);
	for (size_t i = 0; i < NAWK; i++)
		free(p[i]);
	stfs_tree_free(&t);
}
END_TEST

/* The same names in another order give the same paths and inodes. */
START_TEST(t_tree_order)
{
	const char *rev[NAWK];
	size_t revlen[NAWK];
	char *p[NAWK], *q[NAWK];
	struct stfs_tree t, u;

	for (size_t i = 0; i < NAWK; i++) {
		rev[i] = awkward[NAWK - 1 - i];
		revlen[i] = awkward_len[NAWK - 1 - i];
	}
	build(&t, awkward, awkward_len, NAWK, 0, p);
	build(&u, rev, revlen, NAWK, 0, q);
	for (size_t i = 0; i < NAWK; i++) {
		ck_assert_str_eq(p[i], q[NAWK - 1 - i]);
		ck_assert_uint_eq(t.entry_node[i], u.entry_node[NAWK - 1 - i]);
		free(p[i]);
		free(q[NAWK - 1 - i]);
	}
	stfs_tree_free(&t);
	stfs_tree_free(&u);
}
END_TEST

/* Deep and long names: at most STFS_MAX_DEPTH levels, short components. */
START_TEST(t_tree_deep_long)
{
	size_t n1 = 1000, n2 = 100000;
	char *deep = malloc(n1), *big = malloc(n2);
	const char *names[3];
	size_t lens[3];
	char *p[3];
	struct stfs_tree t;
	int depth = 0;

	for (size_t i = 0; i < n1; i++)
		deep[i] = (i % 2) ? '.' : 'd';
	memset(big, 'z', n2);
	big[5000] = '.';
	names[0] = deep;
	lens[0] = n1;
	names[1] = big;
	lens[1] = n2;
	names[2] = big;
	lens[2] = n2 - 1;
	build(&t, names, lens, 3, 0, p);
	for (char *c = p[0]; *c; c++)
		depth += *c == '/';
	ck_assert_int_eq(depth + 1, STFS_MAX_DEPTH);
	ck_assert_ptr_nonnull(strstr(p[0], "%2E"));
	check_reachable(&t, p, 3);
	for (int i = 0; i < 3; i++)
		free(p[i]);
	stfs_tree_free(&t);
	free(deep);
	free(big);
}
END_TEST

START_TEST(t_tree_empty)
{
	struct stfs_tree t;

	ck_assert_int_eq(stfs_tree_build(&t, NULL, 0, 0, NULL, NULL), 0);
	ck_assert_uint_eq(t.nnodes, 1);
	ck_assert_uint_eq(t.nodes[0].count, 0);
	stfs_tree_free(&t);
}
END_TEST

START_TEST(t_quote)
{
	char out[16], big[64];

	ck_assert_str_eq(stfs_quote("a\"b\\\n", 5, out, sizeof(out)),
			 "a\\\"b\\\\\\x0a");
	stfs_quote("0123456789abcdefghij", 20, out, sizeof(out));
	ck_assert_str_eq(out, "0123456789ab...");
	/* never cuts a UTF-8 sequence */
	stfs_quote("0123456789\xc3\xa9\xc3\xa9\xc3\xa9", 16, out, 14);
	ck_assert(stfs_utf8_valid(out, strlen(out), NULL));
	/* C1 (CSI) and bidirectional controls, bytes of no sequence (a
	 * lone byte, an overlong '/', a surrogate); text kept */
	ck_assert_str_eq(stfs_quote("a\xc2\x9b" "b\xe2\x80\xae" "c\xff\xc3\xa9",
				    11, big, sizeof(big)),
			 "a\\u009bb\\u202ec\\xff\xc3\xa9");
	ck_assert_str_eq(stfs_quote("\xc0\xaf\xed\xa0\x80\xe2\x81\xa6\xd8\x9c",
				    10, big, sizeof(big)),
			 "\\xc0\\xaf\\xed\\xa0\\x80\\u2066\\u061c");
	/* a server's own words: controls of every kind made spaces, bytes
	 * of no sequence '?', text kept */
	snprintf(big, sizeof(big), "a\x1b[2J\xc2\x9b" "b\xe2\x80\xae" "c\xff\xc3\xa9\x07");
	stfs_text_clean(big);
	ck_assert_str_eq(big, "a [2J b c?\xc3\xa9 ");
	/* cut before a sequence, never inside: */
	stfs_quote("0123456789\xe2\x80\xae", 13, out, 16);
	ck_assert_str_eq(out, "0123456789...");
}
END_TEST

/* The key names clash by: canonical decomposition, ASCII case. */
START_TEST(t_name_key)
{
	static const char *const same[][2] = {
		{ "caf\xc3\xa9.json", "cafe\xcc\x81.json" },   /* NFC, NFD */
		{ "CAF\xc3\x89.JSON", "cafe\xcc\x81.json" },   /* and case */
		{ "\xe2\x84\xab", "A\xcc\x8a" },   /* ANGSTROM SIGN, A + ring */
		{ "\xed\x95\x9c", "\xe1\x84\x92\xe1\x85\xa1\xe1\x86\xab" }, /* Hangul */
		/* marks in canonical order: dot below (220) before acute */
		{ "a\xcc\x81\xcc\xa3", "a\xcc\xa3\xcc\x81" },
		{ "\xe1\xba\xa5", "a\xcc\x82\xcc\x81" },  /* full, recursive */
		/* an ASCII letter a decomposition shows folds too */
		{ "\xc3\xa9", "\xc3\x89" },
	};
	static const char *const differ[][2] = {
		{ "\xc3\xb8", "\xc3\x98" },        /* case beyond ASCII */
		{ "\xef\xac\x81", "fi" },           /* a compatibility one */
		{ "a\xff", "a\xc3\xbf" },            /* a raw byte, U+00FF */
	};

	for (size_t i = 0; i < sizeof(same) / sizeof(*same); i++) {
		char *a = stfs_name_key(same[i][0], strlen(same[i][0]));
		char *b = stfs_name_key(same[i][1], strlen(same[i][1]));

		ck_assert_ptr_nonnull(a);
		ck_assert_ptr_nonnull(b);
		ck_assert_msg(!strcmp(a, b), "pair %zu", i);
		free(a);
		free(b);
	}
	for (size_t i = 0; i < sizeof(differ) / sizeof(*differ); i++) {
		char *a = stfs_name_key(differ[i][0], strlen(differ[i][0]));
		char *b = stfs_name_key(differ[i][1], strlen(differ[i][1]));

		ck_assert_msg(strcmp(a, b), "pair %zu", i);
		free(a);
		free(b);
	}
}
END_TEST

Suite *names_suite(void)
{
	Suite *s = suite_create("names");
	TCase *tc = tcase_create("mapping");

	tcase_add_test(tc, t_component);
	tcase_add_test(tc, t_name_key);
	tcase_add_test(tc, t_long_component);
	tcase_add_test(tc, t_tree_basic);
	tcase_add_test(tc, t_tree_awkward);
	tcase_add_test(tc, t_tree_order);
	tcase_add_test(tc, t_tree_deep_long);
	tcase_add_test(tc, t_tree_empty);
	tcase_add_test(tc, t_quote);
	suite_add_tcase(s, tc);
	return s;
}

/*
 * check_repo.c: %repo/ (model/repo.c, source/repo.c): the rules a path
 * keeps to be shown, which files are small, and the tree a directory
 * becomes: folders, sizes, bytes, the clashes left out, and -o repo's
 * swap of the repository and the tensors' root; the parallel loop its
 * small files are fetched with (format/par.c).
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stfs/stfs.h"
#include "format.h"
#include "source.h"
#include "rlist.h"
#include "suites.h"

/* stfs_parallel_for: every job run once, whatever the width */
static void count_job(void *ctx, size_t i)
{
	__atomic_fetch_add(&((int *)ctx)[i], 1, __ATOMIC_RELAXED);
}

START_TEST(t_parallel)
{
	static const unsigned widths[] = { 0, 1, 2, 7, 128, 100000 };
	int *seen = calloc(1000, sizeof(*seen));

	ck_assert_ptr_nonnull(seen);
	for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); w++) {
		memset(seen, 0, 1000 * sizeof(*seen));
		stfs_parallel_for(1000, widths[w], count_job, seen);
		for (size_t i = 0; i < 1000; i++)
			ck_assert_int_eq(seen[i], 1);
		stfs_parallel_for(0, widths[w], count_job, seen);
		stfs_parallel_for(1, widths[w], count_job, seen);
		ck_assert_int_eq(seen[0], 2);
	}
	free(seen);
}
END_TEST

START_TEST(t_path_bad)
{
	char longname[300], longpath[5000];

	ck_assert_ptr_null(stfs_repo_path_bad("config.json"));
	ck_assert_ptr_null(stfs_repo_path_bad("1_Pooling/config.json"));
	ck_assert_ptr_null(stfs_repo_path_bad("..a/b.."));
	ck_assert_ptr_nonnull(stfs_repo_path_bad(""));
	ck_assert_ptr_nonnull(stfs_repo_path_bad("/etc/passwd"));
	ck_assert_ptr_nonnull(stfs_repo_path_bad("a//b"));
	ck_assert_ptr_nonnull(stfs_repo_path_bad("a/"));
	ck_assert_ptr_nonnull(stfs_repo_path_bad("../x"));
	ck_assert_ptr_nonnull(stfs_repo_path_bad("a/./b"));
	ck_assert_ptr_nonnull(stfs_repo_path_bad("a/.."));
	ck_assert_ptr_nonnull(stfs_repo_path_bad("a\x01" "b"));
	ck_assert_ptr_nonnull(stfs_repo_path_bad("del\x7f"));
	memset(longname, 'x', 256);
	longname[256] = '\0';
	ck_assert_ptr_nonnull(stfs_repo_path_bad(longname));
	longname[255] = '\0';
	ck_assert_ptr_null(stfs_repo_path_bad(longname));
	for (size_t i = 0; i < 4200; i += 2) {
		longpath[i] = 'a';
		longpath[i + 1] = '/';
	}
	longpath[4199] = '\0';
	ck_assert_ptr_nonnull(stfs_repo_path_bad(longpath));
}
END_TEST

START_TEST(t_small)
{
	ck_assert(stfs_repo_is_small("config.json", 100));
	ck_assert(stfs_repo_is_small("tokenizer.model", 500000));
	ck_assert(stfs_repo_is_small("README.md", 1u << 20));
	ck_assert(!stfs_repo_is_small("README.md", (1u << 20) + 1));
	ck_assert(!stfs_repo_is_small("model.safetensors", 100));
	ck_assert(!stfs_repo_is_small("pytorch_model.bin", 100));
	ck_assert(!stfs_repo_is_small("onnx/model.onnx_data", 100));
	ck_assert(!stfs_repo_is_small("x.gguf", 10));
}
END_TEST

static void put(const char *dir, const char *rel, const char *text)
{
	char *p, *slash;
	FILE *f;

	ck_assert_int_ge(asprintf(&p, "%s/%s", dir, rel), 0);
	for (slash = strchr(p + strlen(dir) + 1, '/'); slash;
	     slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		mkdir(p, 0700);
		*slash = '/';
	}
	ck_assert_ptr_nonnull(f = fopen(p, "wb"));
	fputs(text, f);
	fclose(f);
	free(p);
}

static int64_t walk(const struct stfs_model *m, uint32_t from,
		    const char *path)
{
	char *dup = strdup(path), *save = NULL;
	int64_t n = from;

	for (char *c = strtok_r(dup, "/", &save); c && n >= 0;
	     c = strtok_r(NULL, "/", &save))
		n = stfs_model_lookup(m, (uint32_t)n, c, strlen(c));
	free(dup);
	return n;
}

static void read_is(const struct stfs_model *m, int64_t node,
		    const char *want)
{
	struct stfs_content *c;
	char buf[64] = "";

	ck_assert_int_ge(node, 0);
	ck_assert_int_eq(stfs_model_content(m, (uint32_t)node, &c), 0);
	ck_assert_int_eq(stfs_content_pread(c, buf, sizeof(buf) - 1, 0),
			 (ssize_t)strlen(want));
	ck_assert_str_eq(buf, want);
	stfs_content_free(c);
}

START_TEST(t_tree)
{
	char dir[] = "/tmp/stfs-check-repo.XXXXXX", *cmd;
	struct stfs_model_opts o = { 0 };
	struct stfs_node_info ni;
	struct stfs_model *m;
	struct stfs_error err;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	put(dir, "model_index.json", "{}");
	put(dir, "unet/config.json", "unet");
	put(dir, "vae/config.json", "vae");
	put(dir, "Vae/x.json", "twin");          /* case twin of vae/ */
	put(dir, "ctl\x02name", "bad");
	ck_assert_int_eq(stfs_model_open_opts(dir, &o, &m, &err), 0);
	read_is(m, walk(m, 0, "%repo/unet/config.json"), "unet");
	read_is(m, walk(m, 0, "%repo/model_index.json"), "{}");
	ck_assert_int_ge(walk(m, 0, "%repo/vae") + walk(m, 0, "%repo/Vae"),
			 -ENOENT);
	ck_assert(walk(m, 0, "%repo/vae") < 0 || walk(m, 0, "%repo/Vae") < 0);
	ck_assert_int_lt(walk(m, 0, "%repo/ctl\x02name"), 0);
	ck_assert_int_eq(stfs_model_node(m, (uint32_t)walk(m, 0, "%repo"),
					 &ni), 0);
	ck_assert_int_eq(ni.kind, STFS_NODE_KIND_DIR);
	ck_assert_uint_eq(ni.children, 3);   /* model_index, unet, a vae */
	ck_assert_ptr_nonnull(stfs_model_node_revision(m,
				(uint32_t)walk(m, 0, "%repo")));
	ck_assert_uint_eq(stfs_model_repo_count(m), 5);
	stfs_model_close(m);
	/* -o repo: the repository is the root, the tensors %tensors/ */
	o.flags = STFS_TREE_REPO;
	ck_assert_int_eq(stfs_model_open_opts(dir, &o, &m, &err), 0);
	read_is(m, walk(m, 0, "unet/config.json"), "unet");
	ck_assert_int_ge(walk(m, 0, "%tensors/%header.json"), 0);
	ck_assert_int_eq(stfs_model_node(m, 0, &ni), 0);
	ck_assert_uint_eq(ni.name_len, 0);
	ck_assert_uint_eq(ni.parent, 0);
	ck_assert_int_eq(stfs_model_node(m, (uint32_t)walk(m, 0, "%tensors"),
					 &ni), 0);
	ck_assert_uint_eq(ni.parent, 0);
	ck_assert_int_eq(stfs_model_child(m, 0, 3), walk(m, 0, "%tensors"));
	stfs_model_close(m);
	ck_assert_int_ge(asprintf(&cmd, "rm -rf '%s'", dir), 0);
	ck_assert_int_eq(system(cmd), 0);
	free(cmd);
}
END_TEST

Suite *repo_suite(void)
{
	Suite *s = suite_create("repo");
	TCase *tc = tcase_create("repo");

	tcase_add_test(tc, t_parallel);
	tcase_add_test(tc, t_path_bad);
	tcase_add_test(tc, t_small);
	tcase_add_test(tc, t_tree);
	suite_add_tcase(s, tc);
	return s;
}

/*
 * check_cache.c: unit tests of the cache store's writes (cache.c,
 * cachedir.c) in a private cache under /tmp: blocks written in a batch
 * (all written, flushed, then renamed) read back whole, an item that
 * cannot be written fails alone, and no temporary file is left behind.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "remote.h"
#include "suites.h"

#define BLK 4096

/* Files in the version directory of o whose name holds ".tmp.". */
static int tmp_files(const char *root, const struct stfs_cache_obj *o)
{
	char path[1200];
	struct dirent *e;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "%s/%s", root, o->dir);
	ck_assert_ptr_nonnull(d = opendir(path));
	while ((e = readdir(d)))
		n += strstr(e->d_name, ".tmp.") != NULL;
	closedir(d);
	return n;
}

START_TEST(t_put_batch)
{
	char root[] = "/tmp/stfs-check-cache-XXXXXX", got[BLK], cmd[64];
	static char buf[3][BLK];
	struct stfs_cache c;
	struct stfs_cache_obj o;
	struct stfs_cache_item it[4];

	ck_assert_ptr_nonnull(mkdtemp(root));
	ck_assert_int_eq(stfs_cache_init(&c, root, 1u << 20, BLK, 0), 0);
	ck_assert_int_eq(stfs_cache_ready(&c, NULL), 0);
	ck_assert_int_eq(stfs_cache_object(&c, "https://h/m.safetensors",
					   "\"e1\"", 3 * BLK, &o, NULL), 0);
	for (int i = 0; i < 3; i++) {
		memset(buf[i], 'a' + i, BLK);
		it[i] = (struct stfs_cache_item){ .o = &o, .block = 2 - i,
						  .buf = buf[i], .len = BLK };
	}
	/* larger than the whole cache: refused, alone */
	it[3] = (struct stfs_cache_item){ .o = &o, .block = 7, .buf = buf[0],
					  .len = (2u << 20) };
	stfs_cache_put_batch(&c, it, 4);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(it[i].rc, 0);
		ck_assert_int_eq(stfs_cache_read(&o, 2 - i, BLK, 0, got, BLK),
				 0);
		ck_assert_int_eq(memcmp(got, buf[i], BLK), 0);
	}
	ck_assert_int_eq(it[3].rc, -ENOENT);
	ck_assert_int_eq(stfs_cache_read(&o, 7, BLK, 0, got, 1), -ENOENT);
	/* a block of the wrong length is a miss */
	ck_assert_int_eq(stfs_cache_read(&o, 0, BLK - 1, 0, got, 1), -ENOENT);
	ck_assert_int_eq(tmp_files(root, &o), 0);
	/* one at a time, through the same path */
	ck_assert_int_eq(stfs_cache_put(&c, &o, 1, buf[0], BLK), 0);
	ck_assert_int_eq(stfs_cache_read(&o, 1, BLK, 0, got, BLK), 0);
	ck_assert_int_eq(got[0], 'a');
	ck_assert_int_eq(tmp_files(root, &o), 0);
	stfs_cache_fini(&c);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

Suite *cache_suite(void)
{
	Suite *s = suite_create("cache");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, t_put_batch);
	suite_add_tcase(s, tc);
	return s;
}

/*
 * check_cache.c: unit tests of the cache store's writes (cache.c,
 * cachedir.c) in a private cache under /tmp: blocks written in a batch
 * (all written, flushed, then renamed) read back whole, an item that
 * cannot be written fails alone, and no temporary file is left behind;
 * blocks written past the page cache (O_DIRECT) with a short tail or
 * from an unaligned buffer read back whole;
 * CRC-32C's check value; a block file's checks (blockfile.c): a byte
 * flipped in its bytes or its header, a block put under another number,
 * a file cut short are never served, and a read that does not touch a
 * damaged piece still is; eviction (evict.c): every file counted as its
 * size rounded up to 4 KiB, DIR/usage equal to what is on the disk, and a
 * full cache brought down to its low-water mark, not just under its size.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format.h"
#include "engine.h"
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

/* Blocks no reader wants in the page cache go past it (O_DIRECT, from a
 * page-aligned buffer: cachedir.c): a whole block, one whose last 4 KiB
 * unit is short (its tail goes through the page cache), and one from a
 * buffer that is not aligned (all of it through the page cache) each
 * read back equal, at its size. */
START_TEST(t_put_direct)
{
	char root[] = "/tmp/stfs-check-cache-XXXXXX", cmd[64], path[1200];
	size_t big = 64u << 10, len[3] = { big, big, 3 * BLK + 1808 };
	struct stfs_cache c;
	struct stfs_cache_obj o;
	struct stfs_cache_item it[3];
	char *buf, *got;
	struct stat st;

	ck_assert_int_eq(posix_memalign((void **)&buf, BLK, 2 * big + BLK), 0);
	ck_assert_ptr_nonnull(got = malloc(big));
	for (size_t i = 0; i < 2 * big + BLK; i++)
		buf[i] = (char)(i * 7 + i / 4096);
	ck_assert_ptr_nonnull(mkdtemp(root));
	ck_assert_int_eq(stfs_cache_init(&c, root, 8u << 20, big, 0), 0);
	ck_assert_int_eq(stfs_cache_ready(&c, NULL), 0);
	ck_assert_int_eq(stfs_cache_object(&c, "https://h/d.safetensors",
					   "\"e1\"", 2 * big + len[2], &o,
					   NULL), 0);
	it[0] = (struct stfs_cache_item){ .o = &o, .block = 0, .buf = buf,
					  .len = len[0] };
	it[1] = (struct stfs_cache_item){ .o = &o, .block = 1,
					  .buf = buf + 1, .len = len[1] };
	it[2] = (struct stfs_cache_item){ .o = &o, .block = 2,
					  .buf = buf + big, .len = len[2] };
	stfs_cache_put_batch(&c, it, 3);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(it[i].rc, 0);
		memset(got, 0, big);
		ck_assert_int_eq(stfs_cache_read(&o, (uint64_t)i, len[i], 0,
						 got, len[i]), 0);
		ck_assert_int_eq(memcmp(got, it[i].buf, len[i]), 0);
		snprintf(path, sizeof(path), "%s/%s/%d", root, o.dir, i);
		ck_assert_int_eq(stat(path, &st), 0);
		ck_assert_int_eq(st.st_size, (off_t)(STFS_BLOCK_HDR + len[i]));
	}
	ck_assert_int_eq(tmp_files(root, &o), 0);
	stfs_cache_fini(&c);
	free(buf);
	free(got);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(t_crc32c)
{
	static const char big[] = "123456789";
	char buf[1000];

	ck_assert_uint_eq(stfs_crc32c(0, big, 9), 0xe3069283u);
	ck_assert_uint_eq(stfs_crc32c(0, "", 0), 0);
	/* in pieces, through the 8-byte path and the byte tail */
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (char)(i * 31 + 7);
	for (size_t cut = 0; cut < 20; cut++)
		ck_assert_uint_eq(stfs_crc32c(stfs_crc32c(0, buf, cut),
					      buf + cut, sizeof(buf) - cut),
				  stfs_crc32c(0, buf, sizeof(buf)));
	/* three at once: as three calls, whatever the length */
	for (size_t len = 0; len < 300; len += 7) {
		const void *p[3] = { buf, buf + 300, buf + 600 };
		uint32_t out[3];

		stfs_crc32c_3(p, len, out);
		for (int i = 0; i < 3; i++)
			ck_assert_uint_eq(out[i], stfs_crc32c(0, p[i], len));
	}
}
END_TEST

/* Flip bit x of byte at of the block file of o's block b. */
static void flip(const char *root, const struct stfs_cache_obj *o,
		 const char *name, off_t at, int x)
{
	char path[1200];
	unsigned char c;
	int fd;

	snprintf(path, sizeof(path), "%s/%s/%s", root, o->dir, name);
	ck_assert_int_ge(fd = open(path, O_RDWR), 0);
	ck_assert_int_eq(pread(fd, &c, 1, at), 1);
	c ^= (unsigned char)(1 << x);
	ck_assert_int_eq(pwrite(fd, &c, 1, at), 1);
	close(fd);
}

START_TEST(t_checked)
{
	char root[] = "/tmp/stfs-check-cache-XXXXXX", cmd[200], why[160];
	enum { LEN = 100000 };          /* 7 pieces of 16 KiB, the last short */
	static char buf[LEN], got[LEN];
	struct stfs_cache c;
	struct stfs_cache_obj o;
	struct stfs_cache_blk b;

	ck_assert_ptr_nonnull(mkdtemp(root));
	ck_assert_int_eq(stfs_cache_init(&c, root, 1u << 20, LEN, 0), 0);
	ck_assert_int_eq(stfs_cache_ready(&c, NULL), 0);
	ck_assert_int_eq(stfs_cache_object(&c, "https://h/m.safetensors",
					   "\"e1\"", 3 * LEN, &o, NULL), 0);
	for (size_t i = 0; i < LEN; i++)
		buf[i] = (char)(i * 131 + i / 977);
	for (int k = 0; k < 3; k++)
		ck_assert_int_eq(stfs_cache_put(&c, &o, (uint64_t)k, buf, LEN),
				 0);
	ck_assert_int_eq(stfs_cache_read(&o, 0, LEN, 0, got, LEN), 0);
	ck_assert_int_eq(memcmp(got, buf, LEN), 0);
	/* every offset and length a piece boundary can cut */
	ck_assert_int_eq(stfs_cache_open_block(&o, 0, LEN, &b, why,
					       sizeof(why)), 0);
	for (size_t off = 0; off < LEN; off += 4093)
		for (size_t len = 1; off + len <= LEN; len = len * 3 + 1) {
			ck_assert_int_eq(stfs_blockfile_pread(&b, got, len,
							      off, why,
							      sizeof(why)), 0);
			ck_assert_int_eq(memcmp(got, buf + off, len), 0);
		}
	ck_assert_int_eq(stfs_blockfile_pread(&b, got, 2, LEN - 1, why,
					      sizeof(why)), -EBADMSG);
	/* a bit of the third piece flipped: it fails, the others do not */
	flip(root, &o, "0", STFS_BLOCK_HDR + 2 * 16384 + 5, 3);
	ck_assert_int_eq(stfs_blockfile_pread(&b, got, 100, 2 * 16384, why,
					      sizeof(why)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "checksum"));
	ck_assert_int_eq(stfs_blockfile_pread(&b, got, 16384, 16384, why,
					      sizeof(why)), 0);
	ck_assert_int_eq(stfs_blockfile_pread(&b, got, 16384, 3 * 16384, why,
					      sizeof(why)), 0);
	ck_assert_int_eq(stfs_blockfile_pread(&b, got, LEN, 0, why,
					      sizeof(why)), -EBADMSG);
	stfs_blockfile_close(&b);
	/* stfs_cache_read drops it */
	ck_assert_int_eq(stfs_cache_read(&o, 0, LEN, 0, got, LEN), -ENOENT);
	ck_assert_int_eq(stfs_cache_open_block(&o, 0, LEN, &b, why,
					       sizeof(why)), -ENOENT);
	/* a bit of the header: its own checksum fails */
	flip(root, &o, "1", 40, 0);
	ck_assert_int_eq(stfs_cache_open_block(&o, 1, LEN, &b, why,
					       sizeof(why)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "header"));
	/* block 2 under the name of block 0: another block */
	snprintf(cmd, sizeof(cmd), "%s/%s", root, o.dir);
	{
		char from[1200], to[1200];

		snprintf(from, sizeof(from), "%s/2", cmd);
		snprintf(to, sizeof(to), "%s/0", cmd);
		ck_assert_int_eq(rename(from, to), 0);
		ck_assert_int_eq(truncate(to, STFS_BLOCK_HDR + LEN), 0);
	}
	ck_assert_int_eq(stfs_cache_open_block(&o, 0, LEN, &b, why,
					       sizeof(why)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "another block"));
	/* cut short */
	ck_assert_int_eq(stfs_cache_put(&c, &o, 2, buf, LEN), 0);
	{
		char p2[1200];

		snprintf(p2, sizeof(p2), "%s/2", cmd);
		ck_assert_int_eq(truncate(p2, STFS_BLOCK_HDR + LEN - 1), 0);
	}
	ck_assert_int_eq(stfs_cache_open_block(&o, 2, LEN, &b, why,
					       sizeof(why)), -EBADMSG);
	ck_assert_int_eq(stfs_cache_read(&o, 2, LEN, 0, got, 1), -ENOENT);
	stfs_cache_fini(&c);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* What the files and directories under dir take, rounded up to 4 KiB
 * each (as evict.c counts them). */
static uint64_t on_disk(const char *dir)
{
	char path[1400];
	uint64_t n = 4096;              /* dir itself */
	struct dirent *e;
	DIR *d = opendir(dir);

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d))) {
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		ck_assert_int_eq(lstat(path, &st), 0);
		n += S_ISDIR(st.st_mode) ? on_disk(path) :
		     stfs_cache_charge((uint64_t)st.st_size);
	}
	closedir(d);
	return n;
}

static uint64_t usage(const char *root)
{
	char path[1200], text[32];
	uint64_t v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/usage", root);
	ck_assert_ptr_nonnull(f = fopen(path, "r"));
	ck_assert_ptr_nonnull(fgets(text, sizeof(text), f));
	fclose(f);
	ck_assert_int_eq(stfs_cache_parse_usage(text, strlen(text), &v), 0);
	return v;
}

START_TEST(t_evict_low)
{
	char root[] = "/tmp/stfs-check-cache-XXXXXX", cmd[64];
	static char buf[BLK];
	const uint64_t max = 200u << 10, blk = 2 * BLK;  /* + its header */
	struct stfs_cache c;
	struct stfs_cache_obj o;
	uint64_t before = 0, now;
	int evicted = 0;

	ck_assert_int_eq(stfs_cache_charge(0), 0);
	ck_assert_int_eq(stfs_cache_charge(1), 4096);
	ck_assert_int_eq(stfs_cache_charge(4096), 4096);
	ck_assert_int_eq(stfs_cache_charge(4097), 8192);
	ck_assert_ptr_nonnull(mkdtemp(root));
	ck_assert_int_eq(stfs_cache_init(&c, root, max, BLK, 0), 0);
	ck_assert_int_eq(stfs_cache_ready(&c, NULL), 0);
	ck_assert_int_eq(stfs_cache_object(&c, "https://h/m.safetensors",
					   "\"e1\"", 64 * BLK, &o, NULL), 0);
	for (int b = 0; b < 64; b++) {
		memset(buf, 'a' + b % 26, BLK);
		ck_assert_int_eq(stfs_cache_put(&c, &o, (uint64_t)b, buf, BLK),
				 0);
		now = usage(root);
		/* the count is what is there, never over the size */
		ck_assert_uint_eq(now, on_disk(root));
		ck_assert_uint_le(now, max);
		if (now < before) {
			/* the one that made room took it down to 90% */
			ck_assert_uint_le(now, max / 100 * STFS_CACHE_LOW_PCT +
					  blk);
			evicted++;
		}
		before = now;
	}
	/* 64 blocks of 8 KiB through 200 KiB: a walk each tenth, not each
	 * block once full */
	ck_assert_int_ge(evicted, 2);
	ck_assert_int_le(evicted, 64 * blk / (max / 10) + 1);
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
	tcase_add_test(tc, t_put_direct);
	tcase_add_test(tc, t_crc32c);
	tcase_add_test(tc, t_checked);
	tcase_add_test(tc, t_evict_low);
	suite_add_tcase(s, tc);
	return s;
}

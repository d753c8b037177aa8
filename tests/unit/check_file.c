/*
 * check_file.c: whole files: R1-R3 checked on the size and the length
 * field before the header is read, the 100,000,000-byte limit exactly, and
 * a source that is not a regular file.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stfs/stfs.h"
#include "suites.h"

static char dir[] = "/tmp/stfs-check-XXXXXX";

static void setup(void)
{
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[64];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
	strcpy(dir, "/tmp/stfs-check-XXXXXX");
}

/* Write le64(n) + body (blen bytes) + pad bytes of `padc`, return path. */
static char *make(const char *name, uint64_t n, const char *body,
		  size_t blen, size_t pad, char padc)
{
	char *path;
	unsigned char le[8];
	FILE *f;

	ck_assert_int_ge(asprintf(&path, "%s/%s", dir, name), 0);
	f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	for (int i = 0; i < 8; i++)
		le[i] = (unsigned char)(n >> (8 * i));
	fwrite(le, 1, 8, f);
	if (blen)
		fwrite(body, 1, blen, f);
	for (size_t i = 0; i < pad; i++)
		fputc(padc, f);
	fclose(f);
	return path;
}

static const char *open_rule(const char *path, int *rc)
{
	static struct stfs_error err;
	struct stfs_file *f = NULL;

	*rc = stfs_file_open(path, &f, &err);
	stfs_file_close(f);
	return *rc ? err.rule : NULL;
}

START_TEST(t_short_files)
{
	char *path;
	int rc;

	for (int size = 0; size < 8; size++) {
		FILE *f;

		ck_assert_int_ge(asprintf(&path, "%s/short%d", dir, size), 0);
		f = fopen(path, "wb");
		for (int i = 0; i < size; i++)
			fputc(0, f);
		fclose(f);
		ck_assert_str_eq(open_rule(path, &rc), "R1 size-field");
		free(path);
	}
}
END_TEST

START_TEST(t_limits)
{
	int rc;
	char *p;

	/* R2 comes before the size comparison: a 16-byte file */
	p = make("r2", 100000001ULL, "{}", 2, 6, ' ');
	ck_assert_str_eq(open_rule(p, &rc), "R2 header-limit");
	free(p);
	p = make("r2max", UINT64_MAX, "{}", 2, 0, ' ');
	ck_assert_str_eq(open_rule(p, &rc), "R2 header-limit");
	free(p);
	p = make("r3", 9, "{}", 2, 6, ' ');
	ck_assert_str_eq(open_rule(p, &rc), "R3 header-bounds");
	free(p);
	p = make("n0", 0, "", 0, 0, ' ');
	ck_assert_str_eq(open_rule(p, &rc), "R5 json-syntax");
	free(p);
	p = make("ok", 2, "{}", 2, 0, ' ');
	ck_assert_ptr_null(open_rule(p, &rc));
	ck_assert_int_eq(rc, 0);
	free(p);
	p = make("pad8", 8, "{}", 2, 6, ' ');
	ck_assert_ptr_null(open_rule(p, &rc));
	free(p);
	p = make("trail", 2, "{}", 2, 1, 'x');
	ck_assert_str_eq(open_rule(p, &rc), "R20 buffer-complete");
	free(p);
	p = make("nulpad", 8, "{}", 2, 6, '\0');
	ck_assert_str_eq(open_rule(p, &rc), "R7 json-whitespace");
	free(p);
}
END_TEST

/* Exactly 100,000,000 header bytes are accepted. */
START_TEST(t_header_max)
{
	char *p = make("max", 100000000ULL, "{}", 2, 100000000 - 2, ' ');
	struct stfs_file *f;
	struct stfs_error err;

	ck_assert_int_eq(stfs_file_open(p, &f, &err), 0);
	ck_assert_uint_eq(stfs_file_header_len(f), 100000000ULL);
	ck_assert_uint_eq(stfs_file_data_start(f), 100000008ULL);
	stfs_file_close(f);
	free(p);
}
END_TEST

START_TEST(t_not_regular)
{
	struct stfs_file *f;
	struct stfs_error err;
	char *fifo;

	ck_assert_int_eq(stfs_file_open(dir, &f, &err), -EISDIR);
	ck_assert_int_ge(asprintf(&fifo, "%s/fifo", dir), 0);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	/* must not block waiting for a writer */
	ck_assert_int_eq(stfs_file_open(fifo, &f, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "not a regular file"));
	ck_assert_int_eq(stfs_file_open("/dev/null", &f, &err), -EINVAL);
	ck_assert_int_eq(stfs_file_open("/nonexistent/x", &f, &err), -ENOENT);
	free(fifo);
}
END_TEST

START_TEST(t_layout)
{
	const char *h = "{\"a\":{\"dtype\":\"U8\",\"shape\":[3],"
			"\"data_offsets\":[0,3]}}";
	char *p = make("l", strlen(h), h, strlen(h), 0, ' ');
	struct stfs_file *f;
	FILE *fp = fopen(p, "ab");

	fputs("xyz", fp);
	fclose(fp);
	ck_assert_int_eq(stfs_file_open(p, &f, NULL), 0);
	char buf[256];
	const unsigned char *map = stfs_source_map(stfs_file_source(f));

	ck_assert_uint_eq(stfs_file_data_start(f), 8 + strlen(h));
	ck_assert_uint_eq(stfs_file_size(f), 8 + strlen(h) + 3);
	ck_assert(memcmp(map + stfs_file_data_start(f), "xyz", 3) == 0);
	ck_assert_int_eq(stfs_source_read(stfs_file_source(f), buf, 3,
					  stfs_file_data_start(f)), 0);
	ck_assert(memcmp(buf, "xyz", 3) == 0);
	ck_assert_int_eq(stfs_source_read(stfs_file_source(f), buf,
					  strlen(h), 8), 0);
	ck_assert(memcmp(buf, h, strlen(h)) == 0);
	/* past the end: EIO, never a fault */
	ck_assert_int_eq(stfs_source_read(stfs_file_source(f), buf, 4,
					  stfs_file_data_start(f)), -EIO);
	stfs_file_close(f);
	free(p);
}
END_TEST

Suite *file_suite(void)
{
	Suite *s = suite_create("file");
	TCase *tc = tcase_create("open");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, t_short_files);
	tcase_add_test(tc, t_limits);
	tcase_add_test(tc, t_header_max);
	tcase_add_test(tc, t_not_regular);
	tcase_add_test(tc, t_layout);
	suite_add_tcase(s, tc);
	return s;
}

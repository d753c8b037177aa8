/*
 * check_model.c: the layers above the parser: the locator, a model of one
 * file, of a directory and of an index (sharding rules, duplicates across
 * shards, hidden tensors), the tree's header file, content reads over
 * segments (inline, mapped ranges, converted ranges, and a source with no
 * map that completes on another thread), and the JSON writer.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "stfs/stfs.h"
#include "format.h"
#include "source.h"
#include "sourceops.h"
#include "content.h"
#include "suites.h"

static char dir[] = "/tmp/stfs-check-model.XXXXXX";

static void setup(void)
{
	strcpy(dir, "/tmp/stfs-check-model.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	char *cmd;

	ck_assert_int_ge(asprintf(&cmd, "rm -rf '%s'", dir), 0);
	ck_assert_int_eq(system(cmd), 0);
	free(cmd);
}

/* Write a file of U8 tensors named names[i] holding byte i + 1 (n bytes
 * each) under dir/sub/name; returns its path (caller frees). */
static char *shard(const char *sub, const char *name,
		   const char *const *names, size_t count, size_t n)
{
	char *path, hdr[4096];
	size_t len = 0;
	FILE *f;

	len += (size_t)snprintf(hdr + len, sizeof(hdr) - len, "{");
	for (size_t i = 0; i < count; i++)
		len += (size_t)snprintf(hdr + len, sizeof(hdr) - len,
			"%s\"%s\":{\"dtype\":\"U8\",\"shape\":[%zu],"
			"\"data_offsets\":[%zu,%zu]}", i ? "," : "", names[i],
			n, i * n, (i + 1) * n);
	len += (size_t)snprintf(hdr + len, sizeof(hdr) - len,
		",\"__metadata__\":{\"format\":\"pt\",\"file\":\"%s\"}}", name);
	ck_assert_int_ge(asprintf(&path, "%s/%s", dir, sub), 0);
	mkdir(path, 0755);
	free(path);
	ck_assert_int_ge(asprintf(&path, "%s/%s/%s", dir, sub, name), 0);
	ck_assert_ptr_nonnull(f = fopen(path, "wb"));
	for (int i = 0; i < 8; i++)
		fputc((int)((uint64_t)len >> (8 * i)) & 0xff, f);
	fwrite(hdr, 1, len, f);
	for (size_t i = 0; i < count; i++)
		for (size_t k = 0; k < n; k++)
			fputc((int)(i + 1), f);
	fclose(f);
	return path;
}

static char *sub_path(const char *sub, const char *name)
{
	char *p;

	ck_assert_int_ge(asprintf(&p, "%s/%s%s%s", dir, sub, name ? "/" : "",
				  name ? name : ""), 0);
	return p;
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static int64_t node_at(const struct stfs_model *m, const char *path)
{
	char *copy = strdup(path), *save = NULL;
	int64_t node = 0;

	for (char *c = strtok_r(copy, "/", &save); c && node >= 0;
	     c = strtok_r(NULL, "/", &save))
		node = stfs_model_lookup(m, (uint32_t)node, c, strlen(c));
	free(copy);
	return node;
}

/* The whole content of the file at path in m, NUL-terminated. */
static char *read_file(const struct stfs_model *m, const char *path,
		       size_t *len)
{
	struct stfs_content *c;
	int64_t node = node_at(m, path);
	char *buf;

	ck_assert_int_ge(node, 0);
	ck_assert_int_eq(stfs_model_content(m, (uint32_t)node, &c), 0);
	*len = (size_t)stfs_content_size(c);
	buf = malloc(*len + 1);
	ck_assert_int_eq(stfs_content_pread(c, buf, *len + 1, 0),
			 (ssize_t)*len);
	buf[*len] = '\0';
	stfs_content_free(c);
	return buf;
}

START_TEST(t_single_file)
{
	const char *names[] = { "b.w", "a.w", "a.v" };
	char *p = shard("one", "m.safetensors", names, 3, 5), *buf;
	struct stfs_model *m;
	struct stfs_node_info ni;
	struct stfs_error err;
	size_t len;

	ck_assert_int_eq(stfs_model_open(p, 0, NULL, NULL, &m, &err), 0);
	ck_assert_int_eq(stfs_model_sharded(m), 0);
	ck_assert_uint_eq(stfs_model_file_count(m), 1);
	ck_assert_str_eq(stfs_model_file_name(m, 0), "m.safetensors");
	ck_assert_uint_eq(stfs_model_tensor_count(m), 3);
	/* name order */
	ck_assert_str_eq(stfs_model_tensor(m, 0)->name, "a.v");
	ck_assert_str_eq(stfs_model_tensor(m, 2)->name, "b.w");
	ck_assert_uint_eq(stfs_model_tensor_offset(m, 2),
			  stfs_file_data_start(stfs_model_file(m, 0)));
	/* the tensor's bytes, and its path */
	buf = read_file(m, "b/w", &len);
	ck_assert_uint_eq(len, 5);
	ck_assert(memcmp(buf, "\1\1\1\1\1", 5) == 0);
	free(buf);
	buf = stfs_model_tensor_path(m, 1);
	ck_assert_str_eq(buf, "a/w");
	free(buf);
	/* the header file is the header, as stored */
	ck_assert_int_eq(stfs_model_node(m, (uint32_t)node_at(m,
					 STFS_HEADER_FILE), &ni), 0);
	ck_assert_int_eq(ni.kind, STFS_NODE_KIND_HEADER);
	buf = read_file(m, STFS_HEADER_FILE, &len);
	ck_assert_uint_eq(len, stfs_file_header_len(stfs_model_file(m, 0)));
	ck_assert(memcmp(buf, "{\"b.w\"", 6) == 0);
	free(buf);
	/* metadata, shared by the one file */
	ck_assert_uint_eq(stfs_model_meta_count(m), 2);
	ck_assert_str_eq(stfs_model_meta(m, 0)->key, "file");
	/* a directory has no content */
	{
		struct stfs_content *c;
		ck_assert_int_eq(stfs_model_content(m, 0, &c), -EISDIR);
	}
	stfs_model_close(m);
	free(p);
}
END_TEST

START_TEST(t_dir_shards)
{
	const char *a[] = { "x.0", "x.2" }, *b[] = { "x.1", "y" };
	char *pa = shard("d", "a.safetensors", a, 2, 3);
	char *pb = shard("d", "b.safetensors", b, 2, 4);
	char *d = sub_path("d", NULL), *buf, q[64];
	struct stfs_model *m;
	struct stfs_error err;
	size_t len;

	ck_assert_int_eq(stfs_model_open(d, 0, NULL, NULL, &m, &err), 0);
	ck_assert_int_eq(stfs_model_sharded(m), 1);
	ck_assert_uint_eq(stfs_model_tensor_count(m), 4);
	/* merged in name order across shards */
	for (size_t i = 0; i < 3; i++) {
		snprintf(q, sizeof(q), "x.%zu", i);
		ck_assert_str_eq(stfs_model_tensor(m, i)->name, q);
		ck_assert_uint_eq(stfs_model_tensor_file(m, i), i == 1);
	}
	/* only the metadata both shards carry with the same value */
	ck_assert_uint_eq(stfs_model_meta_count(m), 1);
	ck_assert_str_eq(stfs_model_meta(m, 0)->key, "format");
	/* the merged index is JSON that names every tensor's shard */
	buf = read_file(m, STFS_HEADER_FILE, &len);
	{
		json_object *o = json_tokener_parse(buf), *wm, *v;
		ck_assert_ptr_nonnull(o);
		ck_assert(json_object_object_get_ex(o, "weight_map", &wm));
		ck_assert(json_object_object_get_ex(wm, "x.1", &v));
		ck_assert_str_eq(json_object_get_string(v), "b.safetensors");
		json_object_put(o);
	}
	free(buf);
	stfs_model_close(m);
	free(pa);
	free(pb);
	free(d);
}
END_TEST

/* The same names in two shards, far apart in name order. */
START_TEST(t_dir_duplicates)
{
	const char *a[] = { "n.1", "n.5", "n.9" }, *b[] = { "n.3", "n.9" };
	char *pa = shard("dup", "a.safetensors", a, 3, 1);
	char *pb = shard("dup", "b.safetensors", b, 2, 1);
	char *d = sub_path("dup", NULL);
	struct stfs_model *m;
	struct stfs_error err;

	ck_assert_int_eq(stfs_model_open(d, 0, NULL, NULL, &m, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "tensor \"n.9\" is in two "
				     "shards: a.safetensors and "
				     "b.safetensors"));
	free(pa);
	free(pb);
	free(d);
}
END_TEST

static void count_warn(void *ctx, const char *text)
{
	(*(int *)ctx)++;
	ck_assert_ptr_nonnull(strstr(text, "1 tensor in the shards is not"));
}

START_TEST(t_index)
{
	const char *a[] = { "w.0", "hidden" }, *b[] = { "w.1" };
	char *pa = shard("ix", "a.safetensors", a, 2, 2);
	char *pb = shard("ix", "b.safetensors", b, 1, 2);
	char *ix = sub_path("ix", "model.safetensors.index.json");
	char *d = sub_path("ix", NULL), *buf;
	struct stfs_model *m;
	struct stfs_error err;
	int warned = 0;
	size_t len;

	write_text(ix, "{\"metadata\":{\"total_size\":4},\"weight_map\":"
		   "{\"w.0\":\"a.safetensors\",\"w.1\":\"b.safetensors\"}}");
	/* the index given, or found in the directory: the same model */
	for (int k = 0; k < 2; k++) {
		ck_assert_int_eq(stfs_model_open(k ? d : ix, 0, count_warn,
						 &warned, &m, &err), 0);
		ck_assert_uint_eq(stfs_model_tensor_count(m), 2);
		ck_assert_int_lt(node_at(m, "hidden"), 0);
		buf = read_file(m, "w/1", &len);
		ck_assert_uint_eq(len, 2);
		ck_assert(memcmp(buf, "\1\1", 2) == 0);
		free(buf);
		buf = read_file(m, STFS_HEADER_FILE, &len);
		ck_assert_ptr_nonnull(strstr(buf, "\"total_size\":4"));
		free(buf);
		stfs_model_close(m);
	}
	ck_assert_int_eq(warned, 2);
	/* a tensor where the index does not put it */
	write_text(ix, "{\"weight_map\":{\"w.0\":\"b.safetensors\"}}");
	ck_assert_int_eq(stfs_model_open(ix, 0, NULL, NULL, &m, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "is not in shard b.safetensors"));
	/* a shard that is not there names itself */
	write_text(ix, "{\"weight_map\":{\"w.0\":\"c.safetensors\"}}");
	ck_assert_int_lt(stfs_model_open(ix, 0, NULL, NULL, &m, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "shard c.safetensors: "));
	/* no escaping the index's directory */
	write_text(ix, "{\"weight_map\":{\"w.0\":\"../ix/a.safetensors\"}}");
	ck_assert_int_eq(stfs_model_open(ix, 0, NULL, NULL, &m, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "plain file names"));
	free(pa);
	free(pb);
	free(ix);
	free(d);
}
END_TEST

START_TEST(t_locate)
{
	struct stfs_location *loc;
	struct stfs_error err;
	char *d = sub_path("loc", NULL), *p;
	const char *names[] = { "t" };

	ck_assert_int_eq(stfs_locate("/nonexistent/m.safetensors", NULL, &loc, &err),
			 -ENOENT);
	mkdir(d, 0755);
	ck_assert_int_eq(stfs_locate(d, NULL, &loc, &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "no *.safetensors"));
	free(shard("loc", "z.safetensors", names, 1, 1));
	free(shard("loc", "a.safetensors", names, 1, 1));
	ck_assert_int_eq(stfs_locate(d, NULL, &loc, &err), 0);
	ck_assert_int_eq(loc->kind, STFS_LOC_DIR);
	ck_assert_uint_eq(loc->nnames, 2);
	ck_assert_str_eq(loc->names[0], "a.safetensors");
	ck_assert_str_eq(loc->canonical, d);
	stfs_location_free(loc);
	p = sub_path("loc", "a.safetensors.index.json");
	write_text(p, "{}");
	free(p);
	p = sub_path("loc", "b.safetensors.index.json");
	write_text(p, "{}");
	ck_assert_int_eq(stfs_locate(d, NULL, &loc, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "several index files, give "
				     "one of them as the source: "
				     "a.safetensors.index.json, "
				     "b.safetensors.index.json"));
	ck_assert_int_eq(stfs_locate(p, NULL, &loc, &err), 0);
	ck_assert_int_eq(loc->kind, STFS_LOC_INDEX);
	ck_assert_str_eq(loc->name, "b.safetensors.index.json");
	stfs_location_free(loc);
	free(p);
	free(d);
}
END_TEST

/* The virtual files: found by name, not listed unless asked, and each a
 * file the strict parser accepts, with the tensors' bytes. */
START_TEST(t_virtual)
{
	const char *names[] = { "a.x", "a.y", "b" };
	char *p = shard("v", "m.safetensors", names, 3, 3), *buf;
	struct stfs_model_opts o = { .flags = STFS_TREE_F32 };
	struct stfs_header *h;
	struct stfs_node_info ni;
	struct stfs_model *m;
	struct stfs_error err;
	uint64_t n = 0, size;
	size_t len;

	ck_assert_int_eq(stfs_model_open_opts(p, &o, &m, &err), 0);
	ck_assert_int_ge(node_at(m, STFS_VIRTUAL_FULL), 0);
	ck_assert_int_ge(node_at(m, "a/" STFS_VIRTUAL_STRIPPED), 0);
	ck_assert_int_lt(node_at(m, STFS_VIRTUAL_STRIPPED), 0);
	ck_assert_int_ge(node_at(m, STFS_VIRTUAL_F32), 0);
	/* not among the root's children */
	ck_assert_int_eq(stfs_model_node(m, 0, &ni), 0);
	ck_assert_uint_eq(ni.children, 3);     /* a, b, %header.json */
	buf = read_file(m, "a/" STFS_VIRTUAL_STRIPPED, &len);
	ck_assert_int_eq(stfs_model_node_size(m, (uint32_t)node_at(m,
				"a/" STFS_VIRTUAL_STRIPPED), &size), 0);
	ck_assert_uint_eq(size, len);
	for (int i = 7; i >= 0; i--)
		n = n << 8 | (unsigned char)buf[i];
	ck_assert_uint_eq(n % 8, 0);
	ck_assert_uint_eq(8 + n + 6, len);
	ck_assert_int_eq(stfs_header_parse(buf + 8, n, len - 8 - n, 8, &h,
					   &err), 0);
	ck_assert_uint_eq(stfs_header_count(h), 2);
	ck_assert_str_eq(stfs_header_tensor(h, 0)->name, "x");
	ck_assert_str_eq(stfs_header_tensor(h, 1)->name, "y");
	ck_assert(memcmp(buf + 8 + n, "\1\1\1\2\2\2", 6) == 0);
	/* __metadata__ carried over */
	ck_assert_uint_eq(stfs_header_meta_count(h), 2);
	stfs_header_free(h);
	free(buf);
	stfs_model_close(m);
	/* listed when asked */
	o.flags = STFS_TREE_LIST_VIRTUAL;
	ck_assert_int_eq(stfs_model_open_opts(p, &o, &m, &err), 0);
	ck_assert_int_eq(stfs_model_node(m, 0, &ni), 0);
	ck_assert_uint_eq(ni.children, 5);  /* and %repo */
	ck_assert_int_eq(stfs_model_node(m, (uint32_t)stfs_model_child(m, 0,
					 3), &ni), 0);
	ck_assert_int_eq(ni.kind, STFS_NODE_KIND_VIRTUAL);
	ck_assert_str_eq(ni.name, STFS_VIRTUAL_FULL);
	stfs_model_close(m);
	/* a selection that selects nothing */
	{
		const char *inc[] = { "zzz*" };
		o.include = inc;
		o.ninclude = 1;
		ck_assert_int_eq(stfs_model_open_opts(p, &o, &m, &err),
				 -EINVAL);
		ck_assert_str_eq(err.msg, "include=zzz* matches no tensor");
	}
	free(p);
}
END_TEST

/* ---- content over a source with no map -------------------------------- */

/* A source over a buffer that answers every read on a thread of its own,
 * a little later: what a remote source does. */
struct slow {
	struct stfs_source base;
	const char *bytes;
	int fail;
};

struct job {
	struct slow *s;
	void *buf;
	size_t len;
	uint64_t off;
	stfs_source_done done;
	void *arg;
};

static void slow_close(struct stfs_source *s)
{
	free(s->name);
	free(s);
}

static int slow_read(struct stfs_source *src, void *buf, size_t len,
		     uint64_t off)
{
	struct slow *s = (struct slow *)src;

	if (s->fail)
		return -EIO;
	memcpy(buf, s->bytes + off, len);
	return 0;
}

static void *slow_thread(void *arg)
{
	struct job *j = arg;

	usleep(2000);
	j->done(j->arg, slow_read(&j->s->base, j->buf, j->len, j->off));
	free(j);
	return NULL;
}

static void slow_async(struct stfs_source *src, void *buf, size_t len,
		       uint64_t off, const struct stfs_extent *ext,
		       stfs_source_done done, void *arg)
{
	struct job *j = malloc(sizeof(*j));
	pthread_t t;

	*j = (struct job){ (struct slow *)src, buf, len, off, done, arg };
	ck_assert_int_eq(pthread_create(&t, NULL, slow_thread, j), 0);
	pthread_detach(t);
}

static const struct stfs_source_ops slow_ops = {
	.close = slow_close, .read = slow_read, .read_async = slow_async,
};

START_TEST(t_content_segments)
{
	static const char data[] = "0123456789abcdefghij";
	/* BF16 1.0, -2.0, 0.5 */
	static const unsigned char bf16[] = { 0x80, 0x3f, 0x00, 0xc0, 0x00,
					      0x3f };
	char all[64], want[64], buf[64];
	struct slow *s = calloc(1, sizeof(*s));
	struct stfs_content *c = stfs_content_new();
	struct slow *s2 = calloc(1, sizeof(*s2));
	float f[3] = { 1.0f, -2.0f, 0.5f };
	size_t n = 0;

	s->base.ops = &slow_ops;
	s->base.name = strdup("slow");
	s->base.info.size = sizeof(data) - 1;
	s->bytes = data;
	s2->base = s->base;
	s2->base.name = strdup("slow2");
	s2->base.info.size = sizeof(bf16);
	s2->bytes = (const char *)bf16;
	/* "<h>" + data[3..13) + "<f>" + three floats */
	ck_assert_int_eq(stfs_content_add_inline(c, "<h>", 3, 0), 0);
	ck_assert_int_eq(stfs_content_add_range(c, &s->base, 3, 10), 0);
	ck_assert_int_eq(stfs_content_add_inline(c, strdup("<f>"), 3, 1), 0);
	ck_assert_int_eq(stfs_content_add_f32(c, &s2->base, 0,
					      STFS_DTYPE_BF16, 3), 0);
	memcpy(want, "<h>", 3);
	memcpy(want + 3, data + 3, 10);
	memcpy(want + 13, "<f>", 3);
	memcpy(want + 16, f, 12);
	n = 28;
	ck_assert_uint_eq(stfs_content_size(c), n);
	ck_assert_int_eq(stfs_content_pread(c, all, sizeof(all), 0), (ssize_t)n);
	ck_assert(memcmp(all, want, n) == 0);
	/* every offset and length, across every boundary */
	for (size_t off = 0; off <= n; off++)
		for (size_t len = 0; len <= n - off + 2; len++) {
			size_t got = off + len > n ? n - off : len;
			ck_assert_int_eq(stfs_content_pread(c, buf, len, off),
					 (ssize_t)got);
			ck_assert(memcmp(buf, want + off, got) == 0);
		}
	/* a failing source fails the read, whole */
	s->fail = 1;
	ck_assert_int_eq(stfs_content_pread(c, buf, 8, 0), -EIO);
	ck_assert_int_eq(stfs_content_pread(c, buf, 3, 0), 3);
	stfs_content_free(c);
	stfs_source_close(&s->base);
	stfs_source_close(&s2->base);
}
END_TEST

/* A local file: ranges come out of the map, and a file that shrank gives
 * EIO, not a fault. */
START_TEST(t_content_local_truncated)
{
	const char *names[] = { "a", "b" };
	char *p = shard("tr", "t.safetensors", names, 2, 8192), buf[16384];
	struct stfs_model *m;
	struct stfs_content *c;
	struct stfs_error err;
	int64_t node;

	ck_assert_int_eq(stfs_model_open(p, STFS_TREE_NPY, NULL, NULL, &m,
					 &err), 0);
	node = node_at(m, "b.npy");
	ck_assert_int_ge(node, 0);
	ck_assert_int_eq(stfs_model_content(m, (uint32_t)node, &c), 0);
	ck_assert_uint_eq(stfs_content_size(c), 128 + 8192);
	ck_assert_int_eq(stfs_content_pread(c, buf, sizeof(buf), 0),
			 128 + 8192);
	ck_assert(memcmp(buf, "\x93NUMPY", 6) == 0);
	ck_assert_int_eq(buf[128], 2);
	ck_assert_int_eq(truncate(p, 4096), 0);
	ck_assert_int_eq(stfs_content_pread(c, buf, sizeof(buf), 0), -EIO);
	stfs_content_free(c);
	stfs_model_close(m);
	free(p);
}
END_TEST

/* ---- the JSON writer ---------------------------------------------------- */

START_TEST(t_json_writer)
{
	static const char odd[] = "a\0b\x01\"\\\xff\xc3\xa9z";
	struct stfs_jw w;
	json_object *o, *v;
	size_t len;
	char *s;

	for (int pretty = 0; pretty < 2; pretty++) {
		uint64_t nums[3] = { 0, 1, UINT64_MAX };

		stfs_jw_init(&w, pretty);
		stfs_jw_begin(&w, '{');
		stfs_jw_key(&w, odd, sizeof(odd) - 1);
		stfs_jw_str(&w, odd, sizeof(odd) - 1);
		stfs_jw_key(&w, "n", 1);
		stfs_jw_u64s(&w, nums, 3);
		stfs_jw_key(&w, "e", 1);
		stfs_jw_begin(&w, '[');
		stfs_jw_end(&w, ']');
		stfs_jw_key(&w, "t", 1);
		stfs_jw_bool(&w, 1);
		stfs_jw_end(&w, '}');
		ck_assert_ptr_nonnull(s = stfs_jw_finish(&w, &len));
		ck_assert_uint_eq(strlen(s), len);
		ck_assert_ptr_nonnull(strstr(s, "a\\u0000b\\u0001\\\"\\\\"
					     "\\ufffd\xc3\xa9z"));
		ck_assert_ptr_nonnull(o = json_tokener_parse(s));
		ck_assert(json_object_object_get_ex(o, "t", &v));
		ck_assert(json_object_get_boolean(v));
		json_object_put(o);
		free(s);
	}
	/* unbalanced: no text */
	stfs_jw_init(&w, 0);
	stfs_jw_begin(&w, '[');
	ck_assert_ptr_null(stfs_jw_finish(&w, &len));
}
END_TEST

Suite *model_suite(void)
{
	Suite *s = suite_create("model");
	TCase *tc = tcase_create("model");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, t_single_file);
	tcase_add_test(tc, t_dir_shards);
	tcase_add_test(tc, t_dir_duplicates);
	tcase_add_test(tc, t_index);
	tcase_add_test(tc, t_locate);
	tcase_add_test(tc, t_virtual);
	tcase_add_test(tc, t_content_segments);
	tcase_add_test(tc, t_content_local_truncated);
	tcase_add_test(tc, t_json_writer);
	suite_add_tcase(s, tc);
	return s;
}

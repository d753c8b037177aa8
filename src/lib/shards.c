/*
 * shards.c: a sharded checkpoint (a directory, or a *.index.json) as one
 * model.
 *
 * With an index, its weight_map is authoritative: every tensor it names must
 * be in the shard it names, every shard it names must exist, and a shard
 * name must be a plain file name in the same directory (no '/', no "..").
 * Tensors present in shards but absent from the map are hidden, with one
 * warning.  Without an index every *.safetensors in the directory (not
 * recursive) is merged, and a name in two shards is refused.  Every shard
 * is validated exactly as a single file; errors name the shard.
 *
 * index.c reads the index; json-c writes the merged index shown in the
 * mount.  No json-c object leaves libstfs.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stfs/stfs.h"
#include "internal.h"
#include "model.h"
#include "index.h"

#define INDEX_MAX (1024ULL * 1024 * 1024)
#define QMAX 160

static int ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && strcmp(s + a - b, suffix) == 0;
}

int stfs_is_index_name(const char *path)
{
	return ends_with(path, ".index.json");
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *join(const char *dir, const char *name)
{
	char *p;

	if (asprintf(&p, "%s/%s", dir, name) < 0)
		return NULL;
	return p;
}

/* Open shard `name` in dir and add it to the model; errors name it. */
static int add_shard(struct stfs_model *m, const char *dir, const char *name,
		     struct stfs_error *err)
{
	struct stfs_file *f;
	char *path = join(dir, name);
	char msg[sizeof(err->msg)];
	int rc;

	if (!path)
		return stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET,
				 "out of memory");
	rc = stfs_file_open(path, &f, err);
	free(path);
	if (rc) {
		if (err) {
			memcpy(msg, err->msg, sizeof(msg));
			snprintf(err->msg, sizeof(err->msg), "shard %.200s: "
				 "%.300s", name, msg);
		}
		return rc;
	}
	if ((rc = stfs_model_add_file(m, f, name))) {
		stfs_file_close(f);
		return stfs_fail(err, rc, NULL, STFS_NO_OFFSET,
				 "out of memory");
	}
	return 0;
}

/* A weight_map shard must be a file name in the index's directory. */
static int read_small_file(const char *path, char **out, size_t *len,
			   struct stfs_error *err)
{
	struct stat st;
	char *buf;
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);

	if (fd < 0)
		return stfs_fail(err, -errno, NULL, STFS_NO_OFFSET,
				 "cannot open the index: %s", strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size > INDEX_MAX) {
		close(fd);
		return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
				 "the index is not a regular file under 1 GiB");
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET,
				 "out of memory");
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	buf[got] = '\0';
	*out = buf;
	*len = got;
	return 0;
}

struct found {
	const struct stfs_tensor *t;
	uint32_t file;
	int used;
};

static int cmp_found(const void *x, const void *y)
{
	const struct found *a = x, *b = y;
	int c;

	if (a->file != b->file)
		return a->file < b->file ? -1 : 1;
	c = memcmp(a->t->name, b->t->name, a->t->name_len < b->t->name_len ?
		   a->t->name_len : b->t->name_len);
	if (c)
		return c;
	return a->t->name_len < b->t->name_len ? -1 :
	       a->t->name_len > b->t->name_len;
}

static struct found *find_tensor(struct found *all, size_t n, uint32_t file,
				 const char *name, size_t len)
{
	struct stfs_tensor key_t = { .name = name, .name_len = len };
	struct found key = { .t = &key_t, .file = file };

	return bsearch(&key, all, n, sizeof(*all), cmp_found);
}

/* Shards were added in sorted order, so their names can be searched. */
static int shard_index(struct stfs_model *m, const char *name)
{
	char **p = bsearch(&name, m->file_names, m->nfiles,
			   sizeof(*m->file_names), cmp_str);

	return p ? (int)(p - m->file_names) : -1;
}

static int make_index_json(struct stfs_model *m, json_object *meta,
			   struct stfs_error *err);

static int open_with_index(struct stfs_model *m, const char *dir,
			   const char *index_path, unsigned flags,
			   void (*warn)(void *, const char *), void *ctx,
			   struct stfs_error *err)
{
	struct stfs_index ix;
	struct found *all = NULL;
	size_t total = 0, len = 0, hidden = 0;
	char *text = NULL;
	char q[QMAX], q2[QMAX];
	int rc;

	if ((rc = read_small_file(index_path, &text, &len, err)))
		return rc;
	rc = stfs_index_parse(text, len, &ix, err);
	free(text);
	if (rc)
		return rc;

	/* The distinct shards, sorted, each checked before any is opened. */
	for (size_t i = 0; i < ix.nshards; i++)
		if ((rc = add_shard(m, dir, ix.shards[i], err)))
			goto out;

	/* Every tensor of every shard, sorted by (shard, name). */
	for (size_t i = 0; i < m->nfiles; i++)
		total += stfs_header_count(m->files[i]->header);
	all = calloc(total ? total : 1, sizeof(*all));
	if (!all) {
		rc = stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET, "no memory");
		goto out;
	}
	total = 0;
	for (size_t i = 0; i < m->nfiles; i++) {
		const struct stfs_header *h = m->files[i]->header;
		for (size_t k = 0; k < stfs_header_count(h); k++) {
			all[total].t = stfs_header_tensor(h, k);
			all[total++].file = (uint32_t)i;
		}
	}
	qsort(all, total, sizeof(*all), cmp_found);

	m->entries = calloc(ix.nentries + 1, sizeof(*m->entries));
	if (!m->entries) {
		rc = stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET, "no memory");
		goto out;
	}
	for (size_t i = 0; i < ix.nentries; i++) {
		const char *name = ix.entries[i].name, *s = ix.entries[i].shard;
		int fi = shard_index(m, s);
		struct found *f = find_tensor(all, total, (uint32_t)fi, name,
					      strlen(name));

		if (!f) {
			rc = stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
				       "tensor \"%s\" is not in shard %s, "
				       "where the index puts it",
				       stfs_quote(name, strlen(name), q, QMAX),
				       stfs_quote(s, strlen(s), q2, QMAX));
			goto out;
		}
		f->used = 1;
		m->entries[m->nentries].t = f->t;
		m->entries[m->nentries++].file = (uint32_t)fi;
	}
	for (size_t i = 0; i < total; i++)
		if (!all[i].used)
			hidden++;
	if (hidden && warn) {
		char text2[512];
		size_t i = 0;

		while (all[i].used)
			i++;
		snprintf(text2, sizeof(text2),
			 "%zu tensor%s in the shards %s not in the index's "
			 "weight_map and %s hidden (first: \"%s\" in %s)",
			 hidden, hidden == 1 ? "" : "s",
			 hidden == 1 ? "is" : "are",
			 hidden == 1 ? "is" : "are",
			 stfs_quote(all[i].t->name, all[i].t->name_len, q,
				    QMAX), m->file_names[all[i].file]);
		warn(ctx, text2);
	}
	if ((rc = stfs_model_build_tree(m, flags, err)))
		goto out;
	rc = make_index_json(m, ix.meta, err);
out:
	free(all);
	stfs_index_free(&ix);
	return rc;
}

int stfs_shards_open_index(struct stfs_model *m, const char *index,
			   unsigned flags,
			   void (*warn)(void *, const char *), void *ctx,
			   struct stfs_error *err)
{
	char *dir = strdup(index), *slash;
	int rc;

	if (!dir)
		return stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET,
				 "out of memory");
	slash = strrchr(dir, '/');
	if (slash == dir)
		dir[1] = '\0';
	else if (slash)
		*slash = '\0';
	else
		strcpy(dir, ".");
	m->sharded = 1;
	rc = open_with_index(m, dir, index, flags, warn, ctx, err);
	free(dir);
	return rc;
}

int stfs_shards_open_dir(struct stfs_model *m, unsigned flags,
			 void (*warn)(void *, const char *), void *ctx,
			 struct stfs_error *err)
{
	DIR *d = opendir(m->source);
	struct dirent *de;
	char **files = NULL, **indexes = NULL;
	size_t nfiles = 0, nindexes = 0;
	int rc = 0;

	m->sharded = 1;
	if (!d)
		return stfs_fail(err, -errno, NULL, STFS_NO_OFFSET,
				 "cannot open directory: %s", strerror(errno));
	while ((de = readdir(d))) {
		char ***list;
		size_t *n;
		char **p;

		if (de->d_name[0] == '.')
			continue;
		if (ends_with(de->d_name, ".safetensors.index.json")) {
			list = &indexes;
			n = &nindexes;
		} else if (ends_with(de->d_name, ".safetensors")) {
			list = &files;
			n = &nfiles;
		} else {
			continue;
		}
		p = realloc(*list, (*n + 1) * sizeof(*p));
		if (!p || !(p[*n] = strdup(de->d_name))) {
			if (p)
				*list = p;
			rc = stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET,
				       "out of memory");
			goto out;
		}
		*list = p;
		(*n)++;
	}
	if (nindexes > 1) {
		char names[400] = "";
		qsort(indexes, nindexes, sizeof(*indexes), cmp_str);
		for (size_t i = 0; i < nindexes; i++) {
			size_t l = strlen(names);
			snprintf(names + l, sizeof(names) - l, "%s%s",
				 i ? ", " : "", indexes[i]);
		}
		rc = stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
			       "several index files, give one of them as "
			       "the source: %s", names);
		goto out;
	}
	if (nindexes == 1) {
		char *path = join(m->source, indexes[0]);
		if (!path) {
			rc = -ENOMEM;
			goto out;
		}
		rc = open_with_index(m, m->source, path, flags, warn, ctx,
				     err);
		free(path);
		goto out;
	}
	if (nfiles == 0) {
		rc = stfs_fail(err, -ENOENT, NULL, STFS_NO_OFFSET,
			       "no *.safetensors files in this directory");
		goto out;
	}
	qsort(files, nfiles, sizeof(*files), cmp_str);
	for (size_t i = 0; i < nfiles; i++)
		if ((rc = add_shard(m, m->source, files[i], err)))
			goto out;
	if ((rc = stfs_model_collect(m, err)))
		goto out;
	for (size_t i = 1; i < m->nentries; i++) {
		const struct stfs_entry *a = &m->entries[i - 1];
		const struct stfs_entry *b = &m->entries[i];
		char q[QMAX];

		if (a->t->name_len == b->t->name_len &&
		    memcmp(a->t->name, b->t->name, a->t->name_len) == 0) {
			rc = stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
				       "tensor \"%s\" is in two shards: %s "
				       "and %s",
				       stfs_quote(a->t->name, a->t->name_len,
						  q, QMAX),
				       m->file_names[a->file],
				       m->file_names[b->file]);
			goto out;
		}
	}
	if ((rc = stfs_model_build_tree(m, flags, err)))
		goto out;
	rc = make_index_json(m, NULL, err);
out:
	closedir(d);
	for (size_t i = 0; i < nfiles; i++)
		free(files[i]);
	for (size_t i = 0; i < nindexes; i++)
		free(indexes[i]);
	free(files);
	free(indexes);
	return rc;
}

static json_object *u64_array(const uint64_t *v, size_t n)
{
	json_object *a = json_object_new_array_ext((int)n);

	for (size_t i = 0; a && i < n; i++)
		json_object_array_add(a, json_object_new_uint64(v[i]));
	return a;
}

/* The reserved file of a sharded mount: a merged index. */
static int make_index_json(struct stfs_model *m, json_object *meta,
			   struct stfs_error *err)
{
	json_object *root = json_object_new_object();
	json_object *wm = json_object_new_object();
	json_object *tensors = json_object_new_array();
	json_object *shards = json_object_new_object();
	uint64_t total = 0;
	const char *s;
	size_t len;
	int rc = 0;

	if (!root || !wm || !tensors || !shards)
		goto nomem;
	for (size_t i = 0; i < m->nfiles; i++) {
		const struct stfs_header *h = m->files[i]->header;
		json_object *o = json_object_new_object();
		json_object *md = json_object_new_object();

		if (!o || !md) {
			json_object_put(o);
			json_object_put(md);
			goto nomem;
		}
		for (size_t k = 0; k < stfs_header_meta_count(h); k++) {
			const struct stfs_meta *e = stfs_header_meta(h, k);
			json_object_object_add(md, e->key,
				json_object_new_string_len(e->value,
							   (int)e->value_len));
		}
		json_object_object_add(o, "__metadata__", md);
		json_object_object_add(o, "size",
			json_object_new_uint64(m->files[i]->size));
		json_object_object_add(shards, m->file_names[i], o);
	}
	for (size_t i = 0; i < m->nentries; i++) {
		const struct stfs_entry *e = &m->entries[i];
		const struct stfs_tensor *t = e->t;
		json_object *o = json_object_new_object();
		uint64_t off[2] = { t->begin, t->end };

		if (!o)
			goto nomem;
		total += t->end - t->begin;
		json_object_object_add(o, "name",
			json_object_new_string_len(t->name, (int)t->name_len));
		json_object_object_add(o, "file",
			json_object_new_string(m->file_names[e->file]));
		json_object_object_add(o, "dtype",
			json_object_new_string(stfs_dtype_name(t->dtype)));
		json_object_object_add(o, "shape", u64_array(t->shape, t->rank));
		json_object_object_add(o, "data_offsets", u64_array(off, 2));
		json_object_object_add(o, "file_offset",
			json_object_new_uint64(stfs_entry_file_offset(m, e)));
		json_object_array_add(tensors, o);
		if (!memchr(t->name, '\0', t->name_len))
			json_object_object_add(wm, t->name,
				json_object_new_string(m->file_names[e->file]));
	}
	if (meta) {
		json_object_get(meta);
	} else {
		meta = json_object_new_object();
		if (meta)
			json_object_object_add(meta, "total_size",
					       json_object_new_uint64(total));
	}
	json_object_object_add(root, "metadata", meta);
	json_object_object_add(root, "weight_map", wm);
	json_object_object_add(root, "tensors", tensors);
	json_object_object_add(root, "shards", shards);
	wm = tensors = shards = NULL;
	s = json_object_to_json_string_length(root, JSON_C_TO_STRING_PRETTY |
					      JSON_C_TO_STRING_NOSLASHESCAPE,
					      &len);
	if (!s || !(m->index = malloc(len + 1)))
		goto nomem;
	memcpy(m->index, s, len);
	m->index[len++] = '\n';
	m->index_len = len;
	m->index_owned = 1;
	json_object_put(root);
	return rc;
nomem:
	json_object_put(root);
	json_object_put(wm);
	json_object_put(tensors);
	json_object_put(shards);
	return stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET, "out of memory");
}

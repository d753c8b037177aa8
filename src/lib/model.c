/*
 * model.c: what a mount shows, independent of FUSE.
 *
 * A model is one or more validated safetensors files (shards), the list of
 * all their tensors ("entries", sorted by name), the tree those names make
 * (tree.c), and the bytes of the reserved header file.  For a single file
 * that file is the header exactly as stored; shards (shards.c) get a
 * generated merged index.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "stfs/stfs.h"
#include "internal.h"
#include "model.h"

static int cmp_entry(const void *x, const void *y)
{
	const struct stfs_tensor *a = ((const struct stfs_entry *)x)->t;
	const struct stfs_tensor *b = ((const struct stfs_entry *)y)->t;
	int c = memcmp(a->name, b->name,
		       a->name_len < b->name_len ? a->name_len : b->name_len);

	if (c)
		return c;
	return a->name_len < b->name_len ? -1 : a->name_len > b->name_len;
}

int stfs_model_add_file(struct stfs_model *m, struct stfs_file *f,
			const char *name)
{
	struct stfs_file **files;
	char **names;

	files = realloc(m->files, (m->nfiles + 1) * sizeof(*files));
	if (!files)
		return -ENOMEM;
	m->files = files;
	names = realloc(m->file_names, (m->nfiles + 1) * sizeof(*names));
	if (!names)
		return -ENOMEM;
	m->file_names = names;
	names[m->nfiles] = strdup(name);
	if (!names[m->nfiles])
		return -ENOMEM;
	files[m->nfiles++] = f;
	return 0;
}

int stfs_model_collect(struct stfs_model *m, struct stfs_error *err)
{
	size_t n = 0;

	for (size_t i = 0; i < m->nfiles; i++)
		n += stfs_header_count(m->files[i]->header);
	if (n >= (1u << 31))
		return stfs_fail(err, -EOVERFLOW, NULL, STFS_NO_OFFSET,
				 "too many tensors (%zu)", n);
	m->entries = calloc(n ? n : 1, sizeof(*m->entries));
	if (!m->entries)
		return stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET,
				 "out of memory");
	/* in name order within each file: one file needs no sort */
	for (size_t i = 0; i < m->nfiles; i++) {
		const struct stfs_header *h = m->files[i]->header;
		for (size_t k = 0; k < stfs_header_count(h); k++) {
			m->entries[m->nentries].t =
				stfs_header_tensor_by_name(h, k);
			m->entries[m->nentries++].file = (uint32_t)i;
		}
	}
	return 0;
}

int stfs_model_build_tree(struct stfs_model *m, unsigned flags,
			  struct stfs_error *err)
{
	struct stfs_name *names;
	int rc;

	for (size_t i = 1; i < m->nentries; i++) {
		if (cmp_entry(&m->entries[i - 1], &m->entries[i]) > 0) {
			qsort(m->entries, m->nentries, sizeof(*m->entries),
			      cmp_entry);
			break;
		}
	}
	names = calloc(m->nentries ? m->nentries : 1, sizeof(*names));
	if (!names)
		return stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET,
				 "out of memory");
	for (size_t i = 0; i < m->nentries; i++) {
		names[i].s = m->entries[i].t->name;
		names[i].len = m->entries[i].t->name_len;
		names[i].views = stfs_views_for(m->entries[i].t->dtype, flags);
	}
	rc = stfs_tree_build(&m->tree, names, m->nentries, flags, err);
	free(names);
	return rc;
}

static int open_single(struct stfs_model *m, unsigned flags,
		       struct stfs_error *err)
{
	struct stfs_file *f;
	const char *base;
	int rc;

	if ((rc = stfs_file_open(m->source, &f, err)))
		return rc;
	base = strrchr(m->source, '/');
	base = base ? base + 1 : m->source;
	if ((rc = stfs_model_add_file(m, f, base))) {
		stfs_file_close(f);
		return stfs_fail(err, rc, NULL, STFS_NO_OFFSET,
				 "out of memory");
	}
	if ((rc = stfs_model_collect(m, err)) ||
	    (rc = stfs_model_build_tree(m, flags, err)))
		return rc;
	m->index = (char *)f->map + 8;
	m->index_len = f->header_len;
	return 0;
}

int stfs_model_open(const char *source, unsigned flags,
		    void (*warn)(void *ctx, const char *text), void *ctx,
		    struct stfs_model **out, struct stfs_error *err)
{
	struct stfs_model *m;
	struct stat st;
	int rc;

	*out = NULL;
	if (err)
		memset(err, 0, sizeof(*err));
	m = calloc(1, sizeof(*m));
	if (!m || !(m->source = strdup(source))) {
		free(m);
		return stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET,
				 "out of memory");
	}
	if (stat(source, &st) == 0 && S_ISDIR(st.st_mode))
		rc = stfs_shards_open_dir(m, flags, warn, ctx, err);
	else if (stfs_is_index_name(source))
		rc = stfs_shards_open_index(m, source, flags, warn, ctx, err);
	else
		rc = open_single(m, flags, err);
	if (rc) {
		stfs_model_close(m);
		return rc;
	}
	*out = m;
	return 0;
}

void stfs_model_close(struct stfs_model *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->nfiles; i++) {
		stfs_file_close(m->files[i]);
		free(m->file_names[i]);
	}
	free(m->files);
	free(m->file_names);
	free(m->entries);
	stfs_tree_free(&m->tree);
	if (m->index_owned)
		free(m->index);
	free(m->source);
	free(m);
}

uint64_t stfs_entry_file_offset(const struct stfs_model *m,
				const struct stfs_entry *e)
{
	return m->files[e->file]->data_start + e->t->begin;
}

/*
 * inspect.c: `stfs inspect [--json | -q] SOURCE`: validate a source exactly
 * as a mount would, then list every tensor with its path inside the mount,
 * dtype, shape, size and absolute offset, and totals; or (--json) the same
 * as one JSON document whose schema is in docs/inspect-json.md; or (-q)
 * nothing, with only the exit status telling whether the source is valid.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

struct totals {
	uint64_t tensors, params, bytes;
};

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

static void human_size(uint64_t n, char *out, size_t sz)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB",
					     "PiB", "EiB" };
	double v = (double)n;
	int u = 0;

	while (v >= 1024 && u < 6) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(out, sz, "%" PRIu64 " B", n);
	else
		snprintf(out, sz, "%.1f %s", v, units[u]);
}

static void count(const struct stfs_model *m, struct totals *all,
		  struct totals by[STFS_DTYPE_COUNT])
{
	for (size_t i = 0; i < m->nentries; i++) {
		const struct stfs_tensor *t = m->entries[i].t;
		struct totals *d = &by[t->dtype];
		uint64_t n = stfs_tensor_elements(t);

		d->tensors++;
		d->params = sat_add(d->params, n);
		d->bytes += t->end - t->begin;
		all->tensors++;
		all->params = sat_add(all->params, n);
		all->bytes += t->end - t->begin;
	}
}

static json_object *u64s(const uint64_t *v, size_t n)
{
	json_object *a = json_object_new_array_ext((int)n);

	for (size_t i = 0; i < n; i++)
		json_object_array_add(a, json_object_new_uint64(v[i]));
	return a;
}

static json_object *meta_obj(const struct stfs_header *h)
{
	json_object *o;

	if (!stfs_header_has_metadata(h))
		return NULL;
	o = json_object_new_object();
	for (size_t k = 0; k < stfs_header_meta_count(h); k++) {
		const struct stfs_meta *e = stfs_header_meta(h, k);
		json_object_object_add(o, e->key,
			json_object_new_string_len(e->value,
						   (int)e->value_len));
	}
	return o;
}

/* For each entry, its first view node (views of one tensor are adjacent
 * nodes), or UINT32_MAX; NULL when there are none or no memory. */
static uint32_t *first_views(const struct stfs_model *m)
{
	const struct stfs_tree *t = &m->tree;
	uint32_t *first = NULL;

	for (uint32_t k = 0; k < t->nnodes; k++) {
		const struct stfs_node *n = &t->nodes[k];
		if (!n->view)
			continue;
		if (!first) {
			first = malloc((m->nentries + 1) * sizeof(*first));
			if (!first)
				return NULL;
			memset(first, 0xff, (m->nentries + 1) * sizeof(*first));
		}
		if (first[n->entry] == UINT32_MAX)
			first[n->entry] = k;
	}
	return first;
}

static json_object *views_json(const struct stfs_model *m, size_t i,
			       uint32_t k)
{
	json_object *a = json_object_new_array();
	const struct stfs_tree *t = &m->tree;
	const struct stfs_tensor *ten = m->entries[i].t;

	for (; k < t->nnodes && t->nodes[k].entry == i && t->nodes[k].view;
	     k++) {
		enum stfs_view v = (enum stfs_view)t->nodes[k].view;
		json_object *o = json_object_new_object();
		char *path = stfs_tree_path(t, k);
		uint64_t start, size = stfs_view_size(ten, v, &start);

		json_object_object_add(o, "view",
			json_object_new_string(stfs_view_suffix(v) + 1));
		json_object_object_add(o, "path",
			json_object_new_string(path ? path : ""));
		free(path);
		json_object_object_add(o, "dtype", json_object_new_string(
			stfs_dtype_name(stfs_view_dtype(ten, v))));
		json_object_object_add(o, "bytes", json_object_new_uint64(size));
		json_object_object_add(o, "data_start",
				       json_object_new_uint64(start));
		json_object_array_add(a, o);
	}
	return a;
}

static int print_json(const struct stfs_model *m, int want_views)
{
	uint32_t *first = want_views ? first_views(m) : NULL;
	struct totals all = { 0 }, by[STFS_DTYPE_COUNT] = { { 0 } };
	json_object *root = json_object_new_object();
	json_object *files = json_object_new_array();
	json_object *tensors = json_object_new_array_ext((int)m->nentries);
	json_object *tot = json_object_new_object();
	json_object *byd = json_object_new_object();
	size_t len;
	const char *s;

	count(m, &all, by);
	json_object_object_add(root, "source",
			       json_object_new_string(m->source));
	json_object_object_add(root, "sharded",
			       json_object_new_boolean(m->sharded));
	for (size_t i = 0; i < m->nfiles; i++) {
		const struct stfs_file *f = m->files[i];
		json_object *o = json_object_new_object();

		json_object_object_add(o, "file",
			json_object_new_string(m->file_names[i]));
		json_object_object_add(o, "size", json_object_new_uint64(f->size));
		json_object_object_add(o, "header_len",
				       json_object_new_uint64(f->header_len));
		json_object_object_add(o, "metadata", meta_obj(f->header));
		json_object_array_add(files, o);
	}
	json_object_object_add(root, "files", files);
	for (size_t i = 0; i < m->nentries; i++) {
		const struct stfs_entry *e = &m->entries[i];
		const struct stfs_tensor *t = e->t;
		json_object *o = json_object_new_object();
		uint64_t off[2] = { t->begin, t->end };
		char *path = stfs_tree_path(&m->tree, m->tree.entry_node[i]);

		json_object_object_add(o, "name",
			json_object_new_string_len(t->name, (int)t->name_len));
		json_object_object_add(o, "path",
			json_object_new_string(path ? path : ""));
		free(path);
		json_object_object_add(o, "dtype",
			json_object_new_string(stfs_dtype_name(t->dtype)));
		json_object_object_add(o, "shape", u64s(t->shape, t->rank));
		json_object_object_add(o, "bytes",
			json_object_new_uint64(t->end - t->begin));
		json_object_object_add(o, "data_offsets", u64s(off, 2));
		json_object_object_add(o, "file",
			json_object_new_string(m->file_names[e->file]));
		json_object_object_add(o, "file_offset",
			json_object_new_uint64(stfs_entry_file_offset(m, e)));
		if (want_views)
			json_object_object_add(o, "views", views_json(m, i,
					       first ? first[i] : UINT32_MAX));
		json_object_array_add(tensors, o);
	}
	free(first);
	json_object_object_add(root, "tensors", tensors);
	json_object_object_add(tot, "tensors", json_object_new_uint64(all.tensors));
	json_object_object_add(tot, "parameters",
			       json_object_new_uint64(all.params));
	json_object_object_add(tot, "bytes", json_object_new_uint64(all.bytes));
	for (int d = 0; d < STFS_DTYPE_COUNT; d++) {
		json_object *o;

		if (!by[d].tensors)
			continue;
		o = json_object_new_object();
		json_object_object_add(o, "tensors",
				       json_object_new_uint64(by[d].tensors));
		json_object_object_add(o, "parameters",
				       json_object_new_uint64(by[d].params));
		json_object_object_add(o, "bytes",
				       json_object_new_uint64(by[d].bytes));
		json_object_object_add(byd, stfs_dtype_name((enum stfs_dtype)d),
				       o);
	}
	json_object_object_add(tot, "by_dtype", byd);
	json_object_object_add(root, "totals", tot);
	s = json_object_to_json_string_length(root, JSON_C_TO_STRING_PRETTY |
					      JSON_C_TO_STRING_NOSLASHESCAPE,
					      &len);
	fwrite(s, 1, len, stdout);
	putchar('\n');
	json_object_put(root);
	return 0;
}

/* Column widths count bytes; names are quoted so they print safely. */
static int print_table(const struct stfs_model *m)
{
	uint32_t *first = first_views(m);
	struct totals all = { 0 }, by[STFS_DTYPE_COUNT] = { { 0 } };
	size_t wname = 4, wpath = 4, wdt = 5, wshape = 5, wfile = 4;
	char q[256], shape[128], size[32];

	count(m, &all, by);
	for (size_t i = 0; i < m->nentries; i++) {
		const struct stfs_entry *e = &m->entries[i];
		char *path = stfs_tree_path(&m->tree, m->tree.entry_node[i]);
		size_t n;

		stfs_quote(e->t->name, e->t->name_len, q, 64);
		if (strlen(q) > wname)
			wname = strlen(q);
		if (path && strlen(path) > wpath)
			wpath = strlen(path) > 80 ? 80 : strlen(path);
		free(path);
		if (strlen(stfs_dtype_name(e->t->dtype)) > wdt)
			wdt = strlen(stfs_dtype_name(e->t->dtype));
		n = stfs_shape_str(e->t, shape, sizeof(shape));
		if (n > wshape)
			wshape = n < sizeof(shape) ? n : sizeof(shape) - 1;
		if (strlen(m->file_names[e->file]) > wfile)
			wfile = strlen(m->file_names[e->file]);
	}
	/* view paths are one suffix longer than their tensor's */
	if (first && wpath < 80)
		wpath = wpath + 8 > 80 ? 80 : wpath + 8;
	if (first && wname < 14)
		wname = 14;
	human_size(all.bytes, size, sizeof(size));
	printf("%s: %zu file%s, %" PRIu64 " tensors, %" PRIu64
	       " parameters, %s\n\n", m->source, m->nfiles,
	       m->nfiles == 1 ? "" : "s", all.tensors, all.params, size);
	printf("%-*s  %-*s  %-*s  %-*s  %14s  %14s", (int)wname, "NAME",
	       (int)wpath, "PATH", (int)wdt, "DTYPE", (int)wshape, "SHAPE",
	       "BYTES", "OFFSET");
	if (m->sharded)
		printf("  %s", "FILE");
	putchar('\n');
	for (size_t i = 0; i < m->nentries; i++) {
		const struct stfs_entry *e = &m->entries[i];
		char *path = stfs_tree_path(&m->tree, m->tree.entry_node[i]);

		stfs_quote(e->t->name, e->t->name_len, q, 64);
		if (stfs_shape_str(e->t, shape, sizeof(shape)) >= sizeof(shape))
			strcpy(shape + sizeof(shape) - 5, "...]");
		printf("%-*s  %-*s  %-*s  %-*s  %14" PRIu64 "  %14" PRIu64,
		       (int)wname, q, (int)wpath, path ? path : "?", (int)wdt,
		       stfs_dtype_name(e->t->dtype), (int)wshape, shape,
		       e->t->end - e->t->begin, stfs_entry_file_offset(m, e));
		if (m->sharded)
			printf("  %s", m->file_names[e->file]);
		putchar('\n');
		free(path);
		for (uint32_t k = first ? first[i] : UINT32_MAX;
		     k < m->tree.nnodes && m->tree.nodes[k].entry == i &&
		     m->tree.nodes[k].view; k++) {
			enum stfs_view v = (enum stfs_view)m->tree.nodes[k].view;
			char *vp = stfs_tree_path(&m->tree, k);
			char vn[32];

			snprintf(vn, sizeof(vn), "  + %s view",
				 stfs_view_suffix(v) + 1);
			printf("%-*s  %-*s  %-*s  %-*s  %14" PRIu64 "\n",
			       (int)wname, vn, (int)wpath, vp ? vp : "?",
			       (int)wdt,
			       stfs_dtype_name(stfs_view_dtype(e->t, v)),
			       (int)wshape, shape,
			       stfs_view_size(e->t, v, NULL));
			free(vp);
		}
	}
	free(first);
	printf("\n%-8s %10s %20s %14s\n", "DTYPE", "TENSORS", "PARAMETERS",
	       "BYTES");
	for (int d = 0; d < STFS_DTYPE_COUNT; d++) {
		if (!by[d].tensors)
			continue;
		human_size(by[d].bytes, size, sizeof(size));
		printf("%-8s %10" PRIu64 " %20" PRIu64 " %14s\n",
		       stfs_dtype_name((enum stfs_dtype)d), by[d].tensors,
		       by[d].params, size);
	}
	human_size(all.bytes, size, sizeof(size));
	printf("%-8s %10" PRIu64 " %20" PRIu64 " %14s\n", "total",
	       all.tensors, all.params, size);
	for (size_t i = 0; i < m->nfiles; i++) {
		const struct stfs_header *h = m->files[i]->header;
		for (size_t k = 0; k < stfs_header_meta_count(h); k++) {
			const struct stfs_meta *e = stfs_header_meta(h, k);
			char v[256];
			if (k == 0)
				printf("\n__metadata__%s%s:\n",
				       m->sharded ? " of " : "",
				       m->sharded ? m->file_names[i] : "");
			stfs_quote(e->key, e->key_len, q, 64);
			stfs_quote(e->value, e->value_len, v, sizeof(v));
			printf("  %s = %s\n", q, v);
		}
	}
	return 0;
}

/* Print a libstfs warning as "stfs: SOURCE: warning: ...". */
void stfs_warn_stderr(void *ctx, const char *text)
{
	fprintf(stderr, "stfs: %s: warning: %s\n", (const char *)ctx, text);
}

int stfs_inspect_main(int argc, char **argv)
{
	struct stfs_model *m;
	struct stfs_error err;
	const char *src = NULL;
	int json = 0, quiet = 0;
	unsigned flags = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			json = 1;
		} else if (strcmp(argv[i], "-q") == 0 ||
			   strcmp(argv[i], "--quiet") == 0) {
			quiet = 1;
		} else if (strcmp(argv[i], "--flat") == 0) {
			flags |= STFS_TREE_FLAT;
		} else if (strcmp(argv[i], "--npy") == 0) {
			flags |= STFS_TREE_NPY;
		} else if (strcmp(argv[i], "--convert=f32") == 0) {
			flags |= STFS_TREE_F32;
		} else if (strcmp(argv[i], "-h") == 0 ||
			   strcmp(argv[i], "--help") == 0) {
			stfs_usage(stdout);
			return 0;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "stfs: inspect: unknown option %s\n",
				argv[i]);
			return 2;
		} else if (!src) {
			src = argv[i];
		} else {
			fprintf(stderr, "stfs: inspect: one SOURCE only\n");
			return 2;
		}
	}
	if (!src) {
		fprintf(stderr, "usage: stfs inspect [--json | -q] [--flat] "
			"[--npy] [--convert=f32] SOURCE\n");
		return 2;
	}
	if (stfs_model_open(src, flags,
			    quiet ? NULL : stfs_warn_stderr, (void *)src, &m,
			    &err)) {
		if (!quiet)
			fprintf(stderr, "stfs: %s: %s\n", src, err.msg);
		return 1;
	}
	if (!quiet) {
		if (json)
			print_json(m, !!(flags & (STFS_TREE_NPY |
						  STFS_TREE_F32)));
		else
			print_table(m);
	}
	stfs_model_close(m);
	return fflush(stdout) == 0 ? 0 : 1;
}

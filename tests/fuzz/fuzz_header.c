/*
 * fuzz_header.c: libFuzzer harness for the header parser and the name
 * mapping.  The input is the N header bytes.  Whatever it is, the parser
 * must not crash, leak or read out of bounds; when it accepts, the header
 * re-written as JSON by libstfs's own writer (jsonw.c, which writes the
 * merged index, inspect --json and the virtual files' headers) must parse
 * to the same tensors, compact and pretty (writer and parser agree on
 * every name and value), and every tensor must be found again at its path
 * in the tree, with its .npy and .f32 views beside it, each under a legal
 * name.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stfs/stfs.h"
#include "format.h"
#include "tree.h"

static void check_same(const struct stfs_header *a,
		       const struct stfs_header *b)
{
	if (stfs_header_count(a) != stfs_header_count(b) ||
	    stfs_header_meta_count(a) != stfs_header_meta_count(b))
		abort();
	for (size_t i = 0; i < stfs_header_count(a); i++) {
		const struct stfs_tensor *x = stfs_header_tensor(a, i);
		const struct stfs_tensor *y = stfs_header_tensor(b, i);
		if (x->name_len != y->name_len ||
		    memcmp(x->name, y->name, x->name_len) ||
		    x->dtype != y->dtype || x->rank != y->rank ||
		    x->begin != y->begin || x->end != y->end ||
		    (x->rank && memcmp(x->shape, y->shape,
				       x->rank * sizeof(uint64_t))))
			abort();
	}
}

static void check_tree(const struct stfs_header *h, unsigned flags)
{
	size_t n = stfs_header_count(h);
	struct stfs_name *names = calloc(n + 1, sizeof(*names));
	struct stfs_tree t;

	for (size_t i = 0; i < n; i++) {
		names[i].s = stfs_header_tensor(h, i)->name;
		names[i].len = stfs_header_tensor(h, i)->name_len;
		names[i].extras = stfs_views_for(stfs_header_tensor(h, i)->dtype,
						STFS_TREE_NPY | STFS_TREE_F32);
	}
	static const char *const sfx[STFS_TREE_SUFFIX_MAX] = {
		NULL, ".npy", ".f32", ".f32.npy",
	};

	if (stfs_tree_build(&t, names, n, flags, sfx, NULL) != 0)
		abort();
	/* every node, views included: found under its own name, its name
	 * a legal component; each tensor has each of its views once */
	size_t want_views = 0, got_views = 0;

	for (size_t i = 0; i < n; i++)
		want_views += (size_t)__builtin_popcount(names[i].extras);
	for (uint32_t k = 1; k < t.nnodes; k++) {
		const struct stfs_node *nd = &t.nodes[k];

		got_views += nd->extra != 0;
		if (nd->name_len == 0 || nd->name_len > STFS_NAME_MAX ||
		    memchr(nd->name, '/', nd->name_len) ||
		    memchr(nd->name, '\0', nd->name_len) ||
		    stfs_tree_lookup(&t, nd->parent, nd->name,
				     nd->name_len) != k)
			abort();
		if (nd->entry != STFS_NODE_DIR &&
		    (nd->entry >= n || (nd->extra &&
		     !(names[nd->entry].extras & (1u << nd->extra))) ||
		     t.nodes[t.entry_node[nd->entry]].parent != nd->parent))
			abort();
	}
	if (got_views != want_views)
		abort();
	for (size_t i = 0; i < n; i++) {
		char *path = stfs_tree_path(&t, t.entry_node[i]);
		char *save = NULL, *c;
		int64_t node = 0;

		for (c = strtok_r(path, "/", &save); c;
		     c = strtok_r(NULL, "/", &save)) {
			if (strlen(c) > STFS_NAME_MAX || !strcmp(c, ".") ||
			    !strcmp(c, ".."))
				abort();
			node = stfs_tree_lookup(&t, (uint32_t)node, c,
						strlen(c));
			if (node < 0)
				abort();
		}
		if (t.nodes[node].entry != i)
			abort();
		free(path);
	}
	stfs_tree_free(&t);
	free(names);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct stfs_header *h, *h2;
	struct stfs_error err;

	if (stfs_header_parse((const char *)data, size, STFS_DATA_LEN_ANY, 8,
			      &h, &err) != 0) {
		if (!err.msg[0])
			abort();
		return 0;
	}
	for (int pretty = 0; pretty < 2; pretty++) {
		struct stfs_jw w;
		size_t len;
		char *text;

		stfs_jw_init(&w, pretty);
		stfs_jw_begin(&w, '{');
		if (stfs_header_has_metadata(h)) {
			stfs_jw_key(&w, "__metadata__", 12);
			stfs_jw_begin(&w, '{');
			for (size_t i = 0; i < stfs_header_meta_count(h); i++) {
				const struct stfs_meta *m =
					stfs_header_meta(h, i);
				stfs_jw_key(&w, m->key, m->key_len);
				stfs_jw_str(&w, m->value, m->value_len);
			}
			stfs_jw_end(&w, '}');
		}
		for (size_t i = 0; i < stfs_header_count(h); i++) {
			const struct stfs_tensor *t = stfs_header_tensor(h, i);

			stfs_jw_tensor(&w, t->name, t->name_len, t->dtype,
				       t->shape, t->rank, t->begin, t->end);
		}
		stfs_jw_end(&w, '}');
		if (!(text = stfs_jw_finish(&w, &len)))
			abort();
		if (stfs_header_parse(text, len, stfs_header_data_len(h), 8,
				      &h2, &err) != 0)
			abort();
		free(text);
		check_same(h, h2);
		stfs_header_free(h2);
	}
	check_tree(h, 0);
	check_tree(h, STFS_TREE_FLAT);
	stfs_header_free(h);
	return 0;
}

/*
 * nodes.c: the nodes of a mount, numbered for the FUSE side: the tree of
 * tensors (tree.c) with the header file, the virtual files (virtual.c)
 * past its nodes, and the repository (repo.c) past those.  %repo/ is a
 * child of the root (listed with the virtual files); with STFS_TREE_REPO the repository's folder and the
 * tensors' root trade numbers, so the repository is the root and the
 * tensors are %tensors/ in it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "content.h"
#include "model.h"

static int tree_node(const struct stfs_model *m, uint32_t node,
		    struct stfs_node_info *out)
{
	const struct stfs_node *n;

	uint32_t dir;
	enum stfs_virtual kind;

	memset(out, 0, sizeof(*out));
	if (stfs_virtual_decode(m, node, &dir, &kind)) {
		out->kind = STFS_NODE_KIND_VIRTUAL;
		out->parent = dir;
		out->virt = kind;
		out->name = stfs_virtual_name(kind);
		out->name_len = strlen(out->name);
		return 0;
	}
	if (node >= m->tree.nnodes)
		return -ENOENT;
	n = &m->tree.nodes[node];
	out->parent = n->parent;
	out->name = n->name;
	out->name_len = n->name_len;
	if (n->entry == STFS_NODE_DIR) {
		out->kind = STFS_NODE_KIND_DIR;
		out->children = n->count + stfs_virtual_count(m, node);
		out->subdirs = n->subdirs;
	} else if (n->entry == m->nentries) {
		out->kind = STFS_NODE_KIND_HEADER;
		out->size = m->index ? m->index_len : m->files[0]->doc ?
			    m->files[0]->doc_len : m->files[0]->header_len;
	} else {
		out->kind = STFS_NODE_KIND_TENSOR;
		out->tensor = n->entry;
		out->view = (enum stfs_view)n->extra;
		out->size = stfs_view_size(m->entries[n->entry].t, out->view,
					   NULL);
	}
	return 0;
}

static int tree_node_size(const struct stfs_model *m, uint32_t node,
			 uint64_t *size)
{
	struct stfs_node_info ni;
	int rc;

	*size = 0;
	if (node >= m->tree.nnodes)
		return stfs_virtual_size((struct stfs_model *)m, node, size);
	if ((rc = tree_node(m, node, &ni)))
		return rc;
	*size = ni.size;
	return 0;
}

static int64_t tree_child(const struct stfs_model *m, uint32_t dir,
			 uint32_t k)
{
	const struct stfs_node *d;

	if (dir >= m->tree.nnodes)
		return -ENOENT;
	d = &m->tree.nodes[dir];
	if (d->entry != STFS_NODE_DIR)
		return -ENOENT;
	if (k >= d->count)
		return stfs_virtual_child(m, dir, k - d->count);
	return m->tree.children[d->first + k];
}

static int64_t tree_lookup(const struct stfs_model *m, uint32_t dir,
			  const char *name, size_t len)
{
	int64_t n = stfs_tree_lookup(&m->tree, dir, name, len);

	if (n == -ENOENT && len > 1 && name[0] == '%')
		return stfs_virtual_lookup(m, dir, name, len);
	return n;
}

size_t stfs_model_tensor_views(const struct stfs_model *m, size_t i,
			       uint32_t *nodes)
{
	const struct stfs_tree *t = &m->tree;
	size_t n = 0;

	if (!m->first_view || i >= m->nentries)
		return 0;
	for (uint32_t k = m->first_view[i]; k < t->nnodes &&
	     t->nodes[k].entry == i && t->nodes[k].extra; k++)
		nodes[n++] = k;
	return n;
}

static char *tree_path(const struct stfs_model *m, uint32_t node)
{
	uint32_t dir;
	enum stfs_virtual kind;
	char *d, *p;

	if (!stfs_virtual_decode(m, node, &dir, &kind))
		return stfs_tree_path(&m->tree, node);
	if (!(d = stfs_tree_path(&m->tree, dir)))
		return NULL;
	if (asprintf(&p, "%s%s%s", d, *d ? "/" : "",
		     stfs_virtual_name(kind)) < 0)
		p = NULL;
	free(d);
	return p;
}

static int tree_content(const struct stfs_model *m, uint32_t node,
		       struct stfs_content **out)
{
	struct stfs_node_info ni;
	const struct stfs_entry *e;
	const struct stfs_file *f;
	struct stfs_content *c;
	int rc;

	*out = NULL;
	if (node >= m->tree.nnodes)
		return stfs_virtual_content((struct stfs_model *)m, node, out);
	if ((rc = tree_node(m, node, &ni)))
		return rc;
	switch (ni.kind) {
	case STFS_NODE_KIND_DIR:
		return -EISDIR;
	case STFS_NODE_KIND_VIRTUAL:
	case STFS_NODE_KIND_REPO:
		return -ENOENT;         /* not reached */
	case STFS_NODE_KIND_HEADER:
		if (!(c = stfs_content_new()))
			return -ENOMEM;
		f = m->files[0];
		rc = m->index ?
		     stfs_content_add_inline(c, m->index, m->index_len, 0) :
		     f->doc ? stfs_content_add_inline(c, f->doc, f->doc_len, 0) :
		     stfs_content_add_range(c, f->src, 8, f->header_len);
		if (rc) {
			stfs_content_free(c);
			return rc;
		}
		*out = c;
		return 0;
	case STFS_NODE_KIND_TENSOR:
		break;
	}
	e = &m->entries[ni.tensor];
	f = m->files[e->file];
	return stfs_content_view(e->t, ni.view, f->src,
				 f->data_start + e->t->begin, out);
}

/* ---- the numbering the callers see ------------------------------------- */

static int repo_root(const struct stfs_model *m)
{
	return (m->flags & STFS_TREE_REPO) && m->repo;
}

/* Outside <-> inside numbers (its own inverse). */
static uint32_t swap(const struct stfs_model *m, uint32_t n)
{
	uint32_t rb = stfs_repo_base(m);

	if (!repo_root(m))
		return n;
	return n == 0 ? rb : n == rb ? 0 : n;
}

/* %repo/ is in the root's listing with the virtual files (show_virtual):
 * a walk of the mount (find, du, a backup, os.walk over the tensors)
 * does not meet every weight twice; it is always there by name. */
static int repo_listed(const struct stfs_model *m)
{
	return m->repo && !repo_root(m) && (m->flags & STFS_TREE_LIST_VIRTUAL);
}

static int is_repo(const struct stfs_model *m, uint32_t n)
{
	uint32_t rb = stfs_repo_base(m);

	return rb != UINT32_MAX && n >= rb && n - rb < stfs_repo_count(m);
}

static int is_name(const char *name, size_t len, const char *s)
{
	return strlen(s) == len && !memcmp(name, s, len);
}

uint32_t stfs_model_node_count(const struct stfs_model *m)
{
	return m->tree.nnodes + stfs_repo_count(m);
}

int stfs_model_node(const struct stfs_model *m, uint32_t node,
		    struct stfs_node_info *out)
{
	uint32_t n = swap(m, node), rb = stfs_repo_base(m);
	int rc;

	if (is_repo(m, n)) {
		stfs_repo_node(m, n - rb, out);
		out->parent = n == rb ? (repo_root(m) ? rb : 0) :
			      out->parent + rb;
		if (n == rb && repo_root(m)) {
			out->name = "";
			out->name_len = 0;
			out->children++;        /* %tensors/ */
			out->subdirs++;
		}
	} else {
		if ((rc = tree_node(m, n, out)))
			return rc;
		if (n == 0 && repo_root(m)) {
			out->name = STFS_TENSORS_DIR;
			out->name_len = strlen(STFS_TENSORS_DIR);
			out->parent = rb;
		} else if (n == 0 && repo_listed(m)) {
			out->children++;        /* %repo/ */
			out->subdirs++;
		}
	}
	out->parent = swap(m, out->parent);
	return 0;
}

int stfs_model_node_size(const struct stfs_model *m, uint32_t node,
			 uint64_t *size)
{
	uint32_t n = swap(m, node);
	struct stfs_node_info ni;

	if (!is_repo(m, n))
		return tree_node_size(m, n, size);
	stfs_repo_node(m, n - stfs_repo_base(m), &ni);
	*size = ni.size;
	return 0;
}

int64_t stfs_model_child(const struct stfs_model *m, uint32_t dir,
			 uint32_t k)
{
	uint32_t n = swap(m, dir), rb = stfs_repo_base(m);
	struct stfs_node_info ni;
	int64_t c;

	if (is_repo(m, n)) {
		stfs_repo_node(m, n - rb, &ni);
		if (n == rb && repo_root(m) && k == ni.children)
			c = 0;
		else if ((c = stfs_repo_child(m, n - rb, k)) >= 0)
			c += rb;
	} else if (n == 0 && repo_listed(m)) {
		if (tree_node(m, 0, &ni))
			return -ENOENT;
		c = k == ni.children ? rb : tree_child(m, 0, k);
	} else {
		c = tree_child(m, n, k);
	}
	return c < 0 ? c : swap(m, (uint32_t)c);
}

int64_t stfs_model_lookup(const struct stfs_model *m, uint32_t dir,
			  const char *name, size_t len)
{
	uint32_t n = swap(m, dir), rb = stfs_repo_base(m);
	int64_t c;

	if (is_repo(m, n)) {
		if (n == rb && repo_root(m) &&
		    is_name(name, len, STFS_TENSORS_DIR))
			c = 0;
		else if ((c = stfs_repo_lookup(m, n - rb, name, len)) >= 0)
			c += rb;
	} else if (n == 0 && m->repo && !repo_root(m) &&
		   is_name(name, len, STFS_REPO_DIR)) {
		c = rb;
	} else {
		c = tree_lookup(m, n, name, len);
	}
	return c < 0 ? c : swap(m, (uint32_t)c);
}

char *stfs_model_node_path(const struct stfs_model *m, uint32_t node)
{
	uint32_t n = swap(m, node);
	char *p, *q;

	if (is_repo(m, n)) {
		if (!(p = stfs_repo_path(m, n - stfs_repo_base(m))) ||
		    repo_root(m))
			return p;
		if (asprintf(&q, "%s%s%s", STFS_REPO_DIR, *p ? "/" : "", p) < 0)
			q = NULL;
	} else {
		if (!(p = tree_path(m, n)) || !repo_root(m))
			return p;
		if (asprintf(&q, "%s%s%s", STFS_TENSORS_DIR, *p ? "/" : "",
			     p) < 0)
			q = NULL;
	}
	free(p);
	return q;
}

void stfs_model_node_error(const struct stfs_model *m, uint32_t node,
			   int code, char *out, size_t outsz)
{
	uint32_t n = swap(m, node);

	if (is_repo(m, n))
		stfs_repo_error(m, n - stfs_repo_base(m), code, out, outsz);
	else
		stfs_virtual_error(m, n, code, out, outsz);
}

int stfs_model_content(const struct stfs_model *m, uint32_t node,
		       struct stfs_content **out)
{
	uint32_t n = swap(m, node);

	if (is_repo(m, n))
		return stfs_repo_content(m, n - stfs_repo_base(m), out);
	return tree_content(m, n, out);
}

const char *stfs_model_node_revision(const struct stfs_model *m,
				     uint32_t node)
{
	uint32_t n = swap(m, node);

	if (!is_repo(m, n))
		return NULL;
	return stfs_repo_revision(m, n - stfs_repo_base(m));
}

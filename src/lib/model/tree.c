/*
 * tree.c: the directory tree a set of tensor names becomes.
 *
 * Design.  A mount is immutable, so the tree is built once, as flat
 * arrays, and never changes: node i is inode i + 1 in the filesystem, the
 * children of a directory are one sorted run in `children` (binary search
 * for lookup, stable order for readdir), and no node is ever freed before
 * unmount, so the FUSE side needs no forget bookkeeping.
 *
 * Building is deterministic: it depends only on the set of names, never on
 * their order in the header.  Names are visited in byte order, in two
 * passes.  Pass 1 creates every directory (every proper prefix of every
 * path).  Pass 2 places every tensor: normally as the last component of its
 * path; as "%self" inside the directory when its path is also a directory
 * (`a.b` beside `a.b.c`); and, should the path still be taken (only a
 * collision of the 64-bit hash of an over-long component can do that), with
 * a "%nK" suffix, K = 2, 3, ...  So every tensor has exactly one path.
 * Pass 3 adds each name's extra files (the model's views: .npy, .f32)
 * beside it, after every name is placed, so an extra never takes a
 * name's place.  Literal names (the model's header file) go to the root
 * as they are, before anything else.
 *
 * A temporary hash table on (parent, name) finds nodes while building; it
 * is freed afterwards.  Memory is about 32 bytes per node plus the names.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stfs/stfs.h"
#include "format.h"
#include "tree.h"

struct builder {
	struct stfs_tree *t;
	uint32_t cap;           /* nodes allocated */
	size_t *name_off;       /* node -> offset in names while building */
	size_t names_used, names_cap;
	uint32_t *slots;        /* hash table of node + 1, 0 = empty */
	size_t nslots;
};

static uint64_t slot_hash(uint32_t parent, const char *s, size_t len)
{
	return stfs_hash64(s, len) ^ ((uint64_t)parent * 0x9e3779b97f4a7c15ULL);
}

static const char *bname(const struct builder *b, uint32_t node)
{
	return b->t->names + b->name_off[node];
}

/* Node called s in parent, or UINT32_MAX; *slot is where it would go. */
static uint32_t find(const struct builder *b, uint32_t parent, const char *s,
		     size_t len, size_t *slot)
{
	size_t mask = b->nslots - 1;
	size_t i = slot_hash(parent, s, len) & mask;

	for (;; i = (i + 1) & mask) {
		uint32_t v = b->slots[i];
		const struct stfs_node *n;

		if (!v) {
			*slot = i;
			return UINT32_MAX;
		}
		n = &b->t->nodes[v - 1];
		if (n->parent == parent && n->name_len == len &&
		    memcmp(bname(b, v - 1), s, len) == 0)
			return v - 1;
	}
}

static int rehash(struct builder *b)
{
	size_t n = b->nslots * 2;
	uint32_t *s = calloc(n, sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (uint32_t k = 1; k < b->t->nnodes; k++) {
		const struct stfs_node *nd = &b->t->nodes[k];
		size_t i = slot_hash(nd->parent, bname(b, k), nd->name_len) &
			   (n - 1);
		while (s[i])
			i = (i + 1) & (n - 1);
		s[i] = k + 1;
	}
	free(b->slots);
	b->slots = s;
	b->nslots = n;
	return 0;
}

static int add_node(struct builder *b, uint32_t parent, const char *s,
		    size_t len, uint32_t entry, uint32_t *out)
{
	struct stfs_tree *t = b->t;
	size_t slot;
	int rc;

	if (t->nnodes >= UINT32_MAX - 2)
		return -EOVERFLOW;
	if (t->nnodes == b->cap) {
		uint32_t ncap = b->cap * 2;
		void *p = realloc(t->nodes, ncap * sizeof(*t->nodes));
		if (!p)
			return -ENOMEM;
		stfs_hint_huge(&((struct stfs_node *)p)[b->cap],
			       (ncap - b->cap) * sizeof(*t->nodes), 0);
		t->nodes = p;
		p = realloc(b->name_off, ncap * sizeof(*b->name_off));
		if (!p)
			return -ENOMEM;
		b->name_off = p;
		b->cap = ncap;
	}
	if (b->names_used + len + 1 > b->names_cap) {
		size_t ncap = b->names_cap * 2 + len + 1;
		char *p = realloc(t->names, ncap);
		if (!p)
			return -ENOMEM;
		stfs_hint_huge(p + b->names_cap, ncap - b->names_cap, 0);
		t->names = p;
		b->names_cap = ncap;
	}
	memcpy(t->names + b->names_used, s, len);
	t->names[b->names_used + len] = '\0';
	b->name_off[t->nnodes] = b->names_used;
	b->names_used += len + 1;
	t->nodes[t->nnodes] = (struct stfs_node){
		.parent = parent, .entry = entry, .name_len = (uint16_t)len,
	};
	find(b, parent, s, len, &slot);
	b->slots[slot] = t->nnodes + 1;
	*out = t->nnodes++;
	if ((size_t)t->nnodes * 2 > b->nslots && (rc = rehash(b)))
		return rc;
	return 0;
}

/*
 * Components of a name: split on '.', at most STFS_MAX_DEPTH of them; the
 * last takes the rest of the name with its dots escaped.  Calls fn for
 * each with the escaped text; stops early when fn returns non-zero.
 */
typedef int (*comp_fn)(struct builder *b, void *ctx, const char *c,
		       size_t len, int last);

static int walk_components(struct builder *b, const struct stfs_name *nm,
			   unsigned flags, comp_fn fn, void *ctx)
{
	char buf[STFS_NAME_MAX + 1];
	size_t start = 0, depth = 0;
	int rc;

	if (nm->literal)
		return fn(b, ctx, nm->s, nm->len, 1);
	if (flags & STFS_TREE_FLAT) {
		size_t n = stfs_name_component(nm->s, nm->len, 0, buf);
		return fn(b, ctx, buf, n, 1);
	}
	for (;;) {
		const char *dot;
		size_t n;

		depth++;
		dot = depth < STFS_MAX_DEPTH ?
		      memchr(nm->s + start, '.', nm->len - start) : NULL;
		if (!dot) {
			n = stfs_name_component(nm->s + start, nm->len - start,
						1, buf);
			return fn(b, ctx, buf, n, 1);
		}
		n = stfs_name_component(nm->s + start,
					(size_t)(dot - (nm->s + start)), 0,
					buf);
		if ((rc = fn(b, ctx, buf, n, 0)))
			return rc;
		start = (size_t)(dot - nm->s) + 1;
	}
}

struct walk {
	uint32_t dir;
	uint32_t entry;
};

/* Pass 1: make the directories on the way. */
static int mkdirs(struct builder *b, void *ctx, const char *c, size_t len,
		  int last)
{
	struct walk *w = ctx;
	size_t slot;
	uint32_t n;

	if (last)
		return 0;
	n = find(b, w->dir, c, len, &slot);
	if (n == UINT32_MAX) {
		int rc = add_node(b, w->dir, c, len, STFS_NODE_DIR, &n);
		if (rc)
			return rc;
	}
	w->dir = n;
	return 0;
}

/* Pass 2: place the tensor itself. */
static int place(struct builder *b, void *ctx, const char *c, size_t len,
		 int last)
{
	struct walk *w = ctx;
	char name[STFS_NAME_MAX + 1];
	size_t slot;
	uint32_t n;

	n = find(b, w->dir, c, len, &slot);
	if (!last) {
		w->dir = n;    /* made in pass 1 */
		return 0;
	}
	if (n != UINT32_MAX && b->t->nodes[n].entry == STFS_NODE_DIR) {
		w->dir = n;
		c = STFS_SELF_NAME;
		len = strlen(STFS_SELF_NAME);
		n = find(b, w->dir, c, len, &slot);
	}
	if (n != UINT32_MAX) {
		char base[STFS_NAME_MAX + 1];
		size_t blen = len;

		memcpy(base, c, len);
		for (unsigned k = 2; n != UINT32_MAX; k++) {
			char sfx[16];
			int sl = snprintf(sfx, sizeof(sfx), "%%n%u", k);
			size_t keep = blen;

			if (keep + (size_t)sl > STFS_NAME_MAX)
				keep = STFS_NAME_MAX - (size_t)sl;
			memcpy(name, base, keep);
			memcpy(name + keep, sfx, (size_t)sl);
			len = keep + (size_t)sl;
			n = find(b, w->dir, name, len, &slot);
		}
		c = name;
	}
	return add_node(b, w->dir, c, len, w->entry, &n);
}

/*
 * Pass 3: the views of a tensor, beside its file (node raw): the file's
 * name plus the view's suffix ("weight.npy", "%self.f32").  A name over
 * 255 bytes keeps a prefix, "%h" and the 16-digit hash of the file's name;
 * a name already taken (only flat mode can do that: a tensor "w.npy"
 * beside "w") gets "%vK" before the suffix, K = 1, 2, ...
 */
static int place_views(struct builder *b, uint32_t raw, uint32_t entry,
		       unsigned views, const char *const *suffixes)
{
	const struct stfs_node *r = &b->t->nodes[raw];
	uint32_t dir = r->parent;
	char base[STFS_NAME_MAX + 1], name[STFS_NAME_MAX + 1];
	size_t blen = r->name_len;

	memcpy(base, bname(b, raw), blen);
	for (unsigned v = 1; v < STFS_TREE_SUFFIX_MAX; v++) {
		const char *sfx;
		size_t sl, len, slot;
		uint32_t n;
		int rc;

		if (!(views & (1u << v)) || !(sfx = suffixes[v]))
			continue;
		sl = strlen(sfx);
		for (unsigned k = 0;; k++) {
			char tag[40] = "";
			size_t tl = 0, keep = blen;

			if (k)
				tl = (size_t)snprintf(tag, sizeof(tag),
						      "%%v%u", k);
			if (keep + tl + sl > STFS_NAME_MAX) {
				keep = STFS_NAME_MAX - sl - tl - 18;
				tl = (size_t)snprintf(tag, sizeof(tag),
					"%%h%016llx%s", (unsigned long long)
					stfs_hash64(base, blen),
					k ? "%v" : "");
				if (k)
					tl += (size_t)snprintf(tag + tl,
						sizeof(tag) - tl, "%u", k);
			}
			memcpy(name, base, keep);
			memcpy(name + keep, tag, tl);
			memcpy(name + keep + tl, sfx, sl);
			len = keep + tl + sl;
			if (find(b, dir, name, len, &slot) == UINT32_MAX)
				break;
		}
		if ((rc = add_node(b, dir, name, len, entry, &n)))
			return rc;
		b->t->nodes[n].extra = (uint16_t)v;
	}
	return 0;
}

static int cmp_idx(const void *x, const void *y, void *ctx)
{
	const struct stfs_name *names = ctx;
	const struct stfs_name *a = &names[*(const uint32_t *)x];
	const struct stfs_name *b = &names[*(const uint32_t *)y];
	return stfs_bytes_cmp(a->s, a->len, b->s, b->len);
}

static int cmp_child(const void *x, const void *y, void *ctx)
{
	const struct stfs_tree *t = ctx;
	const struct stfs_node *a = &t->nodes[*(const uint32_t *)x];
	const struct stfs_node *b = &t->nodes[*(const uint32_t *)y];
	return stfs_bytes_cmp(a->name, a->name_len, b->name, b->name_len);
}

static int finish(struct builder *b)
{
	struct stfs_tree *t = b->t;
	uint32_t *fill;

	for (uint32_t i = 0; i < t->nnodes; i++)
		t->nodes[i].name = t->names + b->name_off[i];
	t->children = malloc(((size_t)t->nnodes + 1) * sizeof(uint32_t));
	fill = calloc((size_t)t->nnodes + 1, sizeof(uint32_t));
	if (!t->children || !fill) {
		free(fill);
		return -ENOMEM;
	}
	for (uint32_t i = 1; i < t->nnodes; i++) {
		struct stfs_node *p = &t->nodes[t->nodes[i].parent];
		p->count++;
		if (t->nodes[i].entry == STFS_NODE_DIR)
			p->subdirs++;
	}
	for (uint32_t i = 0, at = 0; i < t->nnodes; i++) {
		t->nodes[i].first = at;
		at += t->nodes[i].count;
	}
	for (uint32_t i = 1; i < t->nnodes; i++) {
		struct stfs_node *p = &t->nodes[t->nodes[i].parent];
		t->children[p->first + fill[t->nodes[i].parent]++] = i;
	}
	free(fill);
	for (uint32_t i = 0; i < t->nnodes; i++) {
		uint32_t *c = t->children + t->nodes[i].first;

		for (uint32_t k = 1; k < t->nodes[i].count; k++) {
			if (cmp_child(&c[k - 1], &c[k], t) > 0) {
				qsort_r(c, t->nodes[i].count, sizeof(*c),
					cmp_child, t);
				break;
			}
		}
	}
	return 0;
}

int stfs_tree_build(struct stfs_tree *t, const struct stfs_name *names,
		    size_t n, unsigned flags, const char *const *suffixes,
		    struct stfs_error *err)
{
	struct builder b = { .t = t };
	uint32_t *order = NULL;
	uint32_t root;
	int rc = -ENOMEM;

	memset(t, 0, sizeof(*t));
	if (n >= (1u << 31))
		return stfs_fail(err, -EOVERFLOW, NULL, STFS_NO_OFFSET,
				 "too many tensors (%zu)", n);
	b.cap = 64;
	b.nslots = 128;
	b.names_cap = 4096;
	t->nodes = malloc(b.cap * sizeof(*t->nodes));
	b.name_off = malloc(b.cap * sizeof(*b.name_off));
	t->names = malloc(b.names_cap);
	b.slots = calloc(b.nslots, sizeof(*b.slots));
	order = malloc((n ? n : 1) * sizeof(*order));
	t->entry_node = malloc((n ? n : 1) * sizeof(*t->entry_node));
	if (!t->nodes || !b.name_off || !t->names || !b.slots || !order ||
	    !t->entry_node)
		goto out;
	if ((rc = add_node(&b, 0, "", 0, STFS_NODE_DIR, &root)))
		goto out;

	for (size_t i = 0; i < n; i++)
		order[i] = (uint32_t)i;
	/* a model passes its names sorted already: check, do not re-sort */
	for (size_t i = 1; i < n; i++) {
		if (cmp_idx(&order[i - 1], &order[i], (void *)names) > 0) {
			qsort_r(order, n, sizeof(*order), cmp_idx,
				(void *)names);
			break;
		}
	}

	for (size_t i = 0; i < n; i++) {
		struct walk w = { .dir = 0 };
		if ((rc = walk_components(&b, &names[order[i]], flags, mkdirs,
					  &w)))
			goto out;
	}
	for (int literal = 1; literal >= 0; literal--) {   /* literals first */
		for (size_t i = 0; i < n; i++) {
			struct walk w = { .dir = 0, .entry = order[i] };
			if (!names[order[i]].literal != !literal)
				continue;
			if ((rc = walk_components(&b, &names[order[i]], flags,
						  place, &w)))
				goto out;
			t->entry_node[order[i]] = t->nnodes - 1;
		}
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t e = order[i];
		if (names[e].extras &&
		    (rc = place_views(&b, t->entry_node[e], e,
				      names[e].extras, suffixes)))
			goto out;
	}
	rc = finish(&b);
out:
	free(order);
	free(b.slots);
	free(b.name_off);
	if (rc) {
		stfs_fail(err, rc, NULL, STFS_NO_OFFSET,
			  "cannot build the tree: %s", strerror(-rc));
		stfs_tree_free(t);
	}
	return rc;
}

void stfs_tree_free(struct stfs_tree *t)
{
	if (!t)
		return;
	free(t->nodes);
	free(t->children);
	free(t->entry_node);
	free(t->names);
	memset(t, 0, sizeof(*t));
}

int64_t stfs_tree_lookup(const struct stfs_tree *t, uint32_t dir,
			 const char *name, size_t len)
{
	const struct stfs_node *d;
	size_t lo = 0, hi;

	if (dir >= t->nnodes)
		return -ENOENT;
	d = &t->nodes[dir];
	if (d->entry != STFS_NODE_DIR)
		return -ENOTDIR;
	hi = d->count;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct stfs_node *c = &t->nodes[t->children[d->first + mid]];
		int r = stfs_bytes_cmp(c->name, c->name_len, name, len);

		if (!r)
			return t->children[d->first + mid];
		if (r < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -ENOENT;
}

char *stfs_tree_path(const struct stfs_tree *t, uint32_t node)
{
	size_t len = 0;
	char *p;

	for (uint32_t n = node; n != 0; n = t->nodes[n].parent)
		len += t->nodes[n].name_len + 1;
	p = malloc(len ? len : 1);
	if (!p)
		return NULL;
	p[len ? len - 1 : 0] = '\0';
	for (uint32_t n = node; n != 0; n = t->nodes[n].parent) {
		len -= t->nodes[n].name_len + 1;
		memcpy(p + len, t->nodes[n].name, t->nodes[n].name_len);
		if (len)
			p[len - 1] = '/';
	}
	return p;
}

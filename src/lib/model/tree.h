/*
 * tree.h: the directory tree a set of names becomes (tree.c), internal to
 * the model layer.  The tree knows names and suffixes, nothing of what
 * the files hold.
 */
#ifndef STFS_TREE_H
#define STFS_TREE_H

#include "stfs/stfs.h"

#define STFS_NODE_DIR UINT32_MAX
#define STFS_TREE_SUFFIX_MAX 8

/* One directory entry.  Node 0 is the root. */
struct stfs_node {
	uint32_t parent;
	uint32_t entry;       /* caller's index, or STFS_NODE_DIR */
	uint32_t first;       /* dirs: index of first child in tree.children */
	uint32_t count;       /* dirs: number of children */
	uint32_t subdirs;     /* dirs: how many children are dirs */
	uint16_t name_len;
	uint16_t extra;       /* files: 0, or which suffix (1..) */
	const char *name;     /* escaped, NUL-terminated; "" for the root */
};

struct stfs_tree {
	struct stfs_node *nodes;
	uint32_t nnodes;
	uint32_t *children;   /* per dir, sorted by name (memcmp) */
	uint32_t *entry_node; /* caller's index -> node */
	char *names;          /* storage for node names */
};

/* A name to place, e.g. a tensor's, and the extra files it gets. */
struct stfs_name {
	const char *s;
	size_t len;
	unsigned extras;      /* bit k: a file named like it + suffixes[k] */
	int literal;          /* a file at the root named s exactly */
};

/*
 * Build the tree for n names (n < 2^31).  Deterministic: depends only on the
 * set of names, never on their order.  Each name's extras are files beside
 * it, named after its own file plus suffixes[k] (k from 1; suffixes[0] is
 * unused).  Release with stfs_tree_free().
 */
int stfs_tree_build(struct stfs_tree *t, const struct stfs_name *names,
		    size_t n, unsigned flags, const char *const *suffixes,
		    struct stfs_error *err);
void stfs_tree_free(struct stfs_tree *t);
/* Child of dir called name, or -ENOENT / -ENOTDIR.  O(log n). */
int64_t stfs_tree_lookup(const struct stfs_tree *t, uint32_t dir,
			 const char *name, size_t len);
/* "a/b/c" for a node (malloc'd, caller frees), or NULL on ENOMEM. */
char *stfs_tree_path(const struct stfs_tree *t, uint32_t node);

#endif

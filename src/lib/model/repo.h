/*
 * repo.h: the tree of %repo/ inside the model layer: its nodes and the
 * sources of its files, as repo.c builds them at mount and repo_nodes.c
 * serves them.  Private to src/lib/model (model.h declares the calls).
 */
#ifndef STFS_MODEL_REPO_H
#define STFS_MODEL_REPO_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct stfs_source;

struct rnode {
	uint32_t parent;
	uint32_t first, count, subdirs;
	int64_t file;           /* index into loc->files, or -1: a folder */
	char *name;             /* NUL-terminated (folders': malloc'd) */
	uint16_t name_len;
};

struct rsrc {
	struct stfs_source *src;
	int own;
	size_t shard;           /* 1 + its index in the model's files when
				 * the model opened it, else 0 */
	char *fault;            /* found when opened: never served */
};

struct stfs_repo {
	struct rnode *nodes;
	uint32_t n, cap;
	uint32_t *children;
	struct rsrc *srcs;      /* per file of loc->files */
	size_t nsrcs;
	pthread_mutex_t mu;
	char *revision;         /* of %repo/ itself */
	uint32_t base;
};

#endif

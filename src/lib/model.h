/*
 * model.h: the pieces of model building shared by model.c and shards.c.
 */
#ifndef STFS_MODEL_H
#define STFS_MODEL_H

#include "stfs/stfs.h"

/* Append an open file (taken over on success) under a display name. */
int stfs_model_add_file(struct stfs_model *m, struct stfs_file *f,
			const char *name);
/* Make every tensor of every file an entry, sorted by name. */
int stfs_model_collect(struct stfs_model *m, struct stfs_error *err);
/* Sort the entries by name and build the tree over them. */
int stfs_model_build_tree(struct stfs_model *m, unsigned flags,
			  struct stfs_error *err);

/* 1 if path names an index file ("*.index.json"). */
int stfs_is_index_name(const char *path);
int stfs_shards_open_dir(struct stfs_model *m, unsigned flags,
			 void (*warn)(void *, const char *), void *ctx,
			 struct stfs_error *err);
int stfs_shards_open_index(struct stfs_model *m, const char *index,
			   unsigned flags,
			   void (*warn)(void *, const char *), void *ctx,
			   struct stfs_error *err);

#endif

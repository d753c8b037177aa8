/*
 * model.h: the model layer's private declarations, shared by its files
 * (file.c, model.c, shards.c, index_json.c, describe.c, foreign.c,
 * virtual.c; never installed).
 */
#ifndef STFS_MODEL_H
#define STFS_MODEL_H

#include <pthread.h>

#include "stfs/stfs.h"
#include "source.h"
#include "tree.h"

struct stfs_file {
	struct stfs_source *src;
	const char *format;       /* "safetensors", "gguf", ... (file.c) */
	uint64_t header_len;      /* N */
	uint64_t data_start;      /* safetensors: 8 + N; other formats' offsets
				   * are absolute: 0 */
	struct stfs_header *header;
	char *doc;                /* another format's header file, as JSON */
	size_t doc_len;
};

/* One tensor of the model and the file it lives in. */
struct stfs_entry {
	const struct stfs_tensor *t;
	uint32_t file;            /* index into model->files */
};

struct stfs_model {
	struct stfs_remote *remote;   /* its remote sources' layer */
	uint64_t verify_held;     /* bytes every open file's whole-read
				   * check holds (verify.c; __atomic) */
	struct stfs_location *loc;
	size_t nfiles;
	struct stfs_file **files;
	char **file_names;        /* relative to the location */
	int sharded;              /* a directory or an index */
	int selected;             /* include=/exclude= chose its tensors */
	size_t nentries;
	struct stfs_entry *entries; /* sorted by name bytes */
	struct stfs_tree tree;    /* entries, then the header file */
	uint32_t *first_view;     /* per entry: its first view node, or NULL */
	char *index;              /* the merged index of shards, or NULL */
	size_t index_len;
	const struct stfs_meta **meta;  /* shared __metadata__, by key */
	size_t nmeta;
	unsigned flags;           /* STFS_TREE_* */
	char *index_meta;         /* an index's "metadata", as JSON */
	size_t index_meta_len;
	struct stfs_meta *imeta;  /* the same as string pairs (virtual.c) */
	size_t nimeta;
	/* virtual files (virtual.c): sizes known so far, the last header */
	pthread_mutex_t vmu;
	struct stfs_vsize *vsizes;
	size_t nvsizes, capvsizes;
	struct stfs_vhdr *vlast;
	struct stfs_repo *repo;   /* %repo/ (repo.c), or NULL */
};

/* The same for n files, remote ones opened several at a time; on failure
 * the first failing file (in order) is reported. */
int stfs_model_add_files(struct stfs_model *m, const char *const *names,
			 size_t n,
			 struct stfs_error *err);
/* Sort the entries by name (then file). */
void stfs_model_sort(struct stfs_model *m);
/* Open the shards an index names (shards.c). */
int stfs_shards_open_index(struct stfs_model *m,
			   void (*warn)(void *, const char *), void *ctx,
			   struct stfs_error *err);
/* virtual.c: the virtual safetensors files of the tree. */
/* Node of the virtual file called name in dir, or -ENOENT. */
int64_t stfs_virtual_lookup(const struct stfs_model *m, uint32_t dir,
			    const char *name, size_t len);
/* How many dir lists (0 unless STFS_TREE_LIST_VIRTUAL), and the k-th. */
uint32_t stfs_virtual_count(const struct stfs_model *m, uint32_t dir);
int64_t stfs_virtual_child(const struct stfs_model *m, uint32_t dir,
			   uint32_t k);
/* If node is a virtual file: 1 and its dir and kind, else 0. */
int stfs_virtual_decode(const struct stfs_model *m, uint32_t node,
			uint32_t *dir, enum stfs_virtual *kind);
const char *stfs_virtual_name(enum stfs_virtual kind);
/* 1 if a virtual file of kind holds t (another format's tensors of types
 * safetensors cannot name are left out). */
int stfs_virtual_represents(const struct stfs_tensor *t,
			    enum stfs_virtual kind);
/* Its size (generating the header if need be): 0 or -errno. */
int stfs_virtual_size(struct stfs_model *m, uint32_t node, uint64_t *size);
int stfs_virtual_content(struct stfs_model *m, uint32_t node,
			 struct stfs_content **out);
void stfs_virtual_error(const struct stfs_model *m, uint32_t node, int code,
			char *out, size_t outsz);
void stfs_virtual_free(struct stfs_model *m);

/* The header file of a file of another format (foreign.c): its format,
 * key-values, tensors (with their own types and absolute offsets) and
 * what was left out, as JSON (malloc'd), or NULL when out of memory. */
char *stfs_foreign_doc(const struct stfs_file *f, size_t *len);

/* The merged index shown as the header file of a sharded mount
 * (index_json.c); index_meta is the index's "metadata" as JSON, or NULL. */
int stfs_model_index_json(struct stfs_model *m, const char *index_meta,
			  size_t meta_len, struct stfs_error *err);
/* The header file of one file under a selection: its header with the
 * selected tensors only (index_json.c). */
int stfs_model_header_selected(struct stfs_model *m, struct stfs_error *err);

/* repo.c: the repository's files under %repo/.  Its nodes are numbered
 * from stfs_repo_base() on, k = node - base (0: %repo/ itself). */
struct stfs_repo;
int stfs_repo_build(struct stfs_model *m, const struct stfs_model_opts *o,
		    struct stfs_error *err);
void stfs_repo_free(struct stfs_repo *r);
/* The first node of the repository, or UINT32_MAX when there is none;
 * how many nodes it has. */
uint32_t stfs_repo_base(const struct stfs_model *m);
uint32_t stfs_repo_count(const struct stfs_model *m);
void stfs_repo_node(const struct stfs_model *m, uint32_t k,
		    struct stfs_node_info *out);
int64_t stfs_repo_lookup(const struct stfs_model *m, uint32_t k,
			 const char *name, size_t len);
int64_t stfs_repo_child(const struct stfs_model *m, uint32_t k, uint32_t i);
int stfs_repo_content(const struct stfs_model *m, uint32_t k,
		      struct stfs_content **out);
/* Its path under %repo/ ("" for %repo/ itself), malloc'd. */
char *stfs_repo_path(const struct stfs_model *m, uint32_t k);
/* The index in loc->files of node k of %repo/, or -1: a folder. */
int64_t stfs_repo_file(const struct stfs_model *m, uint32_t k);
const char *stfs_repo_revision(const struct stfs_model *m, uint32_t k);
void stfs_repo_error(const struct stfs_model *m, uint32_t k, int code,
		     char *out, size_t outsz);

#endif

/*
 * virtual.c: virtual safetensors files.  Every directory of the tree has
 * %model.safetensors: the tensors under it as one valid safetensors file
 * that exists nowhere on disk.  Its header is generated (tensors in source
 * order, packed with no holes, __metadata__ carried over, padded with
 * spaces to a multiple of 8 as the reference writer does); its data is
 * the tensors' ranges of their sources, so reading it copies nothing.
 * %model.stripped.safetensors (not in the root) names the tensors without
 * the directory's own components; %model.f32.safetensors (with
 * convert=f32) has BF16, F16 and F8 tensors as F32.
 *
 * Node numbers: past the tree's nodes, three per directory.  A header is
 * generated when a virtual file is first looked at (its size is in its
 * header's length), then only its size is kept; the last header generated
 * is kept for the open that usually follows, and every open file holds a
 * reference to its own.  So memory is bounded by the files open.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "content.h"
#include "model.h"

#define VK STFS_VIRTUAL_KIND_COUNT

static const char *const names[VK] = {
	STFS_VIRTUAL_FULL, STFS_VIRTUAL_STRIPPED, STFS_VIRTUAL_F32,
};

struct stfs_vsize {             /* what is kept of a generated header */
	uint32_t node;          /* + 1; 0: an empty slot */
	int too_large;
	uint64_t hlen;          /* N */
	uint64_t size;
};

struct stfs_vhdr {              /* a generated header, shared */
	atomic_int refs;
	uint32_t node;
	char *bytes;            /* the 8-byte length and N header bytes */
	size_t len;
	uint32_t *order;        /* its tensors, in file order */
	size_t n;
};

const char *stfs_virtual_name(enum stfs_virtual kind)
{
	return (unsigned)kind < VK ? names[kind] : NULL;
}

static int exists(const struct stfs_model *m, uint32_t dir,
		  enum stfs_virtual kind)
{
	if (dir >= m->tree.nnodes || m->tree.nodes[dir].entry != STFS_NODE_DIR ||
	    m->tree.nnodes > (UINT32_MAX - 1) / (VK + 1))
		return 0;
	switch (kind) {
	case STFS_VIRTUAL_KIND_FULL:
		return 1;
	case STFS_VIRTUAL_KIND_STRIPPED:
		return dir != 0;
	case STFS_VIRTUAL_KIND_F32:
		return !!(m->flags & STFS_TREE_F32);
	default:
		return 0;
	}
}

static uint32_t node_of(const struct stfs_model *m, uint32_t dir,
			enum stfs_virtual kind)
{
	return m->tree.nnodes + dir * VK + (uint32_t)kind;
}

int stfs_virtual_decode(const struct stfs_model *m, uint32_t node,
			uint32_t *dir, enum stfs_virtual *kind)
{
	uint32_t v;

	if (node < m->tree.nnodes)
		return 0;
	v = node - m->tree.nnodes;
	*dir = v / VK;
	*kind = (enum stfs_virtual)(v % VK);
	return exists(m, *dir, *kind);
}

int64_t stfs_virtual_lookup(const struct stfs_model *m, uint32_t dir,
			    const char *name, size_t len)
{
	for (int k = 0; k < VK; k++)
		if (strlen(names[k]) == len && memcmp(names[k], name, len) == 0 &&
		    exists(m, dir, (enum stfs_virtual)k))
			return node_of(m, dir, (enum stfs_virtual)k);
	return -ENOENT;
}

uint32_t stfs_virtual_count(const struct stfs_model *m, uint32_t dir)
{
	uint32_t n = 0;

	if (!(m->flags & STFS_TREE_LIST_VIRTUAL))
		return 0;
	for (int k = 0; k < VK; k++)
		n += (uint32_t)exists(m, dir, (enum stfs_virtual)k);
	return n;
}

int64_t stfs_virtual_child(const struct stfs_model *m, uint32_t dir,
			   uint32_t k)
{
	if (!(m->flags & STFS_TREE_LIST_VIRTUAL))
		return -ENOENT;
	for (int v = 0; v < VK; v++)
		if (exists(m, dir, (enum stfs_virtual)v) && k-- == 0)
			return node_of(m, dir, (enum stfs_virtual)v);
	return -ENOENT;
}

/* ---- generating a header ------------------------------------------------ */

static size_t stfs_virtual_keep(const struct stfs_model *m, uint32_t *list,
				size_t n, enum stfs_virtual kind);

/* The tensors (entries) under dir that a virtual file of kind can hold,
 * into *out (malloc'd): how many. */
static int collect(const struct stfs_model *m, uint32_t dir,
		   enum stfs_virtual kind, uint32_t **out, size_t *n)
{
	const struct stfs_tree *t = &m->tree;
	uint32_t *stack = NULL, *list;
	size_t sp = 0, cap = 64, k = 0;

	*out = NULL;
	*n = 0;
	list = malloc((m->nentries + 1) * sizeof(*list));
	if (!list)
		return -ENOMEM;
	if (dir == 0) {         /* the root: every tensor */
		for (size_t i = 0; i < m->nentries; i++)
			list[k++] = (uint32_t)i;
		goto done;
	}
	if (!(stack = malloc(cap * sizeof(*stack)))) {
		free(list);
		return -ENOMEM;
	}
	stack[sp++] = dir;
	while (sp) {
		const struct stfs_node *d = &t->nodes[stack[--sp]];

		for (uint32_t c = 0; c < d->count; c++) {
			uint32_t ch = t->children[d->first + c];
			const struct stfs_node *x = &t->nodes[ch];

			if (x->entry == STFS_NODE_DIR) {
				if (sp == cap) {
					uint32_t *p = realloc(stack, 2 * cap *
							      sizeof(*p));
					if (!p) {
						free(stack);
						free(list);
						return -ENOMEM;
					}
					stack = p;
					cap *= 2;
				}
				stack[sp++] = ch;
			} else if (!x->extra && x->entry < m->nentries) {
				list[k++] = x->entry;
			}
		}
	}
	free(stack);
done:
	*out = list;
	*n = stfs_virtual_keep(m, list, k, kind);
	return 0;
}

/* Another format's tensors safetensors cannot name (a GGUF Q4_K) are left
 * out; the F32 file has the ones that dequantize, as F32. */
int stfs_virtual_represents(const struct stfs_tensor *t,
			    enum stfs_virtual kind)
{
	if (t->dtype != STFS_DTYPE_NONE)
		return 1;
	return kind == STFS_VIRTUAL_KIND_F32 && stfs_tensor_to_f32(t);
}

const char *stfs_model_left_out_why(const struct stfs_tensor *t)
{
	if (stfs_virtual_represents(t, STFS_VIRTUAL_KIND_FULL))
		return NULL;
	return stfs_tensor_to_f32(t) ?
	       "safetensors has no dtype for its type (its dequantized .f32 "
	       "view is in %model.f32.safetensors with -o convert=f32)" :
	       "safetensors has no dtype for its type";
}

static size_t stfs_virtual_keep(const struct stfs_model *m, uint32_t *list,
				size_t n, enum stfs_virtual kind)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		if (stfs_virtual_represents(m->entries[list[i]].t, kind))
			list[k++] = list[i];
	return k;
}

/* File order: by shard, then offsets (then name, for empty tensors). */
static int cmp_file_order(const void *x, const void *y, void *ctx)
{
	const struct stfs_model *m = ctx;
	const struct stfs_entry *a = &m->entries[*(const uint32_t *)x];
	const struct stfs_entry *b = &m->entries[*(const uint32_t *)y];

	if (a->file != b->file)
		return a->file < b->file ? -1 : 1;
	if (a->t->begin != b->t->begin)
		return a->t->begin < b->t->begin ? -1 : 1;
	if (a->t->end != b->t->end)
		return a->t->end < b->t->end ? -1 : 1;
	return stfs_bytes_cmp(a->t->name, a->t->name_len, b->t->name,
			      b->t->name_len);
}

static uint32_t depth_of(const struct stfs_model *m, uint32_t node)
{
	uint32_t d = 0;

	for (; node != 0; node = m->tree.nodes[node].parent)
		d++;
	return d;
}

/* The name without its first `skip` components ("" if it has no more). */
static void strip(const struct stfs_tensor *t, uint32_t skip,
		  const char **s, size_t *len)
{
	const char *p = t->name, *end = t->name + t->name_len;

	for (uint32_t i = 0; i < skip; i++) {
		const char *dot = memchr(p, '.', (size_t)(end - p));
		if (!dot) {
			p = end;
			break;
		}
		p = dot + 1;
	}
	*s = p;
	*len = (size_t)(end - p);
}

/* Bytes of t in a virtual file of kind (F32: converted). */
static uint64_t out_bytes(const struct stfs_tensor *t, enum stfs_virtual kind)
{
	if (kind == STFS_VIRTUAL_KIND_F32 && stfs_tensor_to_f32(t))
		return stfs_tensor_elements(t) * 4;
	return stfs_tensor_bytes(t);
}

static void meta(struct stfs_jw *w, const struct stfs_model *m)
{
	if (!m->nmeta && !m->nimeta)
		return;
	stfs_jw_key(w, "__metadata__", 12);
	stfs_jw_begin(w, '{');
	for (size_t i = 0; i < m->nmeta; i++) {
		stfs_jw_key(w, m->meta[i]->key, m->meta[i]->key_len);
		stfs_jw_str(w, m->meta[i]->value, m->meta[i]->value_len);
	}
	for (size_t i = 0; i < m->nimeta; i++) {
		const struct stfs_meta *e = &m->imeta[i];
		size_t k = 0;

		while (k < m->nmeta && stfs_bytes_cmp(m->meta[k]->key,
			m->meta[k]->key_len, e->key, e->key_len))
			k++;
		if (k < m->nmeta)
			continue;       /* the shards' own value wins */
		stfs_jw_key(w, e->key, e->key_len);
		stfs_jw_str(w, e->value, e->value_len);
	}
	stfs_jw_end(w, '}');
}

static void vhdr_put(void *arg)
{
	struct stfs_vhdr *h = arg;

	if (h && atomic_fetch_sub(&h->refs, 1) == 1) {
		free(h->bytes);
		free(h->order);
		free(h);
	}
}

/* Generate the header of node (dir, kind): 0, or -errno; *out has one
 * reference.  A header over STFS_HEADER_MAX is generated all the same
 * (its length is the file's size) and marked by *too_large. */
static int generate(struct stfs_model *m, uint32_t node, uint32_t dir,
		    enum stfs_virtual kind, struct stfs_vhdr **out,
		    struct stfs_vsize *vs)
{
	struct stfs_vhdr *h = calloc(1, sizeof(*h));
	uint32_t skip = kind == STFS_VIRTUAL_KIND_STRIPPED ? depth_of(m, dir) : 0;
	uint64_t data = 0, n;
	struct stfs_jw w;
	size_t len;
	char *json;
	int rc;

	*out = NULL;
	if (!h)
		return -ENOMEM;
	atomic_init(&h->refs, 1);
	h->node = node;
	if ((rc = collect(m, dir, kind, &h->order, &h->n))) {
		vhdr_put(h);
		return rc;
	}
	if (h->n > 1)
		qsort_r(h->order, h->n, sizeof(*h->order), cmp_file_order, m);
	stfs_jw_init(&w, 0);
	stfs_jw_raw(&w, "01234567", 8);         /* room for the length */
	stfs_jw_begin(&w, '{');
	meta(&w, m);
	for (size_t i = 0; i < h->n; i++) {
		const struct stfs_tensor *t = m->entries[h->order[i]].t;
		uint64_t end;
		const char *s;
		size_t sl;

		if (__builtin_add_overflow(data, out_bytes(t, kind), &end) ||
		    end > (UINT64_MAX >> 1)) {
			free(stfs_jw_finish(&w, &len));
			vhdr_put(h);
			return -EOVERFLOW;   /* never a wrapped size */
		}
		strip(t, skip, &s, &sl);
		stfs_jw_tensor(&w, s, sl, kind == STFS_VIRTUAL_KIND_F32 &&
			       stfs_tensor_to_f32(t) ? STFS_DTYPE_F32 :
			       t->dtype, t->shape, t->rank, data, end);
		data = end;
	}
	stfs_jw_end(&w, '}');
	/* spaces up to a multiple of 8, as the reference's writer pads */
	while (w.len % 8)
		stfs_jw_raw(&w, " ", 1);
	if (!(json = stfs_jw_finish(&w, &len))) {
		vhdr_put(h);
		return -ENOMEM;
	}
	n = len - 8;
	for (int i = 0; i < 8; i++)
		json[i] = (char)((n >> (8 * i)) & 0xff);
	if (data > (UINT64_MAX >> 1) - len) {
		free(json);
		vhdr_put(h);
		return -EOVERFLOW;
	}
	h->bytes = json;
	h->len = len;
	vs->node = node + 1;
	vs->hlen = n;
	vs->too_large = n > STFS_HEADER_MAX;
	vs->size = len + data;
	*out = h;
	return 0;
}

/* ---- the cache ----------------------------------------------------------- */

static struct stfs_vsize *find_size(struct stfs_model *m, uint32_t node)
{
	size_t mask = m->capvsizes - 1;

	if (!m->capvsizes)
		return NULL;
	for (size_t i = (node * 0x9e3779b1u) & mask;; i = (i + 1) & mask) {
		if (m->vsizes[i].node == node + 1)
			return &m->vsizes[i];
		if (!m->vsizes[i].node)
			return NULL;
	}
}

static int keep_size(struct stfs_model *m, const struct stfs_vsize *vs)
{
	if ((m->nvsizes + 1) * 2 > m->capvsizes) {
		size_t cap = m->capvsizes ? m->capvsizes * 2 : 64;
		struct stfs_vsize *old = m->vsizes, *t = calloc(cap, sizeof(*t));
		size_t n = m->capvsizes;

		if (!t)
			return -ENOMEM;
		m->vsizes = t;
		m->capvsizes = cap;
		m->nvsizes = 0;
		for (size_t i = 0; i < n; i++)
			if (old[i].node)
				keep_size(m, &old[i]);
		free(old);
	}
	for (size_t i = ((vs->node - 1) * 0x9e3779b1u) & (m->capvsizes - 1);;
	     i = (i + 1) & (m->capvsizes - 1)) {
		if (!m->vsizes[i].node) {
			m->vsizes[i] = *vs;
			m->nvsizes++;
			return 0;
		}
	}
}

/* The header of node, with a reference, generated unless it is the last
 * one; its size kept.  Called with vmu held. */
static int header_of(struct stfs_model *m, uint32_t node,
		     struct stfs_vhdr **out, struct stfs_vsize *vs)
{
	uint32_t dir;
	enum stfs_virtual kind;
	struct stfs_vsize *known;
	int rc;

	*out = NULL;
	if (!stfs_virtual_decode(m, node, &dir, &kind))
		return -ENOENT;
	if (m->vlast && m->vlast->node == node) {
		atomic_fetch_add(&m->vlast->refs, 1);
		*out = m->vlast;
		*vs = *find_size(m, node);
		return 0;
	}
	if ((rc = generate(m, node, dir, kind, out, vs)))
		return rc;
	known = find_size(m, node);
	if (!known && (rc = keep_size(m, vs))) {
		vhdr_put(*out);
		*out = NULL;
		return rc;
	}
	vhdr_put(m->vlast);
	m->vlast = *out;
	atomic_fetch_add(&m->vlast->refs, 1);
	return 0;
}

int stfs_virtual_size(struct stfs_model *m, uint32_t node, uint64_t *size)
{
	struct stfs_vsize *known, vs;
	struct stfs_vhdr *h;
	int rc = 0;

	pthread_mutex_lock(&m->vmu);
	if ((known = find_size(m, node))) {
		*size = known->size;
	} else if (!(rc = header_of(m, node, &h, &vs))) {
		*size = vs.size;
		vhdr_put(h);
	}
	pthread_mutex_unlock(&m->vmu);
	return rc;
}

int stfs_virtual_content(struct stfs_model *m, uint32_t node,
			 struct stfs_content **out)
{
	enum stfs_virtual kind;
	struct stfs_content *c;
	struct stfs_vhdr *h;
	struct stfs_vsize vs;
	uint32_t dir;
	int rc;

	*out = NULL;
	if (!stfs_virtual_decode(m, node, &dir, &kind))
		return -ENOENT;
	pthread_mutex_lock(&m->vmu);
	rc = header_of(m, node, &h, &vs);
	pthread_mutex_unlock(&m->vmu);
	if (rc)
		return rc;
	if (vs.too_large) {
		vhdr_put(h);
		return -EFBIG;
	}
	if (!(c = stfs_content_new())) {
		vhdr_put(h);
		return -ENOMEM;
	}
	rc = stfs_content_add_shared(c, h->bytes, h->len, vhdr_put, h);
	for (size_t i = 0; !rc && i < h->n; i++) {
		const struct stfs_entry *e = &m->entries[h->order[i]];
		const struct stfs_file *f = m->files[e->file];
		uint64_t off = f->data_start + e->t->begin;

		if (stfs_tensor_bytes(e->t) == 0)
			continue;
		if (kind == STFS_VIRTUAL_KIND_F32 && stfs_tensor_to_f32(e->t))
			rc = stfs_content_add_tensor_f32(c, e->t, f->src, off);
		else
			rc = stfs_content_add_tensor(c, e->t, f->src, off);
	}
	if (rc) {
		stfs_content_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void stfs_virtual_error(const struct stfs_model *m, uint32_t node, int code,
			char *out, size_t outsz)
{
	struct stfs_vsize *vs;

	pthread_mutex_lock((pthread_mutex_t *)&m->vmu);
	vs = find_size((struct stfs_model *)m, node);
	if (code == -EFBIG && vs)
		snprintf(out, outsz, "its generated header would be %" PRIu64
			 " bytes, over the reference's limit of %llu (R2); "
			 "select fewer tensors (-o include=, exclude=) or "
			 "use a directory's own file", vs->hlen,
			 STFS_HEADER_MAX);
	else
		snprintf(out, outsz, "%s", strerror(-code));
	pthread_mutex_unlock((pthread_mutex_t *)&m->vmu);
}

void stfs_virtual_free(struct stfs_model *m)
{
	vhdr_put(m->vlast);
	m->vlast = NULL;
	free(m->vsizes);
	m->vsizes = NULL;
	m->nvsizes = m->capvsizes = 0;
}

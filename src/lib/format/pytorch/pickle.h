/*
 * pickle.h: the pickle interpreter's state and the helpers its two files
 * share (pickle.c runs the opcodes, pickle_torch.c recognises torch's
 * reconstruction calls).  Private to the format layer.
 */
#ifndef STFS_PICKLE_H
#define STFS_PICKLE_H

#include "torch.h"

struct stfs_pk {
	const unsigned char *buf;
	size_t len, pos;
	uint64_t base;           /* where buf is in the file */
	const char *name;        /* the file, for messages */
	int torch;               /* recognise torch's patterns */
	struct stfs_error *err;  /* the caller's, or own_err */
	struct stfs_error own_err;
	size_t op_at;            /* the opcode being run */
	unsigned char op;
	struct stfs_pk_val *vals;   /* the arena */
	size_t nvals;
	struct stfs_pk_val **stack;
	size_t sp, scap;
	struct stfs_pk_val **memo;  /* indexed by memo key; NULL: unset */
	size_t mcap, mlen;
	struct stfs_pk_val mark;    /* the mark's one value */
	struct stfs_pk_val *result;
};

/* Fill the error with the file, the offset and the opcode; return code.
 * The message is fmt then what (both plain text). */
int stfs_pk_fail(struct stfs_pk *pk, int code, const char *rule,
		 const char *fmt, const char *what);
/* A new value in the arena, or NULL (error filled). */
struct stfs_pk_val *stfs_pk_new(struct stfs_pk *pk, enum stfs_pk_kind kind);
/* Append v to the sequence c. */
int stfs_pk_append(struct stfs_pk *pk, struct stfs_pk_val *c,
		   struct stfs_pk_val *v);
/* What calling fn(*args) gives, without calling anything: a tensor, a
 * dict, or an opaque object; NULL on error (filled). */
struct stfs_pk_val *stfs_pk_call(struct stfs_pk *pk, struct stfs_pk_val *fn,
				 struct stfs_pk_val *args, int kwargs);
/* What persistent_load(pid) gives in torch: a storage; NULL on error. */
struct stfs_pk_val *stfs_pk_persid(struct stfs_pk *pk,
				   struct stfs_pk_val *pid);
/* The stack: push (v NULL: the error already filled is returned), pop
 * and top (a value, never the mark; NULL on error), the topmost mark. */
int stfs_pk_push(struct stfs_pk *pk, struct stfs_pk_val *v);
struct stfs_pk_val *stfs_pk_pop(struct stfs_pk *pk);
struct stfs_pk_val *stfs_pk_top(struct stfs_pk *pk);
int stfs_pk_find_mark(struct stfs_pk *pk, size_t *at);
/* Pop the items above the topmost mark into a new container of kind k. */
int stfs_pk_collect(struct stfs_pk *pk, enum stfs_pk_kind k,
		    struct stfs_pk_val **out);
/* The memo: put the top of the stack at idx; push the value at idx. */
int stfs_pk_memo_put(struct stfs_pk *pk, uint64_t idx);
int stfs_pk_memo_get(struct stfs_pk *pk, uint64_t idx);
/* n bytes at the cursor (NULL: fewer remain, -ENODATA filled); a text
 * line of at most max bytes without its newline; n bytes little-endian. */
const unsigned char *stfs_pk_take(struct stfs_pk *pk, uint64_t n);
const unsigned char *stfs_pk_line(struct stfs_pk *pk, size_t max, size_t *n);
uint64_t stfs_pk_le(const unsigned char *p, unsigned n);
/* Run the opcode pk->op (pickle_ops.c); *done at STOP. */
int stfs_pk_op(struct stfs_pk *pk, int *done);

#endif

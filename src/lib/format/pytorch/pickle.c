/*
 * pickle.c: a pickle interpreter that executes nothing (its state here,
 * its opcodes in pickle_ops.c).  It reads the
 * opcodes of protocols 0-5 as data: containers are built, a GLOBAL is a
 * name that is never imported, and a call (REDUCE, NEWOBJ, INST, OBJ) of
 * anything is an opaque object that keeps only the callable's name.  The
 * only calls it understands are torch's reconstruction patterns
 * (pickle_torch.c), which become tensor descriptions.  `os.system`,
 * `eval` or `builtins.exec` are read the same way: names, never acted on.
 *
 * Every value lives in the run's arena (a list freed at once), so shared
 * and cyclic references (the memo) cost nothing to free.  The limits on
 * the stack, the memo, the number of values and the pickle's size bound
 * the memory any input can make the interpreter use.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "pickle.h"

int stfs_pk_fail(struct stfs_pk *pk, int code, const char *rule,
		 const char *fmt, const char *what)
{
	return stfs_fail(pk->err, code, rule, pk->base + pk->op_at,
			 "%s: pickle byte %" PRIu64 " (opcode 0x%02x): %s%s",
			 pk->name, pk->base + pk->op_at, pk->op, fmt, what);
}

struct stfs_pk_val *stfs_pk_new(struct stfs_pk *pk, enum stfs_pk_kind kind)
{
	struct stfs_pk_val *v;

	if (pk->nvals >= STFS_PICKLE_VALUES_MAX) {
		stfs_pk_fail(pk, -E2BIG, PR_LIMIT, "more values than the limit",
			     "");
		return NULL;
	}
	v = calloc(1, sizeof(*v));
	if (!v) {
		stfs_pk_fail(pk, -ENOMEM, NULL, "out of memory", "");
		return NULL;
	}
	v->kind = kind;
	v->next = pk->vals;
	pk->vals = v;
	pk->nvals++;
	return v;
}

int stfs_pk_push(struct stfs_pk *pk, struct stfs_pk_val *v)
{
	if (!v)
		return pk->err ? pk->err->code : -ENOMEM;
	if (pk->sp == pk->scap) {
		size_t n = pk->scap ? pk->scap * 2 : 64;
		struct stfs_pk_val **s;

		if (pk->sp >= STFS_PICKLE_STACK_MAX)
			return stfs_pk_fail(pk, -E2BIG, PR_LIMIT,
					    "stack deeper than the limit", "");
		s = realloc(pk->stack, n * sizeof(*s));
		if (!s)
			return stfs_pk_fail(pk, -ENOMEM, NULL, "out of memory",
					    "");
		pk->stack = s;
		pk->scap = n;
	}
	pk->stack[pk->sp++] = v;
	return 0;
}

/* Pop one value that is not a mark, or NULL (error filled). */
struct stfs_pk_val *stfs_pk_pop(struct stfs_pk *pk)
{
	if (pk->sp == 0 || pk->stack[pk->sp - 1] == &pk->mark) {
		stfs_pk_fail(pk, -EINVAL, PR_STACK, "pops an empty stack", "");
		return NULL;
	}
	return pk->stack[--pk->sp];
}

struct stfs_pk_val *stfs_pk_top(struct stfs_pk *pk)
{
	if (pk->sp == 0 || pk->stack[pk->sp - 1] == &pk->mark) {
		stfs_pk_fail(pk, -EINVAL, PR_STACK, "needs a value on the stack",
			     "");
		return NULL;
	}
	return pk->stack[pk->sp - 1];
}

/* The index of the topmost mark (the items above it are the group). */
int stfs_pk_find_mark(struct stfs_pk *pk, size_t *at)
{
	for (size_t i = pk->sp; i > 0; i--)
		if (pk->stack[i - 1] == &pk->mark) {
			*at = i - 1;
			return 0;
		}
	return stfs_pk_fail(pk, -EINVAL, PR_STACK, "no mark on the stack", "");
}

int stfs_pk_append(struct stfs_pk *pk, struct stfs_pk_val *c,
		   struct stfs_pk_val *v)
{
	if (c->u.seq.count == c->u.seq.cap) {
		size_t n = c->u.seq.cap ? c->u.seq.cap * 2 : 4;
		struct stfs_pk_val **it;

		if (n > STFS_PICKLE_VALUES_MAX * 2)
			return stfs_pk_fail(pk, -E2BIG, PR_LIMIT,
					    "container past the limit", "");
		it = realloc(c->u.seq.items, n * sizeof(*it));
		if (!it)
			return stfs_pk_fail(pk, -ENOMEM, NULL, "out of memory",
					    "");
		c->u.seq.items = it;
		c->u.seq.cap = n;
	}
	c->u.seq.items[c->u.seq.count++] = v;
	return 0;
}

/* Bytes at the cursor: NULL if fewer than n remain (error filled). */
const unsigned char *stfs_pk_take(struct stfs_pk *pk, uint64_t n)
{
	const unsigned char *p;

	if (n > pk->len - pk->pos) {
		stfs_pk_fail(pk, -ENODATA, PR_TRUNC,
			     "runs past the end of the pickle", "");
		return NULL;
	}
	p = pk->buf + pk->pos;
	pk->pos += (size_t)n;
	return p;
}

uint64_t stfs_pk_le(const unsigned char *p, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* A text line (protocol 0 operands), without its newline. */
const unsigned char *stfs_pk_line(struct stfs_pk *pk, size_t max, size_t *n)
{
	const unsigned char *p = pk->buf + pk->pos, *nl;
	size_t left = pk->len - pk->pos;

	nl = memchr(p, '\n', left < max + 1 ? left : max + 1);
	if (!nl) {
		stfs_pk_fail(pk, left <= max ? -ENODATA : -EINVAL,
			     left <= max ? PR_TRUNC : PR_OP,
			     "a text operand without its newline", "");
		return NULL;
	}
	*n = (size_t)(nl - p);
	pk->pos += *n + 1;
	return p;
}

int stfs_pk_memo_put(struct stfs_pk *pk, uint64_t idx)
{
	struct stfs_pk_val *v = stfs_pk_top(pk);

	if (!v)
		return pk->err ? pk->err->code : -EINVAL;
	if (idx >= STFS_PICKLE_MEMO_MAX)
		return stfs_pk_fail(pk, -E2BIG, PR_MEMO,
				    "memo index past the limit", "");
	if (idx >= pk->mcap) {
		size_t n = pk->mcap ? pk->mcap : 64;
		struct stfs_pk_val **m;

		while (n <= idx)
			n *= 2;
		m = realloc(pk->memo, n * sizeof(*m));
		if (!m)
			return stfs_pk_fail(pk, -ENOMEM, NULL, "out of memory",
					    "");
		memset(m + pk->mcap, 0, (n - pk->mcap) * sizeof(*m));
		pk->memo = m;
		pk->mcap = n;
	}
	if (!pk->memo[idx])
		pk->mlen++;
	pk->memo[idx] = v;
	return 0;
}

int stfs_pk_memo_get(struct stfs_pk *pk, uint64_t idx)
{
	if (idx >= pk->mcap || !pk->memo[idx])
		return stfs_pk_fail(pk, -EINVAL, PR_MEMO,
				    "gets a memo entry never put", "");
	return stfs_pk_push(pk, pk->memo[idx]);
}

/* Pop the items above the topmost mark into a new container. */
int stfs_pk_collect(struct stfs_pk *pk, enum stfs_pk_kind k,
		   struct stfs_pk_val **out)
{
	size_t at = 0;
	struct stfs_pk_val *c;
	int rc = stfs_pk_find_mark(pk, &at);

	if (rc)
		return rc;
	c = stfs_pk_new(pk, k);
	if (!c)
		return pk->err ? pk->err->code : -ENOMEM;
	for (size_t i = at + 1; i < pk->sp && !rc; i++)
		rc = stfs_pk_append(pk, c, pk->stack[i]);
	pk->sp = at;
	*out = c;
	return rc;
}

int stfs_pk_run(const unsigned char *buf, size_t len, uint64_t base,
		int torch, const char *name, struct stfs_pk **out,
		struct stfs_pk_val **root, struct stfs_error *err)
{
	struct stfs_pk *pk;
	int rc = 0, done = 0;

	*out = NULL;
	*root = NULL;
	if (len > STFS_PICKLE_SIZE_MAX)
		return stfs_fail(err, -EFBIG, PR_LIMIT, base,
				 "%s: a pickle of %zu bytes, past the limit of "
				 "%u", name, len, STFS_PICKLE_SIZE_MAX);
	pk = calloc(1, sizeof(*pk));
	if (!pk)
		return stfs_fail_sys(err, -ENOMEM, name);
	pk->buf = buf;
	pk->len = len;
	pk->base = base;
	pk->torch = torch;
	pk->name = name;
	pk->err = err ? err : &pk->own_err;
	pk->mark.kind = STFS_PK_MARK;
	*out = pk;
	while (!rc && !done) {
		const unsigned char *p;

		pk->op_at = pk->pos;
		p = stfs_pk_take(pk, 1);
		if (!p)
			return pk->err ? pk->err->code : -ENODATA;
		pk->op = *p;
		rc = stfs_pk_op(pk, &done);
	}
	if (rc)
		return rc;
	*root = pk->result;
	return 0;
}

size_t stfs_pk_used(const struct stfs_pk *pk)
{
	return pk ? pk->pos : 0;
}

void stfs_pk_free(struct stfs_pk *pk)
{
	struct stfs_pk_val *v, *n;

	if (!pk)
		return;
	for (v = pk->vals; v; v = n) {
		n = v->next;
		if (v->kind == STFS_PK_TUPLE || v->kind == STFS_PK_LIST ||
		    v->kind == STFS_PK_DICT || v->kind == STFS_PK_SET)
			free(v->u.seq.items);
		else if (v->kind == STFS_PK_STORAGE)
			free(v->u.st);
		else if (v->kind == STFS_PK_TENSOR) {
			free(v->u.t->dims);
			free(v->u.t);
		}
		free(v);
	}
	free(pk->stack);
	free(pk->memo);
	free(pk);
}

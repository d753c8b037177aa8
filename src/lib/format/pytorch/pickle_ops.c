/*
 * pickle_ops.c: the opcodes of the pickle interpreter (pickle.c holds
 * its state: the arena, the stack, the memo, the cursor).  Each opcode
 * pushes data, builds a container, or names a global; calls (REDUCE,
 * NEWOBJ, INST, OBJ) and persistent ids go to pickle_torch.c, which makes
 * nothing but descriptions.  Protocol 0's text opcodes are read where
 * torch could write them (INT, LONG, FLOAT, GET, PUT, GLOBAL, INST);
 * quoted strings and text persistent ids, which torch never writes, are
 * refused.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "pickle.h"

static int push_int(struct stfs_pk *pk, int64_t i, int big)
{
	struct stfs_pk_val *v = stfs_pk_new(pk, STFS_PK_INT);

	if (v) {
		v->u.i = i;
		v->big = big;
	}
	return stfs_pk_push(pk, v);
}

/* LONG1 / LONG4: little-endian two's complement of n bytes. */
static int op_long(struct stfs_pk *pk, uint64_t n)
{
	const unsigned char *p = stfs_pk_take(pk, n);
	uint64_t u = 0;

	if (!p)
		return pk->err ? pk->err->code : -EINVAL;
	if (n > 8) {   /* kept as its bytes: torch's legacy magic is one */
		struct stfs_pk_val *v = stfs_pk_new(pk, STFS_PK_INT);

		if (v) {
			v->big = 1;
			v->u.str.s = (const char *)p;
			v->u.str.n = (size_t)n;
		}
		return stfs_pk_push(pk, v);
	}
	if (n == 0)
		return push_int(pk, 0, 0);
	u = stfs_pk_le(p, (unsigned)n);
	if (n < 8 && (p[n - 1] & 0x80))
		u |= ~0ull << (8 * n);
	return push_int(pk, (int64_t)u, 0);
}

/* INT, LONG and the memo index of GET/PUT: a decimal text line. */
static int text_int(struct stfs_pk *pk, int64_t *out, int *is_bool)
{
	size_t n, i = 0;
	const unsigned char *p = stfs_pk_line(pk, 64, &n);
	int neg = 0;
	uint64_t v = 0;

	if (!p)
		return pk->err ? pk->err->code : -EINVAL;
	*is_bool = (n == 2 && p[0] == '0' && (p[1] == '0' || p[1] == '1'));
	if (n && p[n - 1] == 'L')
		n--;
	if (n && (p[0] == '-' || p[0] == '+'))
		neg = p[i++] == '-';
	if (i == n)
		return stfs_pk_fail(pk, -EINVAL, PR_OP, "not a decimal number",
				    "");
	for (; i < n; i++) {
		if (p[i] < '0' || p[i] > '9' || v > (INT64_MAX - 9) / 10)
			return stfs_pk_fail(pk, -EINVAL, PR_OP,
					    "not a decimal number in range", "");
		v = v * 10 + (p[i] - '0');
	}
	*out = neg ? -(int64_t)v : (int64_t)v;
	return 0;
}

static int push_str(struct stfs_pk *pk, enum stfs_pk_kind k, uint64_t n)
{
	const unsigned char *p = stfs_pk_take(pk, n);
	struct stfs_pk_val *v;

	if (!p)
		return pk->err ? pk->err->code : -EINVAL;
	v = stfs_pk_new(pk, k);
	if (v) {
		v->u.str.s = (const char *)p;
		v->u.str.n = (size_t)n;
	}
	return stfs_pk_push(pk, v);
}

static int push_tuple(struct stfs_pk *pk, unsigned n)
{
	struct stfs_pk_val *c = stfs_pk_new(pk, STFS_PK_TUPLE);
	int rc = 0;

	if (!c)
		return pk->err ? pk->err->code : -ENOMEM;
	if (pk->sp < n)
		return stfs_pk_fail(pk, -EINVAL, PR_STACK,
				    "pops an empty stack", "");
	for (size_t i = pk->sp - n; i < pk->sp && !rc; i++) {
		if (pk->stack[i] == &pk->mark)
			return stfs_pk_fail(pk, -EINVAL, PR_STACK,
					    "takes a mark as a value", "");
		rc = stfs_pk_append(pk, c, pk->stack[i]);
	}
	pk->sp -= n;
	return rc ? rc : stfs_pk_push(pk, c);
}

/* SETITEM(S), APPEND(S), ADDITEMS: into the container below the mark or
 * the values.  An opaque object takes anything and keeps nothing. */
static int add_items(struct stfs_pk *pk, size_t from, int pairs)
{
	struct stfs_pk_val *c;
	int rc = 0;

	if (from == 0 || pk->stack[from - 1] == &pk->mark)
		return stfs_pk_fail(pk, -EINVAL, PR_STACK,
				    "has no container to add to", "");
	c = pk->stack[from - 1];
	if (pairs && ((pk->sp - from) & 1))
		return stfs_pk_fail(pk, -EINVAL, PR_STACK,
				    "has a key without a value", "");
	if (c->kind == STFS_PK_OBJECT) {
		pk->sp = from;
		return 0;
	}
	if ((pairs && c->kind != STFS_PK_DICT) ||
	    (!pairs && c->kind != STFS_PK_LIST && c->kind != STFS_PK_SET))
		return stfs_pk_fail(pk, -EINVAL, PR_STACK,
				    "adds items to a value that is not a "
				    "container of that kind", "");
	for (size_t i = from; i < pk->sp && !rc; i++)
		rc = stfs_pk_append(pk, c, pk->stack[i]);
	pk->sp = from;
	return rc;
}

static int items_op(struct stfs_pk *pk, int pairs, int marked)
{
	size_t at;
	int rc;

	if (!marked) {
		size_t need = pairs ? 2 : 1;

		if (pk->sp < need + 1)
			return stfs_pk_fail(pk, -EINVAL, PR_STACK,
					    "pops an empty stack", "");
		for (size_t i = pk->sp - need; i < pk->sp; i++)
			if (pk->stack[i] == &pk->mark)
				return stfs_pk_fail(pk, -EINVAL, PR_STACK,
						    "takes a mark as a value",
						    "");
		return add_items(pk, pk->sp - need, pairs);
	}
	rc = stfs_pk_find_mark(pk, &at);
	if (rc)
		return rc;
	/* drop the mark, then add what was above it */
	memmove(pk->stack + at, pk->stack + at + 1,
		(pk->sp - at - 1) * sizeof(*pk->stack));
	pk->sp--;
	return add_items(pk, at, pairs);
}

static int push_global(struct stfs_pk *pk, const unsigned char *mod,
		       size_t ml, const unsigned char *nm, size_t nl)
{
	struct stfs_pk_val *v = stfs_pk_new(pk, STFS_PK_GLOBAL);

	if (v) {
		v->u.g.mod = (const char *)mod;
		v->u.g.mod_len = ml;
		v->u.g.nm = (const char *)nm;
		v->u.g.nm_len = nl;
	}
	return stfs_pk_push(pk, v);
}

static int op_text_global(struct stfs_pk *pk, int inst)
{
	size_t ml, nl;
	const unsigned char *m = stfs_pk_line(pk, 4096, &ml), *n;
	int rc;

	if (!m)
		return pk->err ? pk->err->code : -EINVAL;
	n = stfs_pk_line(pk, 4096, &nl);
	if (!n)
		return pk->err ? pk->err->code : -EINVAL;
	rc = push_global(pk, m, ml, n, nl);
	if (rc || !inst)
		return rc;
	/* INST: the class, called with the items above the mark */
	{
		struct stfs_pk_val *cls = stfs_pk_pop(pk), *args;

		rc = stfs_pk_collect(pk, STFS_PK_TUPLE, &args);
		if (rc)
			return rc;
		return stfs_pk_push(pk, stfs_pk_call(pk, cls, args, 0));
	}
}

static int op_stack_global(struct stfs_pk *pk)
{
	struct stfs_pk_val *n = stfs_pk_pop(pk), *m = n ? stfs_pk_pop(pk) : NULL;

	if (!m)
		return pk->err ? pk->err->code : -EINVAL;
	if (m->kind != STFS_PK_STR || n->kind != STFS_PK_STR)
		return stfs_pk_fail(pk, -EINVAL, PR_OP,
				    "STACK_GLOBAL of values that are not "
				    "strings", "");
	return push_global(pk, (const unsigned char *)m->u.str.s, m->u.str.n,
			   (const unsigned char *)n->u.str.s, n->u.str.n);
}

/* REDUCE, NEWOBJ, NEWOBJ_EX, OBJ: a call, never made. */
static int op_call(struct stfs_pk *pk, int kwargs, int marked)
{
	struct stfs_pk_val *kw = NULL, *args, *fn;
	int rc;

	if (marked) {   /* OBJ: mark, class, args... */
		size_t at;

		rc = stfs_pk_find_mark(pk, &at);
		if (rc)
			return rc;
		if (pk->sp - at < 2)
			return stfs_pk_fail(pk, -EINVAL, PR_STACK,
					    "OBJ without a class", "");
		fn = pk->stack[at + 1];
		memmove(pk->stack + at + 1, pk->stack + at + 2,
			(pk->sp - at - 2) * sizeof(*pk->stack));
		pk->sp--;
		rc = stfs_pk_collect(pk, STFS_PK_TUPLE, &args);
		if (rc)
			return rc;
		return stfs_pk_push(pk, stfs_pk_call(pk, fn, args, 0));
	}
	if (kwargs && !(kw = stfs_pk_pop(pk)))
		return pk->err ? pk->err->code : -EINVAL;
	args = stfs_pk_pop(pk);
	fn = args ? stfs_pk_pop(pk) : NULL;
	if (!fn)
		return pk->err ? pk->err->code : -EINVAL;
	if (args->kind != STFS_PK_TUPLE)
		return stfs_pk_fail(pk, -EINVAL, PR_STACK,
				    "calls with arguments that are not a tuple",
				    "");
	return stfs_pk_push(pk, stfs_pk_call(pk, fn, args, kwargs || kw));
}

static int op_float_text(struct stfs_pk *pk)
{
	size_t n;
	const unsigned char *p = stfs_pk_line(pk, 64, &n);
	char tmp[65], *end;
	struct stfs_pk_val *v;

	if (!p)
		return pk->err ? pk->err->code : -EINVAL;
	memcpy(tmp, p, n);
	tmp[n] = '\0';
	v = stfs_pk_new(pk, STFS_PK_FLOAT);
	if (!v)
		return pk->err ? pk->err->code : -ENOMEM;
	v->u.f = strtod(tmp, &end);
	if (n == 0 || *end)
		return stfs_pk_fail(pk, -EINVAL, PR_OP, "not a float", "");
	return stfs_pk_push(pk, v);
}

/* The operand of a fixed-size opcode: n little-endian bytes. */
static int operand(struct stfs_pk *pk, unsigned n, uint64_t *v)
{
	const unsigned char *p = stfs_pk_take(pk, n);

	if (!p)
		return pk->err ? pk->err->code : -ENODATA;
	*v = stfs_pk_le(p, n);
	return 0;
}

static int push_kind(struct stfs_pk *pk, enum stfs_pk_kind k, int64_t i)
{
	struct stfs_pk_val *v = stfs_pk_new(pk, k);

	if (v)
		v->u.i = i;
	return stfs_pk_push(pk, v);
}

/* Opcodes that push a constant, a number or a string; 1: not one. */
static int op_value(struct stfs_pk *pk)
{
	uint64_t u = 0;
	int64_t i;
	int rc, b;

	switch (pk->op) {
	case 'N': return push_kind(pk, STFS_PK_NONE, 0);
	case 0x88: return push_kind(pk, STFS_PK_BOOL, 1);
	case 0x89: return push_kind(pk, STFS_PK_BOOL, 0);
	case 'J':
		rc = operand(pk, 4, &u);
		return rc ? rc : push_int(pk, (int32_t)(uint32_t)u, 0);
	case 'K':
		rc = operand(pk, 1, &u);
		return rc ? rc : push_int(pk, (int64_t)u, 0);
	case 'M':
		rc = operand(pk, 2, &u);
		return rc ? rc : push_int(pk, (int64_t)u, 0);
	case 0x8a:
		rc = operand(pk, 1, &u);
		return rc ? rc : op_long(pk, u);
	case 0x8b:
		rc = operand(pk, 4, &u);
		return rc ? rc : op_long(pk, u);
	case 'I': case 'L':
		rc = text_int(pk, &i, &b);
		if (rc)
			return rc;
		if (pk->op == 'I' && b)
			return push_kind(pk, STFS_PK_BOOL, i);
		return push_int(pk, i, 0);
	case 'F': return op_float_text(pk);
	case 'G': {
		const unsigned char *p = stfs_pk_take(pk, 8);
		struct stfs_pk_val *v;

		if (!p)
			return pk->err ? pk->err->code : -ENODATA;
		for (int k = 0; k < 8; k++)
			u = u << 8 | p[k];
		v = stfs_pk_new(pk, STFS_PK_FLOAT);
		if (v)
			memcpy(&v->u.f, &u, sizeof(u));
		return stfs_pk_push(pk, v);
	}
	case 'X': case 'T': case 'B':
		rc = operand(pk, 4, &u);
		return rc ? rc : push_str(pk, pk->op == 'B' ? STFS_PK_BYTES
							   : STFS_PK_STR, u);
	case 0x8c: case 'U': case 'C':
		rc = operand(pk, 1, &u);
		return rc ? rc : push_str(pk, pk->op == 'C' ? STFS_PK_BYTES
							   : STFS_PK_STR, u);
	case 0x8d: case 0x8e: case 0x96:
		rc = operand(pk, 8, &u);
		return rc ? rc : push_str(pk, pk->op == 0x8d ? STFS_PK_STR
							     : STFS_PK_BYTES, u);
	}
	return 1;
}

/* Opcodes on the stack, the memo and containers; 1: not one. */
static int op_struct(struct stfs_pk *pk)
{
	struct stfs_pk_val *c;
	uint64_t u = 0;
	int64_t i;
	int rc, b;

	switch (pk->op) {
	case '(': return stfs_pk_push(pk, &pk->mark);
	case '0': return stfs_pk_pop(pk) ? 0 : pk->err->code;
	case '1': {
		size_t at;

		rc = stfs_pk_find_mark(pk, &at);
		if (!rc)
			pk->sp = at;
		return rc;
	}
	case '2': return (c = stfs_pk_top(pk)) ? stfs_pk_push(pk, c) : pk->err->code;
	case ']': return stfs_pk_push(pk, stfs_pk_new(pk, STFS_PK_LIST));
	case '}': return stfs_pk_push(pk, stfs_pk_new(pk, STFS_PK_DICT));
	case ')': return stfs_pk_push(pk, stfs_pk_new(pk, STFS_PK_TUPLE));
	case 0x8f: return stfs_pk_push(pk, stfs_pk_new(pk, STFS_PK_SET));
	case 'l': case 't': case 'd': case 0x91:
		rc = stfs_pk_collect(pk, pk->op == 'l' ? STFS_PK_LIST :
				 pk->op == 'd' ? STFS_PK_DICT :
				 pk->op == 't' ? STFS_PK_TUPLE : STFS_PK_SET, &c);
		if (!rc && c->kind == STFS_PK_DICT && (c->u.seq.count & 1))
			rc = stfs_pk_fail(pk, -EINVAL, PR_STACK,
					  "has a key without a value", "");
		return rc ? rc : stfs_pk_push(pk, c);
	case 0x85: case 0x86: case 0x87:
		return push_tuple(pk, pk->op - 0x84u);
	case 'a': return items_op(pk, 0, 0);
	case 'e': case 0x90: return items_op(pk, 0, 1);
	case 's': return items_op(pk, 1, 0);
	case 'u': return items_op(pk, 1, 1);
	case 'q': case 'h':
		rc = operand(pk, 1, &u);
		break;
	case 'r': case 'j':
		rc = operand(pk, 4, &u);
		break;
	case 'p': case 'g':
		rc = text_int(pk, &i, &b);
		if (!rc && i < 0)
			return stfs_pk_fail(pk, -EINVAL, PR_MEMO,
					    "a negative memo index", "");
		u = (uint64_t)i;
		break;
	case 0x94: return stfs_pk_memo_put(pk, pk->mlen);
	default:
		return 1;
	}
	if (rc)
		return rc;
	if (pk->op == 'q' || pk->op == 'r' || pk->op == 'p')
		return stfs_pk_memo_put(pk, u);
	return stfs_pk_memo_get(pk, u);
}

/* Opcodes that name or call things, BUILD and persistent ids. */
static int op_object(struct stfs_pk *pk)
{
	struct stfs_pk_val *v;

	switch (pk->op) {
	case 'c': return op_text_global(pk, 0);
	case 'i': return op_text_global(pk, 1);
	case 0x93: return op_stack_global(pk);
	case 'R': return op_call(pk, 0, 0);
	case 0x81: return op_call(pk, 0, 0);
	case 0x92: return op_call(pk, 1, 0);
	case 'o': return op_call(pk, 0, 1);
	case 'b':   /* BUILD: the state is data nobody applies */
		return stfs_pk_pop(pk) && stfs_pk_top(pk) ? 0 : pk->err->code;
	case 'Q':
		v = stfs_pk_pop(pk);
		if (!v)
			return pk->err->code;
		return stfs_pk_push(pk, stfs_pk_persid(pk, v));
	case 'P':
		return stfs_pk_fail(pk, -EINVAL, PR_OP,
				    "a text persistent id (PERSID), which "
				    "torch never writes", "");
	case 0x82: case 0x83: case 0x84:
		return stfs_pk_fail(pk, -EINVAL, PR_OP,
				    "an extension-registry code (EXT), "
				    "refused", "");
	case 0x97: case 0x98:
		return stfs_pk_fail(pk, -EINVAL, PR_OP,
				    "an out-of-band buffer, refused", "");
	case 'S': case 'V':
		return stfs_pk_fail(pk, -EINVAL, PR_OP,
				    "a quoted text string (protocol 0), "
				    "which torch never writes", "");
	}
	return stfs_pk_fail(pk, -EINVAL, PR_OP, "an unknown opcode", "");
}

int stfs_pk_op(struct stfs_pk *pk, int *done)
{
	uint64_t u = 0;
	int rc;

	switch (pk->op) {
	case 0x80:
		rc = operand(pk, 1, &u);
		if (!rc && u > 5)
			rc = stfs_pk_fail(pk, -EINVAL, PR_OP,
					  "a protocol past 5", "");
		return rc;
	case 0x95:   /* FRAME: the frame must lie in the pickle */
		rc = operand(pk, 8, &u);
		if (!rc && u > pk->len - pk->pos)
			rc = stfs_pk_fail(pk, -ENODATA, PR_TRUNC,
					  "a FRAME longer than the rest of "
					  "the pickle", "");
		return rc;
	case '.':
		pk->result = stfs_pk_pop(pk);
		*done = 1;
		return pk->result ? 0 : pk->err->code;
	}
	rc = op_value(pk);
	if (rc == 1)
		rc = op_struct(pk);
	if (rc == 1)
		rc = op_object(pk);
	return rc;
}


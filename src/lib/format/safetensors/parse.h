/*
 * parse.h: what the safetensors header parser's two files share (never
 * installed): the parser's state and records (header.c reads the
 * header's schema and checks it), and the JSON lexer under it (json.c).
 */
#ifndef STFS_SAFETENSORS_PARSE_H
#define STFS_SAFETENSORS_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "stfs/stfs.h"

/* A tensor while parsing: shape is an index into dims until the end. */
struct rec {
	struct stfs_tensor t;
	size_t dim0;
	uint64_t off;      /* file offset of the key, for messages */
	size_t order;      /* position in the header, for last-wins; then
			      the rank of the name among the survivors */
};

struct mrec {
	struct stfs_meta m;
	size_t order;
};

struct parser {
	const char *buf;
	size_t len, pos;
	uint64_t base;
	struct stfs_error *err;
	char *arena;
	size_t used;
	struct rec *recs;
	size_t nrecs, caprecs;
	struct mrec *metas;
	size_t nmetas, capmetas;
	uint64_t *dims;
	size_t ndims, capdims;
	int seen_meta;
	int has_meta;
};

#define QUOTE_MAX 160

static inline uint64_t stfs_jp_at(const struct parser *P)
{
	return P->base + P->pos;
}

static inline int stfs_jp_peek(const struct parser *P)
{
	return P->pos < P->len ? (unsigned char)P->buf[P->pos] : -1;
}

static inline void stfs_jp_skip_ws(struct parser *P)
{
	while (P->pos < P->len) {
		char c = P->buf[P->pos];
		if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
			break;
		P->pos++;
	}
}

/* A syntax error (R5) at P->pos: what was expected there.  -EINVAL. */
int stfs_jp_syntax(struct parser *P, const char *what);
/* Skip whitespace, then the byte c (else a syntax error naming what). */
int stfs_jp_expect(struct parser *P, char c, const char *what);
/*
 * Parse the string at P->pos (which must be '"'), unescaped and
 * NUL-terminated in the arena.  The caller may give the bytes back with
 * P->used = mark when it does not keep them.
 */
int stfs_jp_string(struct parser *P, const char **s, size_t *slen);
/* Any JSON number: its syntax, then a finite double as serde_json
 * requires; a literal (true, false, null) exactly. */
int stfs_jp_number(struct parser *P);
int stfs_jp_literal(struct parser *P, const char *lit);
/* R8: a container at depth may be entered: 0, or -EINVAL. */
int stfs_jp_enter(struct parser *P, int depth);
/* Check and skip any value; depth is the depth a container here gets. */
int stfs_jp_skip_value(struct parser *P, int depth);

#endif

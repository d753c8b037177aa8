/*
 * jsonw.c: the one JSON writer of libstfs and the stfs command: the merged
 * index of a sharded mount and `stfs inspect --json`.  Streams into a
 * growing buffer; any bytes in give valid JSON out.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stfs/stfs.h"
#include "format.h"

void stfs_jw_init(struct stfs_jw *w, int pretty)
{
	memset(w, 0, sizeof(*w));
	w->pretty = pretty;
}

static void put(struct stfs_jw *w, const char *s, size_t n)
{
	if (w->failed)
		return;
	if (w->len + n + 1 > w->cap) {
		size_t cap = w->cap ? w->cap : 256;
		char *p;

		while (w->len + n + 1 > cap)
			cap *= 2;
		if (!(p = realloc(w->buf, cap))) {
			w->failed = 1;
			return;
		}
		w->buf = p;
		w->cap = cap;
	}
	memcpy(w->buf + w->len, s, n);
	w->len += n;
	w->buf[w->len] = '\0';
}

static void indent(struct stfs_jw *w)
{
	static const char spaces[] = "                                ";

	put(w, "\n", 1);
	for (int d = w->depth; d > 0; d -= 16)
		put(w, spaces, (size_t)(d > 16 ? 16 : d) * 2);
}

/* Before a value or a key: the comma and the line break it needs. */
static void sep(struct stfs_jw *w)
{
	if (w->after_key) {
		w->after_key = 0;
		return;
	}
	if (w->depth == 0)
		return;
	if (!w->first[w->depth - 1])
		put(w, ",", 1);
	w->first[w->depth - 1] = 0;
	if (w->pretty)
		indent(w);
}

void stfs_jw_begin(struct stfs_jw *w, char open)
{
	sep(w);
	put(w, &open, 1);
	if (w->depth >= (int)sizeof(w->first)) {
		w->failed = 1;
		return;
	}
	w->first[w->depth++] = 1;
}

void stfs_jw_end(struct stfs_jw *w, char close)
{
	int empty;

	if (w->depth == 0) {
		w->failed = 1;
		return;
	}
	empty = w->first[--w->depth];
	if (w->pretty && !empty)
		indent(w);
	put(w, &close, 1);
}

static void string(struct stfs_jw *w, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t i = 0, run = 0;

	put(w, "\"", 1);
	while (i < len) {
		unsigned char c = (unsigned char)s[i];
		size_t bad, ok = 1;

		if (c >= 0x80) {
			/* the longest valid UTF-8 sequence starting here */
			size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
			ok = i + n <= len && stfs_utf8_valid(s + i, n, &bad) ?
			     n : 0;
		}
		if (c >= 0x20 && c != '"' && c != '\\' && ok) {
			run += ok;
			i += ok;
			continue;
		}
		put(w, s + i - run, run);
		run = 0;
		if (!ok) {
			put(w, "\\ufffd", 6);
		} else if (c == '"' || c == '\\') {
			char e[2] = { '\\', (char)c };
			put(w, e, 2);
		} else {
			char e[6] = { '\\', 'u', '0', '0', hex[c >> 4],
				      hex[c & 15] };
			put(w, e, 6);
		}
		i++;
	}
	put(w, s + i - run, run);
	put(w, "\"", 1);
}

void stfs_jw_key(struct stfs_jw *w, const char *s, size_t len)
{
	sep(w);
	string(w, s, len);
	put(w, w->pretty ? ": " : ":", w->pretty ? 2 : 1);
	w->after_key = 1;
}

void stfs_jw_str(struct stfs_jw *w, const char *s, size_t len)
{
	sep(w);
	string(w, s, len);
}

void stfs_jw_cstr(struct stfs_jw *w, const char *s)
{
	stfs_jw_str(w, s, strlen(s));
}

void stfs_jw_u64(struct stfs_jw *w, uint64_t v)
{
	char num[24];
	int n = snprintf(num, sizeof(num), "%" PRIu64, v);

	sep(w);
	put(w, num, (size_t)n);
}

void stfs_jw_bool(struct stfs_jw *w, int v)
{
	sep(w);
	put(w, v ? "true" : "false", v ? 4 : 5);
}

void stfs_jw_null(struct stfs_jw *w)
{
	sep(w);
	put(w, "null", 4);
}

/* [1,2,3] on one line, even when pretty. */
void stfs_jw_u64s(struct stfs_jw *w, const uint64_t *v, size_t n)
{
	char num[24];

	sep(w);
	put(w, "[", 1);
	for (size_t i = 0; i < n; i++) {
		int k = snprintf(num, sizeof(num), "%s%" PRIu64, i ? "," : "",
				 v[i]);
		put(w, num, (size_t)k);
	}
	put(w, "]", 1);
}

void stfs_jw_raw(struct stfs_jw *w, const char *json, size_t len)
{
	sep(w);
	put(w, json, len);
}

void stfs_jw_tensor_fields(struct stfs_jw *w, enum stfs_dtype dt,
			   const uint64_t *shape, size_t rank, uint64_t begin,
			   uint64_t end)
{
	uint64_t off[2] = { begin, end };

	stfs_jw_key(w, "dtype", 5);
	stfs_jw_cstr(w, stfs_dtype_name(dt));
	stfs_jw_key(w, "shape", 5);
	stfs_jw_u64s(w, shape, rank);
	stfs_jw_key(w, "data_offsets", 12);
	stfs_jw_u64s(w, off, 2);
}

void stfs_jw_tensor(struct stfs_jw *w, const char *name, size_t len,
		    enum stfs_dtype dt, const uint64_t *shape, size_t rank,
		    uint64_t begin, uint64_t end)
{
	stfs_jw_key(w, name, len);
	stfs_jw_begin(w, '{');
	stfs_jw_tensor_fields(w, dt, shape, rank, begin, end);
	stfs_jw_end(w, '}');
}

char *stfs_jw_finish(struct stfs_jw *w, size_t *len)
{
	char *p = w->buf;

	if (w->failed || w->depth != 0 || !p) {
		free(w->buf);
		memset(w, 0, sizeof(*w));
		return NULL;
	}
	*len = w->len;
	memset(w, 0, sizeof(*w));
	return p;
}

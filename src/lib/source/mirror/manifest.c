/*
 * manifest.c: a mirror's manifest (docs/mirror.md): what `stfs mirror`
 * wrote, file by file (size, the origin's checksum and ETag, the SHA-256
 * of the bytes, the mirror object's ETag, a CRC-32C of every block), as
 * JSON: written here, and read here with limits, since whoever may write
 * the bucket may write it: its size, depth, files and strings bounded,
 * every field checked for its type and range, every path one the
 * repository may hold, and one block sum for every block.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "mirror/mirror.h"

void stfs_mfile_free(struct stfs_mfile *f)
{
	free(f->path);
	free(f->origin_sum);
	free(f->origin_etag);
	free(f->etag);
	free(f->crc);
	memset(f, 0, sizeof(*f));
}

void stfs_manifest_free(struct stfs_manifest *m)
{
	for (size_t i = 0; i < m->n; i++)
		stfs_mfile_free(&m->f[i]);
	free(m->f);
	free(m->origin);
	free(m->revision);
	free(m->created);
	memset(m, 0, sizeof(*m));
}

static int by_path(const void *a, const void *b)
{
	return strcmp(((const struct stfs_mfile *)a)->path,
		      ((const struct stfs_mfile *)b)->path);
}

const struct stfs_mfile *stfs_manifest_find(const struct stfs_manifest *m,
					    const char *path)
{
	struct stfs_mfile key = { .path = (char *)path };

	return m->n ? bsearch(&key, m->f, m->n, sizeof(*m->f), by_path) :
		      NULL;
}

/* ---- the writer ------------------------------------------------------------ */

static void put_str(struct stfs_jw *w, const char *k, const char *v)
{
	stfs_jw_key(w, k, strlen(k));
	if (v)
		stfs_jw_cstr(w, v);
	else
		stfs_jw_null(w);
}

static void put_file(struct stfs_jw *w, const struct stfs_mfile *f)
{
	char *crc = malloc(f->nblocks * 8 + 1);

	stfs_jw_begin(w, '{');
	put_str(w, "path", f->path);
	stfs_jw_key(w, "size", 4);
	stfs_jw_u64(w, f->size);
	put_str(w, "origin_sum", f->origin_sum);
	put_str(w, "origin_etag", f->origin_etag);
	put_str(w, "sha256", f->sha256);
	put_str(w, "etag", f->etag);
	if (crc) {
		for (uint64_t b = 0; b < f->nblocks; b++)
			sprintf(crc + 8 * b, "%08x", f->crc[b]);
		crc[f->nblocks * 8] = '\0';
		put_str(w, "crc32c", crc);
		free(crc);
	} else {
		w->failed = 1;
	}
	stfs_jw_end(w, '}');
}

char *stfs_manifest_write(const struct stfs_manifest *m, size_t *len)
{
	struct stfs_jw w;

	stfs_jw_init(&w, 0);
	stfs_jw_begin(&w, '{');
	put_str(&w, "format", STFS_MIRROR_FORMAT);
	stfs_jw_key(&w, "version", 7);
	stfs_jw_u64(&w, STFS_MIRROR_VERSION);
	put_str(&w, "origin", m->origin);
	put_str(&w, "revision", m->revision ? m->revision : "");
	stfs_jw_key(&w, "block_size", 10);
	stfs_jw_u64(&w, m->block);
	put_str(&w, "created", m->created ? m->created : "");
	stfs_jw_key(&w, "complete", 8);
	stfs_jw_bool(&w, m->complete);
	stfs_jw_key(&w, "files", 5);
	stfs_jw_begin(&w, '[');
	for (size_t i = 0; i < m->n; i++)
		put_file(&w, &m->f[i]);
	stfs_jw_end(&w, ']');
	stfs_jw_end(&w, '}');
	return stfs_jw_finish(&w, len);
}

/* ---- the reader ------------------------------------------------------------ */

struct rd {
	char *why;
	size_t whysz;
};

__attribute__((format(printf, 2, 3)))
static int no(struct rd *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->why, r->whysz, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* Does s (n bytes) hold a control byte (C0 or DEL)?  A manifest's
 * strings go into request headers (an ETag as If-Match) and the log: a
 * CR LF there would add a header of the bucket writer's choosing to a
 * request, or a line to the log. */
static int has_control(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return 1;
	return 0;
}

/* o's member k: a string (NULL allowed if nullable) of at most max
 * bytes, no NUL nor other control byte, valid UTF-8, copied into *out. */
static int get_lstr(struct rd *r, json_object *o, const char *k,
		    int nullable, size_t max, char **out)
{
	json_object *v;
	const char *s;
	size_t bad;
	int n;

	*out = NULL;
	if (!json_object_object_get_ex(o, k, &v))
		return no(r, "\"%s\" is missing", k);
	if (!v && nullable)
		return 0;
	if (!json_object_is_type(v, json_type_string))
		return no(r, "\"%s\" is not a string", k);
	s = json_object_get_string(v);
	n = json_object_get_string_len(v);
	if ((size_t)n > max || (int)strlen(s) != n)
		return no(r, "\"%s\" is too long or holds a NUL", k);
	if (!stfs_utf8_valid(s, (size_t)n, &bad))
		return no(r, "\"%s\" is not valid UTF-8", k);
	if (has_control(s, (size_t)n))
		return no(r, "\"%s\" holds a control byte", k);
	return (*out = strdup(s)) ? 0 : -ENOMEM;
}

/* The same, of at most STFS_MANIFEST_STR_MAX bytes. */
static int get_str(struct rd *r, json_object *o, const char *k, int nullable,
		   char **out)
{
	return get_lstr(r, o, k, nullable, STFS_MANIFEST_STR_MAX, out);
}

/* o's member k: a whole number from 0 to 2^53. */
static int get_u64(struct rd *r, json_object *o, const char *k,
		   uint64_t *out)
{
	json_object *v;
	int64_t x;

	if (!json_object_object_get_ex(o, k, &v) ||
	    !json_object_is_type(v, json_type_int))
		return no(r, "\"%s\" is missing or not a whole number", k);
	errno = 0;
	x = json_object_get_int64(v);
	if (errno || x < 0 || x > (1LL << 53))
		return no(r, "\"%s\" is out of range", k);
	*out = (uint64_t)x;
	return 0;
}

static int hexval(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ?
	       c - 'a' + 10 : -1;
}

/* A lower-case hex text of exactly n digits? */
static int is_hex(const char *s, size_t n)
{
	size_t i = 0;

	for (; s[i]; i++)
		if (hexval((unsigned char)s[i]) < 0)
			return 0;
	return i == n;
}

/* A published checksum as stfs writes one ("sha256:HEX"...) or NULL. */
static int sum_ok(const char *s)
{
	return !s || (!strncmp(s, "sha256:", 7) && is_hex(s + 7, 64)) ||
	       (!strncmp(s, "sha1-blob:", 10) && is_hex(s + 10, 40)) ||
	       (!strncmp(s, "md5:", 4) && is_hex(s + 4, 32));
}

/* The refusal said so far, after the name of the file it is about (a
 * path already checked to be one, at most 200 bytes of it shown). */
static void named(struct rd *r, const char *path)
{
	char *was = strdup(r->why);

	if (was && !stfs_repo_path_bad(path))
		snprintf(r->why, r->whysz, "%.200s: %s", path, was);
	free(was);
}

static int get_file(struct rd *r, json_object *o, size_t block,
		    struct stfs_mfile *f)
{
	char *sha = NULL, *crc = NULL;
	size_t n;
	int rc;

	if (!json_object_is_type(o, json_type_object))
		return no(r, "a file is %s", "not an object");
	if ((rc = get_str(r, o, "path", 0, &f->path)))
		return rc;
	if ((rc = get_u64(r, o, "size", &f->size)) ||
	    (rc = get_str(r, o, "origin_sum", 1, &f->origin_sum)) ||
	    (rc = get_str(r, o, "origin_etag", 1, &f->origin_etag)) ||
	    (rc = get_str(r, o, "sha256", 0, &sha)) ||
	    (rc = get_str(r, o, "etag", 1, &f->etag)) ||
	    (rc = get_lstr(r, o, "crc32c", 0, STFS_MANIFEST_MAX, &crc))) {
		named(r, f->path);
		goto out;
	}
	rc = -EINVAL;
	if (!*f->path || strlen(f->path) >= STFS_REPO_PATH_MAX ||
	    stfs_repo_path_bad(f->path) ||
	    !strncmp(f->path, STFS_MIRROR_DIR "/", strlen(STFS_MIRROR_DIR) + 1)) {
		no(r, "the path \"%.200s\" is not one a repository may hold",
		   f->path);
		goto out;
	}
	if (!sum_ok(f->origin_sum)) {
		no(r, "%s: \"origin_sum\" is not sha256:, sha1-blob: or "
		   "md5: with its hex digits", f->path);
		goto out;
	}
	if (!is_hex(sha, 64)) {
		no(r, "%s: \"sha256\" is not 64 hex digits", f->path);
		goto out;
	}
	memcpy(f->sha256, sha, 65);
	f->nblocks = (f->size + block - 1) / block;
	n = strlen(crc);
	if (n != f->nblocks * 8 || !is_hex(crc, n)) {
		no(r, "%s: \"crc32c\" is not 8 hex digits for each block",
		   f->path);
		goto out;
	}
	if (f->nblocks && !(f->crc = calloc(f->nblocks, sizeof(*f->crc)))) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint64_t b = 0; b < f->nblocks; b++)
		for (int i = 0; i < 8; i++)
			f->crc[b] = f->crc[b] << 4 |
				    (uint32_t)hexval(crc[8 * b + i]);
	rc = 0;
out:
	free(sha);
	free(crc);
	return rc;
}

static int get_top(struct rd *r, json_object *j, struct stfs_manifest *m)
{
	json_object *files;
	char *fmt = NULL;
	uint64_t v = 0, bs = 0;
	size_t n;
	int rc;

	if (!json_object_is_type(j, json_type_object))
		return no(r, "%s", "not a JSON object");
	if ((rc = get_str(r, j, "format", 0, &fmt)))
		return rc;
	rc = strcmp(fmt, STFS_MIRROR_FORMAT) ?
	     no(r, "\"format\" is not \"%s\"", STFS_MIRROR_FORMAT) : 0;
	free(fmt);
	if (rc || (rc = get_u64(r, j, "version", &v)))
		return rc;
	if (v != STFS_MIRROR_VERSION) {
		snprintf(r->why, r->whysz, "version %llu: this stfs reads "
			 "version %d", (unsigned long long)v,
			 STFS_MIRROR_VERSION);
		return -EINVAL;
	}
	if ((rc = get_str(r, j, "origin", 0, &m->origin)) ||
	    (rc = get_str(r, j, "revision", 0, &m->revision)) ||
	    (rc = get_str(r, j, "created", 0, &m->created)) ||
	    (rc = get_u64(r, j, "block_size", &bs)))
		return rc;
	if (bs < (64u << 10) || bs > (64u << 20) || (bs & (bs - 1)))
		return no(r, "\"block_size\" is not a power of two from %s",
			  "64K to 64M");
	m->block = (size_t)bs;
	/* every file of the version (no --include, --exclude): absent in
	 * the manifests of stfs before it, which are taken as not */
	if (json_object_object_get_ex(j, "complete", &files)) {
		if (!json_object_is_type(files, json_type_boolean))
			return no(r, "\"complete\" is %s", "not true or false");
		m->complete = json_object_get_boolean(files);
	}
	if (!json_object_object_get_ex(j, "files", &files) ||
	    !json_object_is_type(files, json_type_array))
		return no(r, "\"files\" is %s", "missing or not an array");
	n = json_object_array_length(files);
	if (n > STFS_MANIFEST_FILES_MAX)
		return no(r, "over %s files", "100000");
	if (n && !(m->f = calloc(n, sizeof(*m->f))))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++, m->n++)
		if ((rc = get_file(r, json_object_array_get_idx(files, i),
				   m->block, &m->f[i]))) {
			m->n++;         /* freed with the others */
			return rc;
		}
	if (m->n)
		qsort(m->f, m->n, sizeof(*m->f), by_path);
	for (size_t i = 1; i < m->n; i++)
		if (!strcmp(m->f[i - 1].path, m->f[i].path))
			return no(r, "\"%.200s\" is listed twice", m->f[i].path);
	return 0;
}

/* The JSON values of json, about (each object, array and comma outside a
 * string), counted before json-c builds them: past max, the count so
 * far. */
static size_t values(const char *json, size_t len, size_t max)
{
	size_t n = 1;
	int in = 0;

	for (size_t i = 0; i < len && n <= max; i++) {
		char c = json[i];

		if (in) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in = 0;
		} else if (c == '"') {
			in = 1;
		} else if (c == '{' || c == '[' || c == ',') {
			n++;
		}
	}
	return n;
}

int stfs_manifest_parse(const char *json, size_t len,
			struct stfs_manifest *m, char *why, size_t whysz)
{
	struct rd r = { why, whysz };
	json_tokener *tok;
	json_object *j;
	int rc;

	memset(m, 0, sizeof(*m));
	why[0] = '\0';
	if (len > STFS_MANIFEST_MAX) {
		snprintf(why, whysz, "over %u bytes", STFS_MANIFEST_MAX);
		return -EFBIG;
	}
	if (values(json, len, STFS_MANIFEST_VALUES_MAX) >
	    STFS_MANIFEST_VALUES_MAX) {
		snprintf(why, whysz, "over %u JSON values",
			 STFS_MANIFEST_VALUES_MAX);
		return -EFBIG;
	}
	if (!(tok = json_tokener_new_ex(STFS_MANIFEST_DEPTH)))
		return -ENOMEM;
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	j = json_tokener_parse_ex(tok, json, (int)len);
	if (!j || json_tokener_get_error(tok) != json_tokener_success ||
	    json_tokener_get_parse_end(tok) != len) {
		snprintf(why, whysz, "not JSON: %s", j ? "text after the "
			 "object" : json_tokener_error_desc(
				 json_tokener_get_error(tok)));
		rc = -EINVAL;
	} else {
		rc = get_top(&r, j, m);
	}
	json_object_put(j);
	json_tokener_free(tok);
	if (rc)
		stfs_manifest_free(m);
	if (rc == -ENOMEM)
		snprintf(why, whysz, "out of memory");
	return rc;
}

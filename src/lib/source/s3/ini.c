/*
 * ini.c: INI files read as the AWS CLI reads ~/.aws/credentials and
 * ~/.aws/config (Python's configparser.RawConfigParser, strict, as
 * botocore uses it), so that stfs finds the keys the CLI finds:
 *
 *   [section]            its name is everything between the first '[' and
 *                        the last ']', spaces included; case matters
 *   key = value          or key: value; the key is what comes before the
 *                        first '=' or ':', trimmed and lower-cased; the
 *                        value is trimmed (a '#' in it is part of it)
 *   # or ; at the start  a comment line
 *     more               a line indented deeper than its key's continues
 *                        the value (joined with a newline)
 *   [DEFAULT]            keys every section has unless it sets them
 *
 * A key before any section, a line that is none of these, an empty key, a
 * section or a key given twice: the file does not parse (the CLI stops
 * with a ConfigParseError too), and the error says which line.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "s3.h"

static char *dup_trim(const char *s, size_t n)
{
	char *out;

	while (n && isspace((unsigned char)*s))
		s++, n--;
	while (n && isspace((unsigned char)s[n - 1]))
		n--;
	if (!(out = malloc(n + 1)))
		return NULL;
	memcpy(out, s, n);
	out[n] = '\0';
	return out;
}

static struct stfs_ini_section *find(const struct stfs_ini *ini,
				     const char *name)
{
	for (size_t i = 0; i < ini->n; i++)
		if (strcmp(ini->s[i].name, name) == 0)
			return &ini->s[i];
	return NULL;
}

static int add_section(struct stfs_ini *ini, char *name)
{
	struct stfs_ini_section *s = realloc(ini->s, (ini->n + 1) *
					      sizeof(*s));

	if (!s) {
		free(name);
		return -ENOMEM;
	}
	ini->s = s;
	memset(&s[ini->n], 0, sizeof(*s));
	s[ini->n++].name = name;
	return 0;
}

static int add_key(struct stfs_ini_section *s, char *key, char *value)
{
	struct stfs_ini_kv *kv = realloc(s->kv, (s->n + 1) * sizeof(*kv));

	if (!kv) {
		free(key);
		free(value);
		return -ENOMEM;
	}
	s->kv = kv;
	kv[s->n].key = key;
	kv[s->n++].value = value;
	return 0;
}

/* Append "\n" and text (n bytes, trimmed) to *value. */
static int append(char **value, const char *text, size_t n)
{
	char *t = dup_trim(text, n), *v;
	size_t a = strlen(*value);

	if (!t || !(v = realloc(*value, a + strlen(t) + 2))) {
		free(t);
		return -ENOMEM;
	}
	v[a] = '\n';
	strcpy(v + a + 1, t);
	free(t);
	*value = v;
	return 0;
}

/* A line that is not a comment, blank or continuation: a section header
 * (0) or a key (1), or -errno.  *cur is the section keys go to (NULL
 * before the first). */
static int header_or_key(struct stfs_ini *ini, const char *l, size_t n,
			 struct stfs_ini_section **cur, const char **why)
{
	const char *close = n ? memrchr(l, ']', n) : NULL;
	size_t k;
	char *key, *value;

	if (l[0] == '[' && close && close > l + 1) {
		char *name = strndup(l + 1, (size_t)(close - l - 1));

		if (!name)
			return -ENOMEM;
		if (strcmp(name, "DEFAULT") == 0 && find(ini, name)) {
			*cur = find(ini, name);     /* it may be reopened */
			free(name);
			return 0;
		}
		if (find(ini, name)) {
			free(name);
			*why = "a section given twice";
			return -EINVAL;
		}
		if (add_section(ini, name))
			return -ENOMEM;
		*cur = &ini->s[ini->n - 1];
		return 0;
	}
	if (!*cur) {
		*why = "a key before any [section]";
		return -EINVAL;
	}
	for (k = 0; k < n && l[k] != '=' && l[k] != ':'; k++)
		;
	if (k == n) {
		*why = "not KEY = VALUE";
		return -EINVAL;
	}
	if (!(key = dup_trim(l, k)) || !(value = dup_trim(l + k + 1,
							  n - k - 1))) {
		free(key);
		return -ENOMEM;
	}
	for (char *c = key; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	if (!*key || stfs_ini_get(*cur, key)) {
		*why = *key ? "a key given twice in its section" :
		       "an empty key";
		free(key);
		free(value);
		return -EINVAL;
	}
	return add_key(*cur, key, value) ? -ENOMEM : 1;
}

int stfs_ini_parse(const char *text, size_t len, struct stfs_ini *out,
		   size_t *line, const char **why)
{
	struct stfs_ini_section *cur = NULL;
	const char *p = text, *end = text + len;
	size_t indent_level = 0;
	int rc = 0, key = 0;    /* key: the last line was a key's */

	memset(out, 0, sizeof(*out));
	*line = 0;
	*why = NULL;
	while (p < end && !rc) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		size_t n = (size_t)((eol ? eol : end) - p), indent = 0, m;
		const char *l;

		++*line;
		while (indent < n && isspace((unsigned char)p[indent]))
			indent++;
		l = p + indent;
		m = n - indent;
		while (m && isspace((unsigned char)l[m - 1]))
			m--;
		p = eol ? eol + 1 : end;
		if (m && memchr(l, '\0', m)) {
			*why = "a NUL byte";
			rc = -EINVAL;
		} else if (!m || l[0] == '#' || l[0] == ';') {
			/* a blank line in a value is kept (trimmed at the end) */
			if (!m && key)
				rc = append(&cur->kv[cur->n - 1].value, "", 0);
		} else if (key && indent > indent_level) {
			rc = append(&cur->kv[cur->n - 1].value, l, m);
		} else {
			indent_level = indent;
			rc = header_or_key(out, l, m, &cur, why);
			key = rc == 1;
			rc = rc < 0 ? rc : 0;
		}
	}
	/* values end trimmed, as configparser joins them */
	for (size_t i = 0; i < out->n; i++)
		for (size_t k = 0; k < out->s[i].n; k++) {
			char *v = out->s[i].kv[k].value;
			size_t l = strlen(v);

			while (l && isspace((unsigned char)v[l - 1]))
				v[--l] = '\0';
		}
	if (rc) {
		if (!*why)
			*why = "out of memory";
		stfs_ini_free(out);
	}
	return rc;
}

const struct stfs_ini_section *stfs_ini_section(const struct stfs_ini *ini,
						const char *name)
{
	return find(ini, name);
}

const char *stfs_ini_get(const struct stfs_ini_section *s, const char *key)
{
	for (size_t i = 0; s && i < s->n; i++)
		if (strcmp(s->kv[i].key, key) == 0)
			return s->kv[i].value;
	return NULL;
}

void stfs_ini_free(struct stfs_ini *ini)
{
	for (size_t i = 0; i < ini->n; i++) {
		for (size_t k = 0; k < ini->s[i].n; k++) {
			free(ini->s[i].kv[k].key);
			free(ini->s[i].kv[k].value);
		}
		free(ini->s[i].kv);
		free(ini->s[i].name);
	}
	free(ini->s);
	memset(ini, 0, sizeof(*ini));
}

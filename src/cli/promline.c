/*
 * promline.c: one line of the Prometheus text format, read strictly
 * (promline.h), for `stfs stats`: only names, label names and values of
 * the characters the format allows (and label values of printable ASCII
 * without a quote or backslash, which stfs never writes), so that what it
 * prints, as text or JSON, is never more than plain words and numbers.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "promline.h"

static int name_char(char c, int first, int colon)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	       (colon && c == ':') || (!first && c >= '0' && c <= '9');
}

/* The name at *p (of name_char()s): its end, or NULL if there is none. */
static char *name_end(char *p, int colon)
{
	if (!name_char(*p, 1, colon))
		return NULL;
	while (name_char(*p, 0, colon))
		p++;
	return p;
}

/* The labels at p (after '{'), up to and with '}': the character after
 * it, or NULL. */
static char *labels(char *p, struct stfs_prom_series *s)
{
	while (*p != '}') {
		char *e = name_end(p, 0), *v;

		if (!e || *e != '=' || e[1] != '"' ||
		    s->nlabels == STFS_PROM_LABELS)
			return NULL;
		*e = '\0';
		v = e + 2;
		s->label[s->nlabels] = p;
		s->value_of[s->nlabels++] = v;
		for (p = v; *p != '"'; p++)
			if (*p < 0x20 || *p > 0x7e || *p == '\\')
				return NULL;
		*p++ = '\0';
		if (*p == ',' && p[1] != '}')
			p++;
		else if (*p != '}')
			return NULL;
	}
	return p + 1;
}

int stfs_prom_line(char *line, struct stfs_prom_series *s)
{
	char *p, *end;

	memset(s, 0, sizeof(*s));
	if (!*line || *line == '#')
		return 1;
	if (!(p = name_end(line, 1)))
		return -EINVAL;
	s->name = line;
	if (*p == '{') {
		*p = '\0';
		if (!(p = labels(p + 1, s)))
			return -EINVAL;
	}
	if (*p != ' ')
		return -EINVAL;
	*p++ = '\0';
	s->value = p;
	if (!strcmp(p, "+Inf") || !strcmp(p, "-Inf") || !strcmp(p, "NaN")) {
		s->v = strtod(p, NULL);
		return 0;
	}
	if (!*p || strspn(p, "0123456789.eE+-") != strlen(p))
		return -EINVAL;
	errno = 0;
	s->v = strtod(p, &end);
	return *end || errno ? -EINVAL : 0;
}

/*
 * stats.c: `stfs stats [--json] MOUNTPOINT`: a mount's counters, as its
 * daemon keeps them (the text of -o metrics=PATH, docs/metrics.md), read
 * from the root's user.stfs.metrics xattr (mount.h), which only the
 * mount's owner and root may read.  For a person: one line per series
 * that is not 0, sizes as people read them, each histogram as its count
 * and mean; --json: every series, {"name", "labels", "value"}.
 *
 * Exit status: 0, 1 (not an stfs mount, -o nometrics, not the owner),
 * 2 (usage).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "cli.h"
#include "mount.h"
#include "progress.h"

#define TEXT_MAX (1u << 20)

static void usage(FILE *out)
{
	fprintf(out, "usage: stfs stats [--json] MOUNTPOINT\n");
}

/* The daemon's text: malloc'd, NUL terminated; NULL after saying why. */
static char *fetch(const char *mnt)
{
	ssize_t n = getxattr(mnt, STFS_METRICS_XATTR, NULL, 0);
	char *t = NULL, st[16];

	/* every stfs mount's root answers this one, to anyone */
	if (getxattr(mnt, "user.stfs.prefetch.state", st, sizeof(st)) < 0) {
		fprintf(stderr, "stfs: %s: not an stfs mount\n", mnt);
		return NULL;
	}
	for (int tries = 0; n >= 0 && tries < 4; tries++) {
		free(t);
		if ((size_t)n >= TEXT_MAX || !(t = malloc((size_t)n + 4097)))
			break;
		/* (it grows while read: room to spare, and again) */
		n = getxattr(mnt, STFS_METRICS_XATTR, t, (size_t)n + 4096);
		if (n >= 0) {
			t[n] = '\0';
			return t;
		}
		if (errno == ERANGE)
			n = getxattr(mnt, STFS_METRICS_XATTR, NULL, 0);
	}
	free(t);
	if (n >= 0)
		errno = ENOMEM;
	if (errno == EPERM || errno == EACCES)
		fprintf(stderr, "stfs: %s: only the user who mounted it and "
			"root may read its counters\n", mnt);
	else if (errno == ENODATA)
		fprintf(stderr, "stfs: %s: no counters (mounted with -o "
			"nometrics)\n", mnt);
	else
		fprintf(stderr, "stfs: %s: %s\n", mnt, strerror(errno));
	return NULL;
}

/* One series line split in place: name, labels ("" or a="b",...),
 * value.  0, or -1 for a comment or blank line. */
static int split(char *line, char **name, char **labels, char **value)
{
	char *sp, *br;

	if (!*line || *line == '#' || !(sp = strrchr(line, ' ')))
		return -1;
	*sp = '\0';
	*value = sp + 1;
	*name = line;
	*labels = (char *)"";
	if ((br = strchr(line, '{'))) {
		*br = '\0';
		*labels = br + 1;
		if ((sp = strrchr(*labels, '}')))
			*sp = '\0';
	}
	return 0;
}

static int ends(const char *s, const char *tail)
{
	size_t n = strlen(s), k = strlen(tail);

	return n >= k && !strcmp(s + n - k, tail);
}

/* JSON: every series. */
static void print_json(char *t)
{
	char *save = NULL, *line, *name, *labels, *value;
	int first = 1;

	printf("{\"metrics\": [");
	for (line = strtok_r(t, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (split(line, &name, &labels, &value))
			continue;
		printf("%s\n  {\"name\": \"%s\", \"labels\": {", first ? "" :
		       ",", name);
		first = 0;
		/* a="b",c="d": label values are of fixed sets, plain words */
		for (char *p = labels, *eq; *p && (eq = strchr(p, '='));) {
			char *q = strchr(eq + 2, '"');

			if (eq[1] != '"' || !q)
				break;
			printf("%s\"%.*s\": \"%.*s\"", p == labels ? "" : ", ",
			       (int)(eq - p), p, (int)(q - eq - 2), eq + 2);
			p = q[1] == ',' ? q + 2 : q + 1;
		}
		printf("}, \"value\": %s}", value);
	}
	printf("\n]}\n");
}

/* For a person: the series not 0; a histogram by its count and mean. */
static void print_text(char *t)
{
	char *save = NULL, *line, *name, *labels, *value;
	double sum = 0;
	unsigned zero = 0;

	for (line = strtok_r(t, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char shown[64], full[256];
		double v;

		if (split(line, &name, &labels, &value) ||
		    ends(name, "_bucket"))
			continue;
		v = strtod(value, NULL);
		snprintf(full, sizeof(full), "%s%s%s%s", name, *labels ? "{" :
			 "", labels, *labels ? "}" : "");
		if (ends(name, "_sum")) {
			sum = v;
			continue;
		}
		if (v == 0) {
			zero++;
			continue;
		}
		if (ends(name, "_count")) {
			printf("%-64s %.0f, mean %.3f ms\n", full, v,
			       sum / v * 1e3);
			continue;
		}
		if (strstr(name, "_bytes"))
			stfs_human_size((uint64_t)v, shown, sizeof(shown));
		else
			snprintf(shown, sizeof(shown), "%s", value);
		printf("%-64s %s\n", full, shown);
	}
	printf("(%u series at 0 not shown; --json shows all)\n", zero);
}

int stfs_stats_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int json = 0, c;
	char *t;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'j') {
			json = 1;
		} else if (c == 'h') {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (optind + 1 != argc) {
		usage(stderr);
		return 2;
	}
	if (!(t = fetch(argv[optind])))
		return 1;
	if (json)
		print_json(t);
	else
		print_text(t);
	free(t);
	return fflush(stdout) ? 1 : 0;
}

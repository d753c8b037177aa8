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
#include <math.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "cli.h"
#include "mount.h"
#include "progress.h"
#include "promline.h"

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

/* JSON: every series. */
static int print_json(char *t)
{
	struct stfs_prom_series s;
	char *save = NULL, *line;
	int first = 1, rc;

	printf("{\"metrics\": [");
	for (line = strtok_r(t, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		if ((rc = stfs_prom_line(line, &s)) < 0)
			return rc;
		if (rc)
			continue;
		/* (names, label names and values: plain ASCII words) */
		printf("%s\n  {\"name\": \"%s\", \"labels\": {", first ? "" :
		       ",", s.name);
		first = 0;
		for (unsigned i = 0; i < s.nlabels; i++)
			printf("%s\"%s\": \"%s\"", i ? ", " : "", s.label[i],
			       s.value_of[i]);
		if (isfinite(s.v))
			printf("}, \"value\": %s}", s.value);
		else
			printf("}, \"value\": \"%s\"}", s.value);
	}
	printf("\n]}\n");
	return 0;
}

static int ends(const char *s, const char *tail)
{
	size_t n = strlen(s), k = strlen(tail);

	return n >= k && !strcmp(s + n - k, tail);
}

/* For a person: the series not 0; a histogram by its count and mean. */
static int print_text(char *t)
{
	struct stfs_prom_series s;
	char *save = NULL, *line;
	double sum = 0;
	unsigned zero = 0;
	int rc;

	for (line = strtok_r(t, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char shown[64], full[256];
		int k;

		if ((rc = stfs_prom_line(line, &s)) < 0)
			return rc;
		if (rc || ends(s.name, "_bucket"))
			continue;
		k = snprintf(full, sizeof(full), "%s%s", s.name,
			     s.nlabels ? "{" : "");
		for (unsigned i = 0; i < s.nlabels && k > 0 &&
		     (size_t)k < sizeof(full); i++)
			k += snprintf(full + k, sizeof(full) - (size_t)k,
				      "%s%s=\"%s\"", i ? "," : "", s.label[i],
				      s.value_of[i]);
		if (s.nlabels && k > 0 && (size_t)k < sizeof(full))
			snprintf(full + k, sizeof(full) - (size_t)k, "}");
		if (ends(s.name, "_sum")) {
			sum = s.v;
			continue;
		}
		if (s.v == 0) {
			zero++;
			continue;
		}
		if (ends(s.name, "_count")) {
			printf("%-64s %.0f, mean %.3f ms\n", full, s.v,
			       sum / s.v * 1e3);
			continue;
		}
		if (strstr(s.name, "_bytes") && s.v > 0 && s.v < 1.8e19)
			stfs_human_size((uint64_t)s.v, shown, sizeof(shown));
		else
			snprintf(shown, sizeof(shown), "%s", s.value);
		printf("%-64s %s\n", full, shown);
	}
	printf("(%u series at 0 not shown; --json shows all)\n", zero);
	return 0;
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
	if ((json ? print_json(t) : print_text(t)) < 0) {
		fflush(stdout);
		fprintf(stderr, "stfs: %s: its counters are not in the format "
			"stfs writes\n", argv[optind]);
		free(t);
		return 1;
	}
	free(t);
	return fflush(stdout) ? 1 : 0;
}

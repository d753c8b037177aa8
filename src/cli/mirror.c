/*
 * mirror.c: `stfs mirror SOURCE s3://BUCKET/PREFIX`: copies a pinned
 * source into an S3 bucket with a manifest (the library's
 * stfs_mirror_run(), src/lib/source/mirror/; docs/mirror.md), showing
 * how far it has come as `stfs prefetch` does: a line redrawn on a
 * terminal, a line now and then otherwise, JSON with --json.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "progress.h"
#include "stfs/mirror.h"
#include "stfs/stfs.h"

struct mr_args {
	const char **inc, **exc;
	size_t ninc, nexc;
	unsigned jobs;
	int quiet, json, tty;
	uint64_t shown_at;      /* the bytes when a line was last printed */
	struct stfs_remote_opts *ro;
};

static void usage(FILE *out)
{
	fprintf(out,
"usage: stfs mirror [--include=GLOB] [--exclude=GLOB] [--jobs=N]\n"
"                   [-o OPT[,OPT...]] [-q | --json] SOURCE s3://BUCKET/PREFIX\n"
"Copy a pinned source (hf://ORG/NAME@COMMIT, s3://BUCKET/PREFIX/, an\n"
"https:// URL of one file) into an S3 bucket: every file under its own\n"
"path, checked against the origin's checksum, and a manifest written\n"
"last (PREFIX/.stfs-mirror/manifest.json).  A run again after one that\n"
"was stopped copies only what is missing.  Mounts read it with\n"
"-o mirror=s3://BUCKET/PREFIX.  The bucket's credentials: the s3://\n"
"chain (AWS_* variables, ~/.aws, web identity, IMDS...).\n"
"  --include, --exclude  fnmatch(3) globs on the files' paths\n"
"  --jobs=N       files copied at once (default 4)\n"
"  -o OPT         remote options as for mounts: connections=, retries=,\n"
"                 block_size= (the block the mounts read: 4M by default),\n"
"                 connect_timeout=, stall_timeout=, s3_style=\n"
"  -q             no progress line\n"
"  --json         the result as one JSON object on stdout\n"
"Exit status: 0 mirrored, 1 failed (no manifest written), 2 usage.\n");
}

static void line(const struct mr_args *a, const struct stfs_mirror_status *s,
		 FILE *out, int tty)
{
	char done[32], total[32], rate[32];
	double sec = s->elapsed_ms / 1000.0;
	uint64_t moved = s->bytes_done - s->bytes_skipped;

	(void)a;
	stfs_human_size(s->bytes_done, done, sizeof(done));
	stfs_human_size(s->bytes_total, total, sizeof(total));
	stfs_human_size(sec > 0 ? (uint64_t)(moved / sec) : 0, rate,
			sizeof(rate));
	fprintf(out, "%sstfs mirror: %s of %s (%.0f%%), %s/s, %.0f s, files "
		"%zu/%zu (%zu already there)%s", tty ? "\r" : "", done, total,
		s->bytes_total ? 100.0 * s->bytes_done / s->bytes_total : 100.0,
		rate, sec, s->files_done, s->files_total, s->files_skipped,
		tty ? "\033[K" : "\n");
	fflush(out);
}

static void on_progress(void *ctx, const struct stfs_mirror_status *s)
{
	struct mr_args *a = ctx;

	if (a->quiet || a->json)
		return;
	if (a->tty) {
		line(a, s, stderr, 1);
	} else if (s->bytes_done - a->shown_at >= s->bytes_total / 10 + 1) {
		a->shown_at = s->bytes_done;
		line(a, s, stdout, 0);
	}
}

static void on_log(void *ctx, const char *text)
{
	struct mr_args *a = ctx;

	if (!a->quiet)
		fprintf(stderr, "%s%s\n", a->tty ? "\r\033[K" : "", text);
}

static int push(const char ***v, size_t *n, const char *s)
{
	const char **nv = realloc(*v, (*n + 1) * sizeof(**v));

	if (!nv)
		return -1;
	nv[(*n)++] = s;
	*v = nv;
	return 0;
}

/* -o a,b,c: each a remote option.  0, or 2 after saying why. */
static int take_opts(struct mr_args *a, char *list)
{
	char why[256], *save = NULL;

	for (char *o = strtok_r(list, ",", &save); o;
	     o = strtok_r(NULL, ",", &save)) {
		int rc = stfs_remote_opts_set(a->ro, o, why, sizeof(why));

		if (rc == 1 || !strncmp(o, "cache", 5) ||
		    !strncmp(o, "mirror", 6) || !strcmp(o, "offline") ||
		    !strcmp(o, "nocache")) {
			fprintf(stderr, "stfs: mirror: -o %s: not an option "
				"of stfs mirror\n", o);
			return 2;
		}
		if (rc) {
			fprintf(stderr, "stfs: mirror: -o %s\n", why);
			return 2;
		}
	}
	return 0;
}

static int parse(int argc, char **argv, struct mr_args *a)
{
	static const struct option opts[] = {
		{ "include", required_argument, NULL, 'i' },
		{ "exclude", required_argument, NULL, 'x' },
		{ "jobs", required_argument, NULL, 'J' },
		{ "json", no_argument, NULL, 'j' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 } };
	char *end;
	int c, rc;

	while ((c = getopt_long(argc, argv, "qho:", opts, NULL)) != -1) {
		switch (c) {
		case 'i':
			if (push(&a->inc, &a->ninc, optarg))
				return 1;
			break;
		case 'x':
			if (push(&a->exc, &a->nexc, optarg))
				return 1;
			break;
		case 'J':
			a->jobs = (unsigned)strtoul(optarg, &end, 10);
			if (*end || !*optarg || !a->jobs || a->jobs > 64) {
				fprintf(stderr, "stfs: mirror: --jobs: give 1 "
					"to 64\n");
				return 2;
			}
			break;
		case 'o':
			if ((rc = take_opts(a, optarg)))
				return rc;
			break;
		case 'j': a->json = 1; break;
		case 'q': a->quiet = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (argc - optind != 2) {
		usage(stderr);
		return 2;
	}
	return -1;
}

static void json_out(const struct stfs_mirror_req *q,
		     const struct stfs_mirror_status *s, int rc,
		     const struct stfs_error *e)
{
	char src[1024], dst[1024], msg[1100];

	stfs_quote(q->source, strlen(q->source), src, sizeof(src));
	stfs_quote(q->dest, strlen(q->dest), dst, sizeof(dst));
	stfs_quote(e->msg, strlen(e->msg), msg, sizeof(msg));
	printf("{\"state\":\"%s\",\"source\":\"%s\",\"mirror\":\"%s\","
	       "\"files_total\":%zu,\"files_done\":%zu,\"files_skipped\":%zu,"
	       "\"bytes_total\":%" PRIu64 ",\"bytes_done\":%" PRIu64 ","
	       "\"bytes_skipped\":%" PRIu64 ",\"elapsed_ms\":%" PRIu64 ","
	       "\"error\":\"%s\"}\n", rc ? "failed" : "done", src, dst,
	       s->files_total, s->files_done, s->files_skipped, s->bytes_total,
	       s->bytes_done, s->bytes_skipped, s->elapsed_ms, rc ? msg : "");
}

int stfs_mirror_main(int argc, char **argv)
{
	struct mr_args a = { 0 };
	struct stfs_mirror_status st;
	struct stfs_error e = { 0 };
	struct stfs_mirror_req q = { 0 };
	char why[256], *shown;
	int rc;

	if (!(a.ro = stfs_remote_opts_new()) ||
	    stfs_remote_opts_set(a.ro, "nocache", why, sizeof(why))) {
		fprintf(stderr, "stfs: out of memory\n");
		stfs_remote_opts_free(a.ro);
		return 1;
	}
	if ((rc = parse(argc, argv, &a)) >= 0)
		goto out;
	a.tty = !a.quiet && !a.json && isatty(2);
	q = (struct stfs_mirror_req){
		.source = argv[optind], .dest = argv[optind + 1],
		.remote = a.ro, .include = a.inc, .ninclude = a.ninc,
		.exclude = a.exc, .nexclude = a.nexc, .jobs = a.jobs,
		.progress = on_progress, .log = on_log, .ctx = &a };
	rc = stfs_mirror_run(&q, &st, &e) ? 1 : 0;
	if (a.tty)
		fputc('\n', stderr);
	if (a.json)
		json_out(&q, &st, rc, &e);
	else if (!rc && !a.quiet)
		line(&a, &st, stdout, 0);
	if (rc) {
		shown = stfs_source_shown(q.source);
		fprintf(stderr, "stfs: %s: mirror failed: %s\n",
			shown ? shown : "SOURCE", e.msg);
		free(shown);
	}
out:
	free(a.inc);
	free(a.exc);
	stfs_remote_opts_free(a.ro);
	return rc;
}

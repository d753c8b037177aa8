/*
 * inspect.c: `stfs inspect [--json | -q] SOURCE`: validate a source exactly
 * as a mount would, then list every tensor with its path inside the mount,
 * dtype, shape, size and absolute offset, and totals; or (--json) the same
 * as one JSON document whose schema is in docs/inspect-json.md; or (-q)
 * nothing, with only the exit status telling whether the source is valid.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stfs/stfs.h"
#include "cli.h"
#include "mount.h"

struct totals {
	uint64_t tensors, params, bytes;
};

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

static void human_size(uint64_t n, char *out, size_t sz)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB",
					     "PiB", "EiB" };
	double v = (double)n;
	int u = 0;

	while (v >= 1024 && u < 6) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(out, sz, "%" PRIu64 " B", n);
	else
		snprintf(out, sz, "%.1f %s", v, units[u]);
}

static void count(const struct stfs_model *m, struct totals *all,
		  struct totals by[STFS_DTYPE_COUNT + 1])
{
	for (size_t i = 0; i < stfs_model_tensor_count(m); i++) {
		const struct stfs_tensor *t = stfs_model_tensor(m, i);
		struct totals *d = &by[t->dtype];
		uint64_t n = stfs_tensor_elements(t);

		d->tensors++;
		d->params = sat_add(d->params, n);
		d->bytes += stfs_tensor_bytes(t);
		all->tensors++;
		all->params = sat_add(all->params, n);
		all->bytes += stfs_tensor_bytes(t);
	}
}

/* A file of another format: its key-values (long values cut) and what
 * its reader left out. */
static void print_foreign(const struct stfs_model *m, size_t i)
{
	const struct stfs_file *f = stfs_model_file(m, i);
	const struct stfs_header *h = stfs_file_header(f);
	char q[128], v[256];

	if (!strcmp(stfs_file_format(f), "safetensors"))
		return;
	printf("\n%s key-values%s%s (%zu):\n", stfs_file_format(f),
	       stfs_model_sharded(m) ? " of " : "",
	       stfs_model_sharded(m) ? stfs_model_file_name(m, i) : "",
	       stfs_header_kv_count(h));
	for (size_t k = 0; k < stfs_header_kv_count(h); k++) {
		const struct stfs_meta *e = stfs_header_kv(h, k);
		size_t tail = e->value_len < 120 ? e->value_len : 120;
		const char *cut = memmem(e->value + e->value_len - tail, tail,
					 STFS_CUT_MARK, strlen(STFS_CUT_MARK));

		stfs_quote(e->key, e->key_len, q, sizeof(q));
		stfs_quote(e->value, e->value_len, v, 120);
		/* a value the reader cut: its marker shown whole */
		printf("  %s = %s%s%.*s\n", q, v, cut ? " " : "",
		       cut ? (int)(e->value + e->value_len - cut) : 0,
		       cut ? cut : "");
	}
	for (size_t k = 0; k < stfs_header_skipped_count(h); k++)
		printf("%s  skipped: %s\n", k ? "" : "\n",
		       stfs_header_skipped(h, k));
}

/* The tensors %model.safetensors leaves out, and why. */
static void print_left_out(const struct stfs_model *m)
{
	size_t n = 0;
	char q[256];

	for (size_t i = 0; i < stfs_model_tensor_count(m); i++) {
		const struct stfs_tensor *t = stfs_model_tensor(m, i);
		const char *why = stfs_model_left_out_why(t);

		if (!why)
			continue;
		if (n++ == 0)
			printf("\nleft out of %s:\n", STFS_VIRTUAL_FULL);
		stfs_quote(t->name, t->name_len, q, 64);
		printf("  %s (%s): %s\n", q, stfs_tensor_type(t), why);
	}
}

/* Column widths count bytes; names are quoted so they print safely. */
static int print_table(const struct stfs_model *m)
{
	struct totals all = { 0 }, by[STFS_DTYPE_COUNT + 1] = { { 0 } };
	size_t wname = 4, wpath = 4, wdt = 5, wshape = 5, wfile = 4;
	size_t n = stfs_model_tensor_count(m);
	int sharded = stfs_model_sharded(m), views = 0;
	uint32_t vn[STFS_VIEW_COUNT];
	char q[256], shape[128], size[32];

	count(m, &all, by);
	for (size_t i = 0; i < n; i++) {
		const struct stfs_tensor *t = stfs_model_tensor(m, i);
		const char *file = stfs_model_file_name(m,
					stfs_model_tensor_file(m, i));
		char *path = stfs_model_tensor_path(m, i);
		size_t k;

		views |= stfs_model_tensor_views(m, i, vn) > 0;
		stfs_quote(t->name, t->name_len, q, 64);
		if (strlen(q) > wname)
			wname = strlen(q);
		if (path && strlen(path) > wpath)
			wpath = strlen(path) > 80 ? 80 : strlen(path);
		free(path);
		if (strlen(stfs_tensor_type(t)) > wdt)
			wdt = strlen(stfs_tensor_type(t));
		k = stfs_shape_str(t, shape, sizeof(shape));
		if (k > wshape)
			wshape = k < sizeof(shape) ? k : sizeof(shape) - 1;
		stfs_quote(file, strlen(file), q, sizeof(q));
		if (strlen(q) > wfile)
			wfile = strlen(q);
	}
	/* view paths are one suffix longer than their tensor's */
	if (views && wpath < 80)
		wpath = wpath + 8 > 80 ? 80 : wpath + 8;
	if (views && wname < 14)
		wname = 14;
	human_size(all.bytes, size, sizeof(size));
	printf("%s: %zu file%s, %" PRIu64 " tensors, %" PRIu64
	       " parameters, %s\n\n", stfs_model_source(m),
	       stfs_model_file_count(m),
	       stfs_model_file_count(m) == 1 ? "" : "s", all.tensors,
	       all.params, size);
	printf("%-*s  %-*s  %-*s  %-*s  %14s  %14s", (int)wname, "NAME",
	       (int)wpath, "PATH", (int)wdt, "DTYPE", (int)wshape, "SHAPE",
	       "BYTES", "OFFSET");
	if (sharded)
		printf("  %s", "FILE");
	putchar('\n');
	for (size_t i = 0; i < n; i++) {
		const struct stfs_tensor *t = stfs_model_tensor(m, i);
		char *path = stfs_model_tensor_path(m, i);
		size_t nv = stfs_model_tensor_views(m, i, vn);

		stfs_quote(t->name, t->name_len, q, 64);
		if (stfs_shape_str(t, shape, sizeof(shape)) >= sizeof(shape))
			strcpy(shape + sizeof(shape) - 5, "...]");
		printf("%-*s  %-*s  %-*s  %-*s  %14" PRIu64 "  %14" PRIu64,
		       (int)wname, q, (int)wpath, path ? path : "?", (int)wdt,
		       stfs_tensor_type(t), (int)wshape, shape,
		       stfs_tensor_bytes(t), stfs_model_tensor_offset(m, i));
		if (sharded) {
			const char *file = stfs_model_file_name(m,
						stfs_model_tensor_file(m, i));

			printf("  %s", stfs_quote(file, strlen(file), q,
						  sizeof(q)));
		}
		putchar('\n');
		free(path);
		for (size_t k = 0; k < nv; k++) {
			struct stfs_node_info ni;
			char *vp = stfs_model_node_path(m, vn[k]);
			char label[32];

			stfs_model_node(m, vn[k], &ni);
			snprintf(label, sizeof(label), "  + %s view",
				 stfs_view_suffix(ni.view) + 1);
			printf("%-*s  %-*s  %-*s  %-*s  %14" PRIu64 "\n",
			       (int)wname, label, (int)wpath, vp ? vp : "?",
			       (int)wdt,
			       stfs_dtype_name(stfs_view_dtype(t, ni.view)),
			       (int)wshape, shape, ni.size);
			free(vp);
		}
	}
	printf("\n%-8s %10s %20s %14s\n", "DTYPE", "TENSORS", "PARAMETERS",
	       "BYTES");
	for (int d = 0; d <= STFS_DTYPE_COUNT; d++) {
		if (!by[d].tensors)
			continue;
		human_size(by[d].bytes, size, sizeof(size));
		printf("%-8s %10" PRIu64 " %20" PRIu64 " %14s\n",
		       d == STFS_DTYPE_NONE ? "other" :
		       stfs_dtype_name((enum stfs_dtype)d), by[d].tensors,
		       by[d].params, size);
	}
	human_size(all.bytes, size, sizeof(size));
	printf("%-8s %10" PRIu64 " %20" PRIu64 " %14s\n", "total",
	       all.tensors, all.params, size);
	for (size_t i = 0; i < stfs_model_file_count(m); i++) {
		const struct stfs_header *h =
			stfs_file_header(stfs_model_file(m, i));
		for (size_t k = 0; k < stfs_header_meta_count(h); k++) {
			const struct stfs_meta *e = stfs_header_meta(h, k);
			char v[256];
			if (k == 0)
				printf("\n__metadata__%s%s:\n",
				       sharded ? " of " : "",
				       sharded ? stfs_model_file_name(m, i) :
				       "");
			stfs_quote(e->key, e->key_len, q, 64);
			stfs_quote(e->value, e->value_len, v, sizeof(v));
			printf("  %s = %s\n", q, v);
		}
		print_foreign(m, i);
	}
	print_left_out(m);
	return 0;
}

static int print_json(const struct stfs_model *m, int views)
{
	size_t len;
	char *s = stfs_model_json(m, views, &len);

	if (!s) {
		fprintf(stderr, "stfs: %s: out of memory\n",
			stfs_model_source(m));
		return 1;
	}
	fwrite(s, 1, len, stdout);
	putchar('\n');
	free(s);
	return 0;
}

/* A libstfs log line (a remote read that failed, and why) on stderr. */
static void log_stderr(void *ctx, const char *line)
{
	fprintf(stderr, "%s\n", line);
}

/* A libstfs warning on stderr; ctx is the SOURCE string. */
static void warn_stderr(void *ctx, const char *text)
{
	fprintf(stderr, "stfs: %s: warning: %s\n", (const char *)ctx, text);
}

int stfs_inspect_main(int argc, char **argv)
{
	struct stfs_model_opts mo = { 0 };
	struct stfs_remote_opts *ro = stfs_remote_opts_new();
	struct stfs_model *m = NULL;
	struct stfs_error err;
	const char *src = NULL, **inc_v = NULL, **exc_v = NULL;
	char *shown = NULL;
	size_t ninc = 0, nexc = 0;
	int json = 0, quiet = 0, rc = 0;
	unsigned flags = 0;
	char why[512];

	if (!ro) {
		fprintf(stderr, "stfs: out of memory\n");
		return 1;
	}

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			json = 1;
		} else if (strcmp(argv[i], "-q") == 0 ||
			   strcmp(argv[i], "--quiet") == 0) {
			quiet = 1;
		} else if (strcmp(argv[i], "--flat") == 0) {
			flags |= STFS_TREE_FLAT;
		} else if (strcmp(argv[i], "--npy") == 0) {
			flags |= STFS_TREE_NPY;
		} else if (strcmp(argv[i], "--convert=f32") == 0) {
			flags |= STFS_TREE_F32;
		} else if (strcmp(argv[i], "--offline") == 0) {
			(void)stfs_remote_opts_set(ro, "offline", why,
						   sizeof(why));
		} else if (strcmp(argv[i], "--unvalidated") == 0) {
			(void)stfs_remote_opts_set(ro, "unvalidated", why,
						   sizeof(why));
		} else if (strcmp(argv[i], "--s3-style=path") == 0 ||
			   strcmp(argv[i], "--s3-style=virtual") == 0) {
			(void)stfs_remote_opts_set(ro, argv[i][11] == 'p' ?
						   "s3_style=path" :
						   "s3_style=virtual", why,
						   sizeof(why));
		} else if (strncmp(argv[i], "--include=", 10) == 0 ||
			   strncmp(argv[i], "--exclude=", 10) == 0) {
			int inc = argv[i][2] == 'i';
			const char **p = realloc(inc ? inc_v : exc_v,
				((inc ? ninc : nexc) + 1) * sizeof(*p));

			if (!p) {
				fprintf(stderr, "stfs: out of memory\n");
				rc = 1;
				goto out;
			}
			if (inc) {
				inc_v = p;
				inc_v[ninc++] = argv[i] + 10;
			} else {
				exc_v = p;
				exc_v[nexc++] = argv[i] + 10;
			}
		} else if (strcmp(argv[i], "-h") == 0 ||
			   strcmp(argv[i], "--help") == 0) {
			stfs_usage(stdout);
			goto out;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "stfs: inspect: unknown option %s\n",
				argv[i]);
			rc = 2;
			goto out;
		} else if (!src) {
			src = argv[i];
		} else {
			fprintf(stderr, "stfs: inspect: one SOURCE only\n");
			rc = 2;
			goto out;
		}
	}
	if (!src) {
		fprintf(stderr, "usage: stfs inspect [--json | -q] [--flat] "
			"[--npy] [--convert=f32] [--include=GLOB] "
			"[--exclude=GLOB] [--offline] [--unvalidated] "
			"[--s3-style=path|virtual] SOURCE\n");
		rc = 2;
		goto out;
	}
	/* messages name it without a URL's password */
	if (!(shown = stfs_source_shown(src))) {
		fprintf(stderr, "stfs: out of memory\n");
		rc = 1;
		goto out;
	}
	if (stfs_remote_opts_check(ro, why, sizeof(why))) {
		fprintf(stderr, "stfs: %s: %s\n", shown, why);
		rc = 2;
		goto out;
	}
	mo.flags = flags;
	mo.include = inc_v;
	mo.ninclude = ninc;
	mo.exclude = exc_v;
	mo.nexclude = nexc;
	mo.warn = quiet ? NULL : warn_stderr;
	if (!quiet)
		stfs_remote_opts_log(ro, log_stderr, NULL);
	mo.remote = ro;
	mo.ctx = shown;
	if (stfs_model_open_opts(src, &mo, &m, &err)) {
		if (!quiet)
			fprintf(stderr, "stfs: %s: %s\n", shown, err.msg);
		rc = 1;
		goto out;
	}
	if (!quiet)
		rc = json ? print_json(m, !!(flags & (STFS_TREE_NPY |
						      STFS_TREE_F32))) :
			    print_table(m);
	if (!quiet) {                   /* what a URL cost */
		struct stfs_remote_stats st;

		stfs_remote_stats(stfs_model_remote(m), &st);
		if (st.requests)
			fprintf(stderr, "stfs: %s: fetched %llu bytes in %llu "
				"request%s (%llu resolve%s)\n", shown,
				(unsigned long long)st.bytes,
				(unsigned long long)st.requests,
				st.requests == 1 ? "" : "s",
				(unsigned long long)st.resolves,
				st.resolves == 1 ? "" : "s");
	}
	if (fflush(stdout) != 0)
		rc = 1;
out:
	stfs_model_close(m);
	stfs_remote_opts_free(ro);
	free(shown);
	free(inc_v);
	free(exc_v);
	return rc;
}

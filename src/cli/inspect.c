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

/* Column widths, in bytes; names are quoted so they print safely. */
struct widths {
	size_t name, path, dtype, shape, file;
	int views;
};

static void widths_of(const struct stfs_model *m, struct widths *w)
{
	uint32_t vn[STFS_VIEW_COUNT];
	char q[256], shape[128];

	*w = (struct widths){ 4, 4, 5, 5, 4, 0 };
	for (size_t i = 0; i < stfs_model_tensor_count(m); i++) {
		const struct stfs_tensor *t = stfs_model_tensor(m, i);
		const char *file = stfs_model_file_name(m,
					stfs_model_tensor_file(m, i));
		char *path = stfs_model_tensor_path(m, i);
		size_t k;

		w->views |= stfs_model_tensor_views(m, i, vn) > 0;
		stfs_quote(t->name, t->name_len, q, 64);
		if (strlen(q) > w->name)
			w->name = strlen(q);
		if (path && strlen(path) > w->path)
			w->path = strlen(path) > 80 ? 80 : strlen(path);
		free(path);
		if (strlen(stfs_tensor_type(t)) > w->dtype)
			w->dtype = strlen(stfs_tensor_type(t));
		k = stfs_shape_str(t, shape, sizeof(shape));
		if (k > w->shape)
			w->shape = k < sizeof(shape) ? k : sizeof(shape) - 1;
		stfs_quote(file, strlen(file), q, sizeof(q));
		if (strlen(q) > w->file)
			w->file = strlen(q);
	}
	/* view paths are one suffix longer than their tensor's */
	if (w->views && w->path < 80)
		w->path = w->path + 8 > 80 ? 80 : w->path + 8;
	if (w->views && w->name < 14)
		w->name = 14;
}

/* Tensor i's row, then a row for each of its views. */
static void print_row(const struct stfs_model *m, const struct widths *w,
		      size_t i)
{
	const struct stfs_tensor *t = stfs_model_tensor(m, i);
	char *path = stfs_model_tensor_path(m, i);
	uint32_t vn[STFS_VIEW_COUNT];
	size_t nv = stfs_model_tensor_views(m, i, vn);
	char q[256], shape[128];

	stfs_quote(t->name, t->name_len, q, 64);
	if (stfs_shape_str(t, shape, sizeof(shape)) >= sizeof(shape))
		strcpy(shape + sizeof(shape) - 5, "...]");
	printf("%-*s  %-*s  %-*s  %-*s  %14" PRIu64 "  %14" PRIu64,
	       (int)w->name, q, (int)w->path, path ? path : "?",
	       (int)w->dtype, stfs_tensor_type(t), (int)w->shape, shape,
	       stfs_tensor_bytes(t), stfs_model_tensor_offset(m, i));
	if (stfs_model_sharded(m)) {
		const char *file = stfs_model_file_name(m,
					stfs_model_tensor_file(m, i));

		printf("  %s", stfs_quote(file, strlen(file), q, sizeof(q)));
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
		       (int)w->name, label, (int)w->path, vp ? vp : "?",
		       (int)w->dtype,
		       stfs_dtype_name(stfs_view_dtype(t, ni.view)),
		       (int)w->shape, shape, ni.size);
		free(vp);
	}
}

/* The totals by dtype, then each file's __metadata__ and foreign values. */
static void print_footer(const struct stfs_model *m,
			 const struct totals *all, const struct totals *by)
{
	int sharded = stfs_model_sharded(m);
	char q[256], size[32];

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
	human_size(all->bytes, size, sizeof(size));
	printf("%-8s %10" PRIu64 " %20" PRIu64 " %14s\n", "total",
	       all->tensors, all->params, size);
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
}

static int print_table(const struct stfs_model *m)
{
	struct totals all = { 0 }, by[STFS_DTYPE_COUNT + 1] = { { 0 } };
	struct widths w;
	char size[32];

	count(m, &all, by);
	widths_of(m, &w);
	human_size(all.bytes, size, sizeof(size));
	printf("%s: %zu file%s, %" PRIu64 " tensors, %" PRIu64
	       " parameters, %s\n\n", stfs_model_source(m),
	       stfs_model_file_count(m),
	       stfs_model_file_count(m) == 1 ? "" : "s", all.tensors,
	       all.params, size);
	printf("%-*s  %-*s  %-*s  %-*s  %14s  %14s", (int)w.name, "NAME",
	       (int)w.path, "PATH", (int)w.dtype, "DTYPE", (int)w.shape,
	       "SHAPE", "BYTES", "OFFSET");
	if (stfs_model_sharded(m))
		printf("  %s", "FILE");
	putchar('\n');
	for (size_t i = 0; i < stfs_model_tensor_count(m); i++)
		print_row(m, &w, i);
	print_footer(m, &all, by);
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

static int cmp_repo(const void *a, const void *b)
{
	return strcmp(((const struct stfs_repo_info *)a)->path,
		      ((const struct stfs_repo_info *)b)->path);
}

/* --files: the repository, a line a file in path order: its path, size,
 * how it is verified, and small (fetched at mount), lazy, or left out
 * (why), tab-separated. */
static int print_files(const struct stfs_model *m)
{
	size_t n = stfs_model_repo_count(m);
	struct stfs_repo_info *fi = calloc(n + 1, sizeof(*fi));
	char q[1100];

	if (!fi) {
		fprintf(stderr, "stfs: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < n; i++)
		stfs_model_repo_info(m, i, &fi[i]);
	qsort(fi, n, sizeof(*fi), cmp_repo);
	for (size_t i = 0; i < n; i++) {
		printf("%s\t%llu\t%s\t%s%s\n",
		       stfs_quote(fi[i].path, strlen(fi[i].path), q, sizeof(q)),
		       (unsigned long long)fi[i].size,
		       fi[i].verify ? fi[i].verify : "-",
		       fi[i].left_out ? "left out: " : fi[i].fault ?
		       "refused: " : fi[i].small ? "small" : "lazy",
		       fi[i].left_out ? fi[i].left_out : fi[i].fault ?
		       fi[i].fault : "");
	}
	free(fi);
	return 0;
}

/* A libstfs warning on stderr; ctx is the SOURCE string. */
static void warn_stderr(void *ctx, const char *text)
{
	fprintf(stderr, "stfs: %s: warning: %s\n", (const char *)ctx, text);
}

/* The command line of `stfs inspect`. */
struct inspect_args {
	const char *src, **inc_v, **exc_v;
	size_t ninc, nexc;
	int json, quiet, files;
	unsigned flags;
};

/* --include=/--exclude= GLOB appended: 0, or -1 (no memory). */
static int add_glob(struct inspect_args *a, const char *arg)
{
	int inc = arg[2] == 'i';
	const char **p = realloc(inc ? a->inc_v : a->exc_v,
				 ((inc ? a->ninc : a->nexc) + 1) * sizeof(*p));

	if (!p)
		return -1;
	if (inc) {
		a->inc_v = p;
		a->inc_v[a->ninc++] = arg + 10;
	} else {
		a->exc_v = p;
		a->exc_v[a->nexc++] = arg + 10;
	}
	return 0;
}

/* Parse argv into *a and ro: -1 to go on, else the exit status. */
static int parse_inspect(int argc, char **argv, struct inspect_args *a,
			 struct stfs_remote_opts *ro)
{
	char why[512];

	for (int i = 1; i < argc; i++) {
		const char *o = argv[i];

		if (strcmp(o, "--json") == 0) {
			a->json = 1;
		} else if (strcmp(o, "--files") == 0) {
			a->files = 1;
		} else if (strcmp(o, "-q") == 0 || strcmp(o, "--quiet") == 0) {
			a->quiet = 1;
		} else if (strcmp(o, "--flat") == 0) {
			a->flags |= STFS_TREE_FLAT;
		} else if (strcmp(o, "--npy") == 0) {
			a->flags |= STFS_TREE_NPY;
		} else if (strcmp(o, "--convert=f32") == 0) {
			a->flags |= STFS_TREE_F32;
		} else if (strcmp(o, "--offline") == 0 ||
			   strcmp(o, "--unvalidated") == 0) {
			(void)stfs_remote_opts_set(ro, o + 2, why, sizeof(why));
		} else if (strcmp(o, "--s3-style=path") == 0 ||
			   strcmp(o, "--s3-style=virtual") == 0) {
			(void)stfs_remote_opts_set(ro, o[11] == 'p' ?
						   "s3_style=path" :
						   "s3_style=virtual", why,
						   sizeof(why));
		} else if (strncmp(o, "--include=", 10) == 0 ||
			   strncmp(o, "--exclude=", 10) == 0) {
			if (add_glob(a, o)) {
				fprintf(stderr, "stfs: out of memory\n");
				return 1;
			}
		} else if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0) {
			stfs_usage(stdout);
			return 0;
		} else if (o[0] == '-' && o[1]) {
			fprintf(stderr, "stfs: inspect: unknown option %s\n", o);
			return 2;
		} else if (!a->src) {
			a->src = o;
		} else {
			fprintf(stderr, "stfs: inspect: one SOURCE only\n");
			return 2;
		}
	}
	if (a->files && (a->json || a->quiet)) {
		fprintf(stderr, "stfs: inspect: --files is a table of its "
			"own: not with %s\n", a->json ? "--json" : "-q");
		return 2;
	}
	if (!a->src) {
		fprintf(stderr, "usage: stfs inspect [--json | --files | -q] "
			"[--flat] "
			"[--npy] [--convert=f32] [--include=GLOB] "
			"[--exclude=GLOB] [--offline] [--unvalidated] "
			"[--s3-style=path|virtual] SOURCE\n");
		return 2;
	}
	return -1;
}

/* What a remote source cost, on stderr. */
static void print_cost(const struct stfs_model *m, const char *shown)
{
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

int stfs_inspect_main(int argc, char **argv)
{
	struct stfs_model_opts mo = { 0 };
	struct stfs_remote_opts *ro = stfs_remote_opts_new();
	struct inspect_args a = { 0 };
	struct stfs_model *m = NULL;
	struct stfs_error err;
	char *shown = NULL, why[512];
	int rc;

	if (!ro) {
		fprintf(stderr, "stfs: out of memory\n");
		return 1;
	}
	if ((rc = parse_inspect(argc, argv, &a, ro)) >= 0)
		goto out;
	rc = 1;
	/* messages name it without a URL's password */
	if (!(shown = stfs_source_shown(a.src))) {
		fprintf(stderr, "stfs: out of memory\n");
		goto out;
	}
	if (stfs_remote_opts_check(ro, why, sizeof(why))) {
		fprintf(stderr, "stfs: %s: %s\n", shown, why);
		rc = 2;
		goto out;
	}
	mo.flags = a.flags;
	mo.include = a.inc_v;
	mo.ninclude = a.ninc;
	mo.exclude = a.exc_v;
	mo.nexclude = a.nexc;
	mo.warn = a.quiet ? NULL : warn_stderr;
	if (!a.quiet)
		stfs_remote_opts_log(ro, log_stderr, NULL);
	mo.remote = ro;
	mo.ctx = shown;
	if (stfs_model_open_opts(a.src, &mo, &m, &err)) {
		if (!a.quiet)
			fprintf(stderr, "stfs: %s: %s\n", shown, err.msg);
		goto out;
	}
	rc = 0;
	if (!a.quiet && a.files) {
		rc = print_files(m);
		print_cost(m, shown);
	} else if (!a.quiet) {
		rc = a.json ? print_json(m, !!(a.flags & (STFS_TREE_NPY |
							  STFS_TREE_F32))) :
			      print_table(m);
		print_cost(m, shown);
	}
	if (fflush(stdout) != 0)
		rc = 1;
out:
	stfs_model_close(m);
	stfs_remote_opts_free(ro);
	free(shown);
	free(a.inc_v);
	free(a.exc_v);
	return rc;
}

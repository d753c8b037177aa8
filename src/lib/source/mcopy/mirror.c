/*
 * mirror.c: `stfs mirror SOURCE s3://BUCKET/PREFIX` (stfs_mirror_run()):
 * the origin located and its files listed as a mount lists them, the
 * mirror's prefix located as an s3:// mount locates one (the same
 * credential chain, endpoint and addressing), the files selected, copied
 * by a few threads (mcopy.c), and the manifest written last, once every
 * file is in: a run stopped half-way leaves no manifest of its version,
 * and a run again skips what its receipts show is there.  A manifest of
 * another origin or version found there is deleted first, so that no
 * node uses a mirror while its objects are replaced.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format.h"
#include "scheme.h"
#include "rlist.h"
#include "mirror/mirror.h"
#include "mcopy/mcopy.h"

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

void stfs_mjob_progress(struct stfs_mjob *j, uint64_t bytes, int skipped)
{
	struct stfs_mirror_status st;

	pthread_mutex_lock(&j->mu);
	j->st.bytes_done += bytes;
	if (skipped) {
		j->st.bytes_skipped += bytes;
		j->st.files_skipped++;
	}
	j->st.elapsed_ms = now_ms() - j->start_ms;
	st = j->st;
	if (j->progress)
		j->progress(j->ctx, &st);
	pthread_mutex_unlock(&j->mu);
}

void stfs_mjob_total(struct stfs_mjob *j, uint64_t bytes)
{
	pthread_mutex_lock(&j->mu);
	j->st.bytes_total += bytes;
	pthread_mutex_unlock(&j->mu);
}

__attribute__((format(printf, 2, 3)))
static void say(const struct stfs_mirror_req *q, const char *fmt, ...)
{
	va_list ap;
	char line[1024];

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (q->log)
		q->log(q->ctx, line);
}

/* Is path selected by the request's globs? */
static int selected(const struct stfs_mirror_req *q, const char *path)
{
	int in = !q->ninclude;

	for (size_t i = 0; i < q->ninclude && !in; i++)
		in = fnmatch(q->include[i], path, 0) == 0;
	for (size_t i = 0; i < q->nexclude && in; i++)
		in = fnmatch(q->exclude[i], path, 0) != 0;
	return in;
}

/* The mirror's prefix: io->base and io->auth, as an s3:// mount of an
 * object under it would locate them (no request but the credentials'). */
static int locate_dest(const struct stfs_mirror_req *q,
		       struct stfs_remote *net, struct stfs_s3io *io,
		       struct stfs_location **dl, struct stfs_error *err)
{
	const char *d = q->dest;
	size_t n = strlen(d), cut;
	char *arg = NULL;
	int rc;

	if (strncasecmp(d, "s3://", 5) || n <= 5 || d[5] == '/')
		return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET, "%s: the "
				 "mirror is not s3://BUCKET/PREFIX", d);
	while (n > 5 && d[n - 1] == '/')
		n--;
	if (asprintf(&arg, "%.*s/%s", (int)n, d, STFS_MIRROR_MANIFEST) < 0)
		return stfs_nomem(err);
	rc = stfs_locate(arg, net, dl, err);
	free(arg);
	if (rc)
		return rc;
	/* base is the URL of PREFIX/.stfs-mirror (no '/' at its end): the
	 * prefix's, ending in '/', is above */
	cut = strlen(STFS_MIRROR_DIR);
	if (!(*dl)->base || strlen((*dl)->base) <= cut + 1 || !(*dl)->auth ||
	    strcmp((*dl)->base + strlen((*dl)->base) - cut - 1,
		   "/" STFS_MIRROR_DIR))
		return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET, "%s: not "
				 "an S3 prefix", q->dest);
	if (!(io->base = strndup((*dl)->base, strlen((*dl)->base) - cut)))
		return stfs_nomem(err);
	io->auth = (*dl)->auth;
	return 0;
}

/* A manifest of another origin or version at the mirror: deleted before
 * its objects are replaced (logged).  One of this version stays (it is
 * written again at the end). */
static int clear_other(const struct stfs_mirror_req *q,
		       const struct stfs_s3io *io, const struct stfs_mjob *j,
		       struct stfs_error *err)
{
	struct stfs_s3ans a = { 0 };
	struct stfs_manifest m = { 0 };
	char why[256], was[600];
	int rc, parsed;

	if ((rc = stfs_s3io_call(io, "GET", STFS_MIRROR_MANIFEST, "", NULL, 0,
				 NULL, 0, STFS_MANIFEST_MAX, &a, err)))
		return rc;
	if (a.status == 404 || (a.status == 200 && !(parsed =
	    stfs_manifest_parse(a.body, a.len, &m, why, sizeof(why))) &&
	    !strcmp(m.origin, j->origin) && !strcmp(m.revision, j->revision) &&
	    m.block == j->block)) {
		stfs_manifest_free(&m);
		stfs_s3ans_free(&a);
		return 0;
	}
	if (a.status != 200) {
		rc = stfs_fail(err, a.status == 403 ? -EACCES : -EIO, NULL,
			       STFS_NO_OFFSET, "%s: cannot read the mirror's "
			       "manifest: HTTP %ld", q->dest, a.status);
		stfs_s3ans_free(&a);
		return rc;
	}
	snprintf(was, sizeof(was), "%s@%s", m.origin ? m.origin : "?",
		 m.revision ? m.revision : "?");
	say(q, "stfs: %s: replacing the mirror of %s: its manifest is "
	    "deleted first", q->dest, m.origin ? was : "(an unreadable "
	    "manifest)");
	stfs_manifest_free(&m);
	rc = stfs_s3io_call(io, "DELETE", STFS_MIRROR_MANIFEST, "", NULL, 0,
			    NULL, 0, 1 << 16, &a, err);
	if (!rc && a.status / 100 != 2 && a.status != 404)
		rc = stfs_fail(err, -EACCES, NULL, STFS_NO_OFFSET, "%s: cannot "
			       "delete the old manifest: HTTP %ld", q->dest,
			       a.status);
	stfs_s3ans_free(&a);
	return rc;
}

/* The threads' shared state: the files to copy, and the first failure. */
struct run {
	struct stfs_mjob *j;
	const struct stfs_rfile **todo;
	struct stfs_mfile *out;
	size_t n, next;
	int rc;
	struct stfs_error err;
};

static void *worker(void *arg)
{
	struct run *r = arg;

	for (;;) {
		struct stfs_error e = { 0 };
		size_t i;
		int rc;

		pthread_mutex_lock(&r->j->mu);
		i = r->rc ? r->n : r->next++;
		pthread_mutex_unlock(&r->j->mu);
		if (i >= r->n)
			return NULL;
		rc = stfs_mirror_copy(r->j, r->todo[i], &r->out[i], &e);
		pthread_mutex_lock(&r->j->mu);
		if (rc && !r->rc) {
			r->rc = rc;
			r->err = e;
		}
		if (!rc)
			r->j->st.files_done++;
		pthread_mutex_unlock(&r->j->mu);
	}
}

/* Copy the files, then write the manifest. */
static int copy_all(const struct stfs_mirror_req *q, struct stfs_mjob *j,
		    struct run *r, struct stfs_error *err)
{
	unsigned nt = q->jobs ? q->jobs : 4;
	pthread_t th[64];
	struct stfs_manifest m = { .origin = (char *)j->origin,
				   .revision = (char *)j->revision,
				   .block = j->block, .created =
				   (char *)j->created, .f = r->out, .n = r->n,
				   .complete = !q->ninclude && !q->nexclude };
	struct stfs_s3ans a = { 0 };
	unsigned started = 0;
	char *doc;
	size_t len;
	int rc;

	if (nt > 64)
		nt = 64;
	if (nt > r->n)
		nt = r->n ? (unsigned)r->n : 1;
	for (unsigned i = 0; i < nt; i++)
		if (!pthread_create(&th[i], NULL, worker, r))
			started++;
	if (!started)
		worker(r);
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	if (r->rc) {
		*err = r->err;
		return r->rc;
	}
	if (!(doc = stfs_manifest_write(&m, &len)))
		return stfs_nomem(err);
	rc = stfs_s3io_call(j->io, "PUT", STFS_MIRROR_MANIFEST, "", NULL, 0,
			    doc, len, 1 << 16, &a, err);
	if (!rc && a.status != 200)
		rc = stfs_fail(err, a.status == 403 ? -EACCES : -EIO, NULL,
			       STFS_NO_OFFSET, "%s: the mirror refused the "
			       "manifest: HTTP %ld", q->dest, a.status);
	stfs_s3ans_free(&a);
	free(doc);
	return rc;
}

/* The files of the origin to copy (the listing, or the one file a URL
 * names), selected: *todo, *n.  0 or -errno. */
static int pick(const struct stfs_mirror_req *q, struct stfs_location *sl,
		struct stfs_rlist *one, const struct stfs_rfile ***todo,
		size_t *n, struct stfs_error *err)
{
	const struct stfs_rlist *l = &sl->files;
	size_t len = strlen(STFS_MIRROR_DIR);

	if (!sl->files.listed) {
		if (sl->kind != STFS_LOC_FILE || !sl->name)
			return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
					 "%s: not a listed repository or one "
					 "file: give hf://ORG/NAME@COMMIT, "
					 "s3://BUCKET/PREFIX/ or a URL of one "
					 "file", q->source);
		if (stfs_rlist_push(one, sl->name, 0, NULL, NULL))
			return stfs_nomem(err);
		l = one;
	}
	if (!(*todo = calloc(l->n + 1, sizeof(**todo))))
		return stfs_nomem(err);
	*n = 0;
	for (size_t i = 0; i < l->n; i++) {
		const struct stfs_rfile *f = &l->f[i];
		char qp[300];

		if (!strncmp(f->path, STFS_MIRROR_DIR, len) &&
		    (f->path[len] == '/' || !f->path[len]))
			return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
					 "%s: the repository holds %s, where "
					 "the mirror keeps its manifest",
					 q->source, f->path);
		if (!selected(q, f->path))
			continue;
		if (f->left_out) {
			/* quoted: a name left out may hold a line feed */
			say(q, "stfs: %s: not mirrored: %s",
			    stfs_quote(f->path, strlen(f->path), qp,
				       sizeof(qp)), f->left_out);
			continue;
		}
		(*todo)[(*n)++] = f;
	}
	if (!*n)
		return stfs_fail(err, -ENOENT, NULL, STFS_NO_OFFSET, "%s: no "
				 "file to mirror%s", q->source, q->ninclude ||
				 q->nexclude ? " (--include, --exclude)" : "");
	return 0;
}

int stfs_mirror_run(const struct stfs_mirror_req *q,
		    struct stfs_mirror_status *st, struct stfs_error *err)
{
	struct stfs_remote *net = NULL;
	struct stfs_location *sl = NULL, *dl = NULL;
	struct stfs_s3io io = { 0 };
	struct stfs_rlist one = { 0 };
	struct stfs_mjob j = { 0 };
	struct run r = { 0 };
	char created[32];
	time_t t = time(NULL);
	struct tm tm;
	int rc;

	if (st)
		memset(st, 0, sizeof(*st));
	pthread_mutex_init(&j.mu, NULL);
	j.start_ms = now_ms();
	gmtime_r(&t, &tm);
	strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if ((rc = stfs_remote_new(q->remote, &net, err)) ||
	    (rc = locate_dest(q, net, &io, &dl, err)) ||
	    (rc = stfs_locate(q->source, net, &sl, err)) ||
	    (rc = pick(q, sl, &one, &r.todo, &r.n, err)))
		goto out;
	io.connect_timeout_ms = 10000;
	io.stall_timeout_ms = 30000;
	io.retries = 3;
	j = (struct stfs_mjob){ .loc = sl, .io = &io, .created = created,
				.block = stfs_remote_block_size(net),
				.listed = sl->files.listed, .start_ms = j.start_ms,
				.progress = q->progress, .ctx = q->ctx };
	pthread_mutex_init(&j.mu, NULL);
	j.revision = sl->revision ? sl->revision : "";
	if (!(j.origin = stfs_mirror_origin(sl)) ||
	    !(r.out = calloc(r.n + 1, sizeof(*r.out)))) {
		rc = stfs_nomem(err);
		goto out;
	}
	r.j = &j;
	j.st.files_total = r.n;
	for (size_t i = 0; i < r.n; i++)
		j.st.bytes_total += r.todo[i]->size;
	if ((rc = clear_other(q, &io, &j, err)))
		goto out;
	rc = copy_all(q, &j, &r, err);
out:
	if (st)
		*st = j.st;
	if (st)
		st->elapsed_ms = now_ms() - j.start_ms;
	for (size_t i = 0; r.out && i < r.n; i++)
		stfs_mfile_free(&r.out[i]);
	free(r.out);
	free(r.todo);
	free((char *)j.origin);
	free(io.base);
	stfs_rlist_free(&one);
	stfs_location_free(sl);
	stfs_location_free(dl);
	stfs_remote_free(net);
	pthread_mutex_destroy(&j.mu);
	return rc;
}

/*
 * warm.c: a warm of a model's cache (`stfs prefetch`, -o prefetch=): the
 * blocks of its remote files (of the tensors it shows, for a mount of
 * include=/exclude=), or of the tensors a selection names, each
 * fetched once into the cache, in the order loaders read (the files in
 * the index's order, the tensors of a file by offset), with as many
 * blocks in flight as the remote layer has connections, below every
 * program's read (pool.c).  One thread of its own queues them; its state
 * is read at any time (the mount's xattrs).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format.h"
#include "model.h"

/* One block to bring in. */
struct warm_block {
	struct stfs_warm *w;
	uint32_t file;
	uint64_t block;
	size_t len;
};

/* A file of the warm: how many of its blocks are still to come. */
struct warm_file {
	struct stfs_source *src;
	const char *name;
	size_t left;
	int failed;
};

struct stfs_warm {
	struct stfs_model *m;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t th;
	int started;
	struct warm_block *blocks;
	size_t nblocks;
	struct warm_file *files;
	size_t nfiles;
	unsigned connections;
	size_t block;
	/* under mu */
	unsigned inflight;
	int stop;
	struct stfs_warm_status st;
};

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* Does pattern p name tensor path, one of its views, or its file? */
static int names(const char *p, const char *path, const char *file)
{
	char buf[4096];

	if (fnmatch(p, path, 0) == 0 || fnmatch(p, file, 0) == 0)
		return 1;
	for (int v = STFS_VIEW_NPY; v < STFS_VIEW_COUNT; v++) {
		snprintf(buf, sizeof(buf), "%s%s", path,
			 stfs_view_suffix((enum stfs_view)v));
		if (fnmatch(p, buf, 0) == 0)
			return 1;
	}
	return 0;
}

/* A byte range of a file to warm. */
struct range {
	uint32_t file;
	uint64_t off, end;
};

static int cmp_range(const void *a, const void *b)
{
	const struct range *x = a, *y = b;

	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

/* The ranges a selection names (sorted), or every file whole: 0 with
 * *out, or -errno with err (a pattern that names nothing). */
static int select_ranges(struct stfs_model *m, const struct stfs_warm_sel *sel,
			 struct range **out, size_t *n, struct stfs_error *err)
{
	size_t nt = stfs_model_tensor_count(m), nf = stfs_model_file_count(m);
	size_t np = sel->ninclude + sel->nexclude, k = 0;
	unsigned char *used = calloc(np + 1, 1);
	struct range *r = calloc(nt + nf + 1, sizeof(*r));

	if (!used || !r) {
		free(used);
		free(r);
		return -ENOMEM;
	}
	/* all of a mount: its files whole, or (a mount of a selection,
	 * include=: a rank's share) the tensors it shows */
	if (!np && !m->selected) {
		for (size_t f = 0; f < nf; f++)
			r[k++] = (struct range){ (uint32_t)f, 0,
				stfs_file_size(stfs_model_file(m, f)) };
	}
	for (size_t i = 0; (np || m->selected) && i < nt; i++) {
		const struct stfs_tensor *t = stfs_model_tensor(m, i);
		size_t f = stfs_model_tensor_file(m, i);
		const char *file = stfs_model_file_name(m, f);
		char *path = stfs_model_tensor_path(m, i);
		int in = sel->ninclude == 0, ex = 0;

		if (!path) {
			free(used);
			free(r);
			return -ENOMEM;
		}
		for (size_t p = 0; p < sel->ninclude; p++)
			if (names(sel->include[p], path, file))
				in = used[p] = 1;
		for (size_t p = 0; p < sel->nexclude; p++)
			if (names(sel->exclude[p], path, file))
				ex = used[sel->ninclude + p] = 1;
		free(path);
		if (in && !ex && t->end > t->begin) {
			uint64_t off = stfs_model_tensor_offset(m, i);

			r[k++] = (struct range){ (uint32_t)f, off,
						 off + (t->end - t->begin) };
		}
	}
	for (size_t p = 0; p < np; p++)
		if (!used[p]) {
			int inc = p < sel->ninclude;

			err->code = -ENOENT;
			snprintf(err->msg, sizeof(err->msg), "--%s=%s names no "
				 "tensor and no file of the mount",
				 inc ? "include" : "exclude",
				 inc ? sel->include[p] :
				 sel->exclude[p - sel->ninclude]);
			free(used);
			free(r);
			return -ENOENT;
		}
	free(used);
	qsort(r, k, sizeof(*r), cmp_range);
	*out = r;
	*n = k;
	return 0;
}

/* The blocks of the ranges, each once, in order, of the remote files
 * (files of w set): 0, or -errno with err. */
static int plan(struct stfs_warm *w, const struct range *r, size_t n,
		struct stfs_error *err)
{
	struct stfs_warm_info wi = { 0 };
	uint64_t last_file = UINT64_MAX, last_block = UINT64_MAX, cap = 0;
	uint64_t cache_max = 0;
	int over = 0;

	for (size_t i = 0; i < n; i++) {
		struct warm_file *f = &w->files[r[i].file];
		int rc = stfs_source_warm_info(f->src, &wi);
		uint64_t b0, b1;

		if (rc == -EOPNOTSUPP || r[i].end <= r[i].off)
			continue;               /* a local file: nothing to do */
		if (rc) {
			err->code = rc;
			snprintf(err->msg, sizeof(err->msg), "%s: the mount has "
				 "no cache (nocache): nothing to prefetch into",
				 f->name);
			return rc;
		}
		w->connections = wi.connections;
		w->block = wi.block;
		cache_max = wi.cache_max;
		b0 = r[i].off / wi.block;
		b1 = (r[i].end + wi.block - 1) / wi.block;
		if (last_file == r[i].file && b0 <= last_block)
			b0 = last_block + 1;
		for (uint64_t b = b0; b < b1; b++) {
			uint64_t size = stfs_file_size(stfs_model_file(w->m,
								       r[i].file));
			size_t len = size - b * wi.block < wi.block ?
				     (size_t)(size - b * wi.block) : wi.block;

			if (cache_max && (over || w->st.bytes_total + len >
					  cache_max)) {
				/* refused below: count the rest, keep no
				 * block list for it */
				uint64_t end = b1 * wi.block < size ?
					       b1 * wi.block : size;

				w->st.bytes_total += end - b * wi.block;
				over = 1;
				break;
			}
			if (w->nblocks == cap) {
				struct warm_block *nb;

				cap = cap ? 2 * cap : 64;
				if (!(nb = realloc(w->blocks, cap *
						   sizeof(*nb))))
					return -ENOMEM;
				w->blocks = nb;
			}
			w->blocks[w->nblocks++] = (struct warm_block){
				w, r[i].file, b, len };
			if (f->left++ == 0)
				w->st.files_total++;
			w->st.bytes_total += len;
			last_block = b;
		}
		last_file = r[i].file;
	}
	if (over) {
		err->code = -EFBIG;
		snprintf(err->msg, sizeof(err->msg), "the prefetch needs %"
			 PRIu64 " bytes (%.1f GiB) of cache, more than its "
			 "limit of %" PRIu64 " bytes (%.1f GiB): mount with a "
			 "larger -o cache_size=, or prefetch less (--include)",
			 w->st.bytes_total, w->st.bytes_total / 1073741824.0,
			 cache_max, cache_max / 1073741824.0);
		return -EFBIG;
	}
	return 0;
}

static void block_done(void *arg, int rc)
{
	struct warm_block *b = arg;
	struct stfs_warm *w = b->w;
	struct warm_file *f = &w->files[b->file];

	pthread_mutex_lock(&w->mu);
	w->inflight--;
	if (!rc) {
		w->st.bytes_done += b->len;
	} else if (rc != -ECANCELED || !w->stop) {
		f->failed = 1;
		w->st.failed_blocks++;
		snprintf(w->st.error, sizeof(w->st.error), "%s: bytes %" PRIu64
			 "-%" PRIu64 ": %s", f->name,
			 b->block * (uint64_t)w->block,
			 b->block * (uint64_t)w->block + b->len - 1,
			 strerror(-rc));
	}
	if (--f->left == 0 && !f->failed)
		w->st.files_done++;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

static void *warm_thread(void *arg)
{
	struct stfs_warm *w = arg;
	size_t i;

	for (i = 0; i < w->nblocks; i++) {
		struct warm_block *b = &w->blocks[i];

		pthread_mutex_lock(&w->mu);
		while (w->inflight >= 2 * w->connections && !w->stop)
			pthread_cond_wait(&w->cv, &w->mu);
		if (w->stop) {
			pthread_mutex_unlock(&w->mu);
			break;
		}
		w->inflight++;
		pthread_mutex_unlock(&w->mu);
		stfs_source_warm(w->files[b->file].src, b->block, block_done,
				 b);
	}
	pthread_mutex_lock(&w->mu);
	while (w->inflight)
		pthread_cond_wait(&w->cv, &w->mu);
	pthread_mutex_unlock(&w->mu);
	/* every block handed to the cache's writer is written */
	for (size_t f = 0; f < w->nfiles; f++)
		if (w->files[f].src && w->files[f].left == 0)
			stfs_source_warm_flush(w->files[f].src);
	pthread_mutex_lock(&w->mu);
	w->st.elapsed_ms = now_ms() - w->st.started_ms;
	w->st.state = w->st.failed_blocks || i < w->nblocks ?
		      STFS_WARM_FAILED : STFS_WARM_DONE;
	if (i < w->nblocks && !w->st.error[0])
		snprintf(w->st.error, sizeof(w->st.error), "stopped");
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

int stfs_warm_start(struct stfs_model *m, const struct stfs_warm_sel *sel,
		    struct stfs_warm **out, struct stfs_error *err)
{
	struct stfs_warm *w = calloc(1, sizeof(*w));
	struct range *r = NULL;
	size_t n = 0;
	int rc;

	*err = (struct stfs_error){ .offset = STFS_NO_OFFSET };
	if (!w)
		return -ENOMEM;
	w->m = m;
	w->nfiles = stfs_model_file_count(m);
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	w->st.id = sel->id;
	w->st.started_ms = now_ms();
	w->files = calloc(w->nfiles + 1, sizeof(*w->files));
	rc = w->files ? select_ranges(m, sel, &r, &n, err) : -ENOMEM;
	for (size_t f = 0; !rc && f < w->nfiles; f++) {
		w->files[f].src = stfs_file_source(stfs_model_file(m, f));
		w->files[f].name = stfs_model_file_name(m, f);
	}
	if (!rc)
		rc = plan(w, r, n, err);
	free(r);
	if (!rc && w->nblocks == 0) {
		w->st.state = STFS_WARM_DONE;
		w->st.local = 1;
	} else if (!rc) {
		w->st.state = STFS_WARM_WARMING;
		if (pthread_create(&w->th, NULL, warm_thread, w))
			rc = -EAGAIN;
		else
			w->started = 1;
	}
	if (rc) {
		if (rc == -ENOMEM || rc == -EAGAIN) {
			err->code = rc;
			snprintf(err->msg, sizeof(err->msg), "%s",
				 strerror(-rc));
		}
		stfs_warm_free(w);
		return rc;
	}
	*out = w;
	return 0;
}

void stfs_warm_status(struct stfs_warm *w, struct stfs_warm_status *st)
{
	pthread_mutex_lock(&w->mu);
	*st = w->st;
	if (st->state == STFS_WARM_WARMING)
		st->elapsed_ms = now_ms() - st->started_ms;
	pthread_mutex_unlock(&w->mu);
}

int stfs_warm_busy(struct stfs_warm *w)
{
	int busy;

	pthread_mutex_lock(&w->mu);
	busy = w->st.state == STFS_WARM_WARMING;
	pthread_mutex_unlock(&w->mu);
	return busy;
}

void stfs_warm_free(struct stfs_warm *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = 1;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	/* the blocks queued go; those on the wire end first */
	for (size_t f = 0; w->started && f < w->nfiles; f++)
		stfs_source_warm_cancel(w->files[f].src);
	if (w->started)
		pthread_join(w->th, NULL);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	free(w->blocks);
	free(w->files);
	free(w);
}

/*
 * tier.c: -o mirror=s3://BUCKET/PREFIX on a mount: the mirror as a tier
 * in front of the origin.  Once the source is located, the mirror's
 * manifest is read and used only if it names the same origin, the same
 * pinned version and the mount's block size; each of its files is used
 * only if the origin's own listing agrees with it (the same size, and the
 * same published checksum).  Then a file opens from the mirror (its first
 * block fetched and checked, no request to the origin) and the block
 * engine's fetches of it go to the mirror object, each block checked
 * against the manifest's CRC-32C before it is served or cached.  A block
 * that fails its check, a file the mirror lacks or a mirror that cannot
 * be reached is read from the origin, and the log says so; a mirror that
 * did not answer is left alone for a while.  The node cache is in front
 * of both, as without a mirror.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format.h"
#include "engine.h"
#include "scheme.h"
#include "locate.h"
#include "rlist.h"
#include "http/http.h"
#include "http/httphdr.h"
#include "s3/service.h"
#include "mirror/mirror.h"

/* A mirror that did not answer is not asked again for this long. */
#define DOWN_MS 30000
/* Bytes of blocks kept for a read to come (memos), at most, in all. */
#define MEMO_MAX (64u << 20)

/* One file of the mirror as the mount reads it. */
struct tfile {
	char *origin_url;               /* the URL the location opens */
	char *url;                      /* the mirror object's */
	char *key;                      /* its blocks' in the cache: named by
					 * the mirror's trust tag and url,
					 * which no source spelling names */
	const struct stfs_mfile *f;
	pthread_mutex_t mu;             /* memo: a block fetched for a read */
	uint64_t memo_block;            /* of its tail, kept for its head */
	char *memo;                     /* or NULL */
	size_t memo_len;
	atomic_int gone;                /* its object answered otherwise
					 * (replaced, deleted): not asked */
};

struct stfs_mirror {
	char *name;                     /* s3://BUCKET/PREFIX, for the log */
	struct stfs_manifest m;
	struct stfs_location *ml;       /* the mirror's location (its auth) */
	char *tag;                      /* its credential's trust tag, or
					 * NULL (none: public) */
	struct tfile *t;                /* sorted by origin_url */
	size_t n;
	int fetched, fetch_rc;          /* the manifest read (and how) */
	int listed;                     /* the locator listed from it */
	int attached;                   /* the mount reads from it */
	atomic_uint_fast64_t down_until;        /* monotonic ms */
	atomic_uint_fast64_t blocks, bad, fallbacks;
	atomic_size_t memo_bytes;       /* of every file's memo */
};

static uint64_t mono_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

__attribute__((format(printf, 2, 3)))
static void say(struct stfs_remote *r, const char *fmt, ...)
{
	char line[1200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	stfs_remote_log(r, line);
}

/* o (a SOURCE as shown) less its "@REVISION" (refs/pr/N and
 * refs/convert/X are three components), its folder kept: a mirror of
 * hf://org/m@C/sub is one of hf://org/m/sub, not of the repository. */
static void cut_revision(char *o)
{
	char *scheme = strstr(o, "://"), *at, *end;
	int parts = 1;

	if (!scheme || !(at = strchr(scheme + 3, '@')))
		return;
	if (!strncmp(at + 1, "refs/pr/", 8) ||
	    !strncmp(at + 1, "refs/convert/", 13))
		parts = 3;
	for (end = at + 1; *end && parts; end++)
		if (*end == '/' && !--parts)
			break;
	memmove(at, end, strlen(end) + 1);
}

char *stfs_mirror_origin(const struct stfs_location *loc)
{
	char *o = stfs_source_shown(loc->arg);

	if (o && loc->revision)
		cut_revision(o);
	return o;
}

static int by_url(const void *a, const void *b)
{
	return strcmp(((const struct tfile *)a)->origin_url,
		      ((const struct tfile *)b)->origin_url);
}

static void tier_free(struct stfs_mirror *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->t[i].origin_url);
		free(m->t[i].url);
		free(m->t[i].key);
		free(m->t[i].memo);
		pthread_mutex_destroy(&m->t[i].mu);
	}
	free(m->t);
	stfs_manifest_free(&m->m);
	stfs_location_free(m->ml);
	free(m->tag);
	free(m->name);
	free(m);
}

/* Is the mirror down (not to be asked now)? */
static int down(struct stfs_mirror *m)
{
	return atomic_load(&m->down_until) > mono_ms();
}

/* Blocks [b0, b1] of t from the mirror into buf, each checked: 0, or
 * -errno (logged: the caller reads them from the origin). */
static int get_blocks(struct stfs_remote *r, struct stfs_mirror *m,
		      struct tfile *t, CURL *h, uint64_t b0,
		      uint64_t b1, char *buf, const atomic_int *cancel)
{
	uint64_t bs = m->m.block, start = b0 * bs, end = (b1 + 1) * bs;
	struct stfs_error e = { 0 };
	struct stfs_http_resp resp;
	size_t got = 0;
	int rc;

	if (end > t->f->size)
		end = t->f->size;
	struct stfs_request q = {
		.url = t->url, .etag = t->f->etag,
		.last_modified = "", .auth = m->ml->auth, .off = start,
		.len = (size_t)(end - start), .want_total = t->f->size,
		.cancel = cancel, .flags = STFS_REQ_ONCE | STFS_REQ_MIRROR };

	memset(&resp, 0, sizeof(resp));
	rc = stfs_httpc_fetch(r->http, h, &q, buf, NULL, &got, &resp, &e);
	if (!rc && got != q.len)
		rc = -EIO;
	if (rc && resp.status) {
		/* it answered, but not with the object the manifest names
		 * (412: another ETag; 404; a short one): that file from the
		 * origin from now on */
		if (!atomic_exchange(&t->gone, 1))
			say(r, "stfs: mirror %s: %s: %s; not served from the "
			    "mirror: read from the origin", m->name,
			    t->f->path, e.msg[0] ? e.msg : strerror(-rc));
		atomic_fetch_add(&m->fallbacks, 1);
		return rc;
	}
	if (rc) {
		uint64_t was = atomic_exchange(&m->down_until,
					       mono_ms() + DOWN_MS);

		if (was <= mono_ms())
			say(r, "stfs: mirror %s: %s: %s; reading from the "
			    "origin (the mirror is asked again in %d s)",
			    m->name, t->f->path, e.msg[0] ? e.msg :
			    strerror(-rc), DOWN_MS / 1000);
		atomic_fetch_add(&m->fallbacks, 1);
		return rc;
	}
	for (uint64_t b = b0; b <= b1; b++) {
		size_t at = (size_t)((b - b0) * bs);
		size_t len = (size_t)(b * bs + bs > end ? end - b * bs : bs);
		uint32_t c = stfs_crc32c(0, buf + at, len);

		if (c != t->f->crc[b]) {
			atomic_fetch_add(&m->bad, 1);
			atomic_fetch_add(&m->fallbacks, 1);
			say(r, "stfs: mirror %s: %s: block %llu fails its check "
			    "(CRC-32C %08x, the manifest says %08x): not "
			    "served; read from the origin", m->name,
			    t->f->path, (unsigned long long)b, c,
			    t->f->crc[b]);
			return -EBADMSG;
		}
	}
	atomic_fetch_add(&m->blocks, b1 - b0 + 1);
	return 0;
}

/* A memo hit: [off, off + len) of t's block b, taken (and let go). */
static int memo_take(struct stfs_mirror *m, struct tfile *t, uint64_t b,
		     uint64_t bs, char *out, uint64_t off, size_t len)
{
	int hit;

	pthread_mutex_lock(&t->mu);
	hit = t->memo && t->memo_block == b &&
	      off + len <= b * bs + t->memo_len;
	if (hit) {
		memcpy(out, t->memo + (off - b * bs), len);
		free(t->memo);
		t->memo = NULL;
		atomic_fetch_sub(&m->memo_bytes, t->memo_len);
	}
	pthread_mutex_unlock(&t->mu);
	return hit;
}

/* Keep buf (checked block b of t, len bytes) for a read to come, within
 * MEMO_MAX in all (else it is let go). */
static void memo_put(struct stfs_mirror *m, struct tfile *t, uint64_t b,
		     char *buf, size_t len)
{
	pthread_mutex_lock(&t->mu);
	if (t->memo)
		atomic_fetch_sub(&m->memo_bytes, t->memo_len);
	free(t->memo);
	t->memo = NULL;
	if (atomic_fetch_add(&m->memo_bytes, len) + len > MEMO_MAX) {
		atomic_fetch_sub(&m->memo_bytes, len);
		free(buf);
	} else {
		t->memo = buf;
		t->memo_block = b;
		t->memo_len = len;
	}
	pthread_mutex_unlock(&t->mu);
}

/* The engine's fetch: from the mirror, checked, else from the origin. */
static int tier_fetch(struct stfs_object *o, void *h,
		      const struct stfs_request *q, char *buf, size_t *got,
		      struct stfs_error *err)
{
	struct stfs_remote *r = o->r;
	struct stfs_mirror *m = r->mirror;
	struct tfile *t = (struct tfile *)o->tier;
	uint64_t bs = m ? m->m.block : 0, b0, b1, start;
	char *tmp = NULL;
	size_t n;

	if (!t || !q->len || down(m) || atomic_load(&t->gone))
		goto origin;
	b0 = q->off / bs;
	b1 = (q->off + q->len - 1) / bs;
	start = b0 * bs;
	n = (size_t)((b1 + 1) * bs > t->f->size ? t->f->size - start :
		     (b1 - b0 + 1) * bs);
	if (b0 == b1 && memo_take(m, t, b0, bs, buf, q->off, q->len)) {
		*got = q->len;
		return 0;
	}
	if (start == q->off && n == q->len) {
		if (get_blocks(r, m, t, h, b0, b1, buf, q->cancel))
			goto origin;
		*got = q->len;
		return 0;
	}
	if (!(tmp = malloc(n)))
		goto origin;
	if (get_blocks(r, m, t, h, b0, b1, tmp, q->cancel)) {
		free(tmp);
		goto origin;
	}
	memcpy(buf, tmp + (q->off - start), q->len);
	*got = q->len;
	/* a block's tail read first (a reader in its middle): its head is
	 * asked next, from the bytes here */
	if (b0 == b1 && q->off > start)
		memo_put(m, t, b0, tmp, n);
	else
		free(tmp);
	return 0;
origin:
	return stfs_http_fetch_ops()->fetch(o, h, q, buf, got, err);
}

static void *handle_new(void)
{
	return stfs_http_fetch_ops()->handle_new();
}

static void handle_free(void *h)
{
	stfs_http_fetch_ops()->handle_free(h);
}

static const struct stfs_fetch_ops tier_ops = {
	.handle_new = handle_new,
	.handle_free = handle_free,
	.fetch = tier_fetch,
};

/* An object of url opened from the mirror: its first block fetched and
 * checked, its head given (struct stfs_remote's mirror_open). */
static int tier_open(struct stfs_remote *r, const char *url,
		     struct stfs_object *o, char *head, size_t *head_len,
		     size_t head_max, struct stfs_tier_open *out)
{
	struct stfs_mirror *m = r->mirror;
	struct tfile key = { .origin_url = (char *)url }, *t;
	size_t n;
	char *buf;
	CURL *h;
	int rc;

	if (!m || !(t = bsearch(&key, m->t, m->n, sizeof(*m->t), by_url)))
		return -ENOENT;
	if (down(m) || atomic_load(&t->gone)) {
		atomic_fetch_add(&m->fallbacks, 1);
		return -ENOENT;
	}
	n = t->f->size < m->m.block ? (size_t)t->f->size : m->m.block;
	if (!(buf = malloc(n + 1)))
		return -ENOENT;
	h = stfs_httpc_handle(r->http);
	rc = !h ? -ENOMEM : n ? get_blocks(r, m, t, h, 0, 0, buf, NULL) : 0;
	stfs_httpc_release(r->http, h);
	if (!rc) {
		*head_len = n < head_max ? n : head_max;
		memcpy(head, buf, *head_len);
		o->tier = t;
		*out = (struct stfs_tier_open){ .size = t->f->size,
			.key = t->key, .version = t->f->etag,
			.origin_etag = t->f->origin_etag };
		/* checked whole: kept for the engine's read of block 0, which
		 * is then not fetched again */
		if (n) {
			memo_put(m, t, 0, buf, n);
			buf = NULL;
		}
	}
	free(buf);
	return rc ? -ENOENT : 0;
}

/* The URL loc opens the file at path by (repo.c, locate.c). */
static char *origin_url(const struct stfs_location *loc, const char *path)
{
	char *esc, *u = NULL;

	if (loc->http && loc->kind == STFS_LOC_FILE && loc->name &&
	    !strcmp(path, loc->name))
		return strdup(loc->arg);
	if (!loc->base || !(esc = stfs_url_escape_path(path)))
		return NULL;
	if (asprintf(&u, "%s/%s", loc->base, esc) < 0)
		u = NULL;
	free(esc);
	return u;
}

/* An origin with no listing (an https:// URL): is t's object there still
 * the version the mirror copied?  One byte asked with If-Match on the
 * origin's ETag at copy: 1 if it answers, else 0 (said). */
static int same_version(struct stfs_remote *r, struct stfs_mirror *m,
			const struct stfs_location *loc, const struct tfile *t)
{
	struct stfs_error e = { 0 };
	struct stfs_request q = { .url = t->origin_url,
				  .etag = t->f->origin_etag,
				  .last_modified = "", .auth = loc->auth,
				  .off = 0, .len = 1,
				  .want_total = t->f->size,
				  .flags = STFS_REQ_ONCE };
	CURL *h;
	char b[1];
	size_t got = 0;
	int rc = -EINVAL;

	if (t->f->origin_etag && t->f->size &&
	    stfs_http_strong_etag(t->f->origin_etag) &&
	    (h = stfs_httpc_handle(r->http))) {
		rc = stfs_httpc_fetch(r->http, h, &q, b, NULL, &got, NULL, &e);
		stfs_httpc_release(r->http, h);
	}
	if (rc)
		say(r, "stfs: mirror %s: %s: the origin's version is not the "
		    "one mirrored (%s); read from the origin", m->name,
		    t->f->path, t->f->origin_etag ? (e.msg[0] ? e.msg :
		    strerror(-rc)) : "no ETag was recorded");
	return rc == 0;
}

/* The files of the manifest that the origin's listing agrees with, as
 * m->t: 0 or -ENOMEM. */
static int take_files(struct stfs_remote *r, struct stfs_mirror *m,
		      const struct stfs_location *loc, const char *base,
		      const struct stfs_rfile **ix)
{
	if (!(m->t = calloc(m->m.n + 1, sizeof(*m->t))))
		return -ENOMEM;
	for (size_t i = 0; i < m->m.n; i++) {
		const struct stfs_mfile *f = &m->m.f[i];
		const struct stfs_rfile *lf = loc->files.listed ?
			stfs_rlist_find(ix, loc->files.n, f->path) : NULL;
		struct tfile *t = &m->t[m->n];
		char *esc;

		if (loc->files.listed && (!lf || lf->size != f->size ||
		    (lf->sum && (!f->origin_sum ||
				 strcmp(lf->sum, f->origin_sum))) ||
		    (lf->revision && (!f->origin_etag ||
				      strcmp(lf->revision, f->origin_etag))))) {
			say(r, "stfs: mirror %s: %s: %s; read from the origin",
			    m->name, f->path, !lf ? "not in the origin's "
			    "listing" : "the origin lists another size, "
			    "checksum or ETag");
			continue;
		}
		if (!f->etag)
			continue;
		if (!(esc = stfs_url_escape_path(f->path)))
			return -ENOMEM;
		t->f = f;
		t->origin_url = origin_url(loc, f->path);
		if (!loc->files.listed && t->origin_url &&
		    !same_version(r, m, loc, t)) {
			free(t->origin_url);
			free(esc);
			t->origin_url = NULL;
			continue;
		}
		if (asprintf(&t->url, "%s%s", base, esc) < 0)
			t->url = NULL;
		/* the cache key of its blocks: "stfs-mirror TAG URL", apart
		 * from the object's own URL (a mount naming it plainly, with
		 * other keys or none, never reads what the mirror's keys
		 * fetched), and http.c puts it in the origin's domain too */
		if (t->url && asprintf(&t->key, "stfs-mirror %s %s",
				       m->tag ? m->tag : "public", t->url) < 0)
			t->key = NULL;
		free(esc);
		pthread_mutex_init(&t->mu, NULL);
		m->n++;
		if (!t->origin_url || !t->url || !t->key)
			return -ENOMEM;
	}
	qsort(m->t, m->n, sizeof(*m->t), by_url);
	return 0;
}

/* Does m's manifest fit loc: the same origin, version and block size?
 * 1, or 0 after saying why not. */
static int fits(struct stfs_remote *r, struct stfs_mirror *m,
		const struct stfs_location *loc)
{
	char *origin = stfs_mirror_origin(loc);
	const char *rev = loc->revision ? loc->revision : "";
	int ok = origin && !strcmp(origin, m->m.origin) &&
		 !strcmp(rev, m->m.revision) && m->m.block == r->o.block;

	if (!ok)
		say(r, "stfs: mirror %s: not used: it mirrors %s%s%s with "
		    "blocks of %zu bytes, this mount reads %s%s%s with blocks "
		    "of %zu", m->name, m->m.origin, *m->m.revision ? "@" : "",
		    m->m.revision, m->m.block, origin ? origin : "?",
		    *rev ? "@" : "", rev, r->o.block);
	free(origin);
	return ok;
}

static const struct stfs_service s3_only[] = {
	{ "s3", STFS_SCHEME_S3, 1, stfs_locate_s3, NULL },
};
/* With keys of its own: the chain is not run (keys.c gives them). */
static const struct stfs_service s3_keyed[] = {
	{ "s3", STFS_SCHEME_S3, 1, stfs_locate_s3_keyed, NULL },
};

/* Read the manifest of m (named m->name), once: 0, or -errno (said). */
static int fetch_manifest(struct stfs_remote *r, struct stfs_mirror *m)
{
	struct stfs_error e = { 0 };
	struct stfs_http_resp resp;
	char *arg = NULL, *url = NULL, *body = NULL, why[300];
	size_t len = 0, n = strlen(m->name);
	int rc;

	if (m->fetched)
		return m->fetch_rc;
	m->fetched = 1;

	while (n > 5 && m->name[n - 1] == '/')
		n--;
	if (asprintf(&arg, "%.*s/%s", (int)n, m->name,
		     STFS_MIRROR_MANIFEST) < 0)
		return -ENOMEM;
	rc = stfs_locate_with(stfs_mirror_has_keys(r) ? s3_keyed : s3_only,
			      1, arg, r, &m->ml, &e);
	free(arg);
	if (!rc)
		rc = stfs_mirror_keys(r, m->ml, &e);
	/* the trust domain of what its keys fetch (blocks keyed by it) */
	if (!rc && stfs_http_trust(r, m->ml->auth, 0, &m->tag))
		rc = stfs_fail(&e, -EACCES, NULL, STFS_NO_OFFSET, "its "
			       "credentials cannot be keyed in the cache");
	if (!rc && asprintf(&url, "%s/manifest.json", m->ml->base) < 0) {
		url = NULL;
		rc = -ENOMEM;
	}
	if (!rc)
		rc = stfs_http_get(r, url, m->ml->auth, STFS_REQ_ONCE, NULL,
				   STFS_MANIFEST_MAX, &body, &len, &resp, &e);
	if (rc) {
		say(r, "stfs: mirror %s: not used: cannot read its manifest: "
		    "%s", m->name, e.msg[0] ? e.msg : strerror(-rc));
		goto out;
	}
	if ((rc = stfs_manifest_parse(body, len, &m->m, why, sizeof(why))))
		say(r, "stfs: mirror %s: not used: its manifest: %s", m->name,
		    why);
out:
	free(url);
	free(body);
	return m->fetch_rc = rc;
}

/* Check the manifest of m for loc: 0 if it is used, else -errno (said). */
static int load(struct stfs_remote *r, struct stfs_mirror *m,
		const struct stfs_location *loc)
{
	const struct stfs_rfile **ix;
	char *base;
	int rc;

	if ((rc = fetch_manifest(r, m)))
		return rc;
	if (!fits(r, m, loc))
		return -ESTALE;
	if (!(base = strndup(m->ml->base, strlen(m->ml->base) -
			     strlen(STFS_MIRROR_DIR))))
		return -ENOMEM;
	/* the origin's listing indexed: a scan of it per file of the
	 * manifest was n x m compares (100,000 files each: minutes) */
	if (stfs_rlist_index(&loc->files, &ix)) {
		free(base);
		return -ENOMEM;
	}
	rc = take_files(r, m, loc, base, ix);
	free(ix);
	free(base);
	return rc;
}

/* The listing of loc's origin at commit from the manifest (struct
 * stfs_remote's mirror_list): 1 given, 0 the manifest does not fit (the
 * mount says why once located), -ENOMEM. */
static int tier_list(struct stfs_remote *r, const struct stfs_location *loc,
		     const char *commit,
		     int (*file)(void *arg, const char *path, const char *sum,
				 uint64_t size),
		     void *arg)
{
	struct stfs_mirror *m = r->mirror;
	char *origin;
	int ok;

	if (!m || m->attached || fetch_manifest(r, m))
		return 0;
	if (!(origin = stfs_source_shown(loc->arg)))
		return -ENOMEM;
	cut_revision(origin);
	ok = m->m.complete && !strcmp(origin, m->m.origin) &&
	     !strcmp(commit, m->m.revision) && m->m.block == r->o.block;
	free(origin);
	if (!ok)
		return 0;
	for (size_t i = 0; i < m->m.n; i++) {
		const char *sum = m->m.f[i].origin_sum, *hex = NULL;

		if (sum && !strncmp(sum, "sha256:", 7))
			hex = sum + 7;
		else if (sum && !strncmp(sum, "sha1-blob:", 10))
			hex = sum + 10;
		if (file(arg, m->m.f[i].path, hex, m->m.f[i].size))
			return -ENOMEM;
	}
	m->listed = 1;
	return 1;
}

static struct stfs_mirror *mirror_new(const char *name)
{
	struct stfs_mirror *m = calloc(1, sizeof(*m));

	if (m && !(m->name = strdup(name))) {
		free(m);
		m = NULL;
	}
	return m;
}

int stfs_mirror_prepare(struct stfs_remote *r)
{
	if (!r || !r->o.mirror || r->mirror || r->o.offline)
		return 0;
	if (!(r->mirror = mirror_new(r->o.mirror)))
		return -ENOMEM;
	r->mirror_free = tier_free;
	r->mirror_list = tier_list;
	return 0;
}

int stfs_mirror_attach(struct stfs_location *loc)
{
	struct stfs_remote *r = loc->net;
	struct stfs_mirror *m;
	int rc;

	if (!r || !r->o.mirror || r->o.offline || (r->mirror &&
	    r->mirror->attached) || (!loc->http && !loc->remote))
		return 0;
	/* made by stfs_mirror_prepare() (its manifest perhaps read for the
	 * listing already), else now */
	if (!(m = r->mirror) && !(m = mirror_new(r->o.mirror)))
		return -ENOMEM;
	r->mirror = NULL;
	r->mirror_list = NULL;
	if ((rc = load(r, m, loc))) {
		tier_free(m);
		return rc == -ENOMEM ? rc : 0;
	}
	say(r, "stfs: mirror %s: reading %s%s%s from it (%zu of its %zu "
	    "files%s)", m->name, m->m.origin, *m->m.revision ? "@" : "",
	    m->m.revision, m->n, m->m.n, m->listed ? "; the listing from its "
	    "manifest" : "");
	m->attached = 1;
	r->mirror = m;
	r->mirror_open = tier_open;
	r->mirror_free = tier_free;
	r->fetch = &tier_ops;
	return 0;
}

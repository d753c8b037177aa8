/*
 * repo.c: the source's repository, every file of it (the model layer's
 * %repo/ shows them; the list itself is rlist.c's): opening a file by
 * its path, and the small files (configuration, tokenizer, code, README)
 * fetched whole at mount, several at a time, and checked against the
 * checksum the source publishes (the Hub: a git blob's sha1 or an LFS
 * sha256; a service with a fetch of its own checks its files itself:
 * S3's in s3/s3sum.c, a full-object SHA-256 or CRC64NVME, else a
 * single-part ETag's MD5).
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <inttypes.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "format.h"
#include "engine.h"
#include "scheme.h"
#include "locate.h"
#include "rlist.h"
#include "http/http.h"

/* What a mount fetches whole and keeps at most: past this many small files
 * or bytes of them (path order), the rest are read lazily like large ones,
 * unverified (stfs inspect --files says "lazy"). */
#define STFS_REPO_SMALL_FILES 4096
#define STFS_REPO_SMALL_BYTES (64u << 20)
/* Small files are fetched this many at a time, each its own request (one
 * connection each, as HTTP/1.1 has it): 200 of them take a connection's
 * round trip and two of requests, not one round trip per file
 * (docs/performance.md). */
#define STFS_REPO_FETCHERS 128

/* ---- opening a file by its path ------------------------------------------- */

/*
 * A file of a local directory, opened only if its path resolves beneath
 * the directory now, not only when it was listed: a name swapped for a
 * symbolic link (or a folder for a link) after the mount is refused, so
 * nothing outside the directory is ever served.  The file is then opened
 * as a source through its descriptor.  0, or -errno (-ENOSYS: no openat2).
 */
static int open_beneath(const char *root, const char *path,
			struct stfs_source **out, struct stfs_error *err)
{
	struct open_how how = {
		.flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};
	char proc[64];
	int dfd, fd, rc;

	if ((dfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return stfs_fail_sys(err, -errno, "cannot open the directory");
	fd = (int)syscall(SYS_openat2, dfd, path, &how, sizeof(how));
	rc = fd < 0 ? -errno : 0;
	close(dfd);
	if (rc == -EXDEV || rc == -ELOOP)
		return stfs_fail(err, -EACCES, NULL, STFS_NO_OFFSET, "it now "
				 "leads out of the directory (a symbolic link "
				 "put there after the mount)");
	if (rc)
		return rc == -ENOSYS ? rc : stfs_fail_sys(err, rc, "cannot open");
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	rc = stfs_source_open_file(proc, out, err);
	close(fd);
	return rc;
}

int stfs_location_open_path(const struct stfs_location *loc,
			    const char *path, struct stfs_source **out,
			    struct stfs_error *err)
{
	char *full = NULL, *esc;
	int rc;

	*out = NULL;
	if (stfs_repo_path_bad(path))
		return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
				 "not a path of the repository");
	if (!strchr(path, '/') && (loc->http || loc->remote))
		return stfs_location_open(loc, path, out, err);
	if (loc->local_base) {
		if (asprintf(&full, "%s/%s", loc->local_base, path) < 0)
			return -ENOMEM;
		if (loc->offline || access(full, F_OK) == 0) {
			rc = stfs_source_open_file(full, out, err);
			free(full);
			return rc;
		}
		free(full);
	}
	if (loc->http || loc->remote) {
		if (!(esc = stfs_url_escape_path(path)) ||
		    asprintf(&full, "%s/%s", loc->base, esc) < 0) {
			free(esc);
			return -ENOMEM;
		}
		free(esc);
		rc = stfs_source_open_http(loc->net, full, loc->auth,
					   loc->domain, out, err);
		free(full);
		return rc;
	}
	if (loc->kind == STFS_LOC_DIR &&
	    (rc = open_beneath(loc->canonical, path, out, err)) != -ENOSYS)
		return rc;
	/* (the daemon's working directory is "/": the absolute path) */
	if (asprintf(&full, "%s/%s", loc->repo_base ? loc->repo_base :
		     loc->canonical, path) < 0)
		return -ENOMEM;
	rc = stfs_source_open_file(full, out, err);
	free(full);
	return rc;
}

/* ---- small files, fetched and verified ------------------------------------ */

/* The hex digest of bytes as sum's kind says ("sha1-blob": git's blob
 * id, the sha1 of "blob SIZE\0" and the bytes): 0, or -EINVAL for a kind
 * stfs does not know. */
static int digest(const char *kind, const char *b, size_t len, char *hex)
{
	const EVP_MD *md = !strcmp(kind, "sha256") ? EVP_sha256() :
			   !strcmp(kind, "md5") ? EVP_md5() :
			   !strcmp(kind, "sha1-blob") ? EVP_sha1() : NULL;
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned dl = 0;
	EVP_MD_CTX *c;
	char pre[48];
	int ok;

	if (!md || !(c = EVP_MD_CTX_new()))
		return md ? -ENOMEM : -EINVAL;
	ok = EVP_DigestInit_ex(c, md, NULL);
	if (ok && md == EVP_sha1()) {
		int n = snprintf(pre, sizeof(pre), "blob %zu", len);
		ok = EVP_DigestUpdate(c, pre, (size_t)n + 1);
	}
	ok = ok && EVP_DigestUpdate(c, b, len) &&
	     EVP_DigestFinal_ex(c, d, &dl);
	EVP_MD_CTX_free(c);
	for (unsigned i = 0; ok && i < dl; i++)
		sprintf(hex + 2 * i, "%02x", d[i]);
	return ok ? 0 : -EIO;
}

/* Fetch f whole and check it: its bytes, or its fault (by its service,
 * if it has its own way: s3://'s in its room, as S3 publishes its
 * checksums in the answer). */
static void fetch_one(const struct stfs_location *loc, struct stfs_rfile *f)
{
	struct stfs_source *src = NULL;
	struct stfs_error e = { 0 };
	char hex[2 * EVP_MAX_MD_SIZE + 1] = "", kind[16] = "";
	const char *want = f->sum ? strchr(f->sum, ':') : NULL;
	size_t len = 0;
	char *b = NULL;
	int rc;

	if (loc->service && loc->service->fetch_small) {
		loc->service->fetch_small(loc, f);
		return;
	}
	/* an empty file is not fetched: a range of no bytes is no request
	 * a server answers (its checksum is still checked) */
	if (!f->size)
		rc = (b = calloc(1, 1)) ? 0 : -ENOMEM;
	else if ((rc = stfs_location_open_path(loc, f->path, &src, &e)) == 0)
		rc = stfs_source_slurp(src, f->size, &b, &len);
	stfs_source_close(src);
	if (rc) {
		stfs_rfile_unfetched(f, rc, &e);
		return;
	}
	if (len != f->size) {
		if (asprintf(&f->fault, "the listing says %" PRIu64 " bytes, "
			     "the server sent %zu", f->size, len) < 0)
			f->fault = NULL;
		free(b);
		return;
	}
	if (want && (size_t)(want - f->sum) < sizeof(kind)) {
		memcpy(kind, f->sum, (size_t)(want - f->sum));
		want++;
		if (digest(kind, b, len, hex) == 0 && strcmp(hex, want)) {
			if (asprintf(&f->fault, "checksum mismatch: expected "
				     "%s %s, computed %s", kind, want, hex) < 0)
				f->fault = NULL;
			free(b);
			return;
		}
	}
	f->bytes = b;
}

struct fetchers {
	const struct stfs_location *loc;
	struct stfs_rfile **todo;
};

static void fetch_nth(void *ctx, size_t i)
{
	struct fetchers *o = ctx;

	fetch_one(o->loc, o->todo[i]);
}

int stfs_repo_fetch_small(struct stfs_location *loc,
			  void (*warn)(void *, const char *), void *ctx)
{
	struct fetchers o = { loc, NULL };
	struct stfs_rlist *l = &loc->files;
	int s3 = stfs_url_scheme(loc->arg) == STFS_SCHEME_S3;
	size_t n = 0;

	if (!(loc->http || loc->remote) || !l->n)
		return 0;
	if (!(o.todo = calloc(l->n, sizeof(*o.todo))))
		return -ENOMEM;
	for (size_t i = 0, bytes = 0; i < l->n; i++) {
		if (!l->f[i].small || l->f[i].left_out || l->f[i].fault)
			continue;
		if (n >= STFS_REPO_SMALL_FILES ||
		    bytes + l->f[i].size > STFS_REPO_SMALL_BYTES) {
			l->f[i].small = 0;      /* past the budget: lazy */
			continue;
		}
		bytes += (size_t)l->f[i].size;
		o.todo[n++] = &l->f[i];
	}
	stfs_parallel_for(n, STFS_REPO_FETCHERS, fetch_nth, &o);
	/* every file refused or served unchecked, fetched or lazy, said
	 * once */
	for (size_t i = 0; warn && i < l->n; i++) {
		const struct stfs_rfile *f = &l->f[i];
		char line[1024], q[300];

		if (f->left_out || (!f->fault && !f->unchecked))
			continue;
		snprintf(line, sizeof(line), "%%repo/%s: %s%s%s",
			 stfs_quote(f->path, strlen(f->path), q, sizeof(q)),
			 f->fault ? f->fault : "served ", f->fault ? "" :
			 f->unchecked, f->fault || !s3 ? "" : ": an encrypted "
			 "object's ETag is not the MD5 of its bytes, and S3 "
			 "sent no full-object checksum");
		warn(ctx, line);
	}
	free(o.todo);
	return 0;
}

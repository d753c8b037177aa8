/*
 * verify.c: a whole read of a large %repo/ file checked against the
 * checksum its source publishes (on the Hub an LFS file's lfs.oid, a
 * sha256, else its git blob id, the sha1 of "blob SIZE\0" and its
 * bytes: a file lazy for its weight-format name, w.onnx), for
 * one open file: the bytes its reads return are hashed in file order as
 * they come (a few that come early are held until the bytes before them
 * have), and the read that reaches the end with a digest that does not
 * match fails with EIO, as does every later read of that open file and
 * every later open.  Reads that skip
 * ahead of what can be held (16 MiB an open file, 64 MiB all of a mount's
 * together), or start past where hashing stands, leave the open file
 * unverified (never an error).  Small files are checked
 * whole at mount (source/repo.c); this is for the lazy ones.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "content.h"
#include "model.h"
#include "metrics.h"

#define HELD_MAX 8              /* early reads held, at most */
#define HELD_BYTES (16u << 20)  /* and their bytes, and how far ahead */
/* What all the open files of a mount hold together: past it, an open
 * file that would hold more gives up (unverified), so opens that read
 * ahead and never read the start cannot fill the daemon's memory. */
#define HELD_ALL (64u << 20)

struct held {
	uint64_t off;
	size_t len;
	char *b;
};

struct stfs_verify {
	struct stfs_model *m;
	struct stfs_rfile *f;
	pthread_mutex_t mu;
	EVP_MD_CTX *ctx;
	uint64_t next;          /* bytes hashed so far, from 0 */
	int state;              /* 0 hashing, 1 done, -1 given up, 2 bad */
	char why[300];          /* bad: why */
	struct held held[HELD_MAX];
	size_t nheld, held_bytes;
};

struct stfs_verify *stfs_verify_new(struct stfs_model *m, uint32_t node)
{
	struct stfs_node_info ni;
	struct stfs_verify *v;
	struct stfs_rfile *f;
	const EVP_MD *md;
	char pre[32];
	int plen;
	int64_t j;

	if (stfs_model_node(m, node, &ni) || ni.kind != STFS_NODE_KIND_REPO ||
	    (j = stfs_repo_file(m, node - stfs_repo_base(m))) < 0)
		return NULL;
	f = &m->loc->files.f[j];
	if (f->bytes || !f->size || !f->sum)
		return NULL;
	if (!strncmp(f->sum, "sha256:", 7) && strlen(f->sum + 7) == 64)
		md = EVP_sha256();
	else if (!strncmp(f->sum, "sha1-blob:", 10) && strlen(f->sum + 10) == 40)
		md = EVP_sha1();
	else
		return NULL;
	/* git's blob id: the sha1 of "blob SIZE\0" and the bytes */
	plen = snprintf(pre, sizeof(pre), "blob %" PRIu64, f->size) + 1;
	if (!(v = calloc(1, sizeof(*v))))
		return NULL;
	if (!(v->ctx = EVP_MD_CTX_new()) ||
	    !EVP_DigestInit_ex(v->ctx, md, NULL) ||
	    (md == EVP_sha1() && !EVP_DigestUpdate(v->ctx, pre,
						    (size_t)plen))) {
		EVP_MD_CTX_free(v->ctx);
		free(v);
		return NULL;
	}
	v->m = m;
	v->f = f;
	pthread_mutex_init(&v->mu, NULL);
	return v;
}

static void drop_held(struct stfs_verify *v)
{
	for (size_t i = 0; i < v->nheld; i++)
		free(v->held[i].b);
	if (v->m)
		__atomic_sub_fetch(&v->m->verify_held, v->held_bytes,
				   __ATOMIC_RELAXED);
	v->nheld = v->held_bytes = 0;
}

void stfs_verify_detach(struct stfs_verify *v)
{
	if (v)
		v->m = NULL;
}

void stfs_verify_free(struct stfs_verify *v)
{
	if (!v)
		return;
	drop_held(v);
	EVP_MD_CTX_free(v->ctx);
	pthread_mutex_destroy(&v->mu);
	free(v);
}

/* Hash the bytes [off, off + len) of b that are past next. */
static void take(struct stfs_verify *v, uint64_t off, const char *b,
		 size_t len)
{
	uint64_t skip = v->next - off;

	if (off > v->next || skip >= len)
		return;
	if (!EVP_DigestUpdate(v->ctx, b + skip, len - (size_t)skip))
		v->state = -1;
	v->next += len - skip;
}

/* Hold bytes that came before their turn: 0, or -1 (no room). */
static int hold(struct stfs_verify *v, uint64_t off, const struct iovec *iov,
		int n, size_t len)
{
	struct held *h = &v->held[v->nheld];
	size_t at = 0;

	if (v->nheld == HELD_MAX || v->held_bytes + len > HELD_BYTES ||
	    off - v->next > HELD_BYTES)
		return -1;
	if (__atomic_add_fetch(&v->m->verify_held, len, __ATOMIC_RELAXED) >
	    HELD_ALL || !(h->b = malloc(len ? len : 1))) {
		__atomic_sub_fetch(&v->m->verify_held, len, __ATOMIC_RELAXED);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		memcpy(h->b + at, iov[i].iov_base, iov[i].iov_len);
		at += iov[i].iov_len;
	}
	h->off = off;
	h->len = len;
	v->nheld++;
	v->held_bytes += len;
	return 0;
}

/* The held bytes whose turn has come, hashed, until none is. */
static void drain(struct stfs_verify *v)
{
	for (size_t i = 0; i < v->nheld && v->state == 0;) {
		struct held *h = &v->held[i];

		if (h->off > v->next) {
			i++;
			continue;
		}
		take(v, h->off, h->b, h->len);
		free(h->b);
		v->held_bytes -= h->len;
		__atomic_sub_fetch(&v->m->verify_held, h->len,
				   __ATOMIC_RELAXED);
		*h = v->held[--v->nheld];
		i = 0;
	}
}

/* At the end: 0, or -EIO with why, the file marked bad. */
static int finish(struct stfs_verify *v, char *why, size_t whysz)
{
	unsigned char d[EVP_MAX_MD_SIZE];
	char hex[2 * EVP_MAX_MD_SIZE + 1] = "", *fault;
	const char *want;
	unsigned dl = 0;

	v->state = 1;
	drop_held(v);
	if (!EVP_DigestFinal_ex(v->ctx, d, &dl))
		return 0;
	for (unsigned i = 0; i < dl; i++)
		sprintf(hex + 2 * i, "%02x", d[i]);
	want = strchr(v->f->sum, ':') + 1;
	if (!strcmp(hex, want))
		return 0;
	v->state = 2;
	if (v->m)
		stfs_m_verify(stfs_remote_metrics(v->m->remote),
			      STFS_VERIFY_FILE_DIGEST);
	snprintf(v->why, sizeof(v->why), "checksum mismatch at the end of a "
		 "whole read: expected %.*s %s, computed %s",
		 (int)(want - 1 - v->f->sum), v->f->sum, want, hex);
	snprintf(why, whysz, "%s", v->why);
	/* every later open is EIO (the first fault recorded stays) */
	if ((fault = strdup(why)) &&
	    !__atomic_compare_exchange_n(&v->f->fault, &(char *){ NULL },
					 fault, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		free(fault);
	return -EIO;
}

int stfs_verify_feed(struct stfs_verify *v, uint64_t off,
		     const struct iovec *iov, int n, char *why, size_t whysz)
{
	size_t len = 0;
	int rc = 0;

	for (int i = 0; i < n; i++)
		len += iov[i].iov_len;
	pthread_mutex_lock(&v->mu);
	if (v->state == 2) {
		/* the kernel asks again for what failed: never served (and
		 * said once) */
		if (whysz)
			why[0] = '\0';
		rc = -EIO;
	} else if (v->state == 0 && off > v->next) {
		if (hold(v, off, iov, n, len)) {
			v->state = -1;  /* too far ahead: unverified */
			drop_held(v);
		}
	} else if (v->state == 0) {
		for (int i = 0; i < n; i++) {
			take(v, off, iov[i].iov_base, iov[i].iov_len);
			off += iov[i].iov_len;
		}
		drain(v);
		if (v->state == 0 && v->next == v->f->size)
			rc = finish(v, why, whysz);
	}
	pthread_mutex_unlock(&v->mu);
	return rc;
}

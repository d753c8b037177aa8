/*
 * pages.c: the pages of a paginated listing (the Hub's tree API with its
 * Link: next, S3's ListObjectsV2 with its continuation token), remembered
 * by the SHA-256 of what names each (its URL, its token), so that a
 * server that sends stfs back to a page it has seen is caught at the
 * first repeat instead of looping until the page bound, and no listing
 * goes on past STFS_PAGES_MAX pages, STFS_LIST_ENTRIES_MAX entries,
 * STFS_LIST_BYTES_MAX bytes of answers, or its deadline (list_timeout=):
 * what a server that never ends its listing can cost.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "format.h"
#include "http/http.h"

static int64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int stfs_pages_add(struct stfs_pages *p, const char *key,
		   unsigned timeout_ms)
{
	uint8_t h[32];

	if (!p->n && timeout_ms)
		p->deadline_ms = now_ms() + timeout_ms;
	else if (p->deadline_ms && now_ms() >= p->deadline_ms)
		return -ETIME;

	if (!EVP_Digest(key, strlen(key), h, NULL, EVP_sha256(), NULL))
		return -ENOMEM;
	for (size_t i = 0; i < p->n; i++)
		if (memcmp(p->seen[i], h, sizeof(h)) == 0)
			return -ELOOP;
	if (p->n >= STFS_PAGES_MAX)
		return -EFBIG;
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 16;
		uint8_t (*s)[32] = realloc(p->seen, cap * sizeof(*s));

		if (!s)
			return -ENOMEM;
		p->seen = s;
		p->cap = cap;
	}
	memcpy(p->seen[p->n++], h, sizeof(h));
	return 0;
}

int stfs_pages_took(struct stfs_pages *p, size_t entries, size_t bytes)
{
	p->entries += entries;
	p->bytes += bytes;
	if (p->bytes > STFS_LIST_BYTES_MAX)
		return -E2BIG;
	return p->entries > STFS_LIST_ENTRIES_MAX ? -EMLINK : 0;
}

int stfs_pages_fail(const struct stfs_pages *p, int rc, const char *what,
		    const char *again, const char *key, unsigned timeout_ms,
		    struct stfs_error *err)
{
	char q[256];

	switch (rc) {
	case -ELOOP:
		return stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "%s loops: "
				 "page %zu %s (%s)", what, p->n, again,
				 stfs_quote(key, strlen(key), q, sizeof(q)));
	case -EFBIG:
		return stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "%s goes "
				 "on past %d pages", what, STFS_PAGES_MAX);
	case -ETIME:
		return stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "%s goes "
				 "on past list_timeout=%u (seconds; %zu pages, "
				 "%zu entries so far)", what, timeout_ms / 1000,
				 p->n, p->entries);
	case -E2BIG:
		return stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "%s goes "
				 "on past %u MiB of answers (%zu pages, %zu "
				 "entries)", what, STFS_LIST_BYTES_MAX >> 20,
				 p->n, p->entries);
	case -EMLINK:
		return stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "%s goes "
				 "on past %d entries (%zu pages)", what,
				 STFS_LIST_ENTRIES_MAX, p->n);
	default:
		return stfs_nomem(err);
	}
}

void stfs_pages_free(struct stfs_pages *p)
{
	free(p->seen);
	p->seen = NULL;
	p->n = p->cap = 0;
	p->entries = 0;
	p->bytes = 0;
	p->deadline_ms = 0;
}

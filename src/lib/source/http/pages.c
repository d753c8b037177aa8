/*
 * pages.c: the pages of a paginated listing (the Hub's tree API with its
 * Link: next, S3's ListObjectsV2 with its continuation token), remembered
 * by the SHA-256 of what names each (its URL, its token), so that a
 * server that sends stfs back to a page it has seen is caught at the
 * first repeat instead of looping until the page bound, and no listing
 * goes on past STFS_PAGES_MAX pages.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "format.h"
#include "remote.h"

int stfs_pages_add(struct stfs_pages *p, const char *key)
{
	uint8_t h[32];

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

void stfs_pages_free(struct stfs_pages *p)
{
	free(p->seen);
	p->seen = NULL;
	p->n = p->cap = 0;
}

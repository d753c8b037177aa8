/*
 * fuzz_manifest.c: libFuzzer harness for a mirror's manifest reader
 * (src/lib/source/mirror/manifest.c): whoever may write the bucket may
 * write the manifest.  The input is the document, with no NUL after it,
 * so a read past it is caught.  Nothing may crash, leak, hang or read out
 * of bounds, and what is taken must keep the reader's promises: a known
 * format and version, a block size a power of two from 64K to 64M, at
 * most STFS_MANIFEST_FILES_MAX files, sorted and unique, each path one a
 * repository may hold (not under .stfs-mirror/), a sha256 of 64 hex
 * digits, one CRC-32C for every block, no control byte in a string
 * (an ETag goes into a request's If-Match, every string into the log: a
 * CR LF would add a header or a line); a refusal says why.  What is read
 * is written again and read back the same.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "source.h"
#include "mirror/mirror.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A string with a control byte (C0 or DEL)? */
static int ctl(const char *s)
{
	for (; s && *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 1;
	return 0;
}

static void check(const struct stfs_manifest *m)
{
	if (m->block < (64u << 10) || m->block > (64u << 20) ||
	    (m->block & (m->block - 1)) || m->n > STFS_MANIFEST_FILES_MAX ||
	    !m->origin || !m->revision || ctl(m->origin) ||
	    ctl(m->revision) || ctl(m->created))
		abort();
	for (size_t i = 0; i < m->n; i++) {
		const struct stfs_mfile *f = &m->f[i];

		if (!f->path || !*f->path || stfs_repo_path_bad(f->path) ||
		    !strncmp(f->path, STFS_MIRROR_DIR "/",
			     strlen(STFS_MIRROR_DIR) + 1) ||
		    strlen(f->sha256) != 64 ||
		    f->nblocks != (f->size + m->block - 1) / m->block ||
		    (f->nblocks && !f->crc) ||
		    (i && strcmp(m->f[i - 1].path, f->path) >= 0) ||
		    stfs_manifest_find(m, f->path) != f ||
		    ctl(f->etag) || ctl(f->origin_etag) || ctl(f->origin_sum))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct stfs_manifest m, again;
	char why[300], why2[300], *text;
	size_t len;
	int rc;

	rc = stfs_manifest_parse((const char *)data, size, &m, why,
				 sizeof(why));
	if (rc) {
		if (!why[0] || m.n || m.f || m.origin)
			abort();
		return 0;
	}
	check(&m);
	if ((text = stfs_manifest_write(&m, &len))) {
		if (stfs_manifest_parse(text, len, &again, why2, sizeof(why2)))
			abort();
		if (again.n != m.n || again.block != m.block ||
		    strcmp(again.origin, m.origin))
			abort();
		for (size_t i = 0; i < m.n; i++)
			if (again.f[i].size != m.f[i].size ||
			    strcmp(again.f[i].path, m.f[i].path) ||
			    (m.f[i].nblocks &&
			     memcmp(again.f[i].crc, m.f[i].crc,
				    m.f[i].nblocks * sizeof(uint32_t))))
				abort();
		stfs_manifest_free(&again);
		free(text);
	}
	stfs_manifest_free(&m);
	return 0;
}

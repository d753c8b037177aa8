/*
 * fuzz_cache.c: libFuzzer harness for the cache's paths and small files
 * (cache.c, cachedir.c), in a private cache of its own under /tmp.  The
 * input is a mode byte, then a URL, a version (an ETag or Last-Modified
 * as a server sent it) and file contents, separated by NUL bytes; the
 * mode byte's low two bits choose what is done, the rest give a block's
 * length (1 to 64 bytes):
 *   mode 0: the object of that URL and version is made, a block put
 *     and read back, and the latest version read: it must be the one put,
 *     in a directory named v1/<16 hex>/<16 hex> (hostile names never
 *     reach a path);
 *   modes 1 and 3: the contents are planted as the object's `meta` or
 *     `latest` file (hostile contents of the cache): reading the latest
 *     version must not crash, and when it succeeds it names a directory
 *     of that form, a size and a version that hashed to it;
 *   mode 2: a block file (blockfile.c's format: a header with checksums,
 *     then the bytes) made hostile: a block is put, then the rest of the
 *     input (after the version, raw) edits its file: a first byte of 0
 *     plants the rest as the whole file, else each (u16 offset, u8 xor)
 *     triple flips bits of it and a last odd byte cuts it to that many
 *     bytes.  Reading it back must then fail, or give exactly the bytes
 *     after the file's header, of a file of exactly the right length.
 * In modes 1 and 3 the rest of the input (raw) is also decoded as an
 * answer kept for offline mounts (http/kept.c): every field it gives is
 * NUL terminated within its size, its body within the input, and an
 * answer encoded again decodes to the same; and as the shared use of the
 * cache (usage): taken only if it is exactly what would be written.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "httphdr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static char dir[64];
static struct stfs_cache cache;         /* the harness's, for its run */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	const char *given = getenv("STFS_FUZZ_CACHE");

	/* run-fuzz.sh gives one (and removes it); else a new one */
	snprintf(dir, sizeof(dir), "%s", given && *given ? given :
		 "/tmp/stfs-fuzz-cache-XXXXXX");
	if ((given && *given ? mkdir(dir, 0700) && errno != EEXIST :
	     !mkdtemp(dir)) ||
	    stfs_cache_init(&cache, dir, 64u << 20, 4u << 20, 0) != 0 ||
	    stfs_cache_ready(&cache, NULL) != 0)
		abort();
	return 0;
}

/* Block 0 of o, put (len bytes of a pattern of url), edited as mode 2
 * says, and read back. */
static void hostile_block(const struct stfs_cache_obj *o, uint64_t len,
			  const uint8_t *e, size_t n)
{
	char path[256], put[64], got[64];
	unsigned char file[STFS_BLOCK_HDR + 64];
	int fd, planted = n && e[0] == 0;
	size_t flen = STFS_BLOCK_HDR + len;

	for (size_t i = 0; i < len; i++)
		put[i] = (char)(i * 7 + 1);
	if (stfs_cache_put(&cache, o, 0, put, len) != 0)
		return;
	snprintf(path, sizeof(path), "%s/%s/0", dir, o->dir);
	if ((fd = open(path, O_RDWR)) < 0)
		abort();
	if (read(fd, file, flen) != (ssize_t)flen)
		abort();
	if (planted) {
		flen = n - 1 < sizeof(file) ? n - 1 : sizeof(file);
		memcpy(file, e + 1, flen);
	} else {
		for (; n >= 3; e += 3, n -= 3)
			file[(e[0] | e[1] << 8) % flen] ^= e[2];
		if (n & 1)
			flen = e[0] % STFS_BLOCK_HDR;
	}
	if (ftruncate(fd, 0) || pwrite(fd, file, flen, 0) != (ssize_t)flen)
		abort();
	close(fd);
	/* served: exactly the file's bytes after its header, of a file of
	 * exactly that length (a CRC can be forged, by the fuzzer too: what
	 * it catches is a disk's or a tool's damage, not a forger who owns
	 * the cache) */
	if (stfs_cache_read(o, 0, len, 0, got, len) == 0 &&
	    (flen != STFS_BLOCK_HDR + len ||
	     memcmp(got, file + STFS_BLOCK_HDR, len) != 0))
		abort();
}

/* n bytes at p decoded as a kept answer, checked as the header says. */
static void kept(const uint8_t *p, size_t n)
{
	struct stfs_http_resp r, r2;
	char *text;
	size_t at, tn, at2;

	if (stfs_http_kept_decode((const char *)p, n, &r, &at))
		return;
	if (at > n || strnlen(r.etag, sizeof(r.etag)) == sizeof(r.etag) ||
	    strnlen(r.link_next, sizeof(r.link_next)) == sizeof(r.link_next) ||
	    strnlen(r.sum_sha256, sizeof(r.sum_sha256)) ==
	    sizeof(r.sum_sha256) || strnlen(r.commit, sizeof(r.commit)) ==
	    sizeof(r.commit))
		abort();
	if (stfs_http_kept_encode(&r, (const char *)p + at, n - at, &text,
				  &tn))
		return;
	if (stfs_http_kept_decode(text, tn, &r2, &at2) ||
	    tn - at2 != n - at || memcmp(text + at2, p + at, n - at) ||
	    strcmp(r.etag, r2.etag) || strcmp(r.link_next, r2.link_next) ||
	    strcmp(r.sum_crc32c, r2.sum_crc32c) || r.status != r2.status ||
	    r.total != r2.total || r.has_total != r2.has_total)
		abort();
	free(text);
}

static void check_dir(const struct stfs_cache_obj *o)
{
	if (strlen(o->dir) != 36 || strncmp(o->dir, "v1/", 3) != 0 ||
	    o->dir[19] != '/' ||
	    strspn(o->dir + 3, "0123456789abcdef") != 16 ||
	    strspn(o->dir + 20, "0123456789abcdef") != 16)
		abort();
}

/* The next NUL-terminated piece of [*p, end), at most max bytes. */
static char *piece(const uint8_t **p, const uint8_t *end, size_t max)
{
	const uint8_t *z = memchr(*p, 0, (size_t)(end - *p));
	size_t n = z ? (size_t)(z - *p) : (size_t)(end - *p);
	char *s;

	if (n > max)
		n = max;
	if (!(s = malloc(n + 1)))
		abort();
	memcpy(s, *p, n);
	s[n] = '\0';
	*p = z ? z + 1 : end;
	return s;
}

static void plant(const struct stfs_cache_obj *o, const char *name,
		  const char *text)
{
	char path[256];
	int fd;

	if (strcmp(name, "latest") == 0)
		snprintf(path, sizeof(path), "%s/%.19s/latest", dir, o->dir);
	else
		snprintf(path, sizeof(path), "%s/%s/%s", dir, o->dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return;
	if (write(fd, text, strlen(text)) < 0)
		abort();
	close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data + 1, *end = data + size;
	struct stfs_cache_obj o, l;
	char *url, *version, *text, got[256], buf[16];
	const uint8_t *rest;
	uint64_t len;
	int mode;

	if (size < 2)
		return 0;
	url = piece(&p, end, 300);
	version = piece(&p, end, 255);
	rest = p;
	text = piece(&p, end, 600);
	mode = data[0] & 3;
	len = (uint64_t)(data[0] >> 2) + 1;
	if (mode & 1) {
		uint64_t u;
		char back[32];

		kept(rest, (size_t)(end - rest));
		/* usage, shared by daemons: parsed only if it is exactly
		 * what would be written */
		if (stfs_cache_parse_usage((const char *)rest,
					   (size_t)(end - rest), &u) == 0 &&
		    ((size_t)snprintf(back, sizeof(back), "%" PRIu64 "\n", u) !=
		     (size_t)(end - rest) || memcmp(back, rest, (size_t)(end -
								 rest))))
			abort();
	}
	if (stfs_cache_object(&cache, url, version, len, &o, NULL) == 0) {
		check_dir(&o);
		if (mode & 1) {
			plant(&o, mode & 2 ? "latest" : "meta", text);
		} else if (mode == 2) {
			hostile_block(&o, len, rest, (size_t)(end - rest));
		} else {
			memset(buf, 'x', sizeof(buf));
			if (stfs_cache_put(&cache, &o, 0, buf,
					   len < 16 ? len : 16) ==
			    0 && len <= 16 &&
			    stfs_cache_read(&o, 0, len, 0, got, len) != 0)
				abort();
		}
		if (stfs_cache_latest(&cache, url, &l, got, sizeof(got)) == 0) {
			check_dir(&l);
			if (!(mode & 1) && (strcmp(got, version) != 0 ||
					    l.size != len))
				abort();
		} else if (!(mode & 1)) {
			abort();
		}
	}
	free(url);
	free(version);
	free(text);
	return 0;
}

/*
 * fuzz_cache.c: libFuzzer harness for the cache's paths and small files
 * (cache.c, cachedir.c), in a private cache of its own under /tmp.  The
 * input is a mode byte, then a URL, a version (an ETag or Last-Modified
 * as a server sent it) and file contents, separated by NUL bytes:
 *   mode even: the object of that URL and version is made, a block put
 *     and read back, and the latest version read: it must be the one put,
 *     in a directory named v1/<16 hex>/<16 hex> (hostile names never
 *     reach a path);
 *   mode odd: the contents are planted as the object's `latest` or
 *     `meta` file (hostile contents of the cache): reading the latest
 *     version must not crash, and when it succeeds it names a directory
 *     of that form, a size and a version that hashed to it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "remote.h"

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
	uint64_t len;

	if (size < 2)
		return 0;
	url = piece(&p, end, 300);
	version = piece(&p, end, 255);
	text = piece(&p, end, 600);
	len = (uint64_t)(data[0] >> 1) + 1;
	if (stfs_cache_object(&cache, url, version, len, &o, NULL) == 0) {
		check_dir(&o);
		if (data[0] & 1) {
			plant(&o, data[0] & 2 ? "latest" : "meta", text);
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
			if (!(data[0] & 1) && (strcmp(got, version) != 0 ||
					       l.size != len))
				abort();
		} else if (!(data[0] & 1)) {
			abort();
		}
	}
	free(url);
	free(version);
	free(text);
	return 0;
}

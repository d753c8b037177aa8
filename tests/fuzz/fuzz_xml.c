/*
 * fuzz_xml.c: libFuzzer harness for the S3 XML reader (s3xml.c, expat):
 * ListObjectsV2 pages and error documents, both untrusted.  The first
 * byte picks the document kind (even: a listing, odd: an error) and, for
 * an error, the size of the output; the rest is the document, with no NUL
 * after it, so a read past it is caught.  Nothing may crash, leak, hang or
 * read out of bounds, and what is taken must keep the reader's promises:
 * at most 1000 objects, each key 1 to 1024 bytes of valid UTF-8, each
 * ETag at most 256 bytes and one line, a token only for a truncated page
 * (1 to 4096 bytes); an error message one line of valid UTF-8 that fits.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "s3.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_line(const char *s, size_t max)
{
	size_t n = strlen(s), bad;

	if (n > max || !stfs_utf8_valid(s, n, &bad))
		abort();
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			abort();
}

static int on_object(void *arg, const char *key, uint64_t size,
		     const char *etag)
{
	size_t n = strlen(key), bad;

	if (!n || n > 1024 || !stfs_utf8_valid(key, n, &bad) ||
	    ++*(size_t *)arg > 1000)
		abort();
	if (etag)
		check_line(etag, 256);
	(void)size;
	return 0;
}

static void listing(const char *doc, size_t len)
{
	char *token = NULL;
	size_t n = 0;
	int more = -1, rc;

	rc = stfs_s3_list_parse(doc, len, on_object, &n, &more, &token);
	if (rc && (token || more))
		abort();
	if (!rc && more != 0 && more != 1)
		abort();
	if (!rc && more && (!token || !*token || strlen(token) > 4096))
		abort();
	if (!rc && !more && token)
		abort();
	free(token);
}

static void error_doc(const char *doc, size_t len, size_t outsz)
{
	char out[300];

	memset(out, 'x', sizeof(out));
	if (stfs_s3_error_parse(doc, len, out, outsz) == 0) {
		if (!out[0])
			abort();
		check_line(out, outsz - 1);
	}
	if (out[outsz] != 'x')          /* nothing written past outsz */
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *doc;

	if (size < 1)
		return 0;
	if (!(doc = malloc(size - 1 ? size - 1 : 1)))
		return 0;
	memcpy(doc, data + 1, size - 1);
	if (data[0] % 2 == 0)
		listing(doc, size - 1);
	else
		error_doc(doc, size - 1, data[0]);
	free(doc);
	return 0;
}

/*
 * trustkey.c: the cache's own key, and the trust tags it makes.
 *
 * What a mount fetched with a credential (a Hub token, AWS keys, a URL's
 * password, a netrc entry, a presigned query) is kept in the cache under
 * a name no other spelling of the source can reach: its keys (cache.c's
 * "URL" of an object, a kept answer's) start with the trust tag of that
 * credential (http/trust.c says which credential a request carries).  A
 * tag is "trust:CLASS:HEX", HEX the first 128 bits of HMAC-SHA256 of the
 * class and the credential under the cache's own key, v1/trust.key: 32
 * random bytes, 0600, made once by the first daemon that needs it (linked
 * into place, so two daemons that race agree on one).  So neither the
 * cache's names nor a log line hold a secret, nor a hash of one that could
 * be tested against guesses (a weak password) without that key; and whoever
 * may read the key may read the blocks anyway.  Public bytes (fetched with
 * no credential) carry no tag: they stay shared by every mount.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "format.h"
#include "cache.h"

#define KEY_NAME "trust.key"
#define KEY_LEN 32

/* The key in the cache's directory v1 (a descriptor): 0, or -ENOENT. */
static int read_key(int v1, unsigned char *key)
{
	int fd = stfs_cachedir_open_file(v1, KEY_NAME, KEY_LEN);
	ssize_t n;

	if (fd < 0)
		return -ENOENT;
	n = pread(fd, key, KEY_LEN, 0);
	close(fd);
	return n == KEY_LEN ? 0 : -ENOENT;
}

/* A new key, written whole to a temporary file and linked to its name, so
 * that a racing daemon's key, linked first, wins: 0, or -errno. */
static int make_key(int v1)
{
	unsigned char key[KEY_LEN];
	struct stfs_cachedir_tmpf t = { 0 };
	int rc;

	if (getrandom(key, sizeof(key), 0) != (ssize_t)sizeof(key))
		return -EIO;
	rc = stfs_cachedir_stage(v1, KEY_NAME, NULL, 0, key, sizeof(key), &t);
	OPENSSL_cleanse(key, sizeof(key));
	if (rc)
		return rc;
	if (fdatasync(t.fd) < 0)
		rc = -errno;
	else if (linkat(v1, t.tmp, v1, KEY_NAME, 0) < 0 && errno != EEXIST)
		rc = -errno;
	(void)unlinkat(v1, t.tmp, 0);
	close(t.fd);
	return rc;
}

int stfs_cache_trust_tag(struct stfs_cache *c, const char *cls,
			 const void *id, size_t idlen, char *out, size_t outsz)
{
	unsigned char key[KEY_LEN], mac[EVP_MAX_MD_SIZE];
	unsigned int maclen = 0;
	unsigned char *msg;
	char why[512];
	int root, v1, rc, n;

	if (!c)
		return -ENOENT;
	if ((root = stfs_cachedir_root(c->dir, !c->offline, why,
				       sizeof(why))) < 0)
		return root;
	v1 = stfs_cachedir_opendir(root, c->dir, "v1", !c->offline, why,
				   sizeof(why));
	close(root);
	if (v1 < 0)
		return v1;
	if ((rc = read_key(v1, key)) && !c->offline && !(rc = make_key(v1)))
		rc = read_key(v1, key);
	close(v1);
	if (rc)
		return rc;
	/* the class, its NUL, then the credential */
	if (!(msg = malloc(strlen(cls) + 1 + idlen))) {
		OPENSSL_cleanse(key, sizeof(key));
		return -ENOMEM;
	}
	memcpy(msg, cls, strlen(cls) + 1);
	memcpy(msg + strlen(cls) + 1, id, idlen);
	rc = HMAC(EVP_sha256(), key, KEY_LEN, msg, strlen(cls) + 1 + idlen,
		  mac, &maclen) && maclen >= 16 ? 0 : -ENOMEM;
	OPENSSL_cleanse(msg, strlen(cls) + 1 + idlen);
	free(msg);
	OPENSSL_cleanse(key, sizeof(key));
	if (rc)
		return rc;
	n = snprintf(out, outsz, "trust:%s:", cls);
	if (n < 0 || (size_t)n + 33 > outsz)
		return -ENAMETOOLONG;
	for (int i = 0; i < 16; i++)
		snprintf(out + n + 2 * i, 3, "%02x", mac[i]);
	return 0;
}

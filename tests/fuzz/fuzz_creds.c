/*
 * fuzz_creds.c: libFuzzer harness for what the credential services answer
 * (all untrusted): the first byte picks the reader, the rest is the input,
 * with no NUL after it (a heap copy of exactly its bytes), so a read past
 * it is caught.
 *
 *   0  a JSON document of the container endpoint, IMDS or a
 *      credential_process (credjson.c), its keys taken as each provider
 *      takes them (Token with an expiry; SessionToken without)
 *   1  STS's AssumeRoleWithWebIdentity answer (s3xml.c, expat)
 *   2  an Expiration (stfs_creds_time())
 *   3  a credential_process command line split into words (credproc.c)
 *   4  a container endpoint's URL, allowed or not
 *
 * Nothing may crash, leak or read out of bounds, and what is taken keeps
 * the readers' promises: at most 32 members with distinct names of at
 * most 63 bytes and string values of valid UTF-8 with no NUL; keys taken
 * are printable ASCII with no space (a key id letters and digits), of
 * their bounded lengths; an expiry after 1970; an accepted URL is https or
 * plain http to a loopback or an agent's address.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine.h"
#include "s3.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_key(const char *s, size_t max, int alnum)
{
	size_t n = s ? strlen(s) : 0;

	if (!n || n > max)
		abort();
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c <= 0x20 || c >= 0x7f)
			abort();
		if (alnum && !((c >= 'A' && c <= 'Z') ||
			       (c >= 'a' && c <= 'z') ||
			       (c >= '0' && c <= '9')))
			abort();
	}
}

static void check_keys(const struct stfs_creds_keys *k, int need_token)
{
	check_key(k->access, STFS_KEY_ID_MAX, 1);
	check_key(k->secret, STFS_SECRET_MAX, 0);
	if (k->token || need_token)
		check_key(k->token, STFS_TOKEN_MAX, 0);
	if (need_token && k->expires <= 0)
		abort();
}

static void json(const char *s, size_t n)
{
	struct stfs_credjson j;
	struct stfs_creds_keys k;
	const char *why;
	size_t bad;

	if (stfs_credjson_parse(s, n, &j, &why)) {
		if (!why)
			abort();
		return;
	}
	if (j.n > STFS_CREDJSON_MEMBERS)
		abort();
	for (size_t i = 0; i < j.n; i++) {
		if (strlen(j.kv[i].name) > STFS_CREDJSON_NAME_MAX)
			abort();
		for (size_t m = 0; m < i; m++)
			if (!strcmp(j.kv[i].name, j.kv[m].name))
				abort();
		if (j.kv[i].type == 's' &&
		    (strlen(j.kv[i].value) > STFS_CREDJSON_VALUE_MAX ||
		     !stfs_utf8_valid(j.kv[i].value, strlen(j.kv[i].value),
				      &bad)))
			abort();
	}
	if (!stfs_credjson_keys(&j, "Token", 1, &k, &why)) {
		check_keys(&k, 1);
		stfs_creds_keys_drop(&k);
	}
	if (!stfs_credjson_keys(&j, "SessionToken", 0, &k, &why)) {
		check_keys(&k, 0);
		stfs_creds_keys_drop(&k);
	}
	stfs_credjson_free(&j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct stfs_creds_keys k;
	const char *why;
	char *s, **w;
	time_t t;

	if (size < 1)
		return 0;
	/* exactly the input's bytes (one more for a C string's NUL) */
	s = malloc(data[0] % 5 < 2 && size > 1 ? size - 1 : size);
	if (!s)
		return 0;
	memcpy(s, data + 1, size - 1);
	switch (data[0] % 5) {
	case 0:
		json(s, size - 1);
		break;
	case 1:
		if (!stfs_sts_parse(s, size - 1, &k)) {
			check_keys(&k, 1);
			stfs_creds_keys_drop(&k);
		}
		break;
	default:
		/* the text readers take a C string: a NUL at the end */
		s[size - 1] = '\0';
		if (data[0] % 5 == 2) {
			if (!stfs_creds_time(s, &t) && t < 0)
				abort();
		} else if (data[0] % 5 == 3) {
			if ((w = stfs_words(s, &why))) {
				if (!w[0])
					abort();
				stfs_words_free(w);
			} else if (!why) {
				abort();
			}
		} else if (stfs_container_url_ok(s) &&
			   strncmp(s, "https://", 8) &&
			   strncmp(s, "http://", 7) &&
			   strncasecmp(s, "http", 4)) {
			abort();
		}
		break;
	}
	free(s);
	return 0;
}

/*
 * check_trust.c: a property test of the trust domains of the cache
 * (http/trust.c, blocks/trustkey.c): over every combination of the
 * credentials a request may carry (a bearer token, a user and password,
 * a presigned query, AWS keys; none) and several object names, two
 * sources map to one cache key exactly when they carry the same right
 * (the same credential, as libcurl would send it) for the same object:
 * never two with different rights.  Also: no tag holds a secret; the
 * same credential in another cache (another node) has another tag; an
 * offline cache with no key yet names no credentialed domain.
 */
#define _GNU_SOURCE
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format.h"
#include "engine.h"
#include "http/http.h"
#include "suites.h"

/* The values each part may take (NULL: absent).  Pairs that concatenate
 * alike ("SECRETab" + "c" and "SECRETa" + "bc") must still differ. */
static const char *const bearers[] = { NULL, "SECRETt1", "SECRETt2" };
static const char *const users[] = { NULL, "SECRETab", "SECRETa" };
static const char *const passwords[] = { NULL, "c", "bc", "" };
static const char *const queries[] = { NULL, "X-Amz-Signature=SECRET1",
				       "X-Amz-Signature=SECRET2" };
static const char *const keys[][2] = { { NULL, NULL },
				       { "AKIDSECRET", "SECRETs1" },
				       { "AKIDSECRET", "SECRETs2" },
				       { "AKIDSECRETs", "1" } };
static const char *const names[] = {
	"https://h.example/b/k/model.safetensors",
	"http://h.example/b/k/model.safetensors",
	"https://b.h.example/k/model.safetensors",
	"content:https://hub.example:443 o/m sha256:"
	"0000000000000000000000000000000000000000000000000000000000000000",
	"stfs-alias https://hub.example/o/m/resolve/0/model.safetensors",
};

#define NB (sizeof(bearers) / sizeof(*bearers))
#define NU (sizeof(users) / sizeof(*users))
#define NP (sizeof(passwords) / sizeof(*passwords))
#define NQ (sizeof(queries) / sizeof(*queries))
#define NK (sizeof(keys) / sizeof(*keys))
#define NN (sizeof(names) / sizeof(*names))
#define NA (NB * NU * NP * NQ * NK)

struct src {
	char right[800];        /* what the requests carry, normalized */
	char *key;              /* the cache key of its object */
};

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* Auth number i of the product above, and its right (as request_auth()
 * sends it: a password only with a user, NULL as ""), or NULL auth for
 * none at all. */
static struct stfs_auth *auth_of(size_t i, char *right, size_t rsz)
{
	size_t b = i % NB, u = i / NB % NU, p = i / NB / NU % NP,
	       q = i / NB / NU / NP % NQ, k = i / NB / NU / NP / NQ;
	struct stfs_auth *a;

	snprintf(right, rsz, "b=%s|u=%s|p=%s|q=%s|k=%s,%s",
		 bearers[b] ? bearers[b] : "-", users[u] ? users[u] : "-",
		 users[u] ? (passwords[p] ? passwords[p] : "") : "-",
		 queries[q] ? queries[q] : "-", keys[k][0] ? keys[k][0] : "-",
		 keys[k][1] ? keys[k][1] : "-");
	if (!b && !u && !q && !k)
		return NULL;
	a = stfs_auth_new(bearers[b], keys[k][0], keys[k][1], NULL,
			  keys[k][0] ? "us-east-1" : NULL);
	ck_assert_ptr_nonnull(a);
	a->user = dup_or_null(users[u]);
	a->password = dup_or_null(users[u] ? passwords[p] : NULL);
	a->query = dup_or_null(queries[q]);
	return a;
}

static struct stfs_remote *remote_at(const char *dir, int offline)
{
	struct stfs_remote_opts *o = stfs_remote_opts_new();
	struct stfs_remote *r;
	struct stfs_error err;
	char opt[256], why[256];

	snprintf(opt, sizeof(opt), "cache=%s", dir);
	ck_assert_int_eq(stfs_remote_opts_set(o, opt, why, sizeof(why)), 0);
	if (offline)
		ck_assert_int_eq(stfs_remote_opts_set(o, "offline", why,
						      sizeof(why)), 0);
	ck_assert_int_eq(stfs_remote_new(o, &r, &err), 0);
	stfs_remote_opts_free(o);
	ck_assert_int_eq(stfs_cache_ready(stfs_remote_cache(r), &err), 0);
	return r;
}

/* The cache key of name for a, in r: a new string. */
static char *key_of(struct stfs_remote *r, const struct stfs_auth *a,
		    const char *name)
{
	char *tag, *k;

	ck_assert_int_eq(stfs_http_trust(r, a, 0, &tag), 0);
	if (tag)
		ck_assert_ptr_null(strstr(tag, "SECRET"));
	ck_assert_ptr_nonnull(k = stfs_http_trust_key(tag, name));
	free(tag);
	return k;
}

START_TEST(t_no_two_rights_one_key)
{
	char d1[] = "/tmp/stfs-check-trust-XXXXXX";
	char d2[] = "/tmp/stfs-check-trust-XXXXXX", cmd[128];
	static struct src s[NA * NN];
	struct stfs_remote *r, *r2;
	size_t n = 0, same = 0;

	/* no netrc: it would be a credential of the requests with none */
	setenv("NETRC", "/nonexistent/stfs-check-netrc", 1);
	ck_assert_ptr_nonnull(mkdtemp(d1));
	ck_assert_ptr_nonnull(mkdtemp(d2));
	r = remote_at(d1, 0);
	for (size_t i = 0; i < NA; i++) {
		char right[512];
		struct stfs_auth *a = auth_of(i, right, sizeof(right));

		for (size_t j = 0; j < NN; j++, n++) {
			snprintf(s[n].right, sizeof(s[n].right), "%s|%s",
				 right, names[j]);
			s[n].key = key_of(r, a, names[j]);
		}
		stfs_auth_unref(a);
	}
	/* the property: one key for one right to one object, and no more */
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++) {
			int rights = strcmp(s[i].right, s[j].right) == 0;
			int key = strcmp(s[i].key, s[j].key) == 0;

			ck_assert_msg(rights == key, "%s and %s: keys %s, %s",
				      s[i].right, s[j].right, s[i].key,
				      s[j].key);
			same += key;
		}
	/* equal rights exist (a password without a user is none) */
	ck_assert_uint_gt(same, 0);
	/* public keys are the names themselves: shared by every mount */
	ck_assert_str_eq(s[0].key, names[0]);
	/* the same credential, again: the same key; in another node's
	 * cache (another trust.key): another */
	r2 = remote_at(d2, 0);
	{
		char right[512];
		struct stfs_auth *a = auth_of(1, right, sizeof(right));
		char *k1 = key_of(r, a, names[0]), *k2 = key_of(r2, a, names[0]);

		ck_assert_str_eq(k1, s[NN].key);
		ck_assert_str_ne(k1, k2);
		free(k1);
		free(k2);
		stfs_auth_unref(a);
	}
	for (size_t i = 0; i < n; i++)
		free(s[i].key);
	stfs_remote_free(r);
	stfs_remote_free(r2);
	snprintf(cmd, sizeof(cmd), "rm -rf %s %s", d1, d2);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* An offline cache with no key yet names no credentialed domain (an
 * error: nothing is read), and still the public one. */
START_TEST(t_offline_no_key)
{
	char d[] = "/tmp/stfs-check-trust-XXXXXX", cmd[96], *tag = NULL;
	struct stfs_remote *r;
	struct stfs_auth *a = stfs_auth_new("SECRETt1", NULL, NULL, NULL,
					    NULL);

	setenv("NETRC", "/nonexistent/stfs-check-netrc", 1);
	ck_assert_ptr_nonnull(mkdtemp(d));
	snprintf(cmd, sizeof(cmd), "mkdir -m 700 %s/v1", d);
	ck_assert_int_eq(system(cmd), 0);
	r = remote_at(d, 1);
	ck_assert_int_ne(stfs_http_trust(r, a, 0, &tag), 0);
	ck_assert_ptr_null(tag);
	ck_assert_int_eq(stfs_http_trust(r, NULL, 0, &tag), 0);
	ck_assert_ptr_null(tag);
	stfs_auth_unref(a);
	stfs_remote_free(r);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", d);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

Suite *trust_suite(void)
{
	Suite *s = suite_create("trust");
	TCase *tc = tcase_create("keys");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, t_no_two_rights_one_key);
	tcase_add_test(tc, t_offline_no_key);
	suite_add_tcase(s, tc);
	return s;
}

/*
 * check_s3xml.c: unit tests of the S3 XML reader (s3xml.c, expat): a
 * ListObjectsV2 page's keys, sizes, ETags, IsTruncated and continuation
 * token, and an error document's code and message; and hostile documents
 * of both kinds: DTDs and entities (billion laughs, external), keys, ETags
 * and tokens over their limits, bad numbers, deep nesting, too many
 * objects, markup inside text, every cut of a good page.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "s3.h"
#include "suites.h"

#define HEAD "<ListBucketResult><IsTruncated>false</IsTruncated>"
#define TAIL "</ListBucketResult>"

struct keys {
	char got[8][64], etag[8][64];
	size_t len[8];
	uint64_t size[8];
	int n;
};

static int on_key(void *arg, const char *key, uint64_t size,
		  const char *etag)
{
	struct keys *k = arg;

	if (k->n == 8)
		return -E2BIG;
	snprintf(k->got[k->n], sizeof(k->got[0]), "%s", key);
	snprintf(k->etag[k->n], sizeof(k->etag[0]), "%s", etag ? etag : "-");
	k->len[k->n] = strlen(key);
	k->size[k->n++] = size;
	return 0;
}

static int count_key(void *arg, const char *key, uint64_t size,
		     const char *etag)
{
	(*(size_t *)arg)++;
	return 0;
}

/* Parse doc (NUL-terminated) into k: the result; token freed. */
static int list(const char *doc, struct keys *k, int *more)
{
	char *token = (char *)1;
	int rc;

	memset(k, 0, sizeof(*k));
	rc = stfs_s3_list_parse(doc, strlen(doc), on_key, k, more, &token);
	if (rc)
		ck_assert_ptr_null(token);
	free(token);
	return rc;
}

/* HEAD + "<Contents>" + middle + "</Contents>" + TAIL, malloc'd. */
static char *one(const char *middle)
{
	char *s;

	ck_assert_int_ge(asprintf(&s, HEAD "<Contents>%s</Contents>" TAIL,
				  middle), 0);
	return s;
}

static int list_one(const char *middle, struct keys *k)
{
	char *s = one(middle);
	int more, rc = list(s, k, &more);

	free(s);
	return rc;
}

START_TEST(t_s3_list)
{
	const char *page =
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
		"<Name>b</Name><Prefix>m/</Prefix><KeyCount>2</KeyCount>"
		"<IsTruncated>true</IsTruncated>"
		"<Contents><Key>m/a&amp;b &#233;&#x4E2D;.safetensors</Key>"
		"<LastModified>2026-11-24T10:00:00.000Z</LastModified>"
		"<Size>12</Size><ETag>&quot;x&quot;</ETag>"
		"<Owner><ID>o</ID></Owner></Contents>"
		"<Contents><Key>m/c.safetensors</Key><Size>0</Size></Contents>"
		"<CommonPrefixes><Prefix>m/sub/</Prefix></CommonPrefixes>"
		"<NextContinuationToken>1/a+b=</NextContinuationToken>"
		"</ListBucketResult>\n";
	struct keys k = { 0 };
	char *token;
	int more;

	ck_assert_int_eq(stfs_s3_list_parse(page, strlen(page), on_key, &k,
					    &more, &token), 0);
	ck_assert_int_eq(k.n, 2);
	ck_assert_str_eq(k.got[0], "m/a&b \xc3\xa9\xe4\xb8\xad.safetensors");
	ck_assert_int_eq(k.size[0], 12);
	ck_assert_str_eq(k.etag[0], "\"x\"");
	ck_assert_str_eq(k.got[1], "m/c.safetensors");
	ck_assert_str_eq(k.etag[1], "-");
	ck_assert_int_eq(more, 1);
	ck_assert_str_eq(token, "1/a+b=");
	free(token);

	/* every cut of it is refused: a listing is whole or nothing */
	for (size_t n = 0; n + 1 < strlen(page); n++) {
		token = NULL;
		memset(&k, 0, sizeof(k));
		ck_assert_msg(stfs_s3_list_parse(page, n, on_key, &k, &more,
						 &token) == -EINVAL,
			      "accepted the first %zu bytes", n);
		ck_assert_ptr_null(token);
	}

	/* the last page; an empty one; CDATA; a key S3's limit long; the
	 * largest size; the declaration's encoding is not believed */
	ck_assert_int_eq(list(HEAD TAIL, &k, &more), 0);
	ck_assert_int_eq(k.n + more, 0);
	ck_assert_int_eq(list_one("<Key><![CDATA[a<b]]></Key><Size>1</Size>",
				  &k), 0);
	ck_assert_str_eq(k.got[0], "a<b");
	{
		char mid[1200] = "<Key>";

		memset(mid + 5, 'k', 1024);
		strcpy(mid + 5 + 1024, "</Key><Size>9999999999999999999</Size>");
		ck_assert_int_eq(list_one(mid, &k), 0);
		ck_assert_int_eq(k.len[0], 1024);
		ck_assert(k.size[0] == 9999999999999999999ULL);
	}
	ck_assert_int_eq(list("<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?>"
			      HEAD "<Contents><Key>\xc3\xa9</Key><Size>1</Size>"
			      "</Contents>" TAIL, &k, &more), 0);
	ck_assert_str_eq(k.got[0], "\xc3\xa9");
}
END_TEST

START_TEST(t_s3_list_malformed)
{
	/* refused: not a listing, a bad size, a bad reference, a NUL, more
	 * pages with no token, a cut document */
	const char *bad[] = {
		"<Error><Code>NoSuchBucket</Code></Error>",
		"", "   ", "<ListBucketResult>",
		HEAD "<Contents><Key>a</Key><Size>-1</Size></Contents>" TAIL,
		HEAD "<Contents><Key>a&bogus;</Key><Size>1</Size></Contents>"
		TAIL,
		HEAD "<Contents><Key>a&#0;</Key><Size>1</Size></Contents>" TAIL,
		HEAD "<Contents><Key>a&#xD800;</Key><Size>1</Size></Contents>"
		TAIL,
		HEAD "<Contents><Key>a&#x110000;</Key><Size>1</Size></Contents>"
		TAIL,
		HEAD "<Contents><Key>a\xff</Key><Size>1</Size></Contents>" TAIL,
		"<ListBucketResult><IsTruncated>true</IsTruncated>" TAIL,
		"<ListBucketResult><IsTruncated>true</IsTruncated>"
		"<NextContinuationToken></NextContinuationToken>" TAIL,
		"<ListBucketResult><IsTruncated>yes</IsTruncated>" TAIL,
		"<ListBucketResult><IsTruncated>false</IsTruncated>"
		"<IsTruncated>true</IsTruncated>" TAIL,
		"<ListBucketResult><Contents><Key>a</Key><Size>1</Size>"
		"</Contents>" TAIL,                     /* no IsTruncated */
		HEAD "<Contents><Key>a</Key><Size>1</Size>",
		HEAD TAIL "<ListBucketResult/>",        /* two roots */
		HEAD TAIL "junk",
		"junk" HEAD TAIL,
		"<x>" HEAD TAIL "</x>",                 /* not the root */
		"<listbucketresult><IsTruncated>false</IsTruncated>"
		"</listbucketresult>",
	};
	struct keys k;
	int more;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(list(bad[i], &k, &more) == -EINVAL, "accepted %s",
			      bad[i]);
	/* a key with a NUL inside the text itself */
	const char nul[] = HEAD "<Contents><Key>a\0b</Key><Size>1</Size>"
			   "</Contents>" TAIL;
	char *token = NULL;

	ck_assert_int_eq(stfs_s3_list_parse(nul, sizeof(nul) - 1, on_key, &k,
					    &more, &token), -EINVAL);
	ck_assert_ptr_null(token);

	/* an object's fields: each once, Key and Size required, no markup
	 * inside them, numbers only decimal digits, 1 to 19 of them */
	const char *objects[] = {
		"<Size>1</Size>",
		"<Key>a</Key>",
		"<Key></Key><Size>1</Size>",
		"<Key/><Size>1</Size>",
		"<Key>a</Key><Key>b</Key><Size>1</Size>",
		"<Key>a</Key><Size>1</Size><Size>2</Size>",
		"<Key>a<b/>c</Key><Size>1</Size>",
		"<Key>a<!-- c --></Key><Size>1<x>2</x></Size>",
		"<Key>a</Key><Size></Size>",
		"<Key>a</Key><Size> 12</Size>",
		"<Key>a</Key><Size>12 </Size>",
		"<Key>a</Key><Size>+12</Size>",
		"<Key>a</Key><Size>1.5</Size>",
		"<Key>a</Key><Size>1e3</Size>",
		"<Key>a</Key><Size>0x10</Size>",
		"<Key>a</Key><Size>12a</Size>",
		"<Key>a</Key><Size>&#x661;</Size>",     /* an Arabic one */
		"<Key>a</Key><Size>99999999999999999999</Size>",
		"<Key>a</Key><Size>00000000000000000001</Size>",
		"<Key>a</Key><Size>1</Size><ETag>\"x\"&#10;Host: y</ETag>",
		"<Key>a</Key><Size>1</Size><ETag>a</ETag><ETag>b</ETag>",
	};
	for (size_t i = 0; i < sizeof(objects) / sizeof(objects[0]); i++)
		ck_assert_msg(list_one(objects[i], &k) == -EINVAL,
			      "accepted %s", objects[i]);
	/* a comment inside a key is no markup of its text */
	ck_assert_int_eq(list_one("<Key>a<!-- c -->b</Key><Size>1</Size>", &k),
			 0);
	ck_assert_str_eq(k.got[0], "ab");
}
END_TEST

START_TEST(t_s3_list_hostile)
{
	const char *dtd[] = {
		/* billion laughs: never expanded, refused at the DOCTYPE */
		"<?xml version=\"1.0\"?><!DOCTYPE ListBucketResult ["
		"<!ENTITY a \"aaaaaaaaaa\">"
		"<!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\">"
		"<!ENTITY c \"&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;\">"
		"<!ENTITY d \"&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;\">"
		"<!ENTITY e \"&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;\">"
		"<!ENTITY f \"&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;\">"
		"<!ENTITY g \"&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;\">"
		"<!ENTITY h \"&g;&g;&g;&g;&g;&g;&g;&g;&g;&g;\">"
		"<!ENTITY i \"&h;&h;&h;&h;&h;&h;&h;&h;&h;&h;\">]>"
		"<ListBucketResult><IsTruncated>false</IsTruncated><Contents>"
		"<Key>&i;</Key><Size>1</Size></Contents>" TAIL,
		/* an external entity: never fetched, never read */
		"<!DOCTYPE ListBucketResult [<!ENTITY x SYSTEM "
		"\"file:///etc/passwd\">]>" HEAD "<Contents><Key>a&x;</Key>"
		"<Size>1</Size></Contents>" TAIL,
		"<!DOCTYPE ListBucketResult SYSTEM \"http://127.0.0.1:9/d\">"
		HEAD TAIL,
		/* an entity, a parameter entity, a plain DOCTYPE: harmless
		 * but refused all the same */
		"<!DOCTYPE ListBucketResult [<!ENTITY k \"key\">]>" HEAD
		"<Contents><Key>&k;</Key><Size>1</Size></Contents>" TAIL,
		"<!DOCTYPE ListBucketResult [<!ENTITY % p \"x\"> %p;]>"
		HEAD TAIL,
		"<!DOCTYPE ListBucketResult>" HEAD TAIL,
	};
	struct keys k;
	int more;
	char *s;
	size_t n;
	clock_t t0 = clock();

	for (size_t i = 0; i < sizeof(dtd) / sizeof(dtd[0]); i++) {
		ck_assert_msg(list(dtd[i], &k, &more) == -EINVAL,
			      "accepted %s", dtd[i]);
		ck_assert_int_eq(k.n, 0);
	}
	ck_assert_msg(clock() - t0 < CLOCKS_PER_SEC, "DTDs took over 1 s");

	/* over the limits: a key, an ETag, a token */
	s = malloc(8000);
	ck_assert_ptr_nonnull(s);
	strcpy(s, "<Key>");
	memset(s + 5, 'k', 1025);
	strcpy(s + 5 + 1025, "</Key><Size>1</Size>");
	ck_assert_int_eq(list_one(s, &k), -EINVAL);
	strcpy(s, "<Key>a</Key><Size>1</Size><ETag>");
	n = strlen(s);
	memset(s + n, 'e', 257);
	strcpy(s + n + 257, "</ETag>");
	ck_assert_int_eq(list_one(s, &k), -EINVAL);
	/* the limit counts bytes: 513 characters é are 1026 */
	strcpy(s, "<Key>");
	for (int i = 0; i < 513; i++)
		memcpy(s + 5 + 2 * i, "\xc3\xa9", 2);
	strcpy(s + 5 + 1026, "</Key><Size>1</Size>");
	ck_assert_int_eq(list_one(s, &k), -EINVAL);
	strcpy(s, "<ListBucketResult><IsTruncated>true</IsTruncated>"
		  "<NextContinuationToken>");
	n = strlen(s);
	memset(s + n, 't', 4097);
	strcpy(s + n + 4097, "</NextContinuationToken>" TAIL);
	ck_assert_int_eq(list(s, &k, &more), -EINVAL);
	s[n + 4096] = '<';      /* 4096: taken */
	strcpy(s + n + 4096, "</NextContinuationToken>" TAIL);
	ck_assert_int_eq(list(s, &k, &more), 0);
	ck_assert_int_eq(more, 1);
	free(s);
}
END_TEST

/* Nesting: 16 deep is taken, 17 is not, and a million is refused at
 * once. */
START_TEST(t_s3_list_deep)
{
	struct keys k;
	int more;
	char *s;
	size_t n;
	clock_t t0;

	{
		char deep[1024] = HEAD;
		char *p = deep + strlen(deep);

		for (int i = 2; i <= 16; i++)
			p += sprintf(p, "<x>");
		for (int i = 2; i <= 16; i++)
			p += sprintf(p, "</x>");
		strcpy(p, TAIL);
		ck_assert_int_eq(list(deep, &k, &more), 0);
		p = deep + strlen(HEAD);
		for (int i = 2; i <= 17; i++)
			p += sprintf(p, "<x>");
		for (int i = 2; i <= 17; i++)
			p += sprintf(p, "</x>");
		strcpy(p, TAIL);
		ck_assert_int_eq(list(deep, &k, &more), -EINVAL);
	}
	n = 1000000;
	s = malloc(strlen(HEAD) + 3 * n + 1);
	ck_assert_ptr_nonnull(s);
	strcpy(s, HEAD);
	for (size_t i = 0; i < n; i++)
		memcpy(s + strlen(HEAD) + 3 * i, "<x>", 3);
	s[strlen(HEAD) + 3 * n] = '\0';
	t0 = clock();
	ck_assert_int_eq(list(s, &k, &more), -EINVAL);
	ck_assert_msg(clock() - t0 < CLOCKS_PER_SEC, "nesting took over 1 s");
	free(s);
}
END_TEST

/* 1000 objects are a page; 1001 are not; a callback's error stops it. */
START_TEST(t_s3_list_count)
{
	const char *obj = "<Contents><Key>k</Key><Size>1</Size></Contents>";
	size_t ol = strlen(obj), hl = strlen(HEAD), count = 0;
	char *s = malloc(hl + 1001 * ol + sizeof(TAIL)), *token = NULL;
	struct keys k;
	int more;

	ck_assert_ptr_nonnull(s);
	memcpy(s, HEAD, hl);
	for (size_t i = 0; i < 1001; i++)
		memcpy(s + hl + i * ol, obj, ol);
	strcpy(s + hl + 1000 * ol, TAIL);
	ck_assert_int_eq(stfs_s3_list_parse(s, strlen(s), count_key, &count,
					    &more, &token), 0);
	ck_assert_int_eq(count, 1000);
	/* on_key takes 8 and then says -E2BIG */
	ck_assert_int_eq(list(s, &k, &more), -E2BIG);
	ck_assert_int_eq(k.n, 8);
	memcpy(s + hl + 1000 * ol, obj, ol);
	strcpy(s + hl + 1001 * ol, TAIL);
	count = 0;
	ck_assert_int_eq(stfs_s3_list_parse(s, strlen(s), count_key, &count,
					    &more, &token), -EINVAL);
	ck_assert_ptr_null(token);
	free(s);
}
END_TEST

START_TEST(t_s3_error)
{
	char out[128], *big;
	const char *e = "<?xml version='1.0' encoding='UTF-8'?>\n<Error><Code>"
			"NoSuchKey</Code><Message>The specified key &lt;k&gt; "
			"does not\nexist.</Message><RequestId>tx1</RequestId>";

	/* even cut short (no </Error>): only the start of a long one */
	ck_assert_int_eq(stfs_s3_error_parse(e, strlen(e), out, sizeof(out)),
			 0);
	ck_assert_str_eq(out, "NoSuchKey: The specified key <k> does not "
			      "exist.");
	ck_assert_int_eq(stfs_s3_error_parse("<Error><Code>X</Code></Error>",
					     29, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "X");
	ck_assert_int_eq(stfs_s3_error_parse(e, strlen(e), out, 8), 0);
	ck_assert_str_eq(out, "NoSuchK");
	/* a message cut before its end is left out */
	ck_assert_int_eq(stfs_s3_error_parse(e, strlen(e) - 40, out,
					     sizeof(out)), 0);
	ck_assert_str_eq(out, "NoSuchKey");

	const char *bad[] = {
		"<html>no</html>", "<Error><Code>X", "<Error><Code></Code>",
		"<Error><Code>X<b/></Code></Error>", "",
		"<x><Error><Code>X</Code></Error></x>",
		"<!DOCTYPE Error [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>"
		"<Error><Code>&x;</Code></Error>",
		"<!DOCTYPE Error><Error><Code>X</Code></Error>",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(stfs_s3_error_parse(bad[i], strlen(bad[i]), out,
						  sizeof(out)) == -EINVAL,
			      "accepted %s", bad[i]);

	/* a long code and message are cut, between characters */
	big = malloc(4000);
	ck_assert_ptr_nonnull(big);
	strcpy(big, "<Error><Code>");
	for (int i = 0; i < 1000; i++)
		memcpy(big + 13 + 2 * i, "\xc3\xa9", 2);
	strcpy(big + 13 + 2000, "</Code></Error>");
	ck_assert_int_eq(stfs_s3_error_parse(big, strlen(big), out,
					     sizeof(out)), 0);
	ck_assert_int_eq(strlen(out), 126);     /* 63 é: none cut in two */
	{
		char wide[600];

		ck_assert_int_eq(stfs_s3_error_parse(big, strlen(big), wide,
						     sizeof(wide)), 0);
		ck_assert_int_eq(strlen(wide), 256);    /* 128 whole é */
	}
	free(big);
}
END_TEST

Suite *s3xml_suite(void)
{
	Suite *s = suite_create("s3xml");
	TCase *tc = tcase_create("s3xml");

	tcase_add_test(tc, t_s3_list);
	tcase_add_test(tc, t_s3_list_malformed);
	tcase_add_test(tc, t_s3_list_hostile);
	tcase_add_test(tc, t_s3_list_deep);
	tcase_add_test(tc, t_s3_list_count);
	tcase_add_test(tc, t_s3_error);
	suite_add_tcase(s, tc);
	return s;
}

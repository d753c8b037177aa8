/*
 * awsconf.c: the AWS profile of an s3:// source, found as the AWS CLI
 * (botocore) finds it, checked against `aws configure list` in
 * tests/remote/test_trust.py:
 *
 * - the profile: AWS_PROFILE, else AWS_DEFAULT_PROFILE (the order of the
 *   AWS CLI v2 that Debian ships), else "default";
 *   one that is named and exists in neither file is an error naming it
 *   (only "default" may be missing);
 * - the files: AWS_SHARED_CREDENTIALS_FILE (default ~/.aws/credentials),
 *   whose sections are profile names as they are, and AWS_CONFIG_FILE
 *   (default ~/.aws/config), whose sections are [profile NAME] and
 *   [default] or [profile default] (the later of those two in the file is
 *   the one); both read as ini.c says;
 * - a setting (region, endpoint_url, ca_bundle): the credentials file's
 *   section first, then the config file's, then [DEFAULT] of each;
 * - keys: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (with
 *   AWS_SESSION_TOKEN or AWS_SECURITY_TOKEN), the credentials file's
 *   section if it has aws_access_key_id, the config file's, each asked on
 *   its own (s3.c puts them in botocore's order among the providers of
 *   creds.c); a key id without its secret is an error, as it is for the
 *   CLI.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format.h"
#include "s3.h"

#define CONF_MAX (1u << 20)     /* bytes of one file, at most */

static char *home_file(const char *var, const char *name)
{
	const char *v = stfs_env(var), *home = stfs_env("HOME");
	char *s = NULL;

	if (v)
		return strdup(v);
	return asprintf(&s, "%s/.aws/%s", home ? home : "/root", name) < 0 ?
	       NULL : s;
}

/* Read and parse the file at path into *ini (empty if there is none). */
static int load(const char *path, struct stfs_ini *ini,
		struct stfs_error *err)
{
	FILE *f = fopen(path, "re");
	const char *why;
	char *text;
	size_t n, line;
	int rc;

	memset(ini, 0, sizeof(*ini));
	if (!f)
		return errno == ENOENT || errno == ENOTDIR ? 0 :
		       stfs_fail(err, -errno, NULL, STFS_NO_OFFSET, "%s: %s",
				 path, strerror(errno));
	if (!(text = malloc(CONF_MAX + 1))) {
		fclose(f);
		return stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET,
				 "out of memory");
	}
	n = fread(text, 1, CONF_MAX + 1, f);
	fclose(f);
	if (n > CONF_MAX) {
		explicit_bzero(text, CONF_MAX + 1);
		free(text);
		return stfs_fail(err, -EFBIG, NULL, STFS_NO_OFFSET, "%s: over "
				 "1 MiB", path);
	}
	rc = stfs_ini_parse(text, n, ini, &line, &why);
	explicit_bzero(text, n);        /* it may hold secret keys */
	free(text);
	if (rc == -EINVAL)
		return stfs_fail(err, rc, NULL, STFS_NO_OFFSET, "%s line %zu: "
				 "%s (the AWS CLI cannot read it either)", path,
				 line, why);
	return rc ? stfs_fail(err, rc, NULL, STFS_NO_OFFSET, "out of "
			      "memory") : 0;
}

/* The config file's section of profile name: [profile NAME] (any word
 * that starts with "profile", then the name) or [default], the later of
 * the two for "default". */
static const struct stfs_ini_section *conf_section(const struct stfs_ini *c,
						   const char *name)
{
	const struct stfs_ini_section *found = NULL;

	for (size_t i = 0; i < c->n; i++) {
		const char *s = c->s[i].name, *sp;
		size_t len;

		if (strcmp(s, "default") == 0) {
			if (strcmp(name, "default") == 0)
				found = &c->s[i];
			continue;
		}
		if (strncmp(s, "profile", 7) != 0)
			continue;
		/* exactly two words: "profile..." and the name */
		sp = s + strcspn(s, " \t");
		sp += strspn(sp, " \t");
		len = strcspn(sp, " \t");
		if (len && !sp[len + strspn(sp + len, " \t")] &&
		    len == strlen(name) && !memcmp(sp, name, len))
			found = &c->s[i];
	}
	return found;
}

int stfs_aws_conf_load(struct stfs_aws_conf *a, struct stfs_error *err)
{
	return stfs_aws_conf_load_named(a, NULL, err);
}

int stfs_aws_conf_load_named(struct stfs_aws_conf *a, const char *named,
			     struct stfs_error *err)
{
	const char *from = named ? "mirror_profile=" :
			   stfs_env("AWS_PROFILE") ? "AWS_PROFILE" :
			   stfs_env("AWS_DEFAULT_PROFILE") ? "AWS_DEFAULT_PROFILE" :
			   NULL;
	int rc;

	memset(a, 0, sizeof(*a));
	if (!(a->profile = strdup(named ? named : from ? stfs_env(from) :
				  "default")) ||
	    !(a->cred_path = home_file("AWS_SHARED_CREDENTIALS_FILE",
				       "credentials")) ||
	    !(a->conf_path = home_file("AWS_CONFIG_FILE", "config"))) {
		stfs_aws_conf_free(a);
		return stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET,
				 "out of memory");
	}
	if ((rc = load(a->cred_path, &a->cred, err)) ||
	    (rc = load(a->conf_path, &a->conf, err))) {
		stfs_aws_conf_free(a);
		return rc;
	}
	a->cs = strcmp(a->profile, "DEFAULT") ?
		stfs_ini_section(&a->cred, a->profile) : NULL;
	a->fs = conf_section(&a->conf, a->profile);
	if (!a->cs && !a->fs && strcmp(a->profile, "default") != 0) {
		char q[128];

		stfs_fail(err, -ENOENT, NULL, STFS_NO_OFFSET, "the AWS profile "
			  "\"%s\" (%s) is in neither %s nor %s", stfs_quote(
			  a->profile, strlen(a->profile), q, sizeof(q)), from,
			  a->cred_path, a->conf_path);
		stfs_aws_conf_free(a);
		return -ENOENT;
	}
	return 0;
}

char *stfs_aws_conf_get(const struct stfs_aws_conf *a, const char *key)
{
	const char *v = stfs_ini_get(a->cs, key);

	if (!v)
		v = stfs_ini_get(a->fs, key);
	if (!v && a->cs)
		v = stfs_ini_get(stfs_ini_section(&a->cred, "DEFAULT"), key);
	if (!v && a->fs)
		v = stfs_ini_get(stfs_ini_section(&a->conf, "DEFAULT"), key);
	return v && *v ? strdup(v) : NULL;
}

/* The keys of one section (with [DEFAULT]'s under them): 1 if it has a
 * key id, 0 if not, -EINVAL if its secret is missing. */
static int section_keys(const struct stfs_ini *f,
			const struct stfs_ini_section *s, const char *k[3])
{
	const struct stfs_ini_section *d = stfs_ini_section(f, "DEFAULT");
	static const char *const names[4] = {
		"aws_access_key_id", "aws_secret_access_key",
		"aws_session_token", "aws_security_token" };

	if (!s)
		return 0;
	for (int i = 0; i < 4; i++) {
		const char *v = stfs_ini_get(s, names[i]);

		if (!v)
			v = stfs_ini_get(d, names[i]);
		if (i < 3)
			k[i] = v;
		else if (!k[2])
			k[2] = v;
	}
	if (!k[0])
		return 0;
	return k[1] ? 1 : -EINVAL;
}

int stfs_aws_conf_keys_at(const struct stfs_aws_conf *a, enum stfs_keys_at at,
			  char **access, char **secret, char **token,
			  struct stfs_error *err)
{
	const char *k[3] = { NULL, NULL, NULL };
	const char *where = NULL;
	int rc;

	*access = *secret = *token = NULL;
	if (at == STFS_KEYS_ENV && stfs_env("AWS_ACCESS_KEY_ID")) {
		if (!stfs_env("AWS_SECRET_ACCESS_KEY"))
			return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET,
					 "AWS_ACCESS_KEY_ID is set, "
					 "AWS_SECRET_ACCESS_KEY is not");
		k[0] = stfs_env("AWS_ACCESS_KEY_ID");
		k[1] = stfs_env("AWS_SECRET_ACCESS_KEY");
		k[2] = stfs_env("AWS_SESSION_TOKEN") ? stfs_env("AWS_SESSION_TOKEN") :
		       stfs_env("AWS_SECURITY_TOKEN");
	} else if (at == STFS_KEYS_CRED &&
		   (rc = section_keys(&a->cred, a->cs, k)) != 0) {
		where = a->cred_path;
	} else if (at == STFS_KEYS_CONF &&
		   (rc = section_keys(&a->conf, a->fs, k)) != 0) {
		where = a->conf_path;
	}
	if (where && !k[1])
		return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET, "the AWS "
				 "profile %s in %s has aws_access_key_id but "
				 "no aws_secret_access_key", a->profile, where);
	if (!k[0])
		return 0;               /* none there */
	*access = strdup(k[0]);
	*secret = strdup(k[1]);
	*token = k[2] ? strdup(k[2]) : NULL;
	if (!*access || !*secret || (k[2] && !*token)) {
		free(*access);
		free(*secret);
		free(*token);
		*access = *secret = *token = NULL;
		return stfs_fail(err, -ENOMEM, NULL, STFS_NO_OFFSET,
				 "out of memory");
	}
	return 0;
}

void stfs_aws_conf_free(struct stfs_aws_conf *a)
{
	free(a->profile);
	free(a->cred_path);
	free(a->conf_path);
	stfs_ini_free(&a->cred);
	stfs_ini_free(&a->conf);
	memset(a, 0, sizeof(*a));
}

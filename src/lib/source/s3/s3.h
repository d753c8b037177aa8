/*
 * s3.h: what the S3 room's files share (never seen outside src/lib/source/s3):
 * ListObjectsV2 pages (s3xml.c), the checksums of an object's answer
 * (s3sum.c), the AWS CLI's files and profile (ini.c,
 * awsconf.c), the credentials handed out by services and refreshed
 * (creds.c, with sts.c, credproc.c, container.c, imds.c and their
 * answers' reader credjson.c) and Signature Version 4 (sigv4.c), for the
 * s3:// locator (s3.c).
 */
#ifndef STFS_S3_H
#define STFS_S3_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "scheme.h"
#include "auth.h"
#include "locate.h"
#include "rlist.h"
#include "http/http.h"
#include "s3/service.h"

/* One ListObjectsV2 page: object() for each key (decoded, 1 to 1024
 * bytes), size and ETag (as the server wrote it, quotes and all; NULL if
 * it gave none), in order (a non-zero return stops the parse and is
 * returned); whether more pages follow, and if so *next_token (malloc'd).
 * 0, or -EINVAL for a document that is not such a page: not well-formed,
 * a DOCTYPE, another root, nesting over 16 deep, over 1000 objects, an
 * object with no Key or no Size, a Size that is not 1 to 19 digits, an
 * ETag over 256 bytes or with a control character, a token over 4096
 * bytes, IsTruncated missing or neither "true" nor "false", or "true"
 * with no token; -ENOMEM. */
int stfs_s3_list_parse(const char *xml, size_t len,
		       int (*object)(void *arg, const char *key,
				     uint64_t size, const char *etag),
		       void *arg, int *truncated, char **next_token);

/* ---- what an object's bytes must be (s3sum.c) ---------------------------- */

/* The check an answer to a GET sent with x-amz-checksum-mode: ENABLED
 * publishes for the whole object: kind "sha256" or "crc64nvme" (a
 * full-object x-amz-checksum-*, preferred in that order; a composite one,
 * of a multipart upload's parts, is not of the bytes and never used), else
 * "md5" (an ETag of 32 hex digits, but not under SSE-KMS or SSE-C, whose
 * ETags are not MD5s), else "" (nothing: unchecked says why when the
 * object is encrypted so); hex is the digest in lower-case hex. */
struct stfs_s3_sum {
	char kind[16];
	char hex[65];
	const char *unchecked;  /* a static text, or NULL */
	char why[200];          /* why the answer is refused */
};

/* Read r into *out: 0, or -EINVAL with out->why saying which value is not
 * a checksum (not strict base64, not of the algorithm's length, sent
 * empty, twice or too long). */
int stfs_s3_expected(const struct stfs_http_resp *r, struct stfs_s3_sum *out);

/* ---- the AWS CLI's files (ini.c, awsconf.c) ------------------------------ */

struct stfs_ini_kv {
	char *key;              /* lower case */
	char *value;
};

struct stfs_ini_section {
	char *name;
	struct stfs_ini_kv *kv;
	size_t n;
};

struct stfs_ini {
	struct stfs_ini_section *s;
	size_t n;
};

/* Parse len bytes of INI text as the AWS CLI does (ini.c): 0, -ENOMEM, or
 * -EINVAL with *line (1-based) and *why saying what does not parse.  *out
 * is freed with stfs_ini_free(). */
int stfs_ini_parse(const char *text, size_t len, struct stfs_ini *out,
		   size_t *line, const char **why);
/* The section called name, or NULL. */
const struct stfs_ini_section *stfs_ini_section(const struct stfs_ini *ini,
						const char *name);
/* key's value in s (NULL: none, or no section). */
const char *stfs_ini_get(const struct stfs_ini_section *s, const char *key);
void stfs_ini_free(struct stfs_ini *ini);

/* The AWS profile of the environment, from both files (awsconf.c). */
struct stfs_aws_conf {
	char *profile;
	char *cred_path, *conf_path;
	struct stfs_ini cred, conf;
	const struct stfs_ini_section *cs, *fs;  /* its sections, or NULL */
};

/* Find the profile and read both files: 0, or -errno with err saying why
 * (a profile named that is in neither file; a file that does not parse). */
int stfs_aws_conf_load(struct stfs_aws_conf *a, struct stfs_error *err);
/* The same for the profile named (not the environment's). */
int stfs_aws_conf_load_named(struct stfs_aws_conf *a, const char *named,
			     struct stfs_error *err);
/* A setting of the profile (region, endpoint_url, ...): a copy, or NULL. */
char *stfs_aws_conf_get(const struct stfs_aws_conf *a, const char *key);
void stfs_aws_conf_free(struct stfs_aws_conf *a);

/* Which of the profile's keys (stfs_aws_conf_keys_at()): the
 * environment's, the credentials file's section, the config file's. */
enum stfs_keys_at { STFS_KEYS_ENV, STFS_KEYS_CRED, STFS_KEYS_CONF };
int stfs_aws_conf_keys_at(const struct stfs_aws_conf *a, enum stfs_keys_at at,
			  char **access, char **secret, char **token,
			  struct stfs_error *err);

/* ---- credentials handed out (creds.c, credjson.c, sts.c, imds.c,
 * container.c, credproc.c) ------------------------------------------------ */

#define STFS_KEY_ID_MAX 128
#define STFS_SECRET_MAX 256
#define STFS_TOKEN_MAX 16384

/* A flat JSON object (credjson.c): members' names and values (type 's'
 * string, '0' number (its text), 't' true, 'f' false, 'z' null). */
#define STFS_CREDJSON_MEMBERS 32
#define STFS_CREDJSON_NAME_MAX 63
#define STFS_CREDJSON_VALUE_MAX 16384
struct stfs_json_kv {
	char *name;
	int type;
	char *value;            /* strings and numbers; else NULL */
};
struct stfs_credjson {
	struct stfs_json_kv kv[STFS_CREDJSON_MEMBERS];
	size_t n;
};
/* Parse len bytes: 0, or -EINVAL with *why (a static text), -ENOMEM. */
int stfs_credjson_parse(const char *text, size_t len,
			struct stfs_credjson *j, const char **why);
/* name's string value, or NULL (none, or not a string). */
const char *stfs_credjson_str(const struct stfs_credjson *j,
			      const char *name);
/* name's type, or 0 if it is not there. */
int stfs_credjson_has(const struct stfs_credjson *j, const char *name);
void stfs_credjson_free(struct stfs_credjson *j);
/* The keys of j (AccessKeyId, SecretAccessKey, token_name, Expiration;
 * the token and the expiry required with need_expiry) into new copies in
 * *k: 0, or -EINVAL with *why, -ENOMEM. */
int stfs_credjson_keys(const struct stfs_credjson *j, const char *token_name,
		       int need_expiry, struct stfs_creds_keys *k,
		       const char **why);
/* The form of keys (token may be NULL): 0, or -EINVAL with *why. */
int stfs_creds_keys_check(const char *access, const char *secret,
			  const char *token, const char **why);
/* An ISO 8601 UTC time (YYYY-MM-DDTHH:MM:SS[.frac](Z|+00:00)) as a Unix
 * time: 0, or -EINVAL. */
int stfs_creds_time(const char *s, time_t *out);

/* err's message with each copy of secret (a token a service echoed back
 * in its error) replaced by "(the token sent)" (creds.c). */
void stfs_creds_unsay(struct stfs_error *err, const char *secret);

/* STS's AssumeRoleWithWebIdentity answer (s3xml.c): 0 with copies in *k,
 * or -EINVAL (not such a document, or keys not of their form), -ENOMEM. */
int stfs_sts_parse(const char *xml, size_t len, struct stfs_creds_keys *k);

/* Where credentials come from, found by the chain (creds.c) and asked by
 * the provider's file. */
enum stfs_creds_kind {
	STFS_CREDS_WEB_IDENTITY,        /* sts.c */
	STFS_CREDS_PROCESS,             /* credproc.c */
	STFS_CREDS_CONTAINER,           /* container.c */
	STFS_CREDS_IMDS,                /* imds.c */
};

struct stfs_creds_src {
	enum stfs_creds_kind kind;
	char *from;             /* what set it, for messages: "AWS_ROLE_ARN",
				 * "profile NAME" */
	/* web identity */
	char *role_arn, *token_file, *session_name, *sts_url;
	/* credential_process */
	char *command;
	/* the container endpoint */
	char *url, *auth_token, *auth_file;
	/* IMDS: its base URL (no trailing '/') */
	char *imds;
};

/* Ask src's service for keys, with the client h: 0 with *k, or -errno
 * with err saying why (never a secret). */
int stfs_sts_fetch(struct stfs_http_client *h,
		   const struct stfs_creds_src *src, struct stfs_creds_keys *k,
		   struct stfs_error *err);
/* cancel (may be NULL): once it reads nonzero (an atomic load), the
 * process is killed with its group and the fetch fails at once. */
int stfs_process_fetch(const struct stfs_creds_src *src, const int *cancel,
		       struct stfs_creds_keys *k, struct stfs_error *err);
int stfs_container_fetch(struct stfs_http_client *h,
			 const struct stfs_creds_src *src,
			 struct stfs_creds_keys *k, struct stfs_error *err);
int stfs_imds_fetch(struct stfs_http_client *h,
		    const struct stfs_creds_src *src, struct stfs_creds_keys *k,
		    struct stfs_error *err);
/* The STS endpoint as the SDKs find it: AWS_ENDPOINT_URL_STS,
 * AWS_ENDPOINT_URL, the profile's endpoint_url, else STS of region (NULL:
 * the global one); a new string or NULL (out of memory). */
char *stfs_sts_url(const struct stfs_aws_conf *a, const char *region);
/* The container endpoint's URL allowed (https anywhere; http to a
 * loopback address or ECS's and EKS's link-local hosts): 1 or 0. */
int stfs_container_url_ok(const char *url);
/* Open a credential file (a web identity or authorization token file) to
 * read: a descriptor, or -errno; -EINVAL when it is not a regular file (a
 * FIFO or a device could keep a read, or the open itself, waiting
 * forever).  creds.c. */
int stfs_creds_open_file(const char *path);
/* Why stfs_creds_open_file() failed, for a message. */
const char *stfs_creds_open_why(int rc);
/* A command line split into words as a POSIX shell would, with no
 * expansion (credproc.c): a NULL-terminated array (free with
 * stfs_words_free()), or NULL with *why (unbalanced quotes, empty). */
char **stfs_words(const char *line, const char **why);
void stfs_words_free(char **w);
/* Run argv as a child (spawn.c): stdin /dev/null, its stdout (at most
 * STFS_CHILD_OUT_MAX bytes) into out with *outlen, the start of its
 * stderr (STFS_CHILD_ERR_KEEP bytes, NUL-terminated) into errs; killed
 * with its process group past STFS_CHILD_TIME_MS, past that much output,
 * or once *cancel (may be NULL) reads nonzero; once it has exited, its
 * pipes get STFS_CHILD_GRACE_MS more, then its group is killed and its
 * answer stands.  0 with its *status (as
 * waitpid gives it), or -errno with err. */
#define STFS_CHILD_OUT_MAX (64u << 10)
#define STFS_CHILD_ERR_KEEP 4096
#define STFS_CHILD_TIME_MS 30000
#define STFS_CHILD_GRACE_MS 250
int stfs_child_run(char **argv, const int *cancel, char *out,
		   size_t *outlen, char *errs, int *status,
		   struct stfs_error *err);

/* The provider of kind, when the environment or the profile sets it up
 * (s3.c asks them in botocore's order): 0 with *out (NULL: not set up; for
 * IMDS, none answered), or -errno with err saying why (one that is set up
 * and fails).  The first keys are fetched here; region is the one given
 * (NULL: none), for STS's endpoint. */
struct stfs_creds;
int stfs_creds_try(const struct stfs_aws_conf *a, const char *region,
		   enum stfs_creds_kind kind, struct stfs_remote *r,
		   struct stfs_creds **out, struct stfs_error *err);
/* The refreshing credentials: stop their thread before the process forks
 * (it starts again at the next request), or free them.  struct stfs_auth
 * calls them through stfs_creds_ops(), which s3.c gives it with them. */
void stfs_creds_park(struct stfs_creds *c);
void stfs_creds_free(struct stfs_creds *c);
/* The current keys of c, copies (free with stfs_creds_keys_drop()): 0, or
 * -EKEYEXPIRED with why saying since when and why no refresh worked. */
int stfs_creds_now(struct stfs_creds *c, struct stfs_creds_keys *k,
		   char *why, size_t whysz);
/* Their functions, for struct stfs_auth (s3.c gives them with c). */
const struct stfs_creds_ops *stfs_creds_ops(void);
/* What c is, for `stfs inspect` and the log: "web identity (AWS_ROLE_ARN
 * ...): key ASIA..., expires ..." (never a secret) into buf. */
void stfs_creds_describe(struct stfs_creds *c, char *buf, size_t n);

#endif

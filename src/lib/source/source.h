/*
 * source.h: the byte-source layer's declarations for the layers above it
 * (never installed): the operations a kind of source implements, the
 * asynchronous read, the remote layer's entry points, and the locator
 * that turns a SOURCE argument into named sources.
 */
#ifndef STFS_SOURCE_H
#define STFS_SOURCE_H

#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "stfs/stfs.h"

/* Completion of an asynchronous read: err is 0 or a negative errno. */
struct stfs_extent {
	uint64_t off, end;      /* [off, end) of the source */
};

typedef void (*stfs_source_done)(void *arg, int err);

struct stfs_source_ops {
	void (*close)(struct stfs_source *s);
	/* Read exactly len bytes at off (within the size): 0 or -errno. */
	int (*read)(struct stfs_source *s, void *buf, size_t len,
		    uint64_t off);
	/* Start such a read and call done exactly once, now or later, from
	 * any thread.  NULL: read() then done(), before returning.  The read
	 * is part of the extent *ext (a tensor's bytes), a hint for what
	 * may be read next, or NULL. */
	void (*read_async)(struct stfs_source *s, void *buf, size_t len,
			   uint64_t off, const struct stfs_extent *ext,
			   stfs_source_done done, void *arg);
	/* The bytes [off, off + len) were served (copied to a reader or
	 * handed to the kernel): leave none of their pages in the page
	 * cache, where the mount's own file pages hold them now.  NULL:
	 * nothing to drop. */
	void (*drop)(struct stfs_source *s, uint64_t off, uint64_t len);
};

/* What every kind of source shares; kinds embed it first. */
struct stfs_source {
	const struct stfs_source_ops *ops;
	char *name;
	struct stfs_source_info info;
	const void *map;            /* info.size bytes, or NULL */
	const char *origin[STFS_ORIGIN_COUNT]; /* the locator's, or NULL */
};

/* Read [off, off + len) of s asynchronously (see read_async).  Reads past
 * the size complete with -EIO. */
void stfs_source_read_async(struct stfs_source *s, void *buf, size_t len,
			    uint64_t off, const struct stfs_extent *ext,
			    stfs_source_done done, void *arg);

/* Call s's drop for [off, off + len), if it has one. */
void stfs_source_drop(struct stfs_source *s, uint64_t off, uint64_t len);

/* Read the whole of s (at most max bytes, else -EFBIG) into a new buffer,
 * NUL-terminated: 0 or -errno. */
int stfs_source_slurp(struct stfs_source *s, uint64_t max, char **out,
		      size_t *len);

struct stfs_auth;

/* ---- HTTP (http.c, httphdr.c) ----------------------------------------- */

/* What stfs takes from a response's header lines. */
struct stfs_http_resp {
	int has_range;          /* Content-Range: bytes FIRST-LAST/TOTAL */
	int has_total;          /* ... or bytes * /TOTAL */
	uint64_t range_first, range_last, total;
	char etag[256];         /* "" if none (or unusable) */
	char last_modified[64];
	unsigned retry_after_s; /* 0 if none */
	char link_next[2048];   /* Link: <URL>; rel="next", or "" */
	char error_code[128];   /* X-Error-Code (the Hub), or "" */
	char error_message[512]; /* X-Error-Message (the Hub), or "" */
	int encoded;            /* a Content-Encoding other than identity */
	char encoding[64];      /* its name, or "" if too long to keep */
	/* the Hub's identity of the object a /resolve redirects to */
	char linked_etag[256];  /* X-Linked-Etag, or "" */
	int has_linked_size;
	uint64_t linked_size;   /* X-Linked-Size */
	char commit[64];        /* X-Repo-Commit, or "" */
	/* RateLimit: "NAME";r=REMAINING;t=SECONDS (IETF draft, the Hub's) */
	char ratelimit[160];    /* the value as sent, or "" */
	unsigned ratelimit_t;   /* its t (at most 3600), 0 if none */
	char location[8192];    /* a redirect's target: Location as sent;
				 * httpc.c makes it absolute (or "") */
	long status;            /* the answer's HTTP status (httpc.c) */
	int has_length;         /* Content-Length: length */
	uint64_t length;
	/* An answer that says two things (two Content-Range headers, two
	 * different ETags, Last-Modified or Content-Length values, a field of
	 * ours folded over two lines or with a space before its colon): it
	 * is refused whatever else it says.  ambiguity says why. */
	int ambiguous;
	char ambiguity[80];
	unsigned seen;          /* the fields of ours seen (parser state) */
	int last_field;         /* the last field's, for a folded line */
};

/* What an answer to a range request must be: bytes [off, off + len) of an
 * object of total bytes (UINT64_MAX while opening: then an answer that
 * ends at the object's end is short but fine), of the version seen at
 * open (etag and last_modified: "" or NULL when it had none). */
struct stfs_http_want {
	uint64_t off, len, total;
	const char *etag, *last_modified;
};

/* Take one header line (with or without its CRLF) into r.  A status line
 * ("HTTP/...") starts a new response.  Never fails: what does not parse
 * is left out. */
void stfs_http_header_line(const char *line, size_t len,
			   struct stfs_http_resp *r);
/* Do the headers r of a 206 promise exactly what w wants?  0; -EIO for
 * other bytes, a body coded or an ambiguous answer; -ESTALE for another
 * version (another size, a validator changed or gone).  why says which. */
int stfs_http_answer_check(const struct stfs_http_resp *r,
			   const struct stfs_http_want *w, char *why,
			   size_t whysz);
/* Is the answer of the version that had etag and last_modified (each ""
 * or NULL if it had none)?  Every validator seen then must come again,
 * unchanged: 0, or -ESTALE with why. */
int stfs_http_same_version(const struct stfs_http_resp *r, const char *etag,
			   const char *last_modified, char *why, size_t whysz);
/* A strong ETag: any but a weak one (W/"..."), which does not promise the
 * same bytes. */
int stfs_http_strong_etag(const char *etag);
/* The header that makes a range request conditional on the version with
 * etag and last_modified: If-Match for a strong, quoted ETag, else
 * If-Unmodified-Since for a Last-Modified; into out (without CRLF):
 * 1, or 0 when there is neither (out is "") or it does not fit. */
int stfs_http_condition(const char *etag, const char *last_modified,
			char *out, size_t outsz);

/* Is arg an http:// or https:// URL (the scheme in any case)? */
int stfs_is_url(const char *arg);

/* The scheme of a SOURCE argument or endpoint, in any case (scheme.c). */
enum stfs_scheme {
	STFS_SCHEME_NONE,       /* not a URL stfs reads: a local path */
	STFS_SCHEME_HTTP,
	STFS_SCHEME_HTTPS,
	STFS_SCHEME_HF,
	STFS_SCHEME_S3,
};
enum stfs_scheme stfs_url_scheme(const char *arg);
/* Write url's scheme (if it is one of the above) in lower case. */
void stfs_url_lower_scheme(char *url);
/* Is rev a revision of a Hugging Face repo stfs accepts (gitref.c): a
 * git ref name (git check-ref-format's rules, and no '%') or a commit?
 * 1 or 0; *why says which rule it breaks. */
int stfs_hub_rev_ok(const char *rev, const char **why);

/* ---- the remote layer of one model (remote.h) ---------------------------- */

/* The remote object every remote source of a model belongs to, made from
 * opts (NULL: the defaults without a cache): 0, or -errno with err. */
int stfs_remote_new(const struct stfs_remote_opts *opts,
		    struct stfs_remote **out, struct stfs_error *err);
/* Free r, after every source of it was closed. */
void stfs_remote_free(struct stfs_remote *r);
/* Stop its idle transfer threads (before a fork; they start again when
 * needed). */
void stfs_remote_park(struct stfs_remote *r);
/* -o offline: no network, the cache only. */
int stfs_remote_offline(const struct stfs_remote *r);
enum stfs_s3_style stfs_remote_s3_style(const struct stfs_remote *r);

/* A byte source for the object at url, of r: fetches its first block,
 * which gives its size and version (ETag, Last-Modified): 0, or -errno
 * with err saying why (HTTP status, connection error, a server that
 * ignores ranges). */
int stfs_source_open_http(struct stfs_remote *r, const char *url,
			  struct stfs_auth *auth, struct stfs_source **out,
			  struct stfs_error *err);
/* GET url whole (an API call or a listing, 200 expected) with auth (or
 * NULL), with the same timeouts and retries as reads: 0 with *body (NUL
 * terminated, malloc'd; at most max bytes, else -EFBIG), *len and *resp;
 * or -errno with err saying why (the server's own reason if it gave one). */
int stfs_http_get(struct stfs_remote *r, const char *url,
		  const struct stfs_auth *auth, size_t max, char **body,
		  size_t *len, struct stfs_http_resp *resp,
		  struct stfs_error *err);

/* ---- the Hub's JSON answers (hub.c) -------------------------------------- */

/* The commit ("sha": 40 lowercase hex digits) of a revision API answer:
 * 0, or -EINVAL. */
int stfs_hub_parse_sha(const char *json, size_t len, char sha[41]);
/* A tree API page: file() for each file's path, the Hub's ETag (its LFS
 * sha256, else its blob id; NULL if neither is usable) and size; a
 * non-zero return stops and is returned.  0, or -EINVAL. */
int stfs_hub_parse_tree(const char *json, size_t len,
			int (*file)(void *arg, const char *path,
				    const char *etag, uint64_t size),
			void *arg);

/* ---- S3's XML (s3xml.c, with expat) ------------------------------------ */

/* An S3 error document's "Code: Message" into out (cut to fit, control
 * characters made spaces): 0, or -EINVAL when xml is not one.  Only the
 * start of the document may be at hand: a Code complete before the cut
 * is enough. */
int stfs_s3_error_parse(const char *xml, size_t len, char *out,
			size_t outsz);
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
/* A setting of the profile (region, endpoint_url, ...): a copy, or NULL. */
char *stfs_aws_conf_get(const struct stfs_aws_conf *a, const char *key);
/* Its keys (the environment's first): 0 with copies (all NULL: none), or
 * -errno with err saying why (a key id without its secret). */
int stfs_aws_conf_keys(const struct stfs_aws_conf *a, char **access,
		       char **secret, char **token, struct stfs_error *err);
void stfs_aws_conf_free(struct stfs_aws_conf *a);

/* ---- the pages of a listing (pages.c) ------------------------------------ */

/* A listing stops after this many pages (the Hub's are 1,000 files long,
 * S3's 1,000 keys), or at the first page seen before. */
#define STFS_PAGES_MAX 10000

struct stfs_pages {
	uint8_t (*seen)[32];    /* SHA-256 of each page's URL or token */
	size_t n, cap;
};

/* Remember the page named by key (its URL, its continuation token): 0,
 * -ELOOP if it was seen before, -EFBIG past STFS_PAGES_MAX, -ENOMEM. */
int stfs_pages_add(struct stfs_pages *p, const char *key);
void stfs_pages_free(struct stfs_pages *p);

/* ---- signing (sigv4.c, with libcrypto's SHA-256 and HMAC) --------------- */

#define STFS_SIGV4_MAX_HEADERS 8

struct stfs_sigv4_hdr {
	const char *name;       /* lowercase */
	const char *value;      /* trimmed */
};

/* One request to sign.  path and query are in their canonical form
 * already (each byte but A-Za-z0-9-._~ percent-encoded, the query's
 * parameters sorted); host and x-amz-date are signed with headers. */
struct stfs_sigv4_req {
	const char *method, *host, *path, *query;
	const struct stfs_sigv4_hdr *headers;
	size_t nheaders;
	const char *payload_hash;       /* hex SHA-256 of the body */
	const char *amzdate;            /* YYYYMMDDTHHMMSSZ */
	const char *access_key, *secret_key, *region, *service;
};

/* The Authorization header's value for r into auth: 0, or -EINVAL when
 * it does not fit (or too many headers), -ENOMEM. */
int stfs_sigv4_sign(const struct stfs_sigv4_req *r, char *auth,
		    size_t authsz);

/* What a remote source's requests carry, shared by the sources of one
 * location (reference counted): a bearer token (the Hugging Face Hub) or
 * a user and password (from an http(s) URL), both sent by libcurl to the
 * URL's own host only, never on to the host of a redirect; or AWS keys,
 * with which every request is signed (and redirects are not followed). */
struct stfs_auth {
	atomic_uint refs;
	char *bearer;
	char *user, *password;          /* HTTP basic authentication */
	char *query;                    /* added to every request's URL (a
					 * presigned URL's signature) */
	int sign;                       /* access_key and secret_key set */
	char *access_key, *secret_key, *token, *region;
	char *ca_file;                  /* CA certificates for its hosts, or
					 * NULL: those of the environment */
};

struct stfs_auth *stfs_auth_new(const char *bearer, const char *access_key,
				const char *secret_key, const char *token,
				const char *region);
struct stfs_auth *stfs_auth_ref(struct stfs_auth *a);
void stfs_auth_unref(struct stfs_auth *a);
struct curl_slist;
/* Append to list the headers that sign a GET of url now (x-amz-date,
 * x-amz-content-sha256, x-amz-security-token, Authorization); *ok is 0
 * if that failed.  Returns the list. */
struct curl_slist *stfs_auth_headers(const struct stfs_auth *a,
				     const char *url, struct curl_slist *list,
				     int *ok);

/* ---- the locator ------------------------------------------------------ */

enum stfs_loc_kind {
	STFS_LOC_FILE,      /* one safetensors file: name */
	STFS_LOC_INDEX,     /* an index file: name, shards beside it */
	STFS_LOC_DIR,       /* shards with no index: names */
};

/*
 * Where a model's bytes are: its kind, and the names of its files, which
 * stfs_location_open() turns into sources.  Names are plain file names
 * relative to the location (no '/').
 */
struct stfs_location {
	enum stfs_loc_kind kind;
	char *arg;          /* SOURCE as given (a URL less its user,
			     * password and query) */
	char *canonical;    /* its absolute form (the mount's device) */
	char *base;         /* the directory names are relative to */
	char *name;         /* FILE and INDEX: that file's name */
	char **names;       /* DIR: the *.safetensors files, sorted */
	size_t nnames;
	int http;           /* SOURCE is an http(s) URL; base is a URL */
	int remote;         /* hf:// or s3://: base is a URL prefix */
	struct stfs_auth *auth;     /* what requests to base carry */
	char *local_base;   /* hf: the snapshot in the Hugging Face cache */
	int offline;        /* hf: HF_HUB_OFFLINE or -o offline: files not
			     * in local_base are errors, never fetched */
	char *repo, *revision;      /* hf: the repo and its resolved commit */
	char **etag_names, **etags; /* the service's ETag of each file */
	size_t netags;
	struct stfs_remote *net;    /* the remote layer its sources use */
};

/* Find what SOURCE names, its remote sources (and requests) of net
 * (NULL: no hf:// or s3://, and no http(s) source opened); errors say
 * what is wrong with it. */
int stfs_locate(const char *arg, struct stfs_remote *net,
		struct stfs_location **out, struct stfs_error *err);
void stfs_location_free(struct stfs_location *loc);
/* From the file names of a directory-like place (all[n]), pick what to
 * mount: its one index, or its *.safetensors files (kind, name, names).
 * where names the place in the error when there is neither. */
int stfs_location_pick(struct stfs_location *loc, char **all, size_t n,
		       const char *where, struct stfs_error *err);
/* The same, but one *.safetensors file is a file, not a set of shards
 * (a repo or a prefix with its model.safetensors). */
int stfs_location_pick_one(struct stfs_location *loc, char **all, size_t n,
			   const char *where, struct stfs_error *err);
/* The locators of hf:// (hub.c) and s3:// (s3.c): loc->arg is set. */
int stfs_locate_hf(struct stfs_location *loc, struct stfs_error *err);
int stfs_locate_s3(struct stfs_location *loc, struct stfs_error *err);
/* Open the file called name at loc. */
int stfs_location_open(const struct stfs_location *loc, const char *name,
		       struct stfs_source **out, struct stfs_error *err);

#endif

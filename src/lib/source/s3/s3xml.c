/*
 * s3xml.c: the XML documents stfs reads from S3 and STS, parsed with
 * expat: a ListObjectsV2 page (each object's key, size and ETag, whether
 * more pages follow and the token for the next), an error (its Code and
 * Message: S3's <Error>, or STS's <ErrorResponse><Error>), and STS's
 * AssumeRoleWithWebIdentity answer (its Credentials: AccessKeyId,
 * SecretAccessKey, SessionToken, Expiration).
 *
 * Servers are untrusted.  expat checks that the text is well-formed XML
 * and decodes references (refusing NUL, surrogates and undefined names);
 * this file walks its events with bounded state: a fixed nesting depth,
 * a fixed length for each text it keeps, a fixed number of objects a page
 * may hold.  A document type declaration is refused where it starts, so
 * no entity is ever declared: the only references are the five predefined
 * ones and character references, each one character, and no "billion
 * laughs" or external entity can follow.  A document is parsed in one
 * call (it is in memory), so expat never re-scans a long token.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <expat.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3.h"

#define DEPTH_MAX 16            /* S3's listing is 4 deep */
#define OBJECTS_MAX 1000        /* ListObjectsV2 gives at most 1000 keys */
#define KEY_MAX 1024            /* S3's limit on a key, in bytes */
#define ETAG_MAX 256
#define TOKEN_MAX 4096
#define SIZE_DIGITS 19          /* fits in 64 bits */
#define CODE_MAX 256            /* an error's code and message are cut */
#define MESSAGE_MAX 1024
#define ERROR_DOC_MAX (1u << 20)

enum field { F_NONE, F_KEY, F_SIZE, F_ETAG, F_TRUNC, F_TOKEN, F_CODE,
	     F_MESSAGE, F_AKID, F_SECRET, F_SESSION, F_EXPIRY, F_N };

#define STS_ROOT "AssumeRoleWithWebIdentityResponse"
#define STS_RESULT "AssumeRoleWithWebIdentityResult"
#define STS_FIELDS ((1u << F_AKID) | (1u << F_SECRET) | (1u << F_SESSION) | \
		    (1u << F_EXPIRY))

struct doc {
	XML_Parser p;
	const char *root;       /* the root element wanted */
	int list;               /* a listing, else an error document */
	int sts;                /* an AssumeRoleWithWebIdentity answer */
	int nest;               /* an error inside <ErrorResponse> */
	int in_result, in_creds;
	int depth;
	int rc;                 /* the first error, or 0 */
	unsigned seen;          /* bits 1 << field: taken (in this object
				 * for F_KEY, F_SIZE and F_ETAG) */
	enum field field;       /* whose text is being collected */
	size_t max;             /* its limit */
	int cut;                /* over the limit: cut the text, else fail */
	int full;               /* the text was cut: keep no more */
	size_t len;
	char text[STFS_TOKEN_MAX + 1];

	/* a listing page */
	int (*object)(void *arg, const char *key, uint64_t size,
		      const char *etag);
	void *arg;
	int in_contents;
	size_t objects;
	char key[KEY_MAX + 1], etag[ETAG_MAX + 1];
	uint64_t size;
	int truncated;
	char *token;

	/* an error document */
	char code[CODE_MAX + 1], message[MESSAGE_MAX + 1];

	/* STS's keys */
	char akid[STFS_KEY_ID_MAX + 1], secret[STFS_SECRET_MAX + 1];
	char session[STFS_TOKEN_MAX + 1], expiry[48];
};

static void fail(struct doc *d, int rc)
{
	if (!d->rc)
		d->rc = rc;
	XML_StopParser(d->p, XML_FALSE);
}

static void on_doctype(void *ud, const XML_Char *name, const XML_Char *sysid,
		       const XML_Char *pubid, int has_internal_subset)
{
	fail(ud, -EINVAL);      /* no DTD, so no entity is ever declared */
}

static void on_entity(void *ud, const XML_Char *name, int is_param,
		      const XML_Char *value, int value_len,
		      const XML_Char *base, const XML_Char *sysid,
		      const XML_Char *pubid, const XML_Char *notation)
{
	fail(ud, -EINVAL);      /* not reached past on_doctype; twice safe */
}

static void collect(struct doc *d, enum field f, size_t max, int cut)
{
	if (d->seen & (1u << f)) {      /* one of each */
		fail(d, -EINVAL);
		return;
	}
	d->field = f;
	d->max = max;
	d->cut = cut;
	d->full = 0;
	d->len = 0;
}

/* Which element's text a start tag at this depth begins, if any. */
static void start_list(struct doc *d, const XML_Char *name)
{
	if (d->depth == 2 && !strcmp(name, "Contents")) {
		if (++d->objects > OBJECTS_MAX) {
			fail(d, -EINVAL);
			return;
		}
		d->in_contents = 1;
		d->seen &= ~((1u << F_KEY) | (1u << F_SIZE) | (1u << F_ETAG));
	} else if (d->depth == 2 && !strcmp(name, "IsTruncated")) {
		collect(d, F_TRUNC, 5, 0);
	} else if (d->depth == 2 && !strcmp(name, "NextContinuationToken")) {
		collect(d, F_TOKEN, TOKEN_MAX, 0);
	} else if (d->depth == 3 && d->in_contents) {
		if (!strcmp(name, "Key"))
			collect(d, F_KEY, KEY_MAX, 0);
		else if (!strcmp(name, "Size"))
			collect(d, F_SIZE, SIZE_DIGITS, 0);
		else if (!strcmp(name, "ETag"))
			collect(d, F_ETAG, ETAG_MAX, 0);
	}
}

/* The keys of an AssumeRoleWithWebIdentityResponse: in its Result's
 * Credentials, each once. */
static void start_sts(struct doc *d, const XML_Char *name)
{
	if (d->depth == 2 && !strcmp(name, STS_RESULT)) {
		if (d->in_result++)
			fail(d, -EINVAL);
	} else if (d->depth == 3 && d->in_result == 1 &&
		   !strcmp(name, "Credentials")) {
		if (d->in_creds++)
			fail(d, -EINVAL);
	} else if (d->depth == 4 && d->in_creds == 1 && d->in_result == 1) {
		if (!strcmp(name, "AccessKeyId"))
			collect(d, F_AKID, STFS_KEY_ID_MAX, 0);
		else if (!strcmp(name, "SecretAccessKey"))
			collect(d, F_SECRET, STFS_SECRET_MAX, 0);
		else if (!strcmp(name, "SessionToken"))
			collect(d, F_SESSION, STFS_TOKEN_MAX, 0);
		else if (!strcmp(name, "Expiration"))
			collect(d, F_EXPIRY, 40, 0);
	}
}

static void on_start(void *ud, const XML_Char *name, const XML_Char **atts)
{
	struct doc *d = ud;

	if (d->rc)
		return;
	d->depth++;
	/* STS wraps its error in <ErrorResponse><Error> */
	if (d->depth == 1 && !d->list && !d->sts &&
	    !strcmp(name, "ErrorResponse")) {
		d->nest = 1;
		return;
	}
	if (d->nest && d->depth == 2 && strcmp(name, "Error") &&
	    d->field == F_NONE)
		return;
	/* too deep, a root of another name, or markup inside a text kept */
	if (d->depth > DEPTH_MAX ||
	    (d->depth == 1 + d->nest && strcmp(name, d->root)) ||
	    d->field != F_NONE) {
		fail(d, -EINVAL);
		return;
	}
	if (d->list)
		start_list(d, name);
	else if (d->sts)
		start_sts(d, name);
	else if (d->depth == 2 + d->nest && !strcmp(name, "Code"))
		collect(d, F_CODE, CODE_MAX, 1);
	else if (d->depth == 2 + d->nest && !strcmp(name, "Message"))
		collect(d, F_MESSAGE, MESSAGE_MAX, 1);
}

static void on_text(void *ud, const XML_Char *s, int n)
{
	struct doc *d = ud;
	size_t len = (size_t)n, room;

	if (d->rc || d->field == F_NONE || d->full)
		return;
	room = d->max - d->len;
	if (len > room) {
		if (!d->cut) {
			fail(d, -EINVAL);
			return;
		}
		/* expat hands whole characters: cut before one, not in it */
		while (room && ((unsigned char)s[room] & 0xc0) == 0x80)
			room--;
		len = room;
		d->full = 1;
	}
	memcpy(d->text + d->len, s, len);
	d->len += len;
}

static int digits(const char *s, size_t n, uint64_t *v)
{
	*v = 0;
	if (!n || n > SIZE_DIGITS)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		*v = *v * 10 + (uint64_t)(s[i] - '0');
	}
	return 0;
}

static int has_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 1;
	return 0;
}

/* The text of field f is complete (NUL-terminated in d->text): take it. */
static int take(struct doc *d, enum field f)
{
	const char *t = d->text;

	switch (f) {
	case F_KEY:
		if (!d->len)
			return -EINVAL;
		memcpy(d->key, t, d->len + 1);
		return 0;
	case F_SIZE:
		return digits(t, d->len, &d->size) ? -EINVAL : 0;
	case F_ETAG:
		/* it may go back in a header: one line of text */
		if (has_control(t))
			return -EINVAL;
		memcpy(d->etag, t, d->len + 1);
		return 0;
	case F_TRUNC:
		if (strcmp(t, "true") && strcmp(t, "false"))
			return -EINVAL;
		d->truncated = !strcmp(t, "true");
		return 0;
	case F_TOKEN:
		return (d->token = strdup(t)) ? 0 : -ENOMEM;
	case F_CODE:
		memcpy(d->code, t, d->len + 1);
		return 0;
	case F_MESSAGE:
		memcpy(d->message, t, d->len + 1);
		return 0;
	case F_AKID:
		memcpy(d->akid, t, d->len + 1);
		return 0;
	case F_SECRET:
		memcpy(d->secret, t, d->len + 1);
		return 0;
	case F_SESSION:
		memcpy(d->session, t, d->len + 1);
		return 0;
	case F_EXPIRY:
		memcpy(d->expiry, t, d->len + 1);
		return 0;
	default:
		return 0;
	}
}

static void on_end(void *ud, const XML_Char *name)
{
	struct doc *d = ud;
	int rc;

	if (d->rc)
		return;
	if (d->field != F_NONE) {       /* no markup inside: its own end */
		d->text[d->len] = '\0';
		if ((rc = take(d, d->field))) {
			fail(d, rc);
			return;
		}
		d->seen |= 1u << d->field;
		d->field = F_NONE;
	} else if (d->sts && d->depth == 3 && d->in_creds == 1 &&
		   d->in_result == 1 && !strcmp(name, "Credentials")) {
		d->in_creds = 2;        /* closed: one Credentials only */
	} else if (d->list && d->depth == 2 && d->in_contents) {
		d->in_contents = 0;
		if (!(d->seen & (1u << F_KEY)) || !(d->seen & (1u << F_SIZE))) {
			fail(d, -EINVAL);
			return;
		}
		rc = d->object(d->arg, d->key, d->size,
			       d->seen & (1u << F_ETAG) ? d->etag : NULL);
		if (rc) {
			fail(d, rc);
			return;
		}
	}
	d->depth--;
}

/* Parse len bytes whole: 0, or the first error (-EINVAL for text that is
 * not well-formed or not the document wanted, -ENOMEM, or what a callback
 * returned). */
static int parse(struct doc *d, const char *xml, size_t len)
{
	/* UTF-8 whatever the declaration says: S3 speaks nothing else */
	if (!(d->p = XML_ParserCreate("UTF-8")))
		return -ENOMEM;
	XML_SetUserData(d->p, d);
	XML_SetElementHandler(d->p, on_start, on_end);
	XML_SetCharacterDataHandler(d->p, on_text);
	XML_SetStartDoctypeDeclHandler(d->p, on_doctype);
	XML_SetEntityDeclHandler(d->p, on_entity);
	if (XML_Parse(d->p, xml, (int)len, XML_TRUE) != XML_STATUS_OK &&
	    !d->rc)
		d->rc = XML_GetErrorCode(d->p) == XML_ERROR_NO_MEMORY ?
			-ENOMEM : -EINVAL;
	XML_ParserFree(d->p);
	d->p = NULL;
	return d->rc;
}

int stfs_s3_error_parse(const char *xml, size_t len, char *out,
			size_t outsz)
{
	struct doc *d;
	int rc = -EINVAL;

	if (!outsz)
		return -EINVAL;
	out[0] = '\0';
	if (!(d = calloc(1, sizeof(*d))))
		return -ENOMEM;
	d->root = "Error";
	/* only the start of a long error may be at hand, cut anywhere: what
	 * was complete before the cut counts, so the parse's error does not */
	(void)parse(d, xml, len < ERROR_DOC_MAX ? len : ERROR_DOC_MAX);
	if ((d->seen & (1u << F_CODE)) && d->code[0]) {
		size_t n = (size_t)snprintf(d->text, sizeof(d->text),
					    "%s%s%s", d->code,
					    d->message[0] ? ": " : "",
					    d->message);

		if (n >= outsz) {       /* cut it between characters */
			n = outsz - 1;
			while (n && ((unsigned char)d->text[n] & 0xc0) == 0x80)
				n--;
		}
		memcpy(out, d->text, n);
		out[n] = '\0';
		/* no room for even one character: nothing to tell */
		if (!n) {
			free(d);
			return -ENOSPC;
		}
		/* a line of text: no control characters from the server */
		for (char *p = out; *p; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				*p = ' ';
		rc = 0;
	}
	free(d);
	return rc;
}

int stfs_s3_list_parse(const char *xml, size_t len,
		       int (*object)(void *arg, const char *key,
				     uint64_t size, const char *etag),
		       void *arg, int *truncated, char **next_token)
{
	struct doc *d;
	int rc;

	*truncated = 0;
	*next_token = NULL;
	if (len > INT_MAX)
		return -EINVAL;
	if (!(d = calloc(1, sizeof(*d))))
		return -ENOMEM;
	d->root = "ListBucketResult";
	d->list = 1;
	d->object = object;
	d->arg = arg;
	rc = parse(d, xml, len);
	/* IsTruncated is required, and more pages need a token */
	if (!rc && (!(d->seen & (1u << F_TRUNC)) ||
		    (d->truncated && (!d->token || !d->token[0]))))
		rc = -EINVAL;
	if (!rc) {
		*truncated = d->truncated;
		*next_token = d->truncated ? d->token : NULL;
		if (d->truncated)
			d->token = NULL;
	}
	free(d->token);
	free(d);
	return rc;
}

int stfs_sts_parse(const char *xml, size_t len, struct stfs_creds_keys *k)
{
	struct doc *d;
	const char *why;
	int rc;

	memset(k, 0, sizeof(*k));
	if (len > INT_MAX)
		return -EINVAL;
	if (!(d = calloc(1, sizeof(*d))))
		return -ENOMEM;
	d->root = STS_ROOT;
	d->sts = 1;
	rc = parse(d, xml, len);
	if (!rc && (d->seen & STS_FIELDS) != STS_FIELDS)
		rc = -EINVAL;
	if (!rc && (stfs_creds_keys_check(d->akid, d->secret, d->session,
					  &why) ||
		    stfs_creds_time(d->expiry, &k->expires)))
		rc = -EINVAL;
	if (!rc && (!(k->access = strdup(d->akid)) ||
		    !(k->secret = strdup(d->secret)) ||
		    !(k->token = strdup(d->session)))) {
		stfs_creds_keys_drop(k);
		rc = -ENOMEM;
	}
	if (rc)
		k->expires = 0;
	explicit_bzero(d, sizeof(*d));
	free(d);
	return rc;
}

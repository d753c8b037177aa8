/*
 * creds.c: AWS credentials as clusters hand them out, and kept fresh: the
 * providers that come after the keys stfs reads itself (s3.c asks them in
 * botocore's order), each set up from the environment or the profile:
 *
 *   web identity   a profile's role_arn with web_identity_token_file, or
 *                  AWS_ROLE_ARN with AWS_WEB_IDENTITY_TOKEN_FILE (each
 *                  variable before the profile's value, as botocore has
 *                  it): STS AssumeRoleWithWebIdentity (sts.c)
 *   process        a profile's credential_process (credproc.c)
 *   container      AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI,
 *                  with AWS_CONTAINER_AUTHORIZATION_TOKEN(_FILE) (container.c)
 *   IMDS           the instance's role through IMDSv2 (imds.c), unless
 *                  AWS_EC2_METADATA_DISABLED=true
 *
 * The first keys are fetched while the source is located, so a provider
 * that fails stops the mount with its reason.  Keys that expire are
 * refreshed ahead, on a thread of this object, as botocore does: from
 * the advisory margin before their expiry (15 minutes, or a quarter of
 * their lifetime when that is shorter), retried with backoff (1 s
 * doubling, at most 30 s or a twentieth of the lifetime, at least 1 s)
 * and each failure logged, and the token file, the authorization token
 * file and the command run again each time.  A request is signed with the
 * keys of the moment (stfs_creds_now()): the old ones until new ones
 * came, so a read in flight at the switch goes on; once they expired
 * with no new ones, a request fails at once with a message saying when
 * and why (a thread refreshing at that moment is waited for first, at
 * most as long as one refresh takes).  Every field is under mu; the
 * fetch itself runs unlocked.  The thread is stopped before the daemon
 * forks (stfs_creds_park()) and started again by the next request, in
 * whichever process makes it.  Never a secret in a message or the log:
 * the provider and the access key id name what is used.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "s3.h"

#define ADVISORY_S (15 * 60)
#define BACKOFF_MAX_S 30

struct stfs_creds {
	struct stfs_creds_src src;
	struct stfs_remote *r;          /* its log (it outlives this) */
	struct stfs_remote_opts ho;     /* the credential calls' client */
	struct stfs_remote_counters count;
	struct stfs_http_client http;
	pthread_mutex_t mu;             /* everything below */
	pthread_cond_t cv;              /* the thread's sleep; a refresh */
	struct stfs_creds_keys k;
	time_t got;                     /* when k came */
	unsigned gen;                   /* refreshes that worked */
	int fetching;                   /* the thread asks now */
	unsigned failures;              /* in a row */
	time_t next_try;                /* after a failure */
	char last_error[sizeof(((struct stfs_error *)0)->msg)];
	pthread_t thread;
	pid_t pid;                      /* the process it runs in */
	int running, stopping;
	unsigned parking;               /* parks waiting for the thread */
	/* atomic (read unlocked by a fetch under way): a park's word that
	 * a credential_process still running is killed */
	int cancel;
};

static const char *kind_name(enum stfs_creds_kind k)
{
	switch (k) {
	case STFS_CREDS_WEB_IDENTITY: return "web identity";
	case STFS_CREDS_PROCESS: return "credential_process";
	case STFS_CREDS_CONTAINER: return "the container endpoint";
	default: return "the instance metadata service (IMDSv2)";
	}
}

int stfs_creds_open_file(const char *path)
{
	/* O_NONBLOCK: a FIFO with no writer opens at once, to be refused */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	struct stat st;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

const char *stfs_creds_open_why(int rc)
{
	return rc == -EINVAL ? "not a regular file" : strerror(-rc);
}

static void src_free(struct stfs_creds_src *s)
{
	if (s->auth_token)
		explicit_bzero(s->auth_token, strlen(s->auth_token));
	free(s->from);
	free(s->role_arn);
	free(s->token_file);
	free(s->session_name);
	free(s->sts_url);
	free(s->command);
	free(s->url);
	free(s->auth_token);
	free(s->auth_file);
	free(s->imds);
	memset(s, 0, sizeof(*s));
}

static int fetch(struct stfs_creds *c, struct stfs_creds_keys *k,
		 struct stfs_error *err)
{
	switch (c->src.kind) {
	case STFS_CREDS_WEB_IDENTITY:
		return stfs_sts_fetch(&c->http, &c->src, k, err);
	case STFS_CREDS_PROCESS:
		return stfs_process_fetch(&c->src, &c->cancel, k, err);
	case STFS_CREDS_CONTAINER:
		return stfs_container_fetch(&c->http, &c->src, k, err);
	default:
		return stfs_imds_fetch(&c->http, &c->src, k, err);
	}
}

static void utc(time_t t, char *out, size_t n)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Seconds before the expiry that a refresh starts (under mu). */
static time_t margin(const struct stfs_creds *c)
{
	time_t life = c->k.expires - c->got;

	if (life < 4)
		return 1;
	return life / 4 < ADVISORY_S ? life / 4 : ADVISORY_S;
}

static unsigned backoff_s(const struct stfs_creds *c)
{
	time_t life = c->k.expires - c->got;
	unsigned cap = life / 20 < BACKOFF_MAX_S ? (unsigned)(life / 20) :
		       BACKOFF_MAX_S, b;

	if (cap < 1)
		cap = 1;
	b = 1u << (c->failures > 6 ? 6 : c->failures - 1);
	return b < cap ? b : cap;
}

static void logf_(struct stfs_creds *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void logf_(struct stfs_creds *c, const char *fmt, ...)
{
	char line[700];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (c->r)
		stfs_remote_log(c->r, line);
}

/* The refresher: sleeps until the margin before the expiry (or the next
 * try after a failure), fetches unlocked, swaps the keys in. */
static void *refresher(void *arg)
{
	struct stfs_creds *c = arg;

	pthread_mutex_lock(&c->mu);
	/* until parked, or another refresher was started since (a request
	 * while a park waited for this one) */
	while (!c->stopping && pthread_equal(pthread_self(), c->thread)) {
		time_t now = time(NULL), due;
		struct stfs_creds_keys k;
		struct stfs_error err;
		char when[32];
		int rc;

		due = c->failures ? c->next_try : c->k.expires - margin(c);
		if (now < due) {
			struct timespec ts = { due, 0 };

			pthread_cond_timedwait(&c->cv, &c->mu, &ts);
			continue;
		}
		c->fetching = 1;
		pthread_mutex_unlock(&c->mu);
		rc = fetch(c, &k, &err);
		pthread_mutex_lock(&c->mu);
		c->fetching = 0;
		if (!rc && k.expires && k.expires <= time(NULL)) {
			stfs_creds_keys_drop(&k);
			rc = stfs_fail(&err, -EIO, NULL, STFS_NO_OFFSET, "the "
				       "keys it gave had expired already");
		}
		if (!rc) {
			stfs_creds_keys_drop(&c->k);
			c->k = k;
			c->got = time(NULL);
			c->gen++;
			c->failures = 0;
			c->last_error[0] = '\0';
			utc(k.expires, when, sizeof(when));
			logf_(c, "stfs: s3: credentials from %s (%s) refreshed: "
			      "key %s, until %s", kind_name(c->src.kind),
			      c->src.from, k.access, k.expires ? when : "-");
		} else {
			c->failures++;
			c->next_try = time(NULL) + backoff_s(c);
			snprintf(c->last_error, sizeof(c->last_error), "%s",
				 err.msg);
			utc(c->k.expires, when, sizeof(when));
			logf_(c, "stfs: s3: refreshing the credentials from %s "
			      "(%s) failed (%u in a row): %s; again in %u s "
			      "(the keys held expire at %s)",
			      kind_name(c->src.kind), c->src.from, c->failures,
			      err.msg, backoff_s(c), when);
		}
		pthread_cond_broadcast(&c->cv);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/* Start the refresher in this process if it does not run (under mu). */
static void ensure_thread(struct stfs_creds *c)
{
	if (!c->k.expires)
		return;                 /* keys that never expire */
	if (c->running && c->pid == getpid())
		return;
	/* not while a park waits for the thread: a new one would take back
	 * the park's cancel from the credential_process still running */
	if (c->parking)
		return;
	c->stopping = 0;
	__atomic_store_n(&c->cancel, 0, __ATOMIC_RELEASE);
	c->pid = getpid();
	c->running = !pthread_create(&c->thread, NULL, refresher, c);
}

int stfs_creds_now(struct stfs_creds *c, struct stfs_creds_keys *k,
		   char *why, size_t whysz)
{
	int rc = 0;

	memset(k, 0, sizeof(*k));
	pthread_mutex_lock(&c->mu);
	ensure_thread(c);
	/* expired while a refresh is under way: it is waited for */
	while (c->k.expires && c->k.expires <= time(NULL) && c->fetching &&
	       c->running)
		pthread_cond_wait(&c->cv, &c->mu);
	if (c->k.expires && c->k.expires <= time(NULL)) {
		char when[32];

		utc(c->k.expires, when, sizeof(when));
		snprintf(why, whysz, "the AWS credentials from %s (%s) "
			 "expired at %s and could not be refreshed%s%s",
			 kind_name(c->src.kind), c->src.from, when,
			 c->last_error[0] ? ": " : "", c->last_error);
		if (c->running)
			pthread_cond_broadcast(&c->cv);
		rc = -EKEYEXPIRED;
	} else if (!(k->access = strdup(c->k.access)) ||
		   !(k->secret = strdup(c->k.secret)) ||
		   (c->k.token && !(k->token = strdup(c->k.token)))) {
		stfs_creds_keys_drop(k);
		snprintf(why, whysz, "out of memory");
		rc = -ENOMEM;
	} else {
		k->expires = c->k.expires;
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

void stfs_creds_park(struct stfs_creds *c)
{
	pthread_t th;
	int join;

	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	join = c->running && c->pid == getpid();
	c->stopping = 1;
	c->running = 0;
	th = c->thread;
	/* a refresh running a credential_process ends now, not in 30 s */
	if (join)
		__atomic_store_n(&c->cancel, 1, __ATOMIC_RELEASE);
	c->parking += join;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
	if (join) {
		pthread_join(th, NULL);
		pthread_mutex_lock(&c->mu);
		c->parking--;
		pthread_mutex_unlock(&c->mu);
	}
	stfs_transfers_stop(&c->http.transfers, 1);
}

void stfs_creds_free(struct stfs_creds *c)
{
	if (!c)
		return;
	stfs_creds_park(c);
	stfs_httpc_fini(&c->http);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
	stfs_creds_keys_drop(&c->k);
	src_free(&c->src);
	free(c);
}

void stfs_creds_describe(struct stfs_creds *c, char *buf, size_t n)
{
	char when[32];

	pthread_mutex_lock(&c->mu);
	utc(c->k.expires, when, sizeof(when));
	snprintf(buf, n, "credentials from %s (%s): key %s%s%s",
		 kind_name(c->src.kind), c->src.from, c->k.access,
		 c->k.expires ? ", until " : "", c->k.expires ? when : "");
	pthread_mutex_unlock(&c->mu);
}

void stfs_creds_unsay(struct stfs_error *err, const char *secret)
{
	static const char mark[] = "(the token sent)";
	size_t n = secret ? strlen(secret) : 0, o = 0, len;
	char out[sizeof(err->msg)];
	const char *p = err->msg;

	if (n < 4)
		return;
	while (*p && o + sizeof(mark) < sizeof(out)) {
		if (!strncmp(p, secret, n)) {
			memcpy(out + o, mark, sizeof(mark) - 1);
			o += sizeof(mark) - 1;
			p += n;
		} else {
			out[o++] = *p++;
		}
	}
	out[o] = '\0';
	/* a message cut in the middle of a copy: its start dropped too */
	len = o;
	for (size_t k = n - 1 < len ? n - 1 : len; k >= 4; k--)
		if (!memcmp(out + len - k, secret, k)) {
			out[len - k] = '\0';
			break;
		}
	memcpy(err->msg, out, sizeof(out));
}

/* ---- the chain's providers, set up -------------------------------------- */

static int dup_or(char **out, const char *v)
{
	*out = v ? strdup(v) : NULL;
	return v && !*out ? -ENOMEM : 0;
}

/* A setting of web identity: its variable, else the profile's key. */
static char *web_setting(const struct stfs_aws_conf *a, const char *var,
			 const char *key, int *from_env)
{
	if (stfs_env(var)) {
		*from_env = 1;
		return strdup(stfs_env(var));
	}
	return stfs_aws_conf_get(a, key);
}

static int setup_web(const struct stfs_aws_conf *a, const char *region,
		     struct stfs_creds_src *s, struct stfs_error *err)
{
	int env = 0;
	char *file = web_setting(a, "AWS_WEB_IDENTITY_TOKEN_FILE",
				 "web_identity_token_file", &env);

	if (!file)
		return 0;
	s->token_file = file;
	s->role_arn = web_setting(a, "AWS_ROLE_ARN", "role_arn", &env);
	if (!s->role_arn)
		return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET, "a web "
				 "identity token file is set (%s) but no role: "
				 "set AWS_ROLE_ARN or the profile's role_arn",
				 stfs_env("AWS_WEB_IDENTITY_TOKEN_FILE") ?
				 "AWS_WEB_IDENTITY_TOKEN_FILE" :
				 "web_identity_token_file");
	s->session_name = web_setting(a, "AWS_ROLE_SESSION_NAME",
				      "role_session_name", &env);
	if (!s->session_name &&
	    asprintf(&s->session_name, "stfs-session-%lld",
		     (long long)time(NULL)) < 0)
		s->session_name = NULL;
	if (!s->session_name || !(s->sts_url = stfs_sts_url(a, region)))
		return stfs_nomem(err);
	stfs_url_lower_scheme(s->sts_url);
	while (strlen(s->sts_url) > 8 &&
	       s->sts_url[strlen(s->sts_url) - 1] == '/')
		s->sts_url[strlen(s->sts_url) - 1] = '\0';
	if (!stfs_is_url(s->sts_url) || strpbrk(s->sts_url, "?#"))
		return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET, "the STS "
				 "endpoint is not an http(s) URL: %s",
				 s->sts_url);
	if (stfs_env("AWS_ROLE_ARN") || stfs_env("AWS_WEB_IDENTITY_TOKEN_FILE"))
		s->from = strdup("AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE");
	else if (asprintf(&s->from, "profile %s", a->profile) < 0)
		s->from = NULL;
	s->kind = STFS_CREDS_WEB_IDENTITY;
	return s->from ? 1 : stfs_nomem(err);
}

static int setup_process(const struct stfs_aws_conf *a,
			 struct stfs_creds_src *s, struct stfs_error *err)
{
	if (!(s->command = stfs_aws_conf_get(a, "credential_process")))
		return 0;
	if (asprintf(&s->from, "profile %s", a->profile) < 0)
		return stfs_nomem(err);
	s->kind = STFS_CREDS_PROCESS;
	return 1;
}

static int setup_container(struct stfs_creds_src *s, struct stfs_error *err)
{
	const char *rel = stfs_env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
	const char *full = stfs_env("AWS_CONTAINER_CREDENTIALS_FULL_URI");

	if (!rel && !full)
		return 0;
	if (rel ? asprintf(&s->url, "http://169.254.170.2%s", rel) < 0 :
	    !(s->url = strdup(full)))
		return stfs_nomem(err);
	if (dup_or(&s->auth_file,
		   stfs_env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")) ||
	    dup_or(&s->auth_token,
		   stfs_env("AWS_CONTAINER_AUTHORIZATION_TOKEN")) ||
	    !(s->from = strdup(rel ? "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI" :
			       "AWS_CONTAINER_CREDENTIALS_FULL_URI")))
		return stfs_nomem(err);
	if (!stfs_container_url_ok(s->url))
		return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET, "%s is "
				 "not an https URL, nor http to a loopback "
				 "address or 169.254.170.2, 169.254.170.23, "
				 "[fd00:ec2::23] or localhost", s->from);
	s->kind = STFS_CREDS_CONTAINER;
	return 1;
}

static int setup_imds(const struct stfs_aws_conf *a, struct stfs_creds_src *s,
		      struct stfs_error *err)
{
	const char *off = stfs_env("AWS_EC2_METADATA_DISABLED");
	const char *ep = stfs_env("AWS_EC2_METADATA_SERVICE_ENDPOINT");
	const char *mode = stfs_env("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE");
	char *conf_ep = NULL, *conf_mode = NULL;

	if (off && !strcasecmp(off, "true"))
		return 0;
	if (!ep)
		ep = conf_ep = stfs_aws_conf_get(a,
						 "ec2_metadata_service_endpoint");
	if (!mode)
		mode = conf_mode = stfs_aws_conf_get(a,
					"ec2_metadata_service_endpoint_mode");
	s->imds = strdup(ep ? ep : mode && !strcasecmp(mode, "ipv6") ?
			 "http://[fd00:ec2::254]" : "http://169.254.169.254");
	free(conf_ep);
	free(conf_mode);
	if (!s->imds || !(s->from = strdup(s->imds)))
		return stfs_nomem(err);
	stfs_url_lower_scheme(s->imds);
	while (strlen(s->imds) > 8 && s->imds[strlen(s->imds) - 1] == '/')
		s->imds[strlen(s->imds) - 1] = '\0';
	if (!stfs_is_url(s->imds) || strchr(s->imds, '?'))
		return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET, "the "
				 "instance metadata endpoint is not an "
				 "http(s) URL: %s", s->imds);
	s->kind = STFS_CREDS_IMDS;
	return 1;
}

int stfs_creds_try(const struct stfs_aws_conf *a, const char *region,
		   enum stfs_creds_kind kind, struct stfs_remote *r,
		   struct stfs_creds **out, struct stfs_error *err)
{
	struct stfs_creds *c = calloc(1, sizeof(*c));
	struct stfs_error e2;
	char line[600];
	int rc;

	*out = NULL;
	if (!c)
		return stfs_nomem(err);
	switch (kind) {
	case STFS_CREDS_WEB_IDENTITY:
		rc = setup_web(a, region, &c->src, err);
		break;
	case STFS_CREDS_PROCESS:
		rc = setup_process(a, &c->src, err);
		break;
	case STFS_CREDS_CONTAINER:
		rc = setup_container(&c->src, err);
		break;
	default:
		rc = setup_imds(a, &c->src, err);
		break;
	}
	if (rc <= 0) {
		src_free(&c->src);
		free(c);
		return rc;
	}
	c->r = r;
	/* short timeouts: these services are near, or not there at all */
	c->ho.connect_timeout_ms = 2000;
	c->ho.stall_timeout_ms = 5000;
	/* a trickle is a stall: their answers are a few KiB, and at the
	 * 1 byte/s of the default 64 KiB would take a day */
	c->ho.min_speed = 4096;
	c->ho.retries = 2;
	c->ho.connections = 1;
	c->ho.metrics = r->o.metrics;   /* counted as credentials */
	c->ho.credentials = 1;
	if (stfs_httpc_init(&c->http, &c->ho, &c->count)) {
		src_free(&c->src);
		free(c);
		return stfs_nomem(err);
	}
	c->http.error_text = stfs_s3_error_parse;
	/* STS is an AWS service: a private CA as the SDKs take it for one */
	if (kind == STFS_CREDS_WEB_IDENTITY) {
		char *ca = stfs_env("AWS_CA_BUNDLE") ?
			   strdup(stfs_env("AWS_CA_BUNDLE")) :
			   stfs_aws_conf_get(a, "ca_bundle");

		if (ca) {
			free(c->http.ca_file);
			c->http.ca_file = ca;
		}
	}
	pthread_mutex_init(&c->mu, NULL);
	{
		pthread_condattr_t ca;

		/* the thread's sleeps are until a wall-clock time (expiry) */
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_REALTIME);
		pthread_cond_init(&c->cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	if ((rc = fetch(c, &c->k, kind == STFS_CREDS_IMDS ? &e2 : err))) {
		if (kind == STFS_CREDS_IMDS) {
			/* no instance role: unsigned requests, as before */
			snprintf(line, sizeof(line), "stfs: s3: no credentials "
				 "from the instance metadata service (%s): %s",
				 c->src.imds, e2.msg);
			if (r)
				stfs_remote_log(r, line);
			rc = 0;
		}
		stfs_creds_free(c);
		return rc;
	}
	c->got = time(NULL);
	if (c->k.expires && c->k.expires <= c->got) {
		stfs_creds_free(c);
		return stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "the "
				 "credentials from %s had expired already",
				 kind_name(kind));
	}
	stfs_creds_describe(c, line + 10, sizeof(line) - 10);
	memcpy(line, "stfs: s3: ", 10);
	if (r)
		stfs_remote_log(r, line);
	*out = c;
	return 0;
}

/* static, and handed out by a function: an exported object would carry
 * a writable ODR indicator under ASan (test_globals.py) */
static const struct stfs_creds_ops creds_ops = {
	.now = stfs_creds_now,
	.park = stfs_creds_park,
	.free = stfs_creds_free,
};

const struct stfs_creds_ops *stfs_creds_ops(void)
{
	return &creds_ops;
}

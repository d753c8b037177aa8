/*
 * credproc.c: a profile's credential_process, run as botocore runs it:
 * the line split into words as a POSIX shell would split them (quotes and
 * backslashes, no expansion, no shell), the first word looked up in PATH,
 * stdin /dev/null, the environment inherited.  What it prints is bounded
 * (64 KiB of stdout, 4 KiB of stderr kept) and so is its time (30 s, then
 * it is killed, with the process group it leads, or at once when its
 * caller cancels: an unmount never waits for it).  It is judged by its
 * exit, not by its pipes: once it has exited, what is still in the pipes
 * is read for a grace of 250 ms at most, then the process group it led is
 * killed.  A status other than 0 is an error quoting the start of its
 * stderr.  Its stdout is one JSON object read strictly by credjson.c:
 * Version 1 (a number), AccessKeyId, SecretAccessKey, and optionally
 * SessionToken and Expiration (without one the keys never expire).  The
 * command line is never quoted in a message (it may hold a secret): only
 * its first word.  The process itself is run by spawn.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "format.h"
#include "s3.h"

#define LINE_MAX_ (16u << 10)
#define WORDS_MAX 256

void stfs_words_free(char **w)
{
	if (!w)
		return;
	for (char **p = w; *p; p++) {
		explicit_bzero(*p, strlen(*p));
		free(*p);
	}
	free(w);
}

char **stfs_words(const char *line, const char **why)
{
	size_t n = strlen(line), nw = 0;
	char **w = calloc(WORDS_MAX + 1, sizeof(*w)), *cur = NULL;
	size_t cl = 0;
	int in_word = 0;

	*why = NULL;
	if (n > LINE_MAX_) {
		*why = "the command line is over 16 KiB";
		free(w);
		return NULL;
	}
	if (!w || !(cur = malloc(n + 1)))
		goto nomem;
	for (const char *p = line;; p++) {
		char c = *p;

		if (!c || c == ' ' || c == '\t' || c == '\n') {
			if (in_word) {
				if (nw == WORDS_MAX) {
					*why = "over 256 words";
					goto bad;
				}
				cur[cl] = '\0';
				if (!(w[nw++] = strdup(cur)))
					goto nomem;
				cl = 0;
				in_word = 0;
			}
			if (!c)
				break;
			continue;
		}
		in_word = 1;
		if (c == '\\') {
			if (!p[1]) {
				*why = "a backslash at the end";
				goto bad;
			}
			cur[cl++] = *++p;
		} else if (c == '\'') {
			const char *e = strchr(p + 1, '\'');

			if (!e) {
				*why = "an unbalanced single quote";
				goto bad;
			}
			memcpy(cur + cl, p + 1, (size_t)(e - p - 1));
			cl += (size_t)(e - p - 1);
			p = e;
		} else if (c == '"') {
			for (p++; *p && *p != '"'; p++) {
				/* inside, a backslash escapes " and \ only */
				if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
					p++;
				cur[cl++] = *p;
			}
			if (!*p) {
				*why = "an unbalanced double quote";
				goto bad;
			}
		} else {
			cur[cl++] = c;
		}
	}
	if (!nw) {
		*why = "the command line is empty";
		goto bad;
	}
	explicit_bzero(cur, n + 1);
	free(cur);
	return w;
nomem:
	*why = "out of memory";
bad:
	if (cur)
		explicit_bzero(cur, n + 1);
	free(cur);
	stfs_words_free(w);
	return NULL;
}

int stfs_process_fetch(const struct stfs_creds_src *src, const int *cancel,
		       struct stfs_creds_keys *k, struct stfs_error *err)
{
	char *out = malloc(STFS_CHILD_OUT_MAX + 1);
	char errs[STFS_CHILD_ERR_KEEP + 1], q[300];
	const char *why;
	struct stfs_credjson j;
	char **argv;
	size_t len;
	int rc, status = 0;

	memset(k, 0, sizeof(*k));
	if (!out)
		return stfs_nomem(err);
	if (!(argv = stfs_words(src->command, &why))) {
		free(out);
		return stfs_fail(err, -EINVAL, NULL, STFS_NO_OFFSET, "the "
				 "profile's credential_process: %s", why);
	}
	rc = stfs_child_run(argv, cancel, out, &len, errs, &status, err);
	if (!rc && (!WIFEXITED(status) || WEXITSTATUS(status))) {
		size_t n = strcspn(errs, "\n");

		rc = stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "the "
			       "credential_process %s %s %d%s%s", argv[0],
			       WIFEXITED(status) ? "exited with status" :
			       "was killed by signal", WIFEXITED(status) ?
			       WEXITSTATUS(status) : WTERMSIG(status),
			       n ? ": " : "", n ? stfs_quote(errs, n < 200 ?
			       n : 200, q, sizeof(q)) : "");
	} else if (!rc) {
		out[len] = '\0';
		if ((rc = stfs_credjson_parse(out, len, &j, &why)) == 0) {
			const char *v = NULL;

			for (size_t i = 0; i < j.n; i++)
				if (!strcmp(j.kv[i].name, "Version") &&
				    j.kv[i].type == '0')
					v = j.kv[i].value;
			if (!v || strcmp(v, "1")) {
				why = "Version is not the number 1";
				rc = -EINVAL;
			} else {
				rc = stfs_credjson_keys(&j, "SessionToken", 0,
							k, &why);
			}
			stfs_credjson_free(&j);
		}
		if (rc)
			rc = rc == -ENOMEM ? stfs_nomem(err) :
			     stfs_fail(err, -EIO, NULL, STFS_NO_OFFSET, "what "
				       "the credential_process %s printed: %s",
				       argv[0], why);
	}
	explicit_bzero(out, STFS_CHILD_OUT_MAX + 1);
	free(out);
	stfs_words_free(argv);
	return rc;
}

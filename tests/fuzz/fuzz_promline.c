/*
 * fuzz_promline.c: libFuzzer harness for a line of the Prometheus text
 * format as `stfs stats` reads it (src/cli/promline.c: from a mount's
 * user.stfs.metrics xattr, which any FUSE filesystem may answer with any
 * bytes).  The input, cut at its first NUL and at its first newline, is
 * one line.  Whatever it is, the read ends with 0, 1 or -EINVAL; on 0 the
 * name is of the format's characters, there are at most STFS_PROM_LABELS
 * labels, each name a word and each value printable ASCII without a quote
 * or backslash, all within the line, and the value is a number (so that
 * `stfs stats --json` prints only plain words and numbers).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "promline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int within(const char *p, const char *line, size_t len)
{
	return p >= line && p + strlen(p) <= line + len;
}

static void check_word(const char *w, const char *ok)
{
	if (!*w || strspn(w, ok) != strlen(w) || (*w >= '0' && *w <= '9'))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char name_ok[] = "abcdefghijklmnopqrstuvwxyz"
		"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:";
	struct stfs_prom_series s;
	char *line = strndup((const char *)data, size);
	size_t len;
	int rc;

	if (!line)
		return 0;
	line[strcspn(line, "\n")] = '\0';
	len = strlen(line);
	rc = stfs_prom_line(line, &s);
	if (rc != 0 && rc != 1 && rc != -EINVAL)
		abort();
	if (rc == 0) {
		check_word(s.name, name_ok);
		if (!within(s.name, line, len) || !within(s.value, line, len) ||
		    s.nlabels > STFS_PROM_LABELS || !*s.value ||
		    strspn(s.value, "0123456789.eE+-InfaN") != strlen(s.value))
			abort();
		for (unsigned i = 0; i < s.nlabels; i++) {
			check_word(s.label[i], name_ok + 0);
			if (strchr(s.label[i], ':') ||
			    !within(s.label[i], line, len) ||
			    !within(s.value_of[i], line, len))
				abort();
			for (const char *p = s.value_of[i]; *p; p++)
				if (*p < 0x20 || *p > 0x7e || *p == '"' ||
				    *p == '\\')
					abort();
		}
	}
	free(line);
	return 0;
}

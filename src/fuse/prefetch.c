/*
 * prefetch.c: the mount's side of `stfs prefetch` and -o prefetch=: a
 * warm of the cache (libstfs's stfs_warm) asked for by an ioctl on the
 * mount's root (STFS_IOC_PREFETCH, mount.h: a read-only mount takes no
 * setxattr), and its state read from the root's user.stfs.prefetch.*
 * xattrs (by the CLI, and by readiness probes without it).
 *
 * The ioctl's value is lines: "+GLOB" includes, "-GLOB" excludes, "#N"
 * the asker's number for it; no GLOB: the whole mount (read by
 * pfspec.c).  Only the mount's owner (the daemon's user) and root may
 * send it (EPERM for anyone else, whom -o allow_other lets read); it
 * fails with EBUSY while another warm runs, and with the warm's own
 * error otherwise (the state then says why: failed, and the error).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs.h"
#include "mount.h"
#include "pfspec.h"

#define PF_PREFIX "user.stfs.prefetch"

static const char *state_name(enum stfs_warm_state s)
{
	switch (s) {
	case STFS_WARM_WARMING: return "warming";
	case STFS_WARM_DONE: return "done";
	case STFS_WARM_FAILED: return "failed";
	default: return "idle";
	}
}

/* The state of the mount's warm (under warm_mu). */
static void status_of(struct stfs_fs *fs, struct stfs_warm_status *st)
{
	if (fs->warm)
		stfs_warm_status(fs->warm, st);
	else
		*st = fs->warm_last;
}

/* s as a JSON string, into out (size n). */
static void json_str(char *out, size_t n, const char *s)
{
	size_t k = 0;

	for (; *s && k + 8 < n; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			k += (size_t)snprintf(out + k, n - k, "\\%c", c);
		else if (c < 0x20)
			k += (size_t)snprintf(out + k, n - k, "\\u%04x", c);
		else
			out[k++] = (char)c;
	}
	out[k] = 0;
}

int stfs_prefetch_value(struct stfs_fs *fs, const char *name, char *out,
			size_t n)
{
	struct stfs_warm_status st;
	char err[1100];
	int len;

	if (strncmp(name, PF_PREFIX ".", sizeof(PF_PREFIX)) != 0)
		return -ENODATA;
	name += sizeof(PF_PREFIX);
	pthread_mutex_lock(&fs->warm_mu);
	status_of(fs, &st);
	pthread_mutex_unlock(&fs->warm_mu);
	if (strcmp(name, "state") == 0)
		len = snprintf(out, n, "%s", state_name(st.state));
	else if (strcmp(name, "bytes_asked") == 0)
		len = snprintf(out, n, "%" PRIu64, st.bytes_total);
	else if (strcmp(name, "bytes_cached") == 0)
		len = snprintf(out, n, "%" PRIu64, st.bytes_done);
	else if (strcmp(name, "files") == 0)
		len = snprintf(out, n, "%zu/%zu", st.files_done,
			       st.files_total);
	else if (strcmp(name, "error") == 0)
		len = snprintf(out, n, "%s", st.error);
	else if (strcmp(name, "json") == 0) {
		json_str(err, sizeof(err), st.error);
		len = snprintf(out, n, "{\"state\":\"%s\",\"id\":%u,"
			       "\"local\":%s,\"bytes_asked\":%" PRIu64 ","
			       "\"bytes_cached\":%" PRIu64 ",\"files_total\":"
			       "%zu,\"files_done\":%zu,\"failed_blocks\":%"
			       PRIu64 ",\"elapsed_ms\":%" PRIu64 ","
			       "\"error\":\"%s\"}", state_name(st.state),
			       st.id, st.local ? "true" : "false",
			       st.bytes_total, st.bytes_done, st.files_total,
			       st.files_done, st.failed_blocks, st.elapsed_ms,
			       err);
	} else
		return -ENODATA;
	return len < 0 || (size_t)len >= n ? -ERANGE : len;
}

/* Start a warm of spec (the xattr's value; NULL: all): 0, or -errno
 * (the state then says why, unless -EBUSY). */
int stfs_prefetch_start(struct stfs_fs *fs, const char *spec, size_t len)
{
	const char *inc[STFS_PF_MAX_GLOBS], *exc[STFS_PF_MAX_GLOBS];
	struct stfs_warm_sel sel;
	struct stfs_warm *w = NULL;
	struct stfs_error err;
	char *text = strndup(spec ? spec : "", spec ? len : 0);
	int rc;

	if (!text)
		return -ENOMEM;
	if ((rc = stfs_prefetch_parse(text, &sel, inc, exc))) {
		free(text);
		return rc;
	}
	pthread_mutex_lock(&fs->warm_mu);
	if (fs->warm && stfs_warm_busy(fs->warm)) {
		pthread_mutex_unlock(&fs->warm_mu);
		free(text);
		return -EBUSY;
	}
	if (fs->warm)
		stfs_warm_status(fs->warm, &fs->warm_last);
	stfs_warm_free(fs->warm);
	fs->warm = NULL;
	rc = stfs_warm_start(fs->model, &sel, &w, &err);
	if (rc) {
		fs->warm_last = (struct stfs_warm_status){
			.state = STFS_WARM_FAILED, .id = sel.id };
		snprintf(fs->warm_last.error, sizeof(fs->warm_last.error),
			 "%s", err.msg);
	}
	fs->warm = w;
	pthread_mutex_unlock(&fs->warm_mu);
	free(text);
	return rc;
}

void stfs_prefetch_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd,
			 void *arg, struct fuse_file_info *fi, unsigned flags,
			 const void *in, size_t in_size, size_t out_size)
{
	int rc;

	(void)arg;
	(void)fi;
	(void)out_size;
	if (cmd != STFS_IOC_PREFETCH || (flags & FUSE_IOCTL_COMPAT)) {
		fuse_reply_err(req, ENOTTY);
		return;
	}
	if (ino != FUSE_ROOT_ID || !in) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	/* a warm (and the state readiness probes read) is the mount
	 * owner's and root's; reads stay open to whom allow_other lets in */
	if (fuse_req_ctx(req)->uid != 0 && fuse_req_ctx(req)->uid != getuid()) {
		fuse_reply_err(req, EPERM);
		return;
	}
	rc = stfs_prefetch_start(stfs_fs_of(req), in,
				 strnlen(in, in_size));
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_ioctl(req, 0, NULL, 0);
}

void stfs_prefetch_stop(struct stfs_fs *fs)
{
	pthread_mutex_lock(&fs->warm_mu);
	stfs_warm_free(fs->warm);
	fs->warm = NULL;
	pthread_mutex_unlock(&fs->warm_mu);
}

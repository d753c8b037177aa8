/*
 * fs.h: the FUSE side of stfs: the low-level operations over a model
 * (fs.c) and their xattrs (xattr.c), the request loop (serve.c), the
 * daemon's life (daemon.c) and the channel to the kernel (io.c).
 * It sees libstfs only through its public header: it knows nothing of
 * JSON, of the format, or of where the bytes come from.
 */
#ifndef STFS_FS_H
#define STFS_FS_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <sys/types.h>

#include "stfs/stfs.h"
#include "stfs/metrics.h"

#define STFS_DEFAULT_THREADS 4
#define STFS_DEFAULT_READAHEAD 1024
/* KiB: the largest read request asked for unless -o max_request= */
#define STFS_DEFAULT_MAX_REQUEST 16384
/* the kernel's asynchronous requests in the daemon at once (its default:
 * 12; an unprivileged daemon gets at most fuse's max_user_bgreq) */
#define STFS_FS_MAX_BACKGROUND 1024

/* Per-mount state, reached through fuse_req_userdata(). */
struct stfs_fs {
	struct stfs_model *model;
	uid_t uid;
	gid_t gid;
	mode_t umask;
	double timeout;           /* attr and entry cache, seconds */
	unsigned readahead_kb;    /* what to ask of the kernel at INIT */
	unsigned max_read;        /* the max_read= option, or 0 */
	unsigned max_pages;       /* read request size to ask for at INIT */
	int initialized;          /* INIT has reached .init */
	int init_replied;         /* io.c has reshaped the INIT reply */
	uint64_t init_unique;     /* the INIT request, for io.c */
	char init_out[128];       /* io.c's copy of the INIT reply */
	struct timespec mtime;    /* the newest of the sources' */
	blksize_t blksize;        /* st_blksize: the block size, if remote */
	uint64_t total_bytes;     /* of all tensors, for statfs */
	/* open files (fs.c), freed at the end even without a release */
	struct stfs_fs_handle *handles;
	pthread_mutex_t handles_mu;
	/* root xattrs: shared __metadata__ under escaped names, sorted */
	struct stfs_fs_meta *meta;
	size_t nmeta;
	/* the warm of its cache (prefetch.c), and the last one's state */
	pthread_mutex_t warm_mu;
	struct stfs_warm *warm;
	struct stfs_warm_status warm_last;
	/* its counters (NULL: -o nometrics), and fsmetrics.c's state */
	struct stfs_metrics *metrics;
	struct stfs_fsmetrics *fm;
};

struct stfs_fs_meta {
	char *xname;              /* "user.safetensors.metadata.<key>" */
	const struct stfs_meta *m;
};

extern const struct fuse_lowlevel_ops stfs_ll_ops;

/* fs.c: the mount of a request; the node of ino into *ni: 1, or 0 after
 * replying ENOENT. */
struct stfs_fs *stfs_fs_of(fuse_req_t req);
int stfs_fs_node(fuse_req_t req, fuse_ino_t ino, struct stfs_node_info *ni);

/* xattr.c: getxattr and listxattr; the root's metadata xattrs made from
 * fs->model (0 or -ENOMEM) and freed. */
void stfs_xattr_get(fuse_req_t req, fuse_ino_t ino, const char *name,
		    size_t size);
void stfs_xattr_list(fuse_req_t req, fuse_ino_t ino, size_t size);
int stfs_xattr_init(struct stfs_fs *fs);
void stfs_xattr_destroy(struct stfs_fs *fs);

/* prefetch.c: the value of the root's xattr name (user.stfs.prefetch.*)
 * into out: its length, or -ENODATA (not one), -ERANGE. */
int stfs_prefetch_value(struct stfs_fs *fs, const char *name, char *out,
			size_t n);
/* The ioctl STFS_IOC_PREFETCH on the root: start a warm, and reply. */
void stfs_prefetch_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd,
			 void *arg, struct fuse_file_info *fi, unsigned flags,
			 const void *in, size_t in_size, size_t out_size);
/* Start a warm of spec (len bytes: lines +GLOB, -GLOB, #ID; NULL: all):
 * 0 or -errno (then the state says why). */
int stfs_prefetch_start(struct stfs_fs *fs, const char *spec, size_t len);
/* Stop the warm, before the model closes. */
void stfs_prefetch_stop(struct stfs_fs *fs);

/* fsmetrics.c: the counters' state for fs->metrics, and the file of -o
 * metrics=path (NULL: none) written once: 0, or -errno with why.  Then
 * its writer thread started (in the daemon) and stopped (before the model
 * closes); freed with fs->metrics (after: the file written a last time,
 * if the writer started). */
int stfs_fsmetrics_init(struct stfs_fs *fs, const char *path, char *why,
			size_t whysz);
/* Before: fs->metrics made (none with off: -o nometrics) and named in the
 * remote options ro: 0, or -1 after saying why (metrics= with
 * nometrics; no memory). */
int stfs_fsmetrics_new(struct stfs_fs *fs, struct stfs_remote_opts *ro,
		       const char *path, int off, const char *src);
int stfs_fsmetrics_start(struct stfs_fs *fs);
void stfs_fsmetrics_stop(struct stfs_fs *fs);
void stfs_fsmetrics_free(struct stfs_fs *fs);
/* Each request (its fuse_in_header, n bytes read) and each reply (its
 * fuse_out_header) on the channel, timed (io.c). */
void stfs_fsmetrics_request(struct stfs_fs *fs, const void *hdr, size_t n);
void stfs_fsmetrics_reply(struct stfs_fs *fs, const void *hdr, size_t n);
/* The root's STFS_METRICS_XATTR (mount.h): answered, 1; or 0 (another
 * name). */
int stfs_fsmetrics_xattr(fuse_req_t req, struct stfs_fs *fs,
			 const char *name, size_t size);
/* What a mount of a URL fetched, for the log at unmount. */
void stfs_fsmetrics_log_stats(const char *src,
			      const struct stfs_remote_stats *st);

/* Fill the derived fields of fs from fs->model: 0 or -ENOMEM. */
int stfs_fs_init(struct stfs_fs *fs);
void stfs_fs_destroy(struct stfs_fs *fs);

/* daemon.c */
/* Set the kernel readahead of the FUSE mount at mnt to kb KiB: 0, or -errno
 * (-EACCES when not root: only root may write a backing device's
 * read_ahead_kb).  *cur gets the value before, or 0 if unknown. */
int stfs_set_readahead(const char *mnt, unsigned kb, unsigned *cur);
/* Write v and a newline to the sysfs or procfs file path: 0 or -errno. */
int stfs_write_number(const char *path, unsigned v);
/* Go to the background unless foreground; log to syslog or log_file. */
int stfs_daemonize(int foreground, const char *log_file, const char *src);

/* io.c: the channel to the kernel: plain read/writev on the session's
 * fd, with the INIT reply asking for fs->max_pages pages per request.
 * Call after fuse_session_mount(): 0 or -errno. */
int stfs_io_install(struct fuse_session *se);
/* /proc/sys/fs/fuse/max_pages_limit: read it (0 or -errno), raise it
 * (root only: 0 or -errno). */
int stfs_max_pages_limit(unsigned *out);
int stfs_raise_max_pages_limit(unsigned pages);

/* serve.c: answer requests up to the kernel's INIT, until *initialized is
 * set (by .init): 0, or -errno if the session ended instead. */
int stfs_serve_init(struct fuse_session *se, const int *initialized);
/* serve.c: serve requests with up to threads threads until unmount or a
 * signal: 0, or -1 on error. */
int stfs_serve(struct fuse_session *se, unsigned threads);

#endif

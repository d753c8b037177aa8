/*
 * source.c: what every byte source shares: the public calls, which
 * dispatch to the kind's operations, the asynchronous read with its
 * synchronous fallback, and reading a small source whole.
 */
#include <errno.h>
#include <stdlib.h>

#include "format.h"
#include "source.h"
#include "sourceops.h"

void stfs_source_close(struct stfs_source *s)
{
	if (s)
		s->ops->close(s);
}

void stfs_source_info(const struct stfs_source *s,
		      struct stfs_source_info *out)
{
	*out = s->info;
}

const char *stfs_source_origin(const struct stfs_source *s,
			       enum stfs_origin_field f)
{
	return (unsigned)f < STFS_ORIGIN_COUNT ? s->origin[f] : NULL;
}

const char *stfs_source_name(const struct stfs_source *s)
{
	return s->name;
}

const void *stfs_source_map(const struct stfs_source *s)
{
	return s->map;
}

static int in_range(const struct stfs_source *s, size_t len, uint64_t off)
{
	return off <= s->info.size && len <= s->info.size - off;
}

int stfs_source_read(struct stfs_source *s, void *buf, size_t len,
		     uint64_t off)
{
	if (!in_range(s, len, off))
		return -EIO;
	if (len == 0)
		return 0;
	return s->ops->read(s, buf, len, off);
}

void stfs_source_read_async(struct stfs_source *s, void *buf, size_t len,
			    uint64_t off, const struct stfs_extent *ext,
			    stfs_source_done done, void *arg)
{
	if (!in_range(s, len, off) || len == 0 || !s->ops->read_async) {
		done(arg, in_range(s, len, off) ?
		     (len ? s->ops->read(s, buf, len, off) : 0) : -EIO);
		return;
	}
	s->ops->read_async(s, buf, len, off, ext, done, arg);
}

void stfs_source_follow(struct stfs_source *s, struct stfs_source *next)
{
	if (s->ops->follow)
		s->ops->follow(s, next);
}

void stfs_source_drop(struct stfs_source *s, uint64_t off, uint64_t len)
{
	if (s->ops->drop && in_range(s, 0, off) && len)
		s->ops->drop(s, off, len);
}

int stfs_source_warm_info(const struct stfs_source *s,
			  struct stfs_warm_info *wi)
{
	return s->ops->warm_info ? s->ops->warm_info(s, wi) : -EOPNOTSUPP;
}

void stfs_source_warm(struct stfs_source *s, uint64_t b,
		      stfs_source_done done, void *arg)
{
	if (s->ops->warm)
		s->ops->warm(s, b, done, arg);
	else
		done(arg, -EOPNOTSUPP);
}

void stfs_source_warm_flush(struct stfs_source *s)
{
	if (s->ops->warm_flush)
		s->ops->warm_flush(s);
}

void stfs_source_warm_cancel(struct stfs_source *s)
{
	if (s->ops->warm_cancel)
		s->ops->warm_cancel(s);
}

int stfs_source_slurp(struct stfs_source *s, uint64_t max, char **out,
		      size_t *len)
{
	uint64_t n = s->info.size;
	char *buf;
	int rc;

	*out = NULL;
	*len = 0;
	if (n > max)
		return -EFBIG;
	if (!(buf = malloc((size_t)n + 1)))
		return -ENOMEM;
	if ((rc = stfs_source_read(s, buf, (size_t)n, 0))) {
		free(buf);
		return rc;
	}
	buf[n] = '\0';
	*out = buf;
	*len = (size_t)n;
	return 0;
}

/*
 * blockfile.c: the format of a block file of the cache, and its checked
 * reads.  A block is kept as one file: a header of STFS_BLOCK_HDR bytes,
 * then the block's bytes (page aligned, so that they are read and kept
 * in the page cache as a local file's are).  The header says what the
 * block is and what its bytes hash to:
 *
 *   0   "stfsblk1"                        magic
 *   8   u64 key                           the object version's (cache.c)
 *   16  u64 block number                  (UINT64_MAX: the head)
 *   24  u64 length of the block's bytes
 *   32  u32 chunk shift                   a chunk is 1 << shift bytes
 *   36  u32 chunks                        n = ceil(length / chunk)
 *   40  u32 crc[n]                        CRC-32C of each chunk
 *   40 + 4n  u32 CRC-32C of bytes [0, 40 + 4n)
 *   (zeros to STFS_BLOCK_HDR; all numbers little-endian)
 *
 * The cache directory is hostile input (a disk that rots, a user or tool
 * that writes into it, a crash): a block is used only if its header is
 * whole, names this object version's key and this block's number and
 * length, and hashes right; and every read checks the chunks it covers
 * against their CRCs, so a byte flipped, a block truncated or a block
 * swapped with another of the same size is found on the read that would
 * have served it (-EBADMSG, with why), never served.  Chunks are 16 KiB
 * (larger for blocks of more than 16 MiB: at most STFS_BLOCK_CHUNKS of
 * them), so that a small read checks little more than it reads.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format.h"
#include "cache.h"

#define MAGIC "stfsblk1"
#define MIN_SHIFT 14

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* The chunk shift of a block of len bytes. */
static unsigned chunk_shift(size_t len)
{
	unsigned s = MIN_SHIFT;

	while (((len + ((size_t)1 << s) - 1) >> s) > STFS_BLOCK_CHUNKS)
		s++;
	return s;
}

void stfs_blockfile_header(uint64_t key, uint64_t block, const void *buf,
			   size_t len, unsigned char *hdr)
{
	unsigned shift = chunk_shift(len);
	size_t chunk = (size_t)1 << shift, n = (len + chunk - 1) >> shift;
	const char *p = buf;

	memset(hdr, 0, STFS_BLOCK_HDR);
	memcpy(hdr, MAGIC, 8);
	put64(hdr + 8, key);
	put64(hdr + 16, block);
	put64(hdr + 24, len);
	put32(hdr + 32, shift);
	put32(hdr + 36, (uint32_t)n);
	for (size_t i = 0; i < n; i++) {
		size_t at = i << shift, l = len - at < chunk ? len - at : chunk;
		uint32_t sum[3];

		/* three whole chunks at once where there are (the writer's
		 * CRCs were 8.6% of the daemon's CPU for a cold read, one at
		 * a time) */
		if (at + 3 * chunk <= len) {
			const void *q[3] = { p + at, p + at + chunk,
					     p + at + 2 * chunk };

			stfs_crc32c_3(q, chunk, sum);
			for (int k = 0; k < 3; k++)
				put32(hdr + 40 + 4 * (i + (size_t)k), sum[k]);
			i += 2;
			continue;
		}
		put32(hdr + 40 + 4 * i, stfs_crc32c(0, p + at, l));
	}
	put32(hdr + 40 + 4 * n, stfs_crc32c(0, hdr, 40 + 4 * n));
}

/* len bytes at off of fd, all: 0, or -1 (short, or an error). */
static int pread_all(int fd, void *buf, size_t len, off_t off)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = pread(fd, (char *)buf + got, len - got,
				  off + (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

int stfs_blockfile_open(int fd, uint64_t key, uint64_t block, size_t len,
			struct stfs_cache_blk *b, char *why, size_t whysz)
{
	unsigned char hdr[STFS_BLOCK_HDR];
	unsigned shift = chunk_shift(len);
	size_t n = (len + ((size_t)1 << shift) - 1) >> shift;
	const char *bad = NULL;

	memset(b, 0, sizeof(*b));
	b->fd = -1;
	if (pread_all(fd, hdr, sizeof(hdr), 0))
		bad = "its header is cut short";
	else if (memcmp(hdr, MAGIC, 8) != 0)
		bad = "it has no block header";
	else if (get64(hdr + 24) != len || get32(hdr + 32) != shift ||
		 get32(hdr + 36) != n)
		bad = "its header gives another length";
	else if (get32(hdr + 40 + 4 * n) != stfs_crc32c(0, hdr, 40 + 4 * n))
		bad = "its header fails its checksum";
	else if (get64(hdr + 8) != key)
		bad = "it is a block of another object";
	else if (get64(hdr + 16) != block)
		bad = "it is another block of its object";
	if (bad) {
		snprintf(why, whysz, "%s", bad);
		return -EBADMSG;
	}
	if (!(b->crc = malloc((n ? n : 1) * sizeof(*b->crc))))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		b->crc[i] = get32(hdr + 40 + 4 * i);
	b->fd = fd;
	b->block = block;
	b->len = len;
	b->shift = shift;
	b->n = (unsigned)n;
	return 0;
}

void stfs_blockfile_close(struct stfs_cache_blk *b)
{
	if (b->fd >= 0)
		close(b->fd);
	free(b->crc);
	b->crc = NULL;
	b->fd = -1;
}

/* Chunks [i, i + k) of b, whole, read into buf and checked: 0, or
 * -EBADMSG with why. */
static int read_chunks(const struct stfs_cache_blk *b, size_t i, size_t k,
		       char *buf, char *why, size_t whysz)
{
	size_t chunk = (size_t)1 << b->shift, at = i << b->shift;
	size_t end = (i + k) << b->shift, done = 0;

	if (end > b->len)
		end = b->len;
	if (pread_all(b->fd, buf, end - at, (off_t)(STFS_BLOCK_HDR + at))) {
		snprintf(why, whysz, "it is shorter than its header says");
		return -EBADMSG;
	}
	for (size_t j = i; j < i + k; j++) {
		size_t l = end - at - done < chunk ? end - at - done : chunk;
		uint32_t sum[3];

		/* three whole chunks at once where there are */
		if (j + 3 <= i + k && done + 3 * chunk <= end - at) {
			const void *p[3] = { buf + done, buf + done + chunk,
					     buf + done + 2 * chunk };

			stfs_crc32c_3(p, chunk, sum);
			if (sum[0] == b->crc[j] && sum[1] == b->crc[j + 1] &&
			    sum[2] == b->crc[j + 2]) {
				done += 3 * chunk;
				j += 2;
				continue;
			}
		}
		if (stfs_crc32c(0, buf + done, l) != b->crc[j]) {
			snprintf(why, whysz, "bytes %zu-%zu of it fail their "
				 "checksum", j << b->shift,
				 (j << b->shift) + l - 1);
			return -EBADMSG;
		}
		done += l;
	}
	return 0;
}

int stfs_blockfile_pread(const struct stfs_cache_blk *b, void *buf,
			 size_t len, size_t off, char *why, size_t whysz)
{
	size_t chunk = (size_t)1 << b->shift, first, last, i, run = 0;
	char *out = buf, *bounce = NULL;
	int rc = 0;

	if (off > b->len || len > b->len - off) {
		snprintf(why, whysz, "a read past its end");
		return -EBADMSG;
	}
	if (!len)
		return 0;
	first = off >> b->shift;
	last = (off + len - 1) >> b->shift;
	/* whole chunks straight into buf (a run at a time), the partial
	 * ones at either end through a chunk of our own */
	for (i = first; i <= last && !rc; i++) {
		size_t at = i << b->shift;
		size_t end = at + chunk < b->len ? at + chunk : b->len;

		if (at >= off && end <= off + len) {
			run++;
			continue;
		}
		if (run) {
			rc = read_chunks(b, i - run, run, out + ((i - run) <<
					 b->shift) - off, why, whysz);
			run = 0;
			if (rc)
				break;
		}
		if (!bounce && !(bounce = malloc(chunk)))
			return -ENOMEM;
		if ((rc = read_chunks(b, i, 1, bounce, why, whysz)))
			break;
		{
			size_t from = off > at ? off : at;
			size_t to = off + len < end ? off + len : end;

			memcpy(out + (from - off), bounce + (from - at),
			       to - from);
		}
	}
	if (!rc && run)
		rc = read_chunks(b, i - run, run, out + ((i - run) <<
				 b->shift) - off, why, whysz);
	free(bounce);
	/* the bytes go on to the mount's page cache: out of this one (from
	 * the 2 MiB folio boundary below, so that shared folios go too) */
	{
		size_t from = (STFS_BLOCK_HDR + off) & ~(size_t)0x1fffff;

		(void)posix_fadvise(b->fd, (off_t)from,
				    (off_t)(STFS_BLOCK_HDR + off + len - from),
				    POSIX_FADV_DONTNEED);
	}
	return rc;
}

/*
 * usage.c: the text of `stfs --help` (and of a usage error): every
 * command, SOURCE form and mount option in short; stfs(1) has the rest.
 */
#include <stdio.h>

#include "fs.h"
#include "mount.h"

/* The commands, and what SOURCE and MOUNTPOINT may be. */
static void usage_commands(FILE *out)
{
	fprintf(out,
"usage: stfs mount [-f] [-d] [-s] [-o OPT[,OPT...]] SOURCE MOUNTPOINT\n"
"       stfs SOURCE MOUNTPOINT [-o OPT[,OPT...]]   (mount helper form)\n"
"       stfs inspect [--json | --files | -q] [--flat] [--npy]\n"
"                    [--convert=f32]\n"
"                    [--include=GLOB] [--exclude=GLOB] [--offline]\n"
"                    [--unvalidated]\n"
"                    [--s3-style=path|virtual] SOURCE\n"
"       stfs prefetch [--include=GLOB] [--exclude=GLOB] [--background]\n"
"                     [-q | --json] [--status] MOUNTPOINT [PATH...]\n"
"       stfs stats [--json] MOUNTPOINT\n"
"       stfs mirror [--include=GLOB] [--exclude=GLOB] [--jobs=N]\n"
"                   [-o OPT[,OPT...]] [-q | --json] SOURCE s3://BUCKET/PREFIX\n"
"       stfs umount [-z] MOUNTPOINT\n"
"       stfs --help | --version\n"
"\n"
"SOURCE is a .safetensors file, a PyTorch checkpoint (pytorch_model.bin,\n"
"*.pt, *.ckpt: torch's zip or legacy format, read without running its\n"
"pickle), a GGUF file (v2, v3), a directory of shards, a\n"
"*.safetensors.index.json file, an http(s):// URL of one of these (a\n"
"directory URL ends in /), hf://ORG/NAME[@REVISION][/FOLDER] (the\n"
"Hugging Face Hub), or s3://BUCKET/KEY or s3://BUCKET/PREFIX/ (S3 and\n"
"S3-compatible stores); the format is found by the first bytes.  Each\n"
"tensor becomes a read-only file; dtype, shape and offsets are\n"
"user.safetensors.* extended attributes (user.pytorch.type and\n"
"user.gguf.type too for those formats), the header is the file %s at\n"
"the root, and every file of the source is under %%repo/.\n"
"MOUNTPOINT may be /dev/fd/N: an open /dev/fuse that a privileged process\n"
"has mounted (mount(2) with fd=N); stfs serves it unprivileged.\n"
"\n", STFS_HEADER_FILE);
}

/* The mount options of every source. */
static void usage_mount_options(FILE *out)
{
	fprintf(out,
"mount options:\n"
"  -f                 stay in the foreground\n"
"  -d, -o debug       FUSE debug output (implies -f)\n"
"  -s                 single-threaded (same as -o threads=1)\n"
"  -o flat            every tensor at the root under its full name\n"
"  -o include=GLOB    only tensors whose names match GLOB (repeatable)\n"
"  -o exclude=GLOB    no tensor whose name matches GLOB (repeatable)\n"
"  -o repo            the repository at the mount's root, the tensors\n"
"                     under %%tensors/ (else the repository is %%repo/)\n"
"  -o files=GLOB      only these files of the repository in %%repo/\n"
"                     (repeatable; GLOB matches the whole path)\n"
"  -o show_virtual    list the virtual %%model*.safetensors files too\n"
"  -o npy             add NAME.npy views that numpy.load() reads\n"
"  -o convert=f32     add NAME.f32 float32 views of BF16, F16 and F8 tensors\n"
"  -o uid=N,gid=N     owner of every file (default: the mounting user)\n"
"  -o umask=OOO       clear these bits from 0444 files / 0555 directories\n"
"  -o threads=N       up to N threads; more than one only while several\n"
"                     reads go on at once (default %d)\n"
"  -o readahead=KB    kernel readahead for the mount (default %d, or\n"
"                     max_request if that is larger)\n"
"  -o max_request=KB  largest read request to ask the kernel for (default:\n"
"                     up to %d, as far as fs.fuse.max_pages_limit allows;\n"
"                     given, root raises that limit)\n"
"  -o log=FILE        where a background daemon logs (default: syslog)\n"
"  -o metrics=PATH    write the daemon's counters to PATH (Prometheus text\n"
"                     format, every 10 s and at unmount, replaced\n"
"                     atomically: for node exporter's textfile collector;\n"
"                     stfs stats shows them); nometrics: count nothing\n", STFS_DEFAULT_THREADS,
		STFS_DEFAULT_READAHEAD, STFS_DEFAULT_MAX_REQUEST);
}

/* The mount options of URL sources, s3:// credentials, the exit status. */
static void usage_remote(FILE *out)
{
	fprintf(out,
"  -o prefetch=all|GLOB  for URL sources: warm the cache once the mount is\n"
"                     live, as stfs prefetch does (GLOB repeatable)\n"
"  -o mirror=s3://BUCKET/PREFIX  for URL sources: read the files from a\n"
"                     mirror `stfs mirror` wrote of this source and commit\n"
"                     (each block checked; the origin when it fails)\n"
"  -o mirror_profile=NAME  read the mirror with that AWS profile's keys\n"
"                     (not the environment's; else STFS_MIRROR_AWS_* keys)\n"
"  -o connect_timeout=S, stall_timeout=S, retries=N, connections=N\n"
"                     for URL sources: seconds to connect (default 10),\n"
"                     seconds slower than min_speed (30), retries (3),\n"
"                     parallel requests (default 0: from 8 up to 32 as\n"
"                     long as the throughput grows, halved on a retry;\n"
"                     N fixes it; a reader in order has 32M or a block\n"
"                     a connection fetched ahead)\n"
"  -o list_timeout=S  for hf:// and s3:// listings: seconds all their pages\n"
"                     may take (default 300)\n"
"  -o min_speed=SIZE  for URL sources: bytes per second a request must\n"
"                     average over stall_timeout (default 16K; 0: any)\n"
"  -o block_size=SIZE for URL sources: fetch and cache in blocks of SIZE,\n"
"                     a power of two from 64K to 64M (default 4M)\n"
"  -o cache=DIR, cache_size=SIZE, nocache, offline\n"
"                     for URL sources: the on-disk cache (default\n"
"                     $XDG_CACHE_HOME/stfs or ~/.cache/stfs, 10G), none,\n"
"                     or the cache only, no network\n"
"  -o unvalidated     for URL sources: read objects whose server sends\n"
"                     neither a strong ETag nor Last-Modified (uncached;\n"
"                     a change while mounted cannot be detected)\n"
"  -o public_net     for URL sources: connect to public addresses only:\n"
"                     a loopback, link-local (the cloud metadata service),\n"
"                     private or reserved one is refused when connected to\n"
"                     (a redirect's too), not retried; no proxy is used\n"
"  -o allow_net=CIDR  with public_net: allow this range too (an address\n"
"                     or ADDR/BITS; repeatable, at most 16)\n"
"  -o s3_style=path|virtual\n"
"                     s3:// addressing (default: virtual-hosted on AWS,\n"
"                     path-style with AWS_ENDPOINT_URL)\n"
"  -o allow_other, default_permissions, max_read=N, ... : as for any\n"
"                     FUSE filesystem (see mount.fuse3(8)); ro is implied\n"
"\n"
"s3:// credentials, in botocore's order: AWS_ACCESS_KEY_ID and\n"
"AWS_SECRET_ACCESS_KEY; web identity (AWS_ROLE_ARN with\n"
"AWS_WEB_IDENTITY_TOKEN_FILE, or the profile's role_arn and\n"
"web_identity_token_file: STS, AWS_ENDPOINT_URL_STS); the profile in\n"
"~/.aws/credentials; its credential_process; its keys in ~/.aws/config;\n"
"the container endpoint (AWS_CONTAINER_CREDENTIALS_FULL_URI or\n"
"_RELATIVE_URI, AWS_CONTAINER_AUTHORIZATION_TOKEN(_FILE)); the instance's\n"
"role by IMDSv2 (AWS_EC2_METADATA_SERVICE_ENDPOINT;\n"
"AWS_EC2_METADATA_DISABLED=true skips it).  Temporary ones are refreshed\n"
"before they expire; inspect and the log name the provider and key id.\n"
"\n"
"Exit status: 0 ok, 1 failed (stats: not an stfs mount, nometrics, not its\n"
"owner), 2 usage; a mount's source not opened: 3 not found, 4 credentials\n"
"refused, 5 origin not reached, 6 refused by public_net/allow_net; stfs(1).\n");
}

void stfs_usage(FILE *out)
{
	usage_commands(out);
	usage_mount_options(out);
	usage_remote(out);
}

/*
 * scrub.c: a URL's secrets out of the process's command line.  Any user
 * reads any process's /proc/PID/cmdline (ps), and the daemon a mount
 * forks keeps its parent's for the life of the mount, so a password in
 * https://USER:PASSWORD@HOST/... or a presigned URL's query would be on
 * show until unmount.  Before anything else, each argument that carries
 * one is overwritten in place, in the memory the kernel shows, with the
 * form stfs shows (stfs_source_shown(): no password, no query), the rest
 * of its bytes zeroed; the program goes on with private copies.
 */
#include <stdlib.h>
#include <string.h>

#include "stfs/stfs.h"
#include "cli.h"

char **stfs_scrub_argv(int argc, char **argv)
{
	char **copy = calloc((size_t)argc + 1, sizeof(*copy));

	if (!copy)
		return NULL;
	for (int i = 0; i < argc; i++) {
		char *shown = stfs_source_shown(argv[i]);
		size_t len = strlen(argv[i]);

		if (!shown || !(copy[i] = strdup(argv[i]))) {
			free(shown);
			stfs_free_argv(argc, copy);
			return NULL;
		}
		/* shown is never longer: it only leaves parts out */
		if (strcmp(shown, argv[i]) != 0 && strlen(shown) <= len) {
			memset(argv[i], 0, len);
			memcpy(argv[i], shown, strlen(shown));
		}
		free(shown);
	}
	return copy;
}

void stfs_free_argv(int argc, char **copy)
{
	if (!copy)
		return;
	for (int i = 0; i < argc; i++) {
		if (copy[i])
			memset(copy[i], 0, strlen(copy[i]));
		free(copy[i]);
	}
	free(copy);
}

/* pause.c: the pod sandbox's process of the cluster suite's pause image
 * (tests/csi/cluster/images.sh): holds the pod's namespaces, reaps the
 * children it inherits as the pod's init, exits 0 on SIGTERM or SIGINT. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stfs_pause_quit(int sig)
{
	(void)sig;
	_exit(0);
}

static void stfs_pause_reap(int sig)
{
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int main(void)
{
	struct sigaction q = { .sa_handler = stfs_pause_quit };
	struct sigaction r = { .sa_handler = stfs_pause_reap,
			       .sa_flags = SA_NOCLDSTOP | SA_RESTART };

	sigaction(SIGTERM, &q, NULL);
	sigaction(SIGINT, &q, NULL);
	sigaction(SIGCHLD, &r, NULL);
	for (;;)
		pause();
}

/*
 * sluiced.c: the dataplane daemon: one per host, owning its ports and its
 * engine core.  Stops cleanly on SIGINT/SIGTERM.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "dp_main.h"

static _Atomic bool stop;

static void on_signal(int sig)
{
	(void)sig;
	atomic_store(&stop, true);
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	char err[512];

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (dp_main(argc, argv, &stop, NULL, err, sizeof(err)) != 0) {
		fprintf(stderr, "sluiced: %s\n", err);
		return 1;
	}
	return 0;
}

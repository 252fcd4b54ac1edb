/*
 * trace_main.c: the sluice-trace program: packet-level tracing of a running
 * sluice dataplane.  Each subcommand lives in its own trace_*.c file.
 */
#include <string.h>

#include "trace_cli.h"

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *what;
} commands[] = {
	{ "capture", tr_cmd_capture, "attach to dataplanes and write their packets to pcapng" },
	{ "top", tr_cmd_top, "live per-flow and per-communicator rates, RTT, retransmissions, drops" },
	{ "analyze", tr_cmd_analyze, "read a capture: per collective, who made it slow" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: sluice-trace COMMAND [options]   (sluice-trace COMMAND --help for its options)\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].what);
}

int main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "sluice-trace: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}

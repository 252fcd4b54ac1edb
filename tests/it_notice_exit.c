/*
 * it_notice_exit.c: a rank of the abort-notice-outlives-its-sender
 * integration test (it_notice_exit.sh), 2 ranks, embedded.
 *
 * Rank 0 is stopped (SIGSTOP, by a child that resumes it argv[1] seconds
 * later, 1.8 by default) while it receives rank 1's small sends.  Rank 1, whose dataplane's window
 * is 4 packets and whose timeout is 1 s, fills that window, fails its next
 * send naming rank 0 as silent, destroys, finalizes and exits; its abort
 * notice waits behind the full window, so only a dataplane whose stop
 * waits for the notice's acknowledgement delivers it.  Rank 0, resumed
 * while rank 1's process is still in that wait, must fail with rank 1's
 * reason ("rank 1 reported"), not with its own timeout later.  Stopped
 * for longer than that wait (LINGER_ABORTS_NS, 2 s), rank 0 resumes after
 * rank 1 exited: only the last word that rank 1's stop hands its port
 * (wire.h SL_T_LAST) can bring the reason then.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sluice/sluice.h>

static int rank = -1;

#include "it_common.h"

/* A child stops this process now and resumes it stop_s later. */
static void stop_me_for_a_while(double stop_s)
{
	pid_t me = getpid(), child = fork();
	struct timespec t = { .tv_sec = (time_t)stop_s, .tv_nsec = (long)((stop_s - (int)stop_s) * 1e9) };

	if (child < 0) {
		perror("it_notice_exit: fork");
		exit(1);
	}
	if (child == 0) {
		kill(me, SIGSTOP);
		nanosleep(&t, NULL);
		kill(me, SIGCONT);
		_exit(0);
	}
}

int main(int argc, char **argv)
{
	sluice_ctx_t *ctx;
	sluice_comm_t *comm;
	sluice_req_t *req;
	int32_t *buf;
	sluice_result_t r = SLUICE_OK;
	unsigned calls = 0;
	const char *me = getenv("SLUICE_RANK");
	static char args[2048];
	/* rank 1 fails ~1.1 s into the stop and lingers 2 s at most */
	double stop_s = argc > 1 ? atof(argv[1]) : 1.8;

	/* rank 1's own settings, before its dataplane starts */
	if (me && strcmp(me, "1") == 0) {
		snprintf(args, sizeof(args), "%s --window 4", getenv("SLUICE_EMBEDDED_ARGS") ?: "");
		setenv("SLUICE_EMBEDDED_ARGS", args, 1);
		setenv("SLUICE_TIMEOUT", "1", 1);
	}
	CHECK(sluice_init(&ctx));
	CHECK(sluice_comm_init_env(ctx, &comm));
	CHECK(sluice_comm_rank(comm, &rank));
	CHECK(sluice_mem_alloc(ctx, 4096, (void **)&buf));
	buf[0] = rank;
	CHECK(sluice_barrier(comm, &req));
	CHECK(sluice_wait(req));
	do {
		if (rank == 0 && calls == 100)
			stop_me_for_a_while(stop_s);
		r = rank ? sluice_send(comm, buf, 1, SLUICE_INT32, 0, &req)
			 : sluice_recv(comm, buf, 1, SLUICE_INT32, 1, &req);
		r = r != SLUICE_OK ? r : sluice_wait(req);
		calls++;
	} while (r == SLUICE_OK);
	if (rank == 0 && !strstr(sluice_last_error(), "rank 1 reported")) {
		fprintf(stderr, "it_notice_exit: rank 0: after %u calls: %s (\"%s\"), want rank 1's abort notice\n",
			calls, sluice_get_error_string(r), sluice_last_error());
		return 1;
	}
	printf("it_notice_exit: rank %d ok: %u calls: %s\n", rank, calls, sluice_last_error());
	sluice_comm_destroy(comm); /* it fails (the communicator did) */
	sluice_finalize(ctx);
	wait(NULL);
	return 0;
}

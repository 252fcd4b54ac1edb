/*
 * it_linger_dead.c: a rank of the dead-peer-behind-lingering-calls
 * integration test (it_linger_dead.sh), 3 ranks.
 *
 * Rank 2 is killed (SIGKILL, its embedded dataplane with it) right after a
 * barrier.  Rank 1 then sends to ranks 0 and 2 in turn: a small send is
 * done at its post and lingers until its peer acknowledges it, so its
 * sends to rank 0 finish as rank 0 receives them and its sends to rank 2
 * pile up behind them, never to be acknowledged.  Every one of them must
 * end, rank 1's next call must fail with an error that names rank 2, and
 * by the timeout (SLUICE_TIMEOUT) after the first unacknowledged send, not
 * later; rank 0's receive must fail naming rank 2 too.  Each surviving rank
 * prints "it_linger_dead: rank R ok" and exits 0; a destroy that waited for
 * a lingering call forever would hang the test instead.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sluice/sluice.h>

#define SLACK_S 2.0 /* timer passes, the transport's scan and a loaded machine */

static int rank = -1;

#include "it_common.h"

static sluice_result_t send_to(sluice_comm_t *comm, const int32_t *buf, int peer)
{
	sluice_req_t *req;
	sluice_result_t r = sluice_send(comm, buf, 1, SLUICE_INT32, peer, &req);

	return r != SLUICE_OK ? r : sluice_wait(req);
}

/* A failure that names rank 2, within the timeout of since (0: any time). */
static void expect_rank_2_named(sluice_result_t r, double since, double timeout_s, unsigned calls)
{
	const char *msg = sluice_last_error();
	double took = now_s() - since;

	if (r == SLUICE_OK || !strstr(msg, "rank 2")) {
		fprintf(stderr, "it_linger_dead: rank %d: after %u calls: %s (\"%s\"), want a failure naming rank 2\n",
			rank, calls, sluice_get_error_string(r), msg);
		exit(1);
	}
	if (since && took > timeout_s + SLACK_S) {
		fprintf(stderr, "it_linger_dead: rank %d: the failure came %.2f s after the first unacknowledged "
			"send, the timeout is %.1f s: %s\n", rank, took, timeout_s, msg);
		exit(1);
	}
	printf("it_linger_dead: rank %d ok: %u calls, failed %.2f s in: %s\n", rank, calls, since ? took : 0.0, msg);
}

int main(void)
{
	sluice_ctx_t *ctx;
	sluice_comm_t *comm;
	sluice_req_t *req;
	int32_t *buf;
	int nranks;
	const char *t = getenv("SLUICE_TIMEOUT");
	double timeout_s = t ? atof(t) : 30;
	sluice_result_t r = SLUICE_OK;
	unsigned calls = 0;

	CHECK(sluice_init(&ctx));
	CHECK(sluice_comm_init_env(ctx, &comm));
	CHECK(sluice_comm_rank(comm, &rank));
	CHECK(sluice_comm_size(comm, &nranks));
	if (nranks != 3) {
		fprintf(stderr, "it_linger_dead: run with 3 ranks, not %d\n", nranks);
		return 1;
	}
	CHECK(sluice_mem_alloc(ctx, 4096, (void **)&buf));
	buf[0] = rank;
	CHECK(sluice_barrier(comm, &req));
	CHECK(sluice_wait(req));
	if (rank == 2) {
		/* its barrier may be done while its last packets are still on their
		 * way (a lingering send): killed at once, the others' barrier failed
		 * in 2 of 30 daemon runs */
		usleep(100 * 1000);
		raise(SIGKILL);
	}
	usleep(300 * 1000); /* rank 2 is gone */
	if (rank == 0) {
		/* rank 1's sends to this rank keep coming until it fails and says why */
		do {
			r = sluice_recv(comm, buf, 1, SLUICE_INT32, 1, &req);
			r = r != SLUICE_OK ? r : sluice_wait(req);
			calls++;
		} while (r == SLUICE_OK);
		expect_rank_2_named(r, 0, timeout_s, calls);
	} else {
		double first = now_s();
		for (double end = first + 2 * timeout_s + 10; r == SLUICE_OK && now_s() < end; calls++) {
			r = send_to(comm, buf, calls % 2 ? 2 : 0);
			usleep(100);
		}
		expect_rank_2_named(r, first, timeout_s, calls);
	}
	r = sluice_comm_destroy(comm); /* it fails (the communicator did) but must return */
	printf("it_linger_dead: rank %d destroyed: %s\n", rank, sluice_get_error_string(r));
	sluice_finalize(ctx);
	return 0;
}

/*
 * it_comms.c: a rank of the many-communicators test, started by sluice-run
 * once per rank.  Each round creates as many communicators as a dataplane
 * holds (64), runs an all-reduce on every one of them at once (posted in
 * opposite orders on even and odd ranks), checks one more communicator is
 * refused on every rank with a message that names the limit (its own
 * dataplane's, or a peer's reported), and destroys
 * them all; the next round must get every one back (a leak of a
 * dataplane's communicator slots, flows or buffers fails it).
 * usage: it_comms [ROUNDS] (default 3)
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/sluice.h>

static int rank, nranks;

#include "it_common.h"

#define NCOMMS 64 /* DP_MAX_COMMS: one dataplane's communicators */
#define COUNT 1000

static sluice_ctx_t *ctx;
static int failures;

static void one_round(int round, int32_t *buf)
{
	sluice_comm_t *comms[NCOMMS], *extra = NULL;
	sluice_req_t *reqs[NCOMMS];

	for (int c = 0; c < NCOMMS; c++)
		CHECK(sluice_comm_init_env(ctx, &comms[c]));
	for (int k = 0; k < NCOMMS; k++) {
		int c = rank % 2 ? NCOMMS - 1 - k : k;
		int32_t *v = buf + (size_t)c * COUNT;
		for (int i = 0; i < COUNT; i++)
			v[i] = rank + i + c;
		CHECK(sluice_allreduce(comms[c], v, v, COUNT, SLUICE_INT32, SLUICE_SUM, &reqs[c]));
	}
	for (int c = 0; c < NCOMMS; c++)
		CHECK(sluice_wait(reqs[c]));
	for (int c = 0; c < NCOMMS; c++) {
		const int32_t *v = buf + (size_t)c * COUNT;
		for (int i = 0; i < COUNT; i++) {
			if (v[i] == nranks * (i + c) + nranks * (nranks - 1) / 2)
				continue;
			fprintf(stderr, "rank %d: round %d: communicator %d: element %d is %d\n", rank, round, c, i,
				v[i]);
			failures++;
			break;
		}
	}
	/* refused by this rank's dataplane, or first by a peer's (then reported as the peer's) */
	sluice_result_t r = sluice_comm_init_env(ctx, &extra);
	if ((r != SLUICE_ERR_NO_MEMORY && r != SLUICE_ERR_REMOTE) || !strstr(sluice_last_error(), "64 communicators")) {
		fprintf(stderr, "rank %d: round %d: communicator %d got %s (%s), want it refused for the limit\n",
			rank, round, NCOMMS + 1, sluice_get_error_string(r), sluice_last_error());
		failures++;
		if (r == SLUICE_OK)
			CHECK(sluice_comm_destroy(extra));
	} else if (rank == 0 && round == 0) {
		printf("it_comms: communicator %d: %s\n", NCOMMS + 1, sluice_last_error());
	}
	for (int c = 0; c < NCOMMS; c++)
		CHECK(sluice_comm_destroy(comms[c]));
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 3;
	int32_t *buf;

	CHECK(sluice_init(&ctx));
	{
		sluice_comm_t *world;
		CHECK(sluice_comm_init_env(ctx, &world));
		CHECK(sluice_comm_rank(world, &rank));
		CHECK(sluice_comm_size(world, &nranks));
		CHECK(sluice_comm_destroy(world));
	}
	CHECK(sluice_mem_alloc(ctx, (size_t)NCOMMS * COUNT * sizeof(int32_t), (void **)&buf));
	for (int round = 0; round < rounds; round++) {
		double t0 = now_s();
		one_round(round, buf);
		if (rank == 0)
			printf("it_comms: round %d: %d communicators created, used, destroyed in %.2f s\n", round,
			       NCOMMS, now_s() - t0);
	}
	CHECK(sluice_mem_free(ctx, buf));
	CHECK(sluice_finalize(ctx));
	if (rank == 0 || failures)
		printf("it_comms rank %d of %d: %d failures\n", rank, nranks, failures);
	return failures ? 1 : 0;
}

/*
 * it_late_reason.c: a call that makes progress and then stops fails with
 * the dataplane's reason, not libsluice's own timeout.  3 ranks, direct
 * all-gather: rank 0 posts at once, rank 1 half a SLUICE_TIMEOUT later (its
 * block reaches rank 0 then: progress), rank 2 never posts.  Rank 0's
 * dataplane times the call out a timeout after that progress, 1.5 timeouts
 * in; a wait that counted from its own start alone gave up at 1 timeout
 * and its 2 s grace, with "got no completion", before the reason came
 * (with a timeout above 4 s; at 0.9 of a 4 s timeout rank 1 posted too
 * late under the sanitizers at load 12).  Run under sluice-run --timeout T
 * (T > 4) with SLUICE_ALGO=direct.
 *
 * --destroy, 2 ranks: rank 1 destroys the communicator two timeouts late.
 * Rank 0's dataplane holds its destroy a timeout for rank 1's closing word,
 * then answers; libsluice waited for that answer the same timeout, from
 * before the dataplane's wait began, and gave up first: "did not answer
 * COMM_DESTROY within SLUICE_TIMEOUT" from a dataplane that was fine.
 *
 * --client-timeout S, 2 ranks: the ranks set SLUICE_TIMEOUT=S, below the
 * dataplanes' own (sluice-run --timeout); rank 1 never posts.  Rank 0's
 * dataplane times its call out after S, the timeout its communicator was
 * created with; it used its own, and libsluice's wait gave up first at S
 * and its 2 s grace, with "got no completion" and no reason.
 *
 * --dead-peer S, 2 ranks, embedded: as --client-timeout, but rank 1 is
 * in the call too and its process ends 0.4 S into it, after acknowledging
 * rank 0's block.  Rank 0's call must fail at S naming rank 1 as gone
 * ("stopped answering"): its flow was idle, and the transport declares a
 * peer dead only on unacknowledged data, at the dataplane's timeout.
 *
 * --late-dead-peer S: the same, but rank 1 ends 0.88 S into the call, after
 * answering the pings rank 0's stalled call sent it until then: not silent
 * for a quarter of S by the timeout, it was named only as the rank waited
 * for ("made no progress ... (waiting for rank 1)").  Its reason may come a
 * quarter and a 64th of S after S (the verdict waits that long for rank
 * 1's answer); above S = 5.6 s that is past libsluice's 2 s margin, and
 * the verdict, cut to 1.5 s before, was bare.
 *
 * --unacked, 4 ranks: rank 0 broadcasts 32 MiB (past what a peer's stash
 * takes of a call it has not posted), rank 1 takes part, ranks 2 and 3
 * never post.  Rank 0's sends wait for both to acknowledge, and its
 * timeout must name both; it named the first alone ("waiting for rank 2
 * to acknowledge").
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank;
#include "it_common.h"

#define COUNT 1024 /* floats a rank's block */

static int run_destroy(sluice_ctx_t *ctx, sluice_comm_t *comm, double timeout_s)
{
	if (rank == 1)
		usleep((useconds_t)(2 * timeout_s * 1e6));
	double t0 = now_s();
	sluice_result_t res = sluice_comm_destroy(comm);
	double took = now_s() - t0;

	printf("rank %d: destroy ended after %.2f s: %s%s%s\n", rank, took, sluice_get_error_string(res),
	       res ? ": " : "", res ? sluice_last_error() : "");
	if (res != SLUICE_OK) {
		fprintf(stderr, "rank %d: FAIL: the destroy failed, not the dataplane's answer after its wait: %s\n",
			rank, sluice_last_error());
		return 1;
	}
	CHECK(sluice_finalize(ctx));
	return 0;
}

/* Rank 0's all-gather, which its peer never makes, waited for: its result,
 * the error message in *why and the seconds the wait took in *took. */
static sluice_result_t allgather_waited(sluice_comm_t *comm, float *buf, double client_s, double dataplane_s,
					const char **why, double *took)
{
	sluice_req_t *req;
	double t0 = now_s();

	CHECK(sluice_allgather(comm, buf, buf, COUNT, SLUICE_FLOAT32, &req));
	sluice_result_t res = sluice_wait(req);
	*took = now_s() - t0;
	*why = sluice_last_error();
	printf("rank 0: wait ended after %.2f s (SLUICE_TIMEOUT=%.0f s, the dataplane's %.0f s): %s: %s\n", *took,
	       client_s, dataplane_s, sluice_get_error_string(res), *why);
	return res;
}

static int run_client_timeout(sluice_ctx_t *ctx, sluice_comm_t *comm, double client_s, double dataplane_s)
{
	float *buf;

	CHECK(sluice_mem_alloc(ctx, 2 * COUNT * sizeof(float), (void **)&buf));
	if (rank == 1) {
		/* the rank that never posts: stay until rank 0 has failed */
		usleep((useconds_t)(2 * client_s * 1e6));
		sluice_comm_destroy(comm); /* fails: rank 0's abort notice */
		sluice_mem_free(ctx, buf);
		sluice_finalize(ctx);
		printf("rank 1: never posted\n");
		return 0;
	}
	const char *why;
	double took;
	sluice_result_t res = allgather_waited(comm, buf, client_s, dataplane_s, &why, &took);
	char said[64];

	snprintf(said, sizeof(said), "made no progress for %.1f s", client_s);
	if (res != SLUICE_ERR_TIMEOUT || !strstr(why, said)) {
		fprintf(stderr, "rank 0: FAIL: want the dataplane's reason after the client's timeout (\"%s\"): %s\n",
			said, why);
		return 1;
	}
	sluice_comm_destroy(comm); /* the communicator failed: its destroy says so */
	CHECK(sluice_mem_free(ctx, buf));
	CHECK(sluice_finalize(ctx));
	return 0;
}

static int run_dead_peer(sluice_ctx_t *ctx, sluice_comm_t *comm, double client_s, double dataplane_s, double dies_at)
{
	sluice_req_t *req;
	float *buf;

	CHECK(sluice_mem_alloc(ctx, 2 * COUNT * sizeof(float), (void **)&buf));
	CHECK(sluice_barrier(comm, &req));
	CHECK(sluice_wait(req));
	if (rank == 1) {
		/* gone in the middle of the call rank 0 waits in, after acknowledging
		 * its block: nothing runs, as for a kill (its embedded dataplane's
		 * threads end with it), but sluice-run sees rank 0's status */
		usleep((useconds_t)(dies_at * client_s * 1e6));
		_exit(0);
	}
	const char *why;
	double took, t0;
	double held_s = dies_at > 0.5 ? client_s / 4 + client_s / 64 : 0; /* the verdict's wait (coll_timeout.c) */
	sluice_result_t res = allgather_waited(comm, buf, client_s, dataplane_s, &why, &took);

	if (res != SLUICE_ERR_TIMEOUT || !strstr(why, "rank 1 (dataplane node 1) stopped answering") ||
	    took > client_s + held_s + 1) {
		fprintf(stderr, "rank 0: FAIL: want rank 1 named as gone at the client's timeout (%.0f s): %s\n",
			client_s, why);
		return 1;
	}
	t0 = now_s();
	res = sluice_comm_destroy(comm); /* failed already: at once, not after a timeout for rank 1's word */
	took = now_s() - t0;
	if (res == SLUICE_ERR_TIMEOUT || took > 1) {
		fprintf(stderr, "rank 0: FAIL: the destroy took %.2f s: %s: %s\n", took, sluice_get_error_string(res),
			sluice_last_error());
		return 1;
	}
	CHECK(sluice_mem_free(ctx, buf));
	CHECK(sluice_finalize(ctx));
	return 0;
}

static int run_unacked(sluice_ctx_t *ctx, sluice_comm_t *comm, double timeout_s)
{
	size_t count = 8u << 20; /* floats: 32 MiB */
	sluice_req_t *req;
	float *buf;

	CHECK(sluice_mem_alloc(ctx, count * sizeof(float), (void **)&buf));
	if (rank >= 2) {
		/* the ranks that never post: stay until rank 0 has failed */
		usleep((useconds_t)(2 * timeout_s * 1e6));
		sluice_comm_destroy(comm); /* fails: rank 0's abort notice */
		sluice_mem_free(ctx, buf);
		sluice_finalize(ctx);
		printf("rank %d: never posted\n", rank);
		return 0;
	}
	CHECK(sluice_broadcast(comm, buf, buf, count, SLUICE_FLOAT32, 0, &req));
	sluice_result_t res = sluice_wait(req);
	const char *why = sluice_last_error();

	printf("rank %d: %s: %s\n", rank, sluice_get_error_string(res), why);
	if (rank == 0 && (res != SLUICE_ERR_TIMEOUT || !strstr(why, "waiting for ranks 2 and 3 to acknowledge"))) {
		fprintf(stderr, "rank 0: FAIL: want ranks 2 and 3 named as owing acknowledgements: %s\n", why);
		return 1;
	}
	if (rank == 1 && res != SLUICE_OK) {
		fprintf(stderr, "rank 1: FAIL: its broadcast from rank 0 failed: %s\n", why);
		return 1;
	}
	if (rank == 1) /* alive while rank 0 waits: its closing word would end that wait */
		usleep((useconds_t)(2 * timeout_s * 1e6));
	sluice_comm_destroy(comm); /* rank 0's failed: its destroy says so */
	CHECK(sluice_mem_free(ctx, buf));
	CHECK(sluice_finalize(ctx));
	return 0;
}

int main(int argc, char **argv)
{
	const char *limit = getenv("SLUICE_TIMEOUT");
	bool destroy = argc == 2 && !strcmp(argv[1], "--destroy");
	bool unacked = argc == 2 && !strcmp(argv[1], "--unacked");
	double timeout_s = limit ? atof(limit) : 0, client_s = 0;
	sluice_ctx_t *ctx;
	sluice_comm_t *comm;
	sluice_req_t *req;
	float *buf;
	int nranks;

	/* where in the call rank 1 dies, as a fraction of the client's timeout (0: it does not) */
	double dies_at = argc != 3 ? 0 : !strcmp(argv[1], "--dead-peer") ? 0.4 : !strcmp(argv[1], "--late-dead-peer") ? 0.88 : 0;
	if (argc == 3 && (dies_at || !strcmp(argv[1], "--client-timeout"))) {
		client_s = atof(argv[2]);
		if (client_s < 1 || client_s >= timeout_s) {
			fprintf(stderr, "it_late_reason: --client-timeout takes whole seconds below the dataplanes' "
				"SLUICE_TIMEOUT (sluice-run --timeout)\n");
			return 2;
		}
		setenv("SLUICE_TIMEOUT", argv[2], 1); /* this rank's libsluice's, not its dataplane's */
	} else if (argc > 1 + (destroy || unacked)) {
		fprintf(stderr, "usage: it_late_reason [--destroy | --unacked | --client-timeout S | --dead-peer S | "
			"--late-dead-peer S]\n");
		return 2;
	}
	int want = unacked ? 4 : destroy || client_s ? 2 : 3;
	if (timeout_s <= (want == 3 ? 4 : 0) || timeout_s > 30) {
		fprintf(stderr, "it_late_reason: set SLUICE_TIMEOUT (seconds, above 4, at most 30; sluice-run --timeout)\n");
		return 2;
	}
	CHECK(sluice_init(&ctx));
	CHECK(sluice_comm_init_env(ctx, &comm));
	CHECK(sluice_comm_rank(comm, &rank));
	CHECK(sluice_comm_size(comm, &nranks));
	if (nranks != want) {
		fprintf(stderr, "it_late_reason: runs on %d ranks, not %d\n", want, nranks);
		return 2;
	}
	if (dies_at)
		return run_dead_peer(ctx, comm, client_s, timeout_s, dies_at);
	if (client_s)
		return run_client_timeout(ctx, comm, client_s, timeout_s);
	if (destroy)
		return run_destroy(ctx, comm, timeout_s);
	if (unacked)
		return run_unacked(ctx, comm, timeout_s);
	CHECK(sluice_mem_alloc(ctx, 3 * COUNT * sizeof(float), (void **)&buf));
	for (int i = 0; i < 3 * COUNT; i++)
		buf[i] = (float)rank;
	if (rank == 2) {
		/* the rank that never posts: stay until the others have failed */
		usleep((useconds_t)(2.5 * timeout_s * 1e6));
		sluice_comm_destroy(comm); /* fails: the others' abort notices */
		sluice_mem_free(ctx, buf);
		sluice_finalize(ctx);
		printf("rank 2: never posted\n");
		return 0;
	}
	if (rank == 1)
		usleep((useconds_t)(0.5 * timeout_s * 1e6));
	double t0 = now_s();
	CHECK(sluice_allgather(comm, buf + rank * COUNT, buf, COUNT, SLUICE_FLOAT32, &req));
	sluice_result_t res = sluice_wait(req);
	double took = now_s() - t0;
	const char *why = sluice_last_error();
	bool ok = true;

	printf("rank %d: wait ended after %.2f s (%.2f timeouts): %s: %s\n", rank, took, took / timeout_s,
	       sluice_get_error_string(res), why);
	if (res == SLUICE_OK) {
		fprintf(stderr, "rank %d: the all-gather succeeded without rank 2\n", rank);
		ok = false;
	} else if (strstr(why, "got no completion") || !strstr(why, "made no progress")) {
		fprintf(stderr, "rank %d: FAIL: libsluice's own timeout, not the dataplane's reason: %s\n", rank, why);
		ok = false;
	}
	/* the case under test: rank 0's call moved at 0.5 timeouts, so its reason comes after a wait
	 * counted from its start would have ended (1 timeout and WAIT_MARGIN_S, 2 s) */
	if (ok && rank == 0 && took < timeout_s + 2) {
		fprintf(stderr, "rank 0: FAIL: the reason came after %.2f s, before a timeout and 2 s: rank 1's "
			"block made no progress here, so this run does not test the late reason\n", took);
		ok = false;
	}
	sluice_comm_destroy(comm); /* the communicator failed: its destroy says so */
	if (!ok) /* a wait that gave up leaves its request in flight, and the buffer with it */
		return 1;
	CHECK(sluice_mem_free(ctx, buf));
	CHECK(sluice_finalize(ctx));
	return 0;
}

/*
 * it_stash_limit.c: a rank of the stash-limit integration test
 * (it_stash_limit.sh), 2 ranks, two communicators.
 *
 * A legal order that fills rank 1's stash past its cap (perf/ALGORITHMS.md,
 * soak21): rank 0 posts a big all-reduce B on communicator 1, then a small
 * one A on communicator 0; rank 1 posts A, waits for it, and only then
 * posts B.  B's first half goes out ahead of A's data on the one flow
 * between the two, so rank 1 takes all of it early while A waits: with
 * 1 KiB packets, 8 MiB against DP_STASH_MAX's 4 MiB, 4 MiB past the cap.
 *
 * Argument "runs": both calls complete with the right sums (under the
 * default limit, a quarter of memory).  "overruns": the engine's stash
 * limit is below that (sluiced --stash-limit 1, SLUICE_STASH_LIMIT=1), so
 * B's communicator fails on both ranks, rank 1 saying why; A still runs.
 * Each rank prints "it_stash_limit: rank R ok: ..." and exits 0 when what
 * it saw is what was expected, else says what it saw and exits 1.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <sluice/sluice.h>

#define A_COUNT (16u << 10) /* int32s: 64 KiB */
#define B_COUNT (4u << 20)  /* int32s: 16 MiB, a half of 8 MiB goes out at once */
#define WHY_LEN 512
#define LIMIT_WORDS "stash limit" /* in the failure's account (coll_run.c stash_overflows) */

static int rank = -1;

#include "it_common.h"

/* Rank r's element i: the sum over 2 ranks is known without the other's data. */
static int32_t value(int r, size_t i)
{
	return (int32_t)(i % 1000) * (r + 1);
}

static void fill(int32_t *buf, size_t count)
{
	for (size_t i = 0; i < count; i++)
		buf[i] = value(rank, i);
}

/* What the all-reduce into buf should hold, or exit saying where it does not. */
static void check_sum(const char *name, const int32_t *buf, size_t count)
{
	for (size_t i = 0; i < count; i++)
		if (buf[i] != value(0, i) + value(1, i)) {
			fprintf(stderr, "it_stash_limit: rank %d: %s element %zu is %d, want %d\n", rank, name, i,
				buf[i], value(0, i) + value(1, i));
			exit(1);
		}
}

static sluice_req_t *post(sluice_comm_t *comm, const int32_t *send, int32_t *recv, size_t count,
			  sluice_result_t *r)
{
	sluice_req_t *req = NULL;

	*r = sluice_allreduce(comm, send, recv, count, SLUICE_INT32, SLUICE_SUM, &req);
	return req;
}

/* A posted call's outcome (the post's own failure when it had one), and
 * why it failed in why (WHY_LEN bytes; empty when it did not). */
static sluice_result_t finish(sluice_req_t *req, sluice_result_t posted, char *why)
{
	sluice_result_t r = posted != SLUICE_OK ? posted : sluice_wait(req);

	snprintf(why, WHY_LEN, "%s", r == SLUICE_OK ? "" : sluice_last_error());
	return r;
}

int main(int argc, char **argv)
{
	bool overruns = argc > 1 && strcmp(argv[1], "overruns") == 0;
	sluice_comm_t *comm[2];
	sluice_ctx_t *ctx;
	sluice_req_t *a, *b;
	sluice_result_t pa, pb, ra, rb;
	int32_t *a_send, *a_recv, *b_send, *b_recv;
	char a_why[WHY_LEN], b_why[WHY_LEN];
	int nranks;

	if (argc != 2 || (!overruns && strcmp(argv[1], "runs") != 0)) {
		fprintf(stderr, "usage: it_stash_limit runs|overruns (what the job should do)\n");
		return 2;
	}
	CHECK(sluice_init(&ctx));
	CHECK(sluice_comm_init_env(ctx, &comm[0]));
	CHECK(sluice_comm_init_env(ctx, &comm[1]));
	CHECK(sluice_comm_rank(comm[0], &rank));
	CHECK(sluice_comm_size(comm[0], &nranks));
	if (nranks != 2) {
		fprintf(stderr, "it_stash_limit: run with 2 ranks, not %d\n", nranks);
		return 2;
	}
	CHECK(sluice_mem_alloc(ctx, 2 * (A_COUNT + B_COUNT) * sizeof(int32_t), (void **)&a_send));
	a_recv = a_send + A_COUNT;
	b_send = a_recv + A_COUNT;
	b_recv = b_send + B_COUNT;
	fill(a_send, A_COUNT);
	fill(b_send, B_COUNT);
	if (rank == 0) {
		b = post(comm[1], b_send, b_recv, B_COUNT, &pb);
		a = post(comm[0], a_send, a_recv, A_COUNT, &pa);
		ra = finish(a, pa, a_why);
		rb = finish(b, pb, b_why);
	} else {
		a = post(comm[0], a_send, a_recv, A_COUNT, &pa);
		ra = finish(a, pa, a_why);
		b = post(comm[1], b_send, b_recv, B_COUNT, &pb);
		rb = finish(b, pb, b_why);
	}
	if (ra != SLUICE_OK) {
		fprintf(stderr, "it_stash_limit: rank %d: A (communicator 0) failed: %s: %s\n", rank,
			sluice_get_error_string(ra), a_why);
		return 1;
	}
	check_sum("A", a_recv, A_COUNT);
	if (!overruns && rb != SLUICE_OK) {
		fprintf(stderr, "it_stash_limit: rank %d: B (communicator 1) failed under a limit it should fit: "
			"%s: %s\n", rank, sluice_get_error_string(rb), b_why);
		return 1;
	}
	if (overruns && (rb == SLUICE_OK || (rank == 1 && !strstr(b_why, LIMIT_WORDS)))) {
		fprintf(stderr, "it_stash_limit: rank %d: B (communicator 1) %s, want a failure%s (the limit "
			"never reached the engine?)%s%s\n", rank, rb == SLUICE_OK ? "ran" : "failed otherwise",
			rank == 1 ? " naming the " LIMIT_WORDS : "", *b_why ? ": " : "", b_why);
		return 1;
	}
	if (!overruns)
		check_sum("B", b_recv, B_COUNT);
	printf("it_stash_limit: rank %d ok: A ran, B %s%s\n", rank, overruns ? "failed: " : "ran", overruns ? b_why : "");
	sluice_comm_destroy(comm[1]); /* fails after an overrun (the communicator did) but returns */
	CHECK(sluice_comm_destroy(comm[0]));
	sluice_finalize(ctx);
	return 0;
}

/*
 * it_cross_order.c: a rank of the cross-communicator order test, started
 * by sluice-run once per rank.  Rank 0 posts a large all-reduce B on
 * communicator 1, then a small one A on communicator 0, and waits for both;
 * every other rank posts A first, waits for it, then posts B (legal: the
 * communicators are independent).  One flow carries both to each peer, B's
 * data in front of A's, so a rank waiting for A gets B's first.  Run with a
 * stash limit far below B (SLUICE_STASH_LIMIT, sluice-run --payload 1024 so
 * that the stash's cap is 4 MiB): a rank that took all of B while it waited
 * failed with "past the stash limit"; now its peer parks B until it is
 * posted (coll_stash.c stash_park).  With BIG > 1, rank 0 posts BIG such
 * calls, each on a communicator of its own, before A: a flow parked one
 * communicator at a time, and the second one's data filled the stash up to
 * the limit; then it parked up to four, and a fifth filled it (a flow's
 * park table had four slots); now it parks as many as the engine has
 * communicators.  With "reverse", the other ranks post the big calls in the
 * opposite order to rank 0's, last first: waiting for the last, they park
 * all the others at once.  With "send", the big calls are sends from rank
 * 0 to every other rank, received there after A (MPI's order: a send and a
 * call on another communicator may be matched in either order): a send
 * was not parked, and a rank waiting for A took it whole into the stash,
 * up to the limit; now its sender parks it until the recv is posted.
 * Every result is checked exactly.
 * usage: it_cross_order [B_MIB [ROUNDS [BIG [reverse|send]]]]
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/sluice.h>

static int rank, nranks;

#include "it_common.h"

#define A_COUNT 4096
#define MAX_BIG 8
#define MAX_RANKS 8 /* with "send": rank 0's sends a round, to each other rank */

/* Rank r's input element i of call c (0: A, 1..: the big ones): small, so sums are exact. */
static int32_t input(int r, size_t i, int c)
{
	return (int32_t)(mix((uint64_t)r << 40 ^ (uint64_t)c << 36 ^ i) % 1000);
}

static void fill(int32_t *buf, size_t n, int c)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = input(rank, i, c);
}

/* 0, or 1 after saying which element of call c is wrong: the sum of
 * every rank's input, or with send rank 0's. */
static int check(const int32_t *buf, size_t n, int c, int round, bool send)
{
	for (size_t i = 0; i < n; i++) {
		int32_t want = 0;
		for (int r = 0; r < (send ? 1 : nranks); r++)
			want += input(r, i, c);
		if (buf[i] != want) {
			fprintf(stderr, "rank %d round %d: %s%.0d element %zu is %d, want %d\n", rank, round,
				c ? "B" : "A", c, i, buf[i], want);
			return 1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	size_t b_count = (size_t)(argc > 1 ? atol(argv[1]) : 32) << 20 >> 2;
	int rounds = argc > 2 ? atoi(argv[2]) : 2, big = argc > 3 ? atoi(argv[3]) : 1, failures = 0;
	bool reverse = argc > 4 && strcmp(argv[4], "reverse") == 0, send = argc > 4 && strcmp(argv[4], "send") == 0;
	sluice_ctx_t *ctx;
	sluice_comm_t *comm[1 + MAX_BIG];
	int32_t *a_buf, *b_buf[MAX_BIG];
	sluice_req_t *a, *b[MAX_BIG][MAX_RANKS];

	if (big < 1 || big > MAX_BIG) {
		fprintf(stderr, "it_cross_order: BIG %d: want 1 to %d calls in front of A\n", big, MAX_BIG);
		return 2;
	}
	if (argc > 4 && !reverse && !send) {
		fprintf(stderr, "it_cross_order: %s: want \"reverse\", \"send\" or nothing after BIG\n", argv[4]);
		return 2;
	}
	CHECK(sluice_init(&ctx));
	for (int c = 0; c <= big; c++)
		CHECK(sluice_comm_init_env(ctx, &comm[c]));
	CHECK(sluice_comm_rank(comm[0], &rank));
	CHECK(sluice_comm_size(comm[0], &nranks));
	if (send && nranks > MAX_RANKS) {
		fprintf(stderr, "it_cross_order: send: %d ranks, want %d at most\n", nranks, MAX_RANKS);
		return 2;
	}
	CHECK(sluice_mem_alloc(ctx, A_COUNT * 4, (void **)&a_buf));
	for (int c = 0; c < big; c++)
		CHECK(sluice_mem_alloc(ctx, b_count * 4, (void **)&b_buf[c]));
	for (int round = 0; round < rounds; round++) {
		fill(a_buf, A_COUNT, 0);
		for (int c = 0; c < big; c++)
			fill(b_buf[c], b_count, 1 + c);
		if (rank == 0) {
			for (int c = 0; c < big; c++)
				for (int r = 1; r < (send ? nranks : 2); r++)
					CHECK(send ? sluice_send(comm[1 + c], b_buf[c], b_count, SLUICE_INT32, r, &b[c][r])
						   : sluice_allreduce(comm[1 + c], b_buf[c], b_buf[c], b_count, SLUICE_INT32,
								      SLUICE_SUM, &b[c][r]));
			CHECK(sluice_allreduce(comm[0], a_buf, a_buf, A_COUNT, SLUICE_INT32, SLUICE_SUM, &a));
			CHECK(sluice_wait(a));
			for (int c = 0; c < big; c++)
				for (int r = 1; r < (send ? nranks : 2); r++)
					CHECK(sluice_wait(b[c][r]));
		} else {
			CHECK(sluice_allreduce(comm[0], a_buf, a_buf, A_COUNT, SLUICE_INT32, SLUICE_SUM, &a));
			CHECK(sluice_wait(a));
			for (int i = 0; i < big; i++) {
				int c = reverse ? big - 1 - i : i;
				CHECK(send ? sluice_recv(comm[1 + c], b_buf[c], b_count, SLUICE_INT32, 0, &b[c][0])
					   : sluice_allreduce(comm[1 + c], b_buf[c], b_buf[c], b_count, SLUICE_INT32,
							      SLUICE_SUM, &b[c][0]));
				CHECK(sluice_wait(b[c][0]));
			}
		}
		failures += check(a_buf, A_COUNT, 0, round, false);
		for (int c = 0; c < big; c++)
			failures += check(b_buf[c], b_count, 1 + c, round, send);
	}
	CHECK(sluice_mem_free(ctx, a_buf));
	for (int c = 0; c < big; c++)
		CHECK(sluice_mem_free(ctx, b_buf[c]));
	for (int c = 0; c <= big; c++)
		CHECK(sluice_comm_destroy(comm[c]));
	CHECK(sluice_finalize(ctx));
	if (rank == 0 || failures)
		printf("it_cross_order rank %d of %d: %d rounds of %d %s of %zu MiB behind A%s, %d failures\n", rank,
		       nranks, rounds, big, send ? "sends" : "calls", b_count >> 18, reverse ? ", posted in reverse" : "",
		       failures);
	return failures ? 1 : 0;
}

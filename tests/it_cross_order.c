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
 * posted (coll_run.c stash_park).  Both results are checked exactly.
 * usage: it_cross_order [B_MIB [ROUNDS]]
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <sluice/sluice.h>

static int rank, nranks;

#include "it_common.h"

#define A_COUNT 4096

/* Rank r's input element i of call c (0: A, 1: B): small, so sums are exact. */
static int32_t input(int r, size_t i, int c)
{
	return (int32_t)(mix((uint64_t)r << 40 ^ (uint64_t)c << 36 ^ i) % 1000);
}

static void fill(int32_t *buf, size_t n, int c)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = input(rank, i, c);
}

/* 0, or 1 after saying which element of call c is wrong. */
static int check(const int32_t *buf, size_t n, int c, int round)
{
	for (size_t i = 0; i < n; i++) {
		int32_t want = 0;
		for (int r = 0; r < nranks; r++)
			want += input(r, i, c);
		if (buf[i] != want) {
			fprintf(stderr, "rank %d round %d: %s element %zu is %d, want %d\n", rank, round,
				c ? "B" : "A", i, buf[i], want);
			return 1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	size_t b_count = (size_t)(argc > 1 ? atol(argv[1]) : 32) << 20 >> 2;
	int rounds = argc > 2 ? atoi(argv[2]) : 2, failures = 0;
	sluice_ctx_t *ctx;
	sluice_comm_t *comm[2];
	int32_t *a_buf, *b_buf;
	sluice_req_t *a, *b;

	CHECK(sluice_init(&ctx));
	for (int c = 0; c < 2; c++)
		CHECK(sluice_comm_init_env(ctx, &comm[c]));
	CHECK(sluice_comm_rank(comm[0], &rank));
	CHECK(sluice_comm_size(comm[0], &nranks));
	CHECK(sluice_mem_alloc(ctx, A_COUNT * 4, (void **)&a_buf));
	CHECK(sluice_mem_alloc(ctx, b_count * 4, (void **)&b_buf));
	for (int round = 0; round < rounds; round++) {
		fill(a_buf, A_COUNT, 0);
		fill(b_buf, b_count, 1);
		if (rank == 0) {
			CHECK(sluice_allreduce(comm[1], b_buf, b_buf, b_count, SLUICE_INT32, SLUICE_SUM, &b));
			CHECK(sluice_allreduce(comm[0], a_buf, a_buf, A_COUNT, SLUICE_INT32, SLUICE_SUM, &a));
			CHECK(sluice_wait(a));
			CHECK(sluice_wait(b));
		} else {
			CHECK(sluice_allreduce(comm[0], a_buf, a_buf, A_COUNT, SLUICE_INT32, SLUICE_SUM, &a));
			CHECK(sluice_wait(a));
			CHECK(sluice_allreduce(comm[1], b_buf, b_buf, b_count, SLUICE_INT32, SLUICE_SUM, &b));
			CHECK(sluice_wait(b));
		}
		failures += check(a_buf, A_COUNT, 0, round) + check(b_buf, b_count, 1, round);
	}
	CHECK(sluice_mem_free(ctx, a_buf));
	CHECK(sluice_mem_free(ctx, b_buf));
	for (int c = 0; c < 2; c++)
		CHECK(sluice_comm_destroy(comm[c]));
	CHECK(sluice_finalize(ctx));
	if (rank == 0 || failures)
		printf("it_cross_order rank %d of %d: %d rounds of B %zu MiB behind A, %d failures\n", rank, nranks,
		       rounds, b_count >> 18, failures);
	return failures ? 1 : 0;
}

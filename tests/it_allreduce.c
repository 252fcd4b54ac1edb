/*
 * it_allreduce.c: a rank of the all-reduce integration test, started by
 * sluice-run once per rank over real dataplanes.
 *
 * Every rank fills its input from a seeded generator keyed by (rank, i), so
 * each rank can compute the whole reference itself: exactly for integers,
 * in float64 for floating point (within a tolerance that grows with the
 * rank count).  Counts include 0, 1, primes, and sizes that are not
 * multiples of the packet payload or the pipeline chunk.  After each call
 * the ranks also compare a hash of their results (all-reduced with MAX and
 * MIN) to check every rank holds the same bits.
 * usage: it_allreduce [MAX_COUNT [ROUNDS]]: ROUNDS repeats the whole set
 * (default 1), for tests that change the network while it runs.  With
 * IT_ALLREDUCE_UNTIL=FILE, ROUNDS is a cap: the ranks agree after each round
 * whether FILE exists, and once it does run AFTER_ROUNDS more (the change
 * it marks has traffic after it however slow the machine, and a loaded run
 * does not go on for all ROUNDS).
 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sluice/sluice.h>

static int rank, nranks;

#include "it_common.h"

static sluice_ctx_t *ctx;
static sluice_comm_t *comm;

/* Input element i of rank r, as a double: exact in every tested type. */
static double input(int r, size_t i, sluice_datatype_t t)
{
	uint64_t v = mix((uint64_t)r << 40 ^ i);
	switch (t) {
	case SLUICE_INT32: return (double)(int32_t)(v % 2000001) - 1000000;
	case SLUICE_INT64: return (double)(int64_t)(v % 2000000001) - 1000000000;
	default: return ((double)(v % 2000001) - 1000000) / 1024.0; /* exact in float32 */
	}
}

static void store(void *buf, size_t i, sluice_datatype_t t, double v)
{
	switch (t) {
	case SLUICE_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
	case SLUICE_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
	case SLUICE_FLOAT32: ((float *)buf)[i] = (float)v; break;
	default: ((double *)buf)[i] = v; break;
	}
}

static double load(const void *buf, size_t i, sluice_datatype_t t)
{
	switch (t) {
	case SLUICE_INT32: return ((const int32_t *)buf)[i];
	case SLUICE_INT64: return (double)((const int64_t *)buf)[i];
	case SLUICE_FLOAT32: return ((const float *)buf)[i];
	default: return ((const double *)buf)[i];
	}
}

static double reference(size_t i, sluice_datatype_t t, sluice_redop_t op)
{
	double acc = input(0, i, t);
	for (int r = 1; r < nranks; r++)
		acc = reduce_step(op, acc, input(r, i, t));
	return op == SLUICE_AVG ? acc / nranks : acc;
}

#define AFTER_ROUNDS 2

/* Does FILE exist, by every rank's agreement (MAX: once one sees it)? */
static bool seen_by_all(const char *file, uint64_t *scratch)
{
	sluice_req_t *req;

	scratch[0] = access(file, F_OK) == 0;
	CHECK(sluice_allreduce(comm, scratch, scratch + 1, 1, SLUICE_UINT64, SLUICE_MAX, &req));
	CHECK(sluice_wait(req));
	return scratch[1] != 0;
}

/* Every rank holds the same bytes: MAX and MIN of the hash agree. */
static int same_everywhere(const void *buf, size_t bytes, uint64_t *scratch)
{
	sluice_req_t *req;
	uint64_t h = hash_bytes(buf, bytes);

	scratch[0] = h;
	CHECK(sluice_allreduce(comm, scratch, scratch + 1, 1, SLUICE_UINT64, SLUICE_MAX, &req));
	CHECK(sluice_wait(req));
	scratch[0] = h;
	CHECK(sluice_allreduce(comm, scratch, scratch + 2, 1, SLUICE_UINT64, SLUICE_MIN, &req));
	CHECK(sluice_wait(req));
	return scratch[1] == h && scratch[2] == h;
}

static size_t check(const void *out, size_t count, sluice_datatype_t t, sluice_redop_t op)
{
	size_t wrong = 0;
	/* Integers are exact; floats may round differently from the float64 reference. */
	double tol = t == SLUICE_FLOAT32 ? 1e-6 * nranks : t == SLUICE_FLOAT64 ? 1e-12 * nranks : 0;

	for (size_t i = 0; i < count; i++) {
		double want = reference(i, t, op), got = load(out, i, t);
		if (fabs(got - want) > tol * (fabs(want) + 1)) {
			if (wrong++ < 3)
				fprintf(stderr, "rank %d: element %zu: got %.17g, want %.17g\n", rank, i, got, want);
		}
	}
	return wrong;
}

static int run_case(size_t count, sluice_datatype_t t, sluice_redop_t op, int in_place, uint8_t *a, uint8_t *b,
		    uint64_t *scratch)
{
	sluice_req_t *req;
	size_t es = sluice_datatype_size(t), wrong;
	void *out = in_place ? a : b;

	for (size_t i = 0; i < count; i++)
		store(a, i, t, input(rank, i, t));
	memset(b, 0xa5, count * es + 64);
	/* A guard after the result: nothing may be written past count elements. */
	memset((uint8_t *)out + count * es, 0x5a, 64);
	CHECK(sluice_allreduce(comm, a, out, count, t, op, &req));
	CHECK(sluice_wait(req));
	wrong = check(out, count, t, op);
	for (int g = 0; g < 64; g++)
		if (((uint8_t *)out)[count * es + g] != 0x5a)
			wrong++;
	if (!same_everywhere(out, count * es, scratch)) {
		fprintf(stderr, "rank %d: results differ across ranks\n", rank);
		wrong++;
	}
	if (wrong)
		fprintf(stderr, "rank %d: count %zu type %d op %d %s: %zu wrong\n", rank, count, t, op,
			in_place ? "in-place" : "out-of-place", wrong);
	return wrong != 0;
}

int main(int argc, char **argv)
{
	static const size_t counts[] = { 0, 1, 2, 3, 7, 13, 127, 1021, 2048, 2053, 8191, 65537, 262147, 1000003 };
	static const sluice_datatype_t types[] = { SLUICE_FLOAT32, SLUICE_FLOAT64, SLUICE_INT32, SLUICE_INT64 };
	size_t max_count = argc > 1 ? strtoull(argv[1], NULL, 0) : 1000003;
	long rounds = argc > 2 ? strtol(argv[2], NULL, 0) : 1;
	const char *until = getenv("IT_ALLREDUCE_UNTIL");
	uint8_t *a, *b;
	uint64_t *scratch;
	int failures = 0, cases = 0;

	CHECK(sluice_init(&ctx));
	CHECK(sluice_comm_init_env(ctx, &comm));
	CHECK(sluice_comm_rank(comm, &rank));
	CHECK(sluice_comm_size(comm, &nranks));
	CHECK(sluice_mem_alloc(ctx, max_count * 8 + 64, (void **)&a));
	CHECK(sluice_mem_alloc(ctx, max_count * 8 + 64, (void **)&b));
	CHECK(sluice_mem_alloc(ctx, 64, (void **)&scratch));
	for (long round = 0; round < rounds; round++) {
		for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
			if (counts[c] > max_count)
				continue;
			for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
				for (int in_place = 0; in_place < 2; in_place++) {
					failures += run_case(counts[c], types[t], SLUICE_SUM, in_place, a, b, scratch);
					cases++;
				}
			}
		}
		if (until && round + AFTER_ROUNDS + 1 < rounds && seen_by_all(until, scratch))
			rounds = round + AFTER_ROUNDS + 1;
	}
	/* The other ops, once each on a mid size; AVG on floating point only. */
#define UPTO(c) ((c) < max_count ? (size_t)(c) : max_count)
	failures += run_case(UPTO(1021), SLUICE_FLOAT64, SLUICE_PROD, 0, a, b, scratch);
	failures += run_case(UPTO(2053), SLUICE_INT32, SLUICE_MAX, 0, a, b, scratch);
	failures += run_case(UPTO(2053), SLUICE_INT64, SLUICE_MIN, 1, a, b, scratch);
	failures += run_case(UPTO(4099), SLUICE_FLOAT64, SLUICE_AVG, 0, a, b, scratch);
	cases += 4;
	CHECK(sluice_mem_free(ctx, a));
	CHECK(sluice_mem_free(ctx, b));
	CHECK(sluice_mem_free(ctx, scratch));
	CHECK(sluice_comm_destroy(comm));
	CHECK(sluice_finalize(ctx));
	if (rank == 0)
		printf("it_allreduce: %d ranks, %d cases, %d failed\n", nranks, cases, failures);
	return failures ? 1 : 0;
}

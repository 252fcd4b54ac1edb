/*
 * test_perf_busbw.c: sluice-perf's busbw factors (perf/perf_common.c) are
 * nccl-tests': all-reduce x 2(n-1)/n; all-gather, reduce-scatter,
 * all-to-all(v), gather and scatter x (n-1)/n; broadcast, reduce and
 * send/recv x 1.  Read from the -J line of rank 0 of a fake 4-rank
 * backend whose calls do nothing.  send/recv and all-to-allv have no
 * in-place phase: theirs is null.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "perf_common.h"
#include "perf_json.h"

static int fake_run(void *ctx, enum perf_coll coll, const void *send, void *recv, size_t count,
		    sluice_datatype_t dtype, sluice_redop_t op, int root)
{
	(void)ctx, (void)coll, (void)send, (void)recv, (void)count, (void)dtype, (void)op, (void)root;
	usleep(50); /* a time to divide by */
	return 0;
}

static int fake_sum(void *ctx, double *vals, int n)
{
	(void)ctx, (void)vals, (void)n; /* the other ranks bring nothing */
	return 0;
}

static double field(const char *line, const char *key)
{
	char pat[64];
	const char *at;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	at = strstr(line, pat);
	assert_non_null(at);
	return strtod(at + strlen(pat), NULL);
}

static void test_busbw_factors(void **state)
{
	static float send[1024], recv[1024];
	static const struct { enum perf_coll c; double factor; } want[] = {
		{ PERF_ALLREDUCE, 1.5 },  { PERF_ALLGATHER, 0.75 }, { PERF_REDUCE_SCATTER, 0.75 },
		{ PERF_BROADCAST, 1 },    { PERF_REDUCE, 1 },       { PERF_ALLTOALL, 0.75 },
		{ PERF_GATHER, 0.75 },    { PERF_SCATTER, 0.75 },   { PERF_SENDRECV, 1 },
		{ PERF_ALLTOALLV, 0.75 },
	};
	char line[2048];
	(void)state;

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		struct perf_opts o = { .coll = want[i].c, .min_bytes = 4096, .max_bytes = 4096, .factor = 2, .iters = 2,
				       .warmup = 0, .dtype = SLUICE_FLOAT32, .op = SLUICE_SUM };
		struct perf_backend b = { .name = "fake", .rank = 0, .nranks = 4, .run = fake_run,
					  .sum_doubles = fake_sum };
		bool in_place = want[i].c != PERF_SENDRECV && want[i].c != PERF_ALLTOALLV;
		perf_run_json(&o, &b, send, recv, line, sizeof(line));
		if (!in_place && !strstr(line, "\"ip_algbw\":null"))
			fail_msg("%s has no in-place form, but its -J line has an in-place figure: %s",
				 perf_coll_name(want[i].c), line);
		for (int k = 0; k < 1 + in_place; k++) {
			double alg = field(line, k ? "ip_algbw" : "oop_algbw"), bus = field(line, k ? "ip_busbw" : "oop_busbw");
			if (alg <= 0 || bus / alg < want[i].factor * 0.999 || bus / alg > want[i].factor * 1.001)
				fail_msg("%s: busbw / algbw is %g (%g / %g), nccl-tests' factor at 4 ranks is %g",
					 perf_coll_name(want[i].c), bus / alg, bus, alg, want[i].factor);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_busbw_factors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

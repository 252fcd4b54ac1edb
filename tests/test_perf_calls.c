/*
 * test_perf_calls.c: sluice-perf's -T (perf/perf_common.c): each rank
 * writes its timed calls to FILE.RANK, a line a phase (bytes, place, the
 * first call's start, each call's time), so a slow call can be put next to
 * other traces by time.  One rank of a fake backend whose calls take a
 * known time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "perf_common.h"
#include "perf_fake.h"

#define SLOW_CALL 2 /* the one call of a phase that takes SLOW_US (0-based: the first timed one after 2 warmup) */
#define SLOW_US 20000

static unsigned calls;

/* A call that takes about 100 us, and SLOW_US for the SLOW_CALL-th of each phase (2 warmup, 3 timed) */
static int timed_run(void *ctx, enum perf_coll coll, const void *send, void *recv, size_t count,
		     sluice_datatype_t dtype, sluice_redop_t op, int root)
{
	unsigned k = calls++ % 5;

	fake_run(ctx, coll, send, recv, count, dtype, op, root);
	usleep(k == SLOW_CALL ? SLOW_US : 100);
	return 0;
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A 64-byte all-reduce, out of place then in place: two lines, each
 * naming its phase, starting within the run, with the slow call first of
 * its three timed calls: in the order they ran, not sorted (perf_tail_of
 * sorts the same times for the table's columns). */
static void test_each_phase_writes_its_calls_in_order(void **state)
{
	static float send[64], recv[64];
	char dir[] = "/tmp/sluice_perf_calls.XXXXXX", base[64], path[80], place[8];
	struct perf_opts o = { .coll = PERF_ALLREDUCE, .min_bytes = 64, .max_bytes = 64, .factor = 2, .iters = 3,
			       .warmup = 2, .dtype = SLUICE_FLOAT32, .op = SLUICE_SUM };
	struct perf_backend b = { .name = "fake", .rank = 3, .nranks = 4, .run = timed_run, .sum_doubles = fake_sum };
	double start, us[3], before = mono_s(), last = 0;
	size_t bytes;
	FILE *f;
	(void)state;

	assert_non_null(mkdtemp(dir));
	snprintf(base, sizeof(base), "%s/calls", dir);
	snprintf(path, sizeof(path), "%s.3", base); /* the rank's own file */
	o.calls = base;
	calls = 0;
	assert_int_equal(perf_run(&o, &b, send, recv), 0);
	f = fopen(path, "r");
	if (!f)
		fail_msg("-T %s wrote no %s (rank 3's file)", base, path);
	for (int line = 0; line < 2; line++) {
		if (fscanf(f, "%zu %7s %lf %lf %lf %lf", &bytes, place, &start, &us[0], &us[1], &us[2]) != 6)
			fail_msg("line %d of %s is not \"BYTES PLACE START US US US\" for 3 timed calls", line + 1, path);
		assert_int_equal(bytes, 64);
		assert_string_equal(place, line ? "in" : "out");
		if (start < before || start < last || start > mono_s())
			fail_msg("line %d's start %.6f is not this run's monotonic time (%.6f to now), after %.6f",
				 line + 1, start, before, last);
		last = start;
		if (us[0] < SLOW_US || us[1] >= SLOW_US || us[2] >= SLOW_US)
			fail_msg("line %d: calls %.0f %.0f %.0f us: want the first timed call, the slow one (%d us), "
				 "first, in the order they ran", line + 1, us[0], us[1], us[2], SLOW_US);
	}
	if (fscanf(f, "%zu", &bytes) != EOF)
		fail_msg("%s has more than the two phases' lines", path);
	fclose(f);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_each_phase_writes_its_calls_in_order),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

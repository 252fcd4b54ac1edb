/*
 * test_perf_ranks.c: sluice-perf's -J lists each rank's own average call
 * (perf/perf_common.c), as oop_rank_us and ip_rank_us, and the time column
 * is their mean.  The mean alone hid which rank was slow: a 3-rank gather's
 * 13-24 us were the root's one 300-900 us call a phase, the root waiting for
 * the leaf on its core (perf/ALGORITHMS.md, gather3).  Rank 0 of a fake
 * 3-rank backend whose sums add ranks 1 and 2's times.
 */
#include <setjmp.h>
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

#define NRANKS 3

/* What ranks 1 and 2 bring to the sums, by phase (out of place, in place):
 * seconds a call, so that rank 0's own time stays below them however
 * loaded the machine (its 300 us sleeps took 3.7 ms once, under the suite). */
static const double others_us[2][NRANKS] = { { 0, 1e6, 2e6 }, { 0, 3e6, 4e6 } };

/* Rank 0's own calls take OWN_US or more. */
#define OWN_US 300

static int fake_run(void *ctx, enum perf_coll coll, const void *send, void *recv, size_t count,
		    sluice_datatype_t dtype, sluice_redop_t op, int root)
{
	(void)ctx, (void)coll, (void)send, (void)recv, (void)count, (void)dtype, (void)op, (void)root;
	usleep(OWN_US);
	return 0;
}

/* The barrier's sum (one double) is left alone; a size's sum gets the
 * other ranks' times in their slots (their wrong counts are 0). */
static int fake_sum(void *ctx, double *vals, int n)
{
	(void)ctx;
	if (n != PERF_SUM_MAX(NRANKS))
		return 0;
	for (int k = 0; k < 2; k++)
		for (int r = 1; r < NRANKS; r++)
			vals[k * NRANKS + r] += others_us[k][r];
	return 0;
}

/* The number after "key": in line, or fail. */
static double number_at(const char *line, const char *key)
{
	const char *p = strstr(line, key);

	if (!p)
		fail_msg("the -J line has no %s: %s", key, line);
	return strtod(p + strlen(key), NULL);
}

static void test_json_lists_each_ranks_average(void **state)
{
	static float send[64 * NRANKS], recv[64 * NRANKS];
	char line[2048], key[32];
	struct perf_opts o = { .coll = PERF_ALLREDUCE, .min_bytes = 64, .max_bytes = 64, .factor = 2, .iters = 3,
			       .warmup = 1, .check = false, .dtype = SLUICE_FLOAT32, .op = SLUICE_SUM, .sync = true };
	struct perf_backend b = { .name = "fake", .rank = 0, .nranks = NRANKS, .run = fake_run, .sum_doubles = fake_sum };
	static const char *const tag[2] = { "oop", "ip" };

	(void)state;
	perf_run_json(&o, &b, send, recv, line, sizeof(line));
	for (int k = 0; k < 2; k++) {
		snprintf(key, sizeof(key), "\"%s_rank_us\":[", tag[k]);
		const char *p = strstr(line, key);
		double us[NRANKS], sum = 0;
		if (!p)
			fail_msg("the -J line has no %s list: %s", key, line);
		p += strlen(key);
		for (int r = 0; r < NRANKS; r++) {
			char *end;
			us[r] = strtod(p, &end);
			if (end == p || *end != (r + 1 < NRANKS ? ',' : ']'))
				fail_msg("%s does not list %d ranks: %s", key, NRANKS, line);
			p = end + 1;
			sum += us[r];
		}
		/* rank 0's own calls sleep OWN_US: below the others' */
		if (!(us[0] >= OWN_US && us[0] < others_us[k][1]) || us[1] != others_us[k][1] ||
		    us[2] != others_us[k][2])
			fail_msg("%s lists %g, %g, %g: want rank 0's own (%d-%g), %g, %g", key, us[0], us[1], us[2], OWN_US,
				 others_us[k][1], others_us[k][1], others_us[k][2]);
		snprintf(key, sizeof(key), "\"%s_time_us\":", tag[k]);
		double t = number_at(line, key);
		if (t < sum / NRANKS * 0.9999 || t > sum / NRANKS * 1.0001)
			fail_msg("%s is %g, not the mean of the ranks' %g", key, t, sum / NRANKS);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_lists_each_ranks_average),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

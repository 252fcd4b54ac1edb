/*
 * test_perf_sync.c: sluice-perf's -S (perf/perf_common.c): every rank
 * starts a phase's timed calls together, through a barrier between the
 * warmup and the timed calls; without -S nothing comes between them.
 * One rank of a fake backend that logs its calls: 'r' a collective,
 * 's' a sum over the ranks (the barrier, and each size's time sums).
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
#include "perf_fake.h"
#include "perf_json.h"

/* One 64-byte all-reduce size, 2 warmup and 3 timed calls a phase, out of
 * place then in place, unchecked. */
static const char *events_of(bool sync)
{
	static float send[64], recv[64];
	char line[1024];
	struct perf_opts o = { .coll = PERF_ALLREDUCE, .min_bytes = 64, .max_bytes = 64, .factor = 2, .iters = 3,
			       .warmup = 2, .check = false, .dtype = SLUICE_FLOAT32, .op = SLUICE_SUM, .sync = sync };
	struct perf_backend b = { .name = "fake", .rank = 0, .nranks = 1, .run = fake_run, .sum_doubles = fake_sum };

	memset(events, 0, sizeof(events));
	nevents = 0;
	/* the JSON says how the calls were timed (vs-openmpi.sh's table header reads it) */
	perf_run_json(&o, &b, send, recv, line, sizeof(line));
	if (!strstr(line, sync ? "\"synced\":true" : "\"synced\":false"))
		fail_msg("-J line does not say \"synced\":%s: %s", sync ? "true" : "false", line);
	return events;
}

static void test_sync_barrier_between_warmup_and_timed_calls(void **state)
{
	(void)state;
	assert_string_equal(events_of(true), "rrsrrrrrsrrrs");
}

static void test_no_barrier_without_sync(void **state)
{
	(void)state;
	assert_string_equal(events_of(false), "rrrrrrrrrrs");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sync_barrier_between_warmup_and_timed_calls),
		cmocka_unit_test(test_no_barrier_without_sync),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_perf_blocking.c: sluice-perf's -z (perf/perf_common.c).  -z 1 waits
 * for each call before the next; -z 0 keeps up to PERF_WINDOW calls in
 * flight, finished in posting order, and a tool that cannot post without
 * waiting refuses it.  One rank of a fake backend that logs its calls: 'r'
 * a blocking call, 'p' a post, 'w' a wait, 's' a sum over the ranks.
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

static unsigned slots[1024], nposted, nwaited; /* each post's slot, in posting order */

static int fake_post(void *ctx, unsigned slot, enum perf_coll coll, const void *send, void *recv, size_t count,
		     sluice_datatype_t dtype, sluice_redop_t op, int root)
{
	(void)ctx, (void)coll, (void)send, (void)recv, (void)count, (void)dtype, (void)op, (void)root;
	assert_true(slot < PERF_WINDOW);
	assert_true(nposted - nwaited < PERF_WINDOW); /* never more in flight than the window */
	for (unsigned k = nwaited; k < nposted; k++)
		assert_int_not_equal(slots[k % 1024], slot); /* a slot in flight is not reused */
	slots[nposted++ % 1024] = slot;
	note('p');
	return 0;
}

static int fake_wait(void *ctx, unsigned slot)
{
	(void)ctx;
	assert_true(nwaited < nposted);
	assert_int_equal(slot, slots[nwaited++ % 1024]); /* the oldest call in flight */
	note('w');
	return 0;
}

/* One 64-byte all-reduce size, `warmup` and `iters` calls a phase, out of
 * place then in place, unchecked; the -J line into line. */
static const char *events_of(bool in_flight, unsigned warmup, unsigned iters, char *line, int len)
{
	static float send[64], recv[64];
	struct perf_opts o = { .coll = PERF_ALLREDUCE, .min_bytes = 64, .max_bytes = 64, .factor = 2, .iters = iters,
			       .warmup = warmup, .check = false, .dtype = SLUICE_FLOAT32, .op = SLUICE_SUM,
			       .in_flight = in_flight };
	struct perf_backend b = { .name = "fake", .rank = 0, .nranks = 1, .run = fake_run, .post = fake_post,
				  .wait = fake_wait, .sum_doubles = fake_sum };

	memset(events, 0, sizeof(events));
	nevents = nposted = nwaited = 0;
	perf_run_json(&o, &b, send, recv, line, len);
	return events;
}

static void test_blocking_waits_for_each_call(void **state)
{
	char line[1024];
	(void)state;
	assert_string_equal(events_of(false, 2, 3, line, sizeof(line)), "rrrrrrrrrrs");
	assert_non_null(strstr(line, "\"blocking\":true"));
}

static void test_in_flight_posts_before_it_waits(void **state)
{
	char line[1024];
	(void)state;
	assert_string_equal(events_of(true, 2, 3, line, sizeof(line)), "ppwwpppwwwppwwpppwwws");
	assert_non_null(strstr(line, "\"blocking\":false"));
}

/* 18 calls: 16 in flight, then a wait before each further post */
static void test_in_flight_keeps_the_window(void **state)
{
	char line[1024], want[128];
	(void)state;
	snprintf(want, sizeof(want), "%.16s%s%.16s%.16s%s%.16ss", "pppppppppppppppp", "wpwp", "wwwwwwwwwwwwwwww",
		 "pppppppppppppppp", "wpwp", "wwwwwwwwwwwwwwww");
	assert_string_equal(events_of(true, 0, 18, line, sizeof(line)), want);
}

static void test_in_flight_needs_post(void **state)
{
	static float send[64], recv[64];
	struct perf_opts o = { .coll = PERF_ALLREDUCE, .min_bytes = 64, .max_bytes = 64, .factor = 2, .iters = 1,
			       .dtype = SLUICE_FLOAT32, .op = SLUICE_SUM, .in_flight = true };
	struct perf_backend b = { .name = "fake", .rank = 0, .nranks = 1, .run = fake_run, .sum_doubles = fake_sum };
	(void)state;
	nevents = 0;
	assert_int_equal(perf_run(&o, &b, send, recv), 2);
	assert_int_equal(nevents, 0); /* refused before any call */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_blocking_waits_for_each_call),
		cmocka_unit_test(test_in_flight_posts_before_it_waits),
		cmocka_unit_test(test_in_flight_keeps_the_window),
		cmocka_unit_test(test_in_flight_needs_post),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

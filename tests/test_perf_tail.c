/*
 * test_perf_tail.c: sluice-perf's tail columns (perf/perf_tail.c): the
 * median, the nearest-rank p99 and the max of a phase's call times, from
 * calls in any order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "perf_tail.h"

/* 200 calls of 50 us but three slow ones: p99 (the 198th fastest) is the
 * third slowest, the median the typical call. */
static void test_tail_of_200_calls(void **state)
{
	double us[200];
	struct perf_tail t;

	(void)state;
	for (int i = 0; i < 200; i++)
		us[i] = 50;
	us[7] = 3000, us[100] = 1000, us[150] = 2000, us[3] = 40;
	perf_tail_of(us, 200, &t);
	assert_true(t.median_us == 50);
	assert_true(t.p99_us == 1000);
	assert_true(t.max_us == 3000);
}

/* An even count's median is the mean of the two middle calls; below 100
 * calls p99 is the max. */
static void test_even_count_and_few_calls(void **state)
{
	double us[4] = { 9, 1, 5, 3 };
	struct perf_tail t;

	(void)state;
	perf_tail_of(us, 4, &t);
	assert_true(t.median_us == 4);
	assert_true(t.p99_us == 9);
	assert_true(t.max_us == 9);
}

/* 101 calls 1..101 in reverse: ceil(0.99 * 101) = 100, so p99 is 100. */
static void test_p99_rounds_up(void **state)
{
	double us[101];
	struct perf_tail t;

	(void)state;
	for (int i = 0; i < 101; i++)
		us[i] = 101 - i;
	perf_tail_of(us, 101, &t);
	assert_true(t.median_us == 51);
	assert_true(t.p99_us == 100);
	assert_true(t.max_us == 101);
}

static void test_one_call(void **state)
{
	double us[1] = { 7 };
	struct perf_tail t;

	(void)state;
	perf_tail_of(us, 1, &t);
	assert_true(t.median_us == 7 && t.p99_us == 7 && t.max_us == 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tail_of_200_calls),
		cmocka_unit_test(test_even_count_and_few_calls),
		cmocka_unit_test(test_p99_rounds_up),
		cmocka_unit_test(test_one_call),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

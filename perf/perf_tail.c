/*
 * perf_tail.c: median, p99 and max of a phase's call times, for
 * sluice-perf's tail columns.  Its own file so that a unit test reaches it.
 */
#include "perf_tail.h"

#include <stdlib.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

void perf_tail_of(double *us, unsigned n, struct perf_tail *t)
{
	qsort(us, n, sizeof(*us), cmp_double);
	t->median_us = n % 2 ? us[n / 2] : (us[n / 2 - 1] + us[n / 2]) / 2;
	/* nearest rank: ceil(0.99 n) counted from 1, in integers (no rounding of 0.99 * n) */
	t->p99_us = us[(99ul * n + 99) / 100 - 1];
	t->max_us = us[n - 1];
}

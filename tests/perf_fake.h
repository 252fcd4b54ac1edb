/*
 * perf_fake.h: one rank of a fake sluice-perf backend that logs its calls
 * as letters in `events` ('r' a blocking call, 's' a sum over the ranks),
 * for the unit tests of sluice-perf's loop (cmocka).  A test adds its own
 * letters with note().
 */
#ifndef SLUICE_TESTS_PERF_FAKE_H
#define SLUICE_TESTS_PERF_FAKE_H

#include <stddef.h>

#include "perf_common.h"

static char events[128];
static size_t nevents;

static inline void note(char c)
{
	if (nevents + 1 < sizeof(events))
		events[nevents++] = c;
}

static inline int fake_run(void *ctx, enum perf_coll coll, const void *send, void *recv, size_t count,
			   sluice_datatype_t dtype, sluice_redop_t op, int root)
{
	(void)ctx, (void)coll, (void)send, (void)recv, (void)count, (void)dtype, (void)op, (void)root;
	note('r');
	return 0;
}

static inline int fake_sum(void *ctx, double *vals, int n)
{
	(void)ctx, (void)vals, (void)n; /* one rank: the sum is the value */
	note('s');
	return 0;
}

#endif

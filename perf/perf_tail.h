/*
 * perf_tail.h: the tail of a phase's call times (median, p99, max), which a
 * per-size average hides: one 2 ms call in 200 of 50 us is 60 us "a call".
 */
#ifndef SLUICE_PERF_TAIL_H
#define SLUICE_PERF_TAIL_H

struct perf_tail {
	double median_us; /* the middle call (the mean of the two middle ones for an even count) */
	double p99_us;    /* nearest rank: the ceil(0.99 n)-th fastest; the max below 100 calls */
	double max_us;
};

/* The tail of n call times (us), n >= 1; sorts us in place. */
void perf_tail_of(double *us, unsigned n, struct perf_tail *t);

#endif

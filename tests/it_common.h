/*
 * it_common.h: what every integration-test rank program shares: a CHECK
 * that stops the rank with sluice's own account of a failed call, a seeded
 * mixer for reproducible inputs, a byte hash for comparing results
 * across ranks, the reference's reduction step, and a monotonic clock.  Each
 * program defines `static int rank` before including it.
 */
#ifndef SLUICE_IT_COMMON_H
#define SLUICE_IT_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <sluice/sluice.h>

#define CHECK(call)                                                                              \
	do {                                                                                     \
		sluice_result_t r_ = (call);                                                     \
		if (r_ != SLUICE_OK) {                                                           \
			fprintf(stderr, "rank %d: %s failed: %s: %s\n", rank, #call,             \
				sluice_get_error_string(r_), sluice_last_error());               \
			exit(1);                                                                 \
		}                                                                                \
	} while (0)

/* splitmix64's finalizer: a well-spread 64-bit value from any key. */
static inline uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* FNV-1a over n bytes. */
static inline uint64_t hash_bytes(const void *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ ((const uint8_t *)p)[i]) * 1099511628211ull;
	return h;
}

/* The reference's reduction of one more rank's value x into acc (AVG sums:
 * the caller divides by the rank count at the end). */
static inline double reduce_step(sluice_redop_t op, double acc, double x)
{
	switch (op) {
	case SLUICE_PROD: return acc * x;
	case SLUICE_MAX: return x > acc ? x : acc;
	case SLUICE_MIN: return x < acc ? x : acc;
	default: return acc + x;
	}
}

/* Seconds on the monotonic clock. */
static inline double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

#endif

/*
 * reduce_bench.c: sluice-reduce-bench, how fast one core reduces.  For each
 * datatype, dst = a op b (coll/'s sl_reduce, what the engine runs on every
 * arriving packet) against memcpy of the same bytes, on the same core in
 * the same run, on buffers larger than the last-level cache.  Rates are
 * bytes of one operand per second, the median of the runs; the ratio is
 * the figure to watch (issue 3's target: float32 sum at least 70% of memcpy).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "reduce.h"

#define RUNS_MAX 99

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median GB/s of runs passes over bytes: reduce when t is a type, else memcpy. */
static double rate(int t, enum sl_redop op, void *dst, const void *a, const void *b, size_t bytes, int runs)
{
	double gbps[RUNS_MAX];

	for (int r = 0; r < runs; r++) {
		double t0 = now_s();
		if (t < 0)
			memcpy(dst, a, bytes);
		else
			sl_reduce(dst, a, b, bytes / sl_dtype_size((enum sl_dtype)t), (enum sl_dtype)t, op);
		gbps[r] = (double)bytes / (now_s() - t0) * 1e-9;
	}
	qsort(gbps, (size_t)runs, sizeof(gbps[0]), cmp_double);
	return gbps[runs / 2];
}

static void usage(FILE *f, const char *prog)
{
	fprintf(f, "usage: %s [-s MiB] [-n RUNS] [-o sum|prod|max|min]\n"
		   "  -s MiB   bytes per operand (default 256: larger than any last-level cache here)\n"
		   "  -n RUNS  passes per datatype, the median is shown (default 5, at most %d)\n"
		   "  -o OP    the reduction (default sum)\n", prog, RUNS_MAX);
}

int main(int argc, char **argv)
{
	size_t mib = 256;
	int runs = 5, opt;
	enum sl_redop op = SL_SUM;

	while ((opt = getopt(argc, argv, "s:n:o:h")) != -1) {
		switch (opt) {
		case 's': mib = strtoull(optarg, NULL, 10); break;
		case 'n': runs = atoi(optarg); break;
		case 'o':
			for (op = SL_SUM; op < SL_AVG && strcmp(optarg, sl_redop_name(op)); op++)
				;
			break;
		case 'h': usage(stdout, argv[0]); return 0;
		default: usage(stderr, argv[0]); return 2;
		}
	}
	if (mib == 0 || mib > 4096 || runs < 1 || runs > RUNS_MAX || op >= SL_AVG) {
		fprintf(stderr, "%s: -s wants 1..4096 MiB, -n 1..%d runs, -o one of sum prod max min\n", argv[0],
			RUNS_MAX);
		return 2;
	}
	size_t bytes = mib << 20;
	unsigned char *a = malloc(bytes), *b = malloc(bytes), *dst = malloc(bytes);
	if (!a || !b || !dst) {
		fprintf(stderr, "%s: cannot allocate 3 x %zu MiB: %s; try a smaller -s\n", argv[0], mib, strerror(errno));
		return 1;
	}
	/* 0x3c00 in every 16-bit word: normal numbers in every float type (1.0 in
	 * float16), so no NaN or subnormal slows a pass down */
	for (size_t i = 0; i < bytes; i++)
		a[i] = b[i] = (unsigned char)(i % 2 ? 0x3c : 0);
	memset(dst, 0, bytes);
	printf("# sluice-reduce-bench: %zu MiB per operand, median of %d, one core, op %s\n", mib, runs,
	       sl_redop_name(op));
	printf("# %10s  %12s  %12s  %8s\n", "type", "reduce GB/s", "memcpy GB/s", "ratio");
	for (int t = 0; t < SL_DTYPE_COUNT; t++) {
		double copy = rate(-1, op, dst, a, b, bytes, runs);
		double red = rate(t, op, dst, a, b, bytes, runs);
		printf("  %10s  %12.2f  %12.2f  %8.2f\n", sl_dtype_name((enum sl_dtype)t), red, copy, red / copy);
	}
	free(a);
	free(b);
	free(dst);
	return 0;
}

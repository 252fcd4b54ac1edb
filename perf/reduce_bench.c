/*
 * reduce_bench.c: sluice-reduce-bench, how fast one core reduces.  For each
 * datatype, dst = a op b (coll/'s sl_reduce, what the engine runs on every
 * arriving packet) in every kernel family this CPU has, against memcpy of
 * the same bytes, on the same core in the same run.  Each run times memcpy
 * and then every family back to back, so that a neighbour's load shifts
 * them together; a ratio is taken per run and the median shown with its
 * spread.  Rates are bytes of one operand per CPU second.  Issue 3's target:
 * float32 sum at least 70% of memcpy on buffers larger than the LLC.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "reduce.h"

#define RUNS_MAX 99
#define PASS_BYTES (256u << 20) /* small buffers are timed over repeated passes up to this */

/* This thread's CPU time, not the wall clock: on a shared machine a pass
 * may be descheduled for milliseconds, which would count against whichever
 * of memcpy or the kernel it hit. */
static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* GB/s of passes over bytes: reduce when t is a type, else memcpy. */
static double rate(int t, enum sl_redop op, void *dst, const void *a, const void *b, size_t bytes, int passes)
{
	double t0 = now_s();

	for (int p = 0; p < passes; p++) {
		if (t < 0)
			memcpy(dst, a, bytes);
		else
			sl_reduce(dst, a, b, bytes / sl_dtype_size((enum sl_dtype)t), (enum sl_dtype)t, op);
	}
	return (double)bytes * passes / (now_s() - t0) * 1e-9;
}

/* "256M", "64K", "1G" -> bytes; 0 when not a size. */
static size_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : *end == '\0' ? 0 : -1;

	if (end == s || shift < 0 || (shift && end[1] != '\0') || v > (4ull << 30) >> shift)
		return 0;
	return (size_t)(v << shift);
}

static void usage(FILE *f, const char *prog)
{
	fprintf(f, "usage: %s [-s SIZE] [-n RUNS] [-o sum|prod|max|min] [-d TYPE]\n"
		   "  -s SIZE  bytes per operand, K/M/G suffixes (default 256M: larger than any last-level\n"
		   "           cache here; small sizes repeat passes up to 256 MiB per timing)\n"
		   "  -n RUNS  runs per datatype; medians and the ratio's spread are shown (default 5, at most %d)\n"
		   "  -o OP    the reduction (default sum)\n"
		   "  -d TYPE  only this datatype (int8 ... float bfloat16 f8e4m3 f8e5m2; default all)\n",
		   prog, RUNS_MAX);
}

int main(int argc, char **argv)
{
	size_t bytes = 256u << 20;
	int runs = 5, opt, only = -1;
	enum sl_redop op = SL_SUM;

	while ((opt = getopt(argc, argv, "s:n:o:d:h")) != -1) {
		switch (opt) {
		case 'd':
			for (only = 0; only < SL_DTYPE_COUNT && strcmp(optarg, sl_dtype_name((enum sl_dtype)only)); only++)
				;
			break;
		case 's': bytes = parse_size(optarg); break;
		case 'n': runs = atoi(optarg); break;
		case 'o':
			for (op = SL_SUM; op < SL_AVG && strcmp(optarg, sl_redop_name(op)); op++)
				;
			break;
		case 'h': usage(stdout, argv[0]); return 0;
		default: usage(stderr, argv[0]); return 2;
		}
	}
	if (bytes < 64 || runs < 1 || runs > RUNS_MAX || op >= SL_AVG || only >= SL_DTYPE_COUNT) {
		fprintf(stderr, "%s: -s wants 64 bytes to 4G, -n 1..%d runs, -o one of sum prod max min, -d one of "
			"the type names this prints\n", argv[0], RUNS_MAX);
		return 2;
	}
	unsigned char *a = malloc(bytes), *b = malloc(bytes), *dst = malloc(bytes);
	if (!a || !b || !dst) {
		fprintf(stderr, "%s: cannot allocate 3 x %zu bytes: %s; try a smaller -s\n", argv[0], bytes,
			strerror(errno));
		return 1;
	}
	/* 0x3c in every byte: 1.0039 in float16, about 0.0115 in float32, 1.5 in
	 * e4m3, 1.0 in e5m2: normal numbers in every float type, so no NaN or
	 * subnormal slows a pass down */
	memset(a, 0x3c, bytes);
	memset(b, 0x3c, bytes);
	memset(dst, 0, bytes);
	int passes = bytes >= PASS_BYTES ? 1 : (int)(PASS_BYTES / bytes);
	enum sl_simd best = sl_simd_best();
	printf("# sluice-reduce-bench: %zu bytes per operand x %d passes, %d runs, one core, op %s\n", bytes, passes,
	       runs, sl_redop_name(op));
	printf("# GB/s of one operand (median); ratio to memcpy in the same run: median [min-max]\n");
	printf("# %8s %7s", "type", "memcpy");
	for (int s = 0; s <= (int)best; s++)
		printf(" %8s %17s", sl_simd_name((enum sl_simd)s), "ratio");
	printf("\n");
	for (int t = only < 0 ? 0 : only; t < (only < 0 ? SL_DTYPE_COUNT : only + 1); t++) {
		double copy[RUNS_MAX], red[SL_SIMD_COUNT][RUNS_MAX], ratio[SL_SIMD_COUNT][RUNS_MAX];
		/* run -1 warms up (page tables, frequency) and is not kept */
		for (int r = -1; r < runs; r++) {
			int k = r < 0 ? 0 : r;
			copy[k] = rate(-1, op, dst, a, b, bytes, passes);
			for (int s = 0; s <= (int)best; s++) {
				sl_simd_select((enum sl_simd)s);
				red[s][k] = rate(t, op, dst, a, b, bytes, passes);
				ratio[s][k] = red[s][k] / copy[k];
			}
		}
		qsort(copy, (size_t)runs, sizeof(double), cmp_double);
		printf("  %8s %7.2f", sl_dtype_name((enum sl_dtype)t), copy[runs / 2]);
		for (int s = 0; s <= (int)best; s++) {
			qsort(red[s], (size_t)runs, sizeof(double), cmp_double);
			qsort(ratio[s], (size_t)runs, sizeof(double), cmp_double);
			printf(" %8.2f %5.2f [%4.2f-%4.2f]", red[s][runs / 2], ratio[s][runs / 2], ratio[s][0],
			       ratio[s][runs - 1]);
		}
		printf("\n");
	}
	sl_simd_select(best);
	free(a);
	free(b);
	free(dst);
	return 0;
}

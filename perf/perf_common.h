/*
 * perf_common.h: what sluice-perf and mpi-allreduce-perf share: the
 * nccl-tests flags, the data pattern whose all-reduce is known exactly, and
 * the table.  Each tool supplies only a backend: one blocking all-reduce and
 * a sum of a few doubles across ranks (for times and #wrong).
 */
#ifndef SLUICE_PERF_COMMON_H
#define SLUICE_PERF_COMMON_H

#include <stdbool.h>
#include <stddef.h>

#include <sluice/sluice.h>

struct perf_opts {
	size_t min_bytes, max_bytes;
	unsigned factor;         /* -f: size multiplier per row */
	unsigned iters, warmup;  /* -n, -w */
	size_t budget;           /* -B: cap on bytes reduced per row and phase, 0 = none */
	bool check;              /* -c */
	sluice_datatype_t dtype; /* -d */
	sluice_redop_t op;       /* -o */
	const char *json;        /* -J: JSON lines file, or NULL */
};

struct perf_backend {
	const char *name; /* "sluice", "mpi": printed and written to JSON */
	int rank, nranks;
	void *ctx;
	/* send == recv runs in place; 0 on success, else -1 after printing why */
	int (*allreduce)(void *ctx, const void *send, void *recv, size_t count,
			 sluice_datatype_t dtype, sluice_redop_t op);
	/* vals[i] = sum over ranks of vals[i]; 0 or -1 as above */
	int (*sum_doubles)(void *ctx, double *vals, int n);
};

/* Parse argv; on -h prints usage and exits 0, on a bad flag exits 2. */
void perf_parse(int argc, char **argv, struct perf_opts *o);

/* Run every size, print the table on rank 0; send and recv hold max_bytes.
 * Returns 0, or 1 when a call failed or any element was wrong. */
int perf_run(const struct perf_opts *o, const struct perf_backend *b, void *send, void *recv);

#endif

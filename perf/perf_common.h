/*
 * perf_common.h: what sluice-perf and mpi-allreduce-perf share: the
 * nccl-tests flags (-C picks the collective), the data pattern whose result
 * is known exactly for every collective, and the table.  Each tool supplies
 * only a backend: one blocking call of a collective and a sum of a few
 * doubles across ranks (for times and #wrong).
 */
#ifndef SLUICE_PERF_COMMON_H
#define SLUICE_PERF_COMMON_H

#include <stdbool.h>
#include <stddef.h>

#include <sluice/sluice.h>

/* The collectives, as -C names them (nccl-tests' binaries without _perf). */
enum perf_coll {
	PERF_ALLREDUCE, PERF_ALLGATHER, PERF_REDUCE_SCATTER, PERF_BROADCAST, PERF_REDUCE,
	PERF_ALLTOALL, PERF_GATHER, PERF_SCATTER, PERF_SENDRECV, PERF_ALLTOALLV, PERF_BARRIER, PERF_NCOLLS
};

struct perf_opts {
	enum perf_coll coll;     /* -C, default all_reduce */
	int root;                /* -r: rooted collectives */
	size_t min_bytes, max_bytes;
	unsigned factor;         /* -f: size multiplier per row */
	unsigned iters, warmup;  /* -n, -w */
	size_t budget;           /* -B: cap on bytes reduced per row and phase, 0 = none */
	bool check;              /* -c */
	sluice_datatype_t dtype; /* -d */
	sluice_redop_t op;       /* -o */
	bool all_dtypes, all_ops; /* -d all, -o all: each in turn, a table each (ops: reducing collectives) */
	const char *json;        /* -J: JSON lines file, or NULL */
	const char *calls;       /* -T: each rank's call times go to calls.RANK, or NULL */
	bool gpu;                /* -G: buffers in GPU memory (sluice-perf built with CUDA) */
	bool sync;               /* -S: a barrier before each phase's timed calls */
	bool in_flight;          /* -z 0: keep PERF_WINDOW calls in flight (the backend's post and
				  * wait); false, -z 1 (the default): wait for each call before the next */
};

/* -z 0: calls in flight at once (far below sluice's 256 submission slots) */
#define PERF_WINDOW 16u

/* Buffers the host cannot read (GPU memory): perf_run fills and checks
 * these host copies and moves them with copy. */
struct perf_mirror {
	void *send_host, *recv_host; /* as large as send and recv */
	/* 0, or -1 after printing why */
	int (*copy)(void *dst, const void *src, size_t bytes, bool to_device);
};

/* The most doubles perf_run sums at once: each rank's average call of both
 * phases (in its own slot, so every rank learns every rank's), and the two
 * phases' wrong-element counts. */
#define PERF_SUM_MAX(nranks) (2 * (nranks) + 2)

struct perf_backend {
	const char *name; /* "sluice", "mpi": printed and written to JSON */
	int rank, nranks;
	void *ctx;
	/* One blocking call of coll, count elements per block (see perf_run);
	 * in place when send and recv overlap as NCCL's in-place layout has
	 * them.  sendrecv sends to rank + 1 and receives from rank - 1;
	 * alltoallv sends count elements to every rank, block j of send to
	 * rank j (all-to-all's layout, through the vector call); barrier moves
	 * nothing (count 0, no buffers).
	 * 0 on success, else -1 after printing why. */
	int (*run)(void *ctx, enum perf_coll coll, const void *send, void *recv, size_t count,
		   sluice_datatype_t dtype, sluice_redop_t op, int root);
	/* -z 0: start a call as run would, in slot (< PERF_WINDOW), without
	 * waiting for it; wait finishes the slot's call.  NULL: the tool has no
	 * calls in flight together, and refuses -z 0.  0 or -1 as above. */
	int (*post)(void *ctx, unsigned slot, enum perf_coll coll, const void *send, void *recv, size_t count,
		    sluice_datatype_t dtype, sluice_redop_t op, int root);
	int (*wait)(void *ctx, unsigned slot);
	/* vals[i] = sum over ranks of vals[i], n <= PERF_SUM_MAX(nranks); 0 or -1 as above */
	int (*sum_doubles)(void *ctx, double *vals, int n);
	const struct perf_mirror *mirror; /* NULL: send and recv are host memory */
	/* NULL, or why the tool has no such datatype, or op where the
	 * collective reduces (reduces false: op means nothing); -d all and -o
	 * all skip such a table with a note, a datatype and op given by name
	 * are refused.  NULL: every one is there. */
	const char *(*lacks)(sluice_datatype_t dtype, sluice_redop_t op, bool reduces);
};

/* Parse argv; on -h prints usage and exits 0, on a bad flag exits 2. */
void perf_parse(int argc, char **argv, struct perf_opts *o);

/* Run every size, print the table on rank 0 (a table for each datatype and
 * op that -d all and -o all name); send and recv hold max_bytes.
 * A row's size is nccl-tests': the whole buffer (all-gather's recv,
 * reduce-scatter's send, all-to-all's), so a block is size / nranks there.
 * Returns 0, or 1 when a call failed or any element was wrong, or 2 when
 * the options cannot run here. */
int perf_run(const struct perf_opts *o, const struct perf_backend *b, void *send, void *recv);

/* "all_reduce" and so on, for messages. */
const char *perf_coll_name(enum perf_coll c);

/* The collective -C names s, or -1. */
int perf_parse_coll(const char *s);

/* "64M" -> 67108864 (K, M, G are powers of 1024); 0, or -1 for no size. */
int perf_parse_size(const char *s, size_t *out);

#endif

/*
 * mpi_perf.c: mpi-allreduce-perf, the same table and flags as sluice-perf
 * (-C included) for Open MPI's collectives, so that sluice can be measured
 * against Open MPI on the same machine and medium (perf/vs-openmpi.sh runs
 * both).  The name stays for the scripts that know it.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "perf_common.h"

/* MPI's names for sluice's types and ops; MPI has no 16-bit floats and no
 * average, so those stay MPI_DATATYPE_NULL / MPI_OP_NULL. */
static MPI_Datatype mpi_type(sluice_datatype_t t)
{
	switch (t) {
	case SLUICE_INT8: return MPI_INT8_T;
	case SLUICE_UINT8: return MPI_UINT8_T;
	case SLUICE_INT32: return MPI_INT32_T;
	case SLUICE_UINT32: return MPI_UINT32_T;
	case SLUICE_INT64: return MPI_INT64_T;
	case SLUICE_UINT64: return MPI_UINT64_T;
	case SLUICE_FLOAT32: return MPI_FLOAT;
	case SLUICE_FLOAT64: return MPI_DOUBLE;
	default: return MPI_DATATYPE_NULL;
	}
}

static MPI_Op mpi_op(sluice_redop_t op)
{
	switch (op) {
	case SLUICE_SUM: return MPI_SUM;
	case SLUICE_PROD: return MPI_PROD;
	case SLUICE_MAX: return MPI_MAX;
	case SLUICE_MIN: return MPI_MIN;
	default: return MPI_OP_NULL;
	}
}

/* The datatypes and ops MPI has no built-in one for (perf_backend.lacks). */
static const char *mpi_lacks(sluice_datatype_t t, sluice_redop_t op, bool reduces)
{
	if (mpi_type(t) == MPI_DATATYPE_NULL)
		return "MPI has no built-in half, bfloat16 or fp8";
	return reduces && mpi_op(op) == MPI_OP_NULL ? "MPI has no built-in avg" : NULL;
}

static size_t mpi_size(MPI_Datatype t)
{
	int size = 0;

	MPI_Type_size(t, &size);
	return (size_t)size;
}

static int fail(const char *what, int err)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;

	MPI_Error_string(err, msg, &len);
	fprintf(stderr, "mpi-allreduce-perf: %s: %.*s\n", what, len, msg);
	return -1;
}

/* Byte distance from b to a. */
static ptrdiff_t gap(const void *a, const void *b)
{
	return (const char *)a - (const char *)b;
}

/* All-to-allv in all-to-all's layout: n elements for every rank, block j
 * for rank j.  The counts are allocated once, not timed with every call. */
static int mpi_alltoallv(const void *send, void *recv, int n, MPI_Datatype t, int size)
{
	static int *counts;

	if (!counts && !(counts = malloc(2 * (size_t)size * sizeof(int)))) {
		fprintf(stderr, "mpi-allreduce-perf: no memory for all-to-allv's counts of %d ranks\n", size);
		return MPI_ERR_NO_MEM;
	}
	for (int j = 0; j < size; j++) {
		counts[j] = n;
		counts[size + j] = j * n;
	}
	return MPI_Alltoallv(send, counts, counts + size, t, recv, counts, counts + size, t, MPI_COMM_WORLD);
}

/* One call; NCCL's in-place layouts (see sluice.h) become MPI_IN_PLACE. */
static int mpi_call(enum perf_coll c, const void *send, void *recv, int n, MPI_Datatype t, MPI_Op op,
		    int root, int rank, int size)
{
	ptrdiff_t block = (ptrdiff_t)n * (ptrdiff_t)mpi_size(t), mine = rank * block;
	bool at_mine = send && recv && gap(send, recv) == mine; /* all-gather, gather */
	bool same = send && send == recv;

	switch (c) {
	case PERF_ALLREDUCE: return MPI_Allreduce(same ? MPI_IN_PLACE : send, recv, n, t, op, MPI_COMM_WORLD);
	case PERF_ALLGATHER: return MPI_Allgather(at_mine ? MPI_IN_PLACE : send, n, t, recv, n, t, MPI_COMM_WORLD);
	case PERF_REDUCE_SCATTER:
		if (send && recv && gap(recv, send) == mine) {
			/* MPI's in place leaves the result at the buffer's start: move it to NCCL's place */
			int err = MPI_Reduce_scatter_block(MPI_IN_PLACE, (void *)send, n, t, op, MPI_COMM_WORLD);
			memmove(recv, send, (size_t)block);
			return err;
		}
		return MPI_Reduce_scatter_block(send, recv, n, t, op, MPI_COMM_WORLD);
	case PERF_BROADCAST:
		if (rank == root && !same)
			memcpy(recv, send, (size_t)block);
		return MPI_Bcast(recv, n, t, root, MPI_COMM_WORLD);
	case PERF_REDUCE:
		return MPI_Reduce(rank == root && same ? MPI_IN_PLACE : send, recv, n, t, op, root, MPI_COMM_WORLD);
	case PERF_ALLTOALL: return MPI_Alltoall(same ? MPI_IN_PLACE : send, n, t, recv, n, t, MPI_COMM_WORLD);
	case PERF_GATHER:
		return MPI_Gather(rank == root && at_mine ? MPI_IN_PLACE : send, n, t, recv, n, t, root, MPI_COMM_WORLD);
	case PERF_SCATTER:
		return MPI_Scatter(send, n, t, rank == root && send && gap(recv, send) == mine ? MPI_IN_PLACE : recv,
				   n, t, root, MPI_COMM_WORLD);
	case PERF_ALLTOALLV: return mpi_alltoallv(send, recv, n, t, size);
	case PERF_BARRIER: return MPI_Barrier(MPI_COMM_WORLD);
	default:
		return MPI_Sendrecv(send, n, t, (rank + 1) % size, 0, recv, n, t, (rank + size - 1) % size, 0,
				    MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	}
}

static int mpi_run(void *ctx, enum perf_coll c, const void *send, void *recv, size_t count,
		   sluice_datatype_t dtype, sluice_redop_t op, int root)
{
	int rank, size;

	(void)ctx;
	if (count > (size_t)INT32_MAX)
		return fail(perf_coll_name(c), MPI_ERR_COUNT);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int err = mpi_call(c, send, recv, (int)count, mpi_type(dtype), mpi_op(op), root, rank, size);
	return err == MPI_SUCCESS ? 0 : fail(perf_coll_name(c), err);
}

static int mpi_sum_doubles(void *ctx, double *vals, int n)
{
	(void)ctx;
	int err = MPI_Allreduce(MPI_IN_PLACE, vals, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	return err == MPI_SUCCESS ? 0 : fail("MPI_Allreduce", err);
}

int main(int argc, char **argv)
{
	struct perf_opts o;
	struct perf_backend b = { .name = "mpi", .run = mpi_run,
				  .sum_doubles = mpi_sum_doubles, .lacks = mpi_lacks };
	int rc = 1;

	perf_parse(argc, argv, &o); /* before MPI_Init: -h and bad flags just exit */
	if (o.gpu) {
		fprintf(stderr, "%s: -G: this harness measures Open MPI on host buffers only\n", argv[0]);
		return 2;
	}
	MPI_Init(&argc, &argv);
	/* errors come back as codes, so the table can say what failed */
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
	MPI_Comm_size(MPI_COMM_WORLD, &b.nranks);
	size_t bytes = o.max_bytes < 8 * 256 ? 8 * 256 : o.max_bytes;
	void *send = NULL, *recv = NULL;
	if (MPI_Alloc_mem((MPI_Aint)bytes, MPI_INFO_NULL, &send) != MPI_SUCCESS ||
	    MPI_Alloc_mem((MPI_Aint)bytes, MPI_INFO_NULL, &recv) != MPI_SUCCESS)
		fprintf(stderr, "mpi-allreduce-perf: cannot allocate 2 x %zu bytes\n", bytes);
	else
		rc = perf_run(&o, &b, send, recv);
	if (send)
		MPI_Free_mem(send);
	if (recv)
		MPI_Free_mem(recv);
	MPI_Finalize();
	return rc;
}

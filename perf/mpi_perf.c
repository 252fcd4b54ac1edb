/*
 * mpi_perf.c: mpi-allreduce-perf, the same table and flags as sluice-perf
 * for MPI_Allreduce, so that sluice can be measured against Open MPI on the
 * same machine and medium (perf/vs-openmpi.sh runs both).
 */
#include <stdint.h>
#include <stdio.h>

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

static int fail(const char *what, int err)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;

	MPI_Error_string(err, msg, &len);
	fprintf(stderr, "mpi-allreduce-perf: %s: %.*s\n", what, len, msg);
	return -1;
}

static int mpi_allreduce(void *ctx, const void *send, void *recv, size_t count,
			 sluice_datatype_t dtype, sluice_redop_t op)
{
	(void)ctx;
	if (count > (size_t)INT32_MAX)
		return fail("MPI_Allreduce", MPI_ERR_COUNT);
	int err = MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, (int)count,
				mpi_type(dtype), mpi_op(op), MPI_COMM_WORLD);
	return err == MPI_SUCCESS ? 0 : fail("MPI_Allreduce", err);
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
	struct perf_backend b = { .name = "mpi", .allreduce = mpi_allreduce,
				  .sum_doubles = mpi_sum_doubles };
	int rc = 1;

	perf_parse(argc, argv, &o); /* before MPI_Init: -h and bad flags just exit */
	MPI_Init(&argc, &argv);
	/* errors come back as codes, so the table can say what failed */
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
	MPI_Comm_size(MPI_COMM_WORLD, &b.nranks);
	if (mpi_type(o.dtype) == MPI_DATATYPE_NULL || mpi_op(o.op) == MPI_OP_NULL) {
		if (b.rank == 0)
			fprintf(stderr, "mpi-allreduce-perf: MPI has no built-in half, bfloat16 or avg\n");
		MPI_Finalize();
		return 2;
	}
	size_t bytes = o.max_bytes < 8 ? 8 : o.max_bytes;
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

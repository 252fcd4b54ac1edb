/*
 * it_shapes.h: the collectives' shapes for integration-test rank programs:
 * how many elements each rank's send and recv buffers hold (sluice.h's
 * table), NCCL's in-place layouts, and posting any of them by number.
 * Each program defines `static int rank, nranks` before including it.
 */
#ifndef SLUICE_IT_SHAPES_H
#define SLUICE_IT_SHAPES_H

#include <stdbool.h>
#include <stddef.h>

#include <sluice/sluice.h>

enum coll { ALLREDUCE, ALLGATHER, REDUCE_SCATTER, BROADCAST, REDUCE, ALLTOALL, GATHER, SCATTER, NCOLLS };
static const char *const coll_names[NCOLLS] = { "allreduce", "allgather", "reduce_scatter", "broadcast",
						"reduce", "alltoall", "gather", "scatter" };

/* Elements in this rank's send and recv buffers (sluice.h's table). */
static inline void sizes(enum coll c, size_t count, int root, size_t *ns, size_t *nr)
{
	size_t n = (size_t)nranks;
	size_t s[NCOLLS] = { count, count, n * count, rank == root ? count : 0, count, n * count, count,
			     rank == root ? n * count : 0 };
	size_t r[NCOLLS] = { count, n * count, count, count, rank == root ? count : 0, n * count,
			     rank == root ? n * count : 0, count };
	*ns = s[c];
	*nr = r[c];
}

/* NCCL's in-place layouts: where send sits in recv (or recv in send), in elements. */
static inline bool in_place_at(enum coll c, size_t count, int root, size_t *send_at, size_t *recv_at)
{
	*send_at = *recv_at = 0;
	switch (c) {
	case ALLGATHER: *send_at = (size_t)rank * count; return true;
	case GATHER: *send_at = (size_t)rank * count; return rank == root;
	case REDUCE_SCATTER: *recv_at = (size_t)rank * count; return true;
	case SCATTER: *recv_at = (size_t)rank * count; return rank == root;
	case BROADCAST: case REDUCE: return rank == root;
	default: return true;
	}
}

static inline sluice_result_t post(sluice_comm_t *comm, enum coll c, const void *s, void *r, size_t count,
				   sluice_datatype_t t, sluice_redop_t op, int root, sluice_req_t **req)
{
	switch (c) {
	case ALLREDUCE: return sluice_allreduce(comm, s, r, count, t, op, req);
	case ALLGATHER: return sluice_allgather(comm, s, r, count, t, req);
	case REDUCE_SCATTER: return sluice_reduce_scatter(comm, s, r, count, t, op, req);
	case BROADCAST: return sluice_broadcast(comm, s, r, count, t, root, req);
	case REDUCE: return sluice_reduce(comm, s, r, count, t, op, root, req);
	case ALLTOALL: return sluice_alltoall(comm, s, r, count, t, req);
	case GATHER: return sluice_gather(comm, s, r, count, t, root, req);
	default: return sluice_scatter(comm, s, r, count, t, root, req);
	}
}

#endif

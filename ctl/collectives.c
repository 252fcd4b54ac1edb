/*
 * collectives.c: the public collective calls (sluice_allreduce,
 * sluice_allgather, ..., sluice_send/recv).  Each is one description of its
 * arguments; one checker refuses bad ones with a message that names the
 * call, before anything reaches the dataplane, and coll.c posts the rest.
 */
#include <stdio.h>

#include "internal.h"

static bool is_float(sluice_datatype_t dtype)
{
	return dtype == SLUICE_FLOAT16 || dtype == SLUICE_FLOAT32 || dtype == SLUICE_FLOAT64 ||
	       dtype == SLUICE_BFLOAT16 || dtype == SLUICE_FLOAT8_E4M3 || dtype == SLUICE_FLOAT8_E5M2;
}

static bool reduces(uint32_t opcode)
{
	return opcode == SL_OP_ALLREDUCE || opcode == SL_OP_REDUCE_SCATTER || opcode == SL_OP_REDUCE;
}

static bool has_root(uint32_t opcode)
{
	return opcode == SL_OP_BROADCAST || opcode == SL_OP_REDUCE || opcode == SL_OP_GATHER ||
	       opcode == SL_OP_SCATTER || opcode == SL_OP_SEND || opcode == SL_OP_RECV;
}

/* Where send sits relative to recv when the call runs in place (NCCL's layouts). */
static int64_t in_place_delta(const struct sl_call *c, int rank, size_t block)
{
	switch (c->opcode) {
	case SL_OP_ALLGATHER: case SL_OP_GATHER: return (int64_t)(rank * block);
	case SL_OP_REDUCE_SCATTER: case SL_OP_SCATTER: return -(int64_t)(rank * block);
	default: return 0;
	}
}

static sluice_result_t check_type_op(const struct sl_call *c)
{
	if (sluice_datatype_size(c->dtype) == 0)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "%s: datatype %d is not a sluice_datatype_t: use "
			       "SLUICE_INT8 to SLUICE_FLOAT8_E5M2", c->fn, (int)c->dtype);
	if (!reduces(c->opcode))
		return SLUICE_OK;
	if ((unsigned)c->op >= SLUICE_REDOP_COUNT)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "%s: op %d is not a sluice_redop_t: use SLUICE_SUM, "
			       "SLUICE_PROD, SLUICE_MAX, SLUICE_MIN or SLUICE_AVG", c->fn, (int)c->op);
	if (c->op == SLUICE_AVG && !is_float(c->dtype))
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "%s: SLUICE_AVG needs a floating-point datatype, "
			       "not %s (an integer avg would truncate): use SLUICE_SUM and divide", c->fn,
			       sl_datatype_name(c->dtype));
	return SLUICE_OK;
}

static sluice_result_t check_root(const struct sluice_comm *comm, const struct sl_call *c)
{
	bool p2p = c->opcode == SL_OP_SEND || c->opcode == SL_OP_RECV;

	if (c->root < 0 || c->root >= comm->nranks)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "%s: %s %d is not a rank of this %d-rank communicator",
			       c->fn, p2p ? "peer" : "root", c->root, comm->nranks);
	if (p2p && c->root == comm->rank)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "%s: peer %d is this rank itself: copy the buffer "
			       "instead", c->fn, c->root);
	return SLUICE_OK;
}

/* All-to-allv's buffer sizes: the furthest end of any block. */
static bool vector_bytes(const struct sluice_comm *comm, struct sl_call *c, size_t es)
{
	c->send_bytes = c->recv_bytes = 0;
	for (int r = 0; r < comm->nranks; r++) {
		uint64_t limit = UINT64_MAX / es, end;
		for (int side = 0; side < 2; side++) {
			size_t count = c->v[2 * side][r], displ = c->v[2 * side + 1][r];
			uint64_t *bytes = side ? &c->recv_bytes : &c->send_bytes;
			if (displ > limit || count > limit - displ)
				return false;
			end = count ? (displ + count) * es : 0;
			*bytes = end > *bytes ? end : *bytes;
		}
	}
	return true;
}

static sluice_result_t check_vectors(const struct sl_call *c)
{
	for (int k = 0; k < 4; k++)
		if (!c->v[k])
			return sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "%s: the count and displacement arrays must "
				       "not be NULL (one entry per rank each)", c->fn);
	if (c->send && c->send == c->recv)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "%s: send and recv are the same buffer: all-to-allv "
			       "does not run in place; pass disjoint buffers", c->fn);
	return SLUICE_OK;
}

/* Buffer sizes, NULLs and overlap. */
static sluice_result_t check_buffers(const struct sluice_comm *comm, struct sl_call *c)
{
	size_t es = sluice_datatype_size(c->dtype);
	uintptr_t s = (uintptr_t)c->send, d = (uintptr_t)c->recv;
	bool sized = c->opcode == SL_OP_ALLTOALLV
			     ? vector_bytes(comm, c, es)
			     : sl_cmd_bytes(c->opcode, c->count, es, (uint32_t)comm->nranks, (uint32_t)comm->rank,
					    (uint32_t)c->root, 0, &c->send_bytes, &c->recv_bytes);

	if (!sized || c->send_bytes > SIZE_MAX || c->recv_bytes > SIZE_MAX)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "%s: count %zu of %s (%zu bytes each) overflows the "
			       "buffer size: pass the number of elements, not bytes", c->fn, c->count,
			       sl_datatype_name(c->dtype), es);
	if ((c->send_bytes && !c->send) || (c->recv_bytes && !c->recv))
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "%s: send (%p) and recv (%p) must not be NULL "
			       "when count is %zu (rank %d)", c->fn, c->send, (void *)c->recv, c->count, comm->rank);
	if (c->send_bytes && c->recv_bytes && s < d + c->recv_bytes && d < s + c->send_bytes &&
	    (int64_t)(s - d) != in_place_delta(c, comm->rank, c->count * es))
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "%s: send %p (%llu bytes) and recv %p (%llu bytes) "
			       "overlap: run in place with NCCL's layout (see sluice.h), or pass disjoint buffers",
			       c->fn, c->send, (unsigned long long)c->send_bytes, (void *)c->recv,
			       (unsigned long long)c->recv_bytes);
	return SLUICE_OK;
}

sluice_result_t sl_coll_call(sluice_comm_t *comm, struct sl_call c, sluice_req_t **req)
{
	sluice_result_t res;

	if (!comm || !req)
		return sl_fail(SLUICE_ERR_INVALID_ARGUMENT, "%s: comm (%p) and req (%p) must not be NULL", c.fn,
			       (void *)comm, (void *)req);
	if ((res = check_type_op(&c)) != SLUICE_OK)
		return res;
	if (has_root(c.opcode) && (res = check_root(comm, &c)) != SLUICE_OK)
		return res;
	if (c.opcode == SL_OP_ALLTOALLV && (res = check_vectors(&c)) != SLUICE_OK)
		return res;
	if ((res = check_buffers(comm, &c)) != SLUICE_OK)
		return res;
	return sl_coll_post(comm, &c, req);
}

sluice_result_t sluice_allreduce(sluice_comm_t *comm, const void *send, void *recv, size_t count,
				 sluice_datatype_t dtype, sluice_redop_t op, sluice_req_t **req)
{
	struct sl_call c = { .fn = "sluice_allreduce", .opcode = SL_OP_ALLREDUCE, .send = send, .recv = recv,
			     .count = count, .dtype = dtype, .op = op };

	return sl_coll_call(comm, c, req);
}

sluice_result_t sluice_allgather(sluice_comm_t *comm, const void *send, void *recv, size_t count,
				 sluice_datatype_t dtype, sluice_req_t **req)
{
	struct sl_call c = { .fn = "sluice_allgather", .opcode = SL_OP_ALLGATHER, .send = send, .recv = recv,
			     .count = count, .dtype = dtype };

	return sl_coll_call(comm, c, req);
}

sluice_result_t sluice_reduce_scatter(sluice_comm_t *comm, const void *send, void *recv, size_t count,
				      sluice_datatype_t dtype, sluice_redop_t op, sluice_req_t **req)
{
	struct sl_call c = { .fn = "sluice_reduce_scatter", .opcode = SL_OP_REDUCE_SCATTER, .send = send,
			     .recv = recv, .count = count, .dtype = dtype, .op = op };

	return sl_coll_call(comm, c, req);
}

sluice_result_t sluice_broadcast(sluice_comm_t *comm, const void *send, void *recv, size_t count,
				 sluice_datatype_t dtype, int root, sluice_req_t **req)
{
	struct sl_call c = { .fn = "sluice_broadcast", .opcode = SL_OP_BROADCAST, .send = send, .recv = recv,
			     .count = count, .dtype = dtype, .root = root };

	return sl_coll_call(comm, c, req);
}

sluice_result_t sluice_reduce(sluice_comm_t *comm, const void *send, void *recv, size_t count,
			      sluice_datatype_t dtype, sluice_redop_t op, int root, sluice_req_t **req)
{
	struct sl_call c = { .fn = "sluice_reduce", .opcode = SL_OP_REDUCE, .send = send, .recv = recv,
			     .count = count, .dtype = dtype, .op = op, .root = root };

	return sl_coll_call(comm, c, req);
}

sluice_result_t sluice_alltoall(sluice_comm_t *comm, const void *send, void *recv, size_t count,
				sluice_datatype_t dtype, sluice_req_t **req)
{
	struct sl_call c = { .fn = "sluice_alltoall", .opcode = SL_OP_ALLTOALL, .send = send, .recv = recv,
			     .count = count, .dtype = dtype };

	return sl_coll_call(comm, c, req);
}

sluice_result_t sluice_alltoallv(sluice_comm_t *comm, const void *send, const size_t *send_counts,
				 const size_t *send_displs, void *recv, const size_t *recv_counts,
				 const size_t *recv_displs, sluice_datatype_t dtype, sluice_req_t **req)
{
	struct sl_call c = { .fn = "sluice_alltoallv", .opcode = SL_OP_ALLTOALLV, .send = send, .recv = recv,
			     .dtype = dtype, .v = { send_counts, send_displs, recv_counts, recv_displs } };

	return sl_coll_call(comm, c, req);
}

sluice_result_t sluice_gather(sluice_comm_t *comm, const void *send, void *recv, size_t count,
			      sluice_datatype_t dtype, int root, sluice_req_t **req)
{
	struct sl_call c = { .fn = "sluice_gather", .opcode = SL_OP_GATHER, .send = send, .recv = recv,
			     .count = count, .dtype = dtype, .root = root };

	return sl_coll_call(comm, c, req);
}

sluice_result_t sluice_scatter(sluice_comm_t *comm, const void *send, void *recv, size_t count,
			       sluice_datatype_t dtype, int root, sluice_req_t **req)
{
	struct sl_call c = { .fn = "sluice_scatter", .opcode = SL_OP_SCATTER, .send = send, .recv = recv,
			     .count = count, .dtype = dtype, .root = root };

	return sl_coll_call(comm, c, req);
}

sluice_result_t sluice_barrier(sluice_comm_t *comm, sluice_req_t **req)
{
	struct sl_call c = { .fn = "sluice_barrier", .opcode = SL_OP_BARRIER, .dtype = SLUICE_UINT8 };

	return sl_coll_call(comm, c, req);
}

sluice_result_t sluice_send(sluice_comm_t *comm, const void *send, size_t count, sluice_datatype_t dtype,
			    int peer, sluice_req_t **req)
{
	struct sl_call c = { .fn = "sluice_send", .opcode = SL_OP_SEND, .send = send, .count = count,
			     .dtype = dtype, .root = peer };

	return sl_coll_call(comm, c, req);
}

sluice_result_t sluice_recv(sluice_comm_t *comm, void *recv, size_t count, sluice_datatype_t dtype, int peer,
			    sluice_req_t **req)
{
	struct sl_call c = { .fn = "sluice_recv", .opcode = SL_OP_RECV, .recv = recv, .count = count,
			     .dtype = dtype, .root = peer };

	return sl_coll_call(comm, c, req);
}

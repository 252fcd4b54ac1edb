/*
 * sluice_perf.c: sluice-perf, the nccl-tests style benchmark of sluice's
 * collectives (-C picks one: all_reduce by default, all_gather, ...).  Run
 * one process per rank under sluice-run (or any launcher that sets
 * SLUICE_RANK/SLUICE_WORLD_SIZE/SLUICE_ROOT); rank 0 prints the table.
 */
#include <stdio.h>
#include <stdlib.h>

#include <sluice/sluice.h>

#include "perf_common.h"

struct sluice_side {
	sluice_ctx_t *ctx;
	sluice_comm_t *comm;
	int rank, nranks;
	double *scratch; /* dataplane-reachable buffer for sum_doubles */
	int nscratch;    /* its doubles: PERF_SUM_MAX(nranks) */
	size_t *vcounts, *vdispls; /* all-to-allv's, nranks each */
	/* the requests of each -z 0 slot (sendrecv's two), and one more for run */
	sluice_req_t *slots[PERF_WINDOW + 1][2];
};

/* All-to-allv in all-to-all's layout: count elements for every rank, block j for rank j. */
static sluice_result_t post_alltoallv(struct sluice_side *s, const void *send, void *recv, size_t count,
				      sluice_datatype_t dtype, sluice_req_t **req)
{
	for (int j = 0; j < s->nranks; j++) {
		s->vcounts[j] = count;
		s->vdispls[j] = (size_t)j * count;
	}
	return sluice_alltoallv(s->comm, send, s->vcounts, s->vdispls, recv, s->vcounts, s->vdispls, dtype, req);
}

/* Print a failed call with sluice's own account of it. */
static int fail(const char *what, sluice_result_t r)
{
	fprintf(stderr, "sluice-perf: %s: %s: %s\n", what, sluice_get_error_string(r),
		sluice_last_error());
	return -1;
}

static sluice_result_t post(struct sluice_side *s, enum perf_coll coll, const void *send, void *recv,
			    size_t count, sluice_datatype_t dtype, sluice_redop_t op, int root,
			    sluice_req_t **req)
{
	switch (coll) {
	case PERF_ALLREDUCE: return sluice_allreduce(s->comm, send, recv, count, dtype, op, req);
	case PERF_ALLGATHER: return sluice_allgather(s->comm, send, recv, count, dtype, req);
	case PERF_REDUCE_SCATTER: return sluice_reduce_scatter(s->comm, send, recv, count, dtype, op, req);
	case PERF_BROADCAST: return sluice_broadcast(s->comm, send, recv, count, dtype, root, req);
	case PERF_REDUCE: return sluice_reduce(s->comm, send, recv, count, dtype, op, root, req);
	case PERF_ALLTOALL: return sluice_alltoall(s->comm, send, recv, count, dtype, req);
	case PERF_GATHER: return sluice_gather(s->comm, send, recv, count, dtype, root, req);
	case PERF_SCATTER: return sluice_scatter(s->comm, send, recv, count, dtype, root, req);
	case PERF_ALLTOALLV: return post_alltoallv(s, send, recv, count, dtype, req);
	case PERF_BARRIER: return sluice_barrier(s->comm, req);
	default: return SLUICE_ERR_INTERNAL; /* sendrecv: two requests, see sl_run */
	}
}

/* Send to rank + 1 and receive from rank - 1, as one group. */
static int sl_sendrecv(struct sluice_side *s, const void *send, void *recv, size_t count, sluice_datatype_t dtype,
		       sluice_req_t *reqs[2])
{
	sluice_result_t r;

	sluice_group_start();
	if ((r = sluice_send(s->comm, send, count, dtype, (s->rank + 1) % s->nranks, &reqs[0])) != SLUICE_OK ||
	    (r = sluice_recv(s->comm, recv, count, dtype, (s->rank + s->nranks - 1) % s->nranks, &reqs[1])) !=
		    SLUICE_OK) {
		sluice_group_end();
		return fail("sluice_send/recv", r);
	}
	if ((r = sluice_group_end()) != SLUICE_OK)
		return fail("sluice_group_end", r);
	return 0;
}

/* Start a call in slot (its requests wait there for sl_wait). */
static int sl_post(void *ctx, unsigned slot, enum perf_coll coll, const void *send, void *recv, size_t count,
		   sluice_datatype_t dtype, sluice_redop_t op, int root)
{
	struct sluice_side *s = ctx;
	sluice_req_t **reqs = s->slots[slot];
	sluice_result_t r;

	reqs[0] = reqs[1] = NULL;
	if (coll == PERF_SENDRECV)
		return sl_sendrecv(s, send, recv, count, dtype, reqs);
	if ((r = post(s, coll, send, recv, count, dtype, op, root, &reqs[0])) != SLUICE_OK)
		return fail(perf_coll_name(coll), r);
	return 0;
}

static int sl_wait(void *ctx, unsigned slot)
{
	struct sluice_side *s = ctx;
	int rc = 0;

	for (int k = 0; k < 2; k++) {
		sluice_req_t *req = s->slots[slot][k];
		sluice_result_t r;
		s->slots[slot][k] = NULL;
		if (req && (r = sluice_wait(req)) != SLUICE_OK && rc == 0)
			rc = fail("sluice_wait", r);
	}
	return rc;
}

/* One blocking call, in the slot past -z 0's. */
static int sl_run(void *ctx, enum perf_coll coll, const void *send, void *recv, size_t count,
		  sluice_datatype_t dtype, sluice_redop_t op, int root)
{
	return sl_post(ctx, PERF_WINDOW, coll, send, recv, count, dtype, op, root) < 0 ? -1 : sl_wait(ctx, PERF_WINDOW);
}

/* The side channel is sluice itself: one float64 sum all-reduce. */
static int sl_sum_doubles(void *ctx, double *vals, int n)
{
	struct sluice_side *s = ctx;

	if (n > s->nscratch) {
		fprintf(stderr, "sluice-perf: a sum of %d doubles does not fit the %d-double scratch buffer\n", n,
			s->nscratch);
		return -1;
	}
	for (int i = 0; i < n; i++)
		s->scratch[i] = vals[i];
	if (sl_run(ctx, PERF_ALLREDUCE, s->scratch, s->scratch, (size_t)n, SLUICE_FLOAT64, SLUICE_SUM, 0) < 0)
		return -1;
	for (int i = 0; i < n; i++)
		vals[i] = s->scratch[i];
	return 0;
}

static int attach(struct sluice_side *s, struct perf_backend *b)
{
	sluice_result_t r;

	if ((r = sluice_init(&s->ctx)) != SLUICE_OK)
		return fail("sluice_init", r);
	if ((r = sluice_comm_init_env(s->ctx, &s->comm)) != SLUICE_OK)
		return fail("sluice_comm_init_env", r);
	if ((r = sluice_comm_rank(s->comm, &b->rank)) != SLUICE_OK ||
	    (r = sluice_comm_size(s->comm, &b->nranks)) != SLUICE_OK)
		return fail("sluice_comm_rank/size", r);
	s->rank = b->rank;
	s->nranks = b->nranks;
	s->nscratch = PERF_SUM_MAX(b->nranks);
	s->vcounts = calloc(2 * (size_t)s->nranks, sizeof(size_t));
	if (!s->vcounts) {
		fprintf(stderr, "sluice-perf: no memory for all-to-allv's counts of %d ranks\n", s->nranks);
		return -1;
	}
	s->vdispls = s->vcounts + s->nranks;
	if ((r = sluice_mem_alloc(s->ctx, (size_t)s->nscratch * sizeof(double), (void **)&s->scratch)) !=
	    SLUICE_OK)
		return fail("sluice_mem_alloc", r);
	return 0;
}

/* Tear down whatever attach() and main() got to; NULLs are skipped. */
static void detach(struct sluice_side *s, void *send, void *recv)
{
	if (send)
		sluice_mem_free(s->ctx, send);
	if (recv)
		sluice_mem_free(s->ctx, recv);
	if (s->scratch)
		sluice_mem_free(s->ctx, s->scratch);
	free(s->vcounts);
	if (s->comm)
		sluice_comm_destroy(s->comm);
	if (s->ctx)
		sluice_finalize(s->ctx);
}

#ifdef SLUICE_PERF_CUDA
#include <cuda_runtime_api.h>

static int gpu_copy(void *dst, const void *src, size_t bytes, bool to_device)
{
	cudaError_t e = cudaMemcpy(dst, src, bytes, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);

	/* From pageable memory cudaMemcpy may return before its DMA lands; the
	 * dataplane (another stream, or another process) must see the bytes */
	if (e == cudaSuccess && to_device)
		e = cudaStreamSynchronize(0);
	if (e != cudaSuccess) {
		fprintf(stderr, "sluice-perf: cudaMemcpy of %zu bytes failed: %s\n", bytes, cudaGetErrorString(e));
		return -1;
	}
	return 0;
}

/* -G: send and recv on GPU (rank modulo the GPUs, or SLUICE_GPU), registered,
 * with host copies for filling and checking. */
static int gpu_buffers(struct sluice_side *s, size_t bytes, void **send, void **recv, struct perf_mirror *m)
{
	const char *env = getenv("SLUICE_GPU");
	int ndev = 0, dev;
	cudaError_t e;
	sluice_result_t r;

	if ((e = cudaGetDeviceCount(&ndev)) != cudaSuccess || ndev == 0) {
		fprintf(stderr, "sluice-perf: -G needs a GPU: %s\n", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
		return -1;
	}
	dev = env && *env ? atoi(env) : s->rank % ndev;
	if ((e = cudaSetDevice(dev)) != cudaSuccess || (e = cudaMalloc(send, bytes)) != cudaSuccess ||
	    (e = cudaMalloc(recv, bytes)) != cudaSuccess) {
		fprintf(stderr, "sluice-perf: %zu bytes on GPU %d: %s\n", bytes, dev, cudaGetErrorString(e));
		return -1;
	}
	if ((r = sluice_mem_register(s->ctx, *send, bytes)) != SLUICE_OK ||
	    (r = sluice_mem_register(s->ctx, *recv, bytes)) != SLUICE_OK)
		return fail("sluice_mem_register", r);
	*m = (struct perf_mirror){ .send_host = malloc(bytes), .recv_host = malloc(bytes), .copy = gpu_copy };
	return m->send_host && m->recv_host ? 0 : -1;
}

static void gpu_free(struct sluice_side *s, void *send, void *recv, struct perf_mirror *m)
{
	sluice_mem_deregister(s->ctx, send);
	sluice_mem_deregister(s->ctx, recv);
	cudaFree(send);
	cudaFree(recv);
	free(m->send_host);
	free(m->recv_host);
}
#else
static int gpu_buffers(struct sluice_side *s, size_t bytes, void **send, void **recv, struct perf_mirror *m)
{
	(void)s, (void)bytes, (void)send, (void)recv, (void)m;
	fprintf(stderr, "sluice-perf: -G: this sluice-perf was built without CUDA "
			"(meson setup -Dcuda=enabled where nvcc is)\n");
	return -1;
}

static void gpu_free(struct sluice_side *s, void *send, void *recv, struct perf_mirror *m)
{
	(void)s, (void)send, (void)recv, (void)m;
}
#endif

int main(int argc, char **argv)
{
	struct perf_opts o;
	struct sluice_side s = { 0 };
	struct perf_backend b = { .name = "sluice", .ctx = &s, .run = sl_run, .post = sl_post, .wait = sl_wait,
				  .sum_doubles = sl_sum_doubles };
	void *send = NULL, *recv = NULL;
	struct perf_mirror mirror = { 0 };
	sluice_result_t r;
	int rc = 1;

	perf_parse(argc, argv, &o);
	/* a row has one element per block at least: room for 8-byte ones on every rank */
	size_t bytes = o.max_bytes < 8 * 256 ? 8 * 256 : o.max_bytes;
	if (attach(&s, &b) < 0)
		goto out;
	if (o.gpu) {
		if (gpu_buffers(&s, bytes, &send, &recv, &mirror) == 0) {
			b.mirror = &mirror;
			rc = perf_run(&o, &b, send, recv);
		}
		gpu_free(&s, send, recv, &mirror);
		send = recv = NULL;
		goto out;
	}
	if ((r = sluice_mem_alloc(s.ctx, bytes, &send)) != SLUICE_OK ||
	    (r = sluice_mem_alloc(s.ctx, bytes, &recv)) != SLUICE_OK) {
		fail("sluice_mem_alloc", r);
		goto out;
	}
	rc = perf_run(&o, &b, send, recv);
out:
	detach(&s, send, recv);
	return rc;
}

/*
 * sluice.h: the public API of libsluice.
 *
 * An application attaches to a dataplane (a running sluiced, or one embedded
 * in its own process), allocates buffers the dataplane can reach, joins a
 * communicator through a rendezvous, and posts collectives that run on the
 * dataplane's polling cores.  Every call returns a sluice_result_t; on
 * failure sluice_last_error() holds a sentence saying what failed, where,
 * and what to do.  No DPDK or CUDA type appears here.
 */
#ifndef SLUICE_H
#define SLUICE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SLUICE_VERSION_MAJOR 0
#define SLUICE_VERSION_MINOR 2

typedef enum {
	SLUICE_OK = 0,
	SLUICE_ERR_INVALID_ARGUMENT = 1, /* a bad pointer, size, type or op */
	SLUICE_ERR_INVALID_USAGE = 2,    /* a call in the wrong state or order */
	SLUICE_ERR_SYSTEM = 3,           /* an OS call failed (errno in the message) */
	SLUICE_ERR_INTERNAL = 4,         /* a bug in sluice: please report it */
	SLUICE_ERR_REMOTE = 5,           /* a peer failed or aborted */
	SLUICE_ERR_TIMEOUT = 6,          /* a peer or the dataplane stopped answering */
	SLUICE_ERR_MISMATCH = 7,         /* ranks called different collectives */
	SLUICE_ERR_UNAVAILABLE = 8,      /* no dataplane to attach to */
	SLUICE_ERR_NO_MEMORY = 9,        /* out of memory or ring slots */
	SLUICE_IN_PROGRESS = 10,         /* sluice_test: not finished yet */
	SLUICE_RESULT_COUNT
} sluice_result_t;

typedef enum {
	SLUICE_INT8 = 0,
	SLUICE_UINT8 = 1,
	SLUICE_INT32 = 2,
	SLUICE_UINT32 = 3,
	SLUICE_INT64 = 4,
	SLUICE_UINT64 = 5,
	/* float16 and bfloat16 are reduced through float32 and rounded to
	 * nearest even; a NaN result is always the positive quiet NaN (0x7e00,
	 * 0x7fc0), as in fp8 below, whichever input NaN the CPU passed on. */
	SLUICE_FLOAT16 = 6,
	SLUICE_FLOAT32 = 7,
	SLUICE_FLOAT64 = 8,
	SLUICE_BFLOAT16 = 9,
	/* OCP 8-bit floats, reduced through float32 and rounded to nearest even.
	 * A finite result beyond the format's largest finite value saturates to
	 * it (448 for e4m3, 57344 for e5m2), as NCCL's fp8 reductions do: e4m3
	 * has no Inf to overflow to, and a saturated sum stays usable.  NaN stays
	 * NaN, always the positive one (0x7f in e4m3, 0x7e in e5m2), so that
	 * every CPU and build gives the same bits; an Inf input stays Inf in e5m2. */
	SLUICE_FLOAT8_E4M3 = 10,
	SLUICE_FLOAT8_E5M2 = 11,
	SLUICE_DATATYPE_COUNT
} sluice_datatype_t;

typedef enum {
	SLUICE_SUM = 0,
	SLUICE_PROD = 1,
	SLUICE_MAX = 2,
	SLUICE_MIN = 3,
	SLUICE_AVG = 4,
	SLUICE_REDOP_COUNT
} sluice_redop_t;

/* An attachment to one dataplane. */
typedef struct sluice_ctx sluice_ctx_t;
/* A group of ranks, one per process, joined through a rendezvous. */
typedef struct sluice_comm sluice_comm_t;
/* One posted collective. */
typedef struct sluice_req sluice_req_t;

/*
 * Attach to a dataplane.  SLUICE_SOCKET (default /run/sluice/sluiced.sock)
 * names a running sluiced; SLUICE_EMBEDDED=1 starts the engine on a thread
 * of this process instead (SLUICE_EMBEDDED_ARGS gives its sluiced flags).
 */
sluice_result_t sluice_init(sluice_ctx_t **ctx);
sluice_result_t sluice_finalize(sluice_ctx_t *ctx);

/*
 * Buffers must be reachable by the dataplane: allocate them here.  Memory
 * from anywhere else is refused by every collective with a clear error.
 * A dataplane in its own process (a daemon) touches every page when it
 * maps the allocation, so that no call pays a page's first access (10-14
 * us a page on some VMs): a large allocation takes some milliseconds a MiB.
 * So the dataplane's answer is waited for SLUICE_TIMEOUT and 10 s more per
 * GiB (or part of one) of the area, a day more at most; sluice_mem_register
 * alike.
 */
sluice_result_t sluice_mem_alloc(sluice_ctx_t *ctx, size_t size, void **ptr);
sluice_result_t sluice_mem_free(sluice_ctx_t *ctx, void *ptr);

/*
 * GPU buffers: register [ptr, ptr + size) of CUDA device memory (cudaMalloc)
 * once, then pass pointers inside it to any collective, exactly as host
 * buffers.  Arriving chunks are reduced straight into it on the GPU by the
 * dataplane's persistent kernel; sends leave through pipelined device-to-host
 * copies.  Both buffers of one call must be on the same GPU.  Host memory,
 * managed memory and a range past its allocation's end are refused with the
 * reason; a build without CUDA refuses every pointer.  Deregister before
 * cudaFree.  The calls are not stream-ordered: a GPU buffer must hold its
 * input when the call is made (synchronize whatever wrote it; a cudaMemcpy
 * from pageable memory may return before its bytes land), and the results
 * are in device memory once sluice_wait (or sluice_test) says the call is done.
 */
sluice_result_t sluice_mem_register(sluice_ctx_t *ctx, void *ptr, size_t size);
sluice_result_t sluice_mem_deregister(sluice_ctx_t *ctx, void *ptr);

/*
 * Join a communicator of nranks ranks.  root is "host:port" where rank 0
 * listens; NULL takes SLUICE_ROOT.  Blocks until every rank has joined or
 * SLUICE_TIMEOUT (seconds, default 60 here; sluiced's own is 30) passes.
 */
sluice_result_t sluice_comm_init(sluice_ctx_t *ctx, int nranks, int rank,
				 const char *root, sluice_comm_t **comm);
/* The same, with rank and size from SLUICE_RANK/SLUICE_WORLD_SIZE or the
 * launcher's variables (RANK/WORLD_SIZE, OMPI_COMM_WORLD_*, SLURM_*). */
sluice_result_t sluice_comm_init_env(sluice_ctx_t *ctx, sluice_comm_t **comm);
/* Waits until the sends of calls already reported done are acknowledged
 * (a small call is done once its results are in place, and the dataplane
 * resends from its own copy), and for every live peer's destroy (each
 * dataplane tells the others what it saw; a peer that never destroys holds
 * this one SLUICE_TIMEOUT at most, then is not waited for).  Sends to a
 * peer that has destroyed need no acknowledgement, and that peer going
 * silent afterwards is no failure.  A failure that no call has reported
 * yet (a peer's call found to differ after this rank's was done, on any
 * rank, or one rank making more collective calls) is returned here. */
sluice_result_t sluice_comm_destroy(sluice_comm_t *comm);
sluice_result_t sluice_comm_rank(const sluice_comm_t *comm, int *rank);
sluice_result_t sluice_comm_size(const sluice_comm_t *comm, int *nranks);

/*
 * recv[i] = op over ranks of send[i], for i < count, on every rank.
 * send == recv runs in place.  Returns at once with a request to wait on.
 */
sluice_result_t sluice_allreduce(sluice_comm_t *comm, const void *send, void *recv,
				 size_t count, sluice_datatype_t dtype, sluice_redop_t op,
				 sluice_req_t **req);

/*
 * The other collectives, in NCCL's shape.  count is per block: what each
 * rank contributes (all-gather, gather), receives (reduce-scatter,
 * scatter) or sends to each peer (all-to-all).  Buffers hold:
 *   allgather        send: count       recv: nranks x count
 *   reduce_scatter   send: nranks x count   recv: count
 *   broadcast        send: count (root only)  recv: count
 *   reduce           send: count       recv: count (root only)
 *   alltoall         send and recv: nranks x count (block j goes to rank j)
 *   gather           send: count       recv: nranks x count (root only)
 *   scatter          send: nranks x count (root only)  recv: count
 * In place as in NCCL: send == recv, or for all-gather and gather send ==
 * recv + rank x count, for reduce-scatter and scatter recv == send + rank x
 * count.  Every rank must make the same calls in the same order with the
 * same count, datatype, op and root; a rank that differs gets (and causes
 * on every rank) SLUICE_ERR_MISMATCH.
 */
sluice_result_t sluice_allgather(sluice_comm_t *comm, const void *send, void *recv, size_t count,
				 sluice_datatype_t dtype, sluice_req_t **req);
sluice_result_t sluice_reduce_scatter(sluice_comm_t *comm, const void *send, void *recv, size_t count,
				      sluice_datatype_t dtype, sluice_redop_t op, sluice_req_t **req);
sluice_result_t sluice_broadcast(sluice_comm_t *comm, const void *send, void *recv, size_t count,
				 sluice_datatype_t dtype, int root, sluice_req_t **req);
sluice_result_t sluice_reduce(sluice_comm_t *comm, const void *send, void *recv, size_t count,
			      sluice_datatype_t dtype, sluice_redop_t op, int root, sluice_req_t **req);
sluice_result_t sluice_alltoall(sluice_comm_t *comm, const void *send, void *recv, size_t count,
				sluice_datatype_t dtype, sluice_req_t **req);
sluice_result_t sluice_gather(sluice_comm_t *comm, const void *send, void *recv, size_t count,
			      sluice_datatype_t dtype, int root, sluice_req_t **req);
sluice_result_t sluice_scatter(sluice_comm_t *comm, const void *send, void *recv, size_t count,
			       sluice_datatype_t dtype, int root, sluice_req_t **req);
/*
 * All-to-all with a count per peer (MPI's Alltoallv): block j of send
 * (send_counts[j] elements from element send_displs[j]) goes to rank j,
 * whose recv_counts[i] and recv_displs[i] say where rank i's lands.  Counts
 * may be zero; a pair whose counts disagree is a mismatch.  Not in place.
 * The counts are copied (the arrays may be reused once this returns) into
 * a per-context area of 32 KiB (4 * nranks * 8 bytes a call, in 64-byte
 * units): calls in flight past it get SLUICE_ERR_NO_MEMORY until earlier
 * ones finish (512 at 2 ranks, 4 at 256).
 */
sluice_result_t sluice_alltoallv(sluice_comm_t *comm, const void *send, const size_t *send_counts,
				 const size_t *send_displs, void *recv, const size_t *recv_counts,
				 const size_t *recv_displs, sluice_datatype_t dtype, sluice_req_t **req);
/* Finishes on a rank once every rank has called it. */
sluice_result_t sluice_barrier(sluice_comm_t *comm, sluice_req_t **req);

/*
 * Point to point: the k-th send from rank a to rank b pairs with b's k-th
 * recv from a; both must give the same count and datatype.  Sends and recvs
 * never wait for each other inside the dataplane, so any posting order is
 * safe; sluice_group_start/end batch them (and collectives) into one
 * submission, as NCCL's groups do.  A send of more than 64 KiB completes
 * once its data is acknowledged by the peer's dataplane, which keeps early
 * data until the recv is posted; one of at most 64 KiB may complete at once
 * (while the dataplane's budget of such calls lasts), its bytes copied, and
 * the dataplane resends from that copy: a peer that dies
 * before acknowledging it fails a later call on this communicator (within
 * SLUICE_TIMEOUT) or sluice_comm_destroy, naming that peer.
 */
sluice_result_t sluice_send(sluice_comm_t *comm, const void *send, size_t count, sluice_datatype_t dtype,
			    int peer, sluice_req_t **req);
sluice_result_t sluice_recv(sluice_comm_t *comm, void *recv, size_t count, sluice_datatype_t dtype, int peer,
			    sluice_req_t **req);
/* Calls made on this thread between start and end (nested pairs count as
 * one) are submitted together at the outermost end; their requests can be
 * waited on only after it.  End returns the first submission failure. */
sluice_result_t sluice_group_start(void);
sluice_result_t sluice_group_end(void);

/* Block until req finishes (or times out); req is freed either way. */
sluice_result_t sluice_wait(sluice_req_t *req);
/* SLUICE_IN_PROGRESS while running; otherwise the result, and req is freed. */
sluice_result_t sluice_test(sluice_req_t *req);

size_t sluice_datatype_size(sluice_datatype_t dtype);
const char *sluice_get_error_string(sluice_result_t result);
/* The last failure's full message on this thread ("" when none). */
const char *sluice_last_error(void);

#ifdef __cplusplus
}
#endif
#endif

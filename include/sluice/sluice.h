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
#define SLUICE_VERSION_MINOR 1

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
	SLUICE_FLOAT16 = 6,
	SLUICE_FLOAT32 = 7,
	SLUICE_FLOAT64 = 8,
	SLUICE_BFLOAT16 = 9,
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
 */
sluice_result_t sluice_mem_alloc(sluice_ctx_t *ctx, size_t size, void **ptr);
sluice_result_t sluice_mem_free(sluice_ctx_t *ctx, void *ptr);

/*
 * Join a communicator of nranks ranks.  root is "host:port" where rank 0
 * listens; NULL takes SLUICE_ROOT.  Blocks until every rank has joined or
 * SLUICE_TIMEOUT (seconds, default 60) passes.
 */
sluice_result_t sluice_comm_init(sluice_ctx_t *ctx, int nranks, int rank,
				 const char *root, sluice_comm_t **comm);
/* The same, with rank and size from SLUICE_RANK/SLUICE_WORLD_SIZE or the
 * launcher's variables (RANK/WORLD_SIZE, OMPI_COMM_WORLD_*, SLURM_*). */
sluice_result_t sluice_comm_init_env(sluice_ctx_t *ctx, sluice_comm_t **comm);
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

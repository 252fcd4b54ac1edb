/*
 * gdma.h: gpu_dma's interface for the engine.  Three pieces:
 *
 *  - the reducer: the engine posts work (dst = a op payload, or a copy) on a
 *    ring and learns by ticket when it is applied.  The same calls serve
 *    every backend: a persistent CUDA kernel that reduces into device memory,
 *    or the CPU (host memory, or no GPU in the machine).
 *  - registration: what kind of memory a pointer is, and CUDA IPC handles
 *    as plain bytes that the attach socket can carry.
 *  - the send side's stager: device-to-host copies of chunks into pinned
 *    buffers on a stream, each with an event saying when it has landed.
 *
 * Every call that can fail returns 0 or a negative errno and, where it takes
 * err/len, a sentence saying what failed and what to do.  No CUDA type
 * appears here: the engine compiles against this header with or without
 * CUDA, and a build without CUDA answers the CUDA calls with -ENOTSUP.
 */
#ifndef SLUICE_GDMA_H
#define SLUICE_GDMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gdma_ring.h"
#include "reduce.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the reducer ---- */

enum sl_gdma_backend {
	SL_GDMA_CPU = 0,  /* applied in sl_gdma_progress, on the calling core */
	SL_GDMA_CUDA = 1, /* applied by a persistent kernel on cfg.device */
};

struct sl_gdma_cfg {
	enum sl_gdma_backend backend;
	int device;           /* CUDA device ordinal */
	uint32_t slots;       /* ring slots, a power of two; 0 = 4096 */
	uint32_t blocks;      /* CUDA: persistent blocks, one SM each; 0 = 8 */
	uint32_t threads;     /* CUDA: threads per block; 0 = 512 */
	uint32_t split_bytes; /* work above this is split over several items (and
			       * blocks); a multiple of 16; 0 = 64 KiB */
	uint64_t idle_ns;     /* CUDA: let the kernel exit after this long with
			       * nothing outstanding; 0 = 1 ms.  Its blocks also
			       * exit by themselves after 10x that (10 ms at
			       * least) with no work, should progress not run */
	uint64_t arena_bytes; /* pinned landing arena for sl_gdma_post_copy;
			       * 0 = 16 MiB */
};

/* One piece of work: dst[i] = a[i] op src[i] for i < count, or dst[i] = src[i]
 * for SL_GDMA_COPY.  For the CUDA backend dst and a are device memory (or
 * mapped host memory) and src is pinned, mapped host memory (where the
 * payload landed) or device memory (a port that places payloads on the GPU);
 * no alignment is required, 16-byte-aligned addresses go fastest.  src must
 * stay untouched, and dst unread, until the ticket is done. */
struct sl_gdma_work {
	void *dst;
	const void *a;         /* may equal dst; unused for COPY */
	const void *src;
	uint64_t count;        /* elements, > 0 */
	enum sl_dtype dtype;
	enum sl_redop op;      /* AVG reduces as SUM: set avg_div on the last step */
	enum sl_gdma_kind kind;
	uint32_t avg_div;      /* > 0: divide each result by this afterwards */
	bool payload_first;    /* dst = src op a instead (the order decides max, min and NaNs) */
};

struct sl_gdma;

/* Start a reducer.  For SL_GDMA_CUDA: -ENODEV when there is no usable GPU,
 * -ENOTSUP in a build without CUDA; err says which and why. */
int sl_gdma_open(struct sl_gdma **g, const struct sl_gdma_cfg *cfg, char *err, size_t len);
/* Stop the consumer (work not yet applied is dropped) and free everything. */
void sl_gdma_close(struct sl_gdma *g);

/* Queue w.  0 and *ticket, which sl_gdma_done reports once w (and everything
 * posted before it) is applied; -EAGAIN when the ring has no room (call
 * sl_gdma_progress and retry); -EINVAL for bad work; -EIO once the consumer
 * has failed (sl_gdma_error says how). */
int sl_gdma_post(struct sl_gdma *g, const struct sl_gdma_work *w, uint32_t *ticket, char *err,
		 size_t len);
/* The same, for a payload whose memory is not the reducer's to keep (a
 * packet buffer the port wants back now): its count * size bytes are copied
 * from w->src into the reducer's pinned landing arena first, and that copy
 * is what the item reads; the arena space comes back when the ticket is
 * reaped.  -EAGAIN also when the arena is full. */
int sl_gdma_post_copy(struct sl_gdma *g, const struct sl_gdma_work *w, uint32_t *ticket, char *err,
		      size_t len);
/* Whether posting w now would find room (ring slots, and with copy the
 * landing arena's bytes), so that the engine can check before it commits
 * to a packet: false means call sl_gdma_progress and ask again later. */
bool sl_gdma_has_room(struct sl_gdma *g, const struct sl_gdma_work *w, bool copy);
/* The engine calls this from its loop: the CPU backend applies queued work
 * here; every backend reaps completions; the CUDA backend lets an idle kernel
 * exit (so that the application's cudaDeviceSynchronize returns) and notices
 * a kernel that died.  now_ns is the engine's clock.  Returns items reaped. */
uint32_t sl_gdma_progress(struct sl_gdma *g, uint64_t now_ns);
/* Whether ticket (and every ticket before it) is applied. */
bool sl_gdma_done(const struct sl_gdma *g, uint32_t ticket);
/* Items posted and not yet reaped. */
uint32_t sl_gdma_pending(const struct sl_gdma *g);
/* Items ever reaped (free-running): when it moves, room has appeared. */
uint32_t sl_gdma_reaped(const struct sl_gdma *g);
/* Stop the consumer now; work already posted is applied once it restarts
 * (the next post restarts it), never twice.  0, or -EIO if it had failed.
 * cudaDeviceSynchronize, cudaFree, cudaFreeHost and cudaHostUnregister wait
 * for every kernel of the context, this one too: from another thread they
 * return once sl_gdma_progress lets the idle kernel exit; the thread that
 * drives progress itself must call sl_gdma_stop (or close) before them. */
int sl_gdma_stop(struct sl_gdma *g);
/* Device memory was allocated (or imported) since the kernel started: work
 * posted from now on is applied by a kernel launched after this call, never
 * by the running one, which is told to stop without waiting.  Accesses are
 * valid either way; compute-sanitizer's memcheck, though, judges a kernel's
 * accesses by the allocations that existed at its launch. */
void sl_gdma_restart(struct sl_gdma *g);
/* Whether a consumer kernel is running (CUDA); always false for the CPU. */
bool sl_gdma_running(const struct sl_gdma *g);
/* The failure that stopped the consumer, or NULL. */
const char *sl_gdma_error(const struct sl_gdma *g);

/* ---- registration ---- */

enum sl_gdma_mem_kind {
	SL_GDMA_MEM_PAGEABLE = 0, /* ordinary host memory CUDA knows nothing of */
	SL_GDMA_MEM_PINNED = 1,   /* host memory pinned and mapped by CUDA */
	SL_GDMA_MEM_DEVICE = 2,   /* cudaMalloc'd device memory */
	SL_GDMA_MEM_MANAGED = 3,  /* cudaMallocManaged: the dataplane refuses it */
};

struct sl_gdma_mem_info {
	enum sl_gdma_mem_kind kind;
	int device;     /* the owning device, for DEVICE and MANAGED */
	void *base;     /* the allocation holding the range (DEVICE) */
	uint64_t size;  /* its size (DEVICE) */
};

/* Classify [p, p + len).  A DEVICE range must lie inside one allocation.
 * Without CUDA every pointer is PAGEABLE. */
int sl_gdma_mem_query(const void *p, uint64_t len, struct sl_gdma_mem_info *info, char *err,
		      size_t errlen);
/* Whether the reducer on device can use [p, p + len) as dst or a: 0, or
 * -EFAULT with a sentence naming the kind of memory and what to do. */
int sl_gdma_mem_check(const void *p, uint64_t len, int device, char *err, size_t errlen);

/* A device range as plain bytes, for the attach socket: the allocation's IPC
 * handle plus where the range sits in it. */
struct sl_gdma_ipc {
	uint8_t handle[64]; /* cudaIpcMemHandle_t */
	uint64_t offset;    /* of the range inside the allocation */
	uint64_t size;      /* of the range */
	int32_t device;     /* the exporter's device ordinal */
	uint32_t pad;
};

int sl_gdma_ipc_export(const void *p, uint64_t len, struct sl_gdma_ipc *out, char *err, size_t errlen);
/* Map an exported range into this process (on device in->device); *base is
 * what sl_gdma_ipc_close takes, *p the start of the range. */
int sl_gdma_ipc_import(const struct sl_gdma_ipc *in, void **base, void **p, char *err, size_t errlen);
int sl_gdma_ipc_close(void *base, char *err, size_t errlen);

/* Pin and map host memory (the mempool's) so the kernel can read payloads
 * from it at the same addresses. */
int sl_gdma_host_register(void *p, uint64_t len, char *err, size_t errlen);
int sl_gdma_host_unregister(void *p, char *err, size_t errlen);

/* Device memory the engine itself needs (a collective's scratch, with room
 * for the copy of an in-place input), on reducer g's device: stream-ordered
 * on a private stream that g made when it opened, so that neither call waits
 * for the running kernel (cudaMalloc and cudaFree may synchronize the whole
 * device) and none makes a stream on the data path. */
int sl_gdma_dev_alloc(struct sl_gdma *g, uint64_t bytes, void **p, char *err, size_t errlen);
void sl_gdma_dev_free(struct sl_gdma *g, void *p);

/* ---- the send side's stager ---- */

struct sl_gdma_stager;

/* nbufs pinned host buffers of buf_bytes each, a non-blocking stream on
 * device, one event per buffer. */
int sl_gdma_stager_open(struct sl_gdma_stager **s, int device, uint32_t nbufs, uint64_t buf_bytes,
			char *err, size_t len);
void sl_gdma_stager_close(struct sl_gdma_stager *s);
/* Start copying bytes from device memory into a free buffer: 0 and *buf;
 * -EAGAIN when every buffer is in use; -EINVAL when bytes > buf_bytes. */
int sl_gdma_stage(struct sl_gdma_stager *s, const void *dev_src, uint64_t bytes, uint32_t *buf,
		  char *err, size_t len);
/* 1 once buf's copy has landed, 0 while in flight, -EIO if it failed. */
int sl_gdma_stage_ready(struct sl_gdma_stager *s, uint32_t buf);
/* The host address of buf (valid from sl_gdma_stage to release). */
void *sl_gdma_stage_buf(struct sl_gdma_stager *s, uint32_t buf);
/* Give buf back, once the transport no longer needs it (acknowledged). */
void sl_gdma_stage_release(struct sl_gdma_stager *s, uint32_t buf);

#ifdef __cplusplus
}
#endif
#endif

/*
 * gdma_stage.c: the send side for device buffers.  A chunk leaves a GPU
 * buffer through a device-to-host copy into one of a few pinned buffers,
 * queued on the stager's own non-blocking stream: copies run back to back
 * while the engine sends what has already landed (the pipeline), and an
 * event per buffer says when its copy is done.  Buffers come back in any
 * order (the transport releases a chunk when its last packet is
 * acknowledged), so each has its own state rather than a place in a ring.
 */
#include "gdma_impl.h"

#include <errno.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

enum { BUF_FREE, BUF_BUSY };

struct sl_gdma_stager {
	int device;
	cudaStream_t stream;   /* non-blocking: never waits for the application's work */
	uint32_t nbufs;
	uint64_t buf_bytes;
	uint8_t *mem;          /* nbufs * buf_bytes, pinned */
	cudaEvent_t *landed;   /* per buffer: recorded after its copy */
	uint8_t *state;        /* per buffer: BUF_FREE or BUF_BUSY */
};

static int stage_fail(char *err, size_t len, int rc, cudaError_t e, const char *what, int device)
{
	return sl_gdma_fail(err, len, rc, "gpu_dma: %s on CUDA device %d failed: %s", what, device,
			    cudaGetErrorString(e));
}

static cudaError_t make_events(struct sl_gdma_stager *s)
{
	cudaError_t e = cudaSuccess;

	for (uint32_t i = 0; i < s->nbufs && e == cudaSuccess; i++)
		e = cudaEventCreateWithFlags(&s->landed[i], cudaEventDisableTiming);
	return e;
}

static cudaError_t make_stager(struct sl_gdma_stager *s)
{
	cudaError_t e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);

	if (e == cudaSuccess)
		e = cudaHostAlloc((void **)&s->mem, (size_t)s->nbufs * s->buf_bytes, cudaHostAllocPortable);
	if (e == cudaSuccess)
		e = make_events(s);
	return e;
}

int sl_gdma_stager_open(struct sl_gdma_stager **out, int device, uint32_t nbufs, uint64_t buf_bytes, char *err,
			size_t len)
{
	struct sl_gdma_stager *s;
	int prev = 0;
	cudaError_t e;

	*out = NULL;
	if (nbufs == 0 || buf_bytes == 0)
		return sl_gdma_fail(err, len, -EINVAL, "gpu_dma: a stager needs at least one buffer of at "
				    "least one byte (asked for %u x %llu)", nbufs, (unsigned long long)buf_bytes);
	s = calloc(1, sizeof(*s));
	if (!s || !(s->landed = calloc(nbufs, sizeof(*s->landed))) || !(s->state = calloc(nbufs, 1))) {
		sl_gdma_stager_close(s);
		return sl_gdma_fail(err, len, -ENOMEM, "gpu_dma: out of memory for a stager");
	}
	s->device = device;
	s->nbufs = nbufs;
	s->buf_bytes = buf_bytes;
	e = cudaGetDevice(&prev);
	if (e == cudaSuccess && (e = cudaSetDevice(device)) == cudaSuccess) {
		e = make_stager(s);
		cudaSetDevice(prev);
	}
	if (e != cudaSuccess) {
		sl_gdma_stager_close(s);
		return stage_fail(err, len, e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO, e,
				  "setting up the send stager (stream, pinned buffers, events)", device);
	}
	*out = s;
	return 0;
}

void sl_gdma_stager_close(struct sl_gdma_stager *s)
{
	if (!s)
		return;
	if (s->stream)
		cudaStreamSynchronize(s->stream); /* no copy may land in freed memory */
	for (uint32_t i = 0; s->landed && i < s->nbufs; i++)
		if (s->landed[i])
			cudaEventDestroy(s->landed[i]);
	if (s->mem)
		cudaFreeHost(s->mem);
	if (s->stream)
		cudaStreamDestroy(s->stream);
	free(s->landed);
	free(s->state);
	free(s);
}

/* The lowest free buffer, so that the buffers in use are the few that the
 * pipeline has in flight and stay in the CPU's caches between the copy's
 * landing and the frames' build; taking them in turn cycled every buffer
 * through memory (perf/GPU-NOTES.md section 12). */
static int free_buf(struct sl_gdma_stager *s)
{
	for (uint32_t b = 0; b < s->nbufs; b++)
		if (s->state[b] == BUF_FREE)
			return (int)b;
	return -1;
}

int sl_gdma_stage(struct sl_gdma_stager *s, const void *dev_src, uint64_t bytes, uint32_t *buf, char *err,
		  size_t len)
{
	int b = free_buf(s), prev = 0;
	cudaError_t e;

	if (bytes > s->buf_bytes)
		return sl_gdma_fail(err, len, -EINVAL, "gpu_dma: a chunk of %llu bytes does not fit the stager's "
				    "%llu-byte buffers", (unsigned long long)bytes, (unsigned long long)s->buf_bytes);
	if (b < 0)
		return -EAGAIN;
	e = cudaGetDevice(&prev);
	if (e == cudaSuccess && (e = cudaSetDevice(s->device)) == cudaSuccess) {
		e = cudaMemcpyAsync(s->mem + (uint64_t)b * s->buf_bytes, dev_src, bytes, cudaMemcpyDeviceToHost,
				    s->stream);
		if (e == cudaSuccess)
			e = cudaEventRecord(s->landed[b], s->stream);
		cudaSetDevice(prev);
	}
	if (e != cudaSuccess)
		return stage_fail(err, len, -EIO, e, "queueing a device-to-host chunk copy", s->device);
	s->state[b] = BUF_BUSY;
	*buf = (uint32_t)b;
	return 0;
}

int sl_gdma_stage_ready(struct sl_gdma_stager *s, uint32_t buf)
{
	cudaError_t e = cudaEventQuery(s->landed[buf]);

	return e == cudaSuccess ? 1 : e == cudaErrorNotReady ? 0 : -EIO;
}

void *sl_gdma_stage_buf(struct sl_gdma_stager *s, uint32_t buf)
{
	return s->mem + (uint64_t)buf * s->buf_bytes;
}

void sl_gdma_stage_release(struct sl_gdma_stager *s, uint32_t buf)
{
	s->state[buf] = BUF_FREE;
}

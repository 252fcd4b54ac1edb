/*
 * gdma_kernel.h: the C face of gdma_kernel.cu, for gdma_cuda.c.  Results are
 * cudaError_t values as int, so that this header needs no CUDA include.
 */
#ifndef SLUICE_GDMA_KERNEL_H
#define SLUICE_GDMA_KERNEL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Launch the persistent consumer on stream (a cudaStream_t) of the current
 * device: blocks x threads, block b applying tickets first + b + k * blocks
 * of the ring whose shared part is at ring_dev (its device address).
 * Tickets before check_before may have been applied before a stop: the
 * kernel reads their done words and skips those already applied.  The
 * kernel stops at the first item whose epoch is later than its own, and a
 * block exits once it has waited idle_exit_ns for its next item. */
int sl_gdma_kernel_launch(void *ring_dev, uint32_t slots, uint32_t first, uint32_t check_before,
			  uint32_t epoch, uint64_t idle_exit_ns, uint32_t blocks, uint32_t threads, void *stream);
/* How many blocks of threads can be resident at once on the current device:
 * the persistent kernel needs all of its blocks resident. */
int sl_gdma_kernel_max_blocks(uint32_t threads, uint32_t *max_blocks);

#ifdef __cplusplus
}
#endif
#endif

/*
 * gpu_ref.h: the C face of gpu_ref.cu (gpu_dma_bench's yardsticks).
 * Results are cudaError_t values as int.
 */
#ifndef SLUICE_GPU_REF_H
#define SLUICE_GPU_REF_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* d = a + b over n floats (n a multiple of 4, 16-byte aligned), on stream. */
int gref_reduce(float *d, const float *a, const float *b, uint64_t n, int blocks, void *stream);
/* Fill n floats with hashed values in [-1, 1), on the default stream. */
int gref_fill(float *p, uint64_t n, uint32_t seed);

#ifdef __cplusplus
}
#endif
#endif

/*
 * gpu_ref.cu: the yardsticks for gpu_dma_bench: a plain grid-stride
 * float32 reduce kernel (d = a + b, 16-byte accesses, every SM), the rate
 * any reduction of those bytes is held to by memory, and a fill kernel for
 * random-looking data.  Not part of sluice itself.
 */
#include <stdint.h>

#include "gpu_ref.h"

__global__ void reduce_f32(float4 *d, const float4 *a, const float4 *b, uint64_t n4)
{
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n4;
	     i += (uint64_t)gridDim.x * blockDim.x) {
		float4 x = a[i], y = b[i];
		d[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
	}
}

/* A hash of the index: distinct, finite values in [-1, 1), never zeros. */
__global__ void fill_f32(float *p, uint64_t n, uint32_t seed)
{
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x) {
		uint32_t h = (uint32_t)i * 2654435761u ^ seed;
		h ^= h >> 15;
		h *= 2246822519u;
		h ^= h >> 13;
		p[i] = (float)(int32_t)h * 0x1p-31f;
	}
}

extern "C" int gref_reduce(float *d, const float *a, const float *b, uint64_t n, int blocks, void *stream)
{
	reduce_f32<<<blocks, 512, 0, (cudaStream_t)stream>>>((float4 *)d, (const float4 *)a, (const float4 *)b,
							      n / 4);
	return (int)cudaGetLastError();
}

extern "C" int gref_fill(float *p, uint64_t n, uint32_t seed)
{
	fill_f32<<<1024, 256>>>(p, n, seed);
	return (int)cudaGetLastError();
}

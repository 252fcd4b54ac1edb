/*
 * gpu_dma_bench.c: how fast gpu_dma's persistent kernel reduces arriving
 * payloads into device memory, against what memory allows for the same
 * bytes, measured in one run on one GPU.
 *
 * Rates are payload bytes reduced per second (float32 sum, dst = a + src,
 * dst and a in device memory).  Yardsticks, measured first:
 *   - device-to-device copy bandwidth (bytes read + written): a reduction
 *     moves 3 bytes per payload byte, so copy / 3 is the HBM bound;
 *   - a plain grid-stride reduce kernel on every SM (the practical bound);
 *   - pinned host-to-device copy bandwidth: the bound when payloads sit in
 *     host memory, as they do when the NIC cannot write GPU memory;
 *   - the plain kernel reading its src from pinned host memory.
 * Then the persistent kernel fed through the ring by this (host) thread,
 * src in device memory (a port that places payloads on the GPU) and in
 * pinned host memory, over item sizes and block counts; then the latency of
 * one small item, post to done; then the engine's simplest receive path,
 * sl_gdma_post_copy, where this one thread also copies every packet's
 * payload into the reducer's landing arena.
 *
 * Usage: gpu-dma-bench [MiB]   (default 1024)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "gdma.h"
#include "gpu_ref.h"

#define REPS 3

#define CUDA_OK(call)                                                                      \
	do {                                                                               \
		cudaError_t e_ = (call);                                                   \
		if (e_ != cudaSuccess) {                                                   \
			fprintf(stderr, "gpu-dma-bench: %s failed: %s\n", #call,           \
				cudaGetErrorString(e_));                                   \
			exit(1);                                                           \
		}                                                                          \
	} while (0)

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[n / 2];
}

/* ---- yardsticks, timed with events ---- */

static double time_copy(void *dst, const void *src, uint64_t bytes, enum cudaMemcpyKind kind)
{
	cudaEvent_t e0, e1;
	double ms[REPS];
	float t;

	CUDA_OK(cudaEventCreate(&e0));
	CUDA_OK(cudaEventCreate(&e1));
	CUDA_OK(cudaMemcpy(dst, src, bytes, kind)); /* warm-up */
	for (int r = 0; r < REPS; r++) {
		CUDA_OK(cudaEventRecord(e0, 0));
		CUDA_OK(cudaMemcpyAsync(dst, src, bytes, kind, 0));
		CUDA_OK(cudaEventRecord(e1, 0));
		CUDA_OK(cudaEventSynchronize(e1));
		CUDA_OK(cudaEventElapsedTime(&t, e0, e1));
		ms[r] = t;
	}
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	return median(ms, REPS) / 1e3;
}

static double time_ref_reduce(float *d, const float *a, const float *b, uint64_t n, int blocks)
{
	cudaEvent_t e0, e1;
	double ms[REPS];
	float t;

	CUDA_OK(cudaEventCreate(&e0));
	CUDA_OK(cudaEventCreate(&e1));
	CUDA_OK((cudaError_t)gref_reduce(d, a, b, n, blocks, 0));
	for (int r = 0; r < REPS; r++) {
		CUDA_OK(cudaEventRecord(e0, 0));
		CUDA_OK((cudaError_t)gref_reduce(d, a, b, n, blocks, 0));
		CUDA_OK(cudaEventRecord(e1, 0));
		CUDA_OK(cudaEventSynchronize(e1));
		CUDA_OK(cudaEventElapsedTime(&t, e0, e1));
		ms[r] = t;
	}
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	return median(ms, REPS) / 1e3;
}

/* ---- the persistent kernel ---- */

static struct sl_gdma *open_reducer(uint32_t blocks, uint32_t item_bytes, uint64_t arena_bytes)
{
	struct sl_gdma_cfg cfg = { .backend = SL_GDMA_CUDA, .blocks = blocks, .split_bytes = item_bytes,
				   .slots = 8192, .arena_bytes = arena_bytes };
	struct sl_gdma *g;
	char err[256];

	if (sl_gdma_open(&g, &cfg, err, sizeof(err))) {
		fprintf(stderr, "gpu-dma-bench: %s\n", err);
		exit(1);
	}
	return g;
}

/* Spin until ticket t is done. */
static void drain(struct sl_gdma *g, uint32_t t)
{
	while (!sl_gdma_done(g, t)) {
		sl_gdma_progress(g, now_ns());
		if (sl_gdma_error(g)) {
			fprintf(stderr, "gpu-dma-bench: %s\n", sl_gdma_error(g));
			exit(1);
		}
	}
}

/* Post bytes of work as items of item_bytes, as fast as the ring takes
 * them (with copy, through sl_gdma_post_copy: the copy into the arena is
 * on this thread, as it would be on the engine's core), and wait for the
 * last: seconds from first post to last done. */
static double run_ring(struct sl_gdma *g, float *d, const float *a, const float *src, uint64_t bytes,
		       uint32_t item_bytes, bool copy)
{
	uint64_t per = item_bytes / 4, n = bytes / 4, t0 = now_ns();
	uint32_t t = 0;
	char err[256];

	for (uint64_t i = 0; i < n; i += per) {
		struct sl_gdma_work w = { .dst = d + i, .a = a + i, .src = src + i, .count = n - i < per ? n - i : per,
					  .dtype = SL_FLOAT32, .op = SL_SUM, .kind = SL_GDMA_REDUCE };
		int rc;
		int (*post)(struct sl_gdma *, const struct sl_gdma_work *, uint32_t *, char *, size_t) =
			copy ? sl_gdma_post_copy : sl_gdma_post;
		while ((rc = post(g, &w, &t, err, sizeof(err))) == -EAGAIN)
			sl_gdma_progress(g, now_ns());
		if (rc) {
			fprintf(stderr, "gpu-dma-bench: post: %s\n", err);
			exit(1);
		}
	}
	drain(g, t);
	return (double)(now_ns() - t0) / 1e9;
}

static double ring_rate(uint32_t blocks, uint32_t item_bytes, float *d, const float *a, const float *src,
			uint64_t bytes)
{
	struct sl_gdma *g = open_reducer(blocks, item_bytes, 0);
	double s[REPS];

	run_ring(g, d, a, src, bytes < (256u << 20) ? bytes : (256u << 20), item_bytes, false); /* warm-up */
	for (int r = 0; r < REPS; r++)
		s[r] = run_ring(g, d, a, src, bytes, item_bytes, false);
	sl_gdma_close(g);
	return (double)bytes / median(s, REPS);
}

/* Post one item and spin until it is done, REPS x 400 times: median us. */
static double item_latency(uint32_t blocks, uint64_t item_bytes, float *d, const float *a, const float *src)
{
	enum { N = REPS * 400 };
	struct sl_gdma *g = open_reducer(blocks, 64 << 10, 0);
	static double us[N];
	struct sl_gdma_work w = { .dst = d, .a = a, .src = src, .count = item_bytes / 4, .dtype = SL_FLOAT32,
				  .op = SL_SUM, .kind = SL_GDMA_REDUCE };
	uint32_t t;
	char err[256];

	for (int i = -100; i < N; i++) {
		uint64_t t0 = now_ns();
		if (sl_gdma_post(g, &w, &t, err, sizeof(err))) {
			fprintf(stderr, "gpu-dma-bench: post: %s\n", err);
			exit(1);
		}
		drain(g, t);
		if (i >= 0)
			us[i] = (double)(now_ns() - t0) / 1e3;
	}
	sl_gdma_close(g);
	return median(us, N);
}

/* Packets of item_bytes from ordinary host memory through sl_gdma_post_copy:
 * payload bytes per second over bytes. */
static double copy_rate(uint32_t blocks, uint32_t item_bytes, float *d, const float *a, const float *src,
			uint64_t bytes)
{
	struct sl_gdma *g = open_reducer(blocks, item_bytes, 64 << 20);
	double s[REPS];

	run_ring(g, d, a, src, bytes, item_bytes, true); /* warm-up */
	for (int r = 0; r < REPS; r++)
		s[r] = run_ring(g, d, a, src, bytes, item_bytes, true);
	sl_gdma_close(g);
	return (double)bytes / median(s, REPS);
}

/* The ring's output against the plain kernel's, on the first 64 MiB. */
static void check_same(const float *d_ring, const float *d_ref, uint64_t bytes)
{
	uint64_t n = bytes < (64u << 20) ? bytes : (64u << 20);
	void *x = malloc(n), *y = malloc(n);

	CUDA_OK(cudaMemcpy(x, d_ring, n, cudaMemcpyDeviceToHost));
	CUDA_OK(cudaMemcpy(y, d_ref, n, cudaMemcpyDeviceToHost));
	if (memcmp(x, y, n)) {
		fprintf(stderr, "gpu-dma-bench: the ring's result differs from the plain kernel's\n");
		exit(1);
	}
	free(x);
	free(y);
}

int main(int argc, char **argv)
{
	uint64_t bytes = (argc > 1 ? strtoull(argv[1], NULL, 10) : 1024) << 20, n = bytes / 4;
	static const uint32_t blocks[] = { 1, 2, 4, 8, 16, 32, 66, 132 };
	static const uint32_t items[] = { 16 << 10, 64 << 10, 1 << 20 };
	struct cudaDeviceProp prop;
	float *a, *b, *d, *d_ref, *h_src;
	double copy_s, ref_s, h2d_s, ref_host_s;

	CUDA_OK(cudaGetDeviceProperties(&prop, 0));
	CUDA_OK(cudaMalloc((void **)&a, bytes));
	CUDA_OK(cudaMalloc((void **)&b, bytes));
	CUDA_OK(cudaMalloc((void **)&d, bytes));
	CUDA_OK(cudaMalloc((void **)&d_ref, bytes));
	CUDA_OK(cudaHostAlloc((void **)&h_src, bytes, cudaHostAllocMapped));
	CUDA_OK((cudaError_t)gref_fill(a, n, 1));
	CUDA_OK((cudaError_t)gref_fill(b, n, 2));
	CUDA_OK(cudaMemcpy(h_src, b, bytes, cudaMemcpyDeviceToHost));

	printf("# gpu-dma-bench on %s (%d SMs), %llu MiB of float32 payload, median of %d\n", prop.name,
	       prop.multiProcessorCount, (unsigned long long)(bytes >> 20), REPS);
	copy_s = time_copy(d, a, bytes, cudaMemcpyDeviceToDevice);
	ref_s = time_ref_reduce(d_ref, a, b, n, prop.multiProcessorCount * 4);
	h2d_s = time_copy(d, h_src, bytes, cudaMemcpyHostToDevice);
	ref_host_s = time_ref_reduce(d, a, h_src, n, prop.multiProcessorCount * 4);
	printf("%-52s %10.1f GB/s\n", "device-to-device copy (read + write)", 2.0 * bytes / copy_s / 1e9);
	printf("%-52s %10.1f GB/s\n", "HBM bound for a reduce (copy / 3)", 2.0 * bytes / copy_s / 3 / 1e9);
	printf("%-52s %10.1f GB/s\n", "plain reduce kernel, src on GPU, all SMs", bytes / ref_s / 1e9);
	printf("%-52s %10.1f GB/s\n", "pinned host-to-device copy", bytes / h2d_s / 1e9);
	printf("%-52s %10.1f GB/s\n", "plain reduce kernel, src in pinned host memory", bytes / ref_host_s / 1e9);

	printf("\n# persistent kernel through the ring: payload GB/s (%% of the HBM bound | of H2D copy)\n");
	printf("%-8s %-10s %18s %18s\n", "blocks", "item", "src on GPU", "src pinned host");
	for (size_t i = 0; i < sizeof(items) / sizeof(items[0]); i++)
		for (size_t k = 0; k < sizeof(blocks) / sizeof(blocks[0]); k++) {
			double dev = ring_rate(blocks[k], items[i], d, a, b, bytes);
			double host = blocks[k] > 32 ? 0 : ring_rate(blocks[k], items[i], d, a, h_src, bytes);
			printf("%-8u %-10u %9.1f (%4.0f%%) %9.1f (%4.0f%%)\n", blocks[k], items[i], dev / 1e9,
			       100 * dev / (2.0 * bytes / copy_s / 3), host / 1e9, 100 * host * h2d_s / bytes);
		}
	check_same(d, d_ref, bytes);

	printf("\n# one item, post to done (kernel running, src pinned host), median us\n");
	for (uint64_t sz = 8; sz <= (64u << 10); sz *= 64)
		printf("%-8u blocks, %6llu B item: %8.2f us\n", 8u, (unsigned long long)sz,
		       item_latency(8, sz, d, a, h_src));

	printf("\n# sl_gdma_post_copy from ordinary host memory, 256 MiB: payload GB/s (one core copies and posts)\n");
	{
		uint64_t cb = bytes < (256u << 20) ? bytes : (256u << 20);
		float *pageable = malloc(cb);
		memcpy(pageable, h_src, cb);
		for (uint32_t item = 4096; item <= (64u << 10); item *= 4)
			printf("%-8u blocks, %6u B packets: %8.1f GB/s\n", 8u, item, copy_rate(8, item, d, a, pageable, cb) / 1e9);
		free(pageable);
	}
	cudaFreeHost(h_src);
	cudaFree(a), cudaFree(b), cudaFree(d), cudaFree(d_ref);
	return 0;
}

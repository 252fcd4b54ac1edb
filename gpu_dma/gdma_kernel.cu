/*
 * gdma_kernel.cu: the persistent consumer of the work ring.  A few blocks
 * run for as long as work flows; each block waits on its own tickets (block
 * b takes first + b + k * blocks), reads the item from host-mapped memory,
 * reduces it straight into device memory with all its threads, and marks it
 * done in host-mapped memory.  No launch per item: the engine's post is a
 * handful of stores into pinned memory.
 *
 * The arithmetic matches coll/reduce.c value for value: integers wrap
 * (computed in their unsigned twin), float16, bfloat16 and fp8 are widened
 * to float, reduced there and rounded back to nearest even (fp8 saturating),
 * max and min propagate NaN, AVG is SUM followed by the item's division.
 */
#include <cuda/atomic>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <string.h>

#include "gdma_kernel.h"
#include "gdma_ring.h"
#include "narrow_float.h"
#include "reduce.h"

namespace {

/* ---- the element arithmetic, one traits struct per storage type ---- */

template <typename T, int OP> __device__ __forceinline__ T fop(T x, T y)
{
	if (OP == SL_SUM)
		return x + y;
	if (OP == SL_PROD)
		return x * y;
	if (OP == SL_MAX)
		return (x > y || x != x) ? x : y;
	return (x < y || x != x) ? x : y;
}

/* Integers: T stored, U its unsigned twin (so that overflow wraps), W the
 * 64-bit type AVG divides in. */
template <typename T, typename U, typename W> struct IntT {
	using S = T;
	template <int OP> __device__ static S op(S x, S y)
	{
		if (OP == SL_SUM)
			return (S)(U)((U)x + (U)y);
		if (OP == SL_PROD)
			return (S)(U)((U)x * (U)y);
		if (OP == SL_MAX)
			return x > y ? x : y;
		return x < y ? x : y;
	}
	__device__ static S scale(S x, uint32_t div) { return (S)((W)x / (W)div); }
};

template <typename F> struct FloatT {
	using S = F;
	template <int OP> __device__ static S op(S x, S y) { return fop<F, OP>(x, y); }
	__device__ static S scale(S x, uint32_t div) { return x / (F)div; }
};

/* Narrow floats, as their bits: widen, reduce in float, round back.  C
 * converts (wide, narrow); the 16-bit types use the GPU's own conversions,
 * fp8 the CPU kernels' (narrow_float.h), which round alike. */
template <typename T, typename C> struct NarrowT {
	using S = T;
	template <int OP> __device__ static S op(S x, S y) { return C::narrow(fop<float, OP>(C::wide(x), C::wide(y))); }
	__device__ static S scale(S x, uint32_t div) { return C::narrow(C::wide(x) / (float)div); }
};

struct HalfConv {
	__device__ static float wide(uint16_t h) { return __half2float(__ushort_as_half(h)); }
	__device__ static uint16_t narrow(float f) { return __half_as_ushort(__float2half_rn(f)); }
};

struct Bf16Conv {
	__device__ static float wide(uint16_t h) { return __bfloat162float(__ushort_as_bfloat16(h)); }
	__device__ static uint16_t narrow(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }
};

struct E4m3Conv {
	__device__ static float wide(uint8_t b) { return sl_e4m3_widen(b); }
	__device__ static uint8_t narrow(float f) { return sl_e4m3_narrow(f); }
};

struct E5m2Conv {
	__device__ static float wide(uint8_t b) { return sl_e5m2_widen(b); }
	__device__ static uint8_t narrow(float f) { return sl_e5m2_narrow(f); }
};

/* ---- applying one item with a whole block ---- */

/* Loads and stores at any alignment: a payload sits where the packet put it
 * (90 bytes into a frame), rarely on its element size. */
template <typename S> __device__ __forceinline__ S load_any(const unsigned char *p)
{
	S v;

	if (((uintptr_t)p & (sizeof(S) - 1)) == 0)
		return *(const S *)p;
	memcpy(&v, p, sizeof(S));
	return v;
}

template <typename S> __device__ __forceinline__ void store_any(unsigned char *p, S v)
{
	if (((uintptr_t)p & (sizeof(S) - 1)) == 0)
		*(S *)p = v;
	else
		memcpy(p, &v, sizeof(S));
}

template <typename Tr, int OP> __device__ __forceinline__ typename Tr::S one(typename Tr::S x, typename Tr::S y,
									     uint32_t div)
{
	typename Tr::S r = Tr::template op<OP>(x, y);

	return div ? Tr::scale(r, div) : r;
}

/* 16 bytes of each side at once. */
template <typename Tr, int OP> __device__ __forceinline__ uint4 sixteen(uint4 x, uint4 y, uint32_t div)
{
	using S = typename Tr::S;
	constexpr int K = 16 / sizeof(S);
	S xs[K], ys[K], rs[K];
	uint4 out;

	memcpy(xs, &x, 16);
	memcpy(ys, &y, 16);
#pragma unroll
	for (int k = 0; k < K; k++)
		rs[k] = one<Tr, OP>(xs[k], ys[k], div);
	memcpy(&out, rs, 16);
	return out;
}

/* Four 16-byte loads of each side in flight per thread before the first
 * use: reads of host memory over PCIe take a microsecond or more. */
constexpr int UNROLL = 4;

template <typename Tr, int OP> __device__ uint64_t reduce_vec(const sl_gdma_item &it)
{
	using S = typename Tr::S;
	uint4 *d = (uint4 *)it.dst;
	const uint4 *a = (const uint4 *)(it.swap ? it.src : it.a), *s = (const uint4 *)(it.swap ? it.a : it.src);
	uint64_t nv = it.count * sizeof(S) / 16, step = blockDim.x, v = threadIdx.x;

	for (; v + (UNROLL - 1) * step < nv; v += UNROLL * step) {
		uint4 xa[UNROLL], xs[UNROLL];
#pragma unroll
		for (int u = 0; u < UNROLL; u++) {
			xa[u] = a[v + u * step];
			xs[u] = s[v + u * step];
		}
#pragma unroll
		for (int u = 0; u < UNROLL; u++)
			d[v + u * step] = sixteen<Tr, OP>(xa[u], xs[u], it.avg_div);
	}
	for (; v < nv; v += step)
		d[v] = sixteen<Tr, OP>(a[v], s[v], it.avg_div);
	return nv * 16 / sizeof(S);
}

template <typename Tr, int OP> __device__ void reduce_item(const sl_gdma_item &it)
{
	using S = typename Tr::S;
	unsigned char *d = (unsigned char *)it.dst;
	const unsigned char *a = (const unsigned char *)(it.swap ? it.src : it.a);
	const unsigned char *s = (const unsigned char *)(it.swap ? it.a : it.src);
	uint64_t i = 0;

	if (((it.dst | it.a | it.src) & 15) == 0)
		i = reduce_vec<Tr, OP>(it);
	for (i += threadIdx.x; i < it.count; i += blockDim.x) {
		S r = one<Tr, OP>(load_any<S>(a + i * sizeof(S)), load_any<S>(s + i * sizeof(S)), it.avg_div);
		store_any<S>(d + i * sizeof(S), r);
	}
}

template <typename Tr> __device__ void by_op(const sl_gdma_item &it)
{
	switch (it.op) {
	case SL_SUM: reduce_item<Tr, SL_SUM>(it); break;
	case SL_PROD: reduce_item<Tr, SL_PROD>(it); break;
	case SL_MAX: reduce_item<Tr, SL_MAX>(it); break;
	default: reduce_item<Tr, SL_MIN>(it); break;
	}
}

__device__ void copy_item(const sl_gdma_item &it, uint32_t esize)
{
	unsigned char *d = (unsigned char *)it.dst;
	const unsigned char *s = (const unsigned char *)it.src;
	uint64_t bytes = it.count * esize, i = 0;

	if (((it.dst | it.src) & 15) == 0) {
		for (uint64_t v = threadIdx.x; v < bytes / 16; v += blockDim.x)
			((uint4 *)d)[v] = ((const uint4 *)s)[v];
		i = bytes / 16 * 16;
	}
	for (i += threadIdx.x; i < bytes; i += blockDim.x)
		d[i] = s[i];
}

__device__ uint32_t dtype_size(uint8_t t)
{
	switch (t) {
	case SL_INT8: case SL_UINT8: case SL_FLOAT8_E4M3: case SL_FLOAT8_E5M2: return 1;
	case SL_FLOAT16: case SL_BFLOAT16: return 2;
	case SL_INT32: case SL_UINT32: case SL_FLOAT32: return 4;
	default: return 8;
	}
}

/* The front end checked dtype, op and kind before posting. */
__device__ void apply(const sl_gdma_item &it)
{
	if (it.kind == SL_GDMA_COPY) {
		copy_item(it, dtype_size(it.dtype));
		return;
	}
	switch (it.dtype) {
	case SL_INT8: by_op<IntT<int8_t, uint8_t, int64_t>>(it); break;
	case SL_UINT8: by_op<IntT<uint8_t, uint8_t, uint64_t>>(it); break;
	case SL_INT32: by_op<IntT<int32_t, uint32_t, int64_t>>(it); break;
	case SL_UINT32: by_op<IntT<uint32_t, uint32_t, uint64_t>>(it); break;
	case SL_INT64: by_op<IntT<int64_t, uint64_t, int64_t>>(it); break;
	case SL_UINT64: by_op<IntT<uint64_t, uint64_t, uint64_t>>(it); break;
	case SL_FLOAT16: by_op<NarrowT<uint16_t, HalfConv>>(it); break;
	case SL_FLOAT32: by_op<FloatT<float>>(it); break;
	case SL_FLOAT64: by_op<FloatT<double>>(it); break;
	case SL_FLOAT8_E4M3: by_op<NarrowT<uint8_t, E4m3Conv>>(it); break;
	case SL_FLOAT8_E5M2: by_op<NarrowT<uint8_t, E5m2Conv>>(it); break;
	default: by_op<NarrowT<uint16_t, Bf16Conv>>(it); break;
	}
}

/* ---- the ring ---- */

enum { ITEM_RUN, ITEM_SKIP, ITEM_NONE, ITEM_STOP };

/* Idle polling backs off up to this: every poll is a read across PCIe, and
 * many blocks polling flat out starve the reads of blocks that have work. */
#define MAX_BACKOFF_NS 1024
#define STOP_EVERY 8 /* polls between reads of the stop word */

/* Where a launch consumes: the ring, and what it must know of earlier launches. */
struct launch {
	sl_gdma_ring_shared *sh;
	uint32_t mask;
	uint32_t check_before; /* tickets before this may have been applied already */
	uint32_t epoch;        /* items of a later epoch are for the next launch */
	uint64_t idle_exit_ns; /* a block waiting this long for an item exits */
};

__device__ uint64_t global_ns()
{
	uint64_t t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

/* Thread 0: if ticket t is posted, copy it to *out.  A ticket from before
 * the last restart (t < check_before) may have been applied already: its
 * done word says so, and it is skipped.  An item posted for a later launch
 * stops this one before it is touched. */
__device__ int try_item(const launch &l, uint32_t t, sl_gdma_item *out)
{
	sl_gdma_ring_shared *sh = l.sh;
	uint32_t mask = l.mask;
	sl_gdma_item *it = sl_gdma_ring_items(sh) + (t & mask);
	volatile uint32_t *done = sl_gdma_ring_done(sh, mask + 1) + (t & mask);
	cuda::atomic_ref<uint32_t, cuda::thread_scope_system> seq(it->seq);

	if (seq.load(cuda::memory_order_acquire) != t)
		return ITEM_NONE;
	if ((int32_t)(t - l.check_before) < 0 && *done == t)
		return ITEM_SKIP;
	*out = *it; /* ordered after the acquire of seq */
	return (int32_t)(out->epoch - l.epoch) > 0 ? ITEM_STOP : ITEM_RUN;
}

/* Thread 0: wait until ticket t is posted or the producer says stop, or
 * give up after idle_exit_ns: the producer's stop may never come while its
 * engine is blocked in a CUDA call that waits for this very kernel (under
 * compute-sanitizer, a stream query on another engine's stream did). */
__device__ int wait_item(const launch &l, uint32_t t, sl_gdma_item *out)
{
	volatile uint32_t *stop = &l.sh->stop;
	unsigned ns = 32;
	uint64_t since = global_ns();

	for (uint32_t k = 1;; k++) {
		int s = try_item(l, t, out);
		if (s != ITEM_NONE)
			return s;
		if (k % STOP_EVERY == 0 && (*stop || global_ns() - since >= l.idle_exit_ns))
			return ITEM_STOP;
		__nanosleep(ns);
		ns = ns < MAX_BACKOFF_NS ? ns * 2 : ns;
	}
}

/* Everything the block wrote for ticket t reaches memory before the
 * producer can see t done: the barrier before this gathers the block's
 * writes, the system-scope fence orders them before the store of t. */
__device__ void publish(sl_gdma_ring_shared *sh, uint32_t mask, uint32_t t)
{
	volatile uint32_t *done = sl_gdma_ring_done(sh, mask + 1) + (t & mask);

	__threadfence_system();
	*done = t;
}

/* Block b applies tickets first + b + k * gridDim.x.  Two descriptors in
 * shared memory: while the block reduces one, thread 0 has already fetched
 * the next if it was posted, so the PCIe round trips of polling and reading
 * a descriptor overlap the work instead of following it. */
__global__ void consumer(launch l, uint32_t first)
{
	sl_gdma_ring_shared *sh = l.sh;
	uint32_t mask = l.mask;
	__shared__ sl_gdma_item cur[2];
	__shared__ int state[2];
	uint32_t step = gridDim.x, t = first + blockIdx.x;

	if (threadIdx.x == 0)
		state[0] = wait_item(l, t, &cur[0]);
	__syncthreads();
	for (unsigned i = 0;; i ^= 1, t += step) {
		if (state[i] == ITEM_STOP)
			return;
		if (threadIdx.x == 0)
			state[i ^ 1] = try_item(l, t + step, &cur[i ^ 1]);
		if (state[i] == ITEM_RUN)
			apply(cur[i]);
		__syncthreads(); /* the block's writes for t are done */
		if (threadIdx.x == 0) {
			if (state[i] == ITEM_RUN)
				publish(sh, mask, t);
			if (state[i ^ 1] == ITEM_NONE)
				state[i ^ 1] = wait_item(l, t + step, &cur[i ^ 1]);
		}
		__syncthreads(); /* the next descriptor is in; cur[i] is free */
	}
}

} // namespace

extern "C" int sl_gdma_kernel_launch(void *ring_dev, uint32_t slots, uint32_t first, uint32_t check_before,
				     uint32_t epoch, uint64_t idle_exit_ns, uint32_t blocks, uint32_t threads,
				     void *stream)
{
	launch l = { (sl_gdma_ring_shared *)ring_dev, slots - 1, check_before, epoch, idle_exit_ns };

	consumer<<<blocks, threads, 0, (cudaStream_t)stream>>>(l, first);
	return (int)cudaGetLastError();
}

extern "C" int sl_gdma_kernel_max_blocks(uint32_t threads, uint32_t *max_blocks)
{
	int dev, sms, per_sm;
	cudaError_t e = cudaGetDevice(&dev);

	if (e == cudaSuccess)
		e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
	if (e == cudaSuccess)
		e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, consumer, (int)threads, 0);
	if (e == cudaSuccess)
		*max_blocks = (uint32_t)(sms * per_sm);
	return (int)e;
}

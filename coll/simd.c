/*
 * simd.c: which kernel family sl_reduce runs.  At program start the best
 * family the CPU has, and whose registers the OS saves across context
 * switches (XGETBV), becomes active; sl_simd_select (sluiced's --simd and
 * SLUICE_SIMD, the tests, the benchmark) can step down.  Each family's
 * table is resolved once, per datatype and op, against the families below
 * it, so that a family without a kernel for a pair runs the next best one.
 */
#include <stdatomic.h>
#include <string.h>

#include "reduce_impl.h"

#if defined(__x86_64__)
#include <cpuid.h>

/* XCR0 bits: SSE and AVX state, then AVX-512's opmask, ZMM_Hi256, Hi16_ZMM. */
#define XCR0_YMM 0x06u
#define XCR0_ZMM 0xe6u

static uint64_t xgetbv0(void)
{
	uint32_t lo, hi;

	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return (uint64_t)hi << 32 | lo;
}

static enum sl_simd detect(void)
{
	unsigned a, b, c, d, b7 = 0, c7, d7;

	if (!__get_cpuid(1, &a, &b, &c, &d))
		return SL_SIMD_SCALAR;
	bool osxsave = c & bit_OSXSAVE, avx = c & bit_AVX, f16c = c & bit_F16C;
	if (!osxsave || !avx || !__get_cpuid_count(7, 0, &a, &b7, &c7, &d7))
		return SL_SIMD_SCALAR;
	uint64_t xcr0 = xgetbv0();
	if ((xcr0 & XCR0_YMM) != XCR0_YMM || !(b7 & bit_AVX2) || !f16c)
		return SL_SIMD_SCALAR;
	unsigned avx512 = bit_AVX512F | bit_AVX512BW | bit_AVX512VL | bit_AVX512DQ;
	if ((xcr0 & XCR0_ZMM) != XCR0_ZMM || (b7 & avx512) != avx512)
		return SL_SIMD_AVX2;
	return SL_SIMD_AVX512;
}
#else
static enum sl_simd detect(void)
{
	return SL_SIMD_SCALAR;
}
#endif

static struct sl_dispatch families[SL_SIMD_COUNT];
static enum sl_simd best;
static _Atomic(const struct sl_dispatch *) active;

/* Resolve every family's table once; the best one becomes active. */
__attribute__((constructor)) static void simd_init(void)
{
	const sl_kernel_table *own[SL_SIMD_COUNT] = { &sl_kernels_scalar, &sl_kernels_avx2, &sl_kernels_avx512 };
	const sl_kernel_table *streaming[SL_SIMD_COUNT] = { NULL, &sl_streaming_avx2, &sl_streaming_avx512 };

	best = detect();
	for (int s = 0; s < SL_SIMD_COUNT; s++) {
		families[s].simd = (enum sl_simd)s;
		for (int t = 0; t < SL_DTYPE_COUNT; t++)
			for (int op = 0; op < SL_REDOP_COUNT; op++) {
				sl_reduce_fn f = (*own[s])[t][op], st = s ? (*streaming[s])[t][op] : NULL;
				families[s].fn[t][op] = f || s == 0 ? f : families[s - 1].fn[t][op];
				families[s].streaming[t][op] = st || s == 0 ? st : families[s - 1].streaming[t][op];
			}
	}
	atomic_store_explicit(&active, &families[best], memory_order_release);
}

const struct sl_dispatch *sl_dispatch_active(void)
{
	const struct sl_dispatch *d = atomic_load_explicit(&active, memory_order_acquire);

	if (!d) { /* called from another constructor that ran before ours */
		simd_init();
		d = atomic_load_explicit(&active, memory_order_acquire);
	}
	return d;
}

static const char *const names[SL_SIMD_COUNT] = {
	[SL_SIMD_SCALAR] = "scalar", [SL_SIMD_AVX2] = "avx2", [SL_SIMD_AVX512] = "avx512",
};

const char *sl_simd_name(enum sl_simd s)
{
	return (unsigned)s < SL_SIMD_COUNT ? names[s] : "unknown";
}

bool sl_simd_parse(const char *name, enum sl_simd *out)
{
	for (int s = 0; s < SL_SIMD_COUNT; s++)
		if (name && strcmp(name, names[s]) == 0) {
			*out = (enum sl_simd)s;
			return true;
		}
	return false;
}

enum sl_simd sl_simd_best(void)
{
	return best;
}

enum sl_simd sl_simd_active(void)
{
	return sl_dispatch_active()->simd;
}

bool sl_simd_select(enum sl_simd s)
{
	if ((unsigned)s > (unsigned)best)
		return false;
	atomic_store_explicit(&active, &families[s], memory_order_release);
	return true;
}

/*
 * reduce_impl.h: what coll/'s reduction files share, private to coll/.
 *
 * The element operations and the loop generators (the narrow float types'
 * conversions are in narrow_float.h).  Each kernel family (reduce_scalar.c,
 * reduce_avx2.c, reduce_avx512.c) instantiates the same generic loops under
 * its own target attribute, so that the compiler vectorizes one source for
 * each instruction set; the vector families add hand-written loops where the
 * compiler's code is poor (float16, bfloat16, fp8).
 */
#ifndef SLUICE_REDUCE_IMPL_H
#define SLUICE_REDUCE_IMPL_H

#include <stdint.h>
#include <string.h>

#include "narrow_float.h"
#include "reduce.h"

typedef void (*sl_reduce_fn)(void *dst, const void *a, const void *b, size_t n);
typedef sl_reduce_fn sl_kernel_table[SL_DTYPE_COUNT][SL_REDOP_COUNT];

/* One family's kernels; an empty entry falls back to the family below. */
extern const sl_kernel_table sl_kernels_scalar, sl_kernels_avx2, sl_kernels_avx512;

/* The same with non-temporal stores (dst's cache lines are neither read
 * first nor kept), for results too large to stay in cache: dst must be
 * aligned to the element size, and callers fence (sl_stream_fence) before
 * anyone else reads dst.  Empty where a family has none. */
extern const sl_kernel_table sl_streaming_avx2, sl_streaming_avx512;

/* Orders the non-temporal stores before whatever the caller stores next
 * (the engine's completion), which plain release stores do not. */
static inline void sl_stream_fence(void)
{
#if defined(__x86_64__)
	__builtin_ia32_sfence();
#endif
}

/* The family sl_reduce runs (simd.c): every (type, op) resolved. */
struct sl_dispatch {
	sl_kernel_table fn;
	sl_kernel_table streaming; /* NULL entries: plain stores only */
	enum sl_simd simd;
};

const struct sl_dispatch *sl_dispatch_active(void);

/* ---- the element operations ---- */

/* NaN-propagating max and min: a NaN on either side gives a NaN. */
#define SL_FMAX(x, y) (((x) > (y) || (x) != (x)) ? (x) : (y))
#define SL_FMIN(x, y) (((x) < (y) || (x) != (x)) ? (x) : (y))
#define SL_IMAX(x, y) ((x) > (y) ? (x) : (y))
#define SL_IMIN(x, y) ((x) < (y) ? (x) : (y))

static inline float sl_wide_add(float x, float y) { return x + y; }
static inline float sl_wide_mul(float x, float y) { return x * y; }
static inline float sl_wide_max(float x, float y) { return SL_FMAX(x, y); }
static inline float sl_wide_min(float x, float y) { return SL_FMIN(x, y); }

/* ---- loop generators ----
 * SL_LOOP makes one loop: d[i] = EXPR(x = a[i], y = b[i]).  Elements are
 * read through 1-aligned types: a packet's payload sits 90 bytes into its
 * frame, so it is rarely aligned to its element size (x86 loads unaligned
 * at full speed).  Names end in the family's suffix, ATTR is its target. */
#define SL_LOOP(name, ATTR, T, EXPR)                                          \
	ATTR static void name(void *dst, const void *pa, const void *pb, size_t n) \
	{                                                                     \
		typedef T __attribute__((aligned(1))) UT;                     \
		UT *d = dst;                                                  \
		const UT *a = pa, *b = pb;                                    \
		for (size_t i = 0; i < n; i++) {                              \
			T x = a[i], y = b[i];                                 \
			d[i] = (EXPR);                                        \
		}                                                             \
	}

/* Integers: sum and prod in the unsigned twin, so signed overflow wraps
 * instead of being undefined. */
#define SL_INT_FNS(tn, F, ATTR, T, U)                          \
	SL_LOOP(tn##_sum_##F, ATTR, T, (T)((U)x + (U)y))        \
	SL_LOOP(tn##_prod_##F, ATTR, T, (T)((U)x * (U)y))       \
	SL_LOOP(tn##_max_##F, ATTR, T, SL_IMAX(x, y))           \
	SL_LOOP(tn##_min_##F, ATTR, T, SL_IMIN(x, y))

#define SL_FLOAT_FNS(tn, F, ATTR, T)                   \
	SL_LOOP(tn##_sum_##F, ATTR, T, x + y)           \
	SL_LOOP(tn##_prod_##F, ATTR, T, x * y)          \
	SL_LOOP(tn##_max_##F, ATTR, T, SL_FMAX(x, y))   \
	SL_LOOP(tn##_min_##F, ATTR, T, SL_FMIN(x, y))

/* Narrow floats: widen, reduce in float32, round back. */
#define SL_WIDENED_FNS(tn, F, ATTR, T, TO, FROM)                             \
	SL_LOOP(tn##_sum_##F, ATTR, T, FROM(sl_wide_add(TO(x), TO(y))))       \
	SL_LOOP(tn##_prod_##F, ATTR, T, FROM(sl_wide_mul(TO(x), TO(y))))      \
	SL_LOOP(tn##_max_##F, ATTR, T, FROM(sl_wide_max(TO(x), TO(y))))       \
	SL_LOOP(tn##_min_##F, ATTR, T, FROM(sl_wide_min(TO(x), TO(y))))

/* The types every family vectorizes from the generic loops. */
#define SL_GENERIC_FNS(F, ATTR)                                              \
	SL_INT_FNS(i8, F, ATTR, int8_t, uint8_t)                             \
	SL_INT_FNS(u8, F, ATTR, uint8_t, uint8_t)                            \
	SL_INT_FNS(i32, F, ATTR, int32_t, uint32_t)                          \
	SL_INT_FNS(u32, F, ATTR, uint32_t, uint32_t)                         \
	SL_INT_FNS(i64, F, ATTR, int64_t, uint64_t)                          \
	SL_INT_FNS(u64, F, ATTR, uint64_t, uint64_t)                         \
	SL_FLOAT_FNS(f32, F, ATTR, float)                                    \
	SL_FLOAT_FNS(f64, F, ATTR, double)

/* A table row; AVG reduces as SUM (sl_scale_avg divides once at the end). */
#define SL_ROW(tn, F) { tn##_sum_##F, tn##_prod_##F, tn##_max_##F, tn##_min_##F, tn##_sum_##F }

#define SL_GENERIC_ROWS(F)                                                      \
	[SL_INT8] = SL_ROW(i8, F), [SL_UINT8] = SL_ROW(u8, F),                 \
	[SL_INT32] = SL_ROW(i32, F), [SL_UINT32] = SL_ROW(u32, F),             \
	[SL_INT64] = SL_ROW(i64, F), [SL_UINT64] = SL_ROW(u64, F),             \
	[SL_FLOAT32] = SL_ROW(f32, F), [SL_FLOAT64] = SL_ROW(f64, F)

#endif

/*
 * reduce_avx2.c: the AVX2 kernel family (with F16C), compiled through
 * function target attributes so that the rest of the build stays baseline;
 * simd.c only lets these run on a CPU that has both.  The generic loops
 * vectorize to 256 bits; float16, bfloat16 and fp8 have their own loops
 * (the compiler does not find F16C's conversions, and its code for the fp8
 * ones is long), bit for bit the scalar ones.
 */
#include "reduce_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "fp8_simd.h"

#define AVX2 __attribute__((target("avx2,f16c")))

SL_GENERIC_FNS(avx2, AVX2)

/* FMAX and FMIN's NaN rule: pick x where x wins or is a NaN, else y. */
#define V_PICK(x, y, CMP) \
	_mm256_blendv_ps((y), (x), _mm256_or_ps(_mm256_cmp_ps((x), (y), CMP), _mm256_cmp_ps((x), (x), _CMP_UNORD_Q)))

/* float16: the hardware's conversions, exact widening and round-to-nearest-
 * even narrowing, NaNs made the positive quiet NaN first: sl_half_narrow's
 * bits. */
AVX2 static inline __m256 f16_widen(const uint8_t *p)
{
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

AVX2 static inline void f16_narrow(uint8_t *p, __m256 f)
{
	__m256 nan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)); /* narrows to 0x7e00 */

	f = _mm256_blendv_ps(f, nan, _mm256_cmp_ps(f, f, _CMP_UNORD_Q));
	_mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
}

/* bfloat16: widening is a shift; narrowing rounds to nearest even with
 * sl_bf16_narrow's integer trick, NaNs made the positive quiet NaN, lane by
 * lane. */
AVX2 static inline __m256 bf16_widen(const uint8_t *p)
{
	__m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
	return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

AVX2 static inline void bf16_narrow(uint8_t *p, __m256 f)
{
	__m256i u = _mm256_castps_si256(f), lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
	__m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
	__m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
	__m256i r = _mm256_and_si256(_mm256_blendv_epi8(rounded, _mm256_set1_epi32(0x7fc0), nan),
				     _mm256_set1_epi32(0xffff));
	/* pack the eight 32-bit lanes to 16 bits, in order */
	__m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
	_mm_storeu_si128((__m128i *)p, _mm256_castsi256_si128(packed));
}

/* fp8 (fp8_simd.h says how): eight float32 lanes from eight halves... */
AVX2 static inline __m256 fp8_widen(__m128i h, const struct sl_fp8_format *fmt)
{
	__m256 f = _mm256_cvtph_ps(h);
	return fmt->scale == 1.0f ? f : _mm256_mul_ps(f, _mm256_set1_ps(1.0f / fmt->scale));
}

/* ...and back: rounded to fmt, as halves (SL_FP8_ROUND_FN, from these two). */
AVX2 static inline __m256 fp8_abs(__m256 f)
{
	return _mm256_and_ps(f, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
}

AVX2 static inline __m256 fp8_nan_as(__m256 r, __m256 f, float nan)
{
	return _mm256_blendv_ps(r, _mm256_set1_ps(nan), _mm256_cmp_ps(f, f, _CMP_UNORD_Q));
}

SL_FP8_ROUND_FN(256, AVX2, __m128i)

/* Sixteen fp8 elements a step, as two sets of eight float32 lanes: FP8_HALF
 * reduces set k of the step's halves ha and hb.  The scalar family does the
 * tail. */
#define FP8_HALF(tn, k, VEXPR)                                                                   \
	({                                                                                       \
		__m256 x = fp8_widen(_mm256_extracti128_si256(ha, k), &sl_fp8_##tn);             \
		__m256 y = fp8_widen(_mm256_extracti128_si256(hb, k), &sl_fp8_##tn);             \
		fp8_round((VEXPR), &sl_fp8_##tn);                                                \
	})

#define FP8_LOOP(tn, T, OP, VEXPR)                                                           \
	AVX2 static void tn##_##OP##_avx2(void *dst, const void *pa, const void *pb, size_t n) \
	{                                                                                    \
		uint8_t *d = dst;                                                            \
		const uint8_t *a = pa, *b = pb;                                              \
		size_t i = 0;                                                                \
		for (; i + 16 <= n; i += 16) {                                               \
			__m256i ha = sl_##tn##_halves(_mm_loadu_si128((const __m128i *)(a + i))); \
			__m256i hb = sl_##tn##_halves(_mm_loadu_si128((const __m128i *)(b + i))); \
			__m128i lo = FP8_HALF(tn, 0, VEXPR), hi = FP8_HALF(tn, 1, VEXPR);     \
			_mm_storeu_si128((__m128i *)(d + i), sl_##tn##_codes(_mm256_set_m128i(hi, lo))); \
		}                                                                            \
		sl_kernels_scalar[T][SL_##OP](d + i, a + i, b + i, n - i);                   \
	}

/* Eight 16-bit elements at a time; the scalar family does the tail. */
#define NARROW_LOOP(tn, T, OP, VEXPR)                                                    \
	AVX2 static void tn##_##OP##_avx2(void *dst, const void *pa, const void *pb, size_t n) \
	{                                                                                    \
		uint8_t *d = dst;                                                            \
		const uint8_t *a = pa, *b = pb;                                              \
		size_t i = 0;                                                                \
		for (; i + 8 <= n; i += 8) {                                                 \
			__m256 x = tn##_widen(a + 2 * i), y = tn##_widen(b + 2 * i);         \
			tn##_narrow(d + 2 * i, (VEXPR));                                     \
		}                                                                            \
		sl_kernels_scalar[T][SL_##OP](d + 2 * i, a + 2 * i, b + 2 * i, n - i);       \
	}

#define NARROW_FNS(LOOP, tn, T)                                     \
	LOOP(tn, T, SUM, _mm256_add_ps(x, y))                        \
	LOOP(tn, T, PROD, _mm256_mul_ps(x, y))                       \
	LOOP(tn, T, MAX, V_PICK(x, y, _CMP_GT_OQ))                   \
	LOOP(tn, T, MIN, V_PICK(x, y, _CMP_LT_OQ))

NARROW_FNS(NARROW_LOOP, f16, SL_FLOAT16)
NARROW_FNS(NARROW_LOOP, bf16, SL_BFLOAT16)
NARROW_FNS(FP8_LOOP, e4m3, SL_FLOAT8_E4M3)
NARROW_FNS(FP8_LOOP, e5m2, SL_FLOAT8_E5M2)

#define NARROW_ROW(tn) { tn##_SUM_avx2, tn##_PROD_avx2, tn##_MAX_avx2, tn##_MIN_avx2, tn##_SUM_avx2 }

const sl_kernel_table sl_kernels_avx2 = {
	SL_GENERIC_ROWS(avx2),
	[SL_FLOAT16] = NARROW_ROW(f16),
	[SL_BFLOAT16] = NARROW_ROW(bf16),
	[SL_FLOAT8_E4M3] = NARROW_ROW(e4m3),
	[SL_FLOAT8_E5M2] = NARROW_ROW(e5m2),
};

/* float32 and float64 with non-temporal stores: the plain kernel up to
 * dst's 32-byte boundary, then whole vectors streamed, then the plain
 * kernel for the tail.  S is the intrinsics' suffix (ps, pd), V the
 * vector type's (__m256, __m256d). */
#define V_PICK_S(S, x, y, CMP) \
	_mm256_blendv_##S((y), (x), _mm256_or_##S(_mm256_cmp_##S((x), (y), CMP), _mm256_cmp_##S((x), (x), _CMP_UNORD_Q)))

#define STREAM_LOOP(tn, T, S, V, OP, VEXPR)                                                        \
	AVX2 static void tn##_##OP##_stream_avx2(void *dst, const void *pa, const void *pb, size_t n) \
	{                                                                                       \
		T *d = dst;                                                                     \
		const T __attribute__((aligned(1))) *a = pa, *b = pb;                           \
		size_t i = ((32 - ((uintptr_t)d & 31)) & 31) / sizeof(T);                       \
		i = i < n ? i : n;                                                              \
		tn##_##OP##_avx2(d, a, b, i);                                                   \
		for (; i + 32 / sizeof(T) <= n; i += 32 / sizeof(T)) {                          \
			__m256##V x = _mm256_loadu_##S(a + i), y = _mm256_loadu_##S(b + i);    \
			_mm256_stream_##S(d + i, (VEXPR));                                      \
		}                                                                               \
		tn##_##OP##_avx2(d + i, a + i, b + i, n - i);                                   \
	}

#define STREAM_FNS(tn, T, S, V)                                                  \
	STREAM_LOOP(tn, T, S, V, sum, _mm256_add_##S(x, y))                          \
	STREAM_LOOP(tn, T, S, V, prod, _mm256_mul_##S(x, y))                         \
	STREAM_LOOP(tn, T, S, V, max, V_PICK_S(S, x, y, _CMP_GT_OQ))                 \
	STREAM_LOOP(tn, T, S, V, min, V_PICK_S(S, x, y, _CMP_LT_OQ))

STREAM_FNS(f32, float, ps, )
STREAM_FNS(f64, double, pd, d)

#define STREAM_ROW(tn) { tn##_sum_stream_avx2, tn##_prod_stream_avx2, tn##_max_stream_avx2, \
			 tn##_min_stream_avx2, tn##_sum_stream_avx2 }

const sl_kernel_table sl_streaming_avx2 = {
	[SL_FLOAT32] = STREAM_ROW(f32),
	[SL_FLOAT64] = STREAM_ROW(f64),
};

#else
const sl_kernel_table sl_kernels_avx2 = { { NULL } };
const sl_kernel_table sl_streaming_avx2 = { { NULL } };
#endif

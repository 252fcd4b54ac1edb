/*
 * reduce_avx512.c: the AVX-512 kernel family (F, BW, VL, DQ), compiled
 * through function target attributes so that the rest of the build stays
 * baseline; simd.c only lets these run where the CPU has them and the OS
 * saves the zmm and mask registers.  The generic loops vectorize to 512
 * bits; float16 and bfloat16 have their own loops, 16 elements a step with
 * a masked last step, bit for bit the scalar ones.
 */
#include "reduce_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "fp8_simd.h"

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c")))

SL_GENERIC_FNS(avx512, AVX512)

/* FMAX and FMIN's NaN rule: pick x where x wins or is a NaN, else y. */
#define V_PICK(x, y, CMP) \
	_mm512_mask_blend_ps(_mm512_cmp_ps_mask((x), (y), CMP) | _mm512_cmp_ps_mask((x), (x), _CMP_UNORD_Q), (y), (x))

/* float16: the hardware's conversions (exact widening, round to nearest
 * even), NaNs made the positive quiet NaN first (sl_half_narrow's rule). */
AVX512 static inline __m512 f16_widen(__m256i h)
{
	return _mm512_cvtph_ps(h);
}

AVX512 static inline __m256i f16_narrow(__m512 f)
{
	/* the lanes that are numbers converted, the others 0x7e00 */
	return _mm512_mask_cvtps_ph(_mm256_set1_epi16(0x7e00), _mm512_cmp_ps_mask(f, f, _CMP_ORD_Q), f,
				    _MM_FROUND_TO_NEAREST_INT);
}

/* bfloat16: widening is a shift; narrowing is sl_bf16_narrow's integer
 * rounding, NaNs made the positive quiet NaN.  (AVX512_BF16's VCVTNEPS2BF16
 * would flush subnormals to zero, so it is not used.) */
AVX512 static inline __m512 bf16_widen(__m256i h)
{
	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

AVX512 static inline __m256i bf16_narrow(__m512 f)
{
	__m512i u = _mm512_castps_si512(f), hi = _mm512_srli_epi32(u, 16);
	__m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
	__m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
	__mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
						_mm512_set1_epi32(0x7f800000));
	__m512i r = _mm512_mask_mov_epi32(rounded, nan, _mm512_set1_epi32(0x7fc0));
	return _mm512_cvtepi32_epi16(r); /* keeps each lane's low 16 bits */
}

/* fp8 (fp8_simd.h says how): sixteen halves to float32 lanes and back. */
AVX512 static inline __m512 fp8_widen(__m256i h, const struct sl_fp8_format *fmt)
{
	__m512 f = _mm512_cvtph_ps(h);
	return fmt->scale == 1.0f ? f : _mm512_mul_ps(f, _mm512_set1_ps(1.0f / fmt->scale));
}

AVX512 static inline __m512 fp8_abs(__m512 f)
{
	return _mm512_abs_ps(f);
}

AVX512 static inline __m512 fp8_nan_as(__m512 r, __m512 f, float nan)
{
	return _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q), _mm512_set1_ps(nan));
}

SL_FP8_ROUND_FN(512, AVX512, __m256i)

AVX512 static inline __m512 e4m3_widen(__m128i v)
{
	return fp8_widen(sl_e4m3_halves(v), &sl_fp8_e4m3);
}

AVX512 static inline __m512 e5m2_widen(__m128i v)
{
	return fp8_widen(sl_e5m2_halves(v), &sl_fp8_e5m2);
}

AVX512 static inline __m128i e4m3_narrow(__m512 f)
{
	return sl_e4m3_codes(fp8_round(f, &sl_fp8_e4m3));
}

AVX512 static inline __m128i e5m2_narrow(__m512 f)
{
	return sl_e5m2_codes(fp8_round(f, &sl_fp8_e5m2));
}

/* Sixteen elements a step (ES bytes each), plain loads and stores; the last
 * step masked to what is left (masked stores are slow on some CPUs: once). */
#define NARROW_STEP(tn, VEXPR, ES, LOAD, STORE)                                           \
	do {                                                                              \
		__m512 x = tn##_widen(LOAD(a + ES * i)), y = tn##_widen(LOAD(b + ES * i)); \
		STORE(d + ES * i, tn##_narrow(VEXPR));                                    \
	} while (0)
#define LOAD2(p) _mm256_loadu_si256((const __m256i *)(p))
#define STORE2(p, v) _mm256_storeu_si256((__m256i *)(p), (v))
#define MLOAD2(p) _mm256_maskz_loadu_epi16(m, (p))
#define MSTORE2(p, v) _mm256_mask_storeu_epi16((p), m, (v))
#define LOAD1(p) _mm_loadu_si128((const __m128i *)(p))
#define STORE1(p, v) _mm_storeu_si128((__m128i *)(p), (v))
#define MLOAD1(p) _mm_maskz_loadu_epi8(m, (p))
#define MSTORE1(p, v) _mm_mask_storeu_epi8((p), m, (v))

#define NARROW_LOOP(tn, ES, OP, VEXPR)                                                         \
	AVX512 static void tn##_##OP##_avx512(void *dst, const void *pa, const void *pb, size_t n) \
	{                                                                                      \
		uint8_t *d = dst;                                                              \
		const uint8_t *a = pa, *b = pb;                                                \
		size_t i = 0;                                                                  \
		for (; i + 16 <= n; i += 16)                                                   \
			NARROW_STEP(tn, VEXPR, ES, LOAD##ES, STORE##ES);                       \
		__mmask16 m = (__mmask16)((1u << (n - i)) - 1);                                \
		if (m)                                                                         \
			NARROW_STEP(tn, VEXPR, ES, MLOAD##ES, MSTORE##ES);                     \
	}

#define NARROW_FNS(tn, ES)                                           \
	NARROW_LOOP(tn, ES, SUM, _mm512_add_ps(x, y))                 \
	NARROW_LOOP(tn, ES, PROD, _mm512_mul_ps(x, y))                \
	NARROW_LOOP(tn, ES, MAX, V_PICK(x, y, _CMP_GT_OQ))            \
	NARROW_LOOP(tn, ES, MIN, V_PICK(x, y, _CMP_LT_OQ))

NARROW_FNS(f16, 2)
NARROW_FNS(bf16, 2)
NARROW_FNS(e4m3, 1)
NARROW_FNS(e5m2, 1)

#define NARROW_ROW(tn) { tn##_SUM_avx512, tn##_PROD_avx512, tn##_MAX_avx512, tn##_MIN_avx512, tn##_SUM_avx512 }

const sl_kernel_table sl_kernels_avx512 = {
	SL_GENERIC_ROWS(avx512),
	[SL_FLOAT16] = NARROW_ROW(f16),
	[SL_BFLOAT16] = NARROW_ROW(bf16),
	[SL_FLOAT8_E4M3] = NARROW_ROW(e4m3),
	[SL_FLOAT8_E5M2] = NARROW_ROW(e5m2),
};

/* float32 and float64 with non-temporal stores: the plain kernel up to
 * dst's cache line boundary, then whole lines streamed, then the plain
 * kernel for the tail.  S is the intrinsics' suffix (ps, pd), V the vector
 * type's (__m512, __m512d). */
#define V_PICK_S(S, x, y, CMP) \
	_mm512_mask_blend_##S(_mm512_cmp_##S##_mask((x), (y), CMP) | _mm512_cmp_##S##_mask((x), (x), _CMP_UNORD_Q), (y), (x))

#define STREAM_LOOP(tn, T, S, V, OP, VEXPR)                                                         \
	AVX512 static void tn##_##OP##_stream_avx512(void *dst, const void *pa, const void *pb, size_t n) \
	{                                                                                           \
		T *d = dst;                                                                         \
		const T __attribute__((aligned(1))) *a = pa, *b = pb;                               \
		size_t i = ((64 - ((uintptr_t)d & 63)) & 63) / sizeof(T);                           \
		i = i < n ? i : n;                                                                  \
		tn##_##OP##_avx512(d, a, b, i);                                                     \
		for (; i + 64 / sizeof(T) <= n; i += 64 / sizeof(T)) {                               \
			__m512##V x = _mm512_loadu_##S(a + i), y = _mm512_loadu_##S(b + i);        \
			_mm512_stream_##S(d + i, (VEXPR));                                          \
		}                                                                                   \
		tn##_##OP##_avx512(d + i, a + i, b + i, n - i);                                     \
	}

#define STREAM_FNS(tn, T, S, V)                                           \
	STREAM_LOOP(tn, T, S, V, sum, _mm512_add_##S(x, y))                \
	STREAM_LOOP(tn, T, S, V, prod, _mm512_mul_##S(x, y))               \
	STREAM_LOOP(tn, T, S, V, max, V_PICK_S(S, x, y, _CMP_GT_OQ))       \
	STREAM_LOOP(tn, T, S, V, min, V_PICK_S(S, x, y, _CMP_LT_OQ))

STREAM_FNS(f32, float, ps, )
STREAM_FNS(f64, double, pd, d)

#define STREAM_ROW(tn) { tn##_sum_stream_avx512, tn##_prod_stream_avx512, tn##_max_stream_avx512, \
			 tn##_min_stream_avx512, tn##_sum_stream_avx512 }

const sl_kernel_table sl_streaming_avx512 = {
	[SL_FLOAT32] = STREAM_ROW(f32),
	[SL_FLOAT64] = STREAM_ROW(f64),
};

#else
const sl_kernel_table sl_kernels_avx512 = { { NULL } };
const sl_kernel_table sl_streaming_avx512 = { { NULL } };
#endif

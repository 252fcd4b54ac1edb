/*
 * fp8_simd.h: what the AVX2 and AVX-512 kernel families share for the OCP
 * fp8 formats, private to coll/ and x86-64 only.
 *
 * Both go through binary16 bit patterns, sixteen elements in a __m256i.
 * Widening: an fp8 code is moved into a half's fields (sl_e4m3_halves,
 * sl_e5m2_halves) and the hardware's exact half conversion makes it a
 * float32, times 1 / scale.  Narrowing: the family first rounds the float32
 * result to the fp8 format's precision, to nearest even, so that converting
 * it to binary16 is exact (no second rounding), and the code is then read
 * back out of the half's fields (sl_e4m3_codes, sl_e5m2_codes).  The result
 * is sl_e4m3_narrow's and sl_e5m2_narrow's, bit for bit.
 *
 * The helpers are compiled for AVX2 and F16C; the AVX-512 family, a
 * superset, inlines them as well.
 */
#ifndef SLUICE_FP8_SIMD_H
#define SLUICE_FP8_SIMD_H

#include <immintrin.h>
#include <stdint.h>

#define SL_FP8_SIMD __attribute__((target("avx2,f16c")))

/* How a family rounds a float32 f to a format (fp8_round, SL_FP8_ROUND_FN):
 *  1. |f| saturates to `max` (+Inf: not here), a NaN passing through;
 *  2. adding 2^(e + 23 - mant_bits), where 2^e is |f|'s binade but no lower
 *     than the least normal's (`min_normal`, below which the subnormal step
 *     holds) and no higher than `top` (so that the add stays finite), makes
 *     the FPU round |f| to the format's step there, to nearest even, and
 *     subtracting it again is exact;
 *  3. that times `scale`, with f's sign (a zero keeps it too);
 *  4. a NaN becomes `nan` (scaled already): the format's positive NaN;
 *  5. converted to binary16 toward zero, which is exact, except that e5m2
 *     values rounded past 57344 become 65504, whose code is 57344's: e5m2
 *     saturates there, while an Inf stays Inf. */
struct sl_fp8_format {
	int mant_bits;
	int32_t min_normal, top; /* float32 bit patterns of powers of two */
	float max, scale, nan;
};

/* e4m3's values times 2^-8 are the halves that hold its bits 7 places up
 * (sl_e4m3_halves); 480 would be the value of 0x7f, its NaN. */
static const struct sl_fp8_format sl_fp8_e4m3 = { 3, 0x3c800000, 0x43800000, 448.0f, 0x1p-8f, 480.0f * 0x1p-8f };
/* e5m2 is binary16's top byte; 2^16 is past its largest finite value. */
static const struct sl_fp8_format sl_fp8_e5m2 = { 2, 0x38800000, 0x47800000, __builtin_inff(), 1.0f,
						   __builtin_nanf("") };

/* fp8_round for a family whose vectors are W bits wide (256: AVX2, eight
 * lanes to a __m128i of halves; 512: AVX-512, sixteen to a __m256i), its
 * target attribute ATTR: the steps above, written once.  The family
 * defines fp8_abs(f) and fp8_nan_as(r, f, nan), r with nan where f is a
 * NaN (a blend on AVX2, a masked move on AVX-512, whose compares give
 * masks): each as the family had them, so that both compile to the
 * instructions they had (a float AND on AVX-512 made vandps of its vpandd,
 * an integer one on AVX2 rewrote its fp8 loops). */
#define SL_FP8_ROUND_FN(W, ATTR, HALVES)                                                                 \
	ATTR static inline HALVES fp8_round(__m##W f, const struct sl_fp8_format *fmt)                   \
	{                                                                                                \
		__m##W abs = fp8_abs(f);                                                                 \
		__m##W c = fmt->max == __builtin_inff() ? abs : _mm##W##_min_ps(_mm##W##_set1_ps(fmt->max), abs); \
		__m##W##i e = _mm##W##_and_si##W(_mm##W##_castps_si##W(c), _mm##W##_set1_epi32(0x7f800000)); \
		e = _mm##W##_min_epi32(_mm##W##_max_epi32(e, _mm##W##_set1_epi32(fmt->min_normal)),      \
				       _mm##W##_set1_epi32(fmt->top));                                   \
		__m##W magic = _mm##W##_castsi##W##_ps(                                                  \
			_mm##W##_add_epi32(e, _mm##W##_set1_epi32((23 - fmt->mant_bits) << 23)));        \
		__m##W r = _mm##W##_sub_ps(_mm##W##_add_ps(c, magic), magic);                            \
		__m##W sign = _mm##W##_xor_ps(f, abs);                                                   \
		r = fmt->scale == 1.0f ? _mm##W##_or_ps(r, sign)                                         \
				       : _mm##W##_mul_ps(r, _mm##W##_or_ps(_mm##W##_set1_ps(fmt->scale), sign)); \
		return _mm##W##_cvtps_ph(fp8_nan_as(r, f, fmt->nan), _MM_FROUND_TO_ZERO);                \
	}

/* Sixteen e5m2 codes as halves: the code is the top byte. */
SL_FP8_SIMD static inline __m256i sl_e5m2_halves(__m128i v)
{
	return _mm256_slli_epi16(_mm256_cvtepu8_epi16(v), 8);
}

/* Sixteen e4m3 codes as halves: sign to the top bit, exponent and mantissa
 * 7 places up, which is the value times 2^-8, subnormals included; the NaN
 * (S.1111.111) gets a half's all-ones exponent. */
SL_FP8_SIMD static inline __m256i sl_e4m3_halves(__m128i v)
{
	__m256i w = _mm256_cvtepu8_epi16(v), em = _mm256_and_si256(w, _mm256_set1_epi16(0x7f));
	__m256i h = _mm256_or_si256(_mm256_slli_epi16(_mm256_xor_si256(w, em), 8), _mm256_slli_epi16(em, 7));
	__m256i nan = _mm256_and_si256(_mm256_cmpeq_epi16(em, _mm256_set1_epi16(0x7f)), _mm256_set1_epi16(0x7c00));
	return _mm256_or_si256(h, nan);
}

/* Sixteen 16-bit lanes, each below 256, to bytes in order. */
SL_FP8_SIMD static inline __m128i sl_fp8_pack(__m256i w)
{
	return _mm_packus_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
}

/* The codes back out of halves that hold rounded values (see above). */
SL_FP8_SIMD static inline __m128i sl_e5m2_codes(__m256i h)
{
	return sl_fp8_pack(_mm256_srli_epi16(h, 8));
}

/* Adding the half's magnitude to it moves exponent and mantissa up one
 * place under the sign bit: the code is the top byte. */
SL_FP8_SIMD static inline __m128i sl_e4m3_codes(__m256i h)
{
	__m256i shifted = _mm256_add_epi16(h, _mm256_and_si256(h, _mm256_set1_epi16(0x7fff)));
	return sl_fp8_pack(_mm256_srli_epi16(shifted, 8));
}

#endif

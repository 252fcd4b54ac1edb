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

/* How a family rounds a float32 f to a format (fp8_round in each):
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

/*
 * narrow_float.h: float16, bfloat16 and the OCP fp8 formats to and from
 * float32, bit-exact, round to nearest even.  Shared by the CPU reduction
 * kernels and gpu_dma's CUDA kernel, so that both round every value alike.
 */
#ifndef SLUICE_NARROW_FLOAT_H
#define SLUICE_NARROW_FLOAT_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define SL_NF_FN static inline __host__ __device__
#else
#define SL_NF_FN static inline
#endif

/* Written as selects between fully computed cases, not branches, so that the
 * compiler can vectorize the loops that use them. */

SL_NF_FN float sl_bits_to_float(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

SL_NF_FN uint32_t sl_float_to_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

/* IEEE binary16 -> binary32; exact for every value, NaN payloads kept. */
SL_NF_FN float sl_half_widen(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t em = h & 0x7fffu; /* exponent and mantissa */
	uint32_t normal = (em << 13) + ((127u - 15u) << 23);
	uint32_t inf_nan = (em << 13) | 0x7f800000u;
	/* zero or subnormal: mant * 2^-24, exact in float */
	uint32_t sub = sl_float_to_bits((float)(int32_t)em * 0x1p-24f);

	return sl_bits_to_float(sign | (em >= 0x7c00u ? inf_nan : em >= 0x0400u ? normal : sub));
}

/* binary32 -> binary16, round to nearest even.  A NaN becomes the
 * positive quiet NaN 0x7e00, as in sl_e4m3_narrow: which operand's NaN
 * x + y or x * y returns is the compiler's choice, so its sign and payload
 * would differ between builds and between kernel families. */
SL_NF_FN uint16_t sl_half_narrow(float f)
{
	uint32_t u = sl_float_to_bits(f);
	uint32_t sign = (u >> 16) & 0x8000u, abs = u & 0x7fffffffu;
	/* normal: rebias 127 -> 15 and round off 13 bits; adding 0xfff plus the
	 * kept lsb rounds to even, and a carry bumps the exponent as it should */
	uint32_t v = abs - ((127u - 15u) << 23);
	uint32_t normal = (v + 0xfffu + ((v >> 13) & 1u)) >> 13;
	/* below 2^-14: adding 0.5 makes the FPU round |f| to a multiple of 2^-24
	 * (0.5's ulp), to nearest even; the low bits are then the half's bits */
	uint32_t sub = sl_float_to_bits(sl_bits_to_float(abs) + 0.5f) - 0x3f000000u;
	uint32_t r = abs >= 0x477ff000u ? 0x7c00u /* >= 65520 rounds past 65504: Inf */
		     : abs >= 0x38800000u ? normal : sub;

	return (uint16_t)(abs > 0x7f800000u ? 0x7e00u : sign | r);
}

SL_NF_FN float sl_bf16_widen(uint16_t h)
{
	return sl_bits_to_float((uint32_t)h << 16);
}

/* binary32 -> bfloat16, round to nearest even; a NaN becomes the positive
 * quiet NaN 0x7fc0 (as in sl_half_narrow). */
SL_NF_FN uint16_t sl_bf16_narrow(float f)
{
	uint32_t u = sl_float_to_bits(f);

	/* Adding 0x7fff plus the kept lsb rounds to even; it carries into the
	 * exponent (and up to Inf) exactly when rounding should. */
	uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;

	return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? 0x7fc0u : rounded);
}

/* OCP e4m3: bias 7, 3 mantissa bits, no Inf, NaN is S.1111.111, max 448. */
SL_NF_FN float sl_e4m3_widen(uint8_t b)
{
	uint32_t sign = (uint32_t)(b & 0x80u) << 24;
	uint32_t em = b & 0x7fu;
	uint32_t normal = (em << 20) + ((127u - 7u) << 23);
	uint32_t sub = sl_float_to_bits((float)(int32_t)em * 0x1p-9f); /* mant * 2^-9 */

	return sl_bits_to_float(sign | (em == 0x7fu ? 0x7fc00000u : em >= 0x08u ? normal : sub));
}

/* binary32 -> e4m3, round to nearest even, saturating (reduce.h says why).
 * A NaN becomes the positive NaN, 0x7f: which operand's NaN x + y or x * y
 * returns is the compiler's choice (it may swap them), so a NaN's sign
 * would differ between builds and between kernel families. */
SL_NF_FN uint8_t sl_e4m3_narrow(float f)
{
	uint32_t u = sl_float_to_bits(f);
	uint32_t sign = (u >> 24) & 0x80u, abs = u & 0x7fffffffu;
	uint32_t v = abs - ((127u - 7u) << 23);
	uint32_t normal = (v + 0x7ffffu + ((v >> 20) & 1u)) >> 20;
	/* below 2^-6: 16384's ulp is 2^-9, e4m3's subnormal step (as in sl_half_narrow) */
	uint32_t sub = sl_float_to_bits(sl_bits_to_float(abs) + 16384.0f) - 0x46800000u;
	uint32_t r = abs > 0x43e00000u ? 0x7eu /* beyond 448, Inf too: saturate */
		     : abs >= 0x3c800000u ? normal : sub;

	return (uint8_t)(abs > 0x7f800000u ? 0x7fu : sign | r);
}

/* OCP e5m2 is binary16's top byte: IEEE-like, Inf and NaN, max 57344. */
SL_NF_FN float sl_e5m2_widen(uint8_t b)
{
	return sl_half_widen((uint16_t)(b << 8));
}

/* binary32 -> e5m2, round to nearest even, saturating finite values; a
 * NaN becomes the positive NaN 0x7e (as in sl_e4m3_narrow). */
SL_NF_FN uint8_t sl_e5m2_narrow(float f)
{
	uint32_t u = sl_float_to_bits(f);
	uint32_t sign = (u >> 24) & 0x80u, abs = u & 0x7fffffffu;
	uint32_t v = abs - ((127u - 15u) << 23);
	uint32_t normal = (v + 0xfffffu + ((v >> 21) & 1u)) >> 21;
	/* below 2^-14: 128's ulp is 2^-16, e5m2's subnormal step */
	uint32_t sub = sl_float_to_bits(sl_bits_to_float(abs) + 128.0f) - 0x43000000u;
	uint32_t r = abs == 0x7f800000u ? 0x7cu
		     : abs > 0x47600000u ? 0x7bu /* beyond 57344: saturate */
		     : abs >= 0x38800000u ? normal : sub;

	return (uint8_t)(abs > 0x7f800000u ? 0x7eu : sign | r);
}

#endif

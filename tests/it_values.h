/*
 * it_values.h: element values of every sluice datatype for integration
 * tests that check results against a reference they compute: storing and
 * loading a double as any datatype (enough for small integers and their
 * averages), and the error each datatype and op is allowed.
 */
#ifndef SLUICE_IT_VALUES_H
#define SLUICE_IT_VALUES_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <sluice/sluice.h>

static inline bool is_float(sluice_datatype_t t)
{
	return t == SLUICE_FLOAT16 || t == SLUICE_FLOAT32 || t == SLUICE_FLOAT64 || t == SLUICE_BFLOAT16 ||
	       t == SLUICE_FLOAT8_E4M3 || t == SLUICE_FLOAT8_E5M2;
}

static inline bool is_unsigned(sluice_datatype_t t)
{
	return t == SLUICE_UINT8 || t == SLUICE_UINT32 || t == SLUICE_UINT64;
}

/* ---- float16 and bfloat16, enough for small integers and their averages ---- */

static inline float half_to_float(uint16_t h)
{
	int e = (h >> 10) & 31, m = h & 1023;
	float v = e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(m | 1024), e - 25);
	return h & 0x8000 ? -v : v;
}

/* Round to nearest even through float's bits; inputs are normal and small. */
static inline uint16_t float_to_half(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	uint32_t sign = (u >> 16) & 0x8000u, abs = u & 0x7fffffffu;
	if (abs < 0x38800000u) /* below half's normal range: only 0 occurs here */
		return (uint16_t)sign;
	uint32_t v = abs - ((127u - 15u) << 23);
	return (uint16_t)(sign | ((v + 0xfffu + ((v >> 13) & 1u)) >> 13));
}

static inline uint16_t float_to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* fp8 of a small integer (|v| < 16: exact in both formats). */
static inline uint8_t fp8_of_small(float f, unsigned mant_bits, unsigned bias)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	if (f == 0)
		return 0;
	uint32_t e = ((u >> 23) & 0xffu) - 127u + bias;
	return (uint8_t)(((u >> 24) & 0x80u) | (e << mant_bits) | ((u & 0x7fffffu) >> (23 - mant_bits)));
}

/* OCP e4m3: bias 7, 3 mantissa bits, NaN S.1111.111; e5m2 is half's top byte. */
static inline double e4m3_value(uint8_t b)
{
	int e = (b >> 3) & 15, m = b & 7;
	double v = (b & 0x7f) == 0x7f ? NAN : e == 0 ? ldexp(m, -9) : ldexp(8 + m, e - 10);
	return b & 0x80 ? -v : v;
}

/* v as an integer datatype holds it: a product of many ranks' 2s wraps
 * (2^7 is -128 in int8); other types unchanged. */
static inline double wrapped(sluice_datatype_t t, double v)
{
	switch (t) {
	case SLUICE_INT8: return (int8_t)(int64_t)v;
	case SLUICE_UINT8: return (uint8_t)(int64_t)v;
	case SLUICE_INT32: return (int32_t)(int64_t)v;
	case SLUICE_UINT32: return (uint32_t)(int64_t)v;
	default: return v;
	}
}

/* One element of any datatype; store and load go through it with memcpy,
 * so that an element may sit at any byte address (the API takes any). */
union element {
	int8_t i8;
	uint8_t u8;
	uint16_t u16;
	int32_t i32;
	uint32_t u32;
	int64_t i64;
	uint64_t u64;
	float f32;
	double f64;
};

static inline void store(void *buf, size_t i, sluice_datatype_t t, double v)
{
	union element e;

	switch (t) {
	case SLUICE_INT8: e.i8 = (int8_t)v; break;
	case SLUICE_UINT8: e.u8 = (uint8_t)v; break;
	case SLUICE_INT32: e.i32 = (int32_t)v; break;
	case SLUICE_UINT32: e.u32 = (uint32_t)v; break;
	case SLUICE_INT64: e.i64 = (int64_t)v; break;
	case SLUICE_UINT64: e.u64 = (uint64_t)v; break;
	case SLUICE_FLOAT16: e.u16 = float_to_half((float)v); break;
	case SLUICE_FLOAT32: e.f32 = (float)v; break;
	case SLUICE_FLOAT64: e.f64 = v; break;
	case SLUICE_BFLOAT16: e.u16 = float_to_bf16((float)v); break;
	case SLUICE_FLOAT8_E4M3: e.u8 = fp8_of_small((float)v, 3, 7); break;
	case SLUICE_FLOAT8_E5M2: e.u8 = fp8_of_small((float)v, 2, 15); break;
	default: return;
	}
	memcpy((uint8_t *)buf + i * sluice_datatype_size(t), &e, sluice_datatype_size(t));
}

static inline double load(const void *buf, size_t i, sluice_datatype_t t)
{
	union element e = { 0 };

	memcpy(&e, (const uint8_t *)buf + i * sluice_datatype_size(t), sluice_datatype_size(t));
	switch (t) {
	case SLUICE_INT8: return e.i8;
	case SLUICE_UINT8: return e.u8;
	case SLUICE_INT32: return e.i32;
	case SLUICE_UINT32: return e.u32;
	case SLUICE_INT64: return (double)e.i64;
	case SLUICE_UINT64: return (double)e.u64;
	case SLUICE_FLOAT16: return half_to_float(e.u16);
	case SLUICE_FLOAT32: return e.f32;
	case SLUICE_FLOAT64: return e.f64;
	case SLUICE_BFLOAT16: {
		uint32_t u = (uint32_t)e.u16 << 16;
		float f;
		memcpy(&f, &u, 4);
		return f;
	}
	case SLUICE_FLOAT8_E4M3: return e4m3_value(e.u8);
	case SLUICE_FLOAT8_E5M2: return half_to_float((uint16_t)(e.u8 << 8));
	default: return NAN;
	}
}

/* Relative error allowed: none where every partial result is exact (the
 * inputs are small integers), a few roundings' worth for AVG's division,
 * for e5m2's sums (2 mantissa bits: 9 is already inexact) and e4m3's (17 is
 * inexact: sums of more than 5 ranks). */
static inline double tolerance(sluice_datatype_t t, sluice_redop_t op)
{
	bool avg = op == SLUICE_AVG;

	switch (t) {
	case SLUICE_FLOAT64: return avg ? 1e-12 : 0;
	case SLUICE_FLOAT32: return avg ? 1e-6 : 0;
	case SLUICE_FLOAT8_E4M3: return avg || op == SLUICE_SUM ? 0.2 : 0;
	case SLUICE_FLOAT8_E5M2: return avg || op == SLUICE_SUM ? 0.4 : 0;
	default: return avg ? 1e-2 : 0;
	}
}

#endif

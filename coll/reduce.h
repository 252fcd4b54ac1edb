/*
 * reduce.h: elementwise reduction on the CPU, dispatched by datatype and op.
 * The enums mirror sluice_datatype_t and sluice_redop_t value for value
 * (coll/ depends on nothing but libc; dataplane/ asserts the match).
 */
#ifndef SLUICE_REDUCE_H
#define SLUICE_REDUCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum sl_dtype {
	SL_INT8, SL_UINT8, SL_INT32, SL_UINT32, SL_INT64, SL_UINT64,
	SL_FLOAT16, SL_FLOAT32, SL_FLOAT64, SL_BFLOAT16, SL_FLOAT8_E4M3, SL_FLOAT8_E5M2,
	SL_DTYPE_COUNT
};

enum sl_redop { SL_SUM, SL_PROD, SL_MAX, SL_MIN, SL_AVG, SL_REDOP_COUNT };

/* The kernel families, slowest first.  The best one this CPU and OS support
 * is active from program start; sl_simd_select picks another (lower) one. */
enum sl_simd { SL_SIMD_SCALAR, SL_SIMD_AVX2, SL_SIMD_AVX512, SL_SIMD_COUNT };

/* Bytes per element; 0 for an unknown type. */
size_t sl_dtype_size(enum sl_dtype t);
const char *sl_dtype_name(enum sl_dtype t);
const char *sl_redop_name(enum sl_redop op);

/* Whether this build can reduce (t, op); AVG is applied as SUM here and
 * divided once at the end by sl_scale_avg. */
bool sl_reduce_supported(enum sl_dtype t, enum sl_redop op);

/* dst[i] = a[i] op b[i] for i < count; dst may alias a or b. */
void sl_reduce(void *dst, const void *a, const void *b, size_t count, enum sl_dtype t,
	       enum sl_redop op);

/* buf[i] /= n, for AVG's last step. */
void sl_scale_avg(void *buf, size_t count, enum sl_dtype t, unsigned n);

/* ---- which kernels run (coll/simd.c) ---- */

/* "scalar", "avx2", "avx512"; "unknown" otherwise. */
const char *sl_simd_name(enum sl_simd s);
/* The name's family; false when the name is none of them. */
bool sl_simd_parse(const char *name, enum sl_simd *out);
/* The best family this CPU has and this OS saves the registers of (XGETBV). */
enum sl_simd sl_simd_best(void);
/* The family sl_reduce uses now. */
enum sl_simd sl_simd_active(void);
/* Use s for every reduction that starts from now on, on any thread; false
 * (and nothing changes) when the CPU or OS lacks it. */
bool sl_simd_select(enum sl_simd s);

/* ---- 16- and 8-bit floats to and from float32 ----
 * Widening is exact; narrowing rounds to nearest even, and a NaN of either
 * sign narrows to the format's positive quiet NaN (0x7e00 for float16,
 * 0x7fc0 for bfloat16, 0x7f for e4m3, 0x7e for e5m2), so that every kernel
 * family and build gives the same bits (narrow_float.h says why).  float16
 * and bfloat16 overflow to Inf.  The OCP fp8 formats saturate:
 * a finite value beyond the largest finite one (448 for e4m3, 57344 for
 * e5m2) becomes that value with its sign, as NCCL's fp8 reductions do, so a
 * sum that runs over stays a usable number instead of an Inf (e4m3 has no
 * Inf at all).  An Inf input stays Inf in e5m2 and saturates in e4m3. */
float sl_half_to_float(uint16_t h);
uint16_t sl_float_to_half(float f);
float sl_bf16_to_float(uint16_t h);
uint16_t sl_float_to_bf16(float f);
float sl_e4m3_to_float(uint8_t b);
uint8_t sl_float_to_e4m3(float f);
float sl_e5m2_to_float(uint8_t b);
uint8_t sl_float_to_e5m2(float f);

#endif

/*
 * reduce.h: elementwise reduction on the CPU, dispatched by datatype and op.
 * The enums mirror sluice_datatype_t and sluice_redop_t value for value
 * (coll/ depends on nothing but libc; ctl/ and dataplane/ assert the match).
 */
#ifndef SLUICE_REDUCE_H
#define SLUICE_REDUCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum sl_dtype {
	SL_INT8, SL_UINT8, SL_INT32, SL_UINT32, SL_INT64, SL_UINT64,
	SL_FLOAT16, SL_FLOAT32, SL_FLOAT64, SL_BFLOAT16, SL_DTYPE_COUNT
};

enum sl_redop { SL_SUM, SL_PROD, SL_MAX, SL_MIN, SL_AVG, SL_REDOP_COUNT };

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

/* IEEE binary16 and bfloat16 to and from float32: widening is exact,
 * narrowing rounds to nearest even; a NaN stays a (quiet) NaN. */
float sl_half_to_float(uint16_t h);
uint16_t sl_float_to_half(float f);
float sl_bf16_to_float(uint16_t h);
uint16_t sl_float_to_bf16(float f);

#endif

/*
 * reduce.c: the reduction entry points: datatype sizes and names, dispatch
 * of sl_reduce to the active kernel family (simd.c), streaming of results
 * too large for the cache, and AVG's final division.
 *
 * float16, bfloat16 and the fp8 types are widened to float32, reduced there
 * and rounded back to nearest-even: float32 has more than 2p+2 bits for all
 * of them, so that double rounding still gives the correctly rounded result
 * of + and *.
 */
#include "reduce_impl.h"

/* A call writing at least this much streams its result past the cache:
 * about a core's share of a server's last-level cache, beyond which the
 * destination would be evicted before anyone reads it anyway.  Below it,
 * the result stays cached for the schedule's next step (a packet is a few
 * KiB, so the engine's calls never stream). */
#define STREAM_MIN_BYTES (4u << 20)

static const size_t dtype_sizes[SL_DTYPE_COUNT] = {
	[SL_INT8] = 1, [SL_UINT8] = 1, [SL_INT32] = 4, [SL_UINT32] = 4,
	[SL_INT64] = 8, [SL_UINT64] = 8, [SL_FLOAT16] = 2, [SL_FLOAT32] = 4,
	[SL_FLOAT64] = 8, [SL_BFLOAT16] = 2, [SL_FLOAT8_E4M3] = 1, [SL_FLOAT8_E5M2] = 1,
};

/* The names nccl-tests prints, so tables from both read alike. */
static const char *const dtype_names[SL_DTYPE_COUNT] = {
	[SL_INT8] = "int8", [SL_UINT8] = "uint8", [SL_INT32] = "int32",
	[SL_UINT32] = "uint32", [SL_INT64] = "int64", [SL_UINT64] = "uint64",
	[SL_FLOAT16] = "half", [SL_FLOAT32] = "float", [SL_FLOAT64] = "double",
	[SL_BFLOAT16] = "bfloat16", [SL_FLOAT8_E4M3] = "f8e4m3", [SL_FLOAT8_E5M2] = "f8e5m2",
};

static const char *const redop_names[SL_REDOP_COUNT] = {
	[SL_SUM] = "sum", [SL_PROD] = "prod", [SL_MAX] = "max", [SL_MIN] = "min",
	[SL_AVG] = "avg",
};

size_t sl_dtype_size(enum sl_dtype t)
{
	return (unsigned)t < SL_DTYPE_COUNT ? dtype_sizes[t] : 0;
}

const char *sl_dtype_name(enum sl_dtype t)
{
	return (unsigned)t < SL_DTYPE_COUNT ? dtype_names[t] : "unknown";
}

const char *sl_redop_name(enum sl_redop op)
{
	return (unsigned)op < SL_REDOP_COUNT ? redop_names[op] : "unknown";
}

/* Every valid pair is reduced here (AVG on integers too: truncating
 * division); refusing AVG on integers is the API layer's policy. */
bool sl_reduce_supported(enum sl_dtype t, enum sl_redop op)
{
	return (unsigned)t < SL_DTYPE_COUNT && (unsigned)op < SL_REDOP_COUNT;
}

/* Unknown pairs do nothing, so the dispatch never reads past the table. */
void sl_reduce(void *dst, const void *a, const void *b, size_t count, enum sl_dtype t,
	       enum sl_redop op)
{
	if (!sl_reduce_supported(t, op))
		return;
	const struct sl_dispatch *k = sl_dispatch_active();
	size_t es = dtype_sizes[t];
	sl_reduce_fn streaming = k->streaming[t][op];
	if (streaming && count >= STREAM_MIN_BYTES / es && (uintptr_t)dst % es == 0) {
		streaming(dst, a, b, count);
		sl_stream_fence();
	} else {
		k->fn[t][op](dst, a, b, count);
	}
}

/* ---- division for AVG ---- */

typedef void (*scale_fn)(void *buf, size_t n, unsigned div);

/* buf[i] = buf[i] / div, computed in W: 64 bits for integers, so that div
 * converts without loss and no division overflows. */
#define SCALE(name, T, W, EXPR)                                    \
	static void name(void *buf, size_t n, unsigned div)        \
	{                                                          \
		typedef T __attribute__((aligned(1))) UT;          \
		UT *p = buf;                                       \
		for (size_t i = 0; i < n; i++) {                   \
			W x = (W)p[i];                             \
			p[i] = (T)(EXPR);                          \
		}                                                  \
	}

/* Narrow floats divide in float32 and round once. */
#define SCALE_NARROW(name, T, TO, FROM) SCALE(name, T, T, FROM(TO(x) / (float)div))

SCALE(i8_scale, int8_t, int64_t, x / (int64_t)div)
SCALE(u8_scale, uint8_t, uint64_t, x / div)
SCALE(i32_scale, int32_t, int64_t, x / (int64_t)div)
SCALE(u32_scale, uint32_t, uint64_t, x / div)
SCALE(i64_scale, int64_t, int64_t, x / (int64_t)div)
SCALE(u64_scale, uint64_t, uint64_t, x / div)
SCALE(f32_scale, float, float, x / (float)div)
SCALE(f64_scale, double, double, x / (double)div)
SCALE_NARROW(f16_scale, uint16_t, sl_half_widen, sl_half_narrow)
SCALE_NARROW(bf16_scale, uint16_t, sl_bf16_widen, sl_bf16_narrow)
SCALE_NARROW(e4m3_scale, uint8_t, sl_e4m3_widen, sl_e4m3_narrow)
SCALE_NARROW(e5m2_scale, uint8_t, sl_e5m2_widen, sl_e5m2_narrow)

static const scale_fn scale_table[SL_DTYPE_COUNT] = {
	[SL_INT8] = i8_scale,       [SL_UINT8] = u8_scale,
	[SL_INT32] = i32_scale,     [SL_UINT32] = u32_scale,
	[SL_INT64] = i64_scale,     [SL_UINT64] = u64_scale,
	[SL_FLOAT16] = f16_scale,   [SL_FLOAT32] = f32_scale,
	[SL_FLOAT64] = f64_scale,   [SL_BFLOAT16] = bf16_scale,
	[SL_FLOAT8_E4M3] = e4m3_scale, [SL_FLOAT8_E5M2] = e5m2_scale,
};

/* n == 0 (or an unknown type) leaves buf as it is rather than divide by zero. */
void sl_scale_avg(void *buf, size_t count, enum sl_dtype t, unsigned n)
{
	if ((unsigned)t < SL_DTYPE_COUNT && n > 0)
		scale_table[t](buf, count, n);
}

/* ---- conversions, for tests and the other rooms ---- */

float sl_half_to_float(uint16_t h) { return sl_half_widen(h); }
uint16_t sl_float_to_half(float f) { return sl_half_narrow(f); }
float sl_bf16_to_float(uint16_t h) { return sl_bf16_widen(h); }
uint16_t sl_float_to_bf16(float f) { return sl_bf16_narrow(f); }
float sl_e4m3_to_float(uint8_t b) { return sl_e4m3_widen(b); }
uint8_t sl_float_to_e4m3(float f) { return sl_e4m3_narrow(f); }
float sl_e5m2_to_float(uint8_t b) { return sl_e5m2_widen(b); }
uint8_t sl_float_to_e5m2(float f) { return sl_e5m2_narrow(f); }

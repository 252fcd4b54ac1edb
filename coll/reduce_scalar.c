/*
 * reduce_scalar.c: the portable kernel family, plain C for any CPU (the
 * compiler still vectorizes it for the build's baseline, SSE2 on x86-64).
 * It is the fallback of the other families and their reference in tests.
 */
#include "reduce_impl.h"

#define NO_ATTR

SL_GENERIC_FNS(scalar, NO_ATTR)
SL_WIDENED_FNS(e4m3, scalar, NO_ATTR, uint8_t, sl_e4m3_widen, sl_e4m3_narrow)
SL_WIDENED_FNS(e5m2, scalar, NO_ATTR, uint8_t, sl_e5m2_widen, sl_e5m2_narrow)
SL_WIDENED_FNS(f16, scalar, NO_ATTR, uint16_t, sl_half_widen, sl_half_narrow)
SL_WIDENED_FNS(bf16, scalar, NO_ATTR, uint16_t, sl_bf16_widen, sl_bf16_narrow)

const sl_kernel_table sl_kernels_scalar = {
	SL_GENERIC_ROWS(scalar),
	[SL_FLOAT8_E4M3] = SL_ROW(e4m3, scalar),
	[SL_FLOAT8_E5M2] = SL_ROW(e5m2, scalar),
	[SL_FLOAT16] = SL_ROW(f16, scalar),
	[SL_BFLOAT16] = SL_ROW(bf16, scalar),
};

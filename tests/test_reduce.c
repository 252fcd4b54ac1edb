/*
 * test_reduce.c: coll/reduce against independent references.
 *
 * Integers are checked against 64-bit wrapping arithmetic truncated to the
 * type; floating types against float64 arithmetic rounded once to the type.
 * The float16/bfloat16 reference rounds by binary search over the bit
 * patterns, so it shares no code or trick with the conversions under test.
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "reduce.h"

/* ---- deterministic random numbers ---- */

static uint64_t rng_state;

static uint64_t rng(void)
{
	/* xorshift64*: small, seeded, good enough for test inputs */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * UINT64_C(2685821657736338717);
}

/* ---- independent decoders and rounding ---- */

static double half_value(uint16_t h)
{
	int e = (h >> 10) & 0x1f, m = h & 0x3ff;
	double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);

	return (h & 0x8000) ? -v : v;
}

static double bf16_value(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

struct fmt16 {
	double (*value)(uint16_t);
	uint16_t max_finite; /* largest finite positive pattern */
	uint16_t inf;
	double overflow;     /* |x| at or above this rounds to Inf (a tie goes to Inf, the even side) */
};

static const struct fmt16 HALF = { half_value, 0x7bff, 0x7c00, 65520.0 };
static const struct fmt16 BF16 = { bf16_value, 0x7f7f, 0x7f80, 0x1.ffp+127 };

/* Round x (not NaN) to the nearest pattern, ties to the even one. */
static uint16_t round16(const struct fmt16 *f, double x)
{
	uint16_t sign = signbit(x) ? 0x8000 : 0;
	double a = fabs(x);

	if (a >= f->overflow)
		return sign | f->inf;
	unsigned lo = 0, hi = f->max_finite; /* largest pattern with value <= a */
	while (lo < hi) {
		unsigned mid = (lo + hi + 1) / 2;
		if (f->value((uint16_t)mid) <= a)
			lo = mid;
		else
			hi = mid - 1;
	}
	if (lo == f->max_finite)
		return sign | (uint16_t)lo;
	double below = a - f->value((uint16_t)lo), above = f->value((uint16_t)(lo + 1)) - a;
	bool up = above < below || (above == below && (lo & 1));
	return sign | (uint16_t)(lo + up);
}

/* ---- typed element access ---- */

static bool is_int(enum sl_dtype t)
{
	return t <= SL_UINT64;
}

static bool is_signed(enum sl_dtype t)
{
	return t == SL_INT8 || t == SL_INT32 || t == SL_INT64;
}

/* An integer element, sign- or zero-extended to 64 bits. */
static uint64_t get_int(const void *buf, size_t i, enum sl_dtype t)
{
	const char *p = (const char *)buf + i * sl_dtype_size(t);

	switch (t) {
	case SL_INT8: return (uint64_t)(int64_t)*(const int8_t *)p;
	case SL_UINT8: return *(const uint8_t *)p;
	case SL_INT32: return (uint64_t)(int64_t)*(const int32_t *)p;
	case SL_UINT32: return *(const uint32_t *)p;
	default: return *(const uint64_t *)p;
	}
}

static double get_float(const void *buf, size_t i, enum sl_dtype t)
{
	switch (t) {
	case SL_FLOAT16: return half_value(((const uint16_t *)buf)[i]);
	case SL_BFLOAT16: return bf16_value(((const uint16_t *)buf)[i]);
	case SL_FLOAT32: return ((const float *)buf)[i];
	default: return ((const double *)buf)[i];
	}
}

/* Store x rounded once to t into out (one element). */
static void put_float(void *out, double x, enum sl_dtype t)
{
	uint16_t h;
	float f;

	switch (t) {
	case SL_FLOAT16:
	case SL_BFLOAT16:
		h = isnan(x) ? 0x7e00 : round16(t == SL_FLOAT16 ? &HALF : &BF16, x);
		memcpy(out, &h, 2);
		break;
	case SL_FLOAT32:
		f = (float)x;
		memcpy(out, &f, 4);
		break;
	default:
		memcpy(out, &x, 8);
	}
}

/* ---- references ---- */

static uint64_t ref_int(uint64_t x, uint64_t y, enum sl_redop op, bool sgn)
{
	bool x_gt = sgn ? (int64_t)x > (int64_t)y : x > y;

	switch (op) {
	case SL_PROD: return x * y;
	case SL_MAX: return x_gt ? x : y;
	case SL_MIN: return x_gt ? y : x;
	default: return x + y; /* SUM and AVG */
	}
}

static double ref_float(double x, double y, enum sl_redop op)
{
	if ((op == SL_MAX || op == SL_MIN) && (isnan(x) || isnan(y)))
		return NAN;
	switch (op) {
	case SL_PROD: return x * y;
	case SL_MAX: return x > y ? x : y;
	case SL_MIN: return x < y ? x : y;
	default: return x + y;
	}
}

/* Whether element i of got matches the reference for x op y. */
static bool element_ok(const void *got, size_t i, enum sl_dtype t, enum sl_redop op,
		       const void *a, const void *b)
{
	size_t es = sl_dtype_size(t);
	unsigned char want[8];

	if (is_int(t)) {
		uint64_t r = ref_int(get_int(a, i, t), get_int(b, i, t), op, is_signed(t));
		memcpy(want, &r, es); /* little-endian truncation wraps to the type */
		return memcmp(want, (const char *)got + i * es, es) == 0;
	}
	double r = ref_float(get_float(a, i, t), get_float(b, i, t), op);
	double g = get_float(got, i, t);
	if (isnan(r) || isnan(g))
		return isnan(r) && isnan(g);
	if ((op == SL_MAX || op == SL_MIN) && r == 0 && g == 0)
		return true; /* either zero is a valid max(-0, +0) */
	put_float(want, r, t);
	return memcmp(want, (const char *)got + i * es, es) == 0;
}

/* ---- inputs ---- */

static uint64_t int_edge(enum sl_dtype t)
{
	unsigned bits = (unsigned)sl_dtype_size(t) * 8;
	uint64_t top = UINT64_C(1) << (bits - 1);
	uint64_t edges[] = { 0, 1, UINT64_MAX, top, top - 1, 2, top + 1 };

	return edges[rng() % (sizeof(edges) / sizeof(edges[0]))];
}

static double float_edge(void)
{
	const double edges[] = {
		0.0, -0.0, 1.0, -1.0, INFINITY, -INFINITY, NAN, FLT_MAX, -FLT_MAX,
		FLT_MIN, 0x1p-149, 65504.0, 65520.0, 0x1p-24, 0x1p-14, 0.5, 3.0,
	};
	return edges[rng() % (sizeof(edges) / sizeof(edges[0]))];
}

/* A value of ordinary size, so that sums and products mostly stay finite. */
static double float_moderate(void)
{
	double m = (double)(rng() >> 11) * 0x1p-53;

	return ldexp((rng() & 1) ? -m : m, (int)(rng() % 40) - 20);
}

static void fill_random(void *buf, size_t n, enum sl_dtype t)
{
	size_t es = sl_dtype_size(t);

	for (size_t i = 0; i < n; i++) {
		char *p = (char *)buf + i * es;
		uint64_t r = rng(), kind = rng() % 4;
		if (is_int(t)) {
			uint64_t v = kind == 0 ? int_edge(t) : r;
			memcpy(p, &v, es);
		} else if (kind == 0) {
			put_float(p, float_edge(), t);
		} else if (kind == 1 || t == SL_FLOAT16 || t == SL_BFLOAT16) {
			memcpy(p, &r, es); /* any bit pattern: NaNs, Infs, subnormals */
		} else {
			put_float(p, float_moderate(), t);
		}
	}
}

/* ---- tests ---- */

enum alias { ALIAS_NONE, ALIAS_DST_A, ALIAS_DST_B };

/* One (type, op, count, aliasing) case; a guard element after the end
 * must come out untouched. */
static void check_case(enum sl_dtype t, enum sl_redop op, size_t n, enum alias al)
{
	size_t es = sl_dtype_size(t), bytes = (n + 1) * es;
	unsigned char *a = malloc(bytes), *b = malloc(bytes), *d = malloc(bytes);
	unsigned char *a0 = malloc(bytes), *b0 = malloc(bytes);

	assert_non_null(a && b && d && a0 && b0);
	fill_random(a, n + 1, t);
	fill_random(b, n + 1, t);
	memset(d, 0xa5, bytes);
	memcpy(a0, a, bytes);
	memcpy(b0, b, bytes);
	unsigned char *dst = al == ALIAS_DST_A ? a : al == ALIAS_DST_B ? b : d;
	sl_reduce(dst, a, b, n, t, op);
	for (size_t i = 0; i < n; i++)
		if (!element_ok(dst, i, t, op, a0, b0))
			fail_msg("%s %s n=%zu alias=%d: element %zu wrong", sl_dtype_name(t),
				 sl_redop_name(op), n, al, i);
	const unsigned char *guard = al == ALIAS_DST_A ? a0 : al == ALIAS_DST_B ? b0 : NULL;
	unsigned char poison[8];
	memset(poison, 0xa5, sizeof(poison));
	assert_memory_equal(dst + n * es, guard ? guard + n * es : poison, es);
	free(a), free(b), free(d), free(a0), free(b0);
}

static void test_all_types_and_ops(void **state)
{
	const size_t counts[] = { 0, 1, 7, 1000 };
	(void)state;

	rng_state = 0x5eed0001;
	for (int t = 0; t < SL_DTYPE_COUNT; t++)
		for (int op = 0; op < SL_REDOP_COUNT; op++)
			for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
				for (int al = ALIAS_NONE; al <= ALIAS_DST_B; al++)
					check_case(t, op, counts[c], al);
}

/* Unaligned starting elements exercise the vector loops' peeling. */
static void test_offsets(void **state)
{
	float a[64], b[64], d[64];
	(void)state;

	rng_state = 0x5eed0002;
	for (int off = 0; off < 4; off++) {
		fill_random(a, 64, SL_FLOAT32);
		fill_random(b, 64, SL_FLOAT32);
		sl_reduce(d + off, a + (3 - off), b + off, 50, SL_FLOAT32, SL_SUM);
		for (size_t i = 0; i < 50; i++)
			assert_true(element_ok(d + off, i, SL_FLOAT32, SL_SUM, a + (3 - off), b + off));
	}
}

static void test_count_zero_null(void **state)
{
	(void)state;
	for (int t = 0; t < SL_DTYPE_COUNT; t++) {
		sl_reduce(NULL, NULL, NULL, 0, t, SL_SUM);
		sl_scale_avg(NULL, 0, t, 3);
	}
}

static void test_half_round_trip(void **state)
{
	(void)state;
	for (uint32_t h = 0; h < 65536; h++) {
		double want = half_value((uint16_t)h);
		float f = sl_half_to_float((uint16_t)h);
		uint16_t back = sl_float_to_half(f);
		if (isnan(want)) {
			assert_true(isnan(f));
			assert_true(isnan(half_value(back)));
			continue;
		}
		assert_true((double)f == want && !signbit(f) == !signbit(want));
		assert_int_equal(back, h);
	}
}

static void test_bf16_round_trip(void **state)
{
	(void)state;
	for (uint32_t h = 0; h < 65536; h++) {
		float f = sl_bf16_to_float((uint16_t)h);
		uint16_t back = sl_float_to_bf16(f);
		if (isnan(f)) {
			assert_true(isnan(bf16_value(back)));
			continue;
		}
		assert_true((double)f == bf16_value((uint16_t)h));
		assert_int_equal(back, h);
	}
}

/* Narrowing rounds to nearest even, checked at chosen ties and on random floats. */
static void test_narrowing(void **state)
{
	static const struct { float in; uint16_t half; } ties[] = {
		{ 65504.0f, 0x7bff }, { 65519.99f, 0x7bff }, { 65520.0f, 0x7c00 },
		{ 0x1p-25f, 0x0000 }, { 0x1.000002p-25f, 0x0001 }, { 0x3p-25f, 0x0002 },
		{ 0x1p-24f, 0x0001 }, { 1.0f + 0x1p-11f, 0x3c00 }, { 1.0f + 0x3p-11f, 0x3c02 },
		{ 0x1.ffap-15f, 0x03ff }, { 0x1.ffcp-15f, 0x0400 }, { -0.0f, 0x8000 },
		{ INFINITY, 0x7c00 }, { -INFINITY, 0xfc00 }, { 1e-30f, 0x0000 },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(ties) / sizeof(ties[0]); i++)
		assert_int_equal(sl_float_to_half(ties[i].in), ties[i].half);
	assert_int_equal(sl_float_to_bf16(1.0f + 0x1p-8f), 0x3f80);
	assert_int_equal(sl_float_to_bf16(1.0f + 0x3p-8f), 0x3f82);
	assert_int_equal(sl_float_to_bf16(FLT_MAX), 0x7f80);
	/* a NaN whose payload sits only in the bits cut off must stay a NaN */
	const uint32_t nans[] = { 0x7f800001u, 0xff800001u, 0x7fc00000u, 0x7f801000u };
	for (size_t i = 0; i < sizeof(nans) / sizeof(nans[0]); i++) {
		float f;
		memcpy(&f, &nans[i], 4);
		assert_true(isnan(half_value(sl_float_to_half(f))));
		assert_true(isnan(bf16_value(sl_float_to_bf16(f))));
	}
	rng_state = 0x5eed0003;
	for (int i = 0; i < 200000; i++) {
		uint32_t u = (uint32_t)rng();
		float f;
		memcpy(&f, &u, 4);
		if (isnan(f))
			continue;
		/* half cares about a narrow exponent band: pull most samples into it */
		if (i & 1)
			f = ldexpf(frexpf(f, &(int){0}), (int)(rng() % 48) - 30);
		assert_int_equal(sl_float_to_half(f), round16(&HALF, f));
		assert_int_equal(sl_float_to_bf16(f), round16(&BF16, f));
	}
}

static void test_scale_avg(void **state)
{
	const unsigned divs[] = { 1, 2, 3, 7 };
	(void)state;

	rng_state = 0x5eed0004;
	for (int t = 0; t < SL_DTYPE_COUNT; t++)
		for (size_t k = 0; k < sizeof(divs) / sizeof(divs[0]); k++) {
			size_t es = sl_dtype_size(t);
			_Alignas(8) unsigned char buf[100 * 8], orig[100 * 8], want[8];
			fill_random(buf, 100, t);
			memcpy(orig, buf, sizeof(orig));
			sl_scale_avg(buf, 100, t, divs[k]);
			for (size_t i = 0; i < 100; i++) {
				if (is_int(t)) {
					uint64_t x = get_int(orig, i, t), r = is_signed(t) ?
						(uint64_t)((int64_t)x / (int64_t)divs[k]) : x / divs[k];
					memcpy(want, &r, es);
				} else {
					double x = get_float(orig, i, t) / divs[k];
					if (isnan(x)) {
						assert_true(isnan(get_float(buf, i, t)));
						continue;
					}
					put_float(want, x, t);
				}
				assert_memory_equal(buf + i * es, want, es);
			}
		}
}

static void test_names_and_sizes(void **state)
{
	(void)state;
	assert_int_equal(sl_dtype_size(SL_FLOAT16), 2);
	assert_int_equal(sl_dtype_size(SL_UINT64), 8);
	assert_int_equal(sl_dtype_size(SL_DTYPE_COUNT), 0);
	assert_string_equal(sl_dtype_name(SL_FLOAT32), "float");
	assert_string_equal(sl_dtype_name(SL_BFLOAT16), "bfloat16");
	assert_string_equal(sl_redop_name(SL_AVG), "avg");
	assert_true(sl_reduce_supported(SL_INT8, SL_AVG));
	assert_false(sl_reduce_supported(SL_DTYPE_COUNT, SL_SUM));
	assert_false(sl_reduce_supported(SL_FLOAT32, SL_REDOP_COUNT));
	/* an unknown pair is a no-op, never a wild dispatch */
	float x = 1.0f;
	sl_reduce(&x, &x, &x, 1, SL_DTYPE_COUNT, SL_SUM);
	sl_reduce(&x, &x, &x, 1, SL_FLOAT32, SL_REDOP_COUNT);
	assert_true(x == 1.0f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_all_types_and_ops),
		cmocka_unit_test(test_offsets),
		cmocka_unit_test(test_count_zero_null),
		cmocka_unit_test(test_half_round_trip),
		cmocka_unit_test(test_bf16_round_trip),
		cmocka_unit_test(test_narrowing),
		cmocka_unit_test(test_scale_avg),
		cmocka_unit_test(test_names_and_sizes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_reduce.c: coll/reduce against independent references, through every
 * kernel family this CPU has (scalar, AVX2, AVX-512; sl_simd_select).
 *
 * Integers are checked against 64-bit wrapping arithmetic truncated to the
 * type; floating types against float64 arithmetic rounded once to the type.
 * The 16- and 8-bit float references decode patterns with ldexp and round
 * by binary search over the patterns, so they share no code or trick with
 * the conversions under test.  fp8 is checked on every pair of its 256
 * values.
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

#include "reduce_impl.h" /* the families' own tables */

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

/* OCP fp8: e4m3 (bias 7, no Inf, NaN S.1111.111), e5m2 (bias 15, IEEE-like). */
static double e4m3_value(uint16_t b)
{
	int e = (b >> 3) & 15, m = b & 7;
	double v = (b & 0x7f) == 0x7f ? NAN : e == 0 ? ldexp(m, -9) : ldexp(8 + m, e - 10);

	return (b & 0x80) ? -v : v;
}

static double e5m2_value(uint16_t b)
{
	int e = (b >> 2) & 31, m = b & 3;
	double v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -16) : ldexp(4 + m, e - 17);

	return (b & 0x80) ? -v : v;
}

struct fmt {
	double (*value)(uint16_t);
	uint16_t sign;       /* the sign bit */
	uint16_t max_finite; /* largest finite positive pattern */
	uint16_t inf;        /* 0: none */
	uint16_t nan;        /* the quiet NaN the reference writes */
	bool saturate;       /* finite overflow gives max_finite, not Inf */
	double overflow;     /* |x| at or above this rounds to Inf (a tie goes to Inf, the even side) */
};

static const struct fmt HALF = { half_value, 0x8000, 0x7bff, 0x7c00, 0x7e00, false, 65520.0 };
static const struct fmt BF16 = { bf16_value, 0x8000, 0x7f7f, 0x7f80, 0x7fc0, false, 0x1.ffp+127 };
static const struct fmt E4M3 = { e4m3_value, 0x80, 0x7e, 0, 0x7f, true, 0 };
static const struct fmt E5M2 = { e5m2_value, 0x80, 0x7b, 0x7c, 0x7e, true, 0 };

/* Round x to the nearest pattern, ties to the even one. */
static uint16_t round_fmt(const struct fmt *f, double x)
{
	uint16_t sign = signbit(x) ? f->sign : 0;
	double a = fabs(x);

	if (isnan(x))
		return f->nan;
	if (isinf(a) && f->inf)
		return sign | f->inf;
	if (f->saturate ? a > f->value(f->max_finite) : a >= f->overflow)
		return sign | (f->saturate ? f->max_finite : f->inf);
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

/* The narrow float format of t, or NULL. */
static const struct fmt *narrow_fmt(enum sl_dtype t)
{
	switch (t) {
	case SL_FLOAT16: return &HALF;
	case SL_BFLOAT16: return &BF16;
	case SL_FLOAT8_E4M3: return &E4M3;
	case SL_FLOAT8_E5M2: return &E5M2;
	default: return NULL;
	}
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
	const struct fmt *f = narrow_fmt(t);

	if (f)
		return f->value(sl_dtype_size(t) == 1 ? ((const uint8_t *)buf)[i] : ((const uint16_t *)buf)[i]);
	return t == SL_FLOAT32 ? ((const float *)buf)[i] : ((const double *)buf)[i];
}

/* Store x rounded once to t into out (one element). */
static void put_float(void *out, double x, enum sl_dtype t)
{
	const struct fmt *nf = narrow_fmt(t);
	float f = (float)x;

	if (nf) {
		uint16_t h = round_fmt(nf, x); /* little-endian: the low byte for fp8 */
		memcpy(out, &h, sl_dtype_size(t));
	} else if (t == SL_FLOAT32) {
		memcpy(out, &f, 4);
	} else {
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
		} else if (kind == 1 || narrow_fmt(t)) {
			memcpy(p, &r, es); /* any bit pattern: NaNs, Infs, subnormals */
		} else {
			put_float(p, float_moderate(), t);
		}
	}
}

/* ---- every kernel family ---- */

/* Whether got and want hold the same bits, or both a NaN of type t. */
static bool same_result(const unsigned char *got, const unsigned char *want, size_t i, enum sl_dtype t)
{
	size_t es = sl_dtype_size(t);

	if (!is_int(t) && isnan(get_float(got, i, t)) && isnan(get_float(want, i, t)))
		return true;
	return memcmp(got + i * es, want + i * es, es) == 0;
}

/* ---- tests ---- */

enum alias { ALIAS_NONE, ALIAS_DST_A, ALIAS_DST_B };

/* One (type, op, count, aliasing, misalignment) case in the active family:
 * every element against the reference and against the scalar family's bits
 * (NaN for NaN); a guard element after the end must come out untouched.
 * Operands start skew, 2 * skew and 3 * skew bytes past an 8-byte boundary. */
static void check_case(enum sl_dtype t, enum sl_redop op, size_t n, enum alias al, size_t skew)
{
	size_t es = sl_dtype_size(t), bytes = (n + 1) * es, room = bytes + 3 * skew;
	unsigned char *ma = malloc(room), *mb = malloc(room), *md = malloc(room);
	unsigned char *a0 = malloc(bytes), *b0 = malloc(bytes), *got = malloc(bytes), *ref = malloc(bytes);
	enum sl_simd family = sl_simd_active();

	assert_non_null(ma && mb && md && a0 && b0 && got && ref);
	unsigned char *a = ma + skew, *b = mb + 2 * skew, *d = md + 3 * skew;
	fill_random(a0, n + 1, t);
	fill_random(b0, n + 1, t);
	memcpy(a, a0, bytes);
	memcpy(b, b0, bytes);
	memset(d, 0xa5, bytes);
	unsigned char *dst = al == ALIAS_DST_A ? a : al == ALIAS_DST_B ? b : d;
	sl_reduce(dst, a, b, n, t, op);
	memcpy(got, dst, bytes); /* aligned, for the typed reads below */
	memcpy(a, a0, bytes);
	memcpy(b, b0, bytes);
	assert_true(sl_simd_select(SL_SIMD_SCALAR));
	sl_reduce(ref, a, b, n, t, op);
	assert_true(sl_simd_select(family));
	for (size_t i = 0; i < n; i++) {
		if (!element_ok(got, i, t, op, a0, b0))
			fail_msg("%s: %s %s n=%zu alias=%d skew=%zu: element %zu wrong", sl_simd_name(family),
				 sl_dtype_name(t), sl_redop_name(op), n, al, skew, i);
		if (!same_result(got, ref, i, t))
			fail_msg("%s: %s %s n=%zu: element %zu differs from the scalar family's", sl_simd_name(family),
				 sl_dtype_name(t), sl_redop_name(op), n, i);
	}
	const unsigned char *guard = al == ALIAS_DST_A ? a0 : al == ALIAS_DST_B ? b0 : NULL;
	unsigned char poison[8];
	memset(poison, 0xa5, sizeof(poison));
	assert_memory_equal(got + n * es, guard ? guard + n * es : poison, es);
	free(ma), free(mb), free(md), free(a0), free(b0), free(got), free(ref);
}

/* Runs body once in every family this CPU has, then restores the best. */
#define FOR_EACH_FAMILY(s) for (enum sl_simd s = SL_SIMD_SCALAR; s <= sl_simd_best() && sl_simd_select(s); s++)

static void test_all_types_and_ops(void **state)
{
	const size_t counts[] = { 0, 1, 7, 33, 1000 };
	(void)state;

	rng_state = 0x5eed0001;
	FOR_EACH_FAMILY(s)
		for (int t = 0; t < SL_DTYPE_COUNT; t++)
			for (int op = 0; op < SL_REDOP_COUNT; op++)
				for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
					for (int al = ALIAS_NONE; al <= ALIAS_DST_B; al++)
						check_case(t, op, counts[c], al, (c + (size_t)al) % 4);
	sl_simd_select(sl_simd_best());
}

/* Many random bit patterns through the narrow floats' vector conversions. */
static void test_narrow_floats_large(void **state)
{
	const enum sl_dtype narrow[] = { SL_FLOAT16, SL_BFLOAT16, SL_FLOAT8_E4M3, SL_FLOAT8_E5M2 };
	(void)state;

	rng_state = 0x5eed0005;
	FOR_EACH_FAMILY(s)
		for (size_t t = 0; t < sizeof(narrow) / sizeof(narrow[0]); t++)
			for (int op = 0; op < SL_AVG; op++)
				check_case(narrow[t], op, 20000 + (size_t)op, ALIAS_NONE, (size_t)op);
	sl_simd_select(sl_simd_best());
}

/* fp8: every pair of the 256 values (so every value a kernel rounds: NaN,
 * Inf, subnormals, saturation, ties), each op, through each family's own
 * table, so that AVX2 runs on a CPU with AVX-512 too, and so that a vector
 * family without its own fp8 kernels fails: against the reference, and bit
 * for bit the scalar family's result, NaNs included. */
static void test_fp8_every_pair(void **state)
{
	static uint8_t a[65536], b[65536], d[65536], want[65536];
	const enum sl_dtype types[] = { SL_FLOAT8_E4M3, SL_FLOAT8_E5M2 };
	const sl_kernel_table *tables[SL_SIMD_COUNT] = { &sl_kernels_scalar, &sl_kernels_avx2, &sl_kernels_avx512 };
	(void)state;

	for (uint32_t i = 0; i < 65536; i++)
		a[i] = (uint8_t)i, b[i] = (uint8_t)(i >> 8);
	for (int s = 0; s <= (int)sl_simd_best(); s++)
		for (size_t t = 0; t < 2; t++)
			for (int op = 0; op < SL_REDOP_COUNT; op++) {
				sl_reduce_fn fn = (*tables[s])[types[t]][op];
				assert_non_null(fn);
				fn(d, a, b, 65536);
				sl_kernels_scalar[types[t]][op](want, a, b, 65536);
				for (size_t i = 0; i < 65536; i++)
					if (!element_ok(d, i, types[t], op, a, b) || d[i] != want[i])
						fail_msg("%s: %s %s of 0x%02x and 0x%02x gave 0x%02x (scalar: 0x%02x)",
							 sl_simd_name((enum sl_simd)s), sl_dtype_name(types[t]),
							 sl_redop_name(op), a[i], b[i], d[i], want[i]);
			}
}

/* float16 and bfloat16: every pair of 96 values (NaNs of both signs, quiet
 * and signalling, Infs, zeros, subnormals, the largest finite, ties of
 * rounding, random patterns), each op, through each family's own table:
 * against the reference, bit for bit the scalar family's result, and every
 * NaN result the positive quiet NaN (0x7e00, 0x7fc0) whichever operand's
 * NaN the add or multiply passed on. */
static void test_half_bf16_pairs(void **state)
{
	enum { NV = 96, N = NV * NV - 5 }; /* not a whole number of vectors: the tails too */
	static const uint16_t half_edges[] = {
		0x7c01, 0x7d00, 0x7e00, 0x7e01, 0x7fff, 0xfc01, 0xfd00, 0xfe00, 0xfe01, 0xffff, /* NaNs */
		0x7c00, 0xfc00, 0x0000, 0x8000, 0x0001, 0x0002, 0x01ff, 0x0200, 0x03ff, 0x8001,
		0x8200, 0x83ff, 0x0400, 0x8400, 0x3c00, 0xbc00, 0x3c01, 0xbc01, 0x7bff, 0xfbff,
		0x7bfe, 0x1400, 0x6800, 0x5bff,
	};
	static const uint16_t bf16_edges[] = {
		0x7f81, 0x7fa0, 0x7fc0, 0x7fc1, 0x7fff, 0xff81, 0xffa0, 0xffc0, 0xffc1, 0xffff, /* NaNs */
		0x7f80, 0xff80, 0x0000, 0x8000, 0x0001, 0x0002, 0x003f, 0x0040, 0x007f, 0x8001,
		0x8040, 0x807f, 0x0080, 0x8080, 0x3f80, 0xbf80, 0x3f81, 0xbf81, 0x7f7f, 0xff7f,
		0x7f7e, 0x0100, 0x5f00, 0x4b7f,
	};
	static const struct { enum sl_dtype t; const uint16_t *edges; size_t nedges; const struct fmt *fmt; } types[] = {
		{ SL_FLOAT16, half_edges, sizeof(half_edges) / 2, &HALF },
		{ SL_BFLOAT16, bf16_edges, sizeof(bf16_edges) / 2, &BF16 },
	};
	static uint16_t v[NV], a[N], b[N], d[N], want[N];
	const sl_kernel_table *tables[SL_SIMD_COUNT] = { &sl_kernels_scalar, &sl_kernels_avx2, &sl_kernels_avx512 };
	(void)state;

	rng_state = 0x5eed0008;
	for (size_t t = 0; t < 2; t++) {
		for (size_t i = 0; i < NV; i++)
			v[i] = i < types[t].nedges ? types[t].edges[i] : (uint16_t)rng();
		for (size_t i = 0; i < N; i++)
			a[i] = v[i % NV], b[i] = v[i / NV];
		for (int s = 0; s <= (int)sl_simd_best(); s++)
			for (int op = 0; op < SL_REDOP_COUNT; op++) {
				sl_reduce_fn fn = (*tables[s])[types[t].t][op];
				assert_non_null(fn);
				fn(d, a, b, N);
				sl_kernels_scalar[types[t].t][op](want, a, b, N);
				for (size_t i = 0; i < N; i++)
					if (!element_ok(d, i, types[t].t, op, a, b) || d[i] != want[i] ||
					    (isnan(get_float(d, i, types[t].t)) && d[i] != types[t].fmt->nan))
						fail_msg("%s: %s %s of 0x%04x and 0x%04x gave 0x%04x (scalar: 0x%04x)",
							 sl_simd_name((enum sl_simd)s), sl_dtype_name(types[t].t),
							 sl_redop_name(op), a[i], b[i], d[i], want[i]);
			}
	}
}

/* fp8 conversions: all 256 values widen exactly and round-trip; narrowing
 * rounds to nearest even and saturates, on chosen and random floats. */
static void test_fp8_conversions(void **state)
{
	(void)state;
	for (unsigned v = 0; v < 256; v++) {
		double w4 = e4m3_value((uint16_t)v), w5 = e5m2_value((uint16_t)v);
		float f4 = sl_e4m3_to_float((uint8_t)v), f5 = sl_e5m2_to_float((uint8_t)v);
		assert_true(isnan(w4) ? isnan(f4) : (double)f4 == w4 && !signbit(f4) == !signbit(w4));
		assert_true(isnan(w5) ? isnan(f5) : (double)f5 == w5 && !signbit(f5) == !signbit(w5));
		/* a NaN of either sign narrows to the positive NaN */
		assert_int_equal(sl_float_to_e4m3(f4), isnan(w4) ? 0x7f : v);
		assert_int_equal(sl_float_to_e5m2(f5), isnan(w5) ? 0x7e : v);
	}
	static const struct { float in; uint8_t e4m3, e5m2; } cases[] = {
		{ 448.0f, 0x7e, 0x5f }, { 449.0f, 0x7e, 0x5f }, { 1e9f, 0x7e, 0x7b }, { -1e9f, 0xfe, 0xfb },
		{ INFINITY, 0x7e, 0x7c }, { -INFINITY, 0xfe, 0xfc }, { 57344.0f, 0x7e, 0x7b }, { 61440.0f, 0x7e, 0x7b },
		{ 0x1p-10f, 0x00, 0x14 }, { 0x3p-10f, 0x02, 0x1a }, { 0x1p-17f, 0x00, 0x00 }, { 0x1.000002p-17f, 0x00, 0x01 },
		{ 1.0625f, 0x38, 0x3c }, { 1.1875f, 0x3a, 0x3d }, { -0.0f, 0x80, 0x80 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(sl_float_to_e4m3(cases[i].in), cases[i].e4m3);
		assert_int_equal(sl_float_to_e5m2(cases[i].in), cases[i].e5m2);
	}
	rng_state = 0x5eed0006;
	for (int i = 0; i < 200000; i++) {
		uint32_t u = (uint32_t)rng();
		float f;
		memcpy(&f, &u, 4);
		if (isnan(f))
			continue;
		if (i & 1) /* most samples in and around the fp8 exponent range */
			f = ldexpf(frexpf(f, &(int){0}), (int)(rng() % 44) - 26);
		assert_int_equal(sl_float_to_e4m3(f), round_fmt(&E4M3, f));
		assert_int_equal(sl_float_to_e5m2(f), round_fmt(&E5M2, f));
	}
}

/* float32 and float64 results beyond the streaming threshold (4 MiB) go
 * out through non-temporal stores after a plain head up to dst's cache
 * line: the same bits as the scalar family, in place too; a dst that is not
 * aligned to its element size takes the plain kernels. */
static void test_streaming(void **state)
{
	const size_t n = (4u << 20) / 4 + 1001; /* just past the threshold */
	(void)state;

	rng_state = 0x5eed0007;
	FOR_EACH_FAMILY(s) {
		check_case(SL_FLOAT32, SL_SUM, n, ALIAS_NONE, 4);
		check_case(SL_FLOAT32, SL_MIN, n, ALIAS_DST_B, 1);
		check_case(SL_FLOAT64, SL_MAX, n / 2, ALIAS_DST_A, 8);
		check_case(SL_FLOAT64, SL_PROD, n / 2, ALIAS_NONE, 24);
	}
	sl_simd_select(sl_simd_best());
}

/* The best family is active at start; stepping down works, stepping up past
 * what the CPU has is refused and changes nothing. */
static void test_simd_select(void **state)
{
	enum sl_simd s;
	(void)state;

	assert_int_equal(sl_simd_active(), sl_simd_best());
	print_message("kernel families here: scalar up to %s\n", sl_simd_name(sl_simd_best()));
	for (int i = 0; i < SL_SIMD_COUNT; i++) {
		assert_true(sl_simd_parse(sl_simd_name((enum sl_simd)i), &s));
		assert_int_equal(s, i);
		assert_int_equal(sl_simd_select(s), s <= sl_simd_best());
		assert_int_equal(sl_simd_active(), s <= sl_simd_best() ? s : sl_simd_best());
		sl_simd_select(sl_simd_best());
	}
	assert_false(sl_simd_parse("sse", &s));
	assert_false(sl_simd_parse(NULL, &s));
	assert_false(sl_simd_select(SL_SIMD_COUNT));
	assert_string_equal(sl_simd_name(SL_SIMD_COUNT), "unknown");
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
	/* every NaN, of either sign, its payload anywhere (in the bits cut off
	 * too), becomes the positive quiet NaN */
	const uint32_t nans[] = { 0x7f800001u, 0xff800001u, 0x7fc00000u, 0x7f801000u, 0xffffffffu, 0xffc00000u };
	for (size_t i = 0; i < sizeof(nans) / sizeof(nans[0]); i++) {
		float f;
		memcpy(&f, &nans[i], 4);
		assert_int_equal(sl_float_to_half(f), 0x7e00);
		assert_int_equal(sl_float_to_bf16(f), 0x7fc0);
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
		assert_int_equal(sl_float_to_half(f), round_fmt(&HALF, f));
		assert_int_equal(sl_float_to_bf16(f), round_fmt(&BF16, f));
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
		cmocka_unit_test(test_simd_select),
		cmocka_unit_test(test_all_types_and_ops),
		cmocka_unit_test(test_narrow_floats_large),
		cmocka_unit_test(test_fp8_every_pair),
		cmocka_unit_test(test_half_bf16_pairs),
		cmocka_unit_test(test_fp8_conversions),
		cmocka_unit_test(test_streaming),
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

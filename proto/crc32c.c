/*
 * crc32c.c: CRC32C three ways, picked once from what the CPU has.
 *
 * - AVX-512 with VPCLMULQDQ: carry-less multiplication folds 256 bytes per
 *   step (four 64-byte registers), several times the rate of the crc32
 *   instruction, which computes 8 bytes per cycle at best.
 * - SSE4.2: the crc32 instruction, three streams interleaved.
 * - Elsewhere: a nibble table.
 *
 * The copying variants store each word they load, so the payload of a frame
 * being built is read once.  Every implementation works on the raw register
 * (no pre- or post-inversion); the public functions invert around it.
 */
#include "crc32c.h"

#include <pthread.h>
#include <string.h>

/* Reflected Castagnoli polynomial 0x82f63b78, one nibble at a time: a
 * 16-entry table is small enough to write out and still fast. */
static const uint32_t crc32c_nibble[16] = {
	0x00000000, 0x105ec76f, 0x20bd8ede, 0x30e349b1, 0x417b1dbc, 0x5125dad3,
	0x61c69362, 0x7198540d, 0x82f63b78, 0x92a8fc17, 0xa24bb5a6, 0xb21572c9,
	0xc38d26c4, 0xd3d3e1ab, 0xe330a81a, 0xf36e6f75,
};

static uint32_t crc32c_table(uint32_t crc, const uint8_t *p, uint32_t len)
{
	for (uint32_t i = 0; i < len; i++) {
		crc ^= p[i];
		crc = (crc >> 4) ^ crc32c_nibble[crc & 0xf];
		crc = (crc >> 4) ^ crc32c_nibble[crc & 0xf];
	}
	return crc;
}

#if defined(__x86_64__)
#include <immintrin.h>

#define SSE42 __attribute__((target("sse4.2")))
#define CLMUL512 __attribute__((target("sse4.2,avx512f,vpclmulqdq")))
/* Each body below is written once, with dst either a buffer or NULL; inlined
 * into a wrapper that passes NULL, the stores compile away. */
#define BODY static inline __attribute__((always_inline))

/* The crc32 instruction, 8 bytes at a time, copying to dst when not NULL. */
SSE42 BODY uint32_t crc_words(uint32_t crc, uint8_t *dst, const uint8_t *p, uint32_t len)
{
	uint64_t c = crc, v;

	for (; len >= 8; p += 8, len -= 8) {
		memcpy(&v, p, sizeof(v));
		if (dst) {
			memcpy(dst, &v, sizeof(v));
			dst += 8;
		}
		c = _mm_crc32_u64(c, v);
	}
	crc = (uint32_t)c;
	for (; len; p++, len--) {
		if (dst)
			*dst++ = *p;
		crc = _mm_crc32_u8(crc, *p);
	}
	return crc;
}

/*
 * One crc32 instruction takes 3 cycles but a new one can start every cycle,
 * so three independent streams over three blocks run about 3x faster.  The
 * register is linear: after appending n bytes to state s it is
 * shift(s, n) ^ crc(0, those bytes), where shift(s, n) feeds n zero bytes.
 * shift by a fixed n is a linear map of 32 bits, kept as 4 byte tables.
 */
#define CRC_BLOCK 512u

static uint32_t crc_shift_tab[2][4][256]; /* by CRC_BLOCK and by 2 * CRC_BLOCK */
static pthread_once_t crc_shift_once = PTHREAD_ONCE_INIT;

SSE42 static void crc_shift_init(void)
{
	static const uint8_t zeros[2 * CRC_BLOCK];

	for (int t = 0; t < 2; t++)
		for (int k = 0; k < 4; k++)
			for (uint32_t b = 0; b < 256; b++)
				crc_shift_tab[t][k][b] = crc_words(b << (8 * k), NULL, zeros, (t + 1) * CRC_BLOCK);
}

static uint32_t crc_shift(int t, uint32_t c)
{
	return crc_shift_tab[t][0][c & 0xff] ^ crc_shift_tab[t][1][c >> 8 & 0xff] ^
	       crc_shift_tab[t][2][c >> 16 & 0xff] ^ crc_shift_tab[t][3][c >> 24];
}

SSE42 BODY uint32_t crc_x3(uint32_t crc, uint8_t *dst, const uint8_t *p, uint32_t len)
{
	pthread_once(&crc_shift_once, crc_shift_init);
	for (; len >= 3 * CRC_BLOCK; p += 3 * CRC_BLOCK, len -= 3 * CRC_BLOCK) {
		uint64_t a = crc, b = 0, c = 0, va, vb, vc;
		for (uint32_t i = 0; i < CRC_BLOCK; i += 8) {
			memcpy(&va, p + i, 8);
			memcpy(&vb, p + CRC_BLOCK + i, 8);
			memcpy(&vc, p + 2 * CRC_BLOCK + i, 8);
			if (dst) {
				memcpy(dst + i, &va, 8);
				memcpy(dst + CRC_BLOCK + i, &vb, 8);
				memcpy(dst + 2 * CRC_BLOCK + i, &vc, 8);
			}
			a = _mm_crc32_u64(a, va);
			b = _mm_crc32_u64(b, vb);
			c = _mm_crc32_u64(c, vc);
		}
		if (dst)
			dst += 3 * CRC_BLOCK;
		crc = crc_shift(1, (uint32_t)a) ^ crc_shift(0, (uint32_t)b) ^ (uint32_t)c;
	}
	return crc_words(crc, dst, p, len);
}

/*
 * Folding.  Read 16 bytes as a 128-bit little-endian number: for a
 * reflected CRC its bit j is the coefficient of x^(127-j), so the low half L
 * stands for reflect64(l) * x^64 and the high half H for reflect64(h).  The
 * CRC only depends on the message modulo P, so a block may be replaced by
 * any congruent one: moved D bytes on, it is l * x^(8D+64) + h * x^(8D),
 * which carry-less products with two 32-bit constants give as a number of
 * under 96 bits, XORed into the block found there.  The product of two
 * reflected 64-bit numbers comes out one bit short (times x), hence the -1:
 *   FOLD_LO = reflect64(x^(8D+63) mod P), FOLD_HI = reflect64(x^(8D-1) mod P),
 * D = 256, each 128-bit lane of four registers folding onto its own place in
 * the next 256 bytes.  The last 256 bytes of remainder then go through the
 * crc32 instruction.
 */
#define FOLD_BYTES 256u
#define FOLD_LO 0xe9a5d8be00000000ull
#define FOLD_HI 0x1426a81500000000ull

/* len >= FOLD_BYTES. */
CLMUL512 BODY uint32_t crc_fold(uint32_t crc, uint8_t *dst, const uint8_t *p, uint32_t len)
{
	const __m512i k = _mm512_broadcast_i32x4(_mm_set_epi64x((long long)FOLD_HI, (long long)FOLD_LO));
	uint8_t rest[FOLD_BYTES];
	__m512i x[4];

	for (int i = 0; i < 4; i++) {
		x[i] = _mm512_loadu_si512(p + 64 * i);
		if (dst)
			_mm512_storeu_si512(dst + 64 * i, x[i]);
	}
	/* the register's state joins the message's first 32 bits */
	x[0] = _mm512_xor_si512(x[0], _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)crc)));
	for (p += FOLD_BYTES, len -= FOLD_BYTES; len >= FOLD_BYTES; p += FOLD_BYTES, len -= FOLD_BYTES) {
		if (dst)
			dst += FOLD_BYTES;
		for (int i = 0; i < 4; i++) {
			__m512i d = _mm512_loadu_si512(p + 64 * i);
			if (dst)
				_mm512_storeu_si512(dst + 64 * i, d);
			x[i] = _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x[i], k, 0x00),
							 _mm512_clmulepi64_epi128(x[i], k, 0x11), d, 0x96);
		}
	}
	for (int i = 0; i < 4; i++)
		_mm512_storeu_si512(rest + 64 * i, x[i]);
	return crc_words(crc_words(0, NULL, rest, FOLD_BYTES), dst ? dst + FOLD_BYTES : NULL, p, len);
}

SSE42 static uint32_t sse42(uint32_t crc, const uint8_t *p, uint32_t len)
{
	return crc_x3(crc, NULL, p, len);
}

SSE42 static uint32_t sse42_copy(uint32_t crc, uint8_t *dst, const uint8_t *p, uint32_t len)
{
	return crc_x3(crc, dst, p, len);
}

CLMUL512 static uint32_t clmul512(uint32_t crc, const uint8_t *p, uint32_t len)
{
	return len < FOLD_BYTES ? crc_words(crc, NULL, p, len) : crc_fold(crc, NULL, p, len);
}

CLMUL512 static uint32_t clmul512_copy(uint32_t crc, uint8_t *dst, const uint8_t *p, uint32_t len)
{
	return len < FOLD_BYTES ? crc_words(crc, dst, p, len) : crc_fold(crc, dst, p, len);
}

static bool cpu_has(enum sl_crc32c_impl impl)
{
	__builtin_cpu_init();
	switch (impl) {
	case SL_CRC32C_CLMUL512:
		return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq");
	case SL_CRC32C_SSE42: return __builtin_cpu_supports("sse4.2");
	default: return true;
	}
}

static int chosen = -1; /* the answer never changes: a race only repeats the check */

static enum sl_crc32c_impl crc_impl(void)
{
	if (chosen < 0)
		chosen = cpu_has(SL_CRC32C_CLMUL512) ? SL_CRC32C_CLMUL512 :
			 cpu_has(SL_CRC32C_SSE42) ? SL_CRC32C_SSE42 : SL_CRC32C_TABLE;
	return (enum sl_crc32c_impl)chosen;
}

bool sl_crc32c_force(enum sl_crc32c_impl impl)
{
	if (!cpu_has(impl))
		return false;
	chosen = impl;
	return true;
}

uint32_t sl_crc32c_extend(uint32_t crc, const void *data, uint32_t len)
{
	switch (crc_impl()) {
	case SL_CRC32C_CLMUL512: return ~clmul512(~crc, data, len);
	case SL_CRC32C_SSE42: return ~sse42(~crc, data, len);
	default: return ~crc32c_table(~crc, data, len);
	}
}

uint32_t sl_crc32c_copy(uint32_t crc, void *dst, const void *src, uint32_t len)
{
	switch (crc_impl()) {
	case SL_CRC32C_CLMUL512: return ~clmul512_copy(~crc, dst, src, len);
	case SL_CRC32C_SSE42: return ~sse42_copy(~crc, dst, src, len);
	default: memcpy(dst, src, len); return ~crc32c_table(~crc, src, len);
	}
}
#else
bool sl_crc32c_force(enum sl_crc32c_impl impl)
{
	return impl == SL_CRC32C_TABLE;
}

uint32_t sl_crc32c_extend(uint32_t crc, const void *data, uint32_t len)
{
	return ~crc32c_table(~crc, data, len);
}

uint32_t sl_crc32c_copy(uint32_t crc, void *dst, const void *src, uint32_t len)
{
	memcpy(dst, src, len);
	return ~crc32c_table(~crc, src, len);
}
#endif

uint32_t sl_crc32c(const void *data, uint32_t len)
{
	return sl_crc32c_extend(0, data, len);
}

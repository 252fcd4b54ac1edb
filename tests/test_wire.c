/*
 * test_wire.c: sluice's frame format.  Round trips of DATA and ACK with
 * every field set, each class of parse failure, the CRC32C trailer, and a
 * fuzz loop of random and mutated frames that must never read outside the
 * frame (each frame sits in a buffer of exactly its length, so ASan sees
 * any overread).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "wire.h"

#define OFF_IP SL_ETH_LEN
#define OFF_UDP (OFF_IP + SL_IP_LEN)
#define OFF_HDR (OFF_UDP + SL_UDP_LEN)
#define PAYLOAD_LEN 100
#define BUF_LEN 2048

static const struct sl_hdr data_template = {
	.version = SL_WIRE_VERSION, .type = SL_T_DATA, .flags = SL_F_RETX | SL_F_CTRL,
	.src_node = 0x0102, .dst_node = 0x0304, .psn = 0xdeadbeef, .comm = 0x11223344,
	.seq = 0x55667788, .step = 0x99aa, .kind = 0xbb, .dtype_op = 0xcc,
	.count = 0x0123456789abcdefull, .offset = 0xfedcba9876543210ull, .len = PAYLOAD_LEN,
	.ts = 0x13579bdf,
};

static uint8_t payload_bytes[PAYLOAD_LEN];

static uint32_t build_data(uint8_t *buf, uint16_t flags)
{
	struct sl_addr src, dst;
	struct sl_hdr h = data_template;

	h.flags |= flags;
	for (int i = 0; i < PAYLOAD_LEN; i++)
		payload_bytes[i] = (uint8_t)(i * 7 + 3);
	sl_addr_for_node(h.src_node, &src);
	sl_addr_for_node(h.dst_node, &dst);
	return sl_wire_build(buf, BUF_LEN, &src, &dst, 0xc123, &h, payload_bytes, NULL);
}

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* Parse a copy of frame[0..len) in a buffer of exactly len bytes. */
static enum sl_parse_result parse_exact(const uint8_t *frame, uint32_t len, struct sl_hdr *h,
					struct sl_ack *ack)
{
	uint8_t *copy = malloc(len ? len : 1);
	const uint8_t *payload = NULL;

	memcpy(copy, frame, len);
	enum sl_parse_result r = sl_wire_parse(copy, len, h, &payload, ack);
	if (r == SL_PARSE_OK)
		assert_true(payload >= copy && payload + h->len <= copy + len);
	free(copy);
	return r;
}

static void check_ip_checksum(const uint8_t *frame)
{
	uint32_t sum = 0;

	for (int i = 0; i < SL_IP_LEN; i += 2)
		sum += rd16(frame + OFF_IP + i);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	assert_int_equal(sum, 0xffff);
}

static void test_data_round_trip(void **state)
{
	(void)state;
	uint16_t variants[] = { 0, SL_F_CRC };

	for (int v = 0; v < 2; v++) {
		uint8_t buf[BUF_LEN];
		struct sl_hdr h;
		struct sl_ack ack;
		const uint8_t *payload;
		uint32_t len = build_data(buf, variants[v]);

		memset(&h, 0, sizeof(h)); /* padding, for the byte comparison */
		assert_int_equal(len, SL_FRAME_OVERHEAD + PAYLOAD_LEN + (v ? SL_CRC_LEN : 0));
		assert_int_equal(sl_wire_parse(buf, len, &h, &payload, &ack), SL_PARSE_OK);
		struct sl_hdr want = data_template;
		want.flags |= variants[v];
		assert_memory_equal(&h, &want, sizeof(h));
		assert_ptr_equal(payload, buf + SL_FRAME_OVERHEAD);
		assert_memory_equal(payload, payload_bytes, PAYLOAD_LEN);
		assert_int_equal(rd16(buf + OFF_UDP), 0xc123);
		assert_int_equal(rd16(buf + OFF_UDP + 2), SL_UDP_PORT);
		assert_int_equal(rd16(buf + OFF_UDP + 6), 0);
		check_ip_checksum(buf);
	}
}

/* The IP checksum over addresses, lengths and ECN bits whose words carry
 * (nodes up to 0xffff: 10.83.255.255), each frame checked by the 16-bit
 * sum above. */
static void test_ip_checksum_carries(void **state)
{
	(void)state;
	static const uint16_t nodes[] = { 0, 1, 0x00ff, 0x0100, 0x7fff, 0x8000, 0xfffe, 0xffff };
	static const uint32_t lens[] = { 0, 1, 8, 255, 256 };
	static uint8_t payload[256];
	uint8_t buf[BUF_LEN];

	for (size_t s = 0; s < sizeof(nodes) / sizeof(nodes[0]); s++)
		for (size_t d = 0; d < sizeof(nodes) / sizeof(nodes[0]); d++)
			for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
				for (uint8_t ecn = 0; ecn < 4; ecn++) {
					struct sl_addr src, dst;
					struct sl_hdr h = data_template;

					h.len = lens[l];
					h.ip_ecn = ecn;
					sl_addr_for_node(nodes[s], &src);
					sl_addr_for_node(nodes[d], &dst);
					assert_true(sl_wire_build(buf, BUF_LEN, &src, &dst, 0xffff, &h, payload, NULL) > 0);
					check_ip_checksum(buf);
				}
}

static void test_ack_round_trip(void **state)
{
	(void)state;
	struct sl_addr a, b;
	struct sl_hdr h = { .version = SL_WIRE_VERSION, .type = SL_T_ACK, .flags = SL_F_CRC | SL_F_HOLD,
			    .src_node = 7, .dst_node = 9, .psn = 0x80000001 /* the ACK number */,
			    .ts = 0xabcdef01 };
	struct sl_ack ack = { .cum_psn = 0xfffffff0, .echo_ts = 0x01020304, .credit = 256, .ce = 0x1234,
			      .echo_path = 0xab, .parks = 0x25,
			      .sack = { 1, 0x8000000000000000ull, 0x5555, ~0ull } };
	uint8_t buf[BUF_LEN];
	struct sl_hdr out;
	struct sl_ack ack_out;

	memset(&out, 0, sizeof(out)); /* padding, for the byte comparison */
	const uint8_t *payload;

	sl_addr_for_node(7, &a);
	sl_addr_for_node(9, &b);
	uint32_t len = sl_wire_build(buf, sizeof(buf), &a, &b, 0xc001, &h, NULL, &ack);
	assert_int_equal(len, SL_FRAME_OVERHEAD + SL_ACK_LEN + SL_CRC_LEN);
	assert_int_equal(sl_wire_parse(buf, len, &out, &payload, &ack_out), SL_PARSE_OK);
	h.len = SL_ACK_LEN;
	assert_memory_equal(&out, &h, sizeof(h));
	assert_memory_equal(&ack_out, &ack, sizeof(ack));
	check_ip_checksum(buf);
}

/* ECN: the builder writes the field, the parser reads it, a congested queue
 * marks only ECN-capable frames and keeps the IP checksum right. */
static void test_ecn(void **state)
{
	(void)state;
	uint8_t buf[BUF_LEN];
	struct sl_hdr h;
	struct sl_ack ack;
	uint32_t len = build_data(buf, 0);

	assert_int_equal(parse_exact(buf, len, &h, &ack), SL_PARSE_OK);
	assert_int_equal(h.ip_ecn, SL_ECN_NOT_ECT);
	assert_false(sl_wire_mark_ce(buf, len)); /* not ECN-capable: a queue drops it instead */
	struct sl_addr src, dst;
	struct sl_hdr ect = data_template;
	ect.ip_ecn = SL_ECN_ECT0;
	ect.flags = (uint16_t)(SL_F_CRC | 5 << SL_F_PATH_SHIFT);
	sl_addr_for_node(1, &src);
	sl_addr_for_node(2, &dst);
	len = sl_wire_build(buf, BUF_LEN, &src, &dst, 0xc123, &ect, payload_bytes, NULL);
	assert_int_equal(parse_exact(buf, len, &h, &ack), SL_PARSE_OK);
	assert_int_equal(h.ip_ecn, SL_ECN_ECT0);
	assert_int_equal((h.flags & SL_F_PATH_MASK) >> SL_F_PATH_SHIFT, 5);
	assert_true(sl_wire_mark_ce(buf, len));
	check_ip_checksum(buf);
	assert_false(sl_wire_mark_ce(buf, len)); /* already marked */
	/* the CRC covers the sluice header and body, not the IP header a queue rewrites */
	assert_int_equal(parse_exact(buf, len, &h, &ack), SL_PARSE_OK);
	assert_int_equal(h.ip_ecn, SL_ECN_CE);
	assert_false(sl_wire_mark_ce(buf, SL_ETH_LEN + 4)); /* too short to be IPv4 */
}

static void test_build_too_small(void **state)
{
	(void)state;
	uint8_t buf[BUF_LEN];
	uint32_t len = build_data(buf, 0);
	struct sl_addr a;
	struct sl_hdr h = data_template;

	sl_addr_for_node(1, &a);
	assert_int_equal(sl_wire_build(buf, len - 1, &a, &a, 0xc000, &h, payload_bytes, NULL), 0);
	assert_int_equal(sl_wire_build(buf, len, &a, &a, 0xc000, &h, payload_bytes, NULL), len);
}

static void test_every_truncation_is_short(void **state)
{
	(void)state;
	uint8_t buf[BUF_LEN];
	struct sl_hdr h;
	struct sl_ack ack;

	for (int crc = 0; crc < 2; crc++) {
		uint32_t len = build_data(buf, crc ? SL_F_CRC : 0);
		for (uint32_t cut = 0; cut < len; cut++)
			assert_int_equal(parse_exact(buf, cut, &h, &ack), SL_PARSE_SHORT);
		assert_int_equal(parse_exact(buf, len, &h, &ack), SL_PARSE_OK);
	}
}

static void test_padding_accepted(void **state)
{
	(void)state;
	uint8_t buf[BUF_LEN] = { 0 };
	struct sl_hdr h;
	struct sl_ack ack;
	uint32_t len = build_data(buf, SL_F_CRC);

	assert_int_equal(parse_exact(buf, len + 20, &h, &ack), SL_PARSE_OK);
}

/* Build a good frame, let mutate break it, and expect result. */
static void expect_after(void (*mutate)(uint8_t *), uint16_t flags, enum sl_parse_result result)
{
	uint8_t buf[BUF_LEN];
	struct sl_hdr h;
	struct sl_ack ack;
	uint32_t len = build_data(buf, flags);

	mutate(buf);
	assert_int_equal(parse_exact(buf, len, &h, &ack), result);
}

static void bad_ethertype(uint8_t *f) { wr16(f + 12, 0x86dd); }
static void bad_ip_version(uint8_t *f) { f[OFF_IP] = 0x46; }
static void bad_ip_proto(uint8_t *f) { f[OFF_IP + 9] = 6; }
static void ip_fragment(uint8_t *f) { wr16(f + OFF_IP + 6, 0x2000); }
static void bad_udp_port(uint8_t *f) { wr16(f + OFF_UDP + 2, 4791); }
static void bad_version(uint8_t *f) { f[OFF_HDR] = SL_WIRE_VERSION + 1; }
static void bad_type(uint8_t *f) { f[OFF_HDR + 1] = 9; }
static void zero_type(uint8_t *f) { f[OFF_HDR + 1] = 0; }
static void ack_type(uint8_t *f) { f[OFF_HDR + 1] = SL_T_ACK; }
static void bad_udp_len(uint8_t *f) { wr16(f + OFF_UDP + 4, (uint16_t)(rd16(f + OFF_UDP + 4) - 1)); }
static void bad_ip_len(uint8_t *f) { wr16(f + OFF_IP + 2, (uint16_t)(rd16(f + OFF_IP + 2) + 1)); }
static void shorter_len(uint8_t *f) { f[OFF_HDR + 43] = PAYLOAD_LEN - 1; }
static void len_past_frame(uint8_t *f) { f[OFF_HDR + 40] = 0x7f; }
static void len_just_past(uint8_t *f) { f[OFF_HDR + 43] = PAYLOAD_LEN + 1; }
static void flip_payload(uint8_t *f) { f[SL_FRAME_OVERHEAD + 5] ^= 0x10; }
static void flip_header(uint8_t *f) { f[OFF_HDR + 30] ^= 0x01; }
static void clear_crc_flag(uint8_t *f) { f[OFF_HDR + 3] &= (uint8_t)~SL_F_CRC; }

static void test_parse_failures(void **state)
{
	(void)state;
	expect_after(bad_ethertype, 0, SL_PARSE_NOT_SLUICE);
	expect_after(bad_ip_version, 0, SL_PARSE_NOT_SLUICE);
	expect_after(bad_ip_proto, 0, SL_PARSE_NOT_SLUICE);
	expect_after(ip_fragment, 0, SL_PARSE_NOT_SLUICE);
	expect_after(bad_udp_port, 0, SL_PARSE_NOT_SLUICE);
	expect_after(bad_version, 0, SL_PARSE_BAD_VERSION);
	expect_after(bad_type, 0, SL_PARSE_BAD_TYPE);
	expect_after(zero_type, 0, SL_PARSE_BAD_TYPE);
	expect_after(ack_type, 0, SL_PARSE_BAD_LENGTH); /* an ACK body is SL_ACK_LEN bytes */
	expect_after(bad_udp_len, 0, SL_PARSE_BAD_LENGTH);
	expect_after(bad_ip_len, 0, SL_PARSE_BAD_LENGTH);
	expect_after(shorter_len, 0, SL_PARSE_BAD_LENGTH);
	expect_after(len_past_frame, 0, SL_PARSE_SHORT);
	expect_after(len_just_past, 0, SL_PARSE_SHORT);
	expect_after(flip_payload, SL_F_CRC, SL_PARSE_BAD_CRC);
	expect_after(flip_header, SL_F_CRC, SL_PARSE_BAD_CRC);
	expect_after(clear_crc_flag, SL_F_CRC, SL_PARSE_BAD_LENGTH);
	expect_after(flip_payload, 0, SL_PARSE_OK); /* without the trailer nobody can tell */
}

static void test_result_strings(void **state)
{
	(void)state;
	for (int r = SL_PARSE_OK; r <= SL_PARSE_BAD_CRC; r++)
		assert_non_null(sl_parse_result_str(r));
	assert_string_equal(sl_parse_result_str(SL_PARSE_SHORT), "short frame");
	assert_string_equal(sl_parse_result_str((enum sl_parse_result)99), "unknown parse result");
}

/* A bit at a time, straight from the definition: the reference for the
 * fast paths (table, crc32 instruction, carry-less folding). */
static uint32_t crc32c_bitwise(const uint8_t *p, uint32_t len)
{
	uint32_t crc = 0xffffffffu;

	for (uint32_t i = 0; i < len; i++) {
		crc ^= p[i];
		for (int b = 0; b < 8; b++)
			crc = crc >> 1 ^ (0x82f63b78u & -(crc & 1));
	}
	return ~crc;
}

/* check() once under every implementation this CPU has, then the best again. */
static void each_crc_impl(void (*check)(void))
{
	int best = SL_CRC32C_TABLE;

	for (int i = SL_CRC32C_TABLE; i <= SL_CRC32C_CLMUL512; i++) {
		if (!sl_crc32c_force((enum sl_crc32c_impl)i))
			continue;
		best = i;
		check();
	}
	assert_true(sl_crc32c_force((enum sl_crc32c_impl)best));
}

static void check_vector(void)
{
	assert_int_equal(sl_crc32c("123456789", 9), 0xe3069283); /* the Castagnoli check value */
	assert_int_equal(sl_crc32c("", 0), 0);
}

static void test_crc32c_vector(void **state)
{
	(void)state;
	each_crc_impl(check_vector);
}

static void check_any_alignment(void)
{
	uint8_t buf[64];

	for (uint32_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 37 + 11);
	for (uint32_t start = 0; start < 8; start++)
		for (uint32_t len = 0; start + len <= sizeof(buf); len++)
			assert_int_equal(sl_crc32c(buf + start, len), crc32c_bitwise(buf + start, len));
}

static void test_crc32c_any_alignment(void **state)
{
	(void)state;
	each_crc_impl(check_any_alignment);
}

static uint8_t long_buf[9000];

static void fill_long_buf(void)
{
	for (uint32_t i = 0; i < sizeof(long_buf); i++)
		long_buf[i] = (uint8_t)(i * 131 + (i >> 7));
}

/* Lengths around every block size the fast paths use (256-byte folds, three
 * 512-byte streams), then frame sizes at many tail lengths. */
static void check_long(void)
{
	for (uint32_t len = 200; len <= 1800; len++)
		assert_int_equal(sl_crc32c(long_buf + (len & 7), len), crc32c_bitwise(long_buf + (len & 7), len));
	for (uint32_t len = 1800; len <= sizeof(long_buf); len += 97)
		assert_int_equal(sl_crc32c(long_buf + (len & 7), len - 8),
				 crc32c_bitwise(long_buf + (len & 7), len - 8));
}

static void test_crc32c_long(void **state)
{
	(void)state;
	fill_long_buf();
	each_crc_impl(check_long);
}

/* Extending a CRC, and copying while computing: the same value as one CRC
 * over both parts, an exact copy, and no byte written past it. */
static void check_extend_copy(void)
{
	static uint8_t dst[9000 + 64];

	for (uint32_t head = 0; head <= 64; head += 16) {
		for (uint32_t len = 0; head + len <= sizeof(long_buf); len = len < 1100 ? len + 1 : len + 263) {
			const uint8_t *src = long_buf + head;
			uint32_t want = crc32c_bitwise(long_buf, head + len);
			uint32_t start = sl_crc32c(long_buf, head);

			assert_int_equal(sl_crc32c_extend(start, src, len), want);
			memset(dst, 0xa5, len + 64);
			assert_int_equal(sl_crc32c_copy(start, dst + (len & 7), src, len), want);
			assert_memory_equal(dst + (len & 7), src, len);
			for (uint32_t i = len + (len & 7); i < len + 64; i++)
				assert_int_equal(dst[i], 0xa5);
			for (uint32_t i = 0; i < (len & 7); i++)
				assert_int_equal(dst[i], 0xa5);
		}
	}
}

static void test_crc32c_extend_copy(void **state)
{
	(void)state;
	fill_long_buf();
	each_crc_impl(check_extend_copy);
}

static void test_addr_for_node(void **state)
{
	(void)state;
	struct sl_addr a;
	const uint8_t mac[6] = { 0x02, 0x53, 0x4c, 0x00, 0x01, 0x02 };

	sl_addr_for_node(0x0102, &a);
	assert_memory_equal(a.mac, mac, 6);
	assert_int_equal(a.ip, 10u << 24 | 83u << 16 | 1u << 8 | 2u);
}

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Random garbage, and good frames with random bytes changed and random
 * truncations: parsing must stay inside the frame whatever it returns. */
static void test_fuzz(void **state)
{
	(void)state;
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	uint8_t good[BUF_LEN], buf[BUF_LEN];
	uint32_t good_len = build_data(good, SL_F_CRC);
	struct sl_hdr h;
	struct sl_ack ack;
	uint32_t ok = 0;

	for (int i = 0; i < 200000; i++) {
		uint32_t len;
		if (i % 2) {
			len = (uint32_t)(rng_next(&rng) % 300);
			for (uint32_t k = 0; k < len; k++)
				buf[k] = (uint8_t)rng_next(&rng);
			if (len >= OFF_HDR && i % 4 == 1) /* get past the outer layers now and then */
				memcpy(buf, good, OFF_HDR + 2);
		} else {
			memcpy(buf, good, good_len);
			for (int k = (int)(rng_next(&rng) % 4); k >= 0; k--)
				buf[rng_next(&rng) % good_len] = (uint8_t)rng_next(&rng);
			len = (uint32_t)(rng_next(&rng) % (good_len + 8));
		}
		ok += parse_exact(buf, len, &h, &ack) == SL_PARSE_OK;
	}
	assert_true(ok > 0); /* some mutations only touch bytes nobody checks */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_data_round_trip),
		cmocka_unit_test(test_ip_checksum_carries),
		cmocka_unit_test(test_ack_round_trip),
		cmocka_unit_test(test_ecn),
		cmocka_unit_test(test_build_too_small),
		cmocka_unit_test(test_every_truncation_is_short),
		cmocka_unit_test(test_padding_accepted),
		cmocka_unit_test(test_parse_failures),
		cmocka_unit_test(test_result_strings),
		cmocka_unit_test(test_crc32c_vector),
		cmocka_unit_test(test_crc32c_any_alignment),
		cmocka_unit_test(test_crc32c_long),
		cmocka_unit_test(test_crc32c_extend_copy),
		cmocka_unit_test(test_addr_for_node),
		cmocka_unit_test(test_fuzz),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * wire.c: building and checking sluice frames (Ethernet/IPv4/UDP + the
 * 48-byte sluice header).  Every field is read and written in network
 * order through memcpy, so none is ever accessed unaligned, and parsing
 * never trusts a length before checking it against the frame.
 */
#include "wire.h"

#include <string.h>

#define ETHERTYPE_IPV4 0x0800
#define IPPROTO_UDP_NUM 17
#define IP_TTL_DEFAULT 64
#define IP_FLAG_DF 0x4000
#define IP_FRAG_MASK 0x3fff /* MF flag + fragment offset */

/* Offsets of the layers within a frame. */
#define OFF_IP SL_ETH_LEN
#define OFF_UDP (OFF_IP + SL_IP_LEN)
#define OFF_HDR (OFF_UDP + SL_UDP_LEN)
#define OFF_BODY (OFF_HDR + SL_HDR_LEN)

/* Big-endian fields at any alignment: memcpy and a byte swap compile to
 * one load or store each, where the byte-by-byte form cost a 3-rank gather
 * leaf ~100 of its ~6400 instructions a call. */
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define be16(v) (v)
#define be32(v) (v)
#define be64(v) (v)
#else
#define be16(v) __builtin_bswap16(v)
#define be32(v) __builtin_bswap32(v)
#define be64(v) __builtin_bswap64(v)
#endif

static void put16(uint8_t *p, uint16_t v)
{
	v = be16(v);
	memcpy(p, &v, sizeof(v));
}

static void put32(uint8_t *p, uint32_t v)
{
	v = be32(v);
	memcpy(p, &v, sizeof(v));
}

static void put64(uint8_t *p, uint64_t v)
{
	v = be64(v);
	memcpy(p, &v, sizeof(v));
}

static uint16_t get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return be16(v);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return be32(v);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return be64(v);
}

void sl_addr_for_node(uint16_t node, struct sl_addr *out)
{
	static const uint8_t mac[6] = { 0x02, 0x53, 0x4c, 0x00, 0x00, 0x00 };

	memcpy(out->mac, mac, sizeof(mac));
	out->mac[4] = (uint8_t)(node >> 8);
	out->mac[5] = (uint8_t)node;
	out->ip = 10u << 24 | 83u << 16 | node;
}

/* The header's 16-bit one's-complement sum, taken 32 bits at a time: as
 * 2^16 is 1 modulo 2^16 - 1, folding the wider sum gives the same result
 * (RFC 1071), in five additions where a 16-bit loop took ten: 30
 * instructions a frame against 89 (callgrind, perf/ALGORITHMS.md small31). */
static uint16_t ip_checksum(const uint8_t *ip)
{
	_Static_assert(SL_IP_LEN == 20, "the sum below covers five words");
	uint64_t sum = (uint64_t)get32(ip) + get32(ip + 4) + get32(ip + 8) + get32(ip + 12) + get32(ip + 16);

	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static void build_eth(uint8_t *f, const struct sl_addr *src, const struct sl_addr *dst)
{
	memcpy(f, dst->mac, 6);
	memcpy(f + 6, src->mac, 6);
	put16(f + 12, ETHERTYPE_IPV4);
}

static void build_ip_udp(uint8_t *f, const struct sl_addr *src, const struct sl_addr *dst,
			 uint16_t entropy, uint32_t udp_len, uint8_t ecn)
{
	uint8_t *ip = f + OFF_IP, *udp = f + OFF_UDP;

	ip[0] = 0x45; /* version 4, 5 words */
	ip[1] = ecn & 3; /* DSCP 0 */
	put16(ip + 2, (uint16_t)(SL_IP_LEN + udp_len));
	put16(ip + 4, 0);
	put16(ip + 6, IP_FLAG_DF);
	ip[8] = IP_TTL_DEFAULT;
	ip[9] = IPPROTO_UDP_NUM;
	put16(ip + 10, 0);
	put32(ip + 12, src->ip);
	put32(ip + 16, dst->ip);
	put16(ip + 10, ip_checksum(ip));

	put16(udp, entropy);
	put16(udp + 2, SL_UDP_PORT);
	put16(udp + 4, (uint16_t)udp_len);
	put16(udp + 6, 0); /* no UDP checksum: the FCS or our CRC covers the bytes */
}

static void build_hdr(uint8_t *p, const struct sl_hdr *h, uint32_t body_len)
{
	p[0] = h->version;
	p[1] = h->type;
	put16(p + 2, h->flags);
	put16(p + 4, h->src_node);
	put16(p + 6, h->dst_node);
	put32(p + 8, h->psn);
	put32(p + 12, h->comm);
	put32(p + 16, h->seq);
	put16(p + 20, h->step);
	p[22] = h->kind;
	p[23] = h->dtype_op;
	put64(p + 24, h->count);
	put64(p + 32, h->offset);
	put32(p + 40, body_len);
	put32(p + 44, h->ts);
}

static void build_ack(uint8_t *p, const struct sl_ack *ack)
{
	put32(p, ack->cum_psn);
	put32(p + 4, ack->echo_ts);
	put32(p + 8, ack->credit);
	put16(p + 12, ack->ce);
	p[14] = ack->echo_path;
	p[15] = ack->parks;
	for (int i = 0; i < 4; i++)
		put64(p + 16 + 8 * i, ack->sack[i]);
}

uint32_t sl_wire_build(uint8_t *buf, uint32_t cap, const struct sl_addr *src,
		       const struct sl_addr *dst, uint16_t entropy, const struct sl_hdr *h,
		       const void *payload, const struct sl_ack *ack)
{
	bool is_ack = h->type == SL_T_ACK;
	uint32_t body = is_ack ? SL_ACK_LEN : h->len;
	uint32_t crc_len = (h->flags & SL_F_CRC) ? SL_CRC_LEN : 0;
	uint64_t total = (uint64_t)OFF_BODY + body + crc_len;

	if (total > cap || total - SL_ETH_LEN > 0xffff)
		return 0;
	build_eth(buf, src, dst);
	build_ip_udp(buf, src, dst, entropy, (uint32_t)(total - OFF_UDP), h->ip_ecn);
	build_hdr(buf + OFF_HDR, h, body);
	if (is_ack)
		build_ack(buf + OFF_BODY, ack);
	if (!crc_len) {
		if (!is_ack && body)
			memcpy(buf + OFF_BODY, payload, body);
		return (uint32_t)total;
	}
	/* the payload is read once: copied while its CRC is computed */
	uint32_t crc = sl_crc32c(buf + OFF_HDR, SL_HDR_LEN + (is_ack ? body : 0));
	if (!is_ack)
		crc = sl_crc32c_copy(crc, buf + OFF_BODY, payload, body);
	put32(buf + OFF_BODY + body, crc);
	return (uint32_t)total;
}

static void parse_hdr(const uint8_t *p, struct sl_hdr *h)
{
	h->version = p[0];
	h->type = p[1];
	h->flags = get16(p + 2);
	h->src_node = get16(p + 4);
	h->dst_node = get16(p + 6);
	h->psn = get32(p + 8);
	h->comm = get32(p + 12);
	h->seq = get32(p + 16);
	h->step = get16(p + 20);
	h->kind = p[22];
	h->dtype_op = p[23];
	h->count = get64(p + 24);
	h->offset = get64(p + 32);
	h->len = get32(p + 40);
	h->ts = get32(p + 44);
}

static void parse_ack(const uint8_t *p, struct sl_ack *ack)
{
	ack->cum_psn = get32(p);
	ack->echo_ts = get32(p + 4);
	ack->credit = get32(p + 8);
	ack->ce = get16(p + 12);
	ack->echo_path = p[14];
	ack->parks = p[15];
	for (int i = 0; i < 4; i++)
		ack->sack[i] = get64(p + 16 + 8 * i);
}

/* Ethernet, IPv4 and UDP: is this frame addressed to sluice at all? */
static enum sl_parse_result parse_lower(const uint8_t *f, uint32_t len)
{
	if (len < OFF_IP)
		return SL_PARSE_SHORT;
	if (get16(f + 12) != ETHERTYPE_IPV4)
		return SL_PARSE_NOT_SLUICE;
	if (len < OFF_UDP)
		return SL_PARSE_SHORT;
	const uint8_t *ip = f + OFF_IP;
	if (ip[0] != 0x45 || ip[9] != IPPROTO_UDP_NUM || (get16(ip + 6) & IP_FRAG_MASK))
		return SL_PARSE_NOT_SLUICE;
	if (len < OFF_HDR)
		return SL_PARSE_SHORT;
	if (get16(f + OFF_UDP + 2) != SL_UDP_PORT)
		return SL_PARSE_NOT_SLUICE;
	return len < OFF_BODY ? SL_PARSE_SHORT : SL_PARSE_OK;
}

/* The sluice header's own fields against each other and the lower layers. */
static enum sl_parse_result check_lengths(const uint8_t *f, uint32_t len, const struct sl_hdr *h)
{
	uint32_t crc_len = (h->flags & SL_F_CRC) ? SL_CRC_LEN : 0;
	uint64_t udp_len = (uint64_t)SL_UDP_LEN + SL_HDR_LEN + h->len + crc_len;

	if (h->type == SL_T_ACK && h->len != SL_ACK_LEN)
		return SL_PARSE_BAD_LENGTH;
	if ((uint64_t)OFF_UDP + udp_len > len)
		return SL_PARSE_SHORT;
	if (get16(f + OFF_UDP + 4) != udp_len || get16(f + OFF_IP + 2) != SL_IP_LEN + udp_len)
		return SL_PARSE_BAD_LENGTH;
	return SL_PARSE_OK;
}

enum sl_parse_result sl_wire_parse(const uint8_t *frame, uint32_t len, struct sl_hdr *h,
				   const uint8_t **payload, struct sl_ack *ack)
{
	enum sl_parse_result r = parse_lower(frame, len);

	if (r != SL_PARSE_OK)
		return r;
	parse_hdr(frame + OFF_HDR, h);
	h->ip_ecn = frame[OFF_IP + 1] & 3;
	if (h->version != SL_WIRE_VERSION)
		return SL_PARSE_BAD_VERSION;
	if (h->type != SL_T_DATA && h->type != SL_T_ACK && h->type != SL_T_LAST)
		return SL_PARSE_BAD_TYPE;
	r = check_lengths(frame, len, h);
	if (r != SL_PARSE_OK)
		return r;
	if ((h->flags & SL_F_CRC) &&
	    get32(frame + OFF_BODY + h->len) != sl_crc32c(frame + OFF_HDR, SL_HDR_LEN + h->len))
		return SL_PARSE_BAD_CRC;
	*payload = frame + OFF_BODY;
	if (h->type == SL_T_ACK)
		parse_ack(frame + OFF_BODY, ack);
	return SL_PARSE_OK;
}

bool sl_wire_mark_ce(uint8_t *frame, uint32_t len)
{
	uint8_t *ip = frame + OFF_IP;

	if (len < OFF_UDP || get16(frame + 12) != ETHERTYPE_IPV4 || ip[0] != 0x45 ||
	    (ip[1] & 3) == SL_ECN_NOT_ECT || (ip[1] & 3) == SL_ECN_CE)
		return false;
	ip[1] |= SL_ECN_CE;
	put16(ip + 10, 0);
	put16(ip + 10, ip_checksum(ip));
	return true;
}

const char *sl_parse_result_str(enum sl_parse_result r)
{
	switch (r) {
	case SL_PARSE_OK: return "ok";
	case SL_PARSE_SHORT: return "short frame";
	case SL_PARSE_NOT_SLUICE: return "not a sluice frame";
	case SL_PARSE_BAD_VERSION: return "bad version";
	case SL_PARSE_BAD_TYPE: return "bad packet type";
	case SL_PARSE_BAD_LENGTH: return "inconsistent lengths";
	case SL_PARSE_BAD_CRC: return "CRC32C mismatch";
	}
	return "unknown parse result";
}

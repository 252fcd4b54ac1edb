/*
 * gen_corpus.c: writes the fuzz target's seed corpus (fuzz_tp.c's record
 * format) into a directory: valid DATA and ACK/SACK frames for the set-up in
 * fuzz_setup.h, with and without CRC, in orders that walk the interesting
 * paths (holes, duplicates, old and future PSNs, timeouts, a hold ACK
 * overtaken by its reopening), plus frames the transport must ignore.
 * Run: gen_corpus tests/fuzz/corpus/wire_tp
 */
#include <stdio.h>
#include <string.h>

#include "fuzz_setup.h"
#include "tp_internal.h" /* TP_FIRST_PSN: where both ends start a flow */

#define REC_MAX 8192

struct rec {
	uint8_t buf[REC_MAX];
	size_t len;
};

static void add(struct rec *r, uint8_t flags, const uint8_t *frame, uint32_t len)
{
	if (r->len + 3 + len > REC_MAX)
		abort();
	r->buf[r->len++] = flags;
	r->buf[r->len++] = (uint8_t)len;
	r->buf[r->len++] = (uint8_t)(len >> 8);
	memcpy(r->buf + r->len, frame, len);
	r->len += len;
}

static uint32_t build(uint8_t *f, uint16_t from, uint16_t to, uint8_t type, uint32_t psn,
		      uint16_t flags, const struct sl_ack *ack)
{
	static const uint8_t payload[FUZZ_PAYLOAD];
	struct sl_addr a, b;
	struct sl_hdr h = { .version = SL_WIRE_VERSION, .type = type, .flags = flags,
			    .src_node = from, .dst_node = to, .psn = psn, .comm = FUZZ_COMM,
			    .seq = psn & 3, .offset = (psn & 7) * 100u, .len = 100, .ts = 999000 };

	sl_addr_for_node(from, &a);
	sl_addr_for_node(to, &b);
	return sl_wire_build(f, FUZZ_MAX_FRAME, &a, &b, 0xc001, &h, payload, ack);
}

static void data(struct rec *r, uint8_t flags, uint32_t psn_off, uint16_t hflags)
{
	uint8_t f[FUZZ_MAX_FRAME];

	add(r, flags, f, build(f, FUZZ_PEER, FUZZ_SELF, SL_T_DATA, TP_FIRST_PSN + psn_off, hflags, NULL));
}

/* An ACK numbered no (0: a peer that does not number them) */
static void ack(struct rec *r, uint8_t flags, uint32_t cum_off, uint64_t sack0, uint16_t hflags, uint32_t no)
{
	uint8_t f[FUZZ_MAX_FRAME];
	struct sl_ack a = { .cum_psn = TP_FIRST_PSN + cum_off, .echo_ts = 999000, .credit = 256,
			    .sack = { sack0 } };

	add(r, flags, f, build(f, FUZZ_PEER, FUZZ_SELF, SL_T_ACK, no, hflags, &a));
}

static int save(const char *dir, const char *name, const struct rec *r)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(r->buf, 1, r->len, f) != r->len || fclose(f) != 0) {
		perror(path);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct rec r;
	int bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: gen_corpus DIR\n");
		return 2;
	}
	memset(&r, 0, sizeof(r));
	data(&r, 0, 0, 0);
	data(&r, 0, 2, SL_F_CRC);
	data(&r, 2, 0, SL_F_RETX); /* a duplicate */
	data(&r, 0, 1, SL_F_VOID);
	bad |= save(argv[1], "data_in_order_and_dup", &r);

	memset(&r, 0, sizeof(r));
	ack(&r, 0, 2, 0x1c, 0, 0);         /* cum +2, SACK +5..+7: a hole at +2..+4 */
	ack(&r, 2, 2, 0x3fc, SL_F_CRC, 0);  /* more SACKed above the hole: fast retransmit */
	ack(&r, 1, 16, 0, 0, 0);            /* everything, after a timeout */
	bad |= save(argv[1], "ack_sack_holes", &r);

	memset(&r, 0, sizeof(r));
	ack(&r, 1, 0, 0, 0, 0);
	ack(&r, 1, 0, 0, 0, 0);
	ack(&r, 3, 40, ~0ull, 0, 0);        /* beyond what was sent: stale or forged */
	data(&r, 1, 300, 0);                /* beyond the receive window */
	bad |= save(argv[1], "timeouts_and_out_of_range", &r);

	memset(&r, 0, sizeof(r));
	ack(&r, 0, 2, 0, SL_F_HOLD, TP_FIRST_PSN);     /* held from +2 on */
	ack(&r, 0, 2, 0, 0, TP_FIRST_PSN + 2);         /* reopened */
	ack(&r, 2, 2, 0, SL_F_HOLD, TP_FIRST_PSN + 1); /* a hold overtaken by the reopening */
	ack(&r, 1, 2, 0, SL_F_HOLD, TP_FIRST_PSN + 3); /* held again, an ms later */
	ack(&r, 1, 16, 0, 0, TP_FIRST_PSN + 4);        /* reopened, all acknowledged */
	bad |= save(argv[1], "hold_reopen_stale_hold", &r);

	memset(&r, 0, sizeof(r));
	uint8_t f[FUZZ_MAX_FRAME] = { 0 };
	f[12] = 0x08; /* ARP */
	f[13] = 0x06;
	add(&r, 0, f, 60);
	add(&r, 0, f, build(f, 9, FUZZ_SELF, SL_T_DATA, TP_FIRST_PSN, 0, NULL)); /* unknown node */
	add(&r, 0, f, build(f, FUZZ_PEER, 7, SL_T_DATA, TP_FIRST_PSN, 0, NULL)); /* not for us */
	add(&r, 0, f, build(f, FUZZ_OTHER, FUZZ_SELF, SL_T_DATA, TP_FIRST_PSN, SL_F_CRC, NULL));
	bad |= save(argv[1], "foreign_and_other_node", &r);
	return bad;
}

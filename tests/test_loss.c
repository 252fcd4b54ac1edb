/*
 * test_loss.c: loss detection (tp_loss.c).  A sending transport talks to a
 * receiver the test plays by hand over a memport pair: the test reads the
 * DATA frames, notes each PSN's path and copies, and answers with ACKs of
 * its own choosing, so that exactly the holes and timings a rule is about
 * arise (and, for the duplicate report, plays the sender to a receiving
 * transport).  The clock is fake and only moves when the test says.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "memport.h"
#include "tp_internal.h"
#include "transport.h"

#define P 256
#define MAX_FRAME 512
#define DEPTH 256
#define WIN 64
#define MAX_MSGS 8
#define MAX_PSNS 128
#define SENDER 1
#define RECEIVER 2
#define RTT_NS 200000 /* the RTT the first ACK teaches the sender */

struct fake_clock {
	uint64_t ns;
};

static uint64_t fake_now(void *arg)
{
	return ((struct fake_clock *)arg)->ns;
}

struct hand {
	struct fake_clock clock;
	struct sl_port *a, *b;     /* the sender's end, the test's end */
	struct sl_tp *tp;
	struct sl_tp_msg msgs[MAX_MSGS];
	unsigned n_msgs;
	uint8_t src[MAX_MSGS * 16 * P];
	/* what the test's end saw, by PSN - TP_FIRST_PSN */
	uint8_t path[MAX_PSNS];
	uint32_t ts[MAX_PSNS];
	unsigned copies[MAX_PSNS];
	uint16_t ack_flags;        /* header flags of the ACKs the test sends (SL_F_HOLD: credit 0) */
};

static enum sl_deliver_result no_deliver(void *arg, const struct sl_hdr *h, const uint8_t *payload)
{
	(void)arg;
	(void)h;
	(void)payload;
	fail_msg("the sender received DATA");
	return SL_DELIVER_DONE;
}

static void on_acked(void *arg, struct sl_tp_msg *m)
{
	(void)arg;
	(void)m;
}

static void on_dead(void *arg, uint16_t node)
{
	(void)arg;
	(void)node;
	fail_msg("the flow died");
}

static enum sl_deliver_result take(void *arg, const struct sl_hdr *h, const uint8_t *payload)
{
	(void)arg;
	(void)h;
	(void)payload;
	return SL_DELIVER_DONE;
}

/* A transport at node local with a route to peer, its frames on h->a. */
static struct hand *hand_at(uint16_t local, uint16_t peer,
			    enum sl_deliver_result (*deliver)(void *, const struct sl_hdr *, const uint8_t *))
{
	struct hand *h = calloc(1, sizeof(*h));
	struct sl_memport_faults none = { 0 };
	struct sl_tp_config cfg;
	struct sl_clock clock = { fake_now, &h->clock };
	struct sl_tp_callbacks cb = { deliver, on_acked, on_dead, h };
	struct sl_addr addr;

	assert_non_null(h);
	h->clock.ns = 1000000;
	assert_int_equal(sl_memport_pair(&h->a, &h->b, MAX_FRAME, DEPTH, &none), 0);
	sl_tp_config_default(&cfg, local, MAX_FRAME);
	cfg.payload = P;
	cfg.window = WIN;
	cfg.init_credit = WIN;
	cfg.rto_min_ns = 50000000; /* far away: only loss detection and the probe act */
	cfg.rto_max_ns = 100000000;
	h->tp = sl_tp_create(&cfg, &clock, &cb);
	assert_non_null(h->tp);
	assert_int_equal(sl_tp_add_port(h->tp, h->a), 0);
	sl_addr_for_node(peer, &addr);
	assert_int_equal(sl_tp_add_route(h->tp, peer, 0, &addr), 0);
	return h;
}

static struct hand *hand_new(void)
{
	return hand_at(SENDER, RECEIVER, no_deliver);
}

static void hand_free(struct hand *h)
{
	sl_tp_destroy(h->tp);
	sl_memport_pair_free(h->a, h->b);
	free(h);
}

/* Read what the sender put on the wire. */
static void grab(struct hand *h)
{
	struct sl_pkt pkts[64];
	uint16_t n;

	while ((n = h->b->ops->rx_burst(h->b, pkts, 64)) > 0) {
		for (uint16_t i = 0; i < n; i++) {
			struct sl_hdr hd;
			struct sl_ack ack;
			const uint8_t *payload;
			assert_int_equal(sl_wire_parse(pkts[i].data, pkts[i].len, &hd, &payload, &ack), SL_PARSE_OK);
			assert_int_equal(hd.type, SL_T_DATA);
			uint32_t k = hd.psn - TP_FIRST_PSN;
			assert_true(k < MAX_PSNS);
			h->path[k] = (uint8_t)((hd.flags & SL_F_PATH_MASK) >> SL_F_PATH_SHIFT);
			h->ts[k] = hd.ts;
			h->copies[k]++;
		}
		h->b->ops->free(h->b, pkts, n);
	}
}

static void poll_sender(struct hand *h)
{
	sl_tp_poll(h->tp);
	grab(h);
}

/* Queue a message of packets packets and let the sender put it out now. */
static void send_packets(struct hand *h, unsigned packets)
{
	assert_true(packets <= 16);
	unsigned i = h->n_msgs % MAX_MSGS; /* the test lets a message be acknowledged before its slot comes round */
	struct sl_tp_msg *m = &h->msgs[i];
	*m = (struct sl_tp_msg){ .dst_node = RECEIVER, .src = h->src + i * 16 * P };
	m->hdr = (struct sl_hdr){ .comm = 1, .seq = h->n_msgs, .offset = 0, .len = packets * P };
	h->n_msgs++;
	assert_int_equal(sl_tp_send(h->tp, m), 0);
	poll_sender(h);
}

/* An ACK from the receiver: everything below cum (an index), plus the
 * indices in sack[] (ending with -1), echoing index echo's timestamp and
 * path (-1: none, so that no RTT sample moves the reorder window). */
static void ack(struct hand *h, uint32_t cum, const int *sack, int echo)
{
	struct sl_ack a = { .cum_psn = TP_FIRST_PSN + cum, .credit = h->ack_flags & SL_F_HOLD ? 0 : WIN,
			    .echo_path = SL_ECHO_NONE };
	struct sl_hdr hd = { .version = SL_WIRE_VERSION, .type = SL_T_ACK, .flags = h->ack_flags,
			     .src_node = RECEIVER, .dst_node = SENDER };
	struct sl_addr from, to;
	struct sl_pkt pkt;

	if (echo >= 0) {
		a.echo_ts = h->ts[echo];
		a.echo_path = h->path[echo];
	}
	for (; sack && *sack >= 0; sack++) {
		uint32_t bit = (uint32_t)*sack - cum - 1;
		a.sack[bit / 64] |= 1ull << (bit % 64);
	}
	sl_addr_for_node(RECEIVER, &from);
	sl_addr_for_node(SENDER, &to);
	assert_int_equal(h->b->ops->alloc(h->b, &pkt, 1), 1);
	pkt.len = sl_wire_build(pkt.data, pkt.cap, &from, &to, 0xc000, &hd, NULL, &a);
	assert_true(pkt.len > 0);
	assert_int_equal(h->b->ops->tx_burst(h->b, &pkt, 1), 1);
	poll_sender(h);
}

/* The SACK list of a 16-packet burst from first whose first packet is the hole. */
static const int *all_but_first(int sack[16], uint32_t first)
{
	for (uint32_t k = 1; k < 16; k++)
		sack[k - 1] = (int)(first + k);
	sack[15] = -1;
	return sack;
}

/* The first message, acknowledged whole after RTT_NS: the flow has an RTT. */
static void warm_up(struct hand *h)
{
	send_packets(h, 8);
	h->clock.ns += RTT_NS;
	ack(h, 8, NULL, 7);
	struct sl_tp_flow_info fi;
	assert_int_equal(sl_tp_flow_info(h->tp, RECEIVER, &fi), 0);
	assert_int_equal(fi.srtt_ns, RTT_NS);
	assert_int_equal(fi.in_flight, 0);
}

/* The first index of [from, to) sent on another path than index k's. */
static int other_path(const struct hand *h, uint32_t from, uint32_t to, uint32_t k)
{
	for (uint32_t i = from; i < to; i++)
		if (h->path[i] != h->path[k])
			return (int)i;
	fail_msg("every packet went on one path");
	return -1;
}

/* A packet sent a reorder window (here a quarter RTT: one path has an RTT)
 * after four others arrives, on another path than the first of them: all
 * four are lost, on this very ACK.  Counting per path, only one of them
 * shares a path with it; the packets sent with it are not lost. */
static void test_later_send_on_any_path(void **state)
{
	(void)state;
	struct hand *h = hand_new();

	warm_up(h);
	send_packets(h, 4); /* indices 8..11 */
	h->clock.ns += RTT_NS / 2;
	send_packets(h, 4); /* 12..15, half an RTT later */
	h->clock.ns += 10000;
	int sack[] = { other_path(h, 12, 16, 8), -1 };
	ack(h, 8, sack, -1);
	for (uint32_t k = 8; k < 12; k++)
		assert_int_equal(h->copies[k], 2);
	for (uint32_t k = 12; k < 16; k++)
		assert_int_equal(h->copies[k], 1);
	assert_int_equal(sl_tp_get_stats(h->tp)->retx_sack, 4);
	hand_free(h);
}

/* Packets sent at one instant, one of which arrives, and then silence (the
 * receiver stalls, or nothing more is sent to draw ACKs): the holes below
 * it go again once they have been out an RTT plus the reorder window, from
 * the timer, well before a tail-loss probe would fire (two RTTs of quiet). */
static void test_overdue_hole_from_timer(void **state)
{
	(void)state;
	struct hand *h = hand_new();

	warm_up(h);
	send_packets(h, 4); /* indices 8..11, one instant */
	uint64_t sent = h->clock.ns;
	h->clock.ns += 10000;
	int sack[] = { 11, -1 };
	ack(h, 8, sack, -1);
	for (uint32_t k = 8; k < 11; k++)
		assert_int_equal(h->copies[k], 1); /* no time has told yet */
	while (h->clock.ns - sent < RTT_NS + RTT_NS / 4) {
		h->clock.ns += 1000;
		poll_sender(h);
		for (uint32_t k = 8; k < 11; k++)
			assert_int_equal(h->copies[k], 1); /* not before it is overdue */
	}
	h->clock.ns += TP_SCAN_NS + 1000;
	poll_sender(h);
	for (uint32_t k = 8; k < 11; k++)
		assert_int_equal(h->copies[k], 2);
	assert_int_equal(h->copies[11], 1);
	const struct sl_tp_stats *s = sl_tp_get_stats(h->tp);
	assert_int_equal(s->retx_sack, 3);
	assert_int_equal(s->retx_tlp, 0);
	hand_free(h);
}

/* Sixteen packets at one instant, and a hole with three SACKed after it on
 * its path: lost at once by count.  After the flow has seen a packet arrive
 * behind a higher PSN, the count says nothing any more (reordering that
 * deep happens): the same pattern waits for time. */
static void test_count_until_reordering_seen(void **state)
{
	(void)state;
	struct hand *h = hand_new();

	warm_up(h);
	send_packets(h, 16); /* indices 8..23 */
	h->clock.ns += 10000;
	int sack[16];
	uint32_t hole = 8;
	ack(h, 8, all_but_first(sack, 8), -1);
	assert_int_equal(h->copies[hole], 2);
	assert_int_equal(sl_tp_get_stats(h->tp)->retx_sack, 1);
	h->clock.ns += RTT_NS / 2;
	ack(h, 24, NULL, -1);

	/* reordering: index 25 arrives before 24, which was never sent again */
	send_packets(h, 4); /* 24..27 */
	h->clock.ns += 10000;
	int ahead[] = { 25, -1 };
	ack(h, 24, ahead, -1);
	ack(h, 28, NULL, -1);
	assert_int_equal(h->copies[24], 1);

	send_packets(h, 16); /* 28..43: the first pattern again */
	h->clock.ns += 10000;
	ack(h, 28, all_but_first(sack, 28), -1);
	assert_int_equal(h->copies[28], 1);
	assert_int_equal(sl_tp_get_stats(h->tp)->retx_sack, 1);
	hand_free(h);
}

/* A hole at a window the receiver holds (SL_F_HOLD, credit 0 from it) is
 * not lost, by count or by time; it goes again once an ACK reopens the
 * window, and that second copy, acknowledged below later PSNs, is no sign of
 * reordering: a hole by count is still lost at once afterwards. */
static void test_held_hole_is_not_lost(void **state)
{
	(void)state;
	struct hand *h = hand_new();
	int sack[16];

	warm_up(h);
	send_packets(h, 16); /* indices 8..23 */
	h->clock.ns += 10000;
	h->ack_flags = SL_F_HOLD;
	ack(h, 8, all_but_first(sack, 8), -1);
	h->clock.ns += 3 * RTT_NS + TP_SCAN_NS;
	poll_sender(h);
	assert_int_equal(h->copies[8], 1);
	h->ack_flags = 0;
	ack(h, 8, sack, -1);
	assert_int_equal(h->copies[8], 2);
	h->clock.ns += RTT_NS;
	ack(h, 24, NULL, -1);
	const struct sl_tp_stats *st = sl_tp_get_stats(h->tp);
	assert_int_equal(st->retx_sack + st->retx_rto + st->retx_tlp, 0);
	assert_int_equal(st->held_resent, 1);

	send_packets(h, 16); /* 24..39, a hole and fifteen SACKed after it */
	h->clock.ns += 10000;
	ack(h, 24, all_but_first(sack, 24), -1);
	assert_int_equal(h->copies[24], 2);
	assert_int_equal(st->retx_sack, 1);
	hand_free(h);
}

/* The window: a quarter RTT plus the spread of the live paths' RTTs. */
static void test_reorder_window(void **state)
{
	(void)state;
	struct tp_flow f = { .rtt_valid = true, .srtt_ns = 400000, .n_paths = 4 };

	f.paths[0] = (struct tp_path){ .rtt_valid = true, .srtt_ns = 100000 };
	f.paths[1] = (struct tp_path){ .rtt_valid = true, .srtt_ns = 300000 };
	f.paths[2] = (struct tp_path){ .rtt_valid = true, .srtt_ns = 900000, .dead = true };
	f.paths[3] = (struct tp_path){ .srtt_ns = 5000000 }; /* no sample yet */
	assert_int_equal(tp_reorder_window(&f), 100000 + 200000);
	f.paths[1].srtt_ns = 100000; /* paths alike: a quarter RTT */
	assert_int_equal(tp_reorder_window(&f), 100000);
	f.rtt_valid = false; /* no RTT yet: as patient as the RTO */
	f.rto_ns = 4000000;
	assert_int_equal(tp_reorder_window(&f), 4000000);
}

static uint64_t reorder_window(const struct hand *h)
{
	return tp_reorder_window(h->tp->flows[RECEIVER]);
}

/* The peer reports a duplicate (an ACK with SL_F_DSACK). */
static void dsack(struct hand *h, uint32_t cum)
{
	h->ack_flags = SL_F_DSACK;
	ack(h, cum, NULL, -1);
	h->ack_flags = 0;
}

/* Packets [k, k + n) sent, then n more gap_ns later, of which the first
 * arrives: how many of the first n went again. */
static unsigned hole_then_later(struct hand *h, uint32_t k, unsigned n, uint64_t gap_ns)
{
	send_packets(h, n);
	h->clock.ns += gap_ns;
	send_packets(h, n);
	h->clock.ns += 10000;
	int sack[] = { (int)(k + n), -1 };
	ack(h, k, sack, -1);
	unsigned again = 0;
	for (uint32_t i = k; i < k + n; i++)
		again += h->copies[i] > 1;
	ack(h, k + 2 * n, NULL, -1); /* everything arrived in the end */
	return again;
}

/* A packet sent 3/8 RTT after four others arrives before them: beyond the
 * quarter-RTT window they are lost.  Once the peer has reported a duplicate
 * (a retransmission was not needed) the window is half an RTT and the same
 * pattern is reordering.  It grows a quarter per RTT at most, to a whole
 * RTT, and narrows back after TP_REO_PERSIST recoveries without a report. */
static void test_duplicates_widen_reorder_window(void **state)
{
	(void)state;
	struct hand *h = hand_new();
	const uint64_t q = RTT_NS / 4, gap = 3 * RTT_NS / 8;

	warm_up(h); /* one path has an RTT: no spread */
	assert_int_equal(reorder_window(h), q);
	assert_int_equal(hole_then_later(h, 8, 4, gap), 4);
	dsack(h, 16);
	assert_int_equal(reorder_window(h), 2 * q);
	assert_int_equal(hole_then_later(h, 16, 4, gap), 0);
	dsack(h, 24); /* within the same RTT: no further */
	assert_int_equal(reorder_window(h), 2 * q);
	for (unsigned i = 3; i <= TP_REO_MAX_QUARTERS + 1; i++) {
		h->clock.ns += RTT_NS;
		dsack(h, 24);
		assert_int_equal(reorder_window(h), (i < TP_REO_MAX_QUARTERS ? i : TP_REO_MAX_QUARTERS) * q);
	}
	/* real losses, each beyond a whole RTT, and no more duplicates */
	uint32_t k = 24;
	for (unsigned r = 1; r <= TP_REO_PERSIST; r++, k += 2) {
		assert_int_equal(reorder_window(h), TP_REO_MAX_QUARTERS * q);
		assert_int_equal(hole_then_later(h, k, 1, 2 * RTT_NS), 1);
	}
	assert_int_equal(reorder_window(h), q);
	hand_free(h);
}

/* A receiver flags the ACK that follows a duplicate DATA, and only that one. */
static void test_duplicate_reported(void **state)
{
	(void)state;
	struct hand *h = hand_at(RECEIVER, SENDER, take);
	struct sl_addr from, to;
	const uint32_t psns[] = { 0, 1, 1, 2 };
	const bool flagged[] = { false, false, true, false };

	sl_addr_for_node(SENDER, &from);
	sl_addr_for_node(RECEIVER, &to);
	for (unsigned i = 0; i < 4; i++) {
		struct sl_hdr hd = { .version = SL_WIRE_VERSION, .type = SL_T_DATA, .src_node = SENDER,
				     .dst_node = RECEIVER, .psn = TP_FIRST_PSN + psns[i], .comm = 1,
				     .offset = psns[i] * P, .len = P, .flags = SL_F_ACK_NOW };
		struct sl_pkt pkt;
		assert_int_equal(h->b->ops->alloc(h->b, &pkt, 1), 1);
		pkt.len = sl_wire_build(pkt.data, pkt.cap, &from, &to, 0xc000, &hd, h->src, NULL);
		assert_true(pkt.len > 0);
		assert_int_equal(h->b->ops->tx_burst(h->b, &pkt, 1), 1);
		sl_tp_poll(h->tp);

		struct sl_pkt got;
		struct sl_hdr ah;
		struct sl_ack a;
		const uint8_t *payload;
		assert_int_equal(h->b->ops->rx_burst(h->b, &got, 1), 1);
		assert_int_equal(sl_wire_parse(got.data, got.len, &ah, &payload, &a), SL_PARSE_OK);
		assert_int_equal(ah.type, SL_T_ACK);
		assert_int_equal(!!(ah.flags & SL_F_DSACK), flagged[i]);
		h->b->ops->free(h->b, &got, 1);
	}
	assert_int_equal(sl_tp_get_stats(h->tp)->rx_dup, 1);
	hand_free(h);
}

/* The tail-loss probe waits two smoothed RTTs while the RTT is steady, and
 * an RTT plus four deviations when it jitters more. */
static void test_probe_timeout_follows_jitter(void **state)
{
	(void)state;
	struct hand *h = hand_new();
	uint32_t k = 8;

	warm_up(h); /* one sample: srtt 200 us, deviation 100 us */
	for (unsigned steady = 0; steady < 2; steady++, k += 4) {
		uint64_t pto = steady ? 2 * RTT_NS : RTT_NS + 4 * (RTT_NS / 2);
		for (unsigned i = 0; steady && i < 12; i++, k++) {
			/* samples of one RTT: the deviation shrinks below a quarter RTT */
			send_packets(h, 1);
			h->clock.ns += RTT_NS;
			ack(h, k + 1, NULL, (int)k);
		}
		send_packets(h, 4);
		uint64_t sent = h->clock.ns;
		while (h->clock.ns - sent < pto - TP_SCAN_NS) {
			h->clock.ns += 1000;
			poll_sender(h);
			assert_int_equal(h->copies[k + 3], 1);
		}
		h->clock.ns = sent + pto + TP_SCAN_NS;
		poll_sender(h);
		assert_int_equal(h->copies[k + 3], 2);
		assert_int_equal(sl_tp_get_stats(h->tp)->retx_tlp, steady + 1);
		ack(h, k + 4, NULL, -1);
	}
	hand_free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_later_send_on_any_path),
		cmocka_unit_test(test_overdue_hole_from_timer),
		cmocka_unit_test(test_count_until_reordering_seen),
		cmocka_unit_test(test_held_hole_is_not_lost),
		cmocka_unit_test(test_reorder_window),
		cmocka_unit_test(test_duplicates_widen_reorder_window),
		cmocka_unit_test(test_duplicate_reported),
		cmocka_unit_test(test_probe_timeout_follows_jitter),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_cc.c: congestion control.  First Swift's per-ACK rules on their own
 * (increase below the target delay, proportional decrease above it at most
 * once per RTT, loss and timeout, pacing below one packet); then whole
 * transports over memports made a bottleneck (a rate limit with a queue):
 * one flow, where a fixed window fills the queue and Swift holds the delay
 * near its target without losing throughput, and a six-to-one incast through
 * one port, where each sender's share is under a packet per RTT and Swift
 * paces, fairly (Jain's index over the middle of the run).  The Swift runs
 * keep the receiver's credit out of the way (a budget above every window,
 * the whole window from the start), so that they show Swift alone.  Then the
 * receiver's credit against an incast through a buffer that overflows
 * (bounded queue, no loss, where the windows alone lose packets and stall on
 * timeouts), and ECN: a queue that marks CE above a threshold holds Swift's
 * delay near the threshold even with a target delay it never reaches.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "memport.h"
#include "transport.h"

#define TARGET_NS 50000
#define WIN 128

#define T0 1000000ull /* the tests' first clock reading */

/* A fresh Swift controller for the tests' target and window. */
static void swift_fresh(struct sl_cc_params *p, struct sl_cc *cc)
{
	sl_cc_params_default(p, TARGET_NS, WIN);
	sl_cc_swift.init(cc, p);
}

static void test_swift_rules(void **state)
{
	(void)state;
	struct sl_cc_params p;
	struct sl_cc cc;
	const uint64_t t0 = T0;

	swift_fresh(&p, &cc);
	assert_true(cc.cwnd == WIN);
	cc.cwnd = 10;
	sl_cc_swift.on_ack(&cc, 5, TARGET_NS / 2, false, t0); /* below target: + ai * 5 / 10 */
	assert_true(cc.cwnd > 10.49 && cc.cwnd < 10.51);
	sl_cc_swift.on_ack(&cc, 1, 2 * TARGET_NS, false, t0); /* twice the target: * (1 - 0.8 / 2) */
	assert_true(cc.cwnd > 6.29 && cc.cwnd < 6.31);
	sl_cc_swift.on_ack(&cc, 1, 2 * TARGET_NS, false, t0 + 1000); /* within an RTT: no cut */
	assert_true(cc.cwnd > 6.29 && cc.cwnd < 6.31);
	sl_cc_swift.on_ack(&cc, 1, 100 * TARGET_NS, false, t0 + 200 * TARGET_NS); /* capped at max_mdf */
	assert_true(cc.cwnd > 3.14 && cc.cwnd < 3.16);
	sl_cc_swift.on_ack(&cc, 1, 0, true, t0 + 1000 * TARGET_NS); /* a CE mark: cut */
	assert_true(cc.cwnd < 3.14);
	double before = cc.cwnd;
	sl_cc_swift.on_loss(&cc, t0 + 2000 * TARGET_NS);
	assert_true(cc.cwnd > before * 0.49 && cc.cwnd < before * 0.51);
	for (int i = 0; i < 20; i++)
		sl_cc_swift.on_timeout(&cc, t0 + 2000 * TARGET_NS);
	assert_true(cc.cwnd == p.min_cwnd);
	assert_int_equal(cc.pace_ns, (uint64_t)((double)cc.rtt_ns / p.min_cwnd));
	sl_cc_swift.on_ack(&cc, 1, TARGET_NS / 2, false, t0 + 3000 * TARGET_NS); /* below one: + ai */
	assert_true(cc.cwnd > 1 && cc.pace_ns == 0);
}

/* A loss at a delay below the target is the wire's, not a queue's: the
 * window stays.  Above the target it is halved, once per RTT. */
static void test_swift_random_loss(void **state)
{
	(void)state;
	struct sl_cc_params p;
	struct sl_cc cc;
	const uint64_t t0 = T0;

	swift_fresh(&p, &cc);
	cc.cwnd = 20;
	sl_cc_swift.on_ack(&cc, 1, TARGET_NS / 2, false, t0);
	double before = cc.cwnd;
	sl_cc_swift.on_loss(&cc, t0 + 1000);
	assert_true(cc.cwnd == before);
	sl_cc_swift.on_ack(&cc, 1, TARGET_NS + TARGET_NS / 10, false, t0 + 4 * TARGET_NS);
	before = cc.cwnd;
	sl_cc_swift.on_loss(&cc, t0 + 8 * TARGET_NS);
	assert_true(cc.cwnd > before * 0.49 && cc.cwnd < before * 0.51);
	sl_cc_swift.on_loss(&cc, t0 + 8 * TARGET_NS + 1000); /* within the RTT: once */
	assert_true(cc.cwnd > before * 0.49 && cc.cwnd < before * 0.51);
}

/* ---- senders and a receiver over a bottleneck ---- */

#define PAYLOAD 1024
#define MAX_FRAME 1200
#define DEPTH 512
#define MSG_BYTES (64 * PAYLOAD)
#define MAX_SENDERS 6
#define STEP_NS 200
#define RATE 100000000 /* 100 MB/s: a 1 KB packet every ~11 us */
#define RECEIVER 10

struct fake_clock {
	uint64_t ns;
};

static uint64_t fake_now(void *arg)
{
	return ((struct fake_clock *)arg)->ns;
}

struct sender {
	struct sl_port *port, *peer; /* memport ends: the sender's, the receiver's */
	struct sl_tp *tp;
	struct sl_tp_msg *msgs;
};

/* What the senders' flows looked like once past the start (a quarter of the
 * messages acknowledged), when the initial window has drained. */
struct outcome {
	uint64_t took_ns;
	uint64_t retx;        /* the senders' retransmissions, all causes */
	uint64_t dropped, marked, max_wait_ns; /* the bottleneck's */
	uint64_t rx_ce, ack_ce, credit_stalls, paced_waits; /* the transports' counters */
	uint64_t mean_srtt_ns;
	double min_cwnd;
	uint64_t max_pace_ns;
	double jain;          /* fairness of the senders' goodput over the middle half */
};

/* How a run is set up: the transports' and the bottleneck's knobs. */
struct knobs {
	const struct sl_cc_ops *cc;
	uint64_t target_ns;
	uint32_t rx_credit, init_credit; /* 0: out of the way */
	uint64_t buffer_ns, ecn_ns;      /* the bottleneck's, 0: none */
};

struct run {
	struct fake_clock clock;
	struct knobs k;
	struct sl_memport_bottleneck neck;
	struct sender s[MAX_SENDERS];
	unsigned n, msgs_each;
	struct sl_tp *rx;
	uint8_t *src, *dst;
	uint32_t acked;
	uint64_t delivered[MAX_SENDERS + 1];     /* bytes, by sender node */
	uint64_t mid_start[MAX_SENDERS + 1];     /* delivered[] when the middle half began */
	uint64_t srtt_sum, samples;
	struct outcome out;
};

static enum sl_deliver_result on_deliver(void *arg, const struct sl_hdr *h, const uint8_t *payload)
{
	struct run *r = arg;

	memcpy(r->dst + h->offset, payload, h->len);
	if (h->src_node <= MAX_SENDERS)
		r->delivered[h->src_node] += h->len;
	return SL_DELIVER_DONE;
}

static void on_acked(void *arg, struct sl_tp_msg *m)
{
	(void)m;
	((struct run *)arg)->acked++;
}

static void on_dead(void *arg, uint16_t node)
{
	(void)arg;
	(void)node;
	fail_msg("a flow died over a slow but working link");
}

static struct sl_tp *tp_new(struct run *r, uint16_t self)
{
	struct sl_tp_config cfg;
	struct sl_clock clock = { fake_now, &r->clock };
	struct sl_tp_callbacks cb = { on_deliver, on_acked, on_dead, r };

	sl_tp_config_default(&cfg, self, MAX_FRAME);
	cfg.payload = PAYLOAD;
	cfg.window = WIN;
	cfg.rto_min_ns = 20000000; /* far above any queue here: no timeout muddles the picture */
	cfg.rto_max_ns = 100000000;
	cfg.dead_ns = 100000000000ull;
	cfg.cc = r->k.cc;
	cfg.cc_target_ns = r->k.target_ns ? r->k.target_ns : TARGET_NS;
	cfg.rx_credit = r->k.rx_credit ? r->k.rx_credit : WIN * MAX_SENDERS;
	cfg.init_credit = r->k.init_credit ? r->k.init_credit : WIN;
	struct sl_tp *tp = sl_tp_create(&cfg, &clock, &cb);
	assert_non_null(tp);
	return tp;
}

static void route(struct sl_tp *tp, struct sl_port *port, uint16_t node)
{
	struct sl_addr addr;
	int idx = sl_tp_add_port(tp, port);

	assert_true(idx >= 0);
	sl_addr_for_node(node, &addr);
	assert_int_equal(sl_tp_add_route(tp, node, (uint16_t)idx, &addr), 0);
}

static void setup(struct run *r, unsigned n, unsigned msgs_each, const struct knobs *k)
{
	struct sl_memport_faults none = { 0 };
	size_t bytes = (size_t)n * msgs_each * MSG_BYTES;

	memset(r, 0, sizeof(*r));
	r->n = n;
	r->msgs_each = msgs_each;
	r->k = *k;
	r->clock.ns = 1000000;
	r->neck = (struct sl_memport_bottleneck){ .bytes_per_s = RATE, .clock = { fake_now, &r->clock },
						  .buffer_ns = k->buffer_ns, .ecn_ns = k->ecn_ns };
	r->src = malloc(bytes);
	r->dst = calloc(1, bytes);
	assert_true(r->src && r->dst);
	for (size_t i = 0; i < bytes; i++)
		r->src[i] = (uint8_t)(i * 7 + (i >> 11));
	r->rx = tp_new(r, RECEIVER);
	for (unsigned k = 0; k < n; k++) {
		struct sender *s = &r->s[k];
		assert_int_equal(sl_memport_pair(&s->port, &s->peer, MAX_FRAME, DEPTH, &none), 0);
		sl_memport_set_bottleneck(s->port, &r->neck); /* every sender into one switch port */
		s->tp = tp_new(r, (uint16_t)(k + 1));
		route(s->tp, s->port, RECEIVER);
		route(r->rx, s->peer, (uint16_t)(k + 1));
		s->msgs = calloc(msgs_each, sizeof(*s->msgs));
		assert_non_null(s->msgs);
		for (unsigned i = 0; i < msgs_each; i++) {
			uint64_t off = ((uint64_t)k * msgs_each + i) * MSG_BYTES;
			s->msgs[i] = (struct sl_tp_msg){ .dst_node = RECEIVER, .src = r->src + off };
			s->msgs[i].hdr = (struct sl_hdr){ .comm = 1, .seq = i, .offset = off, .len = MSG_BYTES };
			assert_int_equal(sl_tp_send(s->tp, &s->msgs[i]), 0);
		}
	}
	r->out.min_cwnd = WIN;
}

static void observe(struct run *r)
{
	for (unsigned k = 0; k < r->n; k++) {
		struct sl_tp_flow_info fi;
		assert_int_equal(sl_tp_flow_info(r->s[k].tp, RECEIVER, &fi), 0);
		if (fi.in_flight == 0)
			continue;
		r->srtt_sum += fi.srtt_ns;
		r->samples++;
		r->out.min_cwnd = fi.cwnd < r->out.min_cwnd ? fi.cwnd : r->out.min_cwnd;
		r->out.max_pace_ns = fi.pace_ns > r->out.max_pace_ns ? fi.pace_ns : r->out.max_pace_ns;
	}
}

static void teardown(struct run *r)
{
	const struct sl_tp_stats *rs = sl_tp_get_stats(r->rx);

	assert_memory_equal(r->src, r->dst, (size_t)r->n * r->msgs_each * MSG_BYTES);
	r->out.dropped = r->neck.dropped;
	r->out.marked = r->neck.marked;
	r->out.max_wait_ns = r->neck.max_wait_ns;
	r->out.rx_ce = rs->rx_ce;
	for (unsigned k = 0; k < r->n; k++) {
		const struct sl_tp_stats *ss = sl_tp_get_stats(r->s[k].tp);
		r->out.retx += ss->retx_rto + ss->retx_sack + ss->retx_tlp + ss->retx_path;
		r->out.ack_ce += ss->ack_ce;
		r->out.credit_stalls += ss->credit_stalls;
		r->out.paced_waits += ss->paced_waits;
	}
	sl_tp_destroy(r->rx);
	for (unsigned k = 0; k < r->n; k++) {
		sl_tp_destroy(r->s[k].tp);
		sl_memport_pair_free(r->s[k].port, r->s[k].peer);
		free(r->s[k].msgs);
	}
	free(r->src);
	free(r->dst);
}

/* Jain's index of the senders' goodput since mid_start: 1 is fair, 1/n is one sender alone. */
static double jain(const struct run *r)
{
	double sum = 0, sq = 0;

	for (unsigned k = 1; k <= r->n; k++) {
		double x = (double)(r->delivered[k] - r->mid_start[k]);
		sum += x;
		sq += x * x;
	}
	return sq > 0 ? sum * sum / (r->n * sq) : 0;
}

/* n senders, msgs_each messages each, all into one receiver through one
 * bottleneck: exact delivery, and how the senders' flows behaved. */
static struct outcome run_incast(unsigned n, unsigned msgs_each, const struct knobs *k)
{
	static struct run r;
	uint64_t start;

	setup(&r, n, msgs_each, k);
	start = r.clock.ns;
	while (r.acked < n * msgs_each) {
		assert_true(r.clock.ns - start < 10000000000ull);
		for (unsigned k = 0; k < n; k++)
			sl_tp_poll(r.s[k].tp);
		sl_tp_poll(r.rx);
		r.clock.ns += STEP_NS;
		if (r.acked >= n * msgs_each / 4)
			observe(&r);
		if (r.acked < n * msgs_each / 4)
			memcpy(r.mid_start, r.delivered, sizeof(r.delivered));
		if (r.acked < n * msgs_each * 3 / 4)
			r.out.jain = jain(&r);
	}
	r.out.took_ns = r.clock.ns - start;
	r.out.mean_srtt_ns = r.samples ? r.srtt_sum / r.samples : 0;
	teardown(&r);
	return r.out;
}

static void report(const char *what, const struct outcome *o)
{
	print_message("%-22s %7.2f ms, mean srtt %5llu us, min cwnd %6.2f, widest pacing gap %llu us, "
		      "Jain %.3f\n", what, o->took_ns / 1e6, (unsigned long long)o->mean_srtt_ns / 1000,
		      o->min_cwnd, (unsigned long long)o->max_pace_ns / 1000, o->jain);
}

static void test_swift_holds_the_queue(void **state)
{
	(void)state;
	const struct knobs none = { 0 }, sw = { .cc = &sl_cc_swift };
	struct outcome fixed = run_incast(1, 24, &none), swift = run_incast(1, 24, &sw);

	report("1 flow, fixed window:", &fixed);
	report("1 flow, swift:", &swift);
	/* a window of 128 packets queues ~1.4 ms at this rate; Swift keeps near its 50 us */
	assert_true(fixed.mean_srtt_ns > 1000000);
	assert_true(swift.mean_srtt_ns < 3 * TARGET_NS);
	assert_true(swift.min_cwnd < WIN / 4);
	/* and the link stays busy: no more than 15% slower than the queue-filling window */
	assert_true(swift.took_ns < fixed.took_ns + fixed.took_ns * 15 / 100);
}

static void test_swift_incast_paces(void **state)
{
	(void)state;
	/* six senders into one 100 MB/s port: a fair share is under one packet per target delay */
	const struct knobs none = { 0 }, sw = { .cc = &sl_cc_swift };
	struct outcome fixed = run_incast(MAX_SENDERS, 16, &none);
	struct outcome swift = run_incast(MAX_SENDERS, 16, &sw);

	report("6-to-1, fixed window:", &fixed);
	report("6-to-1, swift:", &swift);
	assert_true(swift.min_cwnd < 1);
	assert_true(swift.max_pace_ns > 0);
	assert_true(swift.paced_waits > 0); /* the paced sends waited on the timing wheel */
	assert_int_equal(fixed.paced_waits, 0);
	assert_true(swift.mean_srtt_ns < fixed.mean_srtt_ns / 4);
	assert_true(swift.jain >= 0.9); /* no sender starved while they shared the port */
	assert_true(swift.took_ns < fixed.took_ns + fixed.took_ns * 15 / 100);
}

static void report_queue(const char *what, const struct outcome *o)
{
	print_message("%-22s %7.2f ms, retransmits %5llu, bottleneck drops %5llu marks %5llu, "
		      "longest wait %5llu us, credit stalls %llu\n", what, o->took_ns / 1e6,
		      (unsigned long long)o->retx, (unsigned long long)o->dropped,
		      (unsigned long long)o->marked, (unsigned long long)o->max_wait_ns / 1000,
		      (unsigned long long)o->credit_stalls);
}

/* Packets the bottleneck passes in t ns. */
static uint64_t packets_in(uint64_t t_ns)
{
	return t_ns * RATE / 1000000000ull / (PAYLOAD + SL_FRAME_OVERHEAD);
}

static void test_credit_bounds_incast(void **state)
{
	(void)state;
	/* six senders with 128-packet windows (no cc) into a switch buffer of 1 ms
	 * (about 90 packets); each starts with a credit of 8 */
	const struct knobs windows = { .rx_credit = WIN * MAX_SENDERS, .init_credit = 8,
				       .buffer_ns = 1000000 };
	struct knobs credit = windows;
	credit.rx_credit = 60; /* shared: 10 packets each */
	struct outcome lossy = run_incast(MAX_SENDERS, 8, &windows);
	struct outcome shared = run_incast(MAX_SENDERS, 8, &credit);

	report_queue("6-to-1, windows only:", &lossy);
	report_queue("6-to-1, credit 60:", &shared);
	assert_true(lossy.dropped > 0 && lossy.retx > 0); /* the windows overflow the buffer */
	/* the credit keeps the queue within the buffer: nothing lost, and at
	 * most a few tail-loss probes sent early (the queue delays ACKs) */
	assert_int_equal(shared.dropped, 0);
	assert_true(shared.retx <= MAX_SENDERS);
	assert_true(packets_in(shared.max_wait_ns) < packets_in(windows.buffer_ns));
	assert_true(shared.credit_stalls > 0);
	/* and no collapse: the link stays busy, faster than the lossy run */
	assert_true(shared.took_ns < lossy.took_ns);
	uint64_t ideal = (uint64_t)MAX_SENDERS * 8 * MSG_BYTES / PAYLOAD *
			 (PAYLOAD + SL_FRAME_OVERHEAD) * 1000000000ull / RATE;
	assert_true(shared.took_ns < ideal + ideal / 10);
}

static void test_swift_reacts_to_ecn(void **state)
{
	(void)state;
	/* a target delay of 20 ms that the queue never reaches: only CE marks
	 * (above 100 us of queue) can hold Swift back */
	const struct knobs blind = { .cc = &sl_cc_swift, .target_ns = 20000000 };
	struct knobs ecn = blind;
	ecn.ecn_ns = 100000;
	struct outcome no_marks = run_incast(2, 24, &blind), marks = run_incast(2, 24, &ecn);

	report("2 flows, no ECN:", &no_marks);
	report("2 flows, ECN at 100 us:", &marks);
	report_queue("2 flows, ECN at 100 us:", &marks);
	assert_int_equal(no_marks.marked, 0);
	assert_true(no_marks.mean_srtt_ns > 1000000); /* the windows fill the queue */
	assert_true(marks.marked > 0);
	assert_int_equal(marks.rx_ce, marks.marked);  /* every mark seen by the receiver */
	assert_true(marks.ack_ce > 0);                /* echoed to the senders */
	assert_true(marks.mean_srtt_ns < 4 * 100000); /* which hold the queue near the threshold */
	assert_true(marks.took_ns < no_marks.took_ns + no_marks.took_ns * 15 / 100);
}

static void test_swift_ce_once_per_rtt(void **state)
{
	(void)state;
	struct sl_cc_params p;
	struct sl_cc cc;

	swift_fresh(&p, &cc);
	cc.cwnd = 10;
	sl_cc_swift.on_ack(&cc, 1, TARGET_NS / 2, true, T0); /* delay fine, but a mark */
	double cut = cc.cwnd;
	assert_true(cut < 10);
	for (int i = 1; i < 10; i++) /* more marks within the RTT: no further cut */
		sl_cc_swift.on_ack(&cc, 1, TARGET_NS / 2, true, 1000000 + (uint64_t)i * TARGET_NS / 20);
	assert_true(cc.cwnd == cut);
	sl_cc_swift.on_ack(&cc, 1, TARGET_NS / 2, true, 1000000 + TARGET_NS); /* an RTT later */
	assert_true(cc.cwnd < cut);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_swift_rules),
		cmocka_unit_test(test_swift_random_loss),
		cmocka_unit_test(test_swift_ce_once_per_rtt),
		cmocka_unit_test(test_swift_holds_the_queue),
		cmocka_unit_test(test_swift_incast_paces),
		cmocka_unit_test(test_credit_bounds_incast),
		cmocka_unit_test(test_swift_reacts_to_ecn),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_cc.c: congestion control.  First Swift's per-ACK rules on their own
 * (increase below the target delay, proportional decrease above it at most
 * once per RTT, loss and timeout, pacing below one packet); then whole
 * transports over memports made a bottleneck (a rate limit with a queue):
 * one flow, where a fixed window fills the queue and Swift holds the delay
 * near its target without losing throughput, and a six-to-one incast through
 * one port, where each sender's share is under a packet per RTT and Swift
 * paces, fairly (Jain's index over the middle of the run).
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

static void test_swift_rules(void **state)
{
	(void)state;
	struct sl_cc_params p;
	struct sl_cc cc;
	const uint64_t t0 = 1000000;

	sl_cc_params_default(&p, TARGET_NS, WIN);
	sl_cc_swift.init(&cc, &p);
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
	uint64_t mean_srtt_ns;
	double min_cwnd;
	uint64_t max_pace_ns;
	double jain;          /* fairness of the senders' goodput over the middle half */
};

struct run {
	struct fake_clock clock;
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

static struct sl_tp *tp_new(struct run *r, uint16_t self, const struct sl_cc_ops *cc)
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
	cfg.cc = cc;
	cfg.cc_target_ns = TARGET_NS;
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

static void setup(struct run *r, unsigned n, unsigned msgs_each, const struct sl_cc_ops *cc)
{
	struct sl_memport_faults none = { 0 };
	size_t bytes = (size_t)n * msgs_each * MSG_BYTES;

	memset(r, 0, sizeof(*r));
	r->n = n;
	r->msgs_each = msgs_each;
	r->clock.ns = 1000000;
	r->neck = (struct sl_memport_bottleneck){ RATE, { fake_now, &r->clock }, 0 };
	r->src = malloc(bytes);
	r->dst = calloc(1, bytes);
	assert_true(r->src && r->dst);
	for (size_t i = 0; i < bytes; i++)
		r->src[i] = (uint8_t)(i * 7 + (i >> 11));
	r->rx = tp_new(r, RECEIVER, cc);
	for (unsigned k = 0; k < n; k++) {
		struct sender *s = &r->s[k];
		assert_int_equal(sl_memport_pair(&s->port, &s->peer, MAX_FRAME, DEPTH, &none), 0);
		sl_memport_set_bottleneck(s->port, &r->neck); /* every sender into one switch port */
		s->tp = tp_new(r, (uint16_t)(k + 1), cc);
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
	assert_memory_equal(r->src, r->dst, (size_t)r->n * r->msgs_each * MSG_BYTES);
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
static struct outcome run_incast(unsigned n, unsigned msgs_each, const struct sl_cc_ops *cc)
{
	static struct run r;
	uint64_t start;

	setup(&r, n, msgs_each, cc);
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
	struct outcome fixed = run_incast(1, 24, NULL), swift = run_incast(1, 24, &sl_cc_swift);

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
	struct outcome fixed = run_incast(MAX_SENDERS, 16, NULL);
	struct outcome swift = run_incast(MAX_SENDERS, 16, &sl_cc_swift);

	report("6-to-1, fixed window:", &fixed);
	report("6-to-1, swift:", &swift);
	assert_true(swift.min_cwnd < 1);
	assert_true(swift.max_pace_ns > 0);
	assert_true(swift.mean_srtt_ns < fixed.mean_srtt_ns / 4);
	assert_true(swift.jain >= 0.9); /* no sender starved while they shared the port */
	assert_true(swift.took_ns < fixed.took_ns + fixed.took_ns * 15 / 100);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_swift_rules),
		cmocka_unit_test(test_swift_holds_the_queue),
		cmocka_unit_test(test_swift_incast_paces),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

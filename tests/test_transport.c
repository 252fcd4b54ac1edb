/*
 * test_transport.c: the reliable transport end to end.  Two transports are
 * joined by a memport pair and driven from one thread by a fake clock that
 * moves a little every poll, so each run is exact and replays from its seed.
 * Each side keeps a receive buffer and a per-byte count: every byte of every
 * message must land exactly once at its offset, whatever the faults.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fault_port.h"
#include "memport.h"
#include "tp_internal.h"
#include "transport.h"

#define P 256                /* payload per packet */
#define WIN 24               /* packets in flight per flow: not a power of two */
#define MAX_FRAME 512
#define DEPTH 256            /* memport FIFO per direction */
#define STEP_NS 500          /* fake time per poll round */
#define MAX_ROUNDS 400000    /* 200 ms of fake time */
#define DRAIN_ROUNDS 2000    /* after completion: let stray copies arrive */
#define NODE_A 1
#define NODE_B 2
#define COMM 0xc0ffee
#define COMM2 0xc0ff2e       /* other communicators, whose calls share the flow */
#define COMM3 0xc0ff3e
#define COMM_N(n) (COMM | (uint32_t)(n) << 24) /* communicator n of many parked at once */
#define SPACE 65536

/* The messages: empty, tiny, around one packet, many packets, more than a window. */
enum { N_MAIN = 8, N_ALL = 9 };
static const uint32_t msg_size[N_ALL] = { 0, 1, 15, P - 1, P, P + 1, 10 * P + 7,
					  3 * WIN * P + 5, 2 * P + 3 };
static uint32_t msg_base[N_ALL];

static uint32_t packets_of(uint32_t size)
{
	return size ? (size + P - 1) / P : 1;
}

struct fake_clock {
	uint64_t ns;
};

static uint64_t fake_now(void *arg)
{
	return ((struct fake_clock *)arg)->ns;
}

struct end {
	struct sl_tp *tp;
	struct sl_port *port;
	struct fake_clock *clock;
	uint16_t node;
	struct sl_tp_msg msgs[N_ALL];
	bool sent[N_ALL], cancelled[N_ALL];
	uint32_t acked[N_ALL];
	uint8_t src[SPACE];          /* what this end sends */
	uint8_t rx[SPACE];           /* what arrived from the peer */
	uint8_t rx_count[SPACE];     /* times each byte arrived */
	uint32_t empty_rx[N_ALL];    /* deliveries of empty messages */
	bool refuse_first;           /* answer RETRY to the first attempt of every other packet
					(even offset / P), resume each round */
	uint8_t tried[SPACE / P];
	/* a slow engine, like the dataplane's stash: keeps at most cap packets,
	 * holds the sender from 3/4 of that (HOLD), refuses when full (RETRY),
	 * consumes one every `every` rounds and resumes once down to a quarter */
	uint32_t cap, every, queued, rounds;
	bool holding;
	uint32_t dead_calls;
	uint64_t dead_at;
	uint32_t park_seq;           /* nonzero: park the peer's calls from this one on at its
					first packet, as the dataplane's stash does */
	uint16_t peer;
};

struct harness {
	struct fake_clock clock;
	struct sl_port *pa, *pb; /* the memport pair */
	struct sl_port *fa, *fb; /* fault ports over them (setup.wire), else NULL */
	struct end a, b;
};

static enum sl_deliver_result on_deliver(void *arg, const struct sl_hdr *h, const uint8_t *payload)
{
	struct end *e = arg;

	assert_true((h->comm & 0xffffff) == COMM || h->comm == COMM2 || h->comm == COMM3);
	assert_true(h->seq < N_ALL);
	assert_true(h->offset >= msg_base[h->seq]);
	assert_true(h->offset + h->len <= msg_base[h->seq] + msg_size[h->seq]);
	if (e->park_seq && h->seq == e->park_seq)
		assert_true(sl_tp_park(e->tp, e->peer, COMM, SL_TP_CALLS, e->park_seq));
	if (e->refuse_first && h->offset / P % 2 == 0 && !e->tried[h->offset / P]++)
		return SL_DELIVER_RETRY;
	if (e->cap && e->queued == e->cap) {
		e->holding = true;
		return SL_DELIVER_RETRY;
	}
	if (!h->len)
		e->empty_rx[h->seq]++;
	for (uint32_t k = 0; k < h->len; k++) {
		e->rx[h->offset + k] = payload[k];
		e->rx_count[h->offset + k]++;
	}
	if (!e->cap)
		return SL_DELIVER_DONE;
	e->holding |= ++e->queued >= e->cap * 3 / 4;
	return e->holding ? SL_DELIVER_HOLD : SL_DELIVER_DONE;
}

/* e's engine between two polls. */
static void engine_round(struct end *e)
{
	if (e->refuse_first)
		sl_tp_resume(e->tp); /* a second attempt is always taken */
	if (!e->cap || ++e->rounds % e->every)
		return;
	if (e->queued)
		e->queued--;
	if (e->holding && e->queued <= e->cap / 4) {
		e->holding = false;
		sl_tp_resume(e->tp);
	}
}

static void on_acked(void *arg, struct sl_tp_msg *m)
{
	struct end *e = arg;

	assert_ptr_equal(m->owner, e);
	assert_false(e->cancelled[m->hdr.seq]);
	e->acked[m->hdr.seq]++;
}

static void on_dead(void *arg, uint16_t node)
{
	struct end *e = arg;

	assert_int_not_equal(node, e->node);
	e->dead_calls++;
	e->dead_at = e->clock->ns;
}

struct setup {
	struct sl_memport_faults faults;
	bool crc;
	bool port_crc;      /* ports ask for the CRC trailer, the config does not */
	const char *wire;   /* a SLUICE_FAULT spec: fault ports over the memports */
	uint64_t dead_ns;
	uint32_t depth;     /* memport FIFO per direction; 0: DEPTH */
	uint32_t rx_credit; /* each end's receive budget in packets; 0: the default */
};

static void end_init(struct harness *hs, struct end *e, struct sl_port *port, uint16_t node,
		     uint16_t peer, const struct setup *s)
{
	struct sl_tp_config cfg;
	struct sl_clock clock = { fake_now, &hs->clock };
	struct sl_tp_callbacks cb = { on_deliver, on_acked, on_dead, e };
	struct sl_addr peer_addr;

	sl_tp_config_default(&cfg, node, MAX_FRAME);
	cfg.payload = P;
	cfg.window = WIN;
	cfg.rto_min_ns = 200000;
	cfg.rto_max_ns = 5000000;
	cfg.dead_ns = s->dead_ns ? s->dead_ns : 20000000;
	cfg.crc = s->crc;
	if (s->rx_credit)
		cfg.rx_credit = s->rx_credit;
	e->clock = &hs->clock;
	e->node = node;
	e->peer = peer;
	e->port = port;
	e->tp = sl_tp_create(&cfg, &clock, &cb);
	assert_non_null(e->tp);
	assert_int_equal(sl_tp_add_port(e->tp, port), 0);
	sl_addr_for_node(peer, &peer_addr);
	assert_int_equal(sl_tp_add_route(e->tp, peer, 0, &peer_addr), 0);
	for (uint32_t k = 0; k < SPACE; k++)
		e->src[k] = (uint8_t)(k * 131 + node * 7 + (k >> 8));
	for (int i = 0; i < N_ALL; i++) {
		struct sl_tp_msg *m = &e->msgs[i];
		m->dst_node = peer;
		m->hdr = (struct sl_hdr){ .comm = COMM, .seq = (uint32_t)i, .step = 3, .kind = 1,
					  .count = msg_size[i], .offset = msg_base[i],
					  .len = msg_size[i] };
		m->src = e->src + msg_base[i];
		m->owner = e;
	}
}

static struct harness *harness_new(const struct setup *s)
{
	struct harness *hs = calloc(1, sizeof(*hs));

	assert_non_null(hs);
	hs->clock.ns = 1000000;
	assert_int_equal(sl_memport_pair(&hs->pa, &hs->pb, MAX_FRAME, s->depth ? s->depth : DEPTH, &s->faults), 0);
	struct sl_port *a = hs->pa, *b = hs->pb;
	if (s->wire) {
		struct sl_fault_spec spec;
		struct sl_clock clock = { fake_now, &hs->clock };
		char err[256];
		assert_int_equal(sl_fault_parse(s->wire, &spec, err, sizeof(err)), 0);
		a = hs->fa = sl_fault_port_wrap(hs->pa, &spec, 1, &clock);
		b = hs->fb = sl_fault_port_wrap(hs->pb, &spec, 2, &clock);
		assert_true(a && b);
	}
	a->crc = b->crc = s->port_crc;
	end_init(hs, &hs->a, a, NODE_A, NODE_B, s);
	end_init(hs, &hs->b, b, NODE_B, NODE_A, s);
	return hs;
}

static void harness_free(struct harness *hs)
{
	sl_tp_destroy(hs->a.tp);
	sl_tp_destroy(hs->b.tp);
	if (hs->fa) {
		hs->fa->ops->close(hs->fa);
		hs->fb->ops->close(hs->fb);
	}
	assert_int_equal(sl_memport_held(hs->pa), 0); /* no frame leaked */
	sl_memport_pair_free(hs->pa, hs->pb);
	free(hs);
}

static void send_msg(struct end *e, int i)
{
	assert_int_equal(sl_tp_send(e->tp, &e->msgs[i]), 0);
	e->sent[i] = true;
}

static void round_once(struct harness *hs)
{
	sl_tp_poll(hs->a.tp);
	sl_tp_poll(hs->b.tp);
	engine_round(&hs->a);
	engine_round(&hs->b);
	hs->clock.ns += STEP_NS;
}

static bool all_acked(const struct end *e)
{
	for (int i = 0; i < N_ALL; i++)
		if (e->sent[i] && !e->cancelled[i] && !e->acked[i])
			return false;
	return true;
}

/* Poll until both ends have every message acknowledged, then drain. */
static void run_to_completion(struct harness *hs)
{
	int rounds = 0;

	while (!(all_acked(&hs->a) && all_acked(&hs->b))) {
		assert_true(++rounds < MAX_ROUNDS);
		round_once(hs);
	}
	for (int i = 0; i < DRAIN_ROUNDS; i++)
		round_once(hs);
}

/* What rx saw of tx's messages: each byte of a live message exactly once,
 * of a cancelled one at most once, and nothing elsewhere. */
static void check_received(const struct end *tx, const struct end *rx)
{
	uint8_t want[SPACE] = { 0 };

	for (int i = 0; i < N_ALL; i++) {
		if (!tx->sent[i])
			continue;
		if (!tx->cancelled[i]) {
			assert_int_equal(tx->acked[i], 1);
			if (!msg_size[i])
				assert_int_equal(rx->empty_rx[i], 1);
		}
		memset(want + msg_base[i], tx->cancelled[i] ? 2 : 1, msg_size[i]);
	}
	for (uint32_t k = 0; k < SPACE; k++) {
		if (want[k] == 1)
			assert_int_equal(rx->rx_count[k], 1);
		else
			assert_true(rx->rx_count[k] <= (want[k] == 2));
		if (rx->rx_count[k])
			assert_int_equal(rx->rx[k], tx->src[k]);
	}
}

static uint64_t retx(const struct sl_tp_stats *s)
{
	return s->retx_rto + s->retx_sack + s->retx_tlp + s->retx_path;
}

/* Counters that must hold exactly in any run where nothing in flight was cancelled. */
static void check_stats(const struct end *tx, const struct end *rx)
{
	const struct sl_tp_stats *ts = sl_tp_get_stats(tx->tp), *rs = sl_tp_get_stats(rx->tp);
	uint64_t packets = 0, bytes = 0;

	for (int i = 0; i < N_ALL; i++) {
		if (tx->sent[i] && !tx->cancelled[i]) {
			packets += packets_of(msg_size[i]);
			bytes += msg_size[i];
		}
	}
	assert_int_equal(ts->data_tx - retx(ts) - ts->held_resent, packets); /* PSNs used */
	assert_int_equal(rs->data_rx, packets);
	assert_int_equal(rs->bytes_rx, bytes);
	assert_true(ts->bytes_tx >= bytes);
	assert_int_equal(rs->rx_out_of_window, 0);
	assert_int_equal(rs->rx_void, 0);
	assert_int_equal(ts->flows_dead, 0);
	/* all acknowledged: no path keeps a load */
	struct sl_tp_path_info pi;
	for (unsigned i = 0; sl_tp_path_info(tx->tp, rx->node, i, &pi) == 0; i++)
		assert_int_equal(pi.in_flight, 0);
}

static void exchange(const struct setup *s, struct sl_tp_stats out[2])
{
	struct harness *hs = harness_new(s);

	for (int i = 0; i < N_MAIN; i++) {
		send_msg(&hs->a, i);
		send_msg(&hs->b, i);
	}
	run_to_completion(hs);
	check_received(&hs->a, &hs->b);
	check_received(&hs->b, &hs->a);
	check_stats(&hs->a, &hs->b);
	check_stats(&hs->b, &hs->a);
	out[0] = *sl_tp_get_stats(hs->a.tp);
	out[1] = *sl_tp_get_stats(hs->b.tp);
	harness_free(hs);
}

static void test_clean_link(void **state)
{
	(void)state;
	for (int crc = 0; crc < 3; crc++) {
		struct setup s = { .crc = crc == 1, .port_crc = crc == 2 };
		struct sl_tp_stats st[2];
		exchange(&s, st);
		for (int i = 0; i < 2; i++) {
			assert_int_equal(retx(&st[i]), 0);
			assert_int_equal(st[i].rx_dup + st[i].rx_malformed + st[i].rx_foreign, 0);
			assert_int_equal(st[i].ack_rx, st[1 - i].ack_tx); /* nothing lost */
		}
	}
}

/* A pass does not poll a port that says it has nothing (sl_port_rx_idle,
 * the shm mesh's ports): frames wait there until it says otherwise. */
static void test_idle_port_not_polled(void **state)
{
	static const _Atomic uint32_t posted;
	static const uint32_t taken;
	struct setup s = { 0 };
	struct harness *hs = harness_new(&s);

	(void)state;
	hs->pb->rx_posted = &posted; /* b's port says idle, however much a sends */
	hs->pb->rx_taken = &taken;
	send_msg(&hs->a, 0);
	for (int i = 0; i < 20; i++)
		round_once(hs);
	assert_int_equal(sl_tp_get_stats(hs->b.tp)->data_rx, 0);
	hs->pb->rx_posted = NULL; /* polled again */
	run_to_completion(hs);
	check_received(&hs->a, &hs->b);
	harness_free(hs);
}

struct fault_case {
	double drop, dup, reorder, corrupt;
};

static const struct fault_case fault_cases[] = {
	{ .drop = 0.1 }, { .drop = 0.3 }, { .dup = 0.2 }, { .reorder = 0.3 }, { .corrupt = 0.05 },
	{ .drop = 0.1, .dup = 0.2, .reorder = 0.3, .corrupt = 0.05 },
	{ .drop = 0.3, .dup = 0.2, .reorder = 0.3, .corrupt = 0.05 },
};

static void test_faults(void **state)
{
	(void)state;
	for (size_t c = 0; c < sizeof(fault_cases) / sizeof(fault_cases[0]); c++) {
		const struct fault_case *fc = &fault_cases[c];
		for (uint64_t seed = 1; seed <= 6; seed++) {
			struct setup s = { .crc = true,
					   .faults = { fc->drop, fc->dup, fc->reorder, fc->corrupt, seed } };
			struct sl_tp_stats st[2];
			exchange(&s, st);
			uint64_t dups = st[0].rx_dup + st[1].rx_dup;
			uint64_t malformed = st[0].rx_malformed + st[1].rx_malformed;
			uint64_t retxs = retx(&st[0]) + retx(&st[1]);
			assert_true(fc->dup == 0 || dups > 0);
			assert_true(fc->drop == 0 || retxs > 0);
			assert_true((fc->corrupt > 0) == (malformed > 0));
		}
	}
}

/* The fault port (what sluiced wraps its links in) under every fault at
 * once, the CRC asked for by the ports: exact delivery, and the receivers'
 * counters explained by what the injectors did. */
static void test_fault_port_link(void **state)
{
	(void)state;
	struct setup s = { .port_crc = true,
			   .wire = "drop:0.05,reorder:16,dup:0.03,corrupt:0.05,delay:20us,seed:9" };
	struct harness *hs = harness_new(&s);
	struct sl_fault_counters inj = { 0 };

	for (int i = 0; i < N_MAIN; i++) {
		send_msg(&hs->a, i);
		send_msg(&hs->b, i);
	}
	run_to_completion(hs);
	check_received(&hs->a, &hs->b);
	check_received(&hs->b, &hs->a);
	check_stats(&hs->a, &hs->b);
	check_stats(&hs->b, &hs->a);
	const struct sl_tp_stats *sa = sl_tp_get_stats(hs->a.tp), *sb = sl_tp_get_stats(hs->b.tp);
	for (int i = 0; i < 2; i++) {
		const struct sl_fault_counters *c = sl_fault_port_counters(i ? hs->fb : hs->fa);
		inj.dropped_data += c->dropped_data;
		inj.corrupted += c->corrupted;
		inj.corrupted_covered += c->corrupted_covered;
		inj.duplicated += c->duplicated;
	}
	assert_true(inj.dropped_data > 0 && inj.corrupted > 0 && inj.duplicated > 0);
	assert_true(retx(sa) + retx(sb) >= inj.dropped_data);
	uint64_t malformed = sa->rx_malformed + sb->rx_malformed;
	assert_true(malformed >= inj.corrupted_covered && malformed <= inj.corrupted);
	assert_true(sa->rx_bad_crc + sb->rx_bad_crc > 0);
	harness_free(hs);
}

static void test_replays_from_seed(void **state)
{
	(void)state;
	struct setup s = { .crc = true, .faults = { 0.2, 0.1, 0.2, 0.02, 42 } };
	struct sl_tp_stats first[2], second[2];

	exchange(&s, first);
	exchange(&s, second);
	assert_memory_equal(first, second, sizeof(first));
}

/* Neither loss recovery nor a path's death came of what the receiver
 * refused or held: no retransmission, no duplicate, and each refused packet
 * went again exactly once, when the window reopened. */
static void check_held_not_lost(const struct end *tx, const struct end *rx)
{
	const struct sl_tp_stats *ts = sl_tp_get_stats(tx->tp), *rs = sl_tp_get_stats(rx->tp);

	assert_int_equal(retx(ts), 0);
	assert_int_equal(ts->path_deaths, 0);
	assert_int_equal(rs->rx_dup, 0);
	assert_int_equal(ts->held_resent, rs->rx_retry);
}

/* Every other packet refused once (SL_DELIVER_RETRY), those after it taken
 * (SACKed above a held one), the engine taking packets again after each
 * poll: each is delivered once, a refused one sent twice. */
static void test_retry_then_deliver_once(void **state)
{
	(void)state;
	struct setup s = { 0 };
	struct harness *hs = harness_new(&s);
	uint64_t refused = 0;

	hs->b.refuse_first = true;
	for (int i = 0; i < N_MAIN; i++) {
		send_msg(&hs->a, i);
		for (uint32_t k = 0; k < packets_of(msg_size[i]); k++)
			refused += (msg_base[i] / P + k) % 2 == 0;
	}
	run_to_completion(hs);
	check_received(&hs->a, &hs->b);
	check_stats(&hs->a, &hs->b);
	assert_int_equal(sl_tp_get_stats(hs->b.tp)->rx_retry, refused);
	check_held_not_lost(&hs->a, &hs->b);
	harness_free(hs);
}

/* A receiver far slower than its sender, with room for less than a window:
 * it holds the sender's window (HOLD), refuses what still comes when full
 * (RETRY), and reopens as it drains, many times over. */
static struct harness *slow_receiver_run(const struct setup *s)
{
	struct harness *hs = harness_new(s);

	hs->b.cap = WIN * 2 / 3;
	hs->b.every = 50;
	for (int i = 0; i < N_MAIN; i++)
		send_msg(&hs->a, i);
	run_to_completion(hs);
	check_received(&hs->a, &hs->b);
	check_stats(&hs->a, &hs->b);
	return hs;
}

static void test_slow_receiver_holds_the_window(void **state)
{
	(void)state;
	struct setup s = { 0 };
	struct harness *hs = slow_receiver_run(&s);
	const struct sl_tp_stats *sb = sl_tp_get_stats(hs->b.tp);

	check_held_not_lost(&hs->a, &hs->b);
	assert_true(sb->holds > 1 && sb->rx_retry > 0);
	harness_free(hs);
}

/* The same over a link that loses, duplicates and reorders: what was lost
 * is recovered, what was held waits, and the counts all add up. */
static void test_slow_receiver_under_faults(void **state)
{
	(void)state;
	for (uint64_t seed = 1; seed <= 6; seed++) {
		struct setup s = { .crc = true, .faults = { .drop = 0.2, .dup = 0.1, .reorder = 0.3, .seed = seed } };
		struct harness *hs = slow_receiver_run(&s);
		assert_true(sl_tp_get_stats(hs->b.tp)->holds > 0);
		harness_free(hs);
	}
}

/* Run rounds with b's engine consuming nothing, for ns of fake time. */
static void stall_receiver(struct harness *hs, uint64_t ns)
{
	uint64_t until = hs->clock.ns + ns;
	uint32_t every = hs->b.every;

	hs->b.every = UINT32_MAX;
	while (hs->clock.ns < until)
		round_once(hs);
	hs->b.every = every;
}

/* A receiver that stays full for three times dead_ns: its sender probes it
 * ever more rarely and does not declare it dead; the data all arrives once
 * it drains. */
static void test_long_hold_is_not_death(void **state)
{
	(void)state;
	const uint64_t dead_ns = 20000000;
	struct setup s = { .dead_ns = dead_ns };
	struct harness *hs = harness_new(&s);
	const struct sl_tp_stats *sa = sl_tp_get_stats(hs->a.tp);
	struct sl_tp_flow_info fi;

	hs->b.cap = 8;
	hs->b.every = 10;
	send_msg(&hs->a, 7);
	stall_receiver(hs, 3 * dead_ns);
	assert_int_equal(sl_tp_flow_info(hs->a.tp, NODE_B, &fi), 0);
	assert_int_equal(fi.credit, 0);
	/* a probe an RTO after the hold, doubling to rto_max (5 ms): about 16 in 60 ms */
	assert_true(sa->window_probes >= 8 && sa->window_probes <= 20);
	run_to_completion(hs);
	check_received(&hs->a, &hs->b);
	check_stats(&hs->a, &hs->b);
	check_held_not_lost(&hs->a, &hs->b);
	harness_free(hs);
}

/* Silence is a peer that sends nothing, not one whose packets get no ACK
 * progress through: every frame to b is lost while b goes on sending its
 * own message (resent, as a's ACKs are lost too), and sl_tp_node_silent_ns
 * stays within b's resend intervals (bare31 counted from the last ACK
 * progress alone, and named a live peer "stopped answering" in the
 * 12-rank ring test under load).  A peer whose transport is not polled
 * at all is silent for as long. */
static void test_a_peer_heard_from_is_not_silent(void **state)
{
	(void)state;
	const uint64_t span_ns = 60000000; /* 12 rto_max */
	struct setup s = { .dead_ns = 400000000 };
	struct harness *hs = harness_new(&s);
	struct sl_pkt pkts[DEPTH];
	uint64_t silent, start;

	send_msg(&hs->a, 5);
	send_msg(&hs->b, 6);
	for (start = hs->clock.ns; hs->clock.ns < start + span_ns; hs->clock.ns += STEP_NS) {
		sl_tp_poll(hs->a.tp);
		uint16_t n = hs->pb->ops->rx_burst(hs->pb, pkts, DEPTH); /* a's frames to b: lost */
		hs->pb->ops->free(hs->pb, pkts, n);
		sl_tp_poll(hs->b.tp);
	}
	silent = sl_tp_node_silent_ns(hs->a.tp, NODE_B);
	if (silent == 0 || silent > span_ns / 4)
		fail_msg("b sent all along, its ACKs lost for %llu ms: silent %llu us, want above 0 and at most %llu",
			 (unsigned long long)(span_ns / 1000000), (unsigned long long)(silent / 1000),
			 (unsigned long long)(span_ns / 4000));
	run_to_completion(hs);
	assert_int_equal(sl_tp_node_silent_ns(hs->a.tp, NODE_B), 0); /* nothing waits */
	send_msg(&hs->a, 7);
	for (start = hs->clock.ns; hs->clock.ns < start + span_ns; hs->clock.ns += STEP_NS)
		sl_tp_poll(hs->a.tp); /* b's transport is never polled */
	assert_true(sl_tp_node_silent_ns(hs->a.tp, NODE_B) >= span_ns - STEP_NS);
	run_to_completion(hs);
	harness_free(hs);
}

/* A sender at a window its receiver holds waits for the receiver's engine,
 * not for credit: each of its polls with data queued counts as a held wait,
 * none as a credit stall (a 3-rank gather leaf far ahead of its root counted
 * a credit stall per call, all of them held).  A receiver that grants less
 * than the window, and holds nothing, stalls its sender for credit. */
static void test_held_waits_are_not_credit_stalls(void **state)
{
	(void)state;
	struct setup s = { 0 };
	struct harness *hs = harness_new(&s);
	const struct sl_tp_stats *sa = sl_tp_get_stats(hs->a.tp);
	struct sl_tp_flow_info fi;

	hs->b.cap = 8;
	hs->b.every = UINT32_MAX; /* b's engine never drains: it holds a's window */
	send_msg(&hs->a, 7); /* 73 packets: most of them wait */
	for (int i = 0; i < 100; i++)
		round_once(hs);
	assert_int_equal(sl_tp_flow_info(hs->a.tp, NODE_B, &fi), 0);
	assert_int_equal(fi.credit, 0);
	uint64_t waits = sa->held_waits;
	for (int i = 0; i < 100; i++)
		round_once(hs);
	if (sa->credit_stalls)
		fail_msg("a sender at a held window counted %llu credit stalls", (unsigned long long)sa->credit_stalls);
	assert_int_equal(sa->held_waits - waits, 100); /* one a poll */
	hs->b.every = 1;
	run_to_completion(hs);
	check_received(&hs->a, &hs->b);
	harness_free(hs);

	s.rx_credit = 4; /* b grants a 4 packets of its window of WIN */
	hs = harness_new(&s);
	sa = sl_tp_get_stats(hs->a.tp);
	send_msg(&hs->a, 7);
	run_to_completion(hs);
	check_received(&hs->a, &hs->b);
	assert_true(sa->credit_stalls > 0);
	assert_int_equal(sa->held_waits, 0);
	harness_free(hs);
}

/* The ACK that reopens a held window is lost: the sender's window probe
 * draws another. */
static void test_lost_reopening_found_by_probe(void **state)
{
	(void)state;
	struct setup s = { 0 };
	struct harness *hs = harness_new(&s);
	struct sl_pkt pkts[DEPTH];

	hs->b.cap = 8;
	hs->b.every = 10;
	send_msg(&hs->a, 7);
	stall_receiver(hs, 100000);
	assert_true(hs->b.holding);
	uint64_t probes = sl_tp_get_stats(hs->a.tp)->window_probes;
	hs->b.queued = 0;
	hs->b.holding = false;
	sl_tp_resume(hs->b.tp);
	sl_tp_poll(hs->b.tp);
	uint16_t n = hs->pa->ops->rx_burst(hs->pa, pkts, DEPTH);
	assert_int_equal(n, 1); /* the reopening ACK, and nothing else */
	hs->pa->ops->free(hs->pa, pkts, n);
	run_to_completion(hs);
	check_received(&hs->a, &hs->b);
	check_stats(&hs->a, &hs->b);
	check_held_not_lost(&hs->a, &hs->b);
	assert_true(sl_tp_get_stats(hs->a.tp)->window_probes > probes);
	harness_free(hs);
}

/* A flow whose message is all cut, and whose packets the receiver then held,
 * has work with nothing queued: the pass that reads the reopening ACK sends
 * them again (tp_send_data visits only flows with work), not a probe later. */
static void test_held_packets_go_with_nothing_queued(void **state)
{
	(void)state;
	struct setup s = { 0 };
	struct harness *hs = harness_new(&s);
	struct sl_tp_flow_info fi;

	hs->b.cap = 4;
	hs->b.every = 10;
	send_msg(&hs->a, 6); /* 11 packets: within the window and the first credit */
	stall_receiver(hs, 100000);
	assert_false(hs->a.msgs[6].queued);
	assert_int_equal(sl_tp_flow_info(hs->a.tp, NODE_B, &fi), 0);
	assert_true(fi.held > 0);
	hs->b.queued = 0;
	hs->b.holding = false;
	sl_tp_resume(hs->b.tp);
	sl_tp_poll(hs->b.tp); /* the reopening ACK */
	uint64_t resent = sl_tp_get_stats(hs->a.tp)->held_resent;
	sl_tp_poll(hs->a.tp);
	assert_true(sl_tp_get_stats(hs->a.tp)->held_resent > resent);
	run_to_completion(hs);
	check_received(&hs->a, &hs->b);
	check_held_not_lost(&hs->a, &hs->b);
	harness_free(hs);
}

/* Bytes of message i that reached rx. */
static uint32_t bytes_of(const struct end *rx, int i)
{
	uint32_t got = 0;

	for (uint32_t k = 0; k < msg_size[i]; k++)
		got += rx->rx_count[msg_base[i] + k];
	return got;
}

/* The receiver parks a large call at its first packet (sl_tp_park): the
 * sender sends what it had out of it, then the calls before it and the
 * messages not in call order (that one first-come call would otherwise
 * keep behind it), and holds back the rest of it.  The ACK that lifts the
 * park is lost: the sender's probe finds the park gone, and it all arrives
 * once, bytes and counters exact. */
static void test_parked_call_waits_and_the_rest_goes(void **state)
{
	(void)state;
	struct setup s = { 0 };
	struct harness *hs = harness_new(&s);
	const struct sl_tp_stats *sa = sl_tp_get_stats(hs->a.tp);
	struct sl_pkt pkts[DEPTH];

	hs->a.msgs[7].order = hs->a.msgs[8].order = hs->a.msgs[6].order = SL_TP_CALLS;
	hs->b.park_seq = 7;
	send_msg(&hs->a, 7);
	send_msg(&hs->a, 8); /* a call after it: held back as well */
	send_msg(&hs->a, 6); /* a call before it (posted there) */
	send_msg(&hs->a, 5); /* not in call order (a point-to-point call, a control message) */
	for (int i = 0; i < 2000; i++)
		round_once(hs);
	assert_int_equal(hs->a.acked[6], 1);
	assert_int_equal(hs->a.acked[5], 1);
	assert_int_equal(hs->a.acked[7] + hs->a.acked[8], 0);
	if (bytes_of(&hs->b, 7) > (WIN + 1) * P)
		fail_msg("%u bytes of the parked call arrived: more than the sender had out", bytes_of(&hs->b, 7));
	assert_int_equal(sl_tp_get_stats(hs->b.tp)->parks, 1);
	hs->b.park_seq = 0;
	sl_tp_unpark(hs->b.tp, NODE_A, COMM, SL_TP_CALLS);
	sl_tp_poll(hs->b.tp);
	uint16_t n = hs->pa->ops->rx_burst(hs->pa, pkts, DEPTH);
	assert_int_equal(n, 1); /* the ACK that lifts the park: lost */
	hs->pa->ops->free(hs->pa, pkts, n);
	uint64_t probes = sa->window_probes;
	run_to_completion(hs);
	assert_true(sa->window_probes > probes);
	check_received(&hs->a, &hs->b);
	harness_free(hs);
}

/* Put one frame onto the wire from port's side, as if from the network. */
static void inject(struct sl_port *port, const uint8_t *frame, uint32_t len)
{
	struct sl_pkt pkt;

	assert_int_equal(port->ops->alloc(port, &pkt, 1), 1);
	memcpy(pkt.data, frame, len);
	pkt.len = len;
	assert_int_equal(port->ops->tx_burst(port, &pkt, 1), 1);
}

/* Take the one frame on its way to a (b's ACK), parsed, to put it back later. */
static uint32_t take_ack_to_a(struct harness *hs, uint8_t *frame, struct sl_hdr *h, struct sl_ack *ack)
{
	struct sl_pkt pkt;
	const uint8_t *payload;

	assert_int_equal(hs->pa->ops->rx_burst(hs->pa, &pkt, 1), 1);
	assert_int_equal(sl_wire_parse(pkt.data, pkt.len, h, &payload, ack), SL_PARSE_OK);
	assert_int_equal(h->type, SL_T_ACK);
	uint32_t len = pkt.len;
	memcpy(frame, pkt.data, len);
	hs->pa->ops->free(hs->pa, &pkt, 1);
	return len;
}

/* Two calls on two communicators parked on one flow at once (a rank waits
 * on a third while the peer posted both before it, coll_run.c
 * park_held_senders): an ACK of its own names each, both listing the two;
 * each park holds back its own call, and the rest goes.  The ACK that
 * lifts the first is lost: the probe finds it, and the second park stays
 * until lifted in turn; its call cancelled meanwhile, the next message goes. */
static void test_two_parks_on_one_flow(void **state)
{
	(void)state;
	struct setup s = { 0 };
	struct harness *hs = harness_new(&s);
	const struct sl_tp_stats *sa = sl_tp_get_stats(hs->a.tp);
	uint8_t frames[2][MAX_FRAME];
	uint32_t lens[2], named = 0;
	struct sl_pkt pkts[DEPTH];
	struct sl_hdr h;
	struct sl_ack ack;

	for (int i = 5; i <= 8; i++)
		hs->a.msgs[i].order = i != 5 ? SL_TP_CALLS : SL_TP_UNORDERED; /* 5: not in call order */
	hs->a.msgs[7].hdr.comm = COMM2;
	hs->a.msgs[8].hdr.comm = COMM3; /* a call posted there: it goes */
	assert_true(sl_tp_park(hs->b.tp, NODE_A, COMM, SL_TP_CALLS, 6));
	assert_true(sl_tp_park(hs->b.tp, NODE_A, COMM2, SL_TP_CALLS, 7));
	sl_tp_poll(hs->b.tp);
	for (int i = 0; i < 2; i++) {
		lens[i] = take_ack_to_a(hs, frames[i], &h, &ack);
		assert_true(h.flags & SL_F_PARK);
		assert_int_equal(ack.parks & SL_ACK_PARK_SLOTS, 3);
		/* four parks or fewer: the ACK a peer from before session 33 sent and reads */
		assert_false(h.flags & SL_F_PARK_MORE);
		assert_true(h.offset == 0 && h.step == 0 && h.count == 0);
		named |= h.comm == COMM && h.seq == 6 ? 1 : h.comm == COMM2 && h.seq == 7 ? 2 : 4;
	}
	if (named != 3)
		fail_msg("the two ACKs named %s, want communicator %#x #6 and %#x #7 once each",
			 named & 4 ? "another park" : "one park twice", COMM, COMM2);
	for (int i = 0; i < 2; i++)
		inject(hs->pb, frames[i], lens[i]);
	send_msg(&hs->a, 7);
	send_msg(&hs->a, 6);
	send_msg(&hs->a, 8);
	send_msg(&hs->a, 5);
	for (int i = 0; i < 4000; i++)
		round_once(hs);
	assert_int_equal(sl_tp_get_stats(hs->b.tp)->parks, 2);
	assert_int_equal(hs->a.acked[8] + hs->a.acked[5], 2);
	if (hs->a.acked[7] + hs->a.acked[6] || bytes_of(&hs->b, 7) + bytes_of(&hs->b, 6))
		fail_msg("%u bytes of the parked calls arrived (7 acknowledged: %u, 6: %u): a park was let go",
			 bytes_of(&hs->b, 7) + bytes_of(&hs->b, 6), hs->a.acked[7], hs->a.acked[6]);
	sl_tp_unpark(hs->b.tp, NODE_A, COMM2, SL_TP_CALLS);
	sl_tp_poll(hs->b.tp);
	uint16_t n = hs->pa->ops->rx_burst(hs->pa, pkts, DEPTH);
	assert_int_equal(n, 1); /* the ACK that lifts 7's park: lost */
	hs->pa->ops->free(hs->pa, pkts, n);
	uint64_t probes = sa->window_probes;
	for (int i = 0; i < MAX_ROUNDS && !hs->a.acked[7]; i++)
		round_once(hs);
	assert_int_equal(hs->a.acked[7], 1);
	assert_true(sa->window_probes > probes);
	for (int i = 0; i < 4000; i++)
		round_once(hs);
	if (hs->a.acked[6] || bytes_of(&hs->b, 6))
		fail_msg("%u bytes of message 6 arrived while its communicator is still parked", bytes_of(&hs->b, 6));
	/* the parked message the sender walked past last goes: what it sends next still goes */
	sl_tp_cancel(hs->a.tp, &hs->a.msgs[6]);
	hs->a.cancelled[6] = true;
	send_msg(&hs->a, 4);
	for (int i = 0; i < MAX_ROUNDS && !hs->a.acked[4]; i++)
		round_once(hs);
	assert_int_equal(hs->a.acked[4], 1);
	sl_tp_unpark(hs->b.tp, NODE_A, COMM, SL_TP_CALLS);
	run_to_completion(hs);
	check_received(&hs->a, &hs->b);
	/* the bound: SL_PARKS_MAX communicators; a park of one of them again moves its seq */
	for (uint32_t c = 0; c < SL_PARKS_MAX; c++)
		assert_true(sl_tp_park(hs->b.tp, NODE_A, COMM + c, SL_TP_CALLS, 0));
	assert_true(sl_tp_park(hs->b.tp, NODE_A, COMM, SL_TP_CALLS, 1));
	if (sl_tp_park(hs->b.tp, NODE_A, COMM + SL_PARKS_MAX, SL_TP_CALLS, 0))
		fail_msg("a flow took a park past its SL_PARKS_MAX (%d)", SL_PARKS_MAX);
	harness_free(hs);
}

/* Eight communicators parked on one flow at once (a rank waits on a call of
 * a ninth, which the peer posted after all eight): the first four listed
 * and named in sl_ack.parks, as a peer from before session 33 reads them,
 * the rest under SL_F_PARK_MORE.  The pass's ACKs list every slot and name
 * each once (message i's communicator takes slot i - 1); the parked calls
 * wait, 0 bytes, while a message not in call order goes; lifted one at a
 * time, later slots before earlier ones, each call comes alone while the
 * others stay parked. */
static void test_eight_parks_on_one_flow(void **state)
{
	(void)state;
	static const int lift[] = { 6, 2, 8, 5, 1, 7, 3, 4 };
	struct setup s = { 0 };
	struct harness *hs = harness_new(&s);
	struct sl_pkt pkts[DEPTH];
	const uint8_t *payload;
	uint32_t named = 0, lifted = 0;
	uint16_t n;
	struct sl_hdr h;
	struct sl_ack ack;

	for (int i = 1; i <= 8; i++) {
		hs->a.msgs[i].order = SL_TP_CALLS;
		hs->a.msgs[i].hdr.comm = COMM_N(i);
		assert_true(sl_tp_park(hs->b.tp, NODE_A, COMM_N(i), SL_TP_CALLS, (uint32_t)i));
	}
	sl_tp_poll(hs->b.tp);
	n = hs->pa->ops->rx_burst(hs->pa, pkts, DEPTH);
	for (uint16_t k = 0; k < n; k++) {
		assert_int_equal(sl_wire_parse(pkts[k].data, pkts[k].len, &h, &payload, &ack), SL_PARSE_OK);
		unsigned low = ack.parks >> SL_ACK_PARK_NAMED_SHIFT;
		if (h.type != SL_T_ACK || !(h.flags & SL_F_PARK) || !(h.flags & SL_F_PARK_MORE) ||
		    (ack.parks & SL_ACK_PARK_SLOTS) != 0xf || h.offset != 0xf0 || h.comm != COMM_N(low + 1) ||
		    h.seq != low + 1 || h.step < 4 || h.step > 7 ||
		    h.count != ((uint64_t)COMM_N(h.step + 1) << 32 | (h.step + 1)))
			fail_msg("ACK %u: flags %#x, parks %#x, comm %#x #%u, offset %#llx, step %u, count %#llx: want "
				 "slots 0-3 in sl_ack.parks naming one, 4-7 in offset, step naming one", k, h.flags,
				 ack.parks, h.comm, h.seq, (unsigned long long)h.offset, h.step,
				 (unsigned long long)h.count);
		named |= 1u << low | 1u << h.step;
	}
	if (n != 4 || named != 0xff)
		fail_msg("the pass's %u ACKs named slots %#x: want four naming each of the eight once", n, named);
	for (uint16_t k = 0; k < n; k++)
		inject(hs->pb, pkts[k].data, pkts[k].len);
	hs->pa->ops->free(hs->pa, pkts, n);
	for (int i = 8; i >= 0; i--)
		send_msg(&hs->a, i); /* 0: not in call order */
	for (int i = 0; i < 4000; i++)
		round_once(hs);
	assert_int_equal(hs->a.acked[0], 1);
	for (int k = 0; k < 8; k++) {
		for (int i = 1; i <= 8; i++)
			if (!(lifted >> i & 1) && (hs->a.acked[i] || bytes_of(&hs->b, i)))
				fail_msg("%u bytes of message %d arrived (acknowledged: %u) while its communicator "
					 "(slot %d) is parked, after %d lifted",
					 bytes_of(&hs->b, i), i, hs->a.acked[i], i - 1, k);
		sl_tp_unpark(hs->b.tp, NODE_A, COMM_N(lift[k]), SL_TP_CALLS);
		lifted |= 1u << lift[k];
		for (int r = 0; r < MAX_ROUNDS && !hs->a.acked[lift[k]]; r++)
			round_once(hs);
		assert_int_equal(hs->a.acked[lift[k]], 1);
	}
	run_to_completion(hs);
	check_received(&hs->a, &hs->b);
	assert_int_equal(sl_tp_get_stats(hs->b.tp)->parks, 8);
	harness_free(hs);
}

/* A send parked by the pair's seq (a rank waits on a call its peer posted
 * after a large send whose recv this rank has not posted): only once the
 * sender said it parks sends (SL_F_SENDS_PARK on a send's DATA), in a slot
 * past the first four, named with SL_F_SENDS_PARK (a sender from before
 * would take it for a park of calls).  The send waits, 0 bytes, while a
 * call of the same communicator numbered past it and an earlier send go;
 * lifted, it comes.  Parked again, the calls of SL_PARKS_MAX communicators
 * take every slot, the send's last: it comes, as from an older sender. */
static void test_a_parked_send_waits_for_its_recv(void **state)
{
	(void)state;
	struct setup s = { 0 };
	struct harness *hs = harness_new(&s);
	uint8_t frame[MAX_FRAME];
	uint32_t len;
	struct sl_hdr h;
	struct sl_ack ack;

	hs->a.msgs[4].order = hs->a.msgs[5].order = hs->a.msgs[6].order = hs->a.msgs[7].order = SL_TP_SENDS;
	hs->a.msgs[8].order = SL_TP_CALLS; /* past the send park's seq: it is not one of sends */
	send_msg(&hs->a, 0); /* not a send: says nothing of parks */
	for (int i = 0; i < MAX_ROUNDS && !hs->a.acked[0]; i++)
		round_once(hs);
	assert_int_equal(hs->a.acked[0], 1);
	if (sl_tp_park(hs->b.tp, NODE_A, COMM, SL_TP_SENDS, 7))
		fail_msg("a flow parked the sends of a sender that did not say it parks them");
	send_msg(&hs->a, 4);
	for (int i = 0; i < MAX_ROUNDS && !hs->a.acked[4]; i++)
		round_once(hs);
	assert_true(sl_tp_park(hs->b.tp, NODE_A, COMM, SL_TP_SENDS, 7));
	sl_tp_poll(hs->b.tp);
	len = take_ack_to_a(hs, frame, &h, &ack);
	if ((h.flags & (SL_F_PARK | SL_F_PARK_MORE | SL_F_SENDS_PARK)) != (SL_F_PARK_MORE | SL_F_SENDS_PARK) ||
	    h.step != SL_PARKS_LOW || h.offset != 1ull << SL_PARKS_LOW || h.count != ((uint64_t)COMM << 32 | 7))
		fail_msg("the send park's ACK: flags %#x, offset %#llx, step %u, count %#llx: want it alone in slot "
			 "%d under SL_F_PARK_MORE | SL_F_SENDS_PARK", h.flags, (unsigned long long)h.offset, h.step,
			 (unsigned long long)h.count, SL_PARKS_LOW);
	inject(hs->pb, frame, len);
	send_msg(&hs->a, 7);
	send_msg(&hs->a, 8);
	send_msg(&hs->a, 6);
	for (int i = 0; i < 4000; i++)
		round_once(hs);
	if (hs->a.acked[8] + hs->a.acked[6] != 2)
		fail_msg("the call past the park (acknowledged: %u) or the send before it (%u) did not go",
			 hs->a.acked[8], hs->a.acked[6]);
	if (hs->a.acked[7] || bytes_of(&hs->b, 7))
		fail_msg("%u bytes of the parked send arrived (acknowledged: %u)", bytes_of(&hs->b, 7), hs->a.acked[7]);
	sl_tp_unpark(hs->b.tp, NODE_A, COMM, SL_TP_SENDS);
	for (int i = 0; i < MAX_ROUNDS && !hs->a.acked[7]; i++)
		round_once(hs);
	assert_int_equal(hs->a.acked[7], 1);
	/* parked again; the calls of every communicator an engine has take its slot */
	assert_true(sl_tp_park(hs->b.tp, NODE_A, COMM, SL_TP_SENDS, 5));
	for (int i = 0; i < 10; i++)
		round_once(hs); /* its ACK reaches the sender before the send: else what it had out comes */
	send_msg(&hs->a, 5);
	for (int i = 0; i < 4000; i++)
		round_once(hs);
	if (hs->a.acked[5] || bytes_of(&hs->b, 5))
		fail_msg("%u bytes of the send parked again arrived", bytes_of(&hs->b, 5));
	for (uint32_t c = 1; c <= SL_PARKS_MAX; c++)
		if (!sl_tp_park(hs->b.tp, NODE_A, COMM_N(c), SL_TP_CALLS, 0))
			fail_msg("the park of calls %u of %d was refused: a park of sends kept its slot", c, SL_PARKS_MAX);
	if (sl_tp_park(hs->b.tp, NODE_A, COMM, SL_TP_SENDS, 5))
		fail_msg("a park of sends took a slot while the calls of %d communicators hold them all", SL_PARKS_MAX);
	for (int i = 0; i < MAX_ROUNDS && !hs->a.acked[5]; i++)
		round_once(hs);
	assert_int_equal(hs->a.acked[5], 1);
	run_to_completion(hs);
	check_received(&hs->a, &hs->b);
	harness_free(hs);
}

/* A hold ACK that arrives after the ACK that reopened the window (reordered,
 * or late on a slower path), saying nothing newer: the sender keeps to the
 * reopening and sends on at once, not after its next window probe. */
static void test_stale_hold_after_reopening(void **state)
{
	(void)state;
	struct setup s = { 0 };
	struct harness *hs = harness_new(&s);
	const struct sl_tp_stats *sa = sl_tp_get_stats(hs->a.tp);
	uint8_t hold[MAX_FRAME], reopen[MAX_FRAME];
	struct sl_hdr hh, rh;
	struct sl_ack ha, ra;
	struct sl_tp_flow_info fi;

	hs->b.cap = 8;
	hs->b.every = 10;
	send_msg(&hs->a, 7);
	stall_receiver(hs, 100000);
	assert_true(hs->b.holding);
	/* a probes its held window; b's answer, a hold, is kept back */
	uint64_t probes = sa->window_probes;
	while (sa->window_probes == probes) {
		sl_tp_poll(hs->a.tp);
		hs->clock.ns += STEP_NS;
	}
	sl_tp_poll(hs->b.tp);
	uint32_t hold_len = take_ack_to_a(hs, hold, &hh, &ha);
	assert_true(hh.flags & SL_F_HOLD);
	/* b's engine empties and takes whatever comes from now on */
	hs->b.cap = 0;
	hs->b.holding = false;
	sl_tp_resume(hs->b.tp);
	sl_tp_poll(hs->b.tp);
	uint32_t reopen_len = take_ack_to_a(hs, reopen, &rh, &ra);
	assert_false(rh.flags & SL_F_HOLD);
	assert_int_equal(ra.cum_psn, ha.cum_psn); /* only the order tells them apart */
	inject(hs->pb, reopen, reopen_len);
	inject(hs->pb, hold, hold_len);
	sl_tp_poll(hs->a.tp);
	assert_int_equal(sl_tp_flow_info(hs->a.tp, NODE_B, &fi), 0);
	assert_int_equal(fi.held, 0); /* all sent again in that poll */
	probes = sa->window_probes;
	run_to_completion(hs);
	assert_int_equal(sa->window_probes, probes);
	check_received(&hs->a, &hs->b);
	check_stats(&hs->a, &hs->b);
	check_held_not_lost(&hs->a, &hs->b);
	harness_free(hs);
}

/*
 * The receiver holds the window, then dies (stops polling): the sender's
 * window probes go unanswered and the flow dies within dead_ns of the last
 * answer, whether held packets are out or only a message waits for the
 * window.  That message is queued after the hold has lasted twice dead_ns
 * (idle, so unprobed): the wait starts the dead clock, not the hold.
 */
static void peer_dies_while_held(bool packets_out)
{
	const uint64_t dead_ns = 20000000; /* 4 probes at rto_max (5 ms) */
	struct setup s = { .dead_ns = dead_ns };
	struct harness *hs = harness_new(&s);
	struct sl_tp_flow_info fi;
	int waiting = packets_out ? 7 : 8;

	hs->b.every = UINT32_MAX; /* b's engine never drains */
	hs->b.cap = packets_out ? 8 : 12; /* 73 packets against 8, or 11 all taken, the last 3 holding */
	send_msg(&hs->a, packets_out ? 7 : 6);
	while (hs->clock.ns < 1000000 + 2 * dead_ns)
		round_once(hs);
	assert_true(hs->b.holding);
	assert_int_equal(hs->a.dead_calls, 0);
	assert_int_equal(sl_tp_flow_info(hs->a.tp, NODE_B, &fi), 0);
	assert_int_equal(fi.credit, 0);
	assert_int_equal(fi.held > 0, packets_out);
	if (!packets_out)
		send_msg(&hs->a, 8);
	uint64_t gone = hs->clock.ns, probes = sl_tp_get_stats(hs->a.tp)->window_probes;
	while (hs->clock.ns < gone + 2 * dead_ns) {
		sl_tp_poll(hs->a.tp);
		hs->clock.ns += STEP_NS;
	}
	assert_int_equal(hs->a.dead_calls, 1);
	assert_true(hs->a.dead_at > gone + (packets_out ? 0 : dead_ns - STEP_NS));
	assert_true(hs->a.dead_at <= gone + dead_ns + 20000 + STEP_NS); /* one timer scan late at most */
	assert_true(sl_tp_get_stats(hs->a.tp)->window_probes > probes); /* asked, never answered */
	assert_int_equal(hs->a.acked[waiting], 0);
	assert_false(sl_tp_node_alive(hs->a.tp, NODE_B));
	harness_free(hs);
}

static void test_peer_dies_while_holding_packets(void **state)
{
	(void)state;
	peer_dies_while_held(true);
}

static void test_peer_dies_while_a_message_waits(void **state)
{
	(void)state;
	peer_dies_while_held(false);
}

static void test_dead_peer(void **state)
{
	(void)state;
	const uint64_t dead_ns = 2000000;
	struct setup s = { .dead_ns = dead_ns };
	struct harness *hs = harness_new(&s);
	uint64_t start = hs->clock.ns;

	send_msg(&hs->a, 6);
	send_msg(&hs->a, 7);
	/* b never polls: nothing is ever acknowledged */
	while (hs->clock.ns < start + 2 * dead_ns) {
		sl_tp_poll(hs->a.tp);
		hs->clock.ns += STEP_NS;
	}
	assert_int_equal(hs->a.dead_calls, 1);
	assert_true(hs->a.dead_at >= start + dead_ns);
	assert_true(hs->a.dead_at <= start + dead_ns + 20000 + STEP_NS); /* one timer scan late at most */
	assert_false(sl_tp_node_alive(hs->a.tp, NODE_B));
	assert_int_equal(sl_tp_send(hs->a.tp, &hs->a.msgs[0]), -1);
	assert_false(hs->a.msgs[7].queued);
	assert_int_equal(sl_tp_get_stats(hs->a.tp)->flows_dead, 1);
	/* b wakes up and acknowledges what it got: a dead flow calls nobody */
	for (int i = 0; i < 2000; i++)
		round_once(hs);
	assert_int_equal(hs->a.acked[6] + hs->a.acked[7], 0);
	assert_int_equal(hs->a.dead_calls, 1);
	assert_true(sl_tp_node_alive(hs->b.tp, NODE_A));
	harness_free(hs);
}

/* A last word (sl_tp_send_last) is delivered once, outside the stream:
 * nothing acknowledged for it, the stream's next packet still in order;
 * and it goes to a peer whose flow died (it may only be stopped), where
 * sl_tp_send refuses.  A message that is no control message does not go so. */
static void test_last_word_outside_the_stream(void **state)
{
	(void)state;
	const uint64_t dead_ns = 2000000;
	struct setup s = { .dead_ns = dead_ns };
	struct harness *hs = harness_new(&s);
	const struct sl_tp_stats *as = sl_tp_get_stats(hs->a.tp), *bs = sl_tp_get_stats(hs->b.tp);
	struct sl_tp_msg last = hs->a.msgs[6];
	uint64_t start;

	last.hdr.len = 16; /* one packet */
	last.src = hs->a.src + last.hdr.offset;
	assert_false(sl_tp_send_last(hs->a.tp, &last));
	assert_int_equal(as->last_refused, 1);
	last.hdr.flags = SL_F_CTRL;
	assert_true(sl_tp_send_last(hs->a.tp, &last));
	sl_tp_poll(hs->b.tp);
	assert_int_equal(bs->last_rx, 1);
	assert_int_equal(hs->b.rx_count[msg_base[6]], 1);
	assert_int_equal(bs->ack_tx, 0);
	send_msg(&hs->a, 7);
	for (int i = 0; i < 2000 && !hs->a.acked[7]; i++)
		round_once(hs);
	assert_int_equal(hs->a.acked[7], 1);
	assert_int_equal(bs->rx_dup + bs->rx_out_of_window, 0);
	send_msg(&hs->a, 8);
	start = hs->clock.ns;
	while (sl_tp_node_alive(hs->a.tp, NODE_B)) { /* b does not poll: the flow dies */
		assert_true(hs->clock.ns < start + 2 * dead_ns);
		sl_tp_poll(hs->a.tp);
		hs->clock.ns += STEP_NS;
	}
	assert_true(sl_tp_send_last(hs->a.tp, &last));
	assert_int_equal(as->last_tx, 2);
	sl_tp_poll(hs->b.tp);
	assert_int_equal(bs->last_rx, 2);
	assert_int_equal(hs->b.rx_count[msg_base[6]], 2);
	harness_free(hs);
}

/* A last word goes when a peer that stopped reading let ordinary frames
 * fill its port (the sender's window, then its retransmissions and probes
 * into a FIFO of 4): into the room the port keeps for last words, so that
 * the peer reads it once it runs again, though its sender has stopped.
 * Staged behind the refused frames, it was refused too and lost. */
static void test_last_word_past_a_full_ring(void **state)
{
	(void)state;
	struct setup s = { .depth = 4 };
	struct harness *hs = harness_new(&s);
	const struct sl_tp_stats *bs = sl_tp_get_stats(hs->b.tp);
	struct sl_tp_msg last = hs->a.msgs[6];
	uint64_t start = hs->clock.ns;

	last.hdr.len = 16;
	last.hdr.flags = SL_F_CTRL;
	send_msg(&hs->a, 7);
	while (hs->clock.ns < start + 10 * 200000) { /* 10 RTOs (rto_min) without b */
		sl_tp_poll(hs->a.tp);
		hs->clock.ns += STEP_NS;
	}
	assert_true(hs->pa->stats.tx_full > 0);
	for (int i = 0; i < 2; i++)
		if (!sl_tp_send_last(hs->a.tp, &last))
			fail_msg("last word %d refused by a full port (%llu frames refused before it)", i,
				 (unsigned long long)hs->pa->stats.tx_full);
	for (int i = 0; i < 100; i++) /* b runs again: the FIFO's frames, then the last words */
		sl_tp_poll(hs->b.tp);
	assert_int_equal(bs->last_rx, 2);
	assert_int_equal(hs->b.rx_count[msg_base[6]], 2);
	harness_free(hs);
}

/* A peer that does not read for many RTOs while the port's FIFO is full
 * (a memif peer descheduled): nothing is lost, so nothing goes again, and
 * no path dies; it all arrives once the peer reads. */
static void test_backed_up_port_is_not_loss(void **state)
{
	(void)state;
	struct setup s = { .depth = 1 };
	struct harness *hs = harness_new(&s);
	uint64_t start = hs->clock.ns;
	const struct sl_tp_stats *st = sl_tp_get_stats(hs->a.tp);

	send_msg(&hs->a, 5); /* 3 windows of packets, the FIFO holds 1 */
	while (hs->clock.ns < start + 10 * 200000) { /* 10 RTOs (rto_min) without b */
		sl_tp_poll(hs->a.tp);
		hs->clock.ns += STEP_NS;
	}
	assert_true(hs->pa->stats.tx_full > 0); /* the port refused frames all along */
	run_to_completion(hs);
	check_received(&hs->a, &hs->b);
	check_stats(&hs->a, &hs->b);
	assert_int_equal(retx(st), 0);
	assert_int_equal(st->path_deaths, 0);
	assert_int_equal(sl_tp_get_stats(hs->b.tp)->rx_dup, 0);
	harness_free(hs);
}

/* A peer silent for many RTOs (descheduled, or its engine busy faulting
 * in memory) with the sender's window out: the RTO doubles to rto_max and
 * then expires once per rto_max, each expiry one packet, not every packet
 * of the window as each one's own send time passes the capped RTO (one a
 * timer scan: a 2-rank 1 GiB all-to-all resent 64 packets within 1.4 ms
 * of each other, perf/ALGORITHMS.md, big27).  No path dies of it, and it
 * all arrives once the peer reads. */
static void test_silent_peer_draws_one_rto_an_rto(void **state)
{
	(void)state;
	struct setup s = { .dead_ns = 400000000 };
	struct harness *hs = harness_new(&s);
	const uint64_t silent_ns = 80000000, start = hs->clock.ns; /* 16 rto_max */
	const uint64_t most = 6 + silent_ns / 5000000; /* 200 us doubling to 5 ms: 6 expiries, then one an rto_max */
	const struct sl_tp_stats *st = sl_tp_get_stats(hs->a.tp);

	send_msg(&hs->a, 5); /* 3 windows of packets: a window out */
	while (hs->clock.ns < start + silent_ns) {
		sl_tp_poll(hs->a.tp);
		hs->clock.ns += STEP_NS;
	}
	if (st->retx_rto > most)
		fail_msg("%llu RTO retransmissions in %llu ms of silence, want at most %llu",
			 (unsigned long long)st->retx_rto, (unsigned long long)(silent_ns / 1000000),
			 (unsigned long long)most);
	assert_true(st->retx_rto >= 5);
	assert_int_equal(st->path_deaths, 0);
	run_to_completion(hs);
	check_received(&hs->a, &hs->b);
	harness_free(hs);
}

/* A peer whose engine stopped for 16 rto_max reads the queue of originals
 * and retransmissions at once, and its first ACK echoes a packet sent tens
 * of milliseconds before: no RTT of the link.  That sample is dropped, so
 * the ACK that ends the stall finds srtt and the RTO where they were (taken,
 * it put srtt at ~8 ms over a link of a few microseconds; after a 5 s engine
 * stop a dataplane's srtt read 219 ms and its RTO stayed at rto_max). */
static void test_stall_is_no_rtt_sample(void **state)
{
	(void)state;
	struct setup s = { .dead_ns = 400000000 };
	struct harness *hs = harness_new(&s);
	const uint64_t silent_ns = 80000000, rto_min_ns = 200000;
	struct sl_tp_flow_info fi;
	uint64_t start;

	send_msg(&hs->a, 6);
	run_to_completion(hs);
	assert_int_equal(sl_tp_flow_info(hs->a.tp, NODE_B, &fi), 0);
	assert_true(fi.srtt_ns < rto_min_ns);
	uint32_t una = fi.snd_una;
	send_msg(&hs->a, 7); /* 3 windows */
	for (start = hs->clock.ns; hs->clock.ns < start + silent_ns; hs->clock.ns += STEP_NS)
		sl_tp_poll(hs->a.tp); /* b's engine stopped */
	assert_true(sl_tp_get_stats(hs->a.tp)->retx_rto >= 5);
	while (sl_tp_flow_info(hs->a.tp, NODE_B, &fi) == 0 && fi.snd_una == una)
		round_once(hs);
	if (fi.srtt_ns >= rto_min_ns || fi.rto_ns != rto_min_ns)
		fail_msg("after a %llu ms stall: srtt %llu us, rto %llu us, want srtt under and rto at rto_min "
			 "(%llu us)", (unsigned long long)(silent_ns / 1000000), (unsigned long long)(fi.srtt_ns / 1000),
			 (unsigned long long)(fi.rto_ns / 1000), (unsigned long long)(rto_min_ns / 1000));
	run_to_completion(hs);
	check_received(&hs->a, &hs->b);
	harness_free(hs);
}

/* A flow's own post-mortem counters say whether its peer's ACKs moved it
 * (session 31 could not tell from the engine's, summed over 11 peers,
 * whether node 10's 35 duplicates were node 9's 41 RTO retransmissions).
 * b gets a's packets but the first, then one of them again: its ACK of the
 * copy retires nothing while the first is out, and b counts the copy.  Then
 * b's engine stops, and a's RTO retransmissions are the flow's. */
static void test_flow_counts_what_its_peer_acknowledged(void **state)
{
	(void)state;
	struct setup s = { .dead_ns = 400000000 };
	struct harness *hs = harness_new(&s);
	struct sl_pkt pkts[DEPTH];
	uint8_t again[MAX_FRAME];
	struct sl_tp_flow_info fa, fb;
	uint64_t start;

	send_msg(&hs->a, 6);
	sl_tp_poll(hs->a.tp);
	uint16_t n = hs->pb->ops->rx_burst(hs->pb, pkts, DEPTH);
	assert_true(n >= 3);
	uint32_t again_len = pkts[1].len;
	memcpy(again, pkts[1].data, again_len);
	for (uint16_t i = 1; i < n; i++)
		inject(hs->pa, pkts[i].data, pkts[i].len);
	hs->pb->ops->free(hs->pb, pkts, n);
	sl_tp_poll(hs->b.tp); /* SACKs all but the first */
	sl_tp_poll(hs->a.tp);
	assert_int_equal(sl_tp_flow_info(hs->a.tp, NODE_B, &fa), 0);
	assert_int_equal(fa.acks_idle, 0);
	uint32_t first = fa.snd_una;
	n = hs->pb->ops->rx_burst(hs->pb, pkts, DEPTH); /* whatever a resent: lost */
	hs->pb->ops->free(hs->pb, pkts, n);
	inject(hs->pa, again, again_len);
	sl_tp_poll(hs->b.tp);
	sl_tp_poll(hs->a.tp);
	assert_int_equal(sl_tp_flow_info(hs->a.tp, NODE_B, &fa), 0);
	assert_int_equal(sl_tp_flow_info(hs->b.tp, NODE_A, &fb), 0);
	assert_int_equal(fa.snd_una, first); /* the first is still out */
	if (fa.acks_idle != 1 || fb.dup_rx != 1)
		fail_msg("a copy b had: a counts %u ACKs that retired nothing, b %u copies, want 1 and 1",
			 fa.acks_idle, fb.dup_rx);
	run_to_completion(hs);
	send_msg(&hs->a, 7);
	for (start = hs->clock.ns; hs->clock.ns < start + 20000000; hs->clock.ns += STEP_NS)
		sl_tp_poll(hs->a.tp); /* b's engine stopped */
	assert_int_equal(sl_tp_flow_info(hs->a.tp, NODE_B, &fa), 0);
	assert_true(fa.rto_retx > 0);
	assert_int_equal(fa.rto_retx, sl_tp_get_stats(hs->a.tp)->retx_rto);
	run_to_completion(hs);
	check_received(&hs->a, &hs->b);
	harness_free(hs);
}

/* A pass at a time its caller read (an embedded application's wait):
 * that time is the pass's, except one before the last pass's, as when
 * another thread's pass ran between the caller's read and its own: then
 * the clock stays where it was, so what the last pass stamped (send
 * times, progress) is never after the clock.  Messages still go through
 * on passes timed by the caller alone. */
static void test_poll_at_never_goes_back(void **state)
{
	(void)state;
	struct setup s = { .crc = false };
	struct harness *hs = harness_new(&s);
	struct end *a = &hs->a;

	hs->clock.ns = 5000000;
	sl_tp_poll(a->tp);
	assert_int_equal(sl_tp_poll_ns(a->tp), 5000000);
	sl_tp_poll_at(a->tp, 6000000);
	assert_int_equal(sl_tp_poll_ns(a->tp), 6000000);
	sl_tp_poll_at(a->tp, 5500000);
	if (sl_tp_poll_ns(a->tp) != 6000000)
		fail_msg("a pass at an earlier time moved the clock back to %llu",
			 (unsigned long long)sl_tp_poll_ns(a->tp));
	hs->clock.ns = 7000000;
	send_msg(a, 3);
	for (unsigned r = 0; r < 100 && !a->acked[3]; r++) {
		hs->clock.ns += 1000;
		sl_tp_poll_at(a->tp, hs->clock.ns);
		sl_tp_poll(hs->b.tp);
		engine_round(a);
		engine_round(&hs->b);
	}
	assert_int_equal(a->acked[3], 1);
	check_received(a, &hs->b);
	harness_free(hs);
}

/* An embedded pass runs at the time its application read before it, and
 * what the pass posts first may stamp a later one: a message queued on a
 * held window with nothing in flight starts the dead clock at a fresh
 * read.  That stamp must not stand after the pass's clock: the dead check
 * subtracted it, wrapped, and killed the flow within a second of the hold
 * ("nothing was acknowledged for 30.0 s"; 3-rank gathers of 1-4 MiB). */
static void test_pass_timed_before_a_send_on_a_held_window(void **state)
{
	const uint64_t dead_ns = 20000000;
	struct setup s = { .dead_ns = dead_ns };
	struct harness *hs = harness_new(&s);
	struct end *a = &hs->a;
	(void)state;

	hs->b.every = UINT32_MAX; /* b's engine never drains: it holds a's window */
	hs->b.cap = 12;
	send_msg(a, 6);
	while (hs->clock.ns < 1000000 + 2 * dead_ns) /* held, all acknowledged: the window probes answered */
		round_once(hs);
	assert_true(hs->b.holding);
	hs->clock.ns += 1000000; /* past the timer scan interval: the pass below scans them */
	uint64_t read_before = hs->clock.ns;
	hs->clock.ns += 1000;
	send_msg(a, 8); /* waits for the held window, nothing in flight */
	sl_tp_poll_at(a->tp, read_before);
	if (a->dead_calls)
		fail_msg("a pass timed 1 us before the send declared the flow to b dead at once");
	assert_true(sl_tp_node_alive(a->tp, NODE_B));
	harness_free(hs);
}

/* Small messages whose sender does not wait for their ACKs, as a leaf's
 * calls that linger: N_SMALL of SMALL bytes in message 6's range, one a
 * round, as a leaf posts them. */
enum { N_SMALL = 64, SMALL = 16 };
static struct sl_tp_msg small[N_SMALL];

static void send_small(struct end *e, unsigned i, bool late)
{
	struct sl_tp_msg *m = &small[i];

	*m = e->msgs[6];
	m->hdr.offset = msg_base[6] + i * SMALL;
	m->hdr.len = SMALL;
	m->src = e->src + m->hdr.offset;
	m->ack_late = late;
	assert_int_equal(sl_tp_send(e->tp, m), 0);
}

/* Every byte of the small messages arrived once, and each was acknowledged. */
static void check_small(const struct end *tx, const struct end *rx, unsigned n)
{
	assert_int_equal(tx->acked[6], n);
	for (uint32_t k = msg_base[6]; k < msg_base[6] + n * SMALL; k++) {
		assert_int_equal(rx->rx_count[k], 1);
		assert_int_equal(rx->rx[k], tx->src[k]);
	}
}

/* N messages of a sender that lets them go draw an ACK per ack_every
 * (8) packets, not one each; ones that ask (a caller waits: SL_F_ACK_NOW)
 * draw one each, and their callback comes the round after. */
static void test_late_acks_are_coalesced(void **state)
{
	(void)state;
	for (int late = 0; late < 2; late++) {
		struct setup s = { .crc = false };
		struct harness *hs = harness_new(&s);
		const struct sl_tp_stats *bs = sl_tp_get_stats(hs->b.tp);

		for (unsigned i = 0; i < N_SMALL; i++) {
			send_small(&hs->a, i, late);
			round_once(hs);
			round_once(hs);
			if (!late && hs->a.acked[6] != i + 1)
				fail_msg("message %u asked for its ACK and was not acknowledged the round after", i);
		}
		run_to_completion(hs);
		check_small(&hs->a, &hs->b, N_SMALL);
		if (late && bs->ack_tx > N_SMALL / 8 + 1)
			fail_msg("%u small messages drew %llu ACKs, more than one per 8", N_SMALL,
				 (unsigned long long)bs->ack_tx);
		if (!late)
			assert_int_equal(bs->ack_tx, N_SMALL);
		assert_int_equal(retx(sl_tp_get_stats(hs->a.tp)), 0);
		harness_free(hs);
	}
}

/* A port that passes everything to inner but has no tx buffer while dry:
 * the transport's ACK finds no room, as with a full send queue. */
struct dry_port {
	struct sl_port port;
	struct sl_port *inner;
	bool dry;
};

static struct sl_port *inner_of(struct sl_port *p)
{
	return ((struct dry_port *)p->priv)->inner;
}

static uint16_t dry_rx(struct sl_port *p, struct sl_pkt *pkts, uint16_t n)
{
	return inner_of(p)->ops->rx_burst(inner_of(p), pkts, n);
}

static uint16_t dry_tx(struct sl_port *p, struct sl_pkt *pkts, uint16_t n)
{
	return inner_of(p)->ops->tx_burst(inner_of(p), pkts, n);
}

static uint16_t dry_alloc(struct sl_port *p, struct sl_pkt *pkts, uint16_t n)
{
	return ((struct dry_port *)p->priv)->dry ? 0 : inner_of(p)->ops->alloc(inner_of(p), pkts, n);
}

static void dry_free(struct sl_port *p, struct sl_pkt *pkts, uint16_t n)
{
	inner_of(p)->ops->free(inner_of(p), pkts, n);
}

static const struct sl_port_ops dry_ops = { .name = "dry", .rx_burst = dry_rx, .tx_burst = dry_tx,
					    .alloc = dry_alloc, .free = dry_free };

/* An ACK its port refuses is counted and stays owed: it goes at the next
 * poll, though no new DATA asks for it, before the sender sends again.
 * The poll calls the ACK sender only while the owed list says so: a flow
 * owing an ACK off that list would never send it, and fail here too. */
static void test_refused_ack_stays_owed(void **state)
{
	(void)state;
	struct setup s = { .crc = false };
	struct harness *hs = harness_new(&s);
	struct dry_port dp = { .inner = hs->pb, .dry = true };
	const struct sl_tp_stats *bs;
	struct sl_tp_flow_info fi;

	dp.port = *hs->pb;
	dp.port.ops = &dry_ops;
	dp.port.priv = &dp;
	dp.port.rx_posted = NULL;
	sl_tp_destroy(hs->b.tp);
	end_init(hs, &hs->b, &dp.port, NODE_B, NODE_A, &s);
	bs = sl_tp_get_stats(hs->b.tp);
	send_small(&hs->a, 0, false); /* asks for its ACK at once */
	sl_tp_poll(hs->a.tp);
	sl_tp_poll(hs->b.tp);
	assert_int_equal(hs->b.rx_count[msg_base[6]], 1);
	assert_int_equal(bs->ack_tx, 0);
	assert_int_equal(bs->ctl_refused, 1);
	assert_int_equal(sl_tp_flow_info(hs->b.tp, NODE_A, &fi), 0);
	assert_int_equal(fi.acks_refused, 1);
	dp.dry = false;
	sl_tp_poll(hs->b.tp); /* same time, nothing new came in: only the owed ACK */
	if (bs->ack_tx != 1)
		fail_msg("a refused ACK was dropped: %llu ACKs after the port took frames again",
			 (unsigned long long)bs->ack_tx);
	sl_tp_poll(hs->a.tp);
	assert_int_equal(hs->a.acked[6], 1);
	assert_int_equal(retx(sl_tp_get_stats(hs->a.tp)), 0);
	assert_int_equal(bs->ctl_refused, 1);
	harness_free(hs);
}

/* A delayed ACK goes when its delay runs out (10 us by default), before
 * the sender's tail-loss probe (20 us at least) would send the packet again. */
static void test_delayed_ack_comes_in_time(void **state)
{
	(void)state;
	struct setup s = { .crc = false };
	struct harness *hs = harness_new(&s);
	uint64_t start = hs->clock.ns;

	send_small(&hs->a, 0, true);
	while (!hs->a.acked[6]) {
		assert_true(hs->clock.ns - start < 1000000);
		round_once(hs);
	}
	if (hs->clock.ns - start > 10000 + 2 * STEP_NS)
		fail_msg("a delayed ACK came %llu ns after its packet", (unsigned long long)(hs->clock.ns - start));
	assert_int_equal(sl_tp_get_stats(hs->b.tp)->ack_delayed, 1);
	assert_int_equal(retx(sl_tp_get_stats(hs->a.tp)), 0);
	check_small(&hs->a, &hs->b, 1);
	harness_free(hs);
}

/* An engine going to sleep sends what it delays at once (sl_tp_flush_acks). */
static void test_flush_sends_delayed_acks(void **state)
{
	(void)state;
	struct setup s = { .crc = false };
	struct harness *hs = harness_new(&s);
	const struct sl_tp_stats *bs = sl_tp_get_stats(hs->b.tp);

	send_small(&hs->a, 0, true);
	sl_tp_poll(hs->a.tp);
	sl_tp_poll(hs->b.tp);
	assert_int_equal(bs->data_rx, 1);
	assert_int_equal(bs->ack_tx, 0); /* delayed */
	assert_int_equal(sl_tp_flush_acks(hs->b.tp), 1);
	assert_int_equal(bs->ack_tx, 1);
	assert_int_equal(sl_tp_flush_acks(hs->b.tp), 0); /* nothing owed any more */
	sl_tp_poll(hs->a.tp);
	assert_int_equal(hs->a.acked[6], 1);
	harness_free(hs);
}

/* Coalesced ACKs lost on the way: the sender's tail-loss probe or RTO
 * sends a packet again, whose duplicate draws an ACK at once (of all of
 * them), and every message is delivered once and acknowledged once. */
static void test_lost_coalesced_acks_recover(void **state)
{
	(void)state;
	struct setup s = { .crc = false };
	struct harness *hs = harness_new(&s);
	struct sl_pkt lost[DEPTH];
	uint64_t dropped = 0;

	for (unsigned i = 0; i < 16; i++) { /* two ACKs' worth, every frame to a dropped */
		send_small(&hs->a, i, true);
		sl_tp_poll(hs->a.tp);
		sl_tp_poll(hs->b.tp);
		uint16_t n = hs->pa->ops->rx_burst(hs->pa, lost, DEPTH);
		hs->pa->ops->free(hs->pa, lost, n);
		dropped += n;
		hs->clock.ns += STEP_NS;
	}
	assert_true(dropped >= 2);
	assert_int_equal(hs->a.acked[6], 0);
	run_to_completion(hs);
	check_small(&hs->a, &hs->b, 16);
	assert_true(retx(sl_tp_get_stats(hs->a.tp)) >= 1);
	assert_true(sl_tp_get_stats(hs->b.tp)->rx_dup >= 1);
	assert_int_equal(sl_tp_get_stats(hs->a.tp)->flows_dead, 0);
	harness_free(hs);
}

static void test_cancel(void **state)
{
	(void)state;
	struct setup s = { .crc = true, .faults = { .drop = 0.3, .seed = 5 } };
	struct harness *hs = harness_new(&s);
	struct end *a = &hs->a;

	for (int i = 0; i < N_MAIN; i++)
		send_msg(a, i);
	round_once(hs); /* a window went out; a has not seen an ACK yet */
	/* message 6 is in flight, 7 is partly cut (more than a window), both go */
	assert_false(a->msgs[6].queued);
	assert_int_equal(a->acked[6], 0);
	assert_true(a->msgs[7].queued && a->msgs[7].next_off > 0);
	sl_tp_cancel(a->tp, &a->msgs[6]);
	sl_tp_cancel(a->tp, &a->msgs[7]);
	a->cancelled[6] = a->cancelled[7] = true;
	assert_false(a->msgs[7].queued);
	run_to_completion(hs);
	/* the flow still works after cancelling */
	send_msg(a, 8);
	run_to_completion(hs);
	check_received(a, &hs->b);
	assert_int_equal(a->acked[6] + a->acked[7], 0);
	const struct sl_tp_stats *sa = sl_tp_get_stats(a->tp), *sb = sl_tp_get_stats(hs->b.tp);
	/* every PSN a used was applied once: delivered or voided */
	assert_int_equal(sb->data_rx + sb->rx_void, sa->data_tx - retx(sa));
	assert_true(sb->rx_void > 0); /* with this seed, lost packets were retransmitted void */
	harness_free(hs);
}

static void test_cancel_queued(void **state)
{
	(void)state;
	struct setup s = { 0 };
	struct harness *hs = harness_new(&s);
	struct end *a = &hs->a;

	send_msg(a, 1);
	send_msg(a, 2);
	send_msg(a, 3);
	sl_tp_cancel(a->tp, &a->msgs[2]); /* never cut: unqueued from the middle */
	a->cancelled[2] = true;
	run_to_completion(hs);
	check_received(a, &hs->b);
	assert_int_equal(a->acked[2], 0);
	assert_int_equal(hs->b.rx_count[msg_base[2]], 0);
	check_stats(a, &hs->b); /* message 2 sent no packet at all */
	harness_free(hs);
}


/* The frames on their way out of port from: each names from's MAC and
 * node's address as its source. */
static void check_sources(struct sl_port *from, struct sl_port *to, uint16_t node)
{
	struct sl_pkt pkts[8];
	struct sl_addr want;
	uint16_t n = to->ops->rx_burst(to, pkts, 8);

	sl_addr_for_node(node, &want);
	assert_true(n > 0);
	for (uint16_t i = 0; i < n; i++) {
		const uint8_t *ip = pkts[i].data + 14 + 12; /* Ethernet, then the IPv4 source */
		assert_memory_equal(pkts[i].data + 6, from->mac, sizeof(from->mac));
		assert_int_equal((uint32_t)ip[0] << 24 | (uint32_t)ip[1] << 16 | (uint32_t)ip[2] << 8 | ip[3], want.ip);
	}
	to->ops->free(to, pkts, n);
}

/* Routes beyond the harness's one, to nodes FIRST_EXTRA.., and the three of
 * them (route indices, three bitmap words apart) that have something to send. */
#define FIRST_EXTRA 3
#define N_ROUTES 129
static const unsigned busy_route[] = { 1, 70, 128 };

/* The destination node (10.83.x.y) of each DATA frame from a, in order. */
static unsigned frame_nodes(struct harness *hs, uint16_t *nodes, unsigned max)
{
	struct sl_pkt pkts[8];
	uint16_t n = hs->pb->ops->rx_burst(hs->pb, pkts, 8);

	assert_true(n <= max);
	for (uint16_t i = 0; i < n; i++) {
		const uint8_t *ip = pkts[i].data + 14 + 16; /* Ethernet, then the IPv4 destination */
		nodes[i] = (uint16_t)(ip[2] << 8 | ip[3]);
	}
	hs->pb->ops->free(hs->pb, pkts, n);
	return n;
}

/* A pass sends on every flow with work, in route order from the round-robin
 * start (which moves on by one a pass), whichever routes between are idle
 * and wherever the start lies: before, between or after the busy ones. */
static void test_flows_with_work_in_turn(void **state)
{
	(void)state;
	struct setup s = { 0 };
	struct harness *hs = harness_new(&s);
	static struct sl_tp_msg msgs[8][3];
	const unsigned starts[] = { 0, 1, 2, 69, 70, 71, 100, 128 };
	unsigned rr = 0, k = 0;

	for (uint16_t node = FIRST_EXTRA; node < FIRST_EXTRA + N_ROUTES - 1; node++) {
		struct sl_addr addr;
		sl_addr_for_node(node, &addr);
		assert_int_equal(sl_tp_add_route(hs->a.tp, node, 0, &addr), 0);
	}
	for (; k < 8; rr++) {
		if (rr != starts[k]) {
			sl_tp_poll(hs->a.tp); /* nothing to send: only the start moves */
			continue;
		}
		for (unsigned j = 0; j < 3; j++) {
			msgs[k][j] = hs->a.msgs[1];
			msgs[k][j].dst_node = (uint16_t)(FIRST_EXTRA - 1 + busy_route[j]);
			assert_int_equal(sl_tp_send(hs->a.tp, &msgs[k][j]), 0);
		}
		sl_tp_poll(hs->a.tp);
		uint16_t got[8];
		assert_int_equal(frame_nodes(hs, got, 8), 3);
		unsigned first = 0; /* the first busy route at or after the start */
		while (first < 3 && busy_route[first] < rr)
			first++;
		for (unsigned j = 0; j < 3; j++)
			assert_int_equal(got[j], FIRST_EXTRA - 1 + busy_route[(first + j) % 3]);
		k++;
	}
	harness_free(hs);
}

/* A frame's source address is built once a port, at sl_tp_add_port: both
 * ends' frames still carry their own port's MAC and node. */
static void test_frame_source(void **state)
{
	(void)state;
	struct setup s = { 0 };
	struct harness *hs = harness_new(&s);

	send_msg(&hs->a, 0);
	send_msg(&hs->b, 0);
	sl_tp_poll(hs->a.tp);
	check_sources(hs->pa, hs->pb, NODE_A); /* before b's poll takes them in */
	sl_tp_poll(hs->b.tp);
	check_sources(hs->pb, hs->pa, NODE_B);
	harness_free(hs);
}

/* The most frames one tx_burst was handed (big_tx_burst wraps a port's). */
static struct {
	const struct sl_port_ops *ops;
	uint16_t most;
} handed;

static uint16_t big_tx_burst(struct sl_port *port, struct sl_pkt *pkts, uint16_t n)
{
	if (n > handed.most)
		handed.most = n;
	return handed.ops->tx_burst(port, pkts, n);
}

static enum sl_deliver_result take_all(void *arg, const struct sl_hdr *h, const uint8_t *payload)
{
	(void)arg, (void)h, (void)payload;
	return SL_DELIVER_DONE;
}

static void no_ack(void *arg, struct sl_tp_msg *m)
{
	(void)arg, (void)m;
}

static void no_death(void *arg, uint16_t node)
{
	(void)arg, (void)node;
}

/* Transports of nodes A (on port a) and B (on port b), routed to each
 * other, with packets of payload bytes. */
static void tp_pair(struct sl_tp *tp[2], struct sl_port *a, struct sl_port *b, uint32_t frame, uint32_t payload,
		    const struct sl_clock *clock, const struct sl_tp_callbacks *cb)
{
	struct sl_tp_config cfg;
	struct sl_addr addr;

	for (int i = 0; i < 2; i++) {
		sl_tp_config_default(&cfg, i ? NODE_B : NODE_A, frame);
		cfg.payload = payload;
		assert_non_null(tp[i] = sl_tp_create(&cfg, clock, cb));
		assert_int_equal(sl_tp_add_port(tp[i], i ? b : a), 0);
		sl_addr_for_node(i ? NODE_A : NODE_B, &addr);
		assert_int_equal(sl_tp_add_route(tp[i], i ? NODE_A : NODE_B, 0, &addr), 0);
	}
}

/* One message of len bytes of src from A to B. */
static struct sl_tp_msg a_to_b(const uint8_t *src, uint32_t len)
{
	return (struct sl_tp_msg){ .dst_node = NODE_B, .src = src,
				   .hdr = { .comm = COMM, .seq = 1, .step = 3, .kind = 1, .count = len, .len = len } };
}

/* A poll's burst of large frames goes to the port TP_TXQ_BYTES at a time,
 * not whole at the poll's end: the receiver copies the first frames out
 * while the sender builds the next.  Staged whole, a 2-rank 512 KiB
 * broadcast's 32 frames of 16 KiB were built, then copied out, one after
 * the other (perf/ALGORITHMS.md, big32). */
static void test_large_frames_handed_over_early(void **state)
{
	enum { PAYLOAD = 8192, FRAMES = 32 };
	const uint32_t frame = PAYLOAD + SL_FRAME_OVERHEAD + 16;
	struct fake_clock fc = { 1000000 };
	struct sl_clock clock = { fake_now, &fc };
	struct sl_tp_callbacks cb = { take_all, no_ack, no_death, NULL };
	struct sl_port *pa, *pb, wrapped;
	struct sl_port_ops ops;
	struct sl_memport_faults none = { 0 };
	struct sl_tp *tp[2];
	static uint8_t src[PAYLOAD * FRAMES];
	struct sl_tp_msg m = a_to_b(src, sizeof(src));
	(void)state;

	assert_int_equal(sl_memport_pair(&pa, &pb, frame, 2 * FRAMES, &none), 0);
	handed.ops = pa->ops;
	handed.most = 0;
	ops = *pa->ops;
	ops.tx_burst = big_tx_burst;
	wrapped = *pa;
	wrapped.ops = &ops;
	tp_pair(tp, &wrapped, pb, frame, PAYLOAD, &clock, &cb);
	assert_int_equal(sl_tp_send(tp[0], &m), 0);
	sl_tp_poll(tp[0]);
	assert_int_equal(sl_tp_get_stats(tp[0])->data_tx, FRAMES);
	if (handed.most > TP_TXQ_BYTES / PAYLOAD + 1)
		fail_msg("one tx_burst was handed %u frames of %u bytes: want at most %u bytes' worth at a time",
			 handed.most, PAYLOAD, TP_TXQ_BYTES);
	sl_tp_poll(tp[1]); /* takes the frames in */
	sl_tp_destroy(tp[0]);
	sl_tp_destroy(tp[1]);
	sl_memport_pair_free(pa, pb);
}

/* A port that refuses frames is handed them again at the poll's end, not at
 * every frame staged behind them: staged bytes stayed above TP_TXQ_BYTES, and
 * each frame built after a refusal called tx_burst again (on af_packet a
 * system call each).  Nothing refused is lost: it all arrives once the
 * receiver reads (perf/ALGORITHMS.md, ab33). */
static void test_refused_port_retried_at_poll_end(void **state)
{
	enum { PAYLOAD = 8192, FRAMES = 32, FIFO = 2 };
	const uint32_t frame = PAYLOAD + SL_FRAME_OVERHEAD + 16;
	struct fake_clock fc = { 1000000 };
	struct sl_clock clock = { fake_now, &fc };
	struct sl_tp_callbacks cb = { take_all, no_ack, no_death, NULL };
	struct sl_port *pa, *pb;
	struct sl_memport_faults none = { 0 };
	struct sl_tp *tp[2];
	static uint8_t src[PAYLOAD * FRAMES];
	struct sl_tp_msg m = a_to_b(src, sizeof(src));
	(void)state;

	assert_int_equal(sl_memport_pair(&pa, &pb, frame, FIFO, &none), 0);
	tp_pair(tp, pa, pb, frame, PAYLOAD, &clock, &cb);
	const struct sl_tp_stats *as = sl_tp_get_stats(tp[0]);
	assert_int_equal(sl_tp_send(tp[0], &m), 0);
	sl_tp_poll(tp[0]); /* b does not read: the port takes FIFO frames */
	assert_int_equal(as->data_tx, FRAMES);
	assert_true(as->tx_refused > 0);
	if (as->tx_bursts > 2)
		fail_msg("a refusing port was handed frames %llu times in one poll: want at most 2 "
			 "(the hand-over it refused, then the poll's end)", (unsigned long long)as->tx_bursts);
	for (int i = 0; i < 100 && sl_tp_get_stats(tp[1])->data_rx < FRAMES; i++) {
		sl_tp_poll(tp[1]);
		sl_tp_poll(tp[0]);
	}
	assert_int_equal(sl_tp_get_stats(tp[1])->data_rx, FRAMES);
	assert_int_equal(as->retx_rto + as->retx_sack + as->retx_tlp, 0);
	sl_tp_destroy(tp[0]);
	sl_tp_destroy(tp[1]);
	sl_memport_pair_free(pa, pb);
}

static uint32_t frame_from(uint8_t *buf, uint16_t src_node, uint16_t dst_node, uint8_t version,
			   bool crc)
{
	struct sl_addr a, b;
	struct sl_hdr h = { .version = version, .type = SL_T_DATA, .src_node = src_node,
			    .dst_node = dst_node, .comm = COMM, .seq = 1, .offset = msg_base[1],
			    .len = 1, .flags = crc ? SL_F_CRC : 0 };

	sl_addr_for_node(src_node, &a);
	sl_addr_for_node(dst_node, &b);
	return sl_wire_build(buf, MAX_FRAME, &a, &b, 0xc000, &h, "x", NULL);
}

static void test_foreign_and_malformed(void **state)
{
	(void)state;
	struct setup s = { 0 };
	struct harness *hs = harness_new(&s);
	uint8_t buf[MAX_FRAME] = { 0 };
	uint32_t len;

	buf[12] = 0x08; /* an ARP frame */
	buf[13] = 0x06;
	inject(hs->pa, buf, 60);
	inject(hs->pa, buf, 5);                                    /* runt: malformed */
	len = frame_from(buf, NODE_A, 99, SL_WIRE_VERSION, false); /* not for us */
	inject(hs->pa, buf, len);
	len = frame_from(buf, 77, NODE_B, SL_WIRE_VERSION, false); /* nobody we know */
	inject(hs->pa, buf, len);
	len = frame_from(buf, NODE_A, NODE_B, 7, false);           /* bad version */
	inject(hs->pa, buf, len);
	len = frame_from(buf, NODE_A, NODE_B, SL_WIRE_VERSION, true);
	buf[len - 6] ^= 1;                                         /* bad CRC */
	inject(hs->pa, buf, len);
	inject(hs->pa, buf, len - 10);                             /* truncated */
	sl_tp_poll(hs->b.tp);
	const struct sl_tp_stats *sb = sl_tp_get_stats(hs->b.tp);
	assert_int_equal(sb->rx_foreign, 3);
	assert_int_equal(sb->rx_malformed, 4);
	assert_int_equal(sb->data_rx + sb->rx_dup + sb->ack_tx, 0);
	/* and the transport carries on */
	send_msg(&hs->a, 6);
	run_to_completion(hs);
	check_received(&hs->a, &hs->b);
	harness_free(hs);
}

static void test_config_checks(void **state)
{
	(void)state;
	struct sl_tp_config cfg;
	struct fake_clock fc = { 0 };
	struct sl_clock clock = { fake_now, &fc };
	struct sl_tp_callbacks cb = { on_deliver, on_acked, on_dead, NULL };
	struct sl_port *pa, *pb;
	struct sl_memport_faults nf = { 0 };
	struct sl_addr addr = { 0 };

	sl_tp_config_default(&cfg, 1, 1500);
	assert_int_equal(cfg.payload, (1500 - SL_FRAME_OVERHEAD - SL_CRC_LEN) & ~15u);
	assert_int_equal(cfg.window, SL_MAX_WINDOW);
	cfg.window = SL_MAX_WINDOW + 1;
	assert_null(sl_tp_create(&cfg, &clock, &cb));
	cfg.window = SL_MAX_WINDOW;
	cfg.payload = 100; /* not a multiple of 16 */
	assert_null(sl_tp_create(&cfg, &clock, &cb));
	cfg.payload = 1408;
	cfg.ack_every = 0;
	assert_null(sl_tp_create(&cfg, &clock, &cb));
	cfg.ack_every = 8;
	cfg.ack_delay_ns = 0; /* delayed ACKs that never come */
	assert_null(sl_tp_create(&cfg, &clock, &cb));
	cfg.ack_every = 1; /* every burst, as before delayed ACKs: no delay needed */
	struct sl_tp *tp = sl_tp_create(&cfg, &clock, &cb);
	assert_non_null(tp);
	assert_int_equal(sl_memport_pair(&pa, &pb, MAX_FRAME, 4, &nf), 0);
	assert_int_equal(sl_tp_add_port(tp, pa), -1); /* frames too small for the payload */
	assert_int_equal(sl_tp_add_route(tp, 2, 0, &addr), -1); /* no such port */
	struct sl_tp_msg m = { .dst_node = 2 };
	assert_int_equal(sl_tp_send(tp, &m), -1);
	m.dst_node = 60000;
	assert_int_equal(sl_tp_send(tp, &m), -1);
	assert_false(sl_tp_node_alive(tp, 2));
	sl_tp_destroy(tp);
	sl_memport_pair_free(pa, pb);
}

static int setup_layout(void **state)
{
	(void)state;
	uint32_t at = 0;

	/* each message on its own packet-aligned range, a packet apart */
	for (int i = 0; i < N_ALL; i++) {
		msg_base[i] = at;
		at += (msg_size[i] + P - 1) / P * P + P;
	}
	assert_true(at <= SPACE);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config_checks),
		cmocka_unit_test(test_clean_link),
		cmocka_unit_test(test_idle_port_not_polled),
		cmocka_unit_test(test_faults),
		cmocka_unit_test(test_fault_port_link),
		cmocka_unit_test(test_replays_from_seed),
		cmocka_unit_test(test_retry_then_deliver_once),
		cmocka_unit_test(test_slow_receiver_holds_the_window),
		cmocka_unit_test(test_slow_receiver_under_faults),
		cmocka_unit_test(test_long_hold_is_not_death),
		cmocka_unit_test(test_a_peer_heard_from_is_not_silent),
		cmocka_unit_test(test_held_waits_are_not_credit_stalls),
		cmocka_unit_test(test_lost_reopening_found_by_probe),
		cmocka_unit_test(test_held_packets_go_with_nothing_queued),
		cmocka_unit_test(test_parked_call_waits_and_the_rest_goes),
		cmocka_unit_test(test_two_parks_on_one_flow),
		cmocka_unit_test(test_eight_parks_on_one_flow),
		cmocka_unit_test(test_a_parked_send_waits_for_its_recv),
		cmocka_unit_test(test_stale_hold_after_reopening),
		cmocka_unit_test(test_peer_dies_while_holding_packets),
		cmocka_unit_test(test_peer_dies_while_a_message_waits),
		cmocka_unit_test(test_dead_peer),
		cmocka_unit_test(test_last_word_outside_the_stream),
		cmocka_unit_test(test_last_word_past_a_full_ring),
		cmocka_unit_test(test_poll_at_never_goes_back),
		cmocka_unit_test(test_pass_timed_before_a_send_on_a_held_window),
		cmocka_unit_test(test_backed_up_port_is_not_loss),
		cmocka_unit_test(test_silent_peer_draws_one_rto_an_rto),
		cmocka_unit_test(test_stall_is_no_rtt_sample),
		cmocka_unit_test(test_flow_counts_what_its_peer_acknowledged),
		cmocka_unit_test(test_late_acks_are_coalesced),
		cmocka_unit_test(test_delayed_ack_comes_in_time),
		cmocka_unit_test(test_refused_ack_stays_owed),
		cmocka_unit_test(test_flush_sends_delayed_acks),
		cmocka_unit_test(test_lost_coalesced_acks_recover),
		cmocka_unit_test(test_cancel),
		cmocka_unit_test(test_cancel_queued),
		cmocka_unit_test(test_foreign_and_malformed),
		cmocka_unit_test(test_frame_source),
		cmocka_unit_test(test_large_frames_handed_over_early),
		cmocka_unit_test(test_refused_port_retried_at_poll_end),
		cmocka_unit_test(test_flows_with_work_in_turn),
	};
	return cmocka_run_group_tests(tests, setup_layout, NULL);
}

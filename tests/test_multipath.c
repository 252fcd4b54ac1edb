/*
 * test_multipath.c: one flow over two links.  Two transports are joined by
 * two memport pairs (two ports each, a route over each), and each sends the
 * other a stream of messages, as an all-reduce would.  Mid-transfer one
 * cable is cut: its paths must be found dead, their packets sent again over
 * the other link, and every byte must still arrive exactly once without the
 * flow dying.  Then the cable is mended: the probes must bring its paths
 * back and new data must use them again.  A cable cut as the receiver
 * holds the window: held packets are not sent again by its paths' death,
 * and go over the live link once it reopens.  And the silence that kills a
 * path grows with the RTT's variance, so that late answers on a loaded
 * machine do not.
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

#define P 512
#define MAX_FRAME 1024
#define DEPTH 256
#define MSGS 24
#define MSG_BYTES (64 * P)
#define STEP_NS 500
#define ENTROPIES 2
#define LINKS 2

struct fake_clock {
	uint64_t ns;
};

static uint64_t fake_now(void *arg)
{
	return ((struct fake_clock *)arg)->ns;
}

struct end {
	uint16_t node;
	struct sl_tp *tp;
	struct sl_tp_msg msgs[2 * MSGS];
	uint32_t acked;
	uint8_t src[2 * MSGS * MSG_BYTES];
	uint8_t rx[2 * MSGS * MSG_BYTES];
	uint8_t rx_count[2 * MSGS * MSG_BYTES];
	/* an engine with room for `room` packets (0: no limit): the last one
	 * holds its sender's window, and it refuses more until it is emptied */
	uint32_t room, taken;
};

struct world {
	struct fake_clock clock;
	struct sl_port *link[LINKS][2]; /* [link][end] */
	struct end e[2];
};

static enum sl_deliver_result on_deliver(void *arg, const struct sl_hdr *h, const uint8_t *payload)
{
	struct end *e = arg;

	assert_true(h->offset + h->len <= sizeof(e->rx));
	if (e->room && e->taken == e->room)
		return SL_DELIVER_RETRY;
	for (uint32_t k = 0; k < h->len; k++) {
		e->rx[h->offset + k] = payload[k];
		e->rx_count[h->offset + k]++;
	}
	return e->room && ++e->taken == e->room ? SL_DELIVER_HOLD : SL_DELIVER_DONE;
}

static void on_acked(void *arg, struct sl_tp_msg *m)
{
	(void)m;
	((struct end *)arg)->acked++;
}

static void on_dead(void *arg, uint16_t node)
{
	(void)arg;
	(void)node;
	fail_msg("the flow died although one link still works");
}

static void end_init(struct world *w, int i)
{
	struct end *e = &w->e[i];
	struct sl_tp_config cfg;
	struct sl_clock clock = { fake_now, &w->clock };
	struct sl_tp_callbacks cb = { on_deliver, on_acked, on_dead, e };
	struct sl_addr peer;

	e->node = (uint16_t)(i + 1);
	sl_tp_config_default(&cfg, e->node, MAX_FRAME);
	cfg.payload = P;
	cfg.window = 64;
	cfg.entropies = ENTROPIES;
	cfg.rto_min_ns = 200000;
	cfg.dead_ns = 2000000000ull;
	e->tp = sl_tp_create(&cfg, &clock, &cb);
	assert_non_null(e->tp);
	sl_addr_for_node((uint16_t)(2 - i), &peer);
	for (int l = 0; l < LINKS; l++) {
		int idx = sl_tp_add_port(e->tp, w->link[l][i]);
		assert_int_equal(idx, l);
		assert_int_equal(sl_tp_add_route(e->tp, (uint16_t)(2 - i), (uint16_t)idx, &peer), 0);
	}
	for (size_t k = 0; k < sizeof(e->src); k++)
		e->src[k] = (uint8_t)(k * 13 + i * 101 + (k >> 9));
}

static struct world *world_new(void)
{
	struct world *w = calloc(1, sizeof(*w));
	struct sl_memport_faults none = { 0 };

	assert_non_null(w);
	w->clock.ns = 1000000;
	for (int l = 0; l < LINKS; l++)
		assert_int_equal(sl_memport_pair(&w->link[l][0], &w->link[l][1], MAX_FRAME, DEPTH, &none), 0);
	end_init(w, 0);
	end_init(w, 1);
	return w;
}

static void world_free(struct world *w)
{
	for (int i = 0; i < 2; i++)
		sl_tp_destroy(w->e[i].tp);
	for (int l = 0; l < LINKS; l++)
		sl_memport_pair_free(w->link[l][0], w->link[l][1]);
	free(w);
}

/* Messages first..first+MSGS-1 from each end to the other. */
static void send_batch(struct world *w, int first)
{
	for (int i = 0; i < 2; i++) {
		struct end *e = &w->e[i];
		for (int m = first; m < first + MSGS; m++) {
			uint64_t off = (uint64_t)m * MSG_BYTES;
			e->msgs[m] = (struct sl_tp_msg){ .dst_node = w->e[1 - i].node, .src = e->src + off };
			e->msgs[m].hdr = (struct sl_hdr){ .comm = 1, .seq = (uint32_t)m, .offset = off,
							  .len = MSG_BYTES };
			assert_int_equal(sl_tp_send(e->tp, &e->msgs[m]), 0);
		}
	}
}

static void round_once(struct world *w)
{
	sl_tp_poll(w->e[0].tp);
	sl_tp_poll(w->e[1].tp);
	w->clock.ns += STEP_NS;
}

/* Run until both ends have want messages acknowledged (and at most 2 s of fake time). */
static void run_until_acked(struct world *w, uint32_t want, uint32_t cut_at, int cut_link)
{
	uint64_t start = w->clock.ns;

	while (w->e[0].acked < want || w->e[1].acked < want) {
		if (cut_link >= 0 && w->e[0].acked >= cut_at) {
			sl_memport_set_down(w->link[cut_link][0], true);
			cut_link = -1;
		}
		round_once(w);
		assert_true(w->clock.ns - start < 2000000000ull);
	}
}

static void check_exact(const struct world *w, int msgs)
{
	size_t bytes = (size_t)msgs * MSG_BYTES;

	for (int i = 0; i < 2; i++) {
		const struct end *rx = &w->e[i], *tx = &w->e[1 - i];
		assert_memory_equal(rx->rx, tx->src, bytes);
		for (size_t k = 0; k < bytes; k++)
			assert_int_equal(rx->rx_count[k], 1);
	}
}

/* Data packets sent on link's paths by end i, and how many of those paths are alive. */
static uint64_t link_tx(const struct world *w, int i, int link, unsigned *alive)
{
	struct sl_tp_path_info pi;
	uint64_t tx = 0;

	*alive = 0;
	for (unsigned k = 0; sl_tp_path_info(w->e[i].tp, w->e[1 - i].node, k, &pi) == 0; k++) {
		if (pi.port_idx != link)
			continue;
		tx += pi.tx;
		*alive += pi.alive;
	}
	return tx;
}

static void test_cut_and_mend(void **state)
{
	(void)state;
	struct world *w = world_new();
	struct sl_tp_flow_info fi;
	unsigned alive;

	assert_int_equal(sl_tp_flow_info(w->e[0].tp, 2, &fi), 0);
	assert_int_equal(fi.paths, LINKS * ENTROPIES);
	send_batch(w, 0);
	run_until_acked(w, MSGS, MSGS / 4, 1);
	check_exact(w, MSGS);
	for (int i = 0; i < 2; i++) {
		const struct sl_tp_stats *st = sl_tp_get_stats(w->e[i].tp);
		print_message("end %d: path deaths %llu, packets moved %llu, probes %llu\n", i,
			      (unsigned long long)st->path_deaths, (unsigned long long)st->retx_path,
			      (unsigned long long)st->probes_tx);
		assert_int_equal(st->path_deaths, ENTROPIES); /* every path over the cut link, no other */
		assert_true(st->retx_path > 0);
		assert_int_equal(st->flows_dead, 0);
		assert_true(link_tx(w, i, 1, &alive) > 0); /* it carried data before the cut */
		assert_int_equal(alive, 0);
		assert_int_equal(sl_tp_flow_info(w->e[i].tp, w->e[1 - i].node, &fi), 0);
		assert_int_equal(fi.paths_alive, ENTROPIES);
	}

	/* mend the cable: probes revive its paths, and new data goes over them again */
	uint64_t before = link_tx(w, 0, 1, &alive);
	sl_memport_set_down(w->link[1][0], false);
	for (int r = 0; r < 20000 && sl_tp_get_stats(w->e[0].tp)->path_revivals < ENTROPIES; r++)
		round_once(w);
	assert_int_equal(sl_tp_get_stats(w->e[0].tp)->path_revivals, ENTROPIES);
	assert_true(sl_tp_get_stats(w->e[0].tp)->probes_tx >= ENTROPIES);
	send_batch(w, MSGS);
	run_until_acked(w, 2 * MSGS, 0, -1);
	check_exact(w, 2 * MSGS);
	assert_true(link_tx(w, 0, 1, &alive) > before + MSGS * 64 / 4);
	assert_int_equal(alive, ENTROPIES);
	struct sl_tp_path_info pi;
	assert_int_equal(sl_tp_path_info(w->e[0].tp, 2, 0, &pi), 0);
	assert_true(pi.srtt_ns > 0); /* each path keeps its own RTT */
	world_free(w);
}

/* Packets end 0 sent on link's paths that its peer holds out. */
static uint32_t held_on_link(const struct world *w, int link)
{
	const struct sl_tp *tp = w->e[0].tp;
	const struct tp_flow *f = tp->flows[w->e[1].node];
	uint32_t n = 0;

	for (uint32_t psn = f->snd_una; psn != f->snd_nxt; psn++) {
		const struct tp_slot *s = tp_slot(tp, f, psn);
		n += s->held && f->paths[s->path].port_idx == link;
	}
	return n;
}

/*
 * A cable is cut just before the receiver fills up and holds the sender's
 * window: its paths die while packets last sent on them are held.  Those are
 * not lost, so the death does not send them again (nor take them off the
 * path's load twice); once the window reopens they go on the live link, and
 * every byte still arrives exactly once, with no load left on any path.
 */
static void test_path_dies_while_held(void **state)
{
	(void)state;
	struct world *w = world_new();
	const struct sl_tp_stats *st = sl_tp_get_stats(w->e[0].tp);
	struct sl_tp_flow_info fi;
	struct sl_tp_path_info pi;
	unsigned alive;

	w->e[1].room = 100;
	send_batch(w, 0);
	while (w->e[1].taken < 40)
		round_once(w);
	sl_memport_set_down(w->link[1][0], true);
	uint32_t held_cut = 0; /* held packets last sent on the cut link, before its paths died */
	for (int r = 0; st->path_deaths < ENTROPIES; r++) {
		assert_true(r < 20000);
		held_cut = held_on_link(w, 1);
		round_once(w);
	}
	assert_int_equal(w->e[1].taken, w->e[1].room); /* still full */
	assert_true(held_cut > 0);
	assert_int_equal(held_on_link(w, 1), held_cut); /* they stay held, not sent again */
	assert_int_equal(sl_tp_flow_info(w->e[0].tp, w->e[1].node, &fi), 0);
	uint32_t held = fi.held;
	uint64_t moved = st->retx_path, on_cut = link_tx(w, 0, 1, &alive);
	assert_int_equal(alive, 0);

	/* the receiver empties: everything held goes again, over link 0 */
	w->e[1].room = 0;
	sl_tp_resume(w->e[1].tp);
	run_until_acked(w, MSGS, 0, -1);
	check_exact(w, MSGS);
	assert_int_equal(st->held_resent, held);
	assert_int_equal(st->retx_path, moved);
	assert_int_equal(link_tx(w, 0, 1, &alive), on_cut);
	for (unsigned k = 0; sl_tp_path_info(w->e[0].tp, w->e[1].node, k, &pi) == 0; k++)
		assert_int_equal(pi.in_flight, 0);
	world_free(w);
}

static void test_silence_scales_with_variance(void **state)
{
	(void)state;
	const uint64_t srtt = 500000, floor = 200000; /* 500 us RTT, 200 us RTO floor */

	/* a steady RTT: eight of them */
	assert_int_equal(tp_path_silence_limit(srtt, srtt / 50, floor), TP_PATH_DEAD_RTTS * srtt);
	/* one that swings by twice itself (answers a few ms late now and then):
	 * three RTOs of srtt + 4 rttvar, 27 RTTs, not 8 */
	assert_int_equal(tp_path_silence_limit(srtt, 2 * srtt, floor), TP_PATH_DEAD_RTOS * 9 * srtt);
	/* and never under two RTO floors */
	assert_int_equal(tp_path_silence_limit(1000, 0, floor), 2 * floor);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cut_and_mend),
		cmocka_unit_test(test_path_dies_while_held),
		cmocka_unit_test(test_silence_scales_with_variance),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

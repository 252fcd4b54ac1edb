/*
 * tp_core.c: the transport's life cycle and its poll loop: configuration
 * defaults and checks, ports and routes (one flow per remote node, all its
 * memory allocated here so that no packet ever allocates), queueing and
 * cancelling messages, and sl_tp_poll, which runs receive, ACKs, send and
 * timers in that order.
 */
#include <stdlib.h>
#include <string.h>

#include "tp_internal.h"

#define DEFAULT_WINDOW SL_MAX_WINDOW
#define DEFAULT_RTO_MIN_NS 1000000ull      /* 1 ms */
#define DEFAULT_RTO_MAX_NS 100000000ull    /* 100 ms */
#define DEFAULT_DEAD_NS 30000000000ull     /* 30 s */
#define DEFAULT_CC_TARGET_NS 50000ull      /* 50 us */
#define DEFAULT_RX_CREDIT SL_MAX_WINDOW
#define DEFAULT_ENTROPIES 4
#define PAYLOAD_ALIGN 16

void sl_tp_config_default(struct sl_tp_config *cfg, uint16_t local_node, uint32_t max_frame)
{
	uint32_t room = SL_FRAME_OVERHEAD + SL_CRC_LEN;

	memset(cfg, 0, sizeof(*cfg));
	cfg->local_node = local_node;
	/* leave room for the CRC trailer so that turning it on never overflows a frame */
	cfg->payload = max_frame > room ? (max_frame - room) & ~(uint32_t)(PAYLOAD_ALIGN - 1) : 0;
	cfg->window = DEFAULT_WINDOW;
	cfg->rto_min_ns = DEFAULT_RTO_MIN_NS;
	cfg->rto_max_ns = DEFAULT_RTO_MAX_NS;
	cfg->dead_ns = DEFAULT_DEAD_NS;
	cfg->cc_target_ns = DEFAULT_CC_TARGET_NS;
	cfg->rx_credit = DEFAULT_RX_CREDIT;
	cfg->init_credit = TP_INITIAL_CREDIT;
	cfg->entropies = DEFAULT_ENTROPIES;
	cfg->ack_every = TP_ACK_EVERY;
	cfg->ack_delay_ns = TP_ACK_DELAY_NS;
}

static bool config_ok(const struct sl_tp_config *cfg)
{
	return cfg->payload > 0 && cfg->payload % PAYLOAD_ALIGN == 0 && cfg->window > 0 &&
	       cfg->window <= SL_MAX_WINDOW && cfg->rto_min_ns > 0 &&
	       cfg->rto_min_ns <= cfg->rto_max_ns && cfg->dead_ns > 0 &&
	       (!cfg->cc || cfg->cc_target_ns > 0) && cfg->rx_credit > 0 && cfg->init_credit > 0 &&
	       cfg->entropies > 0 && cfg->entropies <= SL_MAX_PATHS && cfg->ack_every > 0 &&
	       (cfg->ack_every == 1 || cfg->ack_delay_ns > 0);
}

struct sl_tp *sl_tp_create(const struct sl_tp_config *cfg, const struct sl_clock *clock,
			   const struct sl_tp_callbacks *cb)
{
	if (!config_ok(cfg) || !clock->now_ns || !cb->deliver || !cb->acked || !cb->flow_dead)
		return NULL;
	struct sl_tp *tp = calloc(1, sizeof(*tp));
	if (!tp)
		return NULL;
	tp->cfg = *cfg;
	tp->slot_mask = 1;
	while (tp->slot_mask < cfg->window)
		tp->slot_mask <<= 1;
	tp->slot_mask--;
	tp->clock = *clock;
	tp->cb = *cb;
	tp->rx_active = 1;
	if (sl_twheel_init(&tp->pacer, TP_WHEEL_SLOTS, TP_WHEEL_TICK_NS, sl_now(clock)) != 0) {
		free(tp);
		return NULL;
	}
	return tp;
}

void sl_tp_destroy(struct sl_tp *tp)
{
	if (!tp)
		return;
	tp_txq_drop_all(tp);
	for (int i = 0; i < tp->n_routed; i++) {
		free(tp->flows[tp->routed[i]]->slots);
		free(tp->flows[tp->routed[i]]);
	}
	sl_twheel_fini(&tp->pacer);
	free(tp);
}

int sl_tp_set_cc(struct sl_tp *tp, const struct sl_cc_ops *cc, uint64_t target_ns)
{
	if (tp->n_routed || (cc && !target_ns))
		return -1;
	tp->cfg.cc = cc;
	tp->cfg.cc_target_ns = target_ns;
	return 0;
}

int sl_tp_add_port(struct sl_tp *tp, struct sl_port *port)
{
	uint32_t need = SL_FRAME_OVERHEAD + tp->cfg.payload + (tp->cfg.crc || port->crc ? SL_CRC_LEN : 0);

	if (tp->n_ports == SL_MAX_PORTS || port->max_frame < need)
		return -1;
	tp->ports[tp->n_ports] = port;
	sl_addr_for_node(tp->cfg.local_node, &tp->txq[tp->n_ports].src);
	memcpy(tp->txq[tp->n_ports].src.mac, port->mac, sizeof(port->mac));
	return tp->n_ports++;
}

static struct tp_flow *flow_new(struct sl_tp *tp, uint16_t node)
{
	struct tp_flow *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->slots = calloc(tp->slot_mask + 1, sizeof(*f->slots));
	if (!f->slots) {
		free(f);
		return NULL;
	}
	f->node = node;
	f->snd_una = f->snd_nxt = f->sacked_end = f->rcv_cum = TP_FIRST_PSN;
	f->ack_nxt = f->ack_seen = TP_FIRST_PSN; /* ACK numbers cross the wrap too */
	f->rcv_grant = tp->cfg.init_credit;
	f->credit_end = TP_FIRST_PSN + (tp->cfg.init_credit < tp->cfg.window ? tp->cfg.init_credit :
									   tp->cfg.window);
	tp_flow_init_timers(tp, f);
	if (tp->cfg.cc) {
		struct sl_cc_params p;
		sl_cc_params_default(&p, tp->cfg.cc_target_ns, tp->cfg.window);
		tp->cfg.cc->init(&f->cc, &p);
	}
	return f;
}

int sl_tp_add_route(struct sl_tp *tp, uint16_t node, uint16_t port_idx, const struct sl_addr *addr)
{
	if (node >= SL_MAX_NODES || port_idx >= tp->n_ports)
		return -1;
	struct tp_flow *f = tp->flows[node];
	if (!f) {
		f = flow_new(tp, node);
		if (!f)
			return -1;
		if (tp_path_add_route(tp, f, port_idx, addr) != 0) {
			free(f->slots);
			free(f);
			return -1;
		}
		tp->flows[node] = f;
		f->route_idx = tp->n_routed;
		tp->routed[tp->n_routed++] = node;
		return 0;
	}
	return tp_path_add_route(tp, f, port_idx, addr);
}

static struct tp_flow *flow_of(const struct sl_tp *tp, uint16_t node)
{
	return node < SL_MAX_NODES ? tp->flows[node] : NULL;
}

bool sl_tp_node_alive(const struct sl_tp *tp, uint16_t node)
{
	const struct tp_flow *f = flow_of(tp, node);

	return f && !f->dead;
}

uint64_t sl_tp_node_silent_ns(const struct sl_tp *tp, uint16_t node)
{
	const struct tp_flow *f = flow_of(tp, node);
	uint64_t heard;

	if (!f || !tp_flow_waits(f))
		return 0;
	/* anything heard from it counts, not only ACK progress: a peer whose
	 * ACKs do not get through (lost, or stale) but which goes on sending is
	 * alive; named "stopped answering" at a quarter of a communicator's
	 * timeout, such a peer was waiting in a cycle itself */
	heard = f->progress_ns;
	heard = f->rcv_last_ns > heard ? f->rcv_last_ns : heard;
	heard = f->ack_last_ns > heard ? f->ack_last_ns : heard;
	return tp->now_ns > heard ? tp->now_ns - heard : 1; /* never 0 while something waits */
}

uint64_t sl_tp_node_heard_ns(const struct sl_tp *tp, uint16_t node)
{
	const struct tp_flow *f = flow_of(tp, node);

	if (!f)
		return 0;
	return f->rcv_last_ns > f->ack_last_ns ? f->rcv_last_ns : f->ack_last_ns;
}

int sl_tp_send(struct sl_tp *tp, struct sl_tp_msg *m)
{
	struct tp_flow *f = flow_of(tp, m->dst_node);

	if (!f || f->dead)
		return -1;
	/* It will wait for a held window (or a park): the dead clock starts now, not at the
	 * hold.  The pass's clock moves up to that read, so that a pass at an
	 * earlier time (an embedded application's read, sl_tp_poll_at) never
	 * sees progress after its clock: the dead check's difference wrapped
	 * and killed the flow at once. */
	if ((f->held || f->park_slots) && !f->q_head && f->snd_una == f->snd_nxt) {
		uint64_t now = sl_now(&tp->clock);
		if (now > tp->now_ns)
			tp->now_ns = now;
		f->progress_ns = tp->now_ns;
	}
	m->next_off = 0;
	m->unacked = 0;
	m->queued = true;
	m->next = NULL;
	if (f->q_tail)
		f->q_tail->next = m;
	else
		f->q_head = m;
	f->q_tail = m;
	tp_mark_sendable(tp, f);
	return 0;
}

/* Take queued m, which follows prev (NULL: the head), off f's queue. */
void tp_unlink(struct tp_flow *f, struct sl_tp_msg *m, struct sl_tp_msg *prev)
{
	if (prev)
		prev->next = m->next;
	else
		f->q_head = m->next;
	if (f->q_tail == m)
		f->q_tail = prev;
	if (f->park_skip == m)
		f->park_skip = prev;
	m->queued = false;
	m->next = NULL;
}

static void unqueue(struct tp_flow *f, struct sl_tp_msg *m)
{
	struct sl_tp_msg *prev = NULL;

	for (struct sl_tp_msg *it = f->q_head; it; prev = it, it = it->next) {
		if (it == m) {
			tp_unlink(f, m, prev);
			return;
		}
	}
}

void sl_tp_cancel(struct sl_tp *tp, struct sl_tp_msg *m)
{
	/* Every packet acknowledged: no unacknowledged slot names m (an
	 * acknowledged one is never read again), so there is nothing to void.
	 * A leaf far ahead frees each call's message this way, and walking
	 * its up to a window of PSNs in flight was ~4% of its time. */
	if (!m->queued && m->unacked == 0)
		return;
	struct tp_flow *f = flow_of(tp, m->dst_node);

	if (!f)
		return;
	if (m->queued)
		unqueue(f, m);
	/* in-flight packets keep their PSNs (the receiver must see each one)
	 * but forget m: a retransmission goes out void, an ACK calls nobody */
	for (uint32_t psn = f->snd_una; psn != f->snd_nxt; psn++) {
		struct tp_slot *s = tp_slot(tp, f, psn);
		if (s->msg == m)
			s->msg = NULL;
	}
}

uint32_t sl_tp_poll(struct sl_tp *tp)
{
	return sl_tp_poll_at(tp, sl_now(&tp->clock));
}

uint32_t sl_tp_poll_at(struct sl_tp *tp, uint64_t now_ns)
{
	uint32_t moved = 0;

	/* never back: what the last pass stamped may be later than the
	 * caller's read (another thread's pass ran in between) */
	if (now_ns > tp->now_ns)
		tp->now_ns = now_ns;
	for (uint16_t i = 0; i < tp->n_ports; i++) {
		tp->txq[i].no_buf = false;
		tp->txq[i].refused = false;
		tp_txq_flush(tp, i); /* what the port refused last time goes first */
	}
	tp_ack_late_due(tp, tp->now_ns);
	for (uint16_t i = 0; i < tp->n_ports; i++) {
		if (!sl_port_rx_idle(tp->ports[i]))
			moved += tp_rx_port(tp, i);
		if (tp->n_ack) /* most turns owe none: no call (~19 Ir each) */
			moved += tp_send_acks(tp);
	}
	moved += tp_send_data(tp);
	moved += tp_run_timers(tp);
	for (uint16_t i = 0; i < tp->n_ports; i++)
		tp_txq_flush(tp, i);
	return moved;
}

uint32_t sl_tp_flush_acks(struct sl_tp *tp)
{
	uint32_t sent;

	if (!tp->n_late && !tp->n_ack) /* n_ack: ACKs a port refused, still owed */
		return 0;
	tp_ack_late_due(tp, UINT64_MAX);
	sent = tp_send_acks(tp);
	for (uint16_t i = 0; i < tp->n_ports; i++)
		tp_txq_flush(tp, i);
	return sent;
}

uint64_t sl_tp_poll_ns(const struct sl_tp *tp)
{
	return tp->now_ns;
}

const struct sl_tp_stats *sl_tp_get_stats(const struct sl_tp *tp)
{
	return &tp->stats;
}

int sl_tp_flow_info(const struct sl_tp *tp, uint16_t node, struct sl_tp_flow_info *out)
{
	const struct tp_flow *f = flow_of(tp, node);

	if (!f)
		return -1;
	*out = (struct sl_tp_flow_info){ .cwnd = tp->cfg.cc ? f->cc.cwnd : tp->cfg.window,
					 .pace_ns = f->cc.pace_ns, .srtt_ns = f->srtt_ns,
					 .rto_ns = f->rto_ns, .in_flight = f->snd_nxt - f->snd_una,
					 .held = f->n_held,
					 .credit = psn_before(f->snd_una, f->credit_end) ?
							   f->credit_end - f->snd_una : 0,
					 .paths = f->n_paths,
					 .paths_alive = f->n_alive,
					 .snd_una = f->snd_una, .snd_nxt = f->snd_nxt, .rcv_cum = f->rcv_cum,
					 .data_ago_ns = f->rcv_last_ns ? tp->now_ns - f->rcv_last_ns : 0,
					 .ack_ago_ns = f->ack_last_ns ? tp->now_ns - f->ack_last_ns : 0,
					 .rto_retx = f->rto_retx, .acks_idle = f->acks_idle, .dup_rx = f->dup_rx,
					 .acks_refused = f->acks_refused };
	return 0;
}

uint16_t sl_tp_port_staged(const struct sl_tp *tp, uint16_t port_idx)
{
	return port_idx < tp->n_ports ? tp->txq[port_idx].n : 0;
}

int sl_tp_path_info(const struct sl_tp *tp, uint16_t node, unsigned i, struct sl_tp_path_info *out)
{
	const struct tp_flow *f = flow_of(tp, node);

	if (!f || i >= f->n_paths)
		return -1;
	const struct tp_path *p = &f->paths[i];
	*out = (struct sl_tp_path_info){ .port_idx = p->port_idx, .entropy = p->entropy,
					 .alive = !p->dead, .srtt_ns = p->rtt_valid ? p->srtt_ns : 0,
					 .in_flight = p->in_flight, .tx = p->tx, .lost = p->lost,
					 .deaths = p->deaths, .revivals = p->revivals };
	return 0;
}

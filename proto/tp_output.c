/*
 * tp_output.c: the send path.  Queued messages are cut into DATA packets
 * while the window and receiver credit allow; in-flight packets are rebuilt
 * from the message's own bytes when retransmitted (no copy is kept); ACKs
 * are built from the receive bitmap.  Frames are staged per port and handed
 * over in bursts; what a port refuses stays staged, and goes again at the
 * poll's end and the next poll's start, not at every frame staged behind it.
 * A flow sends while its window (congestion control's, or the fixed one) and
 * the receiver's credit allow; a flow paced below one packet per RTT waits
 * on the timing wheel (twheel.h) until its next send is due.
 */
#include <string.h>

#include "tp_internal.h"

void tp_txq_push(struct sl_tp *tp, uint16_t port_idx)
{
	struct tp_txq *q = &tp->txq[port_idx];
	struct sl_port *port = tp->ports[port_idx];
	uint16_t sent = port->ops->tx_burst(port, q->pkts, q->n);
	q->n = (uint16_t)(q->n - sent);
	tp->stats.tx_bursts++;
	if (q->n) {
		q->full_ns = tp->now_ns;
		q->refused = true;
		tp->stats.tx_refused++;
	}
	memmove(q->pkts, q->pkts + sent, q->n * sizeof(q->pkts[0]));
	q->bytes = 0;
	for (uint16_t i = 0; i < q->n; i++)
		q->bytes += q->pkts[i].len;
}

void tp_txq_drop_all(struct sl_tp *tp)
{
	for (uint16_t i = 0; i < tp->n_ports; i++) {
		struct tp_txq *q = &tp->txq[i];
		if (q->n)
			tp->ports[i]->ops->free(tp->ports[i], q->pkts, q->n);
		q->n = 0;
		q->bytes = 0;
	}
}

/* An empty tx buffer at the end of the port's staging queue (committed by
 * txq_commit), or NULL when the port is full or out of buffers. */
static struct sl_pkt *txq_reserve(struct sl_tp *tp, uint16_t port_idx)
{
	struct tp_txq *q = &tp->txq[port_idx];
	struct sl_port *port = tp->ports[port_idx];

	if (!q->refused && (q->n == TP_TXQ_LEN || q->bytes >= TP_TXQ_BYTES))
		tp_txq_flush(tp, port_idx);
	if (q->n == TP_TXQ_LEN || q->no_buf)
		return NULL;
	struct sl_pkt *p = &q->pkts[q->n];
	if (port->ops->alloc(port, p, 1) != 1) {
		q->no_buf = true; /* once per poll: do not hammer an empty pool */
		tp->stats.tx_no_buf++;
		return NULL;
	}
	return p;
}

/* Build into the buffer reserved on port_idx, to addr with UDP source port
 * entropy; false (buffer returned) if it cannot hold the frame. */
static bool txq_commit(struct sl_tp *tp, uint16_t port_idx, const struct sl_addr *addr,
		       uint16_t entropy, struct sl_pkt *p, const struct sl_hdr *h, const void *payload,
		       const struct sl_ack *ack)
{
	struct sl_port *port = tp->ports[port_idx];

	p->len = sl_wire_build(p->data, p->cap, &tp->txq[port_idx].src, addr, entropy, h, payload, ack);
	if (!p->len) {
		port->ops->free(port, p, 1);
		return false;
	}
	tp->txq[port_idx].n++;
	tp->txq[port_idx].bytes += p->len;
	return true;
}

static void hdr_common(const struct sl_tp *tp, const struct tp_flow *f, uint16_t port_idx,
		       struct sl_hdr *h, uint8_t type)
{
	h->version = SL_WIRE_VERSION;
	h->type = type;
	h->src_node = tp->cfg.local_node;
	h->dst_node = f->node;
	h->ts = tp_now_us(tp);
	if (tp->cfg.crc || tp->ports[port_idx]->crc)
		h->flags |= SL_F_CRC;
}

/* Whether psn's packet asks its receiver to acknowledge at once: it ends a
 * message whose caller waits for its ACK, or the window or the credit the
 * receiver granted (nothing more goes out until that ACK comes); and every
 * packet under congestion control, whose delay samples a delayed ACK would
 * inflate (Swift took a paced 6-to-1 incast for congestion and starved
 * senders: Jain's index under 0.9). */
static bool asks_ack(const struct sl_tp *tp, const struct tp_flow *f, const struct tp_slot *s, uint32_t psn)
{
	return tp->cfg.cc || (s->msg && !s->msg->ack_late && s->off + s->len == s->msg->hdr.len) ||
	       psn + 1 == f->credit_end || psn + 1 - f->snd_una >= tp_flow_window(tp, f);
}

/* The DATA header of slot s on path: the message's template at the slot's
 * offset, or an empty VOID packet when its message was cancelled.  ECN-capable,
 * so that a queue on the way marks it rather than dropping it. */
static void data_hdr(const struct sl_tp *tp, const struct tp_flow *f, const struct tp_slot *s,
		     uint32_t psn, bool retx, uint8_t path, struct sl_hdr *h)
{
	if (s->msg) {
		*h = s->msg->hdr;
		h->flags &= SL_F_CTRL; /* the only flag a caller may set */
		if (s->msg->order == SL_TP_SENDS)
			h->flags |= SL_F_SENDS_PARK; /* the receiver may park them (tp_hold.c) */
		h->offset = s->msg->hdr.offset + s->off;
		h->len = s->len;
	} else {
		memset(h, 0, sizeof(*h));
		h->flags = SL_F_VOID;
	}
	if (retx)
		h->flags |= SL_F_RETX;
	if (asks_ack(tp, f, s, psn))
		h->flags |= SL_F_ACK_NOW;
	h->flags |= (uint16_t)(path << SL_F_PATH_SHIFT);
	h->psn = psn;
	h->ip_ecn = SL_ECN_ECT0;
	hdr_common(tp, f, f->paths[path].port_idx, h, SL_T_DATA);
}

/* (Re)send the packet in psn's slot, on the least loaded live path (a
 * retransmission on another than the one it went on, when there is one). */
bool tp_emit_data(struct sl_tp *tp, struct tp_flow *f, uint32_t psn, bool retx)
{
	struct tp_slot *s = tp_slot(tp, f, psn);
	uint8_t path = tp_path_pick(f, retx ? s->path : -1);
	const struct tp_path *pp = &f->paths[path];
	struct sl_pkt *p = txq_reserve(tp, pp->port_idx);
	struct sl_hdr h;

	if (!p)
		return false;
	data_hdr(tp, f, s, psn, retx, path, &h);
	if (!txq_commit(tp, pp->port_idx, &pp->addr, pp->entropy, p, &h,
			s->msg ? s->msg->src + s->off : NULL, NULL))
		return false;
	tp_path_sent(tp, f, s, path, retx);
	s->sent_ns = f->last_tx_ns = tp->now_ns;
	tp->stats.data_tx++;
	tp->stats.bytes_tx += h.len;
	return true;
}

bool tp_retransmit(struct sl_tp *tp, struct tp_flow *f, uint32_t psn, uint64_t *cause)
{
	if (!tp_emit_data(tp, f, psn, true))
		return false;
	tp_slot(tp, f, psn)->retx++;
	(*cause)++;
	return true;
}

bool sl_tp_send_last(struct sl_tp *tp, const struct sl_tp_msg *m)
{
	struct tp_flow *f = m->dst_node < SL_MAX_NODES ? tp->flows[m->dst_node] : NULL;
	const struct tp_path *pp = f && (m->hdr.flags & SL_F_CTRL) ? &f->paths[tp_path_pick(f, -1)] : NULL;
	uint8_t frame[SL_FRAME_OVERHEAD + SL_TP_LAST_MAX + SL_CRC_LEN];
	struct sl_hdr h = m->hdr;
	uint32_t len = 0;

	h.flags = SL_F_CTRL;
	h.psn = 0;
	if (pp && h.len <= SL_TP_LAST_MAX) {
		hdr_common(tp, f, pp->port_idx, &h, SL_T_LAST);
		len = sl_wire_build(frame, sizeof(frame), &tp->txq[pp->port_idx].src, &pp->addr, pp->entropy, &h,
				    m->src, NULL);
	}
	/* not staged: its sender may be about to exit, and a staged frame dies with it */
	if (len && sl_port_send_last(tp->ports[pp->port_idx], frame, len)) {
		tp->stats.last_tx++;
		return true;
	}
	tp->stats.last_refused++;
	return false;
}

/* Packets the flow may have in flight: the congestion window (at least one:
 * below that, pacing spaces them) or the fixed window. */
uint32_t tp_flow_window(const struct sl_tp *tp, const struct tp_flow *f)
{
	if (!tp->cfg.cc || f->cc.cwnd >= tp->cfg.window)
		return tp->cfg.window;
	return f->cc.cwnd < 1 ? 1 : (uint32_t)f->cc.cwnd;
}

/* May f cut a new packet (of a message it has) now?  A paced flow whose time has not come goes on
 * the wheel (tp_send_data takes it off when it is due). */
static bool can_send(struct sl_tp *tp, struct tp_flow *f)
{
	if (f->dead || f->snd_nxt - f->snd_una >= tp_flow_window(tp, f))
		return false;
	if (!psn_before(f->snd_nxt, f->credit_end)) {
		if (f->held) /* the receiver's engine is full: it waits for the engine, not for credit */
			tp->stats.held_waits++;
		else
			tp->stats.credit_stalls++;
		return false;
	}
	if (f->cc.pace_ns && tp->now_ns < f->next_send_ns) {
		sl_twheel_arm(&tp->pacer, &f->pace_node, f->next_send_ns);
		tp->stats.paced_waits++;
		return false;
	}
	return true;
}

/* The first queued message that the receiver has not parked (tp_hold.c),
 * and in *prev the one before it (NULL: it is the head).  The parked ones
 * in front are walked once per change of the parks, not once per packet:
 * park_skip keeps the last of them (tp_unlink keeps it on the queue). */
static struct sl_tp_msg *next_msg(struct tp_flow *f, struct sl_tp_msg **prev)
{
	struct sl_tp_msg *m;

	if (!f->park_slots) {
		*prev = NULL;
		return f->q_head;
	}
	for (m = f->park_skip ? f->park_skip->next : f->q_head; m && tp_park_of(f, m); m = m->next)
		f->park_skip = m;
	*prev = f->park_skip;
	return m;
}

/* Cut the next packet of m, queued after prev, and send it under a new PSN. */
static bool cut_packet(struct sl_tp *tp, struct tp_flow *f, struct sl_tp_msg *m, struct sl_tp_msg *prev)
{
	uint32_t psn = f->snd_nxt, left = m->hdr.len - m->next_off;
	struct tp_slot *s = tp_slot(tp, f, psn);

	*s = (struct tp_slot){ .msg = m, .off = m->next_off,
			       .len = left < tp->cfg.payload ? left : tp->cfg.payload };
	if (!tp_emit_data(tp, f, psn, false))
		return false;
	if (f->snd_una == f->snd_nxt)
		f->progress_ns = tp->now_ns; /* idle until now: the dead clock starts here */
	f->next_send_ns = tp->now_ns + f->cc.pace_ns;
	f->snd_nxt++;
	m->unacked++;
	m->next_off += s->len;
	if (m->next_off == m->hdr.len)
		tp_unlink(f, m, prev);
	return true;
}

static uint32_t send_flow(struct sl_tp *tp, struct tp_flow *f)
{
	uint32_t n = f->n_held ? tp_hold_resend(tp, f, TP_FLOW_BURST) : 0;
	struct sl_tp_msg *m, *prev;

	while (n < TP_FLOW_BURST && (m = next_msg(f, &prev)) && can_send(tp, f) && cut_packet(tp, f, m, prev))
		n++;
	return n;
}

/* A paced flow's time has come: it takes its turn in tp_send_data. */
static void pace_due(void *arg, struct sl_twheel_node *n)
{
	(void)arg;
	(void)n;
}

/* The lowest routed[] index in [from, end) whose flow is sendable, or end. */
static unsigned next_sendable(const struct sl_tp *tp, unsigned from, unsigned end)
{
	for (unsigned w = from / 64; w * 64 < end; w++) {
		uint64_t bits = tp->sendable[w] & (w == from / 64 ? ~0ull << (from % 64) : ~0ull);
		if (bits) {
			unsigned i = w * 64 + (unsigned)__builtin_ctzll(bits);
			return i < end ? i : end;
		}
	}
	return end;
}

/* A sendable flow's turn; it leaves the set once nothing is queued or held. */
static uint32_t send_turn(struct sl_tp *tp, struct tp_flow *f)
{
	if (sl_twheel_armed(&f->pace_node)) {
		if (f->cc.pace_ns) /* still paced: it waits its turn on the wheel */
			return 0;
		sl_twheel_cancel(&tp->pacer, &f->pace_node);
	}
	uint32_t n = send_flow(tp, f);
	if (!f->q_head && !f->n_held)
		tp->sendable[f->route_idx / 64] &= ~(1ull << (f->route_idx % 64));
	return n;
}

/* Each sendable flow in routed[] order from send_rr, which moves on by one a
 * pass (round robin); idle flows cost nothing, however many peers there are. */
uint32_t tp_send_data(struct sl_tp *tp)
{
	uint32_t moved = 0;
	unsigned i, rr = tp->send_rr, n = tp->n_routed;

	if (!n)
		return 0;
	sl_twheel_expire(&tp->pacer, tp->now_ns, pace_due, tp);
	for (i = next_sendable(tp, rr, n); i < n; i = next_sendable(tp, i + 1, n))
		moved += send_turn(tp, tp->flows[tp->routed[i]]);
	for (i = next_sendable(tp, 0, rr); i < rr; i = next_sendable(tp, i + 1, rr))
		moved += send_turn(tp, tp->flows[tp->routed[i]]);
	tp->send_rr = (uint16_t)((rr + 1) % n);
	return moved;
}

/* SACK bit i = PSN rcv_cum + 1 + i: the receive ring bitmap rotated so that
 * bit (rcv_cum + 1) % SL_MAX_WINDOW comes first. */
static void sack_bits(const struct tp_flow *f, uint64_t sack[TP_MAP_WORDS])
{
	uint32_t start = (f->rcv_cum + 1) % SL_MAX_WINDOW, w = start / 64, b = start % 64;

	for (uint32_t i = 0; i < TP_MAP_WORDS; i++) {
		uint64_t lo = f->rcv_map[(w + i) % TP_MAP_WORDS];
		uint64_t hi = f->rcv_map[(w + i + 1) % TP_MAP_WORDS];
		sack[i] = b ? lo >> b | hi << (64 - b) : lo;
	}
}

/* This receiver's grant to f's sender: its budget shared among the senders
 * active here, within the receive bitmap's span (credit counts from cum_psn).
 * A grant shrinks at once but grows by at most the packets received since
 * the last ACK (doubling per RTT, as slow start), so that the first sender
 * of an incast is not handed the whole budget before the others show up. */
static uint32_t credit(const struct sl_tp *tp, struct tp_flow *f)
{
	uint32_t share = tp->cfg.rx_credit / tp->rx_active;

	if (share < TP_MIN_CREDIT)
		share = TP_MIN_CREDIT;
	if (share > SL_MAX_WINDOW)
		share = SL_MAX_WINDOW;
	if (share > f->rcv_grant + f->rcv_new)
		share = f->rcv_grant + f->rcv_new;
	f->rcv_new = 0;
	return f->rcv_grant = share;
}

/* An ACK of f's receive state on path (a probe: flagged so, carrying the
 * path id), or (path < 0) an ACK back out of the port the DATA came in on,
 * echoing its timestamp, path and CE marks. */
static bool send_ack(struct sl_tp *tp, struct tp_flow *f, int path)
{
	const struct tp_path *pp = path >= 0 ? &f->paths[path] : tp_path_on_port(f, f->ack_port);
	struct sl_pkt *p = txq_reserve(tp, pp->port_idx);
	struct sl_hdr h = { 0 };
	struct sl_ack ack = { .cum_psn = f->rcv_cum, .echo_ts = f->rcv_echo_ts,
			      .credit = f->rcv_grant, .ce = f->rcv_ce, .echo_path = f->rcv_echo_path };

	if (!p) {
		tp->stats.ctl_refused++;
		f->acks_refused++;
		return false;
	}
	if (path < 0) {
		ack.credit = credit(tp, f);
		h.flags = f->rcv_dup ? SL_F_DSACK : 0;
	} else { /* a probe echoes nothing: no RTT sample, no marks counted twice */
		h.flags = (uint16_t)(SL_F_PROBE | path << SL_F_PATH_SHIFT);
		ack = (struct sl_ack){ .cum_psn = ack.cum_psn, .credit = ack.credit,
				       .echo_path = SL_ECHO_NONE };
	}
	tp_hold_ack(f, &ack, &h.flags);
	tp_park_ack(f, &h, &ack);
	sack_bits(f, ack.sack);
	h.psn = f->ack_nxt++;
	hdr_common(tp, f, pp->port_idx, &h, SL_T_ACK);
	uint16_t entropy = path >= 0 ? pp->entropy : tp_entropy(tp, f->node, f->rcv_echo_path);
	if (!txq_commit(tp, pp->port_idx, &pp->addr, entropy, p, &h, NULL, &ack))
		return false;
	if (path < 0) {
		f->rcv_ce = 0;
		f->rcv_dup = false;
		tp_ack_sent(tp, f);
	}
	tp->stats.ack_tx++;
	return true;
}

bool tp_send_probe(struct sl_tp *tp, struct tp_flow *f, uint8_t path)
{
	return send_ack(tp, f, path);
}

/* f's owed ACK, then one for each park not named yet (tp_hold.c), which
 * echo nothing (the first did); false when its port refused one. */
static bool ack_flow(struct sl_tp *tp, struct tp_flow *f, uint32_t *sent)
{
	if (!send_ack(tp, f, -1))
		return false;
	(*sent)++;
	while (f->rcv_park_unsaid) {
		f->rcv_echo_path = SL_ECHO_NONE;
		if (!send_ack(tp, f, -1))
			return false;
		(*sent)++;
	}
	return true;
}

/* One ACK per flow that owes one now (tp_input.c).  One its port refuses
 * (queue full, no buffer) stays owed and listed: it goes at the next port's
 * turn or pass, built from the receive state then, not at the sender's
 * retransmission. */
uint32_t tp_send_acks(struct sl_tp *tp)
{
	uint32_t sent = 0;
	uint16_t owed = 0;

	for (uint16_t i = 0; i < tp->n_ack; i++) {
		struct tp_flow *f = tp->flows[tp->ack_list[i]];
		if (ack_flow(tp, f, &sent))
			f->ack_due = f->probe_due = false;
		else
			tp->ack_list[owed++] = f->node;
	}
	tp->n_ack = owed;
	return sent;
}

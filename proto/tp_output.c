/*
 * tp_output.c: the send path.  Queued messages are cut into DATA packets
 * while the window and receiver credit allow; in-flight packets are rebuilt
 * from the message's own bytes when retransmitted (no copy is kept); ACKs
 * are built from the receive bitmap.  Frames are staged per port and handed
 * over in bursts; what a port refuses stays staged for the next poll.
 */
#include <string.h>

#include "tp_internal.h"

/* UDP source port: 0xC000 plus a hash, so that ECMP spreads a flow's packets. */
static uint16_t entropy(const struct sl_tp *tp, const struct tp_flow *f, uint32_t salt)
{
	uint32_t x = ((uint32_t)tp->cfg.local_node << 16 | f->node) ^ salt * 0x9e3779b1u;

	x ^= x >> 15;
	x *= 0x2c1b3c6du;
	x ^= x >> 12;
	return (uint16_t)(0xc000 | (x & 0x3fff));
}

void tp_txq_flush(struct sl_tp *tp, uint16_t port_idx)
{
	struct tp_txq *q = &tp->txq[port_idx];
	struct sl_port *port = tp->ports[port_idx];

	if (!q->n)
		return;
	uint16_t sent = port->ops->tx_burst(port, q->pkts, q->n);
	q->n = (uint16_t)(q->n - sent);
	memmove(q->pkts, q->pkts + sent, q->n * sizeof(q->pkts[0]));
}

void tp_txq_drop_all(struct sl_tp *tp)
{
	for (uint16_t i = 0; i < tp->n_ports; i++) {
		struct tp_txq *q = &tp->txq[i];
		if (q->n)
			tp->ports[i]->ops->free(tp->ports[i], q->pkts, q->n);
		q->n = 0;
	}
}

/* An empty tx buffer at the end of the port's staging queue (committed by
 * txq_commit), or NULL when the port is full or out of buffers. */
static struct sl_pkt *txq_reserve(struct sl_tp *tp, uint16_t port_idx)
{
	struct tp_txq *q = &tp->txq[port_idx];
	struct sl_port *port = tp->ports[port_idx];

	if (q->n == TP_TXQ_LEN)
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

/* Build into the reserved buffer; false (buffer returned) if it cannot hold the frame. */
static bool txq_commit(struct sl_tp *tp, struct tp_flow *f, struct sl_pkt *p,
		       const struct sl_hdr *h, const void *payload, const struct sl_ack *ack,
		       uint32_t salt)
{
	struct sl_port *port = tp->ports[f->port_idx];
	struct sl_addr src;

	sl_addr_for_node(tp->cfg.local_node, &src);
	memcpy(src.mac, port->mac, sizeof(src.mac));
	p->len = sl_wire_build(p->data, p->cap, &src, &f->addr, entropy(tp, f, salt), h, payload, ack);
	if (!p->len) {
		port->ops->free(port, p, 1);
		return false;
	}
	tp->txq[f->port_idx].n++;
	return true;
}

static void hdr_common(const struct sl_tp *tp, const struct tp_flow *f, struct sl_hdr *h,
		       uint8_t type)
{
	h->version = SL_WIRE_VERSION;
	h->type = type;
	h->src_node = tp->cfg.local_node;
	h->dst_node = f->node;
	h->ts = tp_now_us(tp);
	if (tp->cfg.crc || tp->ports[f->port_idx]->crc)
		h->flags |= SL_F_CRC;
}

/* The DATA header of slot s: the message's template at the slot's offset,
 * or an empty VOID packet when its message was cancelled. */
static void data_hdr(const struct sl_tp *tp, const struct tp_flow *f, const struct tp_slot *s,
		     uint32_t psn, bool retx, struct sl_hdr *h)
{
	if (s->msg) {
		*h = s->msg->hdr;
		h->flags &= SL_F_CTRL; /* the only flag a caller may set */
		h->offset = s->msg->hdr.offset + s->off;
		h->len = s->len;
	} else {
		memset(h, 0, sizeof(*h));
		h->flags = SL_F_VOID;
	}
	if (retx)
		h->flags |= SL_F_RETX;
	h->psn = psn;
	hdr_common(tp, f, h, SL_T_DATA);
}

/* (Re)send the packet in psn's slot. */
static bool emit_data(struct sl_tp *tp, struct tp_flow *f, uint32_t psn, bool retx)
{
	struct tp_slot *s = tp_slot(tp, f, psn);
	struct sl_pkt *p = txq_reserve(tp, f->port_idx);
	struct sl_hdr h;

	if (!p)
		return false;
	data_hdr(tp, f, s, psn, retx, &h);
	if (!txq_commit(tp, f, p, &h, s->msg ? s->msg->src + s->off : NULL, NULL, psn))
		return false;
	s->sent_ns = f->last_tx_ns = tp->now_ns;
	tp->stats.data_tx++;
	tp->stats.bytes_tx += h.len;
	return true;
}

bool tp_retransmit(struct sl_tp *tp, struct tp_flow *f, uint32_t psn, uint64_t *cause)
{
	if (!emit_data(tp, f, psn, true))
		return false;
	tp_slot(tp, f, psn)->retx++;
	(*cause)++;
	return true;
}

/* Packets the flow may have in flight: the congestion window (at least one:
 * below that, pacing spaces them) or the fixed window. */
uint32_t tp_flow_window(const struct sl_tp *tp, const struct tp_flow *f)
{
	if (!tp->cfg.cc || f->cc.cwnd >= tp->cfg.window)
		return tp->cfg.window;
	return f->cc.cwnd < 1 ? 1 : (uint32_t)f->cc.cwnd;
}

static bool can_send(const struct sl_tp *tp, const struct tp_flow *f)
{
	return f->q_head && !f->dead && f->snd_nxt - f->snd_una < tp_flow_window(tp, f) &&
	       psn_before(f->snd_nxt, f->credit_end) &&
	       !(f->cc.pace_ns && tp->now_ns < f->next_send_ns);
}

/* Cut the next packet of the head message and send it under a new PSN. */
static bool cut_packet(struct sl_tp *tp, struct tp_flow *f)
{
	struct sl_tp_msg *m = f->q_head;
	uint32_t psn = f->snd_nxt, left = m->hdr.len - m->next_off;
	struct tp_slot *s = tp_slot(tp, f, psn);

	*s = (struct tp_slot){ .msg = m, .off = m->next_off,
			       .len = left < tp->cfg.payload ? left : tp->cfg.payload };
	if (!emit_data(tp, f, psn, false))
		return false;
	if (f->snd_una == f->snd_nxt)
		f->progress_ns = tp->now_ns; /* idle until now: the dead clock starts here */
	f->next_send_ns = tp->now_ns + f->cc.pace_ns;
	f->snd_nxt++;
	m->unacked++;
	m->next_off += s->len;
	if (m->next_off == m->hdr.len) {
		f->q_head = m->next;
		if (!f->q_head)
			f->q_tail = NULL;
		m->next = NULL;
		m->queued = false;
	}
	return true;
}

static uint32_t send_flow(struct sl_tp *tp, struct tp_flow *f)
{
	uint32_t n = 0;

	while (n < TP_FLOW_BURST && can_send(tp, f) && cut_packet(tp, f))
		n++;
	return n;
}

uint32_t tp_send_data(struct sl_tp *tp)
{
	uint32_t moved = 0;

	if (!tp->n_routed)
		return 0;
	for (uint16_t i = 0; i < tp->n_routed; i++)
		moved += send_flow(tp, tp->flows[tp->routed[(tp->send_rr + i) % tp->n_routed]]);
	tp->send_rr = (uint16_t)((tp->send_rr + 1) % tp->n_routed);
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

static bool send_ack(struct sl_tp *tp, struct tp_flow *f)
{
	struct sl_pkt *p = txq_reserve(tp, f->port_idx);
	struct sl_hdr h = { 0 };
	/* credit counts PSNs from cum_psn on: the receive bitmap's span */
	struct sl_ack ack = { .cum_psn = f->rcv_cum, .echo_ts = f->rcv_echo_ts,
			      .credit = SL_MAX_WINDOW };

	if (!p)
		return false;
	sack_bits(f, ack.sack);
	hdr_common(tp, f, &h, SL_T_ACK);
	if (!txq_commit(tp, f, p, &h, NULL, &ack, f->rcv_cum))
		return false;
	tp->stats.ack_tx++;
	return true;
}

/* One ACK per flow that received DATA in the last burst.  An ACK that finds
 * no buffer is skipped: the sender's retransmission will ask again. */
uint32_t tp_send_acks(struct sl_tp *tp)
{
	uint32_t sent = 0;

	for (uint16_t i = 0; i < tp->n_ack; i++) {
		struct tp_flow *f = tp->flows[tp->ack_list[i]];
		f->ack_due = false;
		sent += send_ack(tp, f);
	}
	tp->n_ack = 0;
	return sent;
}

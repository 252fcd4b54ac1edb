/*
 * tp_input.c: the receive path.  Frames are parsed and sorted (foreign,
 * malformed, DATA, ACK); DATA is applied exactly once per PSN through the
 * flow's receive bitmap; ACKs retire in-flight packets, feed the RTT
 * estimator, the paths' liveness, congestion control (delay and the CE marks
 * the receiver echoes) and the receiver's credit, and trigger fast
 * retransmission of SACK holes.  A probe (an ACK flagged SL_F_PROBE) is
 * answered on the port it came in on.
 */
#include "tp_internal.h"

static bool rcv_test(const struct tp_flow *f, uint32_t psn)
{
	uint32_t bit = psn % SL_MAX_WINDOW;

	return f->rcv_map[bit / 64] >> (bit % 64) & 1;
}

static void rcv_flip(struct tp_flow *f, uint32_t psn)
{
	uint32_t bit = psn % SL_MAX_WINDOW;

	f->rcv_map[bit / 64] ^= 1ull << (bit % 64);
}

/* Mark psn applied; slide rcv_cum over the applied prefix, clearing its bits
 * so they stand for PSNs a window later. */
static void rcv_mark(struct tp_flow *f, uint32_t psn)
{
	rcv_flip(f, psn);
	while (rcv_test(f, f->rcv_cum)) {
		rcv_flip(f, f->rcv_cum);
		f->rcv_cum++;
	}
}

/* f owes an ACK after this burst. */
void tp_ack_due(struct sl_tp *tp, struct tp_flow *f)
{
	if (!f->ack_due) {
		f->ack_due = true;
		tp->ack_list[tp->n_ack++] = f->node;
	}
}

/* f owes an ACK echoing h's ts and path, out of the port it came in on; a
 * probe's echo is kept over later DATA's, or its path would never revive.
 * late: it may wait for cfg.ack_every packets or cfg.ack_delay_ns. */
static void ack_owed(struct sl_tp *tp, struct tp_flow *f, const struct sl_hdr *h, uint16_t port_idx,
		     bool probe, bool late)
{
	if (!(f->ack_due && f->probe_due) || probe) {
		f->rcv_echo_ts = h->ts;
		f->rcv_echo_path = (uint8_t)((h->flags & SL_F_PATH_MASK) >> SL_F_PATH_SHIFT);
		f->ack_port = port_idx;
	}
	f->probe_due |= probe;
	if (!late) {
		tp_ack_due(tp, f);
	} else if (!f->ack_due && !f->ack_late_ns) {
		f->ack_late_ns = tp->now_ns + tp->cfg.ack_delay_ns;
		if (!tp->n_late++ || f->ack_late_ns < tp->late_due_ns)
			tp->late_due_ns = f->ack_late_ns;
	}
}

/* f's ACK went out: it covers any delayed one. */
void tp_ack_sent(struct sl_tp *tp, struct tp_flow *f)
{
	if (f->ack_late_ns) {
		f->ack_late_ns = 0;
		tp->n_late--;
	}
}

/* Delayed ACKs whose time has come (all: by) join this pass's ACKs.  One
 * that finds no buffer stays owed, and due. */
void tp_ack_late_due(struct sl_tp *tp, uint64_t by)
{
	uint64_t next = UINT64_MAX;

	if (!tp->n_late || by < tp->late_due_ns)
		return;
	for (uint16_t i = 0; i < tp->n_routed; i++) {
		struct tp_flow *f = tp->flows[tp->routed[i]];
		if (!f->ack_late_ns)
			continue;
		if (f->ack_late_ns <= by) {
			tp->stats.ack_delayed += !f->ack_due;
			tp_ack_due(tp, f);
		}
		if (f->ack_late_ns < next)
			next = f->ack_late_ns;
	}
	tp->late_due_ns = next;
}

static bool rcv_holes(const struct tp_flow *f)
{
	return (f->rcv_map[0] | f->rcv_map[1] | f->rcv_map[2] | f->rcv_map[3]) != 0;
}

/* Whether the ACK of h, just applied, may wait: only in-order, first-copy
 * DATA that nobody waits for.  What loss recovery needs goes at once (a
 * duplicate, a retransmission, a hole: the sender's SACK logic), and so do
 * a hold, a CE mark, a control message, what the sender asked for
 * (SL_F_ACK_NOW), and every cfg.ack_every packets or a quarter of the
 * sender's grant, so that its credit never runs out waiting. */
static bool ack_may_wait(const struct sl_tp *tp, const struct tp_flow *f, const struct sl_hdr *h,
			 bool in_order, enum sl_deliver_result res)
{
	return in_order && res == SL_DELIVER_DONE && !f->rcv_holding &&
	       !(h->flags & (SL_F_ACK_NOW | SL_F_RETX | SL_F_CTRL | SL_F_VOID)) && h->ip_ecn != SL_ECN_CE &&
	       f->rcv_new < tp->cfg.ack_every && 4 * f->rcv_new < f->rcv_grant && !rcv_holes(f);
}

static void rx_data(struct sl_tp *tp, struct tp_flow *f, const struct sl_hdr *h,
		    const uint8_t *payload, uint16_t port_idx)
{
	bool old = psn_before(h->psn, f->rcv_cum), in_order = h->psn == f->rcv_cum;
	enum sl_deliver_result res = SL_DELIVER_DONE;

	f->rcv_last_ns = tp->now_ns;
	f->rcv_sends_park |= (h->flags & SL_F_SENDS_PARK) != 0; /* before the engine may park them */
	if (h->ip_ecn == SL_ECN_CE) { /* counted even when dropped below: the queue was full all the same */
		tp->stats.rx_ce++;
		if (f->rcv_ce < UINT16_MAX)
			f->rcv_ce++;
	}
	if (!old && h->psn - f->rcv_cum >= SL_MAX_WINDOW) {
		tp->stats.rx_out_of_window++;
		return;
	}
	if (old || rcv_test(f, h->psn)) {
		/* even a duplicate is answered: the ACK that retires it may have been lost */
		ack_owed(tp, f, h, port_idx, false, false);
		tp->stats.rx_dup++;
		f->dup_rx++;
		f->rcv_dup = true;
		return;
	}
	if (h->flags & SL_F_VOID) {
		tp->stats.rx_void++;
	} else {
		res = tp->cb.deliver(tp->cb.arg, h, payload);
		if (res == SL_DELIVER_RETRY) {
			tp->stats.rx_retry++;
			tp_hold_rx(tp, f, h->psn);
			ack_owed(tp, f, h, port_idx, false, false);
			return;
		}
		if (res == SL_DELIVER_HOLD)
			tp_hold_rx(tp, f, h->psn + 1);
		tp->stats.data_rx++;
		tp->stats.bytes_rx += h->len;
	}
	f->rcv_new++;
	rcv_mark(f, h->psn);
	ack_owed(tp, f, h, port_idx, false, ack_may_wait(tp, f, h, in_order, res));
}

/* What one ACK retired. */
struct ack_result {
	uint32_t acked;   /* PSNs newly acknowledged */
	bool progress;    /* something new was acknowledged */
	bool clean;       /* ... of which a packet never retransmitted: an RTT sample */
};

/* Retire one in-flight PSN, if not acknowledged before; note what loss
 * detection (tp_loss.c) learns from it. */
static void ack_psn(struct sl_tp *tp, struct tp_flow *f, uint32_t psn, struct ack_result *r)
{
	struct tp_slot *s = tp_slot(tp, f, psn);
	struct sl_tp_msg *m = s->msg;

	if (s->acked)
		return;
	s->acked = true;
	r->acked++;
	r->progress = true;
	if (!s->retx) { /* a retransmission's send time is ambiguous: which copy arrived? */
		r->clean = true;
		f->reordering_seen |= psn_before(psn, f->sacked_end);
		if (s->sent_ns > f->rack_sent_ns)
			f->rack_sent_ns = s->sent_ns;
	}
	if (!psn_before(psn, f->sacked_end))
		f->sacked_end = psn + 1;
	if (s->held)
		tp_hold_release(f, s);
	else
		tp_path_acked(f, s);
	if (m && --m->unacked == 0 && !m->queued)
		tp->cb.acked(tp->cb.arg, m);
}

static bool in_flight(const struct tp_flow *f, uint32_t psn)
{
	return !psn_before(psn, f->snd_una) && psn_before(psn, f->snd_nxt);
}

/* Retire what ack covers. */
static void ack_apply(struct sl_tp *tp, struct tp_flow *f, const struct sl_ack *ack,
		      struct ack_result *r)
{
	for (; psn_before(f->snd_una, ack->cum_psn); f->snd_una++)
		ack_psn(tp, f, f->snd_una, r);
	for (uint32_t w = 0; w < TP_MAP_WORDS; w++) {
		for (uint64_t bits = ack->sack[w]; bits; bits &= bits - 1) {
			uint32_t psn = ack->cum_psn + 1 + w * 64 + (uint32_t)__builtin_ctzll(bits);
			if (in_flight(f, psn))
				ack_psn(tp, f, psn, r);
		}
	}
	while (f->snd_una != f->snd_nxt && tp_slot(tp, f, f->snd_una)->acked)
		f->snd_una++;
	if (psn_before(f->sacked_end, f->snd_una))
		f->sacked_end = f->snd_una; /* no holes: keep it close, PSNs wrap */
}

static bool has_sack(const struct sl_ack *ack)
{
	return (ack->sack[0] | ack->sack[1] | ack->sack[2] | ack->sack[3]) != 0;
}

static void rx_ack(struct sl_tp *tp, struct tp_flow *f, const struct sl_hdr *h,
		   const struct sl_ack *ack, uint16_t port_idx)
{
	struct ack_result r = { 0 };
	uint32_t una = f->snd_una;

	tp->stats.ack_rx++;
	f->ack_last_ns = tp->now_ns;
	if (h->flags & SL_F_PROBE)
		ack_owed(tp, f, h, port_idx, true, false);
	/* a dead flow calls nobody back; an ACK beyond snd_nxt is stale or forged */
	if (f->dead)
		return;
	if (psn_before(f->snd_nxt, ack->cum_psn)) {
		tp->stats.ack_beyond++;
		return;
	}
	if (h->flags & SL_F_DSACK)
		tp_loss_on_dsack(tp, f);
	ack_apply(tp, f, ack, &r);
	if (r.progress)
		tp_on_progress(tp, f);
	else if (una != f->snd_nxt)
		f->acks_idle++;
	uint64_t delay_ns = r.clean && ack->echo_path != SL_ECHO_NONE ? tp_rtt_sample(tp, f, ack->echo_ts) : 0;
	tp_path_echo(tp, f, ack->echo_path, ack->echo_ts, delay_ns);
	tp->stats.ack_ce += ack->ce != 0;
	if (tp->cfg.cc && (r.progress || ack->ce))
		tp->cfg.cc->on_ack(&f->cc, r.acked, delay_ns, ack->ce != 0, tp->now_ns);
	/* the grant may shrink (more senders arrived), but an ACK older than
	 * what we know says nothing: one that acknowledges less, or one sent
	 * before an ACK we had (a hold overtaken by its reopening) */
	if (!psn_before(ack->cum_psn, una) && !psn_before(h->psn, f->ack_seen)) {
		f->ack_seen = h->psn;
		f->credit_end = ack->cum_psn + (ack->credit < SL_MAX_WINDOW ? ack->credit : SL_MAX_WINDOW);
		tp_hold_on_ack(tp, f, h->flags & SL_F_HOLD);
		tp_park_on_ack(tp, f, h, ack);
	}
	if (has_sack(ack))
		tp_detect_losses(tp, f);
}

/* A last word (wire.h SL_T_LAST): a control message, delivered as it
 * comes, whatever the flow's state; nothing is acknowledged or marked. */
static void rx_last(struct sl_tp *tp, const struct sl_hdr *h, const uint8_t *payload)
{
	if (!(h->flags & SL_F_CTRL)) {
		tp->stats.rx_malformed++;
		return;
	}
	tp->stats.last_rx++;
	(void)tp->cb.deliver(tp->cb.arg, h, payload);
}

static struct tp_flow *rx_flow(const struct sl_tp *tp, const struct sl_hdr *h)
{
	if (h->dst_node != tp->cfg.local_node || h->src_node >= SL_MAX_NODES)
		return NULL;
	return tp->flows[h->src_node];
}

static void rx_frame(struct sl_tp *tp, const struct sl_pkt *pkt, uint16_t port_idx)
{
	struct sl_hdr h;
	struct sl_ack ack;
	const uint8_t *payload;
	enum sl_parse_result r = sl_wire_parse(pkt->data, pkt->len, &h, &payload, &ack);

	if (r != SL_PARSE_OK) {
		if (r == SL_PARSE_NOT_SLUICE)
			tp->stats.rx_foreign++;
		else
			tp->stats.rx_malformed++;
		tp->stats.rx_bad_crc += r == SL_PARSE_BAD_CRC;
		return;
	}
	struct tp_flow *f = rx_flow(tp, &h);
	if (!f)
		tp->stats.rx_foreign++;
	else if (h.type == SL_T_DATA)
		rx_data(tp, f, &h, payload, port_idx);
	else if (h.type == SL_T_ACK)
		rx_ack(tp, f, &h, &ack, port_idx);
	else
		rx_last(tp, &h, payload);
}

uint32_t tp_rx_port(struct sl_tp *tp, uint16_t port_idx)
{
	struct sl_port *port = tp->ports[port_idx];
	struct sl_pkt pkts[TP_RX_BURST];
	uint16_t n = port->ops->rx_burst(port, pkts, TP_RX_BURST), nfree = 0;

	tp->rx_port = port_idx;
	for (uint16_t i = 0; i < n; i++) {
		tp->rx_pkt = &pkts[i];
		tp->rx_kept = false;
		rx_frame(tp, &pkts[i], port_idx);
		if (!tp->rx_kept) /* the kept ones leave the batch */
			pkts[nfree++] = pkts[i];
	}
	tp->rx_pkt = NULL;
	if (nfree)
		port->ops->free(port, pkts, nfree);
	return n;
}

bool sl_tp_keep_frame(struct sl_tp *tp, struct sl_tp_frame *f)
{
	if (!tp->rx_pkt || tp->rx_kept || tp->kept[tp->rx_port] >= tp->ports[tp->rx_port]->rx_keep)
		return false;
	tp->rx_kept = true;
	tp->kept[tp->rx_port]++;
	*f = (struct sl_tp_frame){ .pkt = *tp->rx_pkt, .port = tp->rx_port };
	return true;
}

void sl_tp_free_frame(struct sl_tp *tp, struct sl_tp_frame *f)
{
	struct sl_port *port = tp->ports[f->port];

	port->ops->free(port, &f->pkt, 1);
	tp->kept[f->port]--;
}

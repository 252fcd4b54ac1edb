/*
 * tp_input.c: the receive path.  Frames are parsed and sorted (foreign,
 * malformed, DATA, ACK); DATA is applied exactly once per PSN through the
 * flow's receive bitmap; ACKs retire in-flight packets, feed the RTT
 * estimator and trigger fast retransmission of SACK holes.
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

static void ack_owed(struct sl_tp *tp, struct tp_flow *f, uint32_t ts)
{
	f->rcv_echo_ts = ts;
	if (!f->ack_due) {
		f->ack_due = true;
		tp->ack_list[tp->n_ack++] = f->node;
	}
}

static void rx_data(struct sl_tp *tp, struct tp_flow *f, const struct sl_hdr *h,
		    const uint8_t *payload)
{
	bool old = psn_before(h->psn, f->rcv_cum);

	if (!old && h->psn - f->rcv_cum >= SL_MAX_WINDOW) {
		tp->stats.rx_out_of_window++;
		return;
	}
	/* even a duplicate is answered: the ACK that retires it may have been lost */
	ack_owed(tp, f, h->ts);
	if (old || rcv_test(f, h->psn)) {
		tp->stats.rx_dup++;
		return;
	}
	if (h->flags & SL_F_VOID) {
		tp->stats.rx_void++;
	} else if (tp->cb.deliver(tp->cb.arg, h, payload) == SL_DELIVER_RETRY) {
		tp->stats.rx_retry++;
		return;
	} else {
		tp->stats.data_rx++;
		tp->stats.bytes_rx += h->len;
	}
	rcv_mark(f, h->psn);
}

/* Retire one in-flight PSN; true when it was not acknowledged before. */
static bool ack_psn(struct sl_tp *tp, struct tp_flow *f, uint32_t psn, bool *clean)
{
	struct tp_slot *s = tp_slot(tp, f, psn);
	struct sl_tp_msg *m = s->msg;

	if (s->acked)
		return false;
	s->acked = true;
	*clean |= s->retx == 0;
	if (m && --m->unacked == 0 && !m->queued)
		tp->cb.acked(tp->cb.arg, m);
	return true;
}

static bool in_flight(const struct tp_flow *f, uint32_t psn)
{
	return !psn_before(psn, f->snd_una) && psn_before(psn, f->snd_nxt);
}

/* Retire what ack covers; true when anything new was acknowledged. */
static bool ack_apply(struct sl_tp *tp, struct tp_flow *f, const struct sl_ack *ack, bool *clean)
{
	bool progress = false;

	for (; psn_before(f->snd_una, ack->cum_psn); f->snd_una++)
		progress |= ack_psn(tp, f, f->snd_una, clean);
	for (uint32_t w = 0; w < TP_MAP_WORDS; w++) {
		for (uint64_t bits = ack->sack[w]; bits; bits &= bits - 1) {
			uint32_t psn = ack->cum_psn + 1 + w * 64 + (uint32_t)__builtin_ctzll(bits);
			if (in_flight(f, psn))
				progress |= ack_psn(tp, f, psn, clean);
		}
	}
	while (f->snd_una != f->snd_nxt && tp_slot(tp, f, f->snd_una)->acked)
		f->snd_una++;
	return progress;
}

/* Retransmit holes with at least TP_DUPTHRESH SACKed PSNs above them,
 * unless already retransmitted within the last smoothed RTT. */
static void fast_retransmit(struct sl_tp *tp, struct tp_flow *f)
{
	uint64_t guard = f->rtt_valid ? f->srtt_ns : f->rto_ns;
	uint32_t sacked_above = 0;

	for (uint32_t psn = f->snd_nxt; psn != f->snd_una;) {
		struct tp_slot *s = tp_slot(tp, f, --psn);
		if (s->acked) {
			sacked_above++;
			continue;
		}
		if (sacked_above < TP_DUPTHRESH || (s->retx && tp->now_ns - s->sent_ns < guard))
			continue;
		if (!tp_retransmit(tp, f, psn, &tp->stats.retx_sack))
			return;
	}
}

static bool has_sack(const struct sl_ack *ack)
{
	return (ack->sack[0] | ack->sack[1] | ack->sack[2] | ack->sack[3]) != 0;
}

static void rx_ack(struct sl_tp *tp, struct tp_flow *f, const struct sl_ack *ack)
{
	bool clean = false;
	uint32_t credit_end = ack->cum_psn + ack->credit;

	tp->stats.ack_rx++;
	/* a dead flow calls nobody back; an ACK beyond snd_nxt is stale or forged */
	if (f->dead || psn_before(f->snd_nxt, ack->cum_psn))
		return;
	if (ack_apply(tp, f, ack, &clean))
		tp_on_progress(tp, f);
	if (clean)
		tp_rtt_sample(tp, f, ack->echo_ts);
	if (psn_before(f->credit_end, credit_end))
		f->credit_end = credit_end;
	if (has_sack(ack))
		fast_retransmit(tp, f);
}

static struct tp_flow *rx_flow(const struct sl_tp *tp, const struct sl_hdr *h)
{
	if (h->dst_node != tp->cfg.local_node || h->src_node >= SL_MAX_NODES)
		return NULL;
	return tp->flows[h->src_node];
}

static void rx_frame(struct sl_tp *tp, const struct sl_pkt *pkt)
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
		rx_data(tp, f, &h, payload);
	else
		rx_ack(tp, f, &ack);
}

uint32_t tp_rx_port(struct sl_tp *tp, uint16_t port_idx)
{
	struct sl_port *port = tp->ports[port_idx];
	struct sl_pkt pkts[TP_RX_BURST];
	uint16_t n = port->ops->rx_burst(port, pkts, TP_RX_BURST);

	for (uint16_t i = 0; i < n; i++)
		rx_frame(tp, &pkts[i]);
	if (n)
		port->ops->free(port, pkts, n);
	return n;
}

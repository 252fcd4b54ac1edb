/*
 * tp_loss.c: which in-flight packets are lost, after RACK (RFC 8985).  A
 * hole is an unacknowledged PSN below one that was acknowledged.  It is
 * lost when
 *   - a packet sent more than the reorder window after it was delivered
 *     (time, not order: holds across paths and bursts alike), or
 *   - it has been out a smoothed RTT plus the reorder window (a later PSN
 *     arrived and it did not: this one needs no further ACK, so a stalled
 *     sender finds its holes from the timer scan, without waiting for a
 *     tail-loss probe or the RTO), or
 *   - until the flow has seen reordering, TP_DUPTHRESH packets sent after it
 *     on its own path were SACKed (quick on a short burst sent at one
 *     instant, where times cannot tell).
 * The reorder window is a quarter smoothed RTT plus the spread of the live
 * paths' RTTs, so that packets overtaking each other across paths of
 * different delay are not taken for lost.  When the peer reports a
 * duplicate (SL_F_DSACK: a retransmission was not needed), the RTT part
 * grows by a quarter, once per RTT, up to a whole RTT, and narrows back
 * after TP_REO_PERSIST recoveries without one (RFC 8985 6.2).
 */
#include "tp_internal.h"

uint64_t tp_reorder_window(const struct tp_flow *f)
{
	uint64_t lo = UINT64_MAX, hi = 0;

	if (!f->rtt_valid)
		return f->rto_ns;
	for (uint8_t i = 0; i < f->n_paths; i++) {
		const struct tp_path *p = &f->paths[i];
		if (p->dead || !p->rtt_valid)
			continue;
		lo = p->srtt_ns < lo ? p->srtt_ns : lo;
		hi = p->srtt_ns > hi ? p->srtt_ns : hi;
	}
	return (1u + f->reo_quarters) * (f->srtt_ns / 4) + (hi > lo ? hi - lo : 0);
}

void tp_loss_on_dsack(struct sl_tp *tp, struct tp_flow *f)
{
	f->reo_persist = TP_REO_PERSIST;
	if (f->reo_quarters + 1 >= TP_REO_MAX_QUARTERS ||
	    (f->reo_grown_ns && tp->now_ns - f->reo_grown_ns < f->srtt_ns))
		return;
	f->reo_quarters++;
	f->reo_grown_ns = tp->now_ns;
}

/* Was packet s, never acknowledged, lost?  sacked_above: packets SACKed
 * above it on its own path. */
static bool lost(const struct sl_tp *tp, const struct tp_flow *f, const struct tp_slot *s,
		 uint64_t reorder, uint32_t sacked_above)
{
	uint64_t rtt = f->rtt_valid ? f->srtt_ns : f->rto_ns;

	if (f->rack_sent_ns > s->sent_ns + reorder)
		return true;
	if (tp->now_ns - s->sent_ns > rtt + reorder)
		return true;
	return !f->reordering_seen && sacked_above >= TP_DUPTHRESH;
}

uint32_t tp_detect_losses(struct sl_tp *tp, struct tp_flow *f)
{
	uint64_t reorder = tp_reorder_window(f);
	uint64_t guard = f->rtt_valid ? f->srtt_ns : f->rto_ns;
	uint32_t sacked_above[SL_MAX_PATHS] = { 0 }, n = 0;

	if (!psn_before(f->snd_una, f->sacked_end))
		return 0;
	for (uint32_t psn = f->sacked_end; psn != f->snd_una;) {
		struct tp_slot *s = tp_slot(tp, f, --psn);
		if (s->acked) {
			sacked_above[s->path]++;
			continue;
		}
		if (s->held)
			continue;
		/* a retransmission gets a smoothed RTT to come back before it goes again */
		if (!lost(tp, f, s, reorder, sacked_above[s->path]) ||
		    (s->retx && tp->now_ns - s->sent_ns < guard))
			continue;
		if (!tp_retransmit(tp, f, psn, &tp->stats.retx_sack))
			break;
		n++;
	}
	if (n && f->reo_persist && --f->reo_persist == 0)
		f->reo_quarters = 0;
	if (n && tp->cfg.cc)
		tp->cfg.cc->on_loss(&f->cc, tp->now_ns);
	return n;
}

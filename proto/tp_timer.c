/*
 * tp_timer.c: time.  RTT is estimated RFC 6298 style from the send
 * timestamps that ACKs echo; the retransmission timeout derives from it,
 * doubles on every expiry up to rto_max and snaps back on progress.  Before
 * it, a tail-loss probe: when a flow's last packets go unacknowledged for two
 * smoothed RTTs (more when the RTT jitters), its highest unacknowledged packet is sent again, so that
 * the ACK it draws reveals any hole to SACK recovery long before the RTO
 * (losses at the end of a message have no later packets to reveal them).
 * Holes that SACK already revealed are retried from here too once they are
 * overdue (tp_loss.c), as no further ACK may come to find them.  A flow
 * whose packets go unacknowledged for dead_ns is declared dead, and so is
 * one whose message waits that long for a held window with its probes
 * unanswered (tp_hold.c); a path that stops delivering, much sooner
 * (tp_path.c).  The same scan counts the senders active at this receiver,
 * whose number divides its credit.  Timers are scanned at most every
 * TP_SCAN_NS so that a busy poll loop stays cheap.
 */
#include "tp_internal.h"

#define CLOCK_GRANULARITY_NS 1000 /* timestamps on the wire are microseconds */

static uint64_t rto_from_estimate(const struct sl_tp *tp, const struct tp_flow *f)
{
	uint64_t var4 = 4 * f->rttvar_ns;
	uint64_t rto = f->srtt_ns + (var4 > CLOCK_GRANULARITY_NS ? var4 : CLOCK_GRANULARITY_NS);

	if (rto < tp->cfg.rto_min_ns)
		return tp->cfg.rto_min_ns;
	return rto > tp->cfg.rto_max_ns ? tp->cfg.rto_max_ns : rto;
}

void tp_flow_init_timers(struct sl_tp *tp, struct tp_flow *f)
{
	f->rtt_valid = false;
	f->rto_ns = tp->cfg.rto_min_ns;
}

uint64_t tp_rtt_sample(struct sl_tp *tp, struct tp_flow *f, uint32_t echo_ts)
{
	uint64_t r = (uint64_t)(uint32_t)(tp_now_us(tp) - echo_ts) * 1000;

	/* Longer than rto_max, which no timer waits past: not the link's RTT but
	 * a peer whose engine stopped or was descheduled while the echoed packet
	 * sat in its queue (or an echo from before a wrap, or a forged one).
	 * Taken, one such sample held srtt up for dozens more (219 ms after a
	 * 5 s stop), and with it the RTO at rto_max and tail probes off. */
	if (r > tp->cfg.rto_max_ns)
		return 0;
	if (!f->rtt_valid) {
		f->srtt_ns = r;
		f->rttvar_ns = r / 2;
		f->rtt_valid = true;
	} else {
		uint64_t err = f->srtt_ns > r ? f->srtt_ns - r : r - f->srtt_ns;
		f->rttvar_ns = (3 * f->rttvar_ns + err) / 4;
		f->srtt_ns = (7 * f->srtt_ns + r) / 8;
	}
	f->rto_ns = rto_from_estimate(tp, f);
	return r ? r : CLOCK_GRANULARITY_NS; /* 0 means "no sample" to the caller */
}

void tp_on_progress(struct sl_tp *tp, struct tp_flow *f)
{
	f->progress_ns = tp->now_ns;
	f->tlp_sent = false;
	f->rto_fired_ns = 0;
	f->rto_ns = rto_from_estimate(tp, f);
}

static void flow_die(struct sl_tp *tp, struct tp_flow *f)
{
	f->dead = true;
	tp->stats.flows_dead++;
	sl_twheel_cancel(&tp->pacer, &f->pace_node);
	/* queued messages are forgotten without callbacks: flow_dead says it all */
	for (struct sl_tp_msg *m = f->q_head, *next; m; m = next) {
		next = m->next;
		m->next = NULL;
		m->queued = false;
	}
	f->q_head = f->q_tail = f->park_skip = NULL;
	tp->cb.flow_dead(tp->cb.arg, f->node);
}

/*
 * Whether f's packets may still wait on our side: a port of its paths
 * refused frames less than an RTO ago, so its ring is full of what the peer
 * has not read yet (a memif peer that is not scheduled).  Nothing is lost
 * then, and resending only adds to the queue (3 ranks on 2 cores, gathers of
 * 2-8 MiB: a sender's port refused 622k times, it fired 357 RTOs and
 * declared 5 paths dead in 166 calls).  A peer that is gone still dies by
 * dead_ns.
 */
static bool backed_up(const struct sl_tp *tp, const struct tp_flow *f)
{
	for (uint8_t i = 0; i < f->n_paths; i++) {
		uint64_t full = tp->txq[f->paths[i].port_idx].full_ns;
		if (full && tp->now_ns - full < f->rto_ns)
			return true;
	}
	return false;
}

/* Whether the RTO, doubled up to rto_max, expired less than rto_max ago.
 * Below rto_max each packet's own send time decides, and the doubling
 * spaces the expiries; at rto_max it no longer does, and a window sent
 * together was overdue together: a peer that did not answer for 100 ms
 * (its engine busy faulting in a copy) drew its whole window again, one
 * packet a timer scan, each counted a loss of its path, which then died
 * (perf/ALGORITHMS.md, big27).  At rto_max the timer restarts when it
 * fires (RFC 6298's): one packet an rto_max. */
static bool rto_capped_recently(const struct sl_tp *tp, const struct tp_flow *f)
{
	return f->rto_ns >= tp->cfg.rto_max_ns && f->rto_fired_ns && tp->now_ns - f->rto_fired_ns < f->rto_ns;
}

/* Retransmit the oldest packet older than the RTO; back off once per expiry. */
static uint32_t rto_scan(struct sl_tp *tp, struct tp_flow *f)
{
	uint32_t n = 0;

	if (backed_up(tp, f) || rto_capped_recently(tp, f))
		return 0;

	/*
	 * Only the oldest overdue packet goes again, as in TCP: on these shared
	 * machines an RTO mostly means the peer was descheduled, and resending
	 * the whole window then costs a window of duplicates.  If more was
	 * really lost, the ACK for this one lets RACK find it by send time.
	 */
	for (uint32_t psn = f->snd_una; psn != f->snd_nxt; psn++) {
		struct tp_slot *s = tp_slot(tp, f, psn);
		if (s->acked || s->held || tp->now_ns - s->sent_ns < f->rto_ns)
			continue;
		tp_path_of(f, s)->rtos++;
		n = tp_retransmit(tp, f, psn, &tp->stats.retx_rto) ? 1 : 0;
		break;
	}
	if (n) {
		f->rto_retx++;
		f->rto_fired_ns = tp->now_ns;
		if (tp->cfg.cc)
			tp->cfg.cc->on_timeout(&f->cc, tp->now_ns);
		f->rto_ns *= 2;
		if (f->rto_ns > tp->cfg.rto_max_ns)
			f->rto_ns = tp->cfg.rto_max_ns;
	}
	return n;
}

/* One probe per tail: the highest unacknowledged PSN, once the flow has been
 * quiet (nothing sent, nothing acknowledged) for the probe timeout: two
 * smoothed RTTs (RFC 8985), or an RTT plus four deviations when the RTT
 * jitters more (RFC 9002's PTO).  On shared cores an ACK comes a scheduling
 * slice late often enough that two RTTs alone fired probes with nothing
 * lost, and the late ACK came a median 0.6 ms after the probe. */
static uint32_t tlp_scan(struct sl_tp *tp, struct tp_flow *f)
{
	uint64_t var4 = 4 * f->rttvar_ns;
	uint64_t pto = f->srtt_ns + (var4 > f->srtt_ns ? var4 : f->srtt_ns);

	if (pto < TP_TLP_MIN_NS)
		pto = TP_TLP_MIN_NS;
	if (!f->rtt_valid || f->tlp_sent || pto >= f->rto_ns || tp->now_ns - f->last_tx_ns < pto ||
	    tp->now_ns - f->progress_ns < pto)
		return 0;
	for (uint32_t psn = f->snd_nxt; psn != f->snd_una;) {
		const struct tp_slot *s = tp_slot(tp, f, --psn);
		if (s->acked || s->held)
			continue;
		f->tlp_sent = tp_retransmit(tp, f, psn, &tp->stats.retx_tlp);
		return f->tlp_sent;
	}
	return 0;
}

uint32_t tp_run_timers(struct sl_tp *tp)
{
	uint32_t moved = 0;

	if (tp->now_ns < tp->next_scan_ns)
		return 0;
	tp->next_scan_ns = tp->now_ns + TP_SCAN_NS;
	uint16_t active = 0;
	for (uint16_t i = 0; i < tp->n_routed; i++) {
		struct tp_flow *f = tp->flows[tp->routed[i]];
		active += f->rcv_last_ns && tp->now_ns - f->rcv_last_ns < TP_RX_ACTIVE_NS;
		if (f->dead)
			continue;
		moved += tp_path_scan(tp, f); /* probes go on even when idle */
		moved += tp_hold_probe(tp, f);
		if (!tp_flow_waits(f))
			continue; /* idle: nothing out, and nothing waits for a held window or a park */
		if (tp->now_ns - f->progress_ns >= tp->cfg.dead_ns)
			flow_die(tp, f);
		else
			moved += tp_detect_losses(tp, f) + rto_scan(tp, f) + tlp_scan(tp, f);
	}
	tp->rx_active = active ? active : 1;
	return moved;
}

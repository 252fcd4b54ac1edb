/*
 * tp_hold.c: receiver backpressure.  An engine that cannot take a sender's
 * packet yet (SL_DELIVER_RETRY), or takes it but wants no more for now
 * (SL_DELIVER_HOLD), holds that sender's window: its ACKs carry SL_F_HOLD
 * and a credit that ends at the first packet it did not take.  The sender
 * then puts what it has out beyond that and not SACKed aside ("held"): off
 * loss recovery and off its paths' load, since a refused packet is not lost,
 * and resending it or blaming its path only repeats the refusal (a root 4096
 * small calls ahead of its peer retransmitted up to 2.4 packets per call that
 * way, and declared paths dead by the hundred).  sl_tp_resume reopens the windows; the
 * ACK that says so brings the held packets again.  A held sender with
 * something to send probes the receiver (an ACK flagged SL_F_PROBE, which
 * draws one with its state) after an RTO, doubling up to rto_max, in case
 * that ACK was lost; answers that still hold show the peer is alive, and
 * none for dead_ns (counted from the hold's last answer, or from when a
 * message began to wait on an idle held flow) kill the flow as any silence.
 */
#include "tp_internal.h"

/* Receiver: hold f's window at end, the first PSN the engine did not take. */
void tp_hold_rx(struct sl_tp *tp, struct tp_flow *f, uint32_t end)
{
	if (f->rcv_holding && !psn_before(end, f->rcv_hold_psn))
		return;
	tp->stats.holds += !f->rcv_holding;
	f->rcv_holding = true;
	f->rcv_hold_psn = end;
}

/* Receiver: an ACK (or probe) of a held window; it ends at cum_psn once
 * the receiver applied past the hold point (a void packet, a resend). */
void tp_hold_ack(const struct tp_flow *f, struct sl_ack *ack, uint16_t *flags)
{
	if (!f->rcv_holding)
		return;
	uint32_t room = psn_before(ack->cum_psn, f->rcv_hold_psn) ? f->rcv_hold_psn - ack->cum_psn : 0;
	if (ack->credit > room)
		ack->credit = room;
	*flags |= SL_F_HOLD;
}

/* Receiver: f's sender is to learn a new state of ours now. */
static void state_ack_due(struct sl_tp *tp, struct tp_flow *f)
{
	if (!f->ack_due)
		f->rcv_echo_path = SL_ECHO_NONE; /* no DATA to echo: no RTT sample from it */
	tp_ack_due(tp, f);
}

static void resume_flow(struct sl_tp *tp, struct tp_flow *f)
{
	if (!f || !f->rcv_holding)
		return;
	f->rcv_holding = false;
	state_ack_due(tp, f);
}

void sl_tp_resume(struct sl_tp *tp)
{
	for (uint16_t i = 0; i < tp->n_routed; i++)
		resume_flow(tp, tp->flows[tp->routed[i]]);
}

void sl_tp_resume_node(struct sl_tp *tp, uint16_t node)
{
	resume_flow(tp, node < SL_MAX_NODES ? tp->flows[node] : NULL);
}

static void hold_slot(struct tp_flow *f, struct tp_slot *s)
{
	struct tp_path *p = tp_path_of(f, s);

	s->held = true;
	f->n_held++;
	if (!--p->in_flight)
		p->unproven_ns = 0; /* nothing of it left out: its silence says nothing */
}

/* Sender: a current ACK (credit_end already set from it); hold: SL_F_HOLD. */
void tp_hold_on_ack(struct sl_tp *tp, struct tp_flow *f, bool hold)
{
	if (!hold) {
		f->held = false;
		return;
	}
	if (!f->held) {
		f->held = true;
		f->persist_ns = f->rto_ns;
		f->persist_next_ns = tp->now_ns + f->persist_ns;
	}
	f->progress_ns = tp->now_ns; /* it answers: not dead, only full */
	/* slots before snd_una may already carry later PSNs */
	uint32_t psn = psn_before(f->credit_end, f->snd_una) ? f->snd_una : f->credit_end;
	for (; psn_before(psn, f->snd_nxt); psn++) {
		struct tp_slot *s = tp_slot(tp, f, psn);
		if (!s->acked && !s->held)
			hold_slot(f, s);
	}
	if (f->n_held) /* they go again when the window reopens, though nothing may be queued */
		tp_mark_sendable(tp, f);
}

/* Sender: slot s is held no more (acknowledged after all, or sent again). */
void tp_hold_release(struct tp_flow *f, struct tp_slot *s)
{
	s->held = false;
	f->n_held--;
}

/* Sender: send held packets again, at most max, once the window is open
 * over them; returns how many went. */
uint32_t tp_hold_resend(struct sl_tp *tp, struct tp_flow *f, uint32_t max)
{
	uint32_t n = 0;

	if (f->held)
		return 0;
	for (uint32_t psn = f->snd_una; f->n_held && n < max && psn_before(psn, f->snd_nxt) &&
					psn_before(psn, f->credit_end); psn++) {
		struct tp_slot *s = tp_slot(tp, f, psn);
		if (!s->held)
			continue;
		if (!tp_emit_data(tp, f, psn, false))
			break;
		s->retx++; /* a held packet may have arrived after all: no RTT or reordering sample */
		tp_hold_release(f, s);
		tp->stats.held_resent++;
		n++;
	}
	return n;
}

/* Sender, from the timer scan: probe a receiver that holds our window while
 * we have something for it, or parks what we have queued while nothing is
 * out (no ACK would come to lift the park). */
uint32_t tp_hold_probe(struct sl_tp *tp, struct tp_flow *f)
{
	bool waits = f->held ? f->n_held || f->q_head : f->park_slots && f->q_head && f->snd_una == f->snd_nxt;

	if (!waits || tp->now_ns < f->persist_next_ns || !tp_send_probe(tp, f, tp_path_pick(f, -1)))
		return 0;
	tp->stats.window_probes++;
	f->persist_ns = 2 * f->persist_ns < tp->cfg.rto_max_ns ? 2 * f->persist_ns : tp->cfg.rto_max_ns;
	f->persist_next_ns = tp->now_ns + f->persist_ns;
	return 1;
}

/*
 * Parks.  The flow is one for every communicator: a peer that posted a
 * large call B on one communicator before a call A on another, which this
 * rank posted first and waits for, sends A's data behind all of B's, and
 * holding the window on B's early packets holds A's too (refusing them
 * cannot work either: A's data never gets past the window).  So rather
 * than hold, the engine parks B: its ACKs name B's communicator and first
 * sequence number not posted here (SL_F_PARK), and the sender sends its
 * other messages, holding back those of calls from there on (order
 * SL_TP_CALLS) until an ACK lifts the park.  The receiver then takes at
 * most what the sender had out of B when the park reached it.
 *
 * Up to SL_PARKS_MAX communicators at once (B and C of two communicators,
 * both in front of A), each in a slot of its own: every ACK lists the
 * slots in use and names some, a new or changed one first and the others
 * in turn, so the sender learns each within a few ACKs, and an unpark with
 * the next ACK whatever it names.  The first SL_PARKS_LOW slots are listed
 * and named as before session 33 (SL_F_PARK, sl_ack.parks: a peer from
 * then reads them), the rest beside them (SL_F_PARK_MORE), so an ACK names
 * one of each.  A new park takes the lowest free slot.  A lost
 * ACK is made up by the next: a parked sender with nothing out probes (as
 * a held one), whose answer says it all again.  Past SL_PARKS_MAX (as many
 * as a dataplane engine has communicators) sl_tp_park says no: the engine
 * would hold that sender instead.
 *
 * Sends (point-to-point) are parked as calls are, by the pair's sequence
 * number (a send's seq counts the sender's sends to this receiver on its
 * communicator, whose recvs this rank posts in that order): a peer that
 * sent a large message, then posted a call this rank waits on first, sends
 * the call's data behind it.  Only a sender that said it parks sends
 * (SL_F_SENDS_PARK on their DATA) is asked, and only in a slot past the
 * first SL_PARKS_LOW, whose part of the ACK says which kind it names: a
 * sender from before would take it for a park of calls.  A park of calls
 * takes a park of sends' slot when every slot is in use, so that calls
 * stay parkable on every communicator an engine has; the sends then come
 * into the stash, as an older sender's do.
 */
#define PARKS_LOW_MASK ((uint64_t)SL_ACK_PARK_SLOTS)

static int rcv_park_slot(const struct tp_flow *f, uint32_t comm, enum sl_tp_order order)
{
	for (uint64_t slots = f->rcv_park_slots; slots; slots &= slots - 1) {
		const struct tp_park *p = &f->rcv_parks[__builtin_ctzll(slots)];
		if (p->comm == comm && p->order == order)
			return __builtin_ctzll(slots);
	}
	return -1;
}

/* Receiver: the slot a new park of order takes, or -1: the lowest free one
 * (for sends, past the first SL_PARKS_LOW), else for calls a park of
 * sends' slot. */
static int new_park_slot(const struct tp_flow *f, enum sl_tp_order order)
{
	uint64_t free = ~f->rcv_park_slots & (order == SL_TP_SENDS ? ~PARKS_LOW_MASK : ~0ull);

	if (free)
		return __builtin_ctzll(free);
	for (uint64_t slots = order == SL_TP_CALLS ? f->rcv_park_slots : 0; slots; slots &= slots - 1)
		if (f->rcv_parks[__builtin_ctzll(slots)].order == SL_TP_SENDS)
			return __builtin_ctzll(slots);
	return -1;
}

bool sl_tp_park(struct sl_tp *tp, uint16_t node, uint32_t comm, enum sl_tp_order order, uint32_t seq)
{
	struct tp_flow *f = node < SL_MAX_NODES ? tp->flows[node] : NULL;
	int i = f ? rcv_park_slot(f, comm, order) : -1;

	if (!f || order == SL_TP_UNORDERED || (order == SL_TP_SENDS && !f->rcv_sends_park))
		return false;
	if (i >= 0 && f->rcv_parks[i].seq == seq)
		return true;
	if (i < 0) {
		if ((i = new_park_slot(f, order)) < 0)
			return false;
		f->rcv_park_slots |= 1ull << i;
		tp->stats.parks++;
	}
	f->rcv_parks[i] = (struct tp_park){ .comm = comm, .seq = seq, .order = order };
	f->rcv_park_unsaid |= 1ull << i;
	state_ack_due(tp, f);
	return true;
}

void sl_tp_unpark(struct sl_tp *tp, uint16_t node, uint32_t comm, enum sl_tp_order order)
{
	struct tp_flow *f = node < SL_MAX_NODES ? tp->flows[node] : NULL;
	int i = f ? rcv_park_slot(f, comm, order) : -1;

	if (i < 0)
		return;
	f->rcv_park_slots &= ~(1ull << i);
	f->rcv_park_unsaid &= ~(1ull << i);
	state_ack_due(tp, f);
}

/* Receiver: the slot of those in part (a nonempty subset of f's) that the
 * next ACK names: one no ACK named since it changed, else the next in
 * part's turn. */
static unsigned park_named(struct tp_flow *f, uint64_t part, uint8_t *turn)
{
	uint64_t slots = f->rcv_park_slots & part, unsaid = f->rcv_park_unsaid & part;
	uint64_t from_turn = slots >> *turn << *turn;
	unsigned i = __builtin_ctzll(unsaid ? unsaid : from_turn ? from_turn : slots);

	f->rcv_park_unsaid &= ~(1ull << i);
	*turn = (uint8_t)((i + 1) % SL_PARKS_MAX);
	return i;
}

/* Receiver: an ACK (or probe) says what it parks: the slots in use, and by
 * name one of the first SL_PARKS_LOW (calls) and one of the rest (calls,
 * or sends with SL_F_SENDS_PARK). */
void tp_park_ack(struct tp_flow *f, struct sl_hdr *h, struct sl_ack *ack)
{
	if (f->rcv_park_slots & PARKS_LOW_MASK) {
		unsigned i = park_named(f, PARKS_LOW_MASK, &f->rcv_park_turn[0]);
		h->flags |= SL_F_PARK;
		h->comm = f->rcv_parks[i].comm;
		h->seq = f->rcv_parks[i].seq;
		ack->parks = (uint8_t)(f->rcv_park_slots & PARKS_LOW_MASK) | (uint8_t)(i << SL_ACK_PARK_NAMED_SHIFT);
	}
	if (f->rcv_park_slots & ~PARKS_LOW_MASK) {
		unsigned i = park_named(f, ~PARKS_LOW_MASK, &f->rcv_park_turn[1]);
		h->flags |= SL_F_PARK_MORE | (f->rcv_parks[i].order == SL_TP_SENDS ? SL_F_SENDS_PARK : 0);
		h->offset = f->rcv_park_slots & ~PARKS_LOW_MASK;
		h->step = (uint16_t)i;
		h->count = (uint64_t)f->rcv_parks[i].comm << 32 | f->rcv_parks[i].seq;
	}
}

/* Sender: of the slots an ACK lists (listed), those an earlier ACK named
 * (one not named yet waits for its turn), and the one it names, written;
 * *fresh when that one is new or moved. */
static uint64_t park_learn(struct tp_flow *f, uint64_t listed, unsigned named, struct tp_park park, bool *fresh)
{
	struct tp_park *p = &f->parks[named];

	*fresh |= !(f->park_slots >> named & 1) || p->comm != park.comm || p->seq != park.seq ||
		  p->order != park.order;
	*p = park;
	return (listed & f->park_slots) | 1ull << named;
}

/* Sender: a current ACK's parks (or none).  What the queue walk skipped
 * (park_skip) is walked again when they change.  A named slot past the
 * table (a forged step) makes the ACK's SL_F_PARK_MORE part say nothing. */
void tp_park_on_ack(struct sl_tp *tp, struct tp_flow *f, const struct sl_hdr *h, const struct sl_ack *ack)
{
	uint64_t slots = 0;
	bool fresh = false;

	if (h->flags & SL_F_PARK)
		slots |= park_learn(f, ack->parks & PARKS_LOW_MASK,
				    ack->parks >> SL_ACK_PARK_NAMED_SHIFT & (SL_PARKS_LOW - 1),
				    (struct tp_park){ .comm = h->comm, .seq = h->seq, .order = SL_TP_CALLS }, &fresh);
	if ((h->flags & SL_F_PARK_MORE) && h->step >= SL_PARKS_LOW && h->step < SL_PARKS_MAX)
		slots |= park_learn(f, h->offset & ~PARKS_LOW_MASK, h->step,
				    (struct tp_park){ .comm = (uint32_t)(h->count >> 32), .seq = (uint32_t)h->count,
						      .order = h->flags & SL_F_SENDS_PARK ? SL_TP_SENDS : SL_TP_CALLS },
				    &fresh);
	if (fresh && !f->held) {
		f->persist_ns = f->rto_ns; /* probes, should the ACK that lifts it be lost */
		f->persist_next_ns = tp->now_ns + f->persist_ns;
	}
	if (slots && f->snd_una == f->snd_nxt)
		f->progress_ns = tp->now_ns; /* it answers: not dead, only not posted yet */
	if (fresh || slots != f->park_slots)
		f->park_skip = NULL;
	f->park_slots = slots;
}

bool sl_tp_msg_parked(const struct sl_tp *tp, const struct sl_tp_msg *m, uint32_t *seq)
{
	const struct tp_flow *f = m->queued && m->dst_node < SL_MAX_NODES ? tp->flows[m->dst_node] : NULL;
	const struct tp_park *p = f ? tp_park_of(f, m) : NULL;

	if (p)
		*seq = p->seq;
	return p != NULL;
}

bool sl_tp_parking(const struct sl_tp *tp, uint16_t node, uint32_t comm, uint32_t *seq)
{
	const struct tp_flow *f = node < SL_MAX_NODES ? tp->flows[node] : NULL;
	int i = f ? rcv_park_slot(f, comm, SL_TP_CALLS) : -1;

	if (i >= 0)
		*seq = f->rcv_parks[i].seq;
	return i >= 0;
}

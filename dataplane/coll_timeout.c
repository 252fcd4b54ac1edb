/*
 * coll_timeout.c: why a posted call timed out.
 *
 * A call that made no progress for its communicator's timeout fails the
 * communicator with the most its rank can tell: a peer gone silent, a
 * cycle of waits the notes show (wait_notes.c), the rank it waits for and
 * how, and a hint from that rank's early packets or from a park.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <sluice/errmsg.h>
#include <sluice/sluice.h>

#include "coll_stash.h"
#include "coll_timeout.h"
#include "coll_wire.h"
#include "comm_fail.h"
#include "wait_chain.h"
#include "wait_notes.h"

void dp_silent_peer_sentence(char *why, size_t size, int r, uint16_t node, const char *silence, uint64_t silent_ns)
{
	sl_errmsg_format(why, size, "rank %d (dataplane node %u) stopped answering: %s for %.1f s; it may have "
			 "crashed, or its dataplane stopped", r, node, silence, (double)silent_ns / 1e9);
}

/* The ranks named in a wait for acknowledgements; the rest are counted. */
#define OWED_NAMED 8

/* The ranks whose acknowledgements k's sends (queued, or out and not
 * acknowledged) wait for, in owes (a bit a rank); the first such send's
 * rank, or -1. */
static int acks_owed(const struct dp_coll *k, uint64_t owes[SL_MAX_RANKS / 64])
{
	int first = -1;

	memset(owes, 0, SL_MAX_RANKS / 8);
	for (uint32_t i = 0; i < k->msgs_sent; i++) {
		int r = rank_of_node(k->comm, k->msgs[i].dst_node);
		if ((k->msgs[i].queued || k->msgs[i].unacked) && r >= 0) {
			owes[r / 64] |= 1ull << (r % 64);
			first = first < 0 ? r : first;
		}
	}
	return first;
}

/* What a park has to do with k's wait, in cause (else ""): a receiver
 * parks k's sends (it has not posted k, and waits on a call of another
 * communicator), or this rank parks calls of another communicator from the
 * rank k waits for (peer, or -1).  Either is an order of calls across
 * communicators that waits on itself. */
static void park_cause(const struct dp_engine *e, const struct dp_coll *k, int peer, char *cause, size_t size)
{
	static const char fix[] = "post calls on the communicators in one order on every rank";
	uint32_t seq;

	*cause = 0;
	for (uint32_t i = 0; i < k->msgs_sent; i++) {
		const struct sl_tp_msg *m = &k->msgs[i];
		if (sl_tp_msg_parked(e->tp, m, &seq)) {
			int r = rank_of_node(k->comm, m->dst_node);
			bool send = m->order == SL_TP_SENDS;
			sl_errmsg_format(cause, size, "; it waits behind a park of communicator %#" PRIx32
					 "'s %s #%u from rank %d, which rank %d has not posted%s while it waits "
					 "on a call of another communicator: %s", m->hdr.comm, send ? "send" : "call",
					 seq, r, r, send ? " the recv of" : "", send ? "post the recv before that call" : fix);
			return;
		}
	}
	for (unsigned i = 0; peer >= 0 && i < DP_MAX_COMMS; i++) {
		const struct dp_comm *c = &e->comms[i];
		if (c->live && c->parking && c != k->comm && sl_tp_parking(e->tp, k->comm->node[peer], c->key32, &seq)) {
			sl_errmsg_format(cause, size, "; this rank parks communicator %#" PRIx32 "'s calls "
					 "from #%u from rank %d, which it has not posted: %s", c->key32, seq, peer, fix);
			return;
		}
	}
}

int dp_coll_waited_rank(const struct dp_coll *k, char *waiting, size_t size)
{
	uint64_t owes[SL_MAX_RANKS / 64];
	char ranks[96];
	int peer;

	if ((peer = sl_sched_waiting_on(&k->sched)) >= 0) {
		snprintf(waiting, size, "for rank %d", peer);
	} else if ((peer = acks_owed(k, owes)) >= 0) {
		/* every rank that owes them: a root whose sends several ranks
		 * held back (none had posted the call) named the first alone */
		dp_rank_list(ranks, sizeof(ranks), owes, k->comm->nranks, OWED_NAMED);
		snprintf(waiting, size, "for %s to acknowledge", ranks);
	} else {
		snprintf(waiting, size, "for acknowledgements");
	}
	return peer;
}

/* k has waited a timeout for peer, of no cycle the notes show: a hint
 * from peer's early packets of the other kind in cause (its collective
 * against k's send or recv, or its send against k's collective: peer
 * may wait in it, or only be late). */
static void early_cross_hint(const struct dp_coll *k, int peer, char *cause, size_t cause_size)
{
	const struct dp_comm *comm = k->comm;
	const struct sl_hdr *h = dp_stash_cross_kind(k, peer);
	char mine[64], theirs[64], counter[64];
	uint8_t op;

	if (!h || !packet_is_early(comm, h, peer))
		return;
	op = packet_is_p2p(h) ? SL_OP_SEND : (uint8_t)(h->kind & ((1u << KIND_ALGO_SHIFT) - 1));
	dp_call_name(mine, sizeof(mine), (uint8_t)k->cmd.opcode, k->seq, peer);
	dp_call_name(theirs, sizeof(theirs), op, h->seq, (int)comm->rank);
	dp_call_name(counter, sizeof(counter), dp_counter_op(op), h->seq, peer);
	sl_errmsg_format(cause, cause_size, "; rank %d has started %s, and rank %u has not posted %s: if "
			 "rank %d waits in it, post %s on rank %u before waiting for %s", peer, theirs,
			 comm->rank, counter, peer, counter, comm->rank, mine);
}

/* k timed out on comm, whose timeout may be shorter than the transport's
 * (a client's SLUICE_TIMEOUT below its dataplane's --timeout): a peer from
 * which nothing has come for a quarter of it while something sent to it
 * waits (sl_tp_node_silent_ns: a live one answers in milliseconds, even
 * when it holds the window; a stalled call pings the rank it waits
 * for every eighth, wait_notes.c, so one that died up to 5/8 of the
 * timeout into the stall is that silent by now) is named in why, as the
 * transport names it once the flow dies (dp_flow_dead).  The longest
 * silent of comm's peers, not only the one k waits for: a ring's rank
 * waits for a live neighbour of the dead one.  False when none is. */
static bool silent_peer(const struct dp_engine *e, const struct dp_coll *k, char *why, size_t size)
{
	const struct dp_comm *comm = k->comm;
	uint64_t longest = 0, silent;
	int who = -1;

	for (uint32_t r = 0; r < comm->nranks; r++) {
		if (r != comm->rank && (silent = sl_tp_node_silent_ns(e->tp, comm->node[r])) > longest) {
			longest = silent;
			who = (int)r;
		}
	}
	if (who < 0 || longest < dp_comm_timeout(e, comm) / 4)
		return false;
	int n = snprintf(why, size, "%s #%u on rank %u made no progress for %.1f s: ", sl_coll_name(k->cmd.opcode),
			 k->seq, comm->rank, (double)dp_comm_timeout(e, comm) / 1e9);
	dp_silent_peer_sentence(why + n, size - (size_t)n, who, comm->node[who], "nothing came from it", longest);
	return true;
}

/* How long a timeout that finds nothing to name but the rank it waits for
 * waits for that rank's answer (verdict): a quarter of the timeout, which
 * silent_peer needs to see a peer silent since the hold's ping, and a 64th
 * to spare, both counted from when that ping left (verdict_held).  Capped at 1.5 s before, inside libsluice's 2 s
 * margin: above a 5.6 s timeout a peer that died within about T/4 - 1.5 s
 * of the timeout (6-10 s at sluiced's default 30 s) was named only as the
 * rank waited for.  The client's wait now runs past the hold's end
 * (publish_verdict). */
static uint64_t hold_ns(const struct dp_engine *e, const struct dp_comm *comm)
{
	uint64_t t = dp_comm_timeout(e, comm);

	return t / 4 + t / 64;
}

/* Tells k's client that k's verdict waits until `until`: its own wait
 * gives the reason its margin past that (abi.h, sl_channel_bell). */
static void publish_verdict(const struct dp_coll *k, uint64_t until)
{
	struct dp_client *c = k->comm->client;

	if (c && c->bell && until > atomic_load_explicit(&c->bell->verdict_ns, memory_order_relaxed))
		atomic_store_explicit(&c->bell->verdict_ns, until, memory_order_relaxed);
}

/* k's timeout found nothing to name but peer, the rank it waits for.  A
 * peer that died late in the stall, having answered the pings before
 * (wait_notes.c pings it each eighth), was not silent for a quarter of the
 * timeout yet (silent_peer: its silence starts at the first ping left
 * unanswered) and was named only as the rank waited for.  So the verdict
 * waits (true), pinging it now if nothing is out to it, until anything
 * comes from it (a live peer answers in milliseconds) or the hold ends:
 * then the bare timeout.  Each pass of the hold asks for a cycle (whose
 * chains may come round meanwhile) and a silent peer again
 * (dp_coll_check_timeout): one silent for a quarter of the timeout is
 * named as gone, by the same rule as before, so a live peer is no more
 * likely to be named so than it was. */
static bool verdict_held(struct dp_engine *e, struct dp_coll *k, int peer, uint64_t now)
{
	uint64_t silent, since, until;
	uint16_t node;

	if (peer < 0 || (node = k->comm->node[peer]) == e->node)
		return false;
	if (k->held_ns <= k->last_progress_ns) { /* this stall's first timeout pass */
		k->held_ns = now;
		publish_verdict(k, now + hold_ns(e, k->comm));
		dp_ping(e, k, peer);
		return true;
	}
	if (sl_tp_node_heard_ns(e->tp, node) >= k->held_ns)
		return false; /* it answered: alive */
	/* The silence silent_peer measures starts when the ping leaves, at the
	 * next pass's poll: the hold runs from then, not from held_ns.  An
	 * engine pass later than T/64 (a thread without a CPU) ended the hold
	 * before the silence reached its quarter, and a dead peer's timeout
	 * was bare (dead_peer_late_2ranks under load, perf/ALGORITHMS.md
	 * word34). */
	silent = sl_tp_node_silent_ns(e->tp, node);
	since = silent && silent <= now && now - silent > k->held_ns ? now - silent : k->held_ns;
	until = since + hold_ns(e, k->comm);
	publish_verdict(k, until);
	return now < until;
}

/* k's timeout found nothing closer to name than peer, the rank it waits
 * for: an ahead note (wait_notes.c) says where the waits from k's lead, and
 * which rank holds them all, so that rank and the call it has not posted
 * are named (true), as a timeout. */
static bool path_named(struct dp_engine *e, struct dp_coll *k, int peer, uint64_t now)
{
	const struct dp_wait_chain *a = dp_path_ahead(k, peer);
	const struct dp_comm *comm = k->comm;
	char why[SL_ERRMSG_LEN];
	int n;

	if (!a)
		return false;
	n = snprintf(why, sizeof(why), "%s #%u on rank %u made no progress for %.1f s (waiting for rank %d): ",
		     sl_coll_name(k->cmd.opcode), k->seq, comm->rank, (double)dp_comm_timeout(e, comm) / 1e9, peer);
	dp_path_sentence(why + n, sizeof(why) - (size_t)n, a->edge, a->n, a->skipped ? DP_CHAIN_HEAD : 0, a->skipped,
			 (double)(now - a->at_ns) / 1e9);
	comm_fail(e, k->comm, SLUICE_ERR_TIMEOUT, k->seq, true, "%s", why);
	return true;
}

void dp_coll_check_timeout(struct dp_engine *e, struct dp_coll *k, uint64_t now)
{
	struct dp_comm *comm = k->comm;
	struct dp_comm *also;
	int peer;
	char waiting[128], cause[320] = "", why[SL_ERRMSG_LEN];

	/* local transfers in this pass may have made progress after `now` was read */
	if (k->status != SLUICE_OK || now < k->last_progress_ns || now - k->last_progress_ns < dp_comm_timeout(e, comm))
		return;
	/* a cycle the notes show first: its ranks were alive to pass them on */
	peer = dp_coll_waited_rank(k, waiting, sizeof(waiting));
	if (dp_cycle_named(e, k, peer, why, sizeof(why), &also)) {
		comm_fail(e, comm, SLUICE_ERR_MISMATCH, k->seq, true, "%s", why);
		if (also)
			comm_fail(e, also, SLUICE_ERR_MISMATCH, also->next_seq, true, "%s", why);
		return;
	}
	if (silent_peer(e, k, why, sizeof(why))) {
		comm_fail(e, comm, SLUICE_ERR_TIMEOUT, k->seq, true, "%s", why);
		return;
	}
	/* a cycle through a later stalled call of this rank's: the hang's cause */
	const struct dp_coll *behind = dp_cycle_behind(e, k, why, sizeof(why), &also);
	if (behind) {
		struct dp_comm *through = behind->comm;
		uint32_t seq = behind->seq;
		comm_fail(e, comm, SLUICE_ERR_MISMATCH, k->seq, true, "%s", why);
		if (through != comm)
			comm_fail(e, through, SLUICE_ERR_MISMATCH, seq, true, "%s", why);
		if (also && also != comm && also != through)
			comm_fail(e, also, SLUICE_ERR_MISMATCH, also->next_seq, true, "%s", why);
		return;
	}
	if (verdict_held(e, k, peer, now))
		return;
	if (path_named(e, k, peer, now))
		return;
	if (peer >= 0)
		early_cross_hint(k, peer, cause, sizeof(cause));
	if (!*cause)
		park_cause(e, k, peer, cause, sizeof(cause));
	comm_fail(e, comm, SLUICE_ERR_TIMEOUT, k->seq, true,
		  "%s #%u on rank %u made no progress for %.1f s (waiting %s%s): a rank may not "
		  "have made this call, or may be stuck", sl_coll_name(k->cmd.opcode), k->seq, comm->rank,
		  (double)dp_comm_timeout(e, comm) / 1e9, waiting, cause);
}

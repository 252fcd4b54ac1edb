/*
 * wait_notes.c: the notes ranks send each other about their waits, and
 * what a rank does with them (wait_chain.h says the scheme; wait_chain.c
 * holds the chain's text and sentences).  A call that stalls sends a stall
 * note to the rank it waits for; that rank keeps the chain of waits the
 * note carries and passes it on along its own wait; a chain that comes
 * back names a cycle, and the ranks waiting on the cycle from outside it
 * hear of it through cycle and path notes; a chain that stops at a rank
 * which waits for no one rank goes back to its first rank as an ahead
 * note, naming that rank.  At a timeout coll_timeout.c asks
 * here whether the wait is part of, or waits on, a cycle it can name.
 * The notes decide nothing by themselves: a cycle is named only at a
 * timeout.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <sluice/errmsg.h>
#include <sluice/sluice.h>

#include "dp.h"
#include "wait_notes.h"

/* Whether this rank has not posted its side of peer's call #seq of kind op
 * (its counterpart there: *counter_op). */
static bool unposted_here(const struct dp_comm *comm, int peer, uint8_t op, uint32_t seq, uint8_t *counter_op)
{
	uint32_t next = op == SL_OP_RECV ? comm->p2p_send_seq[peer] : op == SL_OP_SEND ? comm->p2p_recv_seq[peer]
										       : comm->next_seq;

	*counter_op = op == SL_OP_RECV ? SL_OP_SEND : op == SL_OP_SEND ? SL_OP_RECV : op;
	return (int32_t)(seq - next) >= 0;
}

/* k's wait as an edge (wait_chain.h): false if it waits for no one rank. */
static bool own_edge(const struct dp_coll *k, struct dp_wait_edge *out)
{
	char waiting[64];
	int peer = dp_coll_waited_rank(k, waiting, sizeof(waiting));

	if (peer < 0)
		return false;
	*out = (struct dp_wait_edge){ .comm = k->comm->key32, .seq = k->seq, .rank = (uint16_t)k->comm->rank,
				      .waits_for = (uint16_t)peer, .op = (uint8_t)k->cmd.opcode };
	return true;
}

/* Whether b is a communicator of a's client: a rank waits in all of its
 * client's calls, on whichever communicator. */
static bool same_client(const struct dp_comm *a, const struct dp_comm *b)
{
	return b->live && b->client == a->client;
}

/* Whether wait w (a chain's, which came on via) is this rank's own. */
static bool is_own(const struct dp_engine *e, const struct dp_comm *via, const struct dp_wait_edge *w)
{
	for (unsigned i = 0; i < DP_MAX_COMMS; i++)
		if (same_client(via, &e->comms[i]) && e->comms[i].key32 == w->comm)
			return e->comms[i].rank == w->rank;
	return false;
}

/* Whether a wait for this rank (into) and this rank's wait in a call of
 * kind op on communicator comm may stand in one cycle: not two collectives
 * of one communicator (every rank runs those in one order, so a rank in a
 * later one has posted the earlier: a mismatch, caught apart). */
static bool may_chain(const struct dp_wait_edge *into, uint8_t op, uint32_t comm)
{
	return dp_is_p2p(into->op) || dp_is_p2p(op) || into->comm != comm;
}

/* Whether chain c, which came on comm, still waits for this rank: its last
 * wait's counterpart is not posted here (a stale chain's is). */
static bool chain_holds(const struct dp_comm *comm, const struct dp_wait_chain *c)
{
	uint8_t counter_op;

	return c->n && unposted_here(comm, c->edge[c->n - 1].rank, c->edge[c->n - 1].op, c->edge[c->n - 1].seq,
				     &counter_op);
}

/* Whether chain c (came on via) names a wait of this rank: it closed on
 * this rank, a cycle to name at the timeout, not to pass on. */
static bool chain_closed(const struct dp_engine *e, const struct dp_comm *via, const struct dp_wait_chain *c)
{
	for (unsigned i = 0; i < c->n; i++)
		if (is_own(e, via, &c->edge[i]))
			return true;
	return false;
}

static void stall_note(struct dp_engine *e, const struct dp_coll *k, int to, const char *chain)
{
	dp_notices_send(e, k->comm, to,
		     (struct sl_hdr){ .seq = k->seq, .step = NOTICE_STALL, .kind = (uint8_t)k->cmd.opcode }, chain);
}

/* Passes chain c (which waits for this rank) on along k's wait: a stall
 * note to the rank k waits for, naming k, with c as its text, a wait of
 * its middle left out past DP_WAIT_CHAIN_MAX (dp_chain_make_room).  A
 * chain of DP_WAIT_HOPS_MAX waits, or too long for the packet, stops here. */
static void chain_pass(struct dp_engine *e, const struct dp_coll *k, const struct dp_wait_chain *c)
{
	struct dp_wait_edge mine;
	struct dp_wait_chain out = *c;
	char text[DP_CHAIN_TEXT_LEN];

	if (own_edge(k, &mine) && may_chain(&c->edge[c->n - 1], mine.op, mine.comm) && dp_chain_make_room(&out) &&
	    dp_chain_write(&out, text, e->payload < sizeof(text) ? e->payload : sizeof(text)))
		stall_note(e, k, mine.waits_for, text);
}

/* The call of comm's client that chains are passed on along: of its
 * calls stalled (noted, dp_note_stall) that wait for one rank, the one
 * stalled longest (the first to time out; of those since their posts, the
 * first posted), or NULL.  The first posted, before: a send held by a
 * rank outside a cycle, posted first but acknowledged in part after the
 * recv behind it was posted, took the chains away from the cycle through
 * that recv, and its ranks timed out bare (it_mismatch --tail, "a cycle
 * behind a send held outside it").  One call, not each: a rank whose
 * every recv of a halo exchange stalls (legal: its peers compute) passed
 * each chain to every peer, and they on to theirs, up to
 * DP_WAIT_CHAIN_MAX hops (14^8 notes on 16 ranks at 8 hops).  Along one
 * call, each note's chain takes one path of at most that many hops; a
 * cycle through another stalled call of the same rank is seen once this
 * one ends, fails or moves (dp_note_stall), not while it stalls (the pair
 * rule still sees one of two). */
static const struct dp_coll *passing_call(const struct dp_engine *e, const struct dp_comm *comm)
{
	const struct dp_coll *oldest = NULL;
	struct dp_wait_edge w;

	for (unsigned i = 0; i < DP_MAX_COMMS; i++)
		for (const struct dp_coll *k = same_client(comm, &e->comms[i]) ? e->comms[i].colls : NULL; k; k = k->next)
			if (k->status == SLUICE_OK && k->noted_ns == k->last_progress_ns &&
			    (!oldest || k->last_progress_ns < oldest->last_progress_ns ||
			     (k->last_progress_ns == oldest->last_progress_ns && k->posted_ns < oldest->posted_ns)) &&
			    own_edge(k, &w))
				oldest = k;
	return oldest;
}

/* Chain c (came on via) closed on this rank: the rank ahead of the cycle
 * in it, which waits for this one and is no part of the cycle, hears of
 * the cycle (a cycle note), so that at its own timeout it names the cycle
 * rather than only a wait (which, told first, would have reached this
 * rank's peers ahead of the cycle's name).  One rank back: that rank
 * tells those behind it (tail_tell). */
static void cycle_tell_tail(struct dp_engine *e, const struct dp_comm *via, const struct dp_wait_chain *c)
{
	char text[DP_CHAIN_TEXT_LEN];
	unsigned i = 0;

	while (!is_own(e, via, &c->edge[i]))
		i++;
	/* from a wait in the head of a chain that left waits out, the cycle is not known whole */
	if (i == 0 || (c->skipped && i < DP_CHAIN_HEAD) ||
	    !dp_chain_format(&c->edge[i], c->n - i, text, e->payload < sizeof(text) ? e->payload : sizeof(text)))
		return;
	for (unsigned j = 0; j < DP_MAX_COMMS; j++) {
		struct dp_comm *t = &e->comms[j];
		if (same_client(via, t) && t->key32 == c->edge[i - 1].comm && t->rank == c->edge[i - 1].waits_for)
			dp_notices_send(e, t, c->edge[i - 1].rank,
				     (struct sl_hdr){ .seq = c->edge[i].seq, .step = NOTICE_CYCLE, .kind = c->edge[i].op },
				     text);
	}
}

/* Whether a and b are the same wait (a cycle or path note told again). */
static bool same_wait(const struct dp_wait_edge *a, const struct dp_wait_edge *b)
{
	return a->comm == b->comm && a->seq == b->seq && a->rank == b->rank && a->waits_for == b->waits_for &&
	       a->op == b->op;
}

/* The call of via's rank on via that waits for rank via->cycle_from and
 * has made no progress since that rank said it waits on a cycle
 * (cycle_came), or NULL. */
static const struct dp_coll *call_into_cycle(const struct dp_comm *via)
{
	struct dp_wait_edge w;

	for (const struct dp_coll *k = via->colls; k; k = k->next)
		if (k->status == SLUICE_OK && k->last_progress_ns < via->cycle_in.at_ns && own_edge(k, &w) &&
		    w.waits_for == via->cycle_from)
			return k;
	return NULL;
}

/* The rank whose wait for this one ends chain ch (came on c): current (from
 * the last timeout), still holding and not closed on this rank; else -1. */
static int waiter_of(const struct dp_engine *e, const struct dp_comm *c, const struct dp_wait_chain *ch, uint64_t now)
{
	if (!ch->n || ch->at_ns + dp_comm_timeout(e, c) <= now || !chain_holds(c, ch) || chain_closed(e, c, ch))
		return -1;
	return ch->edge[ch->n - 1].rank;
}

/* The path note of this rank's wait into the cycle that via's cycle_from
 * waits on: text (k's wait, then cycle_in's) and its header.  False if no
 * call waits on it any more, or the waits do not fit a note. */
static bool path_note(const struct dp_engine *e, const struct dp_comm *via, char *text, size_t size, struct sl_hdr *h)
{
	const struct dp_coll *k = call_into_cycle(via);
	struct dp_wait_edge path[DP_WAIT_CHAIN_MAX];

	if (!via->cycle_in.n || !k || via->cycle_in.n >= DP_WAIT_CHAIN_MAX || !own_edge(k, &path[0]))
		return false;
	memcpy(&path[1], via->cycle_in.edge, via->cycle_in.n * sizeof(path[0]));
	*h = (struct sl_hdr){ .seq = via->cycle_path + 1u, .step = NOTICE_PATH, .kind = path[0].op };
	return dp_chain_format(path, via->cycle_in.n + 1u, text, e->payload < size ? e->payload : size);
}

/* This rank waits on a cycle from outside it (via->cycle_in): every rank
 * that waits for it (a chain held from the last timeout) hears its path
 * to the cycle, once a rank, so that at its own timeout it names the
 * cycle rather than only its wait, and, if it times out first, its abort
 * carries the cycle's name to its communicator (a training job's rank
 * that waits in an all-reduce for one in a recv on a cycle is two steps
 * from it; ranks reach a hang at different times).  Each rank on the path
 * tells those behind it in turn, while the waits fit a note
 * (DP_WAIT_CHAIN_MAX), once a path (cycle_came): a note told again is not
 * passed on again, or each rank behind would multiply them. */
static void tail_tell(struct dp_engine *e, const struct dp_comm *via)
{
	char text[DP_CHAIN_TEXT_LEN];
	struct sl_hdr h;
	uint64_t now = sl_tp_poll_ns(e->tp);

	if (!path_note(e, via, text, sizeof(text), &h))
		return;
	for (unsigned i = 0; i < DP_MAX_COMMS; i++) {
		struct dp_comm *c = &e->comms[i];
		for (unsigned j = 0; same_client(via, c) && j < DP_CHAINS_KEPT; j++) {
			int to = waiter_of(e, c, &c->chains_in[j], now);
			bool told = false;
			for (unsigned b = 0; b < j; b++)
				told |= waiter_of(e, c, &c->chains_in[b], now) == to;
			if (to >= 0 && !told)
				dp_notices_send(e, c, to, h, text);
		}
	}
}

/* A cycle note (text: the cycle's waits, its sender's first; path 0) or a
 * path note (text: the waits from its sender's to the cycle, then the
 * cycle's; the first `path` lead to the cycle) came from rank src on comm:
 * kept for a timeout of this rank's wait for src, and told to the ranks
 * that wait for this one. */
static void cycle_came(struct dp_engine *e, struct dp_comm *comm, int src, uint32_t path, const char *text)
{
	struct dp_wait_chain c;
	bool again;

	if (!dp_chain_parse(text, &c) || c.n < path + 2 || c.skipped)
		return;
	c.at_ns = sl_tp_poll_ns(e->tp);
	again = comm->cycle_from == src && comm->cycle_path == path && comm->cycle_in.n == c.n;
	for (unsigned i = 0; again && i < c.n; i++)
		again = same_wait(&comm->cycle_in.edge[i], &c.edge[i]);
	if (again) {
		comm->cycle_in.at_ns = c.at_ns;
		return;
	}
	comm->cycle_in = c;
	comm->cycle_path = (uint8_t)path;
	comm->cycle_from = (uint16_t)src;
	tail_tell(e, comm);
}

/* Whether comm's client has a running call that waits for one rank: it
 * passes the chains held on once it stalls (dp_note_stall). */
static bool waits_on_one(const struct dp_engine *e, const struct dp_comm *comm)
{
	struct dp_wait_edge w;

	for (unsigned i = 0; i < DP_MAX_COMMS; i++)
		for (const struct dp_coll *k = same_client(comm, &e->comms[i]) ? e->comms[i].colls : NULL; k; k = k->next)
			if (k->status == SLUICE_OK && own_edge(k, &w))
				return true;
	return false;
}

/* Chain c (came on via) waits for this rank, which has not posted its last
 * wait's counterpart, and stops here: this rank waits for no one rank, or
 * c closed on it.  Its starter, a rank or more behind its sender, hears
 * the chain (an ahead note).  A chain that stopped: its timeout names this
 * rank and the call it has not posted, not only the rank it waits for (a
 * long cycle's first rank timed out so, bare, when the last entered its
 * wait too late for the chain to come round).  One that closed on a wait
 * of this rank after its first: the starter waits on that cycle from
 * outside it and names it, with the waits the chain left out counted,
 * where cycle and path notes do not go (a cycle over 65 ranks, or more
 * than DP_WAIT_CHAIN_MAX waits with the path).  Once a chain of two
 * waits or more: n - 2 notes for a line of n ranks whose last computes
 * past an eighth of the timeout. */
static void ahead_tell(struct dp_engine *e, const struct dp_comm *via, const struct dp_wait_chain *c)
{
	const struct dp_wait_edge *first = &c->edge[0];
	struct dp_wait_chain out = *c;
	char text[DP_CHAIN_TEXT_LEN];

	/* room made as for passing it on, unless that leaves out the wait it closed on */
	if (c->n < 2 || !dp_chain_make_room(&out) || chain_closed(e, via, &out) != chain_closed(e, via, c) ||
	    !dp_chain_write(&out, text, e->payload < sizeof(text) ? e->payload : sizeof(text)))
		return;
	for (unsigned i = 0; i < DP_MAX_COMMS; i++) {
		struct dp_comm *t = &e->comms[i];
		if (same_client(via, t) && t->key32 == first->comm && first->rank < t->nranks && t->rank != first->rank)
			dp_notices_send(e, t, first->rank,
				     (struct sl_hdr){ .seq = first->seq, .step = NOTICE_AHEAD, .kind = first->op }, text);
	}
}

/* An ahead note (text: the waits from this rank's to src's rank, which
 * has not posted the last one's counterpart) came from rank src on comm:
 * kept for a timeout of the wait it starts with. */
static void ahead_came(struct dp_engine *e, struct dp_comm *comm, int src, const char *text)
{
	struct dp_wait_chain c;
	const struct dp_wait_edge *last;

	if (!dp_chain_parse(text, &c) || c.n < 2 || c.edge[0].comm != comm->key32 || c.edge[0].rank != comm->rank)
		return;
	last = &c.edge[c.n - 1];
	if (last->comm == comm->key32 && last->waits_for != src)
		return;
	for (unsigned i = 0; i < c.n; i++)
		if (c.edge[i].comm == comm->key32 &&
		    (c.edge[i].rank >= comm->nranks || c.edge[i].waits_for >= comm->nranks))
			return;
	c.at_ns = sl_tp_poll_ns(e->tp);
	comm->ahead = c;
}

/* A stall note's chain (text) came from rank src on comm: kept, the
 * sender's own wait at its end, and passed on at once along the
 * passing_call (dp_note_stall passes it along one that stalls later), while
 * it waits for this rank and has not closed on it.  False for a text that
 * is not a chain to its sender. */
static bool chain_came(struct dp_engine *e, struct dp_comm *comm, int src, const struct sl_hdr *h, const char *text)
{
	struct dp_wait_chain c;
	struct dp_wait_edge *last;
	const struct dp_coll *k;

	if (!dp_chain_parse(text, &c))
		return false;
	last = &c.edge[c.n];
	*last = (struct dp_wait_edge){ .comm = comm->key32, .seq = h->seq, .rank = (uint16_t)src,
				       .waits_for = (uint16_t)comm->rank, .op = h->kind };
	if (c.n && last[-1].comm == last->comm && last[-1].waits_for != last->rank)
		return false;
	for (unsigned i = 0; i < c.n; i++)
		if (c.edge[i].comm == comm->key32 &&
		    (c.edge[i].rank >= comm->nranks || c.edge[i].waits_for >= comm->nranks))
			return false;
	c.n++;
	c.at_ns = sl_tp_poll_ns(e->tp);
	comm->chains_in[comm->chains_next] = c;
	comm->chains_next = (uint8_t)((comm->chains_next + 1) % DP_CHAINS_KEPT);
	if (!chain_holds(comm, &c))
		return true;
	if (chain_closed(e, comm, &c)) {
		cycle_tell_tail(e, comm, &c);
		if (!is_own(e, comm, &c.edge[0])) /* its starter waits on the cycle from outside it */
			ahead_tell(e, comm, &c);
		return true;
	}
	/* src waits for this rank, which waits on a cycle: src hears of it */
	for (unsigned i = 0; i < DP_MAX_COMMS; i++) {
		char path[DP_CHAIN_TEXT_LEN];
		struct sl_hdr ph;
		if (same_client(comm, &e->comms[i]) && path_note(e, &e->comms[i], path, sizeof(path), &ph))
			dp_notices_send(e, comm, src, ph, path);
	}
	if ((k = passing_call(e, comm)))
		chain_pass(e, k, &c);
	else if (!waits_on_one(e, comm))
		ahead_tell(e, comm, &c);
	return true;
}

/* A call stalls once it has made no progress for an eighth of the
 * timeout: then its stall note goes out.  Half a timeout, before, left a
 * cycle unnamed whose ranks entered their waits more than about half a
 * timeout apart (the last one's note went out after the first one's
 * timeout: a bare timeout that its abort took to every peer); now up to
 * 7/8 of one apart.  Notes cost one a stall, and a chain one path
 * (passing_call): a legal rank that computes longer than the eighth while
 * its peers wait draws a note from each, nothing more. */
static uint64_t stall_ns(const struct dp_engine *e, const struct dp_comm *comm)
{
	return dp_comm_timeout(e, comm) / 8;
}

/* A stalled call (stall_ns without progress) tells the rank it
 * waits for which call it waits in, once a stall, and while it is the
 * passing_call passes on to it the chains of waits for this rank that
 * came within the last timeout and still hold (chain_came): a rank that
 * sees its own wait come back knows the cycle (chain_cycle).  Once a
 * stall, when it becomes the passing call: at its stall, or later, when an
 * older stalled call ends or moves.  Only at its stall, before, the chains
 * that went along an older call (a prefetching recv whose data came later)
 * went no further, and a cycle through this one was not seen
 * (it_mismatch --cycles, "a cycle through rank 0's second recv").  Until it
 * passes, a stalled call looks whether it is the passing call (a walk of
 * the client's calls) every 64th of a timeout, not every timer pass: with
 * many calls stalled (legal recvs while peers compute) that walk each
 * millisecond was each call's.  The notes decide nothing: a cycle is named only
 * at a timeout, so a legal order (a rank that computes for a while before
 * it posts) can only be caught where it would have timed out anyway. */
/* A stalled call asks the rank it waits for whether it is there (a ping,
 * which that rank's transport acknowledges and its engine ignores) every
 * stall_ns after its stall note, while nothing sent there waits for an
 * acknowledgement: a peer that died after acknowledging all it got (a
 * process killed in the middle of a call it was to send in) is silent from
 * the next ping on, and the timeout names it (coll_timeout.c, silent_peer), up
 * to the communicator's timeout before the transport, which counts silence
 * by its own and never on an idle flow, would.  One ping at a time a peer:
 * the next goes once the last is acknowledged. */
static void ping_waited(struct dp_engine *e, struct dp_coll *k, uint64_t now)
{
	char waiting[64];
	int peer;

	if (k->pinged_ns <= k->last_progress_ns) { /* this stall's first look: its stall note asks */
		k->pinged_ns = now;
		return;
	}
	if (now - k->pinged_ns < stall_ns(e, k->comm))
		return;
	k->pinged_ns = now;
	peer = dp_coll_waited_rank(k, waiting, sizeof(waiting));
	if (peer >= 0)
		dp_ping(e, k, peer);
}

void dp_ping(struct dp_engine *e, const struct dp_coll *k, int peer)
{
	if (k->comm->node[peer] != e->node && !sl_tp_node_silent_ns(e->tp, k->comm->node[peer]))
		dp_notices_send(e, k->comm, peer, (struct sl_hdr){ .seq = k->seq, .step = NOTICE_PING }, "");
}

void dp_note_stall(struct dp_engine *e, struct dp_coll *k, uint64_t now)
{
	struct dp_wait_edge mine;

	if (k->status != SLUICE_OK || now < k->last_progress_ns || now - k->last_progress_ns < stall_ns(e, k->comm))
		return;
	ping_waited(e, k, now);
	if (k->passed_ns == k->last_progress_ns)
		return;
	if (!own_edge(k, &mine)) { /* waits for no one rank: nothing to tell, never the passing call */
		k->noted_ns = k->passed_ns = k->last_progress_ns;
		return;
	}
	bool first = k->noted_ns != k->last_progress_ns; /* this stall's first look */
	if (first) {
		k->noted_ns = k->last_progress_ns;
		stall_note(e, k, mine.waits_for, "");
	} else if (now - k->looked_ns < stall_ns(e, k->comm) / 8) {
		return;
	}
	k->looked_ns = now;
	if (passing_call(e, k->comm) != k)
		return;
	k->passed_ns = k->last_progress_ns;
	for (unsigned i = 0; i < DP_MAX_COMMS; i++) {
		const struct dp_comm *c = &e->comms[i];
		for (unsigned j = 0; same_client(k->comm, c) && j < DP_CHAINS_KEPT; j++)
			if (c->chains_in[j].n && c->chains_in[j].at_ns + dp_comm_timeout(e, c) > now &&
			    chain_holds(c, &c->chains_in[j]) && !chain_closed(e, c, &c->chains_in[j]))
				chain_pass(e, k, &c->chains_in[j]);
	}
}

/* Whether chain wait x is k's: a send's or recv's number is its pair's,
 * so its peer tells it from the rank's other calls of that number (two
 * recvs #0 from different ranks took each other's chains). */
static bool is_wait_of(const struct dp_wait_edge *x, const struct dp_coll *k)
{
	return x->comm == k->comm->key32 && x->rank == k->comm->rank && x->op == k->cmd.opcode && x->seq == k->seq &&
	       (!dp_is_p2p(x->op) || x->waits_for == k->cmd.root);
}

/* The shortest cycle through k's wait among the chains that came back to
 * this rank during k's stall and still hold: its length (0: none), its
 * waits from k's on in cycle (cycle->n known, cycle->skipped more not
 * known before cycle->edge[*skip_at], where the chain left them out), and
 * in *via the communicator of the wait for this rank that closes it. */
static unsigned chain_cycle(struct dp_engine *e, const struct dp_coll *k, struct dp_wait_chain *cycle,
			    unsigned *skip_at, struct dp_comm **via)
{
	unsigned best = 0;

	for (unsigned i = 0; i < DP_MAX_COMMS; i++) {
		struct dp_comm *c = &e->comms[i];
		for (unsigned j = 0; same_client(k->comm, c) && j < DP_CHAINS_KEPT; j++) {
			const struct dp_wait_chain *ch = &c->chains_in[j];
			if (!ch->n || ch->at_ns <= k->last_progress_ns || !chain_holds(c, ch))
				continue;
			for (unsigned w = 0; w + 1 < ch->n; w++) {
				const struct dp_wait_edge *x = &ch->edge[w];
				unsigned skipped = w < DP_CHAIN_HEAD ? ch->skipped : 0;
				if (is_wait_of(x, k) && may_chain(&ch->edge[ch->n - 1], x->op, x->comm) &&
				    (!best || ch->n - w + skipped < best)) {
					best = ch->n - w + skipped;
					cycle->n = (uint8_t)(ch->n - w);
					cycle->skipped = (uint16_t)skipped;
					*skip_at = skipped ? DP_CHAIN_HEAD - w : 0;
					memcpy(cycle->edge, x, cycle->n * sizeof(*x));
					*via = c;
				}
			}
		}
	}
	return best;
}

/* k has waited a timeout for peer, which said it waits for this rank in a
 * call that this rank has not posted (not both collectives): said in why
 * and true (a cycle of two: SLUICE_ERR_MISMATCH). */
static bool pair_cycle(const struct dp_engine *e, const struct dp_coll *k, int peer, char *why, size_t why_size)
{
	const struct dp_comm *comm = k->comm;
	const struct dp_peer_wait *w = &comm->peer_wait[peer];
	char mine[64], theirs[64], counter[64], for_peer[24] = "";
	uint8_t counter_op;

	if (!w->op || (!dp_is_p2p(w->op) && !dp_is_p2p(k->cmd.opcode)) ||
	    !unposted_here(comm, peer, w->op, w->seq, &counter_op))
		return false;
	if (dp_is_p2p(w->op) && dp_is_p2p(k->cmd.opcode)) { /* no collective to say apart */
		const struct dp_wait_edge cycle[2] = {
			{ .comm = comm->key32, .seq = k->seq, .rank = (uint16_t)comm->rank,
			  .waits_for = (uint16_t)peer, .op = (uint8_t)k->cmd.opcode },
			{ .comm = comm->key32, .seq = w->seq, .rank = (uint16_t)peer,
			  .waits_for = (uint16_t)comm->rank, .op = w->op },
		};
		dp_cycle_sentence(why, why_size, cycle, 2, 0, 0, (double)dp_comm_timeout(e, comm) / 1e9);
		return true;
	}
	dp_call_name(mine, sizeof(mine), (uint8_t)k->cmd.opcode, k->seq, peer);
	if (!dp_is_p2p(k->cmd.opcode)) /* a send or recv names its peer already */
		snprintf(for_peer, sizeof(for_peer), " for rank %d", peer);
	dp_call_name(theirs, sizeof(theirs), w->op, w->seq, (int)comm->rank);
	dp_call_name(counter, sizeof(counter), counter_op, w->seq, peer);
	sl_errmsg_format(why, why_size,
			 "rank %d waits in %s, and rank %u has not posted %s while it waits in %s%s: each "
			 "waits on the other (no progress for %.1f s); post %s on rank %u before waiting for "
			 "%s, or make these calls in one order on both ranks (sends and recvs may come before "
			 "or after a collective, but a rank must not wait for one before posting the other)",
			 peer, theirs, comm->rank, counter, mine, for_peer,
			 (double)dp_comm_timeout(e, comm) / 1e9, counter, comm->rank, mine);
	return true;
}

/* k has waited a timeout for peer, which said during k's stall that it is
 * in a cycle of waits or waits on one (cycle_came): said in why, and true. */
static bool waits_on_a_cycle(const struct dp_engine *e, const struct dp_coll *k, int peer, char *why,
			     size_t why_size)
{
	const struct dp_comm *comm = k->comm;
	struct dp_wait_edge mine;

	if (!comm->cycle_in.n || comm->cycle_from != peer || comm->cycle_in.at_ns <= k->last_progress_ns ||
	    !own_edge(k, &mine))
		return false;
	dp_tail_sentence(why, why_size, &mine, comm->cycle_in.edge, comm->cycle_in.n, comm->cycle_path, 0, 0,
			 (double)dp_comm_timeout(e, comm) / 1e9);
	return true;
}

/* The ahead note of k's wait for peer that came during k's stall, or NULL. */
static const struct dp_wait_chain *ahead_of(const struct dp_coll *k, int peer)
{
	const struct dp_wait_chain *a = &k->comm->ahead;

	return a->n && a->at_ns > k->last_progress_ns && is_wait_of(&a->edge[0], k) && a->edge[0].waits_for == peer
		       ? a
		       : NULL;
}

/* Where ahead note a's cycle starts: the wait, after the first and
 * before the last, of the rank its last wait waits for (0: a path that
 * stopped, no cycle). */
static unsigned closes_at(const struct dp_wait_chain *a)
{
	const struct dp_wait_edge *last = &a->edge[a->n - 1];

	for (unsigned i = 1; i + 1 < a->n; i++)
		if (a->edge[i].comm == last->comm && a->edge[i].rank == last->waits_for)
			return i;
	return 0;
}

/* k has waited a timeout for peer, and its ahead note (ahead_tell) says
 * its chain closed on a cycle it waits on from outside: said in why, and
 * true. */
static bool cycle_ahead(const struct dp_engine *e, const struct dp_coll *k, int peer, char *why, size_t why_size)
{
	const struct dp_wait_chain *a = ahead_of(k, peer);
	unsigned at = a ? closes_at(a) : 0;

	if (!at)
		return false;
	dp_tail_sentence(why, why_size, &a->edge[0], &a->edge[1], a->n - 1u, at - 1u,
			 a->skipped ? DP_CHAIN_HEAD - 1u : 0, a->skipped, (double)dp_comm_timeout(e, k->comm) / 1e9);
	return true;
}

/* The four in the order they are asked: a peer's own word first (its
 * stall note), then a cycle it said it waits on, then a chain come back,
 * then one's starter told where its chain closed. */
bool dp_cycle_named(struct dp_engine *e, const struct dp_coll *k, int peer, char *why, size_t why_size,
		    struct dp_comm **also)
{
	struct dp_wait_chain cycle;
	unsigned skip_at = 0; /* set with the cycle: gcc 13 -O2 cannot tell */

	*also = NULL;
	if (peer >= 0 && (pair_cycle(e, k, peer, why, why_size) || waits_on_a_cycle(e, k, peer, why, why_size)))
		return true;
	if (!chain_cycle(e, k, &cycle, &skip_at, also))
		return peer >= 0 && cycle_ahead(e, k, peer, why, why_size);
	dp_cycle_sentence(why, why_size, cycle.edge, cycle.n, skip_at, cycle.skipped,
			  (double)dp_comm_timeout(e, k->comm) / 1e9);
	return true;
}

const struct dp_coll *dp_cycle_behind(struct dp_engine *e, const struct dp_coll *k, char *why, size_t why_size,
				      struct dp_comm **also)
{
	char waiting[64];

	for (unsigned i = 0; i < DP_MAX_COMMS; i++)
		for (const struct dp_coll *b = same_client(k->comm, &e->comms[i]) ? e->comms[i].colls : NULL; b;
		     b = b->next)
			if (b != k && b->status == SLUICE_OK && b->noted_ns == b->last_progress_ns &&
			    dp_cycle_named(e, b, dp_coll_waited_rank(b, waiting, sizeof(waiting)), why, why_size, also))
				return b;
	return NULL;
}

void dp_wait_note_came(struct dp_engine *e, struct dp_comm *comm, int src, const struct sl_hdr *h, const char *text)
{
	/* a forged or corrupt note names a call that cannot be, or a chain
	 * that is not one: dropped */
	if (h->step == NOTICE_STALL && h->kind && h->kind < SL_OP_COUNT && chain_came(e, comm, src, h, text))
		comm->peer_wait[src] = (struct dp_peer_wait){ .seq = h->seq, .op = h->kind };
	if (h->step == NOTICE_CYCLE)
		cycle_came(e, comm, src, 0, text);
	if (h->step == NOTICE_PATH && h->seq)
		cycle_came(e, comm, src, h->seq, text);
	if (h->step == NOTICE_AHEAD)
		ahead_came(e, comm, src, text);
}

const struct dp_wait_chain *dp_path_ahead(const struct dp_coll *k, int peer)
{
	const struct dp_wait_chain *a = ahead_of(k, peer);

	return a && !closes_at(a) ? a : NULL;
}

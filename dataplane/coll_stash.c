/*
 * coll_stash.c: packets that come before this rank posted their call.
 *
 * An early packet is kept (copied, or held in its frame) in its
 * communicator's stash until its call is posted (dp_stash_take).  A sender
 * that runs ahead is held (its window, SL_DELIVER_HOLD) once its share of
 * the stash is full, refused past the eager bytes of a call further on
 * (late_refused), or parked (sl_tp_park: it holds back the communicator's
 * calls from the first not posted here, or its sends from the first whose
 * recv is not posted) while a posted call waits on it;
 * posts, failures, a starving call and a destroy let them go again.  Kept
 * packets of either kind (early here, deferred in coll_run.c) come from the
 * engine's pool through dp_packet_keep and go back through dp_packet_put.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include <sluice/sluice.h>
#include <sluice/touch.h>

#include "coll_stash.h"
#include "coll_wire.h"

/* A posted call of a held communicator that got nothing this long reopens
 * the windows for a round: what it waits for may be queued behind the
 * early packets that held them (stash_starves). */
#define STARVED_NS 2000000ull

/* Copies of early and deferred packets come from the engine's pool (pool.h):
 * a receiver that a sender runs ahead of stashes tens of packets, then
 * frees them all, and from malloc each new run of them faulted fresh heap
 * pages in, and glibc gave the heap top back when they went. */
static struct dp_stashed *packet_get(struct dp_engine *e, uint32_t len)
{
	return dp_pool_get(&e->pool, sizeof(struct dp_stashed) + len);
}

void dp_packet_put(struct dp_engine *e, struct dp_stashed *s)
{
	if (s->past_cap)
		e->stash_past_cap_bytes -= s->hdr.len;
	if (s->in_frame)
		sl_tp_free_frame(e->tp, &s->frame);
	dp_pool_put(&e->pool, s);
}

void dp_packets_free(struct dp_engine *e, struct dp_stashed *s)
{
	while (s) {
		struct dp_stashed *next = s->next;
		dp_packet_put(e, s);
		s = next;
	}
}

/* A packet kept for later: in its frame when in_place and the port lets a
 * receiver hold some (the shm mesh's: early packets were a third copy of
 * their bytes, a quarter to a half of a 3-rank send/recv's or all-to-all's,
 * which Open MPI's rendezvous never sends early), else copied. */
struct dp_stashed *dp_packet_keep(struct dp_engine *e, const struct sl_hdr *h, const uint8_t *payload, bool in_place)
{
	struct sl_tp_frame f;
	bool in_frame = in_place && sl_tp_keep_frame(e->tp, &f);
	struct dp_stashed *s = packet_get(e, in_frame ? 0 : h->len);

	if (!s) {
		if (in_frame)
			sl_tp_free_frame(e->tp, &f);
		return NULL;
	}
	s->in_frame = in_frame;
	if (in_frame) {
		e->count.held_in_place++;
		s->frame = f;
		s->payload = (uint8_t *)payload;
	} else {
		s->payload = (uint8_t *)(s + 1);
		memcpy(s->payload, payload, h->len);
	}
	s->hdr = *h;
	s->next = NULL;
	s->past_cap = false;
	return s;
}

/* Whether a posted call that includes node still waits for data. */
static bool waits_on(const struct dp_engine *e, uint16_t node)
{
	for (unsigned i = 0; i < DP_MAX_COMMS; i++) {
		const struct dp_comm *comm = &e->comms[i];
		if (!comm->live || rank_of_node(comm, node) < 0)
			continue;
		for (const struct dp_coll *k = comm->colls; k; k = k->next)
			if (!sl_sched_recv_done(&k->sched))
				return true;
	}
	return false;
}

/*
 * A sender more than a call ahead: its early packets past a transfer's first
 * DP_EAGER_MAX bytes are refused, and it is held until a call is posted
 * here.  Taken into the stash, they let a sender run calls ahead of a rank
 * that had stalled (2 ranks on 2 cores: descheduled), which then copied
 * every packet twice, into the stash and out of it, and so never caught up
 * (a 1 MiB broadcast's root 26 calls ahead, taking 2x as long a call).  The
 * next call's packets are still taken: refusing them too, a 3-rank
 * broadcast of 128-512 KiB, whose ranks are descheduled in turn, took up to
 * 2x as long.  Not while a posted call waits: what it waits for may be
 * queued behind them.
 */
static bool late_refused(struct dp_engine *e, const struct dp_comm *comm, int src, const struct sl_hdr *h)
{
	uint16_t node = comm->node[src];

	if (h->offset < DP_EAGER_MAX || calls_ahead(comm, h, src) == 0 || node >= SL_MAX_NODES ||
	    waits_on(e, node))
		return false;
	e->late_holding += !e->late_held[node];
	e->late_held[node] = true;
	return true;
}

/* Let comm's senders that late_refused held go on. */
void dp_stash_late_release(struct dp_engine *e, const struct dp_comm *comm)
{
	/* every post asks: without the count, a walk over all of comm's ranks */
	for (uint32_t r = 0; e->late_holding && r < comm->nranks; r++) {
		uint16_t node = comm->node[r];
		if (r != comm->rank && node < SL_MAX_NODES && e->late_held[node]) {
			e->late_held[node] = false;
			e->late_holding--;
			sl_tp_resume_node(e->tp, node);
		}
	}
}

/* comm takes early packets again (failed, gone or starved): reopen the
 * windows its stash held (DP_STASH_HOLD, and late_refused's). */
static void stash_release(struct dp_engine *e, struct dp_comm *comm)
{
	dp_stash_late_release(e, comm);
	if (!comm->stash_held)
		return;
	comm->stash_held = 0;
	e->stash_holding--;
	memset(comm->held_from, 0, sizeof(comm->held_from));
	sl_tp_resume(e->tp);
}

/* comm's tables of early packets and of ended rooted calls, in one
 * mapping made and touched when the communicator is added (sluice/touch.h),
 * not at its first early packet or first ended call: a 2-rank broadcast
 * root faulted the ended calls' 8 pages in when its first lingering call
 * ended, inside its first barrier, and came out of it 100-250 us after its
 * leaf, which then waited as long in its first timed call
 * (perf/ALGORITHMS.md, stall8).  Also each sender's share of DP_STASH_HOLD
 * and DP_STASH_RESUME (and of their bytes), divided once here.  False when
 * out of memory. */
bool dp_comm_open_tables(struct dp_comm *comm)
{
	uint32_t senders = comm->nranks > 1 ? comm->nranks - 1 : 1;
	void *t = mmap(NULL, DP_COMM_TABLES_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (t == MAP_FAILED)
		return false;
	sl_touch(t, DP_COMM_TABLES_BYTES);
	comm->stash = t;
	comm->done = (struct dp_done_call *)(comm->stash + DP_STASH_BUCKETS);
	comm->hold_share = DP_STASH_HOLD / senders;
	comm->resume_share = DP_STASH_RESUME / senders;
	comm->hold_bytes = DP_STASH_HOLD_BYTES / senders;
	comm->resume_bytes = DP_STASH_RESUME_BYTES / senders;
	return true;
}

/* What a park of h's sender names h by: its call, or its send (sl_tp_order). */
static enum sl_tp_order order_of(const struct sl_hdr *h)
{
	return packet_is_p2p(h) ? SL_TP_SENDS : SL_TP_CALLS;
}

/* Hold src's window on h; the hold remembers h's kind, which a park
 * that replaces it (park_held_senders) must name. */
static void stash_hold(struct dp_engine *e, struct dp_comm *comm, int src, const struct sl_hdr *h)
{
	if (!comm->held_from[src]) {
		e->stash_holding += comm->stash_held++ == 0;
		comm->held_kinds[src] = 0;
	}
	comm->held_from[src] = true;
	comm->held_kinds[src] |= (uint8_t)(1u << order_of(h));
}

/* comm holds src's window no more. */
static void stash_unhold(struct dp_engine *e, struct dp_comm *comm, uint32_t src)
{
	comm->held_from[src] = false;
	e->stash_holding -= --comm->stash_held == 0;
	sl_tp_resume_node(e->tp, comm->node[src]);
}

/* A call of comm is posted here (order SL_TP_CALLS), or comm failed or
 * is gone (then each order): its senders send what they parked of that
 * order for it (stash_park). */
static void stash_unpark(struct dp_engine *e, struct dp_comm *comm, enum sl_tp_order order)
{
	bool *parking = order == SL_TP_SENDS ? &comm->parking_sends : &comm->parking;

	if (!*parking)
		return;
	*parking = false;
	for (uint32_t r = 0; r < comm->nranks; r++)
		if (r != comm->rank)
			sl_tp_unpark(e->tp, comm->node[r], comm->key32, order);
}

/*
 * The stash holds DP_STASH_MAX packets, unless a posted call waits on the
 * sender: what it waits for may be queued behind this packet, and a
 * refused packet stops the flow there (its cumulative point: the sender
 * sends at most a window past it).  A posted call that starved reopens the
 * held windows every timer pass (stash_starves), each round bringing a
 * window more of early packets; once they filled the stash, the next was
 * refused and the call's data, further behind, never came, while the rank
 * would post their call only after it (it_mix seed 629: 1 KiB packets,
 * 4 MiB calls).  Taken past the cap, they still hold the sender, and
 * the calls the sender ran ahead bound them, or else the engine's
 * stash_limit (stash_overflows).
 */
static bool stash_full(const struct dp_engine *e, const struct dp_comm *comm, int src)
{
	return comm->nstash >= DP_STASH_MAX && !waits_on(e, comm->node[src]);
}

/* Why a sender reached the stash limit with packet h, and what to do: a
 * sender parks its calls and sends when asked (stash_park), unless its
 * build is older (sends: from before session 33, which does not park
 * them) or broken. */
static void overflow_cause(const struct sl_hdr *h, char *cause, size_t size)
{
	if (packet_is_p2p(h))
		snprintf(cause, size, "its dataplane does not park its sends: an older build (which parks calls "
				      "only) or a misbehaving one: run one build on every rank, post the recv before "
				      "waiting on a call that rank posts after the send, or raise the limit");
	else
		snprintf(cause, size, "its dataplane ignores its held window or parked calls: a misbehaving build, or "
				      "an older one (which parks the calls of %d communicators a flow at most, where "
				      "this one parks all %d an engine has): run one build on every rank, or raise the "
				      "limit", SL_PARKS_LOW, DP_MAX_COMMS);
}

/*
 * Taken past the cap, early packets are bounded by the engine's
 * stash_limit: an honest sender is parked there (stash_park), or held and
 * sends a window a starving round (stash_starves), but one that ignores the hold
 * would make this rank take a block for every packet, for as long as the
 * call waited.  At the bound the communicator fails, saying so: true then
 * (the packet is dropped, as every packet of a failed communicator).
 */
static bool stash_overflows(struct dp_engine *e, struct dp_comm *comm, int src, const struct sl_hdr *h)
{
	char cause[256];

	if (comm->nstash < DP_STASH_MAX || e->stash_past_cap_bytes + h->len <= e->stash_limit)
		return false;
	e->count.stash_overflows++;
	overflow_cause(h, cause, sizeof(cause));
	dp_comm_fail(e, comm, SLUICE_ERR_NO_MEMORY, comm->next_seq,
		     "rank %d sent %" PRIu64 " KiB of %s not posted here (#%u, %u packets) while a call waits on it, "
		     "past the stash limit (sluiced --stash-limit, SLUICE_STASH_LIMIT): %s",
		     src, e->stash_past_cap_bytes >> 10, packet_is_p2p(h) ? "sends whose recv is" : "calls", h->seq,
		     comm->nstash, cause);
	return true;
}

/* Park src's calls on comm from the first not posted here, or its sends
 * (order SL_TP_SENDS) from the first whose recv is not; a hold of src on
 * comm gives way to it, so that what a call waits for behind them comes.
 * A flow parks the calls of every communicator an engine has: for calls
 * stash_park fails only for a node without a flow; for sends also for a
 * sender that does not park them (an older build) or no slot left. */
_Static_assert(SL_PARKS_MAX >= DP_MAX_COMMS, "a flow parks the calls of every communicator of its engine");
static bool park_sender(struct dp_engine *e, struct dp_comm *comm, uint32_t src, enum sl_tp_order order)
{
	bool sends = order == SL_TP_SENDS;
	uint32_t from = sends ? comm->p2p_recv_seq[src] : comm->next_seq;

	if (!sl_tp_park(e->tp, comm->node[src], comm->key32, order, from))
		return false;
	*(sends ? &comm->parking_sends : &comm->parking) = true;
	if (comm->held_from[src])
		stash_unhold(e, comm, src);
	return true;
}

/*
 * src's early packets fill its share of the stash.  While a posted call
 * waits on src, what it waits for may be queued behind the rest of their
 * call, on any communicator (one flow carries them all): a held window
 * held that too, and the starving call reopened it every STARVED_NS for
 * another window of them, past the stash's cap without end (a peer's 547
 * MB all-reduce posted on another communicator before the one this rank
 * waits on overran the stash limit: perf/ALGORITHMS.md, soak21).  Parked
 * instead (sl_tp_park: the sender holds back this communicator's calls
 * from the first not posted here and sends the rest), the stash takes only
 * what the sender had out when the park reached it, and stash_unpark lets
 * the calls come once one is posted.  A send is parked alike, by the
 * pair's seq (a peer that sent a large message before a call this rank
 * waits on first), until its recv is posted.  False (hold it then): no
 * posted call waits on src, or the park was refused (park_sender).
 */
static bool stash_park(struct dp_engine *e, struct dp_comm *comm, int src, const struct sl_hdr *h)
{
	return waits_on(e, comm->node[src]) && park_sender(e, comm, (uint32_t)src, order_of(h));
}

/* A call is posted on `posted`: senders it waits on whose early packets
 * hold a stash (held before, when no call waited on them, so not parked:
 * stash_park) are parked now, by the kind of what their hold took: calls,
 * sends or both.  Else the posted call's data waited behind theirs until
 * it starved a STARVED_NS round (2 ms), which reopened the window, and
 * only the packets that then came parked them; and a hold of sends parked
 * as calls let them go on a window more (word34). */
static void park_held_senders(struct dp_engine *e, const struct dp_comm *posted)
{
	for (unsigned i = 0; e->stash_holding && i < DP_MAX_COMMS; i++) {
		struct dp_comm *comm = &e->comms[i];
		for (uint32_t r = 0; comm->live && comm->stash_held && r < comm->nranks; r++) {
			uint8_t kinds = comm->held_kinds[r];
			if (!comm->held_from[r] || rank_of_node(posted, comm->node[r]) < 0 || !waits_on(e, comm->node[r]))
				continue;
			for (enum sl_tp_order o = SL_TP_CALLS; o <= SL_TP_SENDS; o++)
				if (kinds >> o & 1)
					park_sender(e, comm, r, o);
		}
	}
}

/* An early packet waits in its frame only for the next call, which this
 * rank is about to post (a peer that posted first), and not for a rooted
 * one whose root sends, as it runs calls ahead and would hold the frames as
 * long: the middle rank of a 3-rank broadcast gets nearly every packet
 * early, and with them kept its 256 KiB - 1 MiB calls measured 0.8x in
 * place, in rounds that noisy (perf/ALGORITHMS.md).  A gather's packets go
 * to its root, whose leaves may wait in step with it (coll_run.c
 * sends_acked): then they come a call early at most, and were copied in
 * and out of the stash (perf/ALGORITHMS.md, gcopy32). */
enum sl_deliver_result dp_stash_packet(struct dp_engine *e, struct dp_comm *comm, int src, const struct sl_hdr *h,
				       const uint8_t *payload)
{
	uint32_t op = h->kind & ((1u << KIND_ALGO_SHIFT) - 1);
	bool in_place = calls_ahead(comm, h, src) == 0 && (!is_rooted(op) || op == SL_OP_GATHER);
	struct dp_stashed *s;
	struct dp_stash_bucket *b;
	bool full;

	if (late_refused(e, comm, src, h))
		return SL_DELIVER_RETRY;
	full = stash_full(e, comm, src);
	if (!full && stash_overflows(e, comm, src, h))
		return SL_DELIVER_DONE; /* dropped, as every packet of the failed communicator from now on */
	if (full || !(s = dp_packet_keep(e, h, payload, in_place))) {
		stash_hold(e, comm, src, h);
		return SL_DELIVER_RETRY;
	}
	if (comm->nstash >= DP_STASH_MAX) {
		s->past_cap = true;
		e->stash_past_cap_bytes += h->len;
		e->count.stashed_past_cap++;
	}
	b = &comm->stash[h->seq % DP_STASH_BUCKETS];
	if (b->tail)
		b->tail->next = s;
	else
		b->head = s;
	b->tail = s;
	comm->nstash++;
	e->count.stashed++;
	comm->stash_bytes_from[src] += h->len;
	/* by bytes only from a call past the next: the next one's own packets
	 * are taken in as before (a post drains them), so a large call whose
	 * peer posted first is not held at every few MiB */
	if ((++comm->nstash_from[src] >= comm->hold_share || comm->nstash >= DP_STASH_MAX ||
	     (comm->stash_bytes_from[src] >= comm->hold_bytes && calls_ahead(comm, h, src) > 0)) &&
	    !stash_park(e, comm, src, h))
		stash_hold(e, comm, src, h);
	return comm->held_from[src] ? SL_DELIVER_HOLD : SL_DELIVER_DONE;
}

struct dp_stashed *dp_stash_take(const struct dp_coll *k)
{
	struct dp_comm *comm = k->comm;
	struct dp_stash_bucket *b = &comm->stash[k->seq % DP_STASH_BUCKETS];
	struct dp_stashed **p, *kept = NULL, *taken = NULL, **taken_end = &taken;

	for (p = &b->head; *p;) {
		struct dp_stashed *s = *p;
		int src = rank_of_node(comm, s->hdr.src_node);
		if (!packet_is_for(k, &s->hdr, src)) {
			kept = s;
			p = &s->next;
			continue;
		}
		*p = s->next;
		comm->nstash--;
		comm->nstash_from[src]--;
		comm->stash_bytes_from[src] -= s->hdr.len;
		*taken_end = s;
		taken_end = &s->next;
	}
	*taken_end = NULL;
	b->tail = kept;
	return taken;
}

void dp_stash_drained(struct dp_engine *e, struct dp_comm *comm)
{
	/* after this call's own early packets left: the rest of the call may be what is held */
	for (uint32_t r = 0; comm->stash_held && r < comm->nranks; r++) {
		if (comm->held_from[r] && comm->nstash_from[r] <= comm->resume_share &&
		    comm->stash_bytes_from[r] <= comm->resume_bytes)
			stash_unhold(e, comm, r);
	}
}

/* A held stash can starve a posted call: a peer that posted calls A and B
 * sends A's last step behind B's first, while this rank, waiting for A,
 * has not posted B.  Until A moves again, each timer pass past STARVED_NS
 * reopens the windows (the packets that come are held again, and taken
 * past the stash's cap: stash_full).  Every communicator's: a peer's flow
 * carries all of them, and B may be on another one, whose stash no call
 * of its own drains while this rank waits for A (it_mix, seed 5). */
void dp_stash_starves(struct dp_engine *e, const struct dp_coll *k, uint64_t now)
{
	if (!e->stash_holding || now < k->last_progress_ns + STARVED_NS)
		return;
	for (unsigned i = 0; e->stash_holding && i < DP_MAX_COMMS; i++)
		if (e->comms[i].live && e->comms[i].stash_held)
			stash_release(e, &e->comms[i]);
}

const struct sl_hdr *dp_stash_cross_kind(const struct dp_coll *k, int peer)
{
	const struct dp_comm *comm = k->comm;
	const struct sl_hdr *oldest = NULL;

	for (unsigned b = 0; comm->nstash && b < DP_STASH_BUCKETS; b++)
		for (const struct dp_stashed *s = comm->stash[b].head; s; s = s->next)
			if (rank_of_node(comm, s->hdr.src_node) == peer &&
			    packet_is_p2p(&s->hdr) != dp_is_p2p(k->cmd.opcode) &&
			    (!oldest || (int32_t)(s->hdr.seq - oldest->seq) < 0))
				oldest = &s->hdr;
	return oldest;
}

void dp_stash_posted(struct dp_engine *e, const struct dp_coll *k)
{
	struct dp_comm *comm = k->comm;

	dp_stash_late_release(e, comm); /* what it refused may be this call's */
	stash_unpark(e, comm, SL_TP_CALLS); /* and what its senders parked */
	if (k->cmd.opcode == SL_OP_RECV)
		sl_tp_unpark(e->tp, comm->node[k->cmd.root], comm->key32, SL_TP_SENDS);
	park_held_senders(e, comm);
}

void dp_stash_let_go(struct dp_engine *e, struct dp_comm *comm)
{
	stash_release(e, comm);
	stash_unpark(e, comm, SL_TP_CALLS);
	stash_unpark(e, comm, SL_TP_SENDS);
}

void dp_stash_close(struct dp_engine *e, struct dp_comm *comm)
{
	for (unsigned b = 0; b < DP_STASH_BUCKETS; b++)
		dp_packets_free(e, comm->stash[b].head);
	munmap(comm->stash, DP_COMM_TABLES_BYTES);
	dp_stash_let_go(e, comm);
}

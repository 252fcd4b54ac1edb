/*
 * algo_pairwise.c: pairwise exchange for all-to-all.  In step i (1..n-1)
 * rank r sends its block for r + i and receives the block of r - i; the
 * step's send waits, chunk by chunk, for the previous step's reception,
 * so a rank has one peer to send to and one to hear from at a time,
 * instead of direct's n - 1 at once (an incast of n - 1 senders on every
 * receiver).  n - 1 latencies instead of one: for large blocks, where
 * incast costs more than steps.
 *
 * At 3 ranks or more the steps are the rounds of a round-robin tournament
 * instead: in each, a rank sends to and hears from one peer, the same one.
 * In place, the block from j then lands where this rank's send to j, in
 * the same step, reads, so the engine can run on the input itself, each
 * reception held until that send is acknowledged (sl_sched_input_gate_ok).
 * In the shifted steps above, the block from r - i lands where the send to
 * r - i of step n - i reads; for i < n - i that send comes later and waits
 * on this reception through the steps between (a cycle), so in place
 * those steps need a copy of the input.  Out of place too: in place is
 * each rank's own choice, and every rank must number the steps alike.
 * Rounds: n - 1 at an even n; n at an odd n, in each of which one rank
 * sits out.
 */
#include "schedule.h"

/* Exchange with one peer a step (the tournament). */
static bool paired(const struct sl_sched_plan *p)
{
	return p->nranks > 2;
}

/* The tournament's rounds: rank r's peer in round i, r itself when it
 * sits out.  The circle method: the ranks of an odd count m meet
 * (i - r) mod m, r sitting out when that is r; at an even n rank n - 1
 * takes the place of the one that would sit out. */
static uint32_t round_peer(uint32_t n, uint32_t r, uint32_t i)
{
	uint32_t m = n % 2 ? n : n - 1, q;

	if (r == m) /* n even: the q whose peer is itself, 2q = i mod m; 2's inverse mod m is (m + 1) / 2 */
		return (uint32_t)((uint64_t)i * ((m + 1) / 2) % m);
	q = (i + m - r) % m;
	return q != r ? q : n % 2 ? r : m;
}

int sl_build_pairwise(struct sl_sched *s)
{
	const struct sl_sched_plan *p = &s->p;
	uint64_t b = p->count * p->esize;
	uint32_t n = p->nranks, r = p->rank, steps = !paired(p) ? n : n % 2 ? n : n - 1;
	int32_t prev = -1;

	/* in place, the blocks received overwrite blocks still to be sent */
	s->snapshot_send = p->in_place;
	if (!sl_sched_own_in_place(p) &&
	    sl_sched_local_copy(s, sl_sched_block(s, SL_BUF_SEND, r), sl_sched_block(s, SL_BUF_RECV, r), b) < 0)
		return -1;
	for (uint32_t i = paired(p) ? 0 : 1; i < steps; i++) {
		uint32_t to = paired(p) ? round_peer(n, r, i) : (r + i) % n;
		uint32_t from = paired(p) ? to : (r + n - i) % n;
		if (to == r)
			continue; /* sits this round out */
		struct sl_xfer tx = { .peer = to, .step = i, .is_send = true, .buf = SL_BUF_SEND,
				      .off = sl_sched_block(s, SL_BUF_SEND, to), .len = b, .after = prev };
		struct sl_xfer rx = { .peer = from, .step = i, .buf = SL_BUF_RECV,
				      .off = sl_sched_block(s, SL_BUF_RECV, from), .len = b, .after = -1 };
		if (sl_sched_add(s, &tx) < 0 || (prev = sl_sched_add(s, &rx)) < 0)
			return -1;
	}
	return 0;
}

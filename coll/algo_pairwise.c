/*
 * algo_pairwise.c: pairwise exchange for all-to-all.  In step i (1..n-1)
 * rank r sends its block for r + i and receives the block of r - i; the
 * step's send waits, chunk by chunk, for the previous step's reception,
 * so a rank has one peer to send to and one to hear from at a time,
 * instead of direct's n - 1 at once (an incast of n - 1 senders on every
 * receiver).  n - 1 latencies instead of one: for large blocks, where
 * incast costs more than steps.
 */
#include "schedule.h"

int sl_build_pairwise(struct sl_sched *s)
{
	const struct sl_sched_plan *p = &s->p;
	uint64_t b = p->count * p->esize;
	uint32_t n = p->nranks, r = p->rank;
	int32_t prev = -1;

	/* in place, the blocks received overwrite blocks still to be sent */
	s->snapshot_send = p->in_place;
	if (!sl_sched_own_in_place(p) &&
	    sl_sched_local_copy(s, sl_sched_block(s, SL_BUF_SEND, r), sl_sched_block(s, SL_BUF_RECV, r), b) < 0)
		return -1;
	for (uint32_t i = 1; i < n; i++) {
		uint32_t to = (r + i) % n, from = (r + n - i) % n;
		struct sl_xfer tx = { .peer = to, .step = i, .is_send = true, .buf = SL_BUF_SEND,
				      .off = sl_sched_block(s, SL_BUF_SEND, to), .len = b, .after = prev };
		struct sl_xfer rx = { .peer = from, .step = i, .buf = SL_BUF_RECV,
				      .off = sl_sched_block(s, SL_BUF_RECV, from), .len = b, .after = -1 };
		if (sl_sched_add(s, &tx) < 0 || (prev = sl_sched_add(s, &rx)) < 0)
			return -1;
	}
	return 0;
}

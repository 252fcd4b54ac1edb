/*
 * algo_rd.c: recursive doubling all-reduce, for small messages.  In log2(p)
 * steps each rank of the power-of-two group exchanges its whole partial
 * result with the rank whose virtual number differs in bit k, and reduces
 * the two: latency log2(p) hops instead of the ring's 2(n-1), at the price
 * of the whole vector on every step.  Other rank counts fold the extra
 * ranks in first and unfold them at the end (fold.h).
 *
 * Each step's result goes to a scratch slot of its own (the last one into
 * recv): a partner may send its next step before this rank's previous send
 * was acknowledged, and that send's bytes must stay as they were.  The
 * two operands of a step are reduced in one fixed order per rank, so
 * results do not depend on arrival order; and both partners of a step put
 * the lower ranks' partial result on the left, so they compute the same
 * bits even where an op is not commutative in them (max of +0 and -0, NaN
 * payloads).
 */
#include "fold.h"
#include "schedule.h"

int sl_build_rd(struct sl_sched *s)
{
	const struct sl_sched_plan *p = &s->p;
	uint64_t b = p->count * p->esize;
	struct sl_fold f;
	uint8_t cur_buf = SL_BUF_SEND;
	uint64_t cur_off = 0;
	int32_t cur = -1;

	sl_fold_init(&f, p->nranks, p->rank);
	/* the final result lands in recv while step 0's send still reads the input */
	s->snapshot_send = p->in_place;
	/* slot 0: the folded-in sum; slot k: the result of step k - 1 */
	s->bytes[SL_BUF_SCRATCH] = (uint64_t)f.log2p * b;
	if (f.vrank < 0) {
		struct sl_xfer tx = { .peer = (uint32_t)f.partner, .is_send = true, .buf = SL_BUF_SEND, .len = b,
				      .after = -1 };
		struct sl_xfer rx = { .peer = (uint32_t)f.partner, .step = f.log2p + 1, .buf = SL_BUF_RECV,
				      .len = b, .after = -1 };
		return sl_sched_add(s, &tx) < 0 || sl_sched_add(s, &rx) < 0 ? -1 : 0;
	}
	if (f.partner >= 0) {
		struct sl_xfer rx = { .peer = (uint32_t)f.partner, .buf = SL_BUF_SCRATCH, .apply = SL_APPLY_REDUCE,
				      .opnd_buf = SL_BUF_SEND, .payload_first = true, .len = b, .after = -1 };
		if ((cur = sl_sched_add(s, &rx)) < 0)
			return -1;
		cur_buf = SL_BUF_SCRATCH;
	}
	for (uint32_t k = 0; k < f.log2p; k++) {
		uint32_t peer = sl_fold_real(&f, (uint32_t)f.vrank ^ (1u << k));
		bool last = k + 1 == f.log2p;
		struct sl_xfer tx = { .peer = peer, .step = k + 1, .is_send = true, .buf = cur_buf, .off = cur_off,
				      .len = b, .after = cur };
		struct sl_xfer rx = { .peer = peer, .step = k + 1, .apply = SL_APPLY_REDUCE,
				      .buf = last ? SL_BUF_RECV : SL_BUF_SCRATCH, .off = last ? 0 : (k + 1) * b,
				      .opnd_buf = cur_buf, .opnd_off = cur_off, .len = b, .finishes = last,
				      .payload_first = ((uint32_t)f.vrank >> k) & 1, .after = cur };
		if (sl_sched_add(s, &tx) < 0 || (cur = sl_sched_add(s, &rx)) < 0)
			return -1;
		cur_buf = rx.buf;
		cur_off = rx.off;
	}
	if (f.partner >= 0) {
		struct sl_xfer tx = { .peer = (uint32_t)f.partner, .step = f.log2p + 1, .is_send = true,
				      .buf = SL_BUF_RECV, .len = b, .after = cur };
		if (sl_sched_add(s, &tx) < 0)
			return -1;
	}
	return 0;
}

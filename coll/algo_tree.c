/*
 * algo_tree.c: binomial trees for broadcast and reduce, pipelined in
 * chunks.  Ranks are numbered from the root (v = rank - root mod n); the
 * parent of v is v with its lowest set bit cleared, and its children are
 * v + 2^i for every 2^i below that bit.  Broadcast forwards each chunk to
 * the children as soon as it arrives, the largest subtree first; reduce
 * adds the children's partial results in a fixed order (smallest subtree
 * first, as it is the first to be ready) before passing the chunk up.
 * Depth ceil(log2 n) instead of the chain's n - 1; the root's link carries
 * the message once per child.
 */
#include "schedule.h"

static uint32_t real(const struct sl_sched_plan *p, uint32_t v)
{
	return (uint32_t)(((uint64_t)v + p->root) % p->nranks);
}

/* The lowest set bit of v, or one above every child when v is the root. */
static uint64_t low_bit(const struct sl_sched_plan *p, uint32_t v)
{
	return v ? v & -v : (uint64_t)p->nranks * 2;
}

static int tree_broadcast(struct sl_sched *s, uint32_t v)
{
	const struct sl_sched_plan *p = &s->p;
	uint64_t b = p->count * p->esize, top = 1;
	int32_t got = -1;

	if (v == 0 && sl_sched_local_copy(s, 0, 0, b) < 0)
		return -1;
	if (v != 0) {
		struct sl_xfer rx = { .peer = real(p, v & (v - 1)), .buf = SL_BUF_RECV, .len = b, .after = -1 };
		if ((got = sl_sched_add(s, &rx)) < 0)
			return -1;
	}
	while (top * 2 < low_bit(p, v) && v + top * 2 < p->nranks)
		top *= 2;
	for (uint64_t m = top; m >= 1 && v + m < p->nranks && m < low_bit(p, v); m /= 2) {
		struct sl_xfer tx = { .peer = real(p, v + (uint32_t)m), .is_send = true,
				      .buf = v ? SL_BUF_RECV : SL_BUF_SEND, .len = b, .after = got };
		if (sl_sched_add(s, &tx) < 0)
			return -1;
	}
	return 0;
}

static int tree_reduce(struct sl_sched *s, uint32_t v)
{
	const struct sl_sched_plan *p = &s->p;
	uint64_t b = p->count * p->esize;
	uint8_t acc = v ? SL_BUF_SCRATCH : SL_BUF_RECV, from = SL_BUF_SEND;
	int32_t prev = -1;

	if (v)
		s->bytes[SL_BUF_SCRATCH] = b;
	for (uint64_t m = 1; m < low_bit(p, v) && v + m < p->nranks; m *= 2) {
		struct sl_xfer rx = { .peer = real(p, v + (uint32_t)m), .buf = acc, .len = b,
				      .apply = SL_APPLY_REDUCE, .opnd_buf = from, .after = prev };
		if ((prev = sl_sched_add(s, &rx)) < 0)
			return -1;
		from = acc;
	}
	if (v == 0) {
		s->x[prev].finishes = true; /* n > 1: the root has a child */
		return 0;
	}
	struct sl_xfer tx = { .peer = real(p, v & (v - 1)), .is_send = true, .buf = from, .len = b, .after = prev };
	return sl_sched_add(s, &tx) < 0 ? -1 : 0;
}

int sl_build_tree(struct sl_sched *s)
{
	const struct sl_sched_plan *p = &s->p;
	uint32_t v = (uint32_t)(((uint64_t)p->rank + p->nranks - p->root) % p->nranks);

	return p->coll == SL_COLL_BROADCAST ? tree_broadcast(s, v) : tree_reduce(s, v);
}

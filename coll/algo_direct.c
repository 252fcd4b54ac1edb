/*
 * algo_direct.c: the direct algorithms, for latency.  Every block goes
 * straight from the rank that holds it to the rank that needs it, in one
 * step: all-reduce in one hop instead of the ring's 2(n-1), and the only
 * algorithm for all-to-all(v), gather, scatter, barrier and send/recv.
 *
 * Each collective is one rule, edge(i, j): whether rank i sends rank j a
 * block, where it reads it and where j puts it.  Collectives that reduce
 * combine what arrives in rank order, 0 to n-1, the own block included (a
 * local transfer): each contribution waits for the previous one, so the
 * result is the same bits on every rank whatever the arrival order.
 */
#include "schedule.h"

struct edge {
	uint64_t src, dst; /* byte offsets in the sender's send and the receiver's recv buffer */
	uint64_t len;      /* bytes, as this rank sees it (the other side's view is checked on the wire) */
};

/* Whether rank i sends to rank j in s's collective, and where from and to
 * (one of i and j is this rank): block j of the sender's send buffer,
 * block i of the receiver's recv. */
static bool edge(const struct sl_sched *s, uint32_t i, uint32_t j, struct edge *e)
{
	const struct sl_sched_plan *p = &s->p;
	uint64_t b = p->coll == SL_COLL_BARRIER ? 0 : p->count * p->esize, es = p->esize;
	uint64_t src = sl_sched_block(s, SL_BUF_SEND, j), dst = sl_sched_block(s, SL_BUF_RECV, i);

	*e = (struct edge){ 0, 0, b };
	switch (p->coll) {
	case SL_COLL_ALLREDUCE: return true;
	case SL_COLL_ALLGATHER: e->dst = dst; return true;
	case SL_COLL_REDUCE_SCATTER: e->src = src; return true;
	case SL_COLL_ALLTOALL: e->src = src; e->dst = dst; return i != j || !sl_sched_own_in_place(p);
	case SL_COLL_BROADCAST: return i == p->root;
	case SL_COLL_REDUCE: return j == p->root;
	case SL_COLL_GATHER: e->dst = dst; return j == p->root;
	case SL_COLL_SCATTER: e->src = src; return i == p->root;
	case SL_COLL_BARRIER: return i != j;
	case SL_COLL_ALLTOALLV:
		e->len = (i == p->rank ? p->send_count[j] : p->recv_count[i]) * es;
		/* an empty block's displacement may lie past the buffer: it touches nothing */
		e->src = e->len ? p->send_displ[j] * es : 0;
		e->dst = e->len ? p->recv_displ[i] * es : 0;
		return true;
	/* the plan is one rank's half: root names the peer */
	case SL_COLL_SEND: return i == p->rank && j == p->root && i != j;
	case SL_COLL_RECV: return j == p->rank && i == p->root && i != j;
	default: return false;
	}
}

/* Receptions from every sender, in rank order; a reducing collective
 * chains them, each after the previous one.  *before_self is the reception
 * the own contribution waits for (-1 for none). */
static int add_recvs(struct sl_sched *s, int32_t *before_self)
{
	const struct sl_sched_plan *p = &s->p;
	bool reduces = sl_coll_reduces(p->coll);
	int32_t prev = -1, last = -1;
	struct edge e;

	*before_self = -1;
	for (uint32_t i = 0; i < p->nranks; i++) {
		if (!edge(s, i, p->rank, &e))
			continue;
		struct sl_xfer x = { .peer = i, .buf = SL_BUF_RECV, .off = e.dst, .len = e.len, .after = -1 };
		if (reduces && prev >= 0) {
			x.apply = SL_APPLY_REDUCE;
			x.opnd_buf = SL_BUF_RECV;
			x.opnd_off = e.dst;
			x.after = prev;
		}
		if (i == p->rank && reduces)
			*before_self = prev;
		if ((prev = last = sl_sched_add(s, &x)) < 0)
			return -1;
	}
	/* the last contribution completes the reduction (AVG divides there) */
	if (reduces && last >= 0 && s->x[last].apply == SL_APPLY_REDUCE)
		s->x[last].finishes = true;
	return 0;
}

static int add_sends(struct sl_sched *s, int32_t before_self)
{
	const struct sl_sched_plan *p = &s->p;
	struct edge e;

	for (uint32_t j = 0; j < p->nranks; j++) {
		if (!edge(s, p->rank, j, &e))
			continue;
		struct sl_xfer x = { .peer = j, .is_send = true, .buf = SL_BUF_SEND, .off = e.src, .len = e.len,
				     .after = j == p->rank ? before_self : -1 };
		if (sl_sched_add(s, &x) < 0)
			return -1;
	}
	return 0;
}

/* Whether, in place, the input's only reader is the own contribution and it
 * comes first in the reduction order (a reduce's root 0): nothing overwrites
 * the input before it is read, and in NCCL's layouts (sluice.h) the own
 * block already lies where it lands, so the engine needs no copy of the
 * input and the own transfer moves nothing. */
static bool input_read_first(const struct sl_sched *s)
{
	const struct sl_sched_plan *p = &s->p;
	struct edge e;

	for (uint32_t i = 0; i < p->nranks; i++) {
		if (i != p->rank && (edge(s, p->rank, i, &e) || (i < p->rank && edge(s, i, p->rank, &e))))
			return false;
	}
	return true;
}

int sl_build_direct(struct sl_sched *s)
{
	const struct sl_sched_plan *p = &s->p;
	int32_t before_self;

	/* In place, the receptions overwrite inputs that sends and the own
	 * contribution still read: the engine runs on a copy of them. */
	s->snapshot_send = p->in_place && (sl_coll_reduces(p->coll) || p->coll == SL_COLL_ALLTOALL ||
					   p->coll == SL_COLL_ALLTOALLV) && !input_read_first(s);
	if (add_recvs(s, &before_self) < 0)
		return -1;
	return add_sends(s, before_self);
}

/*
 * algo_ring.c: the ring algorithms, for bandwidth.  Each rank sends only to
 * rank + 1 and receives only from rank - 1 (for broadcast and reduce, a
 * chain that starts or ends at the root), and what it forwards at step t+1
 * is what it received at step t, chunk by chunk: every link carries the
 * minimum, and the steps overlap as a pipeline.
 *
 * Reduction order per element is fixed by the ring (for all-reduce and
 * reduce-scatter, a segment's partial sum starts at one rank and travels
 * the ring; for reduce, along the chain to the root), so results are the
 * same bits on every rank and in every run.
 *
 * A buffer a rank has sent from is overwritten later only by bytes that
 * could not exist before the peer had received that send (all-reduce's
 * all-gather half), so a retransmission never reads them: the peer already
 * holds the packet and drops the copy.
 */
#include "schedule.h"

static uint32_t ring_mod(const struct sl_sched_plan *p, int64_t x)
{
	int64_t n = p->nranks;

	return (uint32_t)(((x % n) + n) % n);
}

static int32_t add_send(struct sl_sched *s, uint32_t step, uint8_t buf, uint64_t off, uint64_t len,
			int32_t after)
{
	struct sl_xfer x = { .peer = ring_mod(&s->p, (int64_t)s->p.rank + 1), .step = step, .is_send = true,
			     .buf = buf, .off = off, .len = len, .after = after };

	return sl_sched_add(s, &x);
}

/* A reception from rank - 1: copied to (buf, off), or reduced there with (opnd_buf, off'). */
static int32_t add_recv(struct sl_sched *s, uint32_t step, uint8_t apply, uint8_t buf, uint64_t off,
			uint64_t len, uint8_t opnd_buf, uint64_t opnd_off, bool finishes)
{
	struct sl_xfer x = { .peer = ring_mod(&s->p, (int64_t)s->p.rank - 1), .step = step, .apply = apply,
			     .buf = buf, .off = off, .len = len, .opnd_buf = opnd_buf, .opnd_off = opnd_off,
			     .finishes = finishes, .after = -1 };

	return sl_sched_add(s, &x);
}

/* 2(n-1) steps: at step t send segment (r - t), receive (r - t - 1); the
 * first n-1 reduce into recv, the rest copy the finished segments. */
static int ring_allreduce(struct sl_sched *s)
{
	const struct sl_sched_plan *p = &s->p;
	uint32_t n = p->nranks, r = p->rank;
	int32_t prev = -1;

	for (uint32_t t = 0; t < 2 * (n - 1); t++) {
		uint64_t off, len;
		sl_segment(p, p->nranks, ring_mod(p, (int64_t)r - t), &off, &len);
		if (add_send(s, t, t == 0 ? SL_BUF_SEND : SL_BUF_RECV, off, len, prev) < 0)
			return -1;
		sl_segment(p, p->nranks, ring_mod(p, (int64_t)r - t - 1), &off, &len);
		prev = t < n - 1 ? add_recv(s, t, SL_APPLY_REDUCE, SL_BUF_RECV, off, len, SL_BUF_SEND, off, t == n - 2)
				 : add_recv(s, t, SL_APPLY_COPY, SL_BUF_RECV, off, len, 0, 0, false);
		if (prev < 0)
			return -1;
	}
	return 0;
}

/* n-1 steps of whole blocks: send block (r - t), receive block (r - t - 1). */
static int ring_allgather(struct sl_sched *s)
{
	const struct sl_sched_plan *p = &s->p;
	uint64_t b = p->count * p->esize;
	uint32_t n = p->nranks, r = p->rank;
	int32_t prev = -1;

	for (uint32_t t = 0; t < n - 1; t++) {
		uint64_t at = sl_sched_block(s, SL_BUF_RECV, ring_mod(p, (int64_t)r - t));
		if (add_send(s, t, t == 0 ? SL_BUF_SEND : SL_BUF_RECV, t == 0 ? 0 : at, b, prev) < 0)
			return -1;
		at = sl_sched_block(s, SL_BUF_RECV, ring_mod(p, (int64_t)r - t - 1));
		if ((prev = add_recv(s, t, SL_APPLY_COPY, SL_BUF_RECV, at, b, 0, 0, false)) < 0)
			return -1;
	}
	return sl_sched_local_copy(s, 0, sl_sched_block(s, SL_BUF_RECV, r), b);
}

/* n-1 steps: send block (r - t - 1), receive block (r - t - 2) and add the
 * own input to it; partial sums wait in scratch, and the last step (block
 * r) lands in recv. */
static int ring_reduce_scatter(struct sl_sched *s)
{
	const struct sl_sched_plan *p = &s->p;
	uint64_t b = p->count * p->esize;
	uint32_t n = p->nranks, r = p->rank;
	int32_t prev = -1;

	s->bytes[SL_BUF_SCRATCH] = n * b;
	for (uint32_t t = 0; t < n - 1; t++) {
		uint64_t blk = ring_mod(p, (int64_t)r - t - 1);
		uint8_t from = t == 0 ? SL_BUF_SEND : SL_BUF_SCRATCH;
		if (add_send(s, t, from, sl_sched_block(s, from, blk), b, prev) < 0)
			return -1;
		blk = ring_mod(p, (int64_t)r - t - 2);
		bool last = t == n - 2;
		prev = add_recv(s, t, SL_APPLY_REDUCE, last ? SL_BUF_RECV : SL_BUF_SCRATCH,
				last ? 0 : sl_sched_block(s, SL_BUF_SCRATCH, blk), b, SL_BUF_SEND,
				sl_sched_block(s, SL_BUF_SEND, blk), last);
		if (prev < 0)
			return -1;
	}
	return 0;
}

/* A chain from the root: receive from rank - 1, forward to rank + 1. */
static int ring_broadcast(struct sl_sched *s)
{
	const struct sl_sched_plan *p = &s->p;
	uint64_t b = p->count * p->esize;
	uint32_t pos = ring_mod(p, (int64_t)p->rank - p->root);
	int32_t got = -1;

	if (pos == 0)
		return add_send(s, 0, SL_BUF_SEND, 0, b, -1) < 0 ? -1 : sl_sched_local_copy(s, 0, 0, b);
	if ((got = add_recv(s, 0, SL_APPLY_COPY, SL_BUF_RECV, 0, b, 0, 0, false)) < 0)
		return -1;
	return pos + 1 < p->nranks && add_send(s, 0, SL_BUF_RECV, 0, b, got) < 0 ? -1 : 0;
}

/* A chain to the root, starting after it: each rank adds its input to what
 * it receives (in scratch) and forwards it; the root adds last, into recv. */
static int ring_reduce(struct sl_sched *s)
{
	const struct sl_sched_plan *p = &s->p;
	uint64_t b = p->count * p->esize;
	uint32_t pos = ring_mod(p, (int64_t)p->rank - p->root - 1), n = p->nranks;
	int32_t got;

	if (pos == 0)
		return add_send(s, 0, SL_BUF_SEND, 0, b, -1) < 0 ? -1 : 0;
	if (pos == n - 1)
		return add_recv(s, 0, SL_APPLY_REDUCE, SL_BUF_RECV, 0, b, SL_BUF_SEND, 0, true) < 0 ? -1 : 0;
	s->bytes[SL_BUF_SCRATCH] = b;
	if ((got = add_recv(s, 0, SL_APPLY_REDUCE, SL_BUF_SCRATCH, 0, b, SL_BUF_SEND, 0, false)) < 0)
		return -1;
	return add_send(s, 0, SL_BUF_SCRATCH, 0, b, got) < 0 ? -1 : 0;
}

int sl_build_ring(struct sl_sched *s)
{
	switch (s->p.coll) {
	case SL_COLL_ALLREDUCE: return ring_allreduce(s);
	case SL_COLL_ALLGATHER: return ring_allgather(s);
	case SL_COLL_REDUCE_SCATTER: return ring_reduce_scatter(s);
	case SL_COLL_BROADCAST: return ring_broadcast(s);
	case SL_COLL_REDUCE: return ring_reduce(s);
	default: return -1; /* sl_algo_supported refused it before */
	}
}

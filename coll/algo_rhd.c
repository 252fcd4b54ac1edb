/*
 * algo_rhd.c: recursive halving/doubling (Rabenseifner), for medium sizes.
 * The vector is cut into p segments.  Reduce-scatter by halving: in step k
 * a rank of the power-of-two group keeps half of the segments it still
 * works on, sends the partner the other half and reduces the partner's
 * copy of its own half, until each rank holds one segment complete.
 * All-gather by doubling: in step k it sends every complete segment it
 * holds and receives as many.  2 log2(p) steps, and each link carries
 * 2 (p-1)/p of the vector, as in the ring.
 *
 * All-reduce runs both halves on any rank count (fold.h); reduce-scatter
 * (halving) and all-gather (doubling) alone run on powers of two, where
 * segment j is rank j's block.
 *
 * Every segment is a transfer of its own (step j halving, p + j doubling,
 * 2p + j fold, 3p + j unfold), so that what a rank forwards waits, chunk
 * by chunk, for exactly the reception that made it.  A segment is reduced
 * on one rank only, in a fixed order, so every rank gets the same bits,
 * whatever the arrival order.  A rank overwrites a segment it sent only
 * with that segment's final value, which cannot exist before its send was
 * received.
 */
#include <errno.h>
#include <stdlib.h>

#include "fold.h"
#include "schedule.h"

/* Where a segment's latest value is, and the reception that put it there. */
struct seg {
	uint8_t buf;
	uint64_t off;
	int32_t at; /* -1: there from the start */
};

struct rhd {
	struct sl_sched *s;
	struct sl_fold f;
	struct seg *seg; /* p entries */
};

/* Segment j's bytes: all-reduce cuts the vector into p; reduce-scatter's
 * and all-gather's segments are the per-rank blocks. */
static uint64_t seg_len(const struct rhd *h, uint32_t j)
{
	const struct sl_sched_plan *p = &h->s->p;
	uint64_t off, len = p->count * p->esize;

	if (p->coll == SL_COLL_ALLREDUCE)
		sl_segment(p, h->f.p, j, &off, &len);
	return len;
}

/* Segment j's offset in buffer buf. */
static uint64_t seg_at(const struct rhd *h, uint8_t buf, uint32_t j)
{
	const struct sl_sched_plan *p = &h->s->p;
	uint64_t off, len;

	if (p->coll != SL_COLL_ALLREDUCE)
		return sl_sched_block(h->s, buf, j);
	sl_segment(p, h->f.p, j, &off, &len);
	return off;
}

/* Where segment j's final value goes (at = -1, buf and off). */
static struct seg final_home(const struct rhd *h, uint32_t j)
{
	/* reduce-scatter: recv holds this rank's block alone */
	return (struct seg){ SL_BUF_RECV, h->s->p.coll == SL_COLL_REDUCE_SCATTER ? 0 : seg_at(h, SL_BUF_RECV, j), -1 };
}

/* Where segment j's partial sums wait: recv for all-reduce, scratch for reduce-scatter. */
static struct seg partial_home(const struct rhd *h, uint32_t j)
{
	uint8_t buf = h->s->p.coll == SL_COLL_REDUCE_SCATTER ? SL_BUF_SCRATCH : SL_BUF_RECV;

	return (struct seg){ buf, seg_at(h, buf, j), -1 };
}

static int send_seg(struct rhd *h, uint32_t peer, uint32_t step, uint32_t j)
{
	struct sl_xfer x = { .peer = peer, .step = step, .is_send = true, .buf = h->seg[j].buf,
			     .off = h->seg[j].off, .len = seg_len(h, j), .after = h->seg[j].at };
	return sl_sched_add(h->s, &x) < 0 ? -1 : 0;
}

/* Receive segment j into dst: copied, or reduced with its latest value. */
static int recv_seg(struct rhd *h, uint32_t peer, uint32_t step, uint32_t j, struct seg dst, bool reduce,
		    bool finishes)
{
	struct sl_xfer x = { .peer = peer, .step = step, .buf = dst.buf, .off = dst.off, .len = seg_len(h, j),
			     .apply = reduce ? SL_APPLY_REDUCE : SL_APPLY_COPY, .opnd_buf = h->seg[j].buf,
			     .opnd_off = h->seg[j].off, .finishes = finishes, .after = reduce ? h->seg[j].at : -1 };
	int32_t i = sl_sched_add(h->s, &x);

	if (i < 0)
		return -1;
	h->seg[j] = (struct seg){ dst.buf, dst.off, i };
	return 0;
}

/* The pair's even rank hands every segment to the odd one, which adds its own. */
static int fold_in(struct rhd *h)
{
	uint32_t partner = (uint32_t)h->f.partner;

	for (uint32_t j = 0; j < h->f.p; j++)
		if (h->f.vrank < 0 ? send_seg(h, partner, 2 * h->f.p + j, j) < 0
				   : recv_seg(h, partner, 2 * h->f.p + j, j, partial_home(h, j), true, false) < 0)
			return -1;
	return 0;
}

static int unfold(struct rhd *h)
{
	uint32_t partner = (uint32_t)h->f.partner;

	for (uint32_t j = 0; j < h->f.p; j++)
		if (h->f.vrank < 0 ? recv_seg(h, partner, 3 * h->f.p + j, j, final_home(h, j), false, false) < 0
				   : send_seg(h, partner, 3 * h->f.p + j, j) < 0)
			return -1;
	return 0;
}

static int halve(struct rhd *h)
{
	uint32_t v = (uint32_t)h->f.vrank, lo = 0, hi = h->f.p;

	for (uint32_t k = 0; k < h->f.log2p; k++) {
		uint32_t mask = h->f.p >> (k + 1), mid = lo + (hi - lo) / 2, peer = sl_fold_real(&h->f, v ^ mask);
		bool low = !(v & mask), last = k + 1 == h->f.log2p;
		for (uint32_t j = low ? mid : lo; j < (low ? hi : mid); j++)
			if (send_seg(h, peer, j, j) < 0)
				return -1;
		for (uint32_t j = low ? lo : mid; j < (low ? mid : hi); j++)
			if (recv_seg(h, peer, j, j, last ? final_home(h, j) : partial_home(h, j), true, last) < 0)
				return -1;
		if (low)
			hi = mid;
		else
			lo = mid;
	}
	return 0;
}

static int double_up(struct rhd *h)
{
	uint32_t v = (uint32_t)h->f.vrank;

	for (uint32_t k = 0; k < h->f.log2p; k++) {
		uint32_t mask = 1u << k, mine = v & ~(mask - 1), theirs = (v ^ mask) & ~(mask - 1);
		uint32_t peer = sl_fold_real(&h->f, v ^ mask);
		for (uint32_t j = mine; j < mine + mask; j++)
			if (send_seg(h, peer, h->f.p + j, j) < 0)
				return -1;
		for (uint32_t j = theirs; j < theirs + mask; j++)
			if (recv_seg(h, peer, h->f.p + j, j, final_home(h, j), false, false) < 0)
				return -1;
	}
	return 0;
}

static int build(struct rhd *h)
{
	const struct sl_sched_plan *p = &h->s->p;
	uint64_t b = p->count * p->esize;

	switch (p->coll) {
	case SL_COLL_ALLREDUCE:
		if (h->f.partner >= 0 && fold_in(h) < 0)
			return -1;
		if (h->f.vrank >= 0 && (halve(h) < 0 || double_up(h) < 0))
			return -1;
		return h->f.partner >= 0 ? unfold(h) : 0;
	case SL_COLL_REDUCE_SCATTER:
		h->s->bytes[SL_BUF_SCRATCH] = p->nranks * b;
		return halve(h);
	case SL_COLL_ALLGATHER:
		h->seg[p->rank] = (struct seg){ SL_BUF_SEND, 0, -1 };
		return sl_sched_local_copy(h->s, 0, seg_at(h, SL_BUF_RECV, p->rank), b) < 0 ? -1 : double_up(h);
	default: return -1; /* sl_algo_supported refused it before */
	}
}

int sl_build_rhd(struct sl_sched *s)
{
	struct rhd h = { .s = s };
	int rc;

	sl_fold_init(&h.f, s->p.nranks, s->p.rank);
	if (!(h.seg = malloc(h.f.p * sizeof(*h.seg)))) {
		errno = ENOMEM;
		return -1;
	}
	for (uint32_t j = 0; j < h.f.p; j++)
		h.seg[j] = (struct seg){ SL_BUF_SEND, seg_at(&h, SL_BUF_SEND, j), -1 };
	rc = build(&h);
	free(h.seg);
	return rc;
}

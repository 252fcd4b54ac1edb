/*
 * ring.c: the ring all-reduce schedule of ring.h as a state machine.
 *
 * The schedule owns no data: it says which byte ranges to send when, checks
 * every arriving packet against the plan (right step, right segment, on a
 * packet boundary, exact length, not seen before), and releases the next
 * step's send of a chunk the moment that chunk has fully arrived.
 */
#include "ring.h"

#include <errno.h>
#include <stdlib.h>

/* Chunks in a segment of len bytes; an empty segment still has one (empty)
 * chunk so that every step sends at least one packet. */
static uint64_t chunks_of(const struct sl_ring_plan *p, uint64_t len)
{
	return len == 0 ? 1 : (len + p->chunk_bytes - 1) / p->chunk_bytes;
}

/* Packets in a chunk of len bytes: again at least one. */
static uint32_t packets_of(const struct sl_ring_plan *p, uint64_t len)
{
	return len == 0 ? 1 : (uint32_t)((len + p->payload - 1) / p->payload);
}

/* Bit k set for each of the chunk's npkts packets (npkts is 1..64). */
static uint64_t full_mask(uint32_t npkts)
{
	return npkts == 64 ? UINT64_MAX : (UINT64_C(1) << npkts) - 1;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

const char *sl_ring_plan_check(const struct sl_ring_plan *p)
{
	if (p->nranks == 0)
		return "nranks is 0";
	if (p->nranks > UINT32_MAX / 2)
		return "nranks is too large for 2(n-1) steps";
	if (p->rank >= p->nranks)
		return "rank is not below nranks";
	if (p->esize == 0)
		return "element size is 0";
	if (p->payload == 0 || p->payload % 16 != 0)
		return "payload is not a positive multiple of 16 bytes";
	if (p->payload % p->esize != 0)
		return "payload is not a whole number of elements";
	if (p->chunk_bytes == 0 || p->chunk_bytes % p->payload != 0)
		return "chunk_bytes is not a positive multiple of payload";
	if (p->chunk_bytes > 64 * (uint64_t)p->payload)
		return "chunk_bytes exceeds 64 packets (one 64-bit arrival mask per chunk)";
	if (p->count > UINT64_MAX / p->esize)
		return "count * element size overflows 64 bits";
	/* segment 0 is the largest: its chunk count sizes the arrival table */
	uint64_t off, len;
	sl_ring_segment(p, 0, &off, &len);
	if (chunks_of(p, len) > UINT32_MAX)
		return "too many chunks per segment: raise chunk_bytes";
	return NULL;
}

void sl_ring_segment(const struct sl_ring_plan *p, uint32_t k, uint64_t *off, uint64_t *len)
{
	uint64_t base = p->count / p->nranks, extra = p->count % p->nranks;

	*off = (k * base + min_u64(k, extra)) * p->esize;
	*len = (base + (k < extra)) * p->esize;
}

/* Segment a rank sends at step t: its own at step 0, then what it received
 * at step t - 1, i.e. (rank - t) mod n. */
static uint32_t send_segment(const struct sl_ring_plan *p, uint32_t step)
{
	uint32_t n = p->nranks;

	return (uint32_t)((p->rank + n - step % n) % n);
}

uint32_t sl_ring_recv_segment(const struct sl_ring_plan *p, uint32_t step)
{
	uint32_t n = p->nranks;

	return (uint32_t)((p->rank + n - (step + 1) % n) % n);
}

static void push_send(struct sl_ring_sched *s, uint32_t step, uint32_t chunk, uint64_t off,
		      uint64_t len, bool from_send)
{
	/* ready_cap is the schedule's total number of sends: never exceeded */
	s->ready[s->ready_tail++] = (struct sl_ring_send){
		.step = step, .chunk = chunk, .off = off, .len = len, .from_send = from_send,
	};
}

/* Byte range of chunk c of segment seg. */
static void chunk_range(const struct sl_ring_plan *p, uint32_t seg, uint32_t c, uint64_t *off,
			uint64_t *len)
{
	uint64_t soff, slen;

	sl_ring_segment(p, seg, &soff, &slen);
	*off = soff + (uint64_t)c * p->chunk_bytes;
	*len = slen == 0 ? 0 : min_u64(p->chunk_bytes, slen - (uint64_t)c * p->chunk_bytes);
}

/* Size the tables: chunks over all steps (receptions) and sends (one per
 * chunk per step as well, as each step sends one segment). */
static int count_chunks(struct sl_ring_sched *s, uint64_t *recv_chunks, uint64_t *sends)
{
	const struct sl_ring_plan *p = &s->p;
	uint64_t off, len;

	*recv_chunks = *sends = 0;
	for (uint32_t t = 0; t < s->nsteps; t++) {
		sl_ring_segment(p, sl_ring_recv_segment(p, t), &off, &len);
		*recv_chunks += chunks_of(p, len);
		sl_ring_segment(p, send_segment(p, t), &off, &len);
		*sends += chunks_of(p, len);
	}
	return *recv_chunks <= UINT32_MAX && *sends <= UINT32_MAX ? 0 : -1;
}

static int alloc_tables(struct sl_ring_sched *s, uint64_t sends)
{
	if (s->nsteps == 0)
		return 0; /* one rank: nothing to track */
	s->arrived = calloc((size_t)s->nsteps * s->max_chunks, sizeof(*s->arrived));
	s->ready = calloc(sends, sizeof(*s->ready));
	return s->arrived && s->ready ? 0 : -1;
}

int sl_ring_init(struct sl_ring_sched *s, const struct sl_ring_plan *p)
{
	uint64_t off, len, recv_chunks, sends;

	*s = (struct sl_ring_sched){ .p = *p };
	if (sl_ring_plan_check(p)) {
		errno = EINVAL;
		return -1;
	}
	s->nsteps = 2 * (p->nranks - 1);
	sl_ring_segment(p, 0, &off, &len);
	s->max_chunks = (uint32_t)chunks_of(p, len);
	if (count_chunks(s, &recv_chunks, &sends) < 0 || alloc_tables(s, sends) < 0) {
		sl_ring_fini(s);
		errno = ENOMEM;
		return -1;
	}
	s->chunks_left = (uint32_t)recv_chunks;
	s->ready_cap = (uint32_t)sends;
	if (s->nsteps == 0)
		return 0;
	uint32_t own = send_segment(p, 0);
	sl_ring_segment(p, own, &off, &len);
	for (uint32_t c = 0; c < chunks_of(p, len); c++) {
		uint64_t coff, clen;
		chunk_range(p, own, c, &coff, &clen);
		push_send(s, 0, c, coff, clen, true);
	}
	return 0;
}

void sl_ring_fini(struct sl_ring_sched *s)
{
	free(s->arrived);
	free(s->ready);
	s->arrived = NULL;
	s->ready = NULL;
	s->ready_head = s->ready_tail = s->ready_cap = 0;
}

bool sl_ring_next_send(struct sl_ring_sched *s, struct sl_ring_send *out)
{
	if (s->ready_head == s->ready_tail)
		return false;
	*out = s->ready[s->ready_head++];
	return true;
}

/* Locate [off, off+len) of step's segment as packet *pkt of chunk *chunk;
 * *npkts is that chunk's packet count.  False when it is not exactly one
 * packet of the plan. */
static bool locate_packet(const struct sl_ring_sched *s, uint32_t step, uint64_t off,
			  uint64_t len, uint32_t *chunk, uint32_t *pkt, uint32_t *npkts)
{
	const struct sl_ring_plan *p = &s->p;
	uint64_t soff, slen;

	sl_ring_segment(p, sl_ring_recv_segment(p, step), &soff, &slen);
	if (slen == 0) { /* the one empty packet, at the segment's offset */
		*chunk = *pkt = 0;
		*npkts = 1;
		return off == soff && len == 0;
	}
	if (off < soff || off - soff >= slen)
		return false;
	uint64_t rel = off - soff;
	uint64_t c = rel / p->chunk_bytes, in_chunk = rel % p->chunk_bytes;
	uint64_t chunk_len = min_u64(p->chunk_bytes, slen - c * p->chunk_bytes);
	if (in_chunk % p->payload != 0)
		return false;
	*chunk = (uint32_t)c;
	*pkt = (uint32_t)(in_chunk / p->payload);
	*npkts = packets_of(p, chunk_len);
	return len == min_u64(p->payload, chunk_len - in_chunk);
}

enum sl_ring_error sl_ring_on_packet(struct sl_ring_sched *s, uint32_t step, uint64_t off,
				     uint64_t len, enum sl_ring_apply *apply)
{
	uint32_t chunk, pkt, npkts;

	if (step >= s->nsteps)
		return SL_RING_BAD_STEP;
	if (!locate_packet(s, step, off, len, &chunk, &pkt, &npkts))
		return SL_RING_BAD_RANGE;
	uint64_t *mask = &s->arrived[(size_t)step * s->max_chunks + chunk];
	uint64_t bit = UINT64_C(1) << pkt;
	if (*mask & bit)
		return SL_RING_DUPLICATE;
	*mask |= bit;
	*apply = step < s->p.nranks - 1 ? SL_APPLY_REDUCE : SL_APPLY_COPY;
	if (*mask == full_mask(npkts)) {
		s->chunks_left--;
		/* what arrived at step t is what leaves at step t + 1 */
		if (step + 1 < s->nsteps) {
			uint64_t coff, clen;
			chunk_range(&s->p, sl_ring_recv_segment(&s->p, step), chunk, &coff, &clen);
			push_send(s, step + 1, chunk, coff, clen, false);
		}
	}
	return SL_RING_OK;
}

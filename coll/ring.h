/*
 * ring.h: ring all-reduce as a schedule the engine runs chunk by chunk.
 *
 * The buffer is cut into nranks segments (balanced, whole elements).  Over
 * 2(n-1) steps each rank sends to rank+1 and receives from rank-1.  Steps
 * 0..n-2 reduce-scatter: at step t rank r receives segment (r-t-1) mod n and
 * reduces it into recv (recv = send + incoming).  Steps n-1..2n-3 all-gather:
 * the received segment is copied into recv.  What a rank sends at step t+1 is
 * exactly the segment it received at step t, so each segment is cut into the
 * same chunks at every step, and chunk c of step t+1 may leave as soon as
 * chunk c of step t has fully arrived: the pipeline.  Step 0 sends segment
 * r from the send buffer.  Reduction order per element is fixed by the ring,
 * so results are bitwise identical on every rank and every run.
 *
 * Chunks are cut into packets of `payload` bytes; at most 64 per chunk, so a
 * 64-bit mask records which packets of a chunk have arrived: a packet applied
 * twice is refused even if the transport were fooled.
 */
#ifndef SLUICE_RING_H
#define SLUICE_RING_H

#include <stdbool.h>
#include <stdint.h>

struct sl_ring_plan {
	uint32_t nranks, rank;
	uint64_t count;       /* elements */
	uint32_t esize;       /* bytes per element */
	uint32_t payload;     /* bytes per packet, a multiple of esize's lcm 16 */
	uint64_t chunk_bytes; /* pipeline unit: a multiple of payload, at most 64 payloads */
};

/* The order for the engine: send bytes [off, off + len) of the buffer
 * (from_send: the send buffer, otherwise recv) to rank + 1 as step `step`. */
struct sl_ring_send {
	uint32_t step;
	uint32_t chunk;
	uint64_t off, len;
	bool from_send;
};

/* What to do with an arriving packet. */
enum sl_ring_apply {
	SL_APPLY_REDUCE, /* recv[off..] = send[off..] op payload */
	SL_APPLY_COPY,   /* recv[off..] = payload */
};

struct sl_ring_sched {
	struct sl_ring_plan p;
	uint32_t nsteps;          /* 2(n-1) */
	uint32_t max_chunks;      /* chunks of the largest segment (>= 1) */
	uint64_t *arrived;        /* [nsteps][max_chunks] packet masks */
	uint32_t chunks_left;     /* chunk receptions still to complete */
	/* sends ready to go, FIFO */
	struct sl_ring_send *ready;
	uint32_t ready_head, ready_tail, ready_cap;
};

enum sl_ring_error {
	SL_RING_OK = 0,
	SL_RING_BAD_STEP,     /* step beyond the schedule */
	SL_RING_BAD_RANGE,    /* not inside the step's segment, or not packet-aligned */
	SL_RING_DUPLICATE,    /* this packet was applied already */
};

/* Check a plan; returns NULL or a sentence on what is wrong with it. */
const char *sl_ring_plan_check(const struct sl_ring_plan *p);
/* Set up the schedule (allocates); step 0's sends are ready at once.  0 or -1 (ENOMEM;
 * EINVAL for a plan sl_ring_plan_check refuses). */
int sl_ring_init(struct sl_ring_sched *s, const struct sl_ring_plan *p);
void sl_ring_fini(struct sl_ring_sched *s);

/* Segment k's byte range. */
void sl_ring_segment(const struct sl_ring_plan *p, uint32_t k, uint64_t *off, uint64_t *len);
/* Segment received at step t. */
uint32_t sl_ring_recv_segment(const struct sl_ring_plan *p, uint32_t step);

/* Pop the next send that is ready; false when none is. */
bool sl_ring_next_send(struct sl_ring_sched *s, struct sl_ring_send *out);

/* A packet of step `step` covering [off, off + len) arrived.  Validates it,
 * says how to apply it (*apply), and records it.  When this packet completes
 * its chunk, the next step's send of that chunk becomes ready. */
enum sl_ring_error sl_ring_on_packet(struct sl_ring_sched *s, uint32_t step, uint64_t off,
				     uint64_t len, enum sl_ring_apply *apply);

/* All receptions done (sends may still await their ACKs). */
static inline bool sl_ring_recv_done(const struct sl_ring_sched *s)
{
	return s->chunks_left == 0;
}

#endif

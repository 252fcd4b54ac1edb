/*
 * gdma_ring.h: the work ring between the engine (the producer, on a CPU core)
 * and whatever applies the work (the consumer: a persistent CUDA kernel, or
 * the CPU).  Plain C with no CUDA type, included by the .cu file too, so the
 * layout is written once.  The shared part lives in host memory that the GPU
 * maps (cudaHostAlloc, mapped), so the kernel reads work and writes
 * completions over PCIe with no copy engine and no launch per item.
 *
 * Invariant: tickets are free-running 32-bit counters; item #t lives in slot
 * t & mask.  A slot holds item #t exactly when its seq equals t, and item #t
 * is applied exactly when done[t & mask] equals t.  Both words start at the
 * ticket of the previous lap (slot - slots), so fresh memory reads as "empty,
 * nothing applied", and equality tests stay right across wrap-around.  The
 * producer writes an item's fields, then seq with a release store; the
 * consumer reads seq with an acquire load before any field.  The consumer
 * makes the item's result visible, then stores done with release (system
 * scope on the GPU, after __threadfence_system).  Items may be applied out of
 * order (several consumers, one block each); the producer reaps them in
 * ticket order, so "tail passed t" means every item up to t is applied.
 */
#ifndef SLUICE_GDMA_RING_H
#define SLUICE_GDMA_RING_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The layout helpers below are used by the kernel too. */
#ifdef __CUDACC__
#define SL_GDMA_HD __host__ __device__
#else
#define SL_GDMA_HD
#endif

enum sl_gdma_kind { SL_GDMA_REDUCE = 0, SL_GDMA_COPY = 1 };

/* One unit of work, one cache line.  Addresses are as the consumer sees them
 * (with unified addressing, the same numbers the engine holds). */
struct sl_gdma_item {
	uint64_t dst;     /* result: dst[i] = a[i] op src[i], or src[i] for COPY */
	uint64_t a;       /* the local operand; may equal dst; unused for COPY */
	uint64_t src;     /* the arriving payload */
	uint64_t count;   /* elements */
	uint32_t avg_div; /* > 0: divide each result by this (AVG's last step) */
	uint8_t dtype;    /* enum sl_dtype */
	uint8_t op;       /* enum sl_redop, AVG already turned into SUM */
	uint8_t kind;     /* enum sl_gdma_kind */
	uint8_t swap;     /* 1: dst[i] = src[i] op a[i] (the payload on the left: max, min
			   * and NaNs pick by position, and the schedule fixes which) */
	uint32_t epoch;   /* a kernel launched for an earlier epoch stops here, leaving
			   * it to the next launch (sl_gdma_restart) */
	uint32_t seq;     /* the ticket; written last by the producer (release) */
	uint32_t pad1[4];
};

/* The shared part.  Each group of words sits on its own cache lines: the
 * producer writes items and stop, consumers write done. */
struct sl_gdma_ring_shared {
	uint32_t stop;      /* nonzero: consumers exit after their current item */
	uint32_t pad[15];
	/* followed by struct sl_gdma_item items[slots] and uint32_t done[slots] */
};

/* The producer's private handle: the geometry is kept here, never read back
 * from shared memory. */
struct sl_gdma_ring {
	struct sl_gdma_ring_shared *sh;
	struct sl_gdma_item *items; /* sh's items */
	uint32_t *done;             /* sh's done words */
	uint32_t mask;              /* slots - 1; slots is a power of two */
	uint32_t head;              /* next ticket to post */
	uint32_t tail;              /* oldest ticket not yet reaped */
};

/* Where a consumer is: the next ticket it applies, and its stride (a CUDA
 * block takes every nblocks-th ticket; the CPU consumer takes them all). */
struct sl_gdma_cursor {
	uint32_t next;
	uint32_t stride;
};

/* Bytes of shared memory for a ring of slots (a power of two, >= 2). */
size_t sl_gdma_ring_bytes(uint32_t slots);
/* Lay out and initialize the shared part in mem (64-byte aligned, ring_bytes
 * long) and the producer's handle, tickets starting at first (0 in use; the
 * tests start near 2^32 to cross the wrap); -1 for a bad slot count. */
int sl_gdma_ring_init(struct sl_gdma_ring *r, void *mem, uint32_t slots, uint32_t first);
/* Post one item, filling in its seq; 0 and the ticket, or -1 when full. */
int sl_gdma_ring_push(struct sl_gdma_ring *r, const struct sl_gdma_item *it, uint32_t *ticket);
/* Advance tail over applied items; returns how many it passed. */
uint32_t sl_gdma_ring_reap(struct sl_gdma_ring *r);
/* Items posted and not yet reaped. */
static inline uint32_t sl_gdma_ring_pending(const struct sl_gdma_ring *r)
{
	return r->head - r->tail;
}
/* Whether ticket t has been reaped (so it, and every earlier one, is applied). */
static inline int sl_gdma_ring_passed(const struct sl_gdma_ring *r, uint32_t t)
{
	return (int32_t)(r->tail - t) > 0;
}

/* The CPU consumer: apply up to max ready items from cursor c on, in ticket
 * order, with coll/'s reductions; returns how many it applied.  It stops at
 * the first item not yet posted, or when stop is set. */
uint32_t sl_gdma_cpu_consume(struct sl_gdma_ring_shared *sh, uint32_t mask, struct sl_gdma_cursor *c,
			     uint32_t max);

/* Where the items and done words of a ring of slots start. */
SL_GDMA_HD static inline struct sl_gdma_item *sl_gdma_ring_items(struct sl_gdma_ring_shared *sh)
{
	return (struct sl_gdma_item *)(sh + 1);
}

SL_GDMA_HD static inline uint32_t *sl_gdma_ring_done(struct sl_gdma_ring_shared *sh, uint32_t slots)
{
	return (uint32_t *)(sl_gdma_ring_items(sh) + slots);
}

#ifdef __cplusplus
}
#endif
#endif

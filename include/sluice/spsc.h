/*
 * spsc.h: a lock-free single-producer single-consumer ring of fixed-size
 * slots, laid out so that it can live in memory shared by two processes.
 *
 * Invariant: head (next slot the producer writes) and tail (next slot the
 * consumer reads) are free-running 32-bit counters, masked only on access,
 * so head - tail is the number of filled slots even across wrap-around and
 * never exceeds size.  The producer publishes a slot with a release store of
 * head after writing it; the consumer frees a slot with a release store of
 * tail after reading it; each side reads the other's counter with acquire.
 * Each side keeps a private copy of the other's counter on its own cache
 * line, so the shared line is touched only when the copy says full/empty.
 */
#ifndef SLUICE_SPSC_H
#define SLUICE_SPSC_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SL_CACHE_LINE 64

/* The part that lives in shared memory: the two counters and the slots. */
struct sl_spsc_shared {
	alignas(SL_CACHE_LINE) _Atomic uint32_t head; /* next slot to fill; producer writes */
	alignas(SL_CACHE_LINE) _Atomic uint32_t tail; /* next slot to drain; consumer writes */
	alignas(SL_CACHE_LINE) uint8_t slots[];
};

/*
 * Each side's private handle.  Geometry is kept here, not read back from the
 * shared page, so a peer that scribbles on shared memory can confuse the
 * ring's contents but never make this side touch memory outside it.
 */
struct sl_spsc {
	struct sl_spsc_shared *sh; /* the shared part */
	uint32_t mask;             /* slots - 1; slots is a power of two */
	uint32_t slot_size;        /* bytes per slot, a multiple of 8 */
	uint32_t other;            /* this side's copy of the other side's counter */
};

/* Bytes of shared memory for a ring of slots (a power of two) x slot_size. */
static inline size_t sl_spsc_bytes(uint32_t slots, uint32_t slot_size)
{
	return sizeof(struct sl_spsc_shared) + (size_t)slots * slot_size;
}

/* Zero the shared part.  Done once, by whoever creates the memory. */
static inline void sl_spsc_reset(struct sl_spsc_shared *sh)
{
	atomic_store_explicit(&sh->head, 0, memory_order_relaxed);
	atomic_store_explicit(&sh->tail, 0, memory_order_relaxed);
}

/* Make a handle for one side; false for a bad geometry. */
static inline bool sl_spsc_attach(struct sl_spsc *r, struct sl_spsc_shared *sh, uint32_t slots,
				  uint32_t slot_size, bool producer)
{
	if (slots == 0 || (slots & (slots - 1)) != 0 || slot_size == 0 || slot_size % 8 != 0)
		return false;
	r->sh = sh;
	r->mask = slots - 1;
	r->slot_size = slot_size;
	r->other = atomic_load_explicit(producer ? &sh->tail : &sh->head, memory_order_acquire);
	return true;
}

/* Copy the first len bytes (at most slot_size) of one slot in: the rest of
 * the ring's slot keeps what it held, which saves writing a slot's unused
 * tail into shared memory (a successful completion's message).  False when
 * the ring is full.  Producer only. */
static inline bool sl_spsc_enqueue_part(struct sl_spsc *r, const void *slot, uint32_t len)
{
	uint32_t head = atomic_load_explicit(&r->sh->head, memory_order_relaxed);
	if (head - r->other > r->mask) {
		r->other = atomic_load_explicit(&r->sh->tail, memory_order_acquire);
		if (head - r->other > r->mask)
			return false;
	}
	memcpy(&r->sh->slots[(size_t)(head & r->mask) * r->slot_size], slot, len < r->slot_size ? len : r->slot_size);
	atomic_store_explicit(&r->sh->head, head + 1, memory_order_release);
	return true;
}

/* Copy one slot in; false when the ring is full.  Producer only. */
static inline bool sl_spsc_enqueue(struct sl_spsc *r, const void *slot)
{
	return sl_spsc_enqueue_part(r, slot, r->slot_size);
}

/* The oldest filled slot, to read in place until sl_spsc_pop, or NULL when
 * the ring is empty: a consumer that needs only part of it copies no more.
 * Consumer only. */
static inline const void *sl_spsc_front(struct sl_spsc *r)
{
	uint32_t tail = atomic_load_explicit(&r->sh->tail, memory_order_relaxed);
	if (tail == r->other) {
		r->other = atomic_load_explicit(&r->sh->head, memory_order_acquire);
		if (tail == r->other)
			return NULL;
	}
	return &r->sh->slots[(size_t)(tail & r->mask) * r->slot_size];
}

/* Release the slot sl_spsc_front returned to the producer.  Consumer only. */
static inline void sl_spsc_pop(struct sl_spsc *r)
{
	uint32_t tail = atomic_load_explicit(&r->sh->tail, memory_order_relaxed);
	atomic_store_explicit(&r->sh->tail, tail + 1, memory_order_release);
}

/* Copy one slot out; false when the ring is empty.  Consumer only. */
static inline bool sl_spsc_dequeue(struct sl_spsc *r, void *slot)
{
	const void *at = sl_spsc_front(r);
	if (!at)
		return false;
	memcpy(slot, at, r->slot_size);
	sl_spsc_pop(r);
	return true;
}

/* Filled slots as seen now (a hint: the other side keeps moving). */
static inline uint32_t sl_spsc_count(const struct sl_spsc *r)
{
	return atomic_load_explicit(&r->sh->head, memory_order_acquire) -
	       atomic_load_explicit(&r->sh->tail, memory_order_acquire);
}

#endif

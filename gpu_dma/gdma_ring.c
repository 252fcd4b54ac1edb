/*
 * gdma_ring.c: the work ring's producer side (post, reap) and its CPU
 * consumer.  The CPU consumer is the backend when no GPU is present, and the
 * reference that the unit tests hold the bookkeeping to on any machine.
 *
 * Ordering uses GCC's __atomic builtins rather than _Atomic fields: the
 * layout is shared with CUDA code, where C11 atomics do not exist.
 */
#include "gdma_ring.h"

#include <string.h>

#include "reduce.h"

_Static_assert(sizeof(struct sl_gdma_item) == 64, "a work item is one cache line");
_Static_assert(sizeof(struct sl_gdma_ring_shared) == 64, "the ring header is one cache line");

static int slots_ok(uint32_t slots)
{
	return slots >= 2 && (slots & (slots - 1)) == 0 && slots <= (1u << 24);
}

size_t sl_gdma_ring_bytes(uint32_t slots)
{
	size_t n = sizeof(struct sl_gdma_ring_shared) + (size_t)slots * (sizeof(struct sl_gdma_item) + 4);

	return (n + 63) & ~(size_t)63;
}

int sl_gdma_ring_init(struct sl_gdma_ring *r, void *mem, uint32_t slots, uint32_t first)
{
	struct sl_gdma_ring_shared *sh = mem;

	if (!slots_ok(slots) || !mem)
		return -1;
	memset(sh, 0, sl_gdma_ring_bytes(slots));
	r->sh = sh;
	r->items = sl_gdma_ring_items(sh);
	r->done = sl_gdma_ring_done(sh, slots);
	r->mask = slots - 1;
	r->head = r->tail = first;
	/* Each slot starts at the previous lap's ticket: posted and applied. */
	for (uint32_t k = 0; k < slots; k++) {
		uint32_t t = first + k;
		r->items[t & r->mask].seq = t - slots;
		r->done[t & r->mask] = t - slots;
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return 0;
}

int sl_gdma_ring_push(struct sl_gdma_ring *r, const struct sl_gdma_item *it, uint32_t *ticket)
{
	uint32_t t = r->head;
	struct sl_gdma_item *slot;

	if (r->head - r->tail > r->mask)
		return -1;
	slot = &r->items[t & r->mask];
	/* Every field but seq first; seq last, with release, publishes them. */
	memcpy(slot, it, offsetof(struct sl_gdma_item, seq));
	__atomic_store_n(&slot->seq, t, __ATOMIC_RELEASE);
	r->head = t + 1;
	*ticket = t;
	return 0;
}

uint32_t sl_gdma_ring_reap(struct sl_gdma_ring *r)
{
	uint32_t n = 0;

	while (r->tail != r->head &&
	       __atomic_load_n(&r->done[r->tail & r->mask], __ATOMIC_ACQUIRE) == r->tail) {
		r->tail++;
		n++;
	}
	return n;
}

/* Apply one item the way coll_run.c's apply() does on host memory. */
static void cpu_apply(const struct sl_gdma_item *it)
{
	void *dst = (void *)(uintptr_t)it->dst;
	const void *src = (const void *)(uintptr_t)it->src;
	size_t esize = sl_dtype_size((enum sl_dtype)it->dtype);

	if (it->kind == SL_GDMA_COPY) {
		memmove(dst, src, it->count * esize);
		return;
	}
	const void *a = (const void *)(uintptr_t)it->a;

	sl_reduce(dst, it->swap ? src : a, it->swap ? a : src, it->count, (enum sl_dtype)it->dtype,
		  (enum sl_redop)it->op);
	if (it->avg_div)
		sl_scale_avg(dst, it->count, (enum sl_dtype)it->dtype, it->avg_div);
}

uint32_t sl_gdma_cpu_consume(struct sl_gdma_ring_shared *sh, uint32_t mask, struct sl_gdma_cursor *c,
			     uint32_t max)
{
	struct sl_gdma_item *items = sl_gdma_ring_items(sh);
	uint32_t *done = sl_gdma_ring_done(sh, mask + 1);
	uint32_t n = 0;

	while (n < max && !__atomic_load_n(&sh->stop, __ATOMIC_RELAXED)) {
		uint32_t t = c->next;
		struct sl_gdma_item *it = &items[t & mask];
		struct sl_gdma_item copy;

		if (__atomic_load_n(&it->seq, __ATOMIC_ACQUIRE) != t)
			break;
		copy = *it; /* one read of the fields, after the acquire */
		cpu_apply(&copy);
		__atomic_store_n(&done[t & mask], t, __ATOMIC_RELEASE);
		c->next = t + c->stride;
		n++;
	}
	return n;
}

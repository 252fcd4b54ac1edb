/*
 * twheel.c: the hashed timing wheel of twheel.h.  Each slot is a circular
 * doubly linked list through a sentinel, so a node leaves its slot without
 * knowing which one it is in.
 */
#include <stdlib.h>

#include "twheel.h"

static void unlink_node(struct sl_twheel_node *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n->prev = NULL;
}

int sl_twheel_init(struct sl_twheel *w, uint32_t n_slots, uint64_t tick_ns, uint64_t now_ns)
{
	if (!n_slots || (n_slots & (n_slots - 1)) || !tick_ns)
		return -1;
	w->slots = malloc(n_slots * sizeof(*w->slots));
	if (!w->slots)
		return -1;
	for (uint32_t i = 0; i < n_slots; i++)
		w->slots[i].next = w->slots[i].prev = &w->slots[i];
	w->mask = n_slots - 1;
	w->tick_ns = tick_ns;
	w->hand = now_ns / tick_ns;
	w->armed = 0;
	return 0;
}

void sl_twheel_fini(struct sl_twheel *w)
{
	free(w->slots);
	w->slots = NULL;
}

void sl_twheel_cancel(struct sl_twheel *w, struct sl_twheel_node *n)
{
	if (!sl_twheel_armed(n))
		return;
	unlink_node(n);
	w->armed--;
}

void sl_twheel_arm(struct sl_twheel *w, struct sl_twheel_node *n, uint64_t due_ns)
{
	uint64_t tick = due_ns / w->tick_ns;
	struct sl_twheel_node *head;

	sl_twheel_cancel(w, n);
	/* the past goes where the hand will look next */
	head = &w->slots[(tick > w->hand ? tick : w->hand) & w->mask];
	n->due_ns = due_ns;
	n->prev = head->prev;
	n->next = head;
	head->prev->next = n;
	head->prev = n;
	w->armed++;
}

/* Fire the nodes of one slot that are due; the others wait for a later turn. */
static uint32_t expire_slot(struct sl_twheel *w, struct sl_twheel_node *head, uint64_t now_ns,
			    void (*fire)(void *arg, struct sl_twheel_node *n), void *arg)
{
	uint32_t fired = 0;
	/* nodes that fire() arms into this same slot go behind a marker and wait */
	struct sl_twheel_node *last = head->prev;

	for (struct sl_twheel_node *n = head->next, *next; n != head; n = next) {
		bool was_last = n == last;
		next = n->next;
		if (n->due_ns <= now_ns) {
			sl_twheel_cancel(w, n);
			fire(arg, n);
			fired++;
		}
		if (was_last)
			break;
	}
	return fired;
}

uint32_t sl_twheel_expire(struct sl_twheel *w, uint64_t now_ns,
			  void (*fire)(void *arg, struct sl_twheel_node *n), void *arg)
{
	uint64_t now_tick = now_ns / w->tick_ns;
	uint32_t fired = 0;

	if (now_tick < w->hand)
		return 0;
	/* one full turn at most: after that every slot has been looked at */
	uint64_t steps = now_tick - w->hand > w->mask ? w->mask : now_tick - w->hand;
	for (uint64_t t = now_tick - steps; w->armed && t <= now_tick; t++)
		fired += expire_slot(w, &w->slots[t & w->mask], now_ns, fire, arg);
	w->hand = now_tick;
	return fired;
}

/*
 * twheel.h: a single-level hashed timing wheel, for pacing.  Timers are
 * intrusive nodes hashed by due tick into a power-of-two ring of slots; the
 * wheel's hand moves from the last tick it served to now, firing the nodes in
 * the slots it passes whose time has come.  A node due beyond one turn of the
 * wheel waits in its slot and is skipped until the hand comes round at the
 * right turn, so any delay works and arming, cancelling and firing are O(1)
 * per node (plus one step per slot the hand passes).  No allocation after
 * sl_twheel_init; time is whatever clock the caller reads (nanoseconds).
 */
#ifndef SLUICE_TWHEEL_H
#define SLUICE_TWHEEL_H

#include <stdbool.h>
#include <stdint.h>

struct sl_twheel_node {
	struct sl_twheel_node *next, *prev; /* the slot's circular list, NULL when idle */
	uint64_t due_ns;                    /* fires at the first expire at or after this */
};

struct sl_twheel {
	struct sl_twheel_node *slots; /* n_slots list heads (sentinels) */
	uint32_t mask;                /* n_slots - 1 */
	uint64_t tick_ns;             /* one slot's span */
	uint64_t hand;                /* tick served last: its slot is looked at again next time */
	uint32_t armed;               /* nodes on the wheel */
};

/* n_slots a power of two; the hand starts at now_ns.  0, or -1 (bad size, no memory). */
int sl_twheel_init(struct sl_twheel *w, uint32_t n_slots, uint64_t tick_ns, uint64_t now_ns);
void sl_twheel_fini(struct sl_twheel *w);

static inline bool sl_twheel_armed(const struct sl_twheel_node *n)
{
	return n->next != NULL;
}

/* (Re)arm n to fire at due_ns (a time already past fires at the next expire). */
void sl_twheel_arm(struct sl_twheel *w, struct sl_twheel_node *n, uint64_t due_ns);
/* Take n off the wheel; nothing if it is not armed. */
void sl_twheel_cancel(struct sl_twheel *w, struct sl_twheel_node *n);
/* Fire every node due at or before now_ns: each is taken off the wheel, then
 * fire(arg, node) runs (it may arm nodes, but cancel none other than the one
 * it was given).  Returns the nodes fired. */
uint32_t sl_twheel_expire(struct sl_twheel *w, uint64_t now_ns,
			  void (*fire)(void *arg, struct sl_twheel_node *n), void *arg);

#endif
